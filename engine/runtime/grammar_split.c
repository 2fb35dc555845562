/*
 * grammar_split.c - the matcher's fast path for states inside a wide code
 * point class (a JSON string's characters, `.`, an email's letters), where
 * the trie walk would visit most of a 128k vocabulary.
 *
 * From the key's state, the states after 1, 2, ... code points of the
 * class C form a chain, provided every state is uniform over C (each top
 * class holds all of C or none of it: then any code point of C moves it
 * the same way). A token made only of C's code points is then decided by
 * its length alone. The others (with a quote, a backslash, a code point
 * split across tokens: a few thousand) are stepped from the chain state
 * after their all-C prefix, sorted so that those sharing a tail prefix
 * share its steps. The per-class token tables come from the vocabulary
 * (grammar_vocab_class_table), built once per class per process.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar_matcher.h"
#include "grammar_vocab.h"

/* One whole code point over set `in` into `out` (cleared first). */
static void advance_cp(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t cp,
		       struct uvec *out, int *bottom)
{
	uint32_t i;

	out->n = 0;
	m->n_expand = 0;
	for (i = 0; i < n; i++) {
		const struct snode *nd;

		if (in[i] < 2)
			continue;
		nd = &m->node[in[i]];
		if (gclass_has(&m->g->cls[m->g->el[nd->pos].val], m->g->ranges, cp))
			gm_expand(m, nd->pos + 1, nd->parent, out, bottom);
	}
	gm_uniq(out);
}

/* ---- the fast path for string-like states ------------------------------------ */

#define RANGES_MAX 64
#define SPLIT_MIN_CP 16 /* classes at least this wide take the fast path */

/* Class `ci` as positive ranges (pairs) in out; how many, or -1 if more
 * than RANGES_MAX. */
static int class_positive(const struct grammar *g, uint32_t ci, uint32_t *out)
{
	const struct gclass *c = &g->cls[ci];
	const uint32_t *r = g->ranges + 2 * c->off;
	uint32_t i, next = 0;
	int n = 0;

	if (!c->neg) {
		if (c->n > RANGES_MAX)
			return -1;
		memcpy(out, r, 2 * (size_t)c->n * sizeof(*r));
		return (int)c->n;
	}
	for (i = 0; i <= c->n; i++) {
		uint32_t lo = i < c->n ? r[2 * i] : 0x110000;

		if (lo > next) {
			if (n == RANGES_MAX)
				return -1;
			out[2 * n] = next;
			out[2 * n + 1] = lo - 1;
			n++;
		}
		if (i < c->n)
			next = r[2 * i + 1] + 1;
	}
	return n;
}

/* 1 if class K holds all of C (positive ranges cr[0..2nc)), 0 if none of
 * it, -1 if part: a set is "uniform" over C when each of its tops is 1 or
 * 0, so any code point of C moves it the same way. */
static int class_relation(const struct grammar *g, uint32_t ki, const uint32_t *cr, int nc)
{
	uint32_t kr[2 * RANGES_MAX];
	int nk = class_positive(g, ki, kr), i, j, all = 1, none = 1;

	if (nk < 0)
		return -1;
	for (i = 0; i < nc; i++) {
		int inside = 0;

		for (j = 0; j < nk; j++) {
			if (kr[2 * j] <= cr[2 * i + 1] && kr[2 * j + 1] >= cr[2 * i])
				none = 0;
			if (kr[2 * j] <= cr[2 * i] && kr[2 * j + 1] >= cr[2 * i + 1])
				inside = 1;
		}
		if (!inside)
			all = 0;
	}
	return all ? 1 : none ? 0 : -1;
}

static int uniform(struct grammar_matcher *m, const uint32_t *set, uint32_t n, const uint32_t *cr,
		   int nc)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (set[i] >= 2 &&
		    class_relation(m->g, m->g->el[m->node[set[i]].pos].val, cr, nc) < 0)
			return 0;
	return 1;
}

enum { T_REJECT, T_ACCEPT, T_DEPEND };

/* One level of the walk over the other tokens' tails: the set after d
 * bytes, at lv_set[off .. off + n). */
struct tail_level {
	uint32_t off, n, cp, need;
	uint8_t seen, bottom;
};

/* Judges the other tokens (sorted by prefix length, then tail) from the
 * chain, reusing the levels a token's tail shares with the previous one,
 * as a walk over a trie of the tails would. */
static void judge_others(struct grammar_matcher *m, const struct gclass_table *t,
			 const struct uvec *chain, const uint32_t *off, const uint8_t *seen,
			 uint32_t len_chain, uint32_t *accbits, uint32_t *n_acc, struct uvec *dep)
{
	struct tail_level *lv = malloc((t->max_rest + 2) * sizeof(*lv));
	struct uvec ar = {0};
	uint32_t i, prev_k = UINT32_MAX, n_valid = 0;

	if (lv == NULL) {
		m->fault = EMBER_ENOMEM;
		return;
	}
	for (i = 0; i < t->n_other && !m->fault; i++) {
		uint32_t k = t->other_cp[i], id = (uint32_t)t->other[i], d = 0, j;
		const uint8_t *rest = t->tail + t->tail_off[i];
		uint32_t rlen = t->tail_off[i + 1] - t->tail_off[i];
		int fate;

		if (k >= len_chain || off[k + 1] == off[k]) {
			/* Nothing left after the prefix (the context, if reached,
			 * decides). */
			fate = seen[k < len_chain ? k : len_chain - 1] ? T_DEPEND : T_REJECT;
			prev_k = UINT32_MAX;
			goto emit;
		}
		if (k != prev_k) {
			prev_k = k;
			ar.n = 0;
			for (j = off[k]; j < off[k + 1]; j++)
				gm_uvec_push(m, &ar, chain->v[j]);
			lv[0] = (struct tail_level){0, ar.n, 0, 0, seen[k], 0};
			n_valid = 1;
		} else {
			/* The levels this tail shares with the previous one. */
			d = t->lcp[i] < n_valid - 1 ? t->lcp[i] : n_valid - 1;
		}
		ar.n = lv[d].off + lv[d].n;
		for (;;) {
			uint32_t cp = lv[d].cp, need = lv[d].need, base;
			int bottom = 0;

			if (lv[d].n == 0) {
				fate = d == rlen && lv[d].bottom ? T_ACCEPT
				       : lv[d].seen		  ? T_DEPEND
								  : T_REJECT;
				break;
			}
			if (d == rlen) {
				fate = T_ACCEPT;
				break;
			}
			gm_step_byte(m, ar.v + lv[d].off, lv[d].n, &cp, &need, rest[d], &m->tmp[0], &bottom);
			base = ar.n;
			for (j = 0; j < m->tmp[0].n; j++)
				gm_uvec_push(m, &ar, m->tmp[0].v[j]);
			lv[d + 1] = (struct tail_level){base, ar.n - base, cp, need,
							(uint8_t)(lv[d].seen | bottom), (uint8_t)bottom};
			d++;
		}
		n_valid = d + 1;
emit:
		if (fate == T_ACCEPT) {
			accbits[id >> 5] |= 1u << (id & 31);
			(*n_acc)++;
		} else if (fate == T_DEPEND) {
			gm_uvec_push(m, dep, id);
		}
	}
	free(ar.v);
	free(lv);
}

/*
 * The split of the vocabulary for `key` without the trie, when its top
 * class C is wide (a string's characters, `.`, an email's letters). If the
 * states reached by 0, 1, 2, ... code points of C are all uniform over C,
 * they form a chain that decides every token made only of C's code points
 * by its length alone; the other tokens (a quote, a backslash, a split
 * code point: a few thousand of 128k) are run from the chain state after
 * their all-C prefix. Returns 1 when done, 0 when it does not apply.
 */
int gm_split_by_class(struct grammar_matcher *m, uint32_t key, uint32_t *accbits,
			  uint32_t *n_acc, struct uvec *dep)
{
	const struct grammar *g = m->g;
	uint32_t cr[2 * RANGES_MAX], *off = NULL, i, c, alive, len_chain = 0;
	uint8_t *live = NULL, *seen = NULL;
	const struct gclass_table *t;
	struct uvec chain = {0};
	int nc, ok = 0;

	if ((nc = class_positive(g, g->el[m->node[key].pos].val, cr)) <= 0)
		return 0;
	/* Small classes (a literal's character, digits) prune the trie at
	 * its first level already; a table per class would cost more. */
	for (i = 0, len_chain = 0; i < (uint32_t)nc && len_chain < SPLIT_MIN_CP; i++)
		len_chain += cr[2 * i + 1] - cr[2 * i] + 1;
	if (len_chain < SPLIT_MIN_CP)
		return 0;
	len_chain = 0;
	t = grammar_vocab_class_table(m->v, cr, (uint32_t)nc);
	off = malloc((GVOCAB_RUN_MAX + 2) * sizeof(*off));
	live = calloc(GVOCAB_RUN_MAX + 2, 1);
	seen = calloc(GVOCAB_RUN_MAX + 2, 1);
	if (t == NULL || off == NULL || live == NULL || seen == NULL) {
		m->fault = EMBER_ENOMEM;
		goto out;
	}
	/* chain: state i at chain.v[off[i] .. off[i + 1]); live[i]: state i
	 * non-empty or the context reached by its last step; seen[i]: the
	 * context reached by some step up to i. */
	off[0] = 0;
	gm_uvec_push(m, &chain, key);
	off[1] = chain.n;
	live[0] = 1;
	for (i = 0; i < GVOCAB_RUN_MAX && off[i + 1] > off[i]; i++) {
		int bottom = 0;
		uint32_t j;

		if (!uniform(m, chain.v + off[i], off[i + 1] - off[i], cr, nc))
			goto out;
		advance_cp(m, chain.v + off[i], off[i + 1] - off[i], cr[0], &m->tmp[0], &bottom);
		for (j = 0; j < m->tmp[0].n; j++)
			gm_uvec_push(m, &chain, m->tmp[0].v[j]);
		off[i + 2] = chain.n;
		live[i + 1] = m->tmp[0].n > 0 || bottom;
		seen[i + 1] = seen[i] | bottom;
		if (m->fault)
			goto out;
	}
	len_chain = i + 1; /* states 0 .. i exist; beyond: empty */
	/* Run tokens: those of 1 .. alive code points at once from a ready
	 * bit set, then the rest by length, skipping rejected lengths. */
	for (alive = 0; alive < GVOCAB_CUM && alive + 1 < len_chain && live[alive + 1]; alive++)
		;
	if (alive > 0) {
		const uint32_t *bits = t->cum + (size_t)(alive - 1) * t->words;

		for (i = 0; i < t->words; i++)
			accbits[i] |= bits[i];
		*n_acc += t->bucket[alive + 1] - t->bucket[1];
	}
	for (c = alive + 1; c <= GVOCAB_RUN_MAX; c++) {
		int s = c < len_chain ? seen[c] : seen[len_chain - 1];
		int acc = c < len_chain && live[c];

		if (!acc && !s)
			continue;
		for (i = t->bucket[c]; i < t->bucket[c + 1]; i++) {
			uint32_t id = (uint32_t)t->run[i];

			if (acc) {
				accbits[id >> 5] |= 1u << (id & 31);
				(*n_acc)++;
			} else {
				gm_uvec_push(m, dep, id);
			}
		}
	}
	judge_others(m, t, &chain, off, seen, len_chain, accbits, n_acc, dep);
	ok = !m->fault;
out:
	free(chain.v);
	free(off);
	free(live);
	free(seen);
	return ok;
}

