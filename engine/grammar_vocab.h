/*
 * grammar_vocab.h - the layout of struct grammar_vocab (grammar.h), shared
 * by grammar_vocab.c, which builds it, and grammar.c, which walks it. Not
 * public.
 */
#ifndef EMBER_GRAMMAR_VOCAB_H
#define EMBER_GRAMMAR_VOCAB_H

#include <stdint.h>

#include "grammar.h"

/* A trie node: the tokens sorted[lo, hi) share its prefix; the first n_end
 * of them end here; children are node[child .. child + n_child). */
struct gtnode {
	uint32_t child, n_child;
	uint32_t lo, hi, n_end;
	uint8_t byte; /* the edge from the parent */
};

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
};

#endif
