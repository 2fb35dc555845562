/*
 * grammar_impl.h - the compiled grammar's layout, shared by the GBNF
 * compiler (grammar_gbnf.c) and the matcher (grammar.c). Not public.
 *
 * Every rule is a list of alternatives; an alternative is a run of elements
 * in one flat array, ended by GE_END. A position is an index into that
 * array; parse stacks hold positions.
 */
#ifndef EMBER_GRAMMAR_IMPL_H
#define EMBER_GRAMMAR_IMPL_H

#include <stdint.h>

#include "grammar.h"

enum { GE_END = 0, GE_CHARS = 1, GE_REF = 2 };

struct gelem {
	uint32_t type; /* GE_* */
	uint32_t val;  /* GE_CHARS: class index; GE_REF: rule index */
};

/* A code point class: sorted, merged, disjoint [lo, hi] ranges, possibly
 * negated; ASCII answered by a bitmap. */
struct gclass {
	uint32_t off, n; /* ranges[2*off .. 2*(off+n)) */
	uint32_t neg;
	uint32_t ascii[4];
};

struct grule {
	uint32_t first_alt, n_alt; /* into alts[] */
};

struct grammar {
	struct gelem *el;   /* (n_el) */
	uint32_t n_el;
	uint32_t *alts;     /* (n_alts) start positions */
	uint32_t n_alts;
	struct grule *rule; /* (n_rule) */
	uint32_t n_rule;
	uint32_t *ranges;   /* (2 * n_ranges) lo, hi */
	uint32_t n_ranges;
	struct gclass *cls; /* (n_cls) */
	uint32_t n_cls;
	uint32_t root;
};

static inline int gclass_has(const struct gclass *c, const uint32_t *ranges, uint32_t cp)
{
	uint32_t i;
	int in = 0;

	if (cp < 128)
		return (c->ascii[cp >> 5] >> (cp & 31)) & 1;
	for (i = 0; i < c->n; i++) {
		if (cp < ranges[2 * (c->off + i)])
			break;
		if (cp <= ranges[2 * (c->off + i) + 1]) {
			in = 1;
			break;
		}
	}
	return in ^ (int)c->neg;
}

/* Whether some code point in [lo, hi] is in the class. */
static inline int gclass_meets(const struct gclass *c, const uint32_t *ranges, uint32_t lo,
			       uint32_t hi)
{
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		uint32_t a = ranges[2 * (c->off + i)], b = ranges[2 * (c->off + i) + 1];

		if (c->neg) {
			if (a <= lo && b >= hi)
				return 0; /* one merged range covers it all */
		} else if (a <= hi && b >= lo) {
			return 1;
		}
	}
	return (int)c->neg;
}

#endif
