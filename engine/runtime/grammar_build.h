/*
 * grammar_build.h - the GBNF compiler's rules under construction, shared
 * by grammar_gbnf.c (the parser) and grammar_rules.c (the checks, the
 * flattening into struct grammar, and its release). Not public.
 */
#ifndef EMBER_GRAMMAR_BUILD_H
#define EMBER_GRAMMAR_BUILD_H

#include <stdint.h>

#include "grammar_impl.h"

struct bseq {
	struct gelem *e;
	uint32_t n, cap;
};

struct brule {
	char *name; /* owned; NULL for generated rules */
	struct bseq *alt;
	uint32_t n_alt, cap_alt;
	int defined;
};

struct builder {
	struct brule *r;
	uint32_t n_r, cap_r;
	uint32_t *ranges; /* lo, hi pairs */
	uint32_t n_ranges, cap_ranges;
	struct gclass *cls;
	uint32_t n_cls, cap_cls;
	const char *p, *end;
	int line;
	int nest; /* open ( groups: parsing recurses on them */
	uint32_t *names; /* (NAME_SLOTS) rule index + 1 by name hash; 0 free */
	char *err;
};

/* Sets the out-of-memory message; returns EMBER_ENOMEM. */
int gbnf_nomem(struct builder *b);
/* Every referenced rule defined, no left recursion: 0 or EMBER_EINVAL. */
int gbnf_check_rules(struct builder *b);
/* The rules into g's flat arrays (takes the ranges and classes). */
int gbnf_flatten(struct builder *b, struct grammar *g);
/* Releases what the builder holds (not the struct). */
void gbnf_builder_free(struct builder *b);

#endif
