/*
 * grammar_vocab.h - the layout of struct grammar_vocab (grammar.h), shared
 * by grammar_vocab.c, which builds it, and grammar.c, which walks it. Not
 * public.
 */
#ifndef EMBER_GRAMMAR_VOCAB_H
#define EMBER_GRAMMAR_VOCAB_H

#include <pthread.h>
#include <stdint.h>

#include "grammar.h"

/* A trie node: the tokens sorted[lo, hi) share its prefix; the first n_end
 * of them end here; children are node[child .. child + n_child). */
struct gtnode {
	uint32_t child, n_child;
	uint32_t lo, hi, n_end;
	uint8_t byte; /* the edge from the parent */
};

#define GVOCAB_RUN_MAX 255 /* code points a class table counts per token */
#define GVOCAB_CUM 16      /* run lengths with a ready bit set (see cum) */

/*
 * The vocabulary split by one code point class C (a matcher's fast path
 * for string-like states, grammar.c): "run" tokens are whole code points
 * all in C (count: how many, <= GVOCAB_RUN_MAX); every other token is
 * listed with the code points and bytes of its longest all-C prefix.
 */
struct gclass_table {
	uint32_t *ranges;   /* (2 * n_ranges) C's positive ranges, the key */
	uint32_t n_ranges;
	int32_t *run;       /* (n_run) run tokens, by code points (ascending) */
	uint8_t *run_cp;    /* (n_run) their code points */
	uint32_t n_run;
	uint32_t bucket[GVOCAB_RUN_MAX + 2]; /* run[bucket[c] .. bucket[c + 1]):
				 * the run tokens of c code points */
	uint32_t *cum;      /* (GVOCAB_CUM, words) bit set k - 1: the run tokens of
			     * 1 .. k code points, for a chain alive that far */
	uint32_t words;     /* (n_vocab + 31) / 32 */
	int32_t *other;     /* (n_other) the rest */
	uint8_t *other_cp;  /* (n_other) code points of the all-C prefix */
	uint16_t *other_off; /* (n_other) its bytes */
	uint32_t n_other;    /* sorted by (other_cp, the bytes after the prefix),
			      * so that a walk over them shares prefixes */
	uint32_t max_rest;   /* the longest such tail, in bytes */
	uint8_t *tail;       /* the tails, concatenated in that order */
	uint32_t *tail_off;  /* (n_other + 1) where each starts */
	uint16_t *lcp;       /* (n_other) bytes shared with the previous tail
			      * when both have the same other_cp, else 0 */
	struct gclass_table *next;
};

/* The table for positive ranges `ranges` (n pairs), built on first use
 * and kept with the vocabulary (any thread: a mutex guards the list).
 * NULL when out of memory. */
const struct gclass_table *grammar_vocab_class_table(const struct grammar_vocab *v,
						     const uint32_t *ranges, uint32_t n);

struct grammar_vocab {
	int32_t n_vocab;
	uint8_t *bytes;    /* every token's bytes, concatenated */
	uint64_t *off;     /* (n_vocab) */
	uint32_t *len;     /* (n_vocab) */
	uint8_t *eog;      /* (n_vocab) 1: ends generation */
	int32_t *eog_ids;  /* (n_eog) */
	int32_t n_eog;
	int32_t *sorted;   /* (n_sorted) tokens with bytes, not EOG, by bytes */
	uint32_t n_sorted;
	struct gtnode *node; /* (n_node); node 0 is the root (empty prefix) */
	uint32_t n_node;
	pthread_mutex_t lock;             /* guards tables */
	struct gclass_table *tables;      /* built on demand, owned */
};

#endif
