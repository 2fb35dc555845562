/*
 * grammar_matcher.h - the matcher's state, shared by grammar.c (stacks,
 * trie walk, cache, public API) and grammar_split.c (the wide-class fast
 * path). Not public; see grammar.c's top comment for the representation.
 */
#ifndef EMBER_GRAMMAR_MATCHER_H
#define EMBER_GRAMMAR_MATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar_impl.h"

#define N_ROOT 0u   /* the empty stack: in a set, the grammar has accepted */
#define N_BOTTOM 1u /* the unknown context under a cache key's frames */

struct snode {
	uint32_t pos, parent;
};

struct uvec {
	uint32_t *v;
	uint32_t n, cap;
};

/* A cached split of the vocabulary for one key. */
struct centry {
	uint32_t key;
	uint32_t *acc;    /* accepted whatever the context: ids, or a bit set */
	uint32_t n_acc;
	int acc_bits;     /* acc is a (n_vocab) bit set */
	uint32_t *dep;    /* (n_dep) ids whose fate needs the context */
	uint32_t n_dep;
};

struct grammar_matcher {
	const struct grammar *g;
	const struct grammar_vocab *v;
	struct snode *node;   /* (n_node) */
	uint32_t n_node, cap_node;
	uint32_t *htab;       /* (hcap) node ids by (pos, parent); 0 = free */
	uint32_t hcap;
	struct uvec cur;      /* the current set */
	uint32_t u8cp, u8need; /* a code point split by the last token: its bits
				* so far; bytes still due | its length << 4 */
	bool ended;           /* an end-of-generation token was accepted */
	struct uvec arena;    /* trie walks: one set per depth, stacked */
	struct uvec tmp[2];
	struct centry *cache; /* (ccap) open addressing on key; key 0 = free */
	uint32_t n_cache, ccap;
	uint32_t n_expand;
	uint32_t depth;       /* gm_expand's recursion, bounded */
	int fault;            /* EMBER_E* set deep inside an expansion */
};

/* Appends x (0, or -1 with m->fault set). */
int gm_uvec_push(struct grammar_matcher *m, struct uvec *u, uint32_t x);
/* Adds the stacks position `pos` over `parent` stands for to `out`. */
void gm_expand(struct grammar_matcher *m, uint32_t pos, uint32_t parent, struct uvec *out,
	       int *bottom);
/* Sorts and deduplicates a set. */
void gm_uniq(struct uvec *u);
/* One byte over set in[0..n) into out (see grammar.c). */
void gm_step_byte(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t *cp,
		  uint32_t *need, uint8_t byte, struct uvec *out, int *bottom);
/* The split for cache key `key` by its top class (grammar_split.c): 1 and
 * the accepted tokens as bits in accbits (zeroed, n_vocab bits), their
 * count in *n_acc, the context-dependent ones in dep; 0 when it does not
 * apply (or m->fault). */
int gm_split_by_class(struct grammar_matcher *m, uint32_t key, uint32_t *accbits,
		      uint32_t *n_acc, struct uvec *dep);

#endif
