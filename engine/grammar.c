/*
 * grammar.c - the matcher: pushdown stacks over a compiled grammar, and
 * the per-step token mask (see grammar.h for the scheme).
 *
 * Stacks are hash-consed nodes (pos, parent): `pos` is an element index;
 * the top node of a live stack sits on a GE_CHARS element, every node below
 * on the element to resume at when the rule above it ends. Node 0 is the
 * empty stack (in a set: the grammar has accepted); node 1 is the unknown
 * context below a cache key's frames. A set of stacks is a sorted array of
 * node ids.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar_impl.h"
#include "grammar_vocab.h"

#define N_ROOT 0u
#define N_BOTTOM 1u
#define MAX_EXPAND 100000 /* expansions per code point before giving up */

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
	int fault;            /* EMBER_E* set deep inside an expansion */
};

/* ---- small vectors and the node table -------------------------------------- */

static int uvec_push(struct grammar_matcher *m, struct uvec *u, uint32_t x)
{
	if (u->n == u->cap) {
		uint32_t c = u->cap ? u->cap * 2 : 64;
		uint32_t *nv = realloc(u->v, (size_t)c * sizeof(*nv));

		if (nv == NULL) {
			m->fault = EMBER_ENOMEM;
			return -1;
		}
		u->v = nv;
		u->cap = c;
	}
	u->v[u->n++] = x;
	return 0;
}

static uint32_t hash2(uint32_t a, uint32_t b)
{
	uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32);
}

static int table_grow(struct grammar_matcher *m)
{
	uint32_t nc = m->hcap ? m->hcap * 2 : 4096, i;
	uint32_t *nt = calloc(nc, sizeof(*nt));

	if (nt == NULL)
		return -1;
	for (i = 2; i < m->n_node; i++) {
		uint32_t h = hash2(m->node[i].pos, m->node[i].parent) & (nc - 1);

		while (nt[h])
			h = (h + 1) & (nc - 1);
		nt[h] = i;
	}
	free(m->htab);
	m->htab = nt;
	m->hcap = nc;
	return 0;
}

/* The id of node (pos, parent), made if new; N_ROOT on failure (fault set). */
static uint32_t intern(struct grammar_matcher *m, uint32_t pos, uint32_t parent)
{
	uint32_t h, id;

	if (2 * (m->n_node + 1) > m->hcap && table_grow(m) != 0)
		goto nomem;
	h = hash2(pos, parent) & (m->hcap - 1);
	while ((id = m->htab[h]) != 0) {
		if (m->node[id].pos == pos && m->node[id].parent == parent)
			return id;
		h = (h + 1) & (m->hcap - 1);
	}
	if (m->n_node == m->cap_node) {
		uint32_t c = m->cap_node * 2;
		struct snode *nn = realloc(m->node, (size_t)c * sizeof(*nn));

		if (nn == NULL)
			goto nomem;
		m->node = nn;
		m->cap_node = c;
	}
	id = m->n_node++;
	m->node[id].pos = pos;
	m->node[id].parent = parent;
	m->htab[h] = id;
	return id;
nomem:
	m->fault = EMBER_ENOMEM;
	return N_ROOT;
}

/* ---- advancing the stacks ------------------------------------------------- */

/* Adds to `out` every stack that position `pos` over `parent` can stand for
 * once its rule references are opened and its ended rules popped. Reaching
 * the unknown context sets *bottom. */
static void expand(struct grammar_matcher *m, uint32_t pos, uint32_t parent, struct uvec *out,
		   int *bottom)
{
	const struct grammar *g = m->g;

	for (;;) {
		const struct gelem *e = &g->el[pos];
		uint32_t a, cont;

		if (m->fault || ++m->n_expand > MAX_EXPAND) {
			if (!m->fault)
				m->fault = EMBER_ERANGE;
			return;
		}
		if (e->type == GE_CHARS) {
			uvec_push(m, out, intern(m, pos, parent));
			return;
		}
		if (e->type == GE_END) {
			if (parent == N_ROOT) {
				uvec_push(m, out, N_ROOT);
				return;
			}
			if (parent == N_BOTTOM) {
				*bottom = 1;
				return;
			}
			pos = m->node[parent].pos;
			parent = m->node[parent].parent;
			continue;
		}
		/* GE_REF: a reference in tail position pushes nothing, so
		 * right recursion (X*) keeps the stack flat. */
		cont = g->el[pos + 1].type == GE_END ? parent : intern(m, pos + 1, parent);
		for (a = 0; a + 1 < g->rule[e->val].n_alt; a++)
			expand(m, g->alts[g->rule[e->val].first_alt + a], cont, out, bottom);
		pos = g->alts[g->rule[e->val].first_alt + a];
		parent = cont;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void uniq(struct uvec *u)
{
	uint32_t i, n = 0;

	if (u->n < 2)
		return;
	qsort(u->v, u->n, sizeof(*u->v), cmp_u32);
	for (i = 0; i < u->n; i++)
		if (n == 0 || u->v[i] != u->v[n - 1])
			u->v[n++] = u->v[i];
	u->n = n;
}

/*
 * One byte over set `in` (n ids) with the pending code point (*cp, *need),
 * into `out` (cleared first). Bytes of an unfinished code point only drop
 * the stacks whose class cannot hold any code point it may become.
 */
static void step_byte(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t *cp,
		      uint32_t *need, uint8_t byte, struct uvec *out, int *bottom)
{
	static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	const struct gclass *cls;
	const struct snode *nd;
	const struct grammar *g = m->g;
	uint32_t i, c = *cp, k = *need & 15, len = *need >> 4, lo = 0, hi = 0;

	out->n = 0;
	if (k == 0) {
		if (byte < 0x80)
			c = byte, len = 1;
		else if (byte >= 0xc2 && byte <= 0xdf) /* c0, c1: always overlong */
			c = byte & 0x1f, k = 1, len = 2;
		else if ((byte & 0xf0) == 0xe0)
			c = byte & 0x0f, k = 2, len = 3;
		else if (byte >= 0xf0 && byte <= 0xf4)
			c = byte & 0x07, k = 3, len = 4;
		else
			return;
	} else {
		if ((byte & 0xc0) != 0x80)
			return;
		c = (c << 6) | (byte & 0x3f);
		k--;
	}
	if (k > 0) {
		/* The code points this prefix may still become, minus overlong
		 * forms and those past U+10FFFF; a prefix that can only become
		 * a surrogate is invalid already. */
		lo = c << (6 * k);
		hi = lo | ((1u << (6 * k)) - 1);
		if (lo < min_cp[len])
			lo = min_cp[len];
		if (hi > 0x10ffff)
			hi = 0x10ffff;
		if (lo > hi || (lo >= 0xd800 && hi <= 0xdfff))
			return;
	} else if (c < min_cp[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
		return;
	}
	*cp = c;
	*need = k ? k | len << 4 : 0;
	m->n_expand = 0;
	for (i = 0; i < n; i++) {
		if (in[i] < 2)
			continue;
		nd = &m->node[in[i]];
		cls = &g->cls[g->el[nd->pos].val];
		if (k > 0) {
			if (gclass_meets(cls, g->ranges, lo, hi))
				uvec_push(m, out, in[i]);
		} else if (gclass_has(cls, g->ranges, c)) {
			expand(m, nd->pos + 1, nd->parent, out, bottom);
		}
	}
	uniq(out);
}

/* Runs bytes s[0..len) from set `in` with a clean code point state; the
 * result in m->tmp[i] for the returned i, or -1 when nothing is left. */
static int run_bytes(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t *cp,
		     uint32_t *need, const uint8_t *s, size_t len)
{
	int cur = -1, bottom = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		int nx = cur == 0 ? 1 : 0;

		step_byte(m, cur < 0 ? in : m->tmp[cur].v, cur < 0 ? n : m->tmp[cur].n, cp, need,
			  s[i], &m->tmp[nx], &bottom);
		cur = nx;
		if (m->tmp[cur].n == 0)
			return -1;
	}
	return cur;
}

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
			expand(m, nd->pos + 1, nd->parent, out, bottom);
	}
	uniq(out);
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
	const uint8_t *prev = NULL;
	uint32_t i, prev_len = 0, prev_k = UINT32_MAX, n_valid = 0;

	if (lv == NULL) {
		m->fault = EMBER_ENOMEM;
		return;
	}
	for (i = 0; i < t->n_other && !m->fault; i++) {
		uint32_t k = t->other_cp[i], id = (uint32_t)t->other[i], d = 0, j;
		const uint8_t *rest = m->v->bytes + m->v->off[id] + t->other_off[i];
		uint32_t rlen = m->v->len[id] - t->other_off[i];
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
				uvec_push(m, &ar, chain->v[j]);
			lv[0] = (struct tail_level){0, ar.n, 0, 0, seen[k], 0};
			n_valid = 1;
			prev_len = 0;
		}
		while (d < prev_len && d < rlen && d + 1 < n_valid && prev[d] == rest[d])
			d++;
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
			step_byte(m, ar.v + lv[d].off, lv[d].n, &cp, &need, rest[d], &m->tmp[0], &bottom);
			base = ar.n;
			for (j = 0; j < m->tmp[0].n; j++)
				uvec_push(m, &ar, m->tmp[0].v[j]);
			lv[d + 1] = (struct tail_level){base, ar.n - base, cp, need,
							(uint8_t)(lv[d].seen | bottom), (uint8_t)bottom};
			d++;
		}
		n_valid = d + 1;
		prev = rest;
		prev_len = rlen;
emit:
		if (fate == T_ACCEPT) {
			accbits[id >> 5] |= 1u << (id & 31);
			(*n_acc)++;
		} else if (fate == T_DEPEND) {
			uvec_push(m, dep, id);
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
static int split_by_class(struct grammar_matcher *m, uint32_t key, uint32_t *accbits,
			  uint32_t *n_acc, struct uvec *dep)
{
	const struct grammar *g = m->g;
	uint32_t cr[2 * RANGES_MAX], *off = NULL, i, len_chain = 0;
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
	uvec_push(m, &chain, key);
	off[1] = chain.n;
	live[0] = 1;
	for (i = 0; i < GVOCAB_RUN_MAX && off[i + 1] > off[i]; i++) {
		int bottom = 0;
		uint32_t j;

		if (!uniform(m, chain.v + off[i], off[i + 1] - off[i], cr, nc))
			goto out;
		advance_cp(m, chain.v + off[i], off[i + 1] - off[i], cr[0], &m->tmp[0], &bottom);
		for (j = 0; j < m->tmp[0].n; j++)
			uvec_push(m, &chain, m->tmp[0].v[j]);
		off[i + 2] = chain.n;
		live[i + 1] = m->tmp[0].n > 0 || bottom;
		seen[i + 1] = seen[i] | bottom;
		if (m->fault)
			goto out;
	}
	len_chain = i + 1; /* states 0 .. i exist; beyond: empty */
	for (i = 0; i < t->n_run; i++) {
		uint32_t k = t->run_cp[i], id = (uint32_t)t->run[i];
		int s = k < len_chain ? seen[k] : seen[len_chain - 1];

		if (k < len_chain && live[k]) {
			accbits[id >> 5] |= 1u << (id & 31);
			(*n_acc)++;
		} else if (s) {
			uvec_push(m, dep, id);
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

/* ---- the mask ---------------------------------------------------------------- */

struct walk_sink {
	uint32_t *bits;    /* accepted tokens as bits (a plain walk), or */
	struct uvec *acc;  /* accepted ids (a key walk) */
	struct uvec *dep;  /* context-dependent ids (a key walk) */
};

static void sink_range(struct grammar_matcher *m, struct walk_sink *k, struct uvec *to,
		       uint32_t lo, uint32_t hi)
{
	uint32_t i;

	for (i = lo; i < hi; i++) {
		uint32_t t = (uint32_t)m->v->sorted[i];

		if (to == NULL)
			k->bits[t >> 5] |= 1u << (t & 31);
		else
			uvec_push(m, to, t);
	}
}

/*
 * Walks trie node `ni` reached with the set at arena[off, off + n), the
 * code point state (cp, need), `bottom_now` (the last byte reached the
 * unknown context) and `bottom_seen` (some byte on the way did).
 */
static void walk(struct grammar_matcher *m, uint32_t ni, uint32_t off, uint32_t n, uint32_t cp,
		 uint32_t need, int bottom_now, int bottom_seen, struct walk_sink *k)
{
	const struct gtnode *nd = &m->v->node[ni];
	uint32_t c;

	if (m->fault)
		return;
	if (n > 0 || bottom_now)
		sink_range(m, k, k->acc, nd->lo, nd->lo + nd->n_end);
	else if (bottom_seen)
		sink_range(m, k, k->dep, nd->lo, nd->lo + nd->n_end);
	if (n == 0) {
		if (bottom_seen)
			sink_range(m, k, k->dep, nd->lo + nd->n_end, nd->hi);
		return;
	}
	for (c = 0; c < nd->n_child && !m->fault; c++) {
		const struct gtnode *ch = &m->v->node[nd->child + c];
		uint32_t ccp = cp, cneed = need, base = m->arena.n, i;
		int bottom = 0;

		step_byte(m, m->arena.v + off, n, &ccp, &cneed, ch->byte, &m->tmp[0], &bottom);
		for (i = 0; i < m->tmp[0].n; i++)
			uvec_push(m, &m->arena, m->tmp[0].v[i]);
		walk(m, nd->child + c, base, m->arena.n - base, ccp, cneed, bottom,
		     bottom_seen || bottom, k);
		m->arena.n = base;
		nd = &m->v->node[ni];
	}
}

/* Walks the whole vocabulary from set `in`. */
static void walk_from(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t cp,
		      uint32_t need, struct walk_sink *k)
{
	uint32_t i;

	m->arena.n = 0;
	for (i = 0; i < n; i++)
		uvec_push(m, &m->arena, in[i]);
	walk(m, 0, 0, n, cp, need, 0, 0, k);
}

/* The key of stack `id`: its top GRAMMAR_KEY_DEPTH frames over the unknown
 * context, or the stack itself when it is no deeper. */
static uint32_t key_of(struct grammar_matcher *m, uint32_t id)
{
	uint32_t pos[GRAMMAR_KEY_DEPTH], d, x = id;

	for (d = 0; d < GRAMMAR_KEY_DEPTH; d++) {
		if (x == N_ROOT)
			return id;
		pos[d] = m->node[x].pos;
		x = m->node[x].parent;
	}
	if (x == N_ROOT)
		return id;
	x = N_BOTTOM;
	while (d-- > 0)
		x = intern(m, pos[d], x);
	return x;
}

static struct centry *cache_get(struct grammar_matcher *m, uint32_t key)
{
	uint32_t h, i;
	struct centry *e;
	struct uvec acc = {0}, dep = {0};
	struct walk_sink sink = {.acc = &acc, .dep = &dep};
	uint32_t words = ((uint32_t)m->v->n_vocab + 31) / 32, n_acc = 0, *accbits = NULL;

	if (2 * (m->n_cache + 1) > m->ccap) {
		uint32_t nc = m->ccap ? m->ccap * 2 : 256;
		struct centry *nt = calloc(nc, sizeof(*nt));

		if (nt == NULL)
			goto nomem;
		for (i = 0; i < m->ccap; i++) {
			if (m->cache[i].key == 0)
				continue;
			h = hash2(m->cache[i].key, 0) & (nc - 1);
			while (nt[h].key)
				h = (h + 1) & (nc - 1);
			nt[h] = m->cache[i];
		}
		free(m->cache);
		m->cache = nt;
		m->ccap = nc;
	}
	h = hash2(key, 0) & (m->ccap - 1);
	while (m->cache[h].key != 0) {
		if (m->cache[h].key == key)
			return &m->cache[h];
		h = (h + 1) & (m->ccap - 1);
	}
	accbits = calloc(words, sizeof(uint32_t));
	if (accbits == NULL)
		goto nomem;
	if (split_by_class(m, key, accbits, &n_acc, &dep)) {
		e = &m->cache[h];
		e->key = key;
		e->dep = dep.v;
		e->n_dep = dep.n;
		e->n_acc = n_acc;
		e->acc = accbits;
		e->acc_bits = 1;
		m->n_cache++;
		return e;
	}
	free(accbits);
	accbits = NULL;
	if (m->fault)
		goto fail;
	dep.n = 0;
	walk_from(m, &key, 1, 0, 0, &sink);
	if (m->fault)
		goto fail;
	e = &m->cache[h];
	e->key = key;
	e->dep = dep.v;
	e->n_dep = dep.n;
	e->n_acc = acc.n;
	if ((uint64_t)acc.n * 32 > (uint64_t)m->v->n_vocab) {
		e->acc = calloc(words, sizeof(uint32_t));
		if (e->acc == NULL) {
			e->key = 0;
			goto nomem;
		}
		for (i = 0; i < acc.n; i++)
			e->acc[acc.v[i] >> 5] |= 1u << (acc.v[i] & 31);
		e->acc_bits = 1;
		free(acc.v);
	} else {
		e->acc = acc.v;
	}
	m->n_cache++;
	return e;
nomem:
	m->fault = EMBER_ENOMEM;
fail:
	free(accbits);
	free(acc.v);
	free(dep.v);
	return NULL;
}

static int fault_msg(struct grammar_matcher *m, char *err)
{
	int rc = m->fault;

	m->fault = 0;
	if (rc == EMBER_ENOMEM)
		return ember_seterr(err, rc, "grammar: out of memory");
	return ember_seterr(err, EMBER_ERANGE, "grammar: too many ways to continue (ambiguous grammar)");
}

/* ---- public ---------------------------------------------------------------- */

int grammar_matcher_new(struct grammar_matcher **out, const struct grammar *g,
			const struct grammar_vocab *v, char *err)
{
	struct grammar_matcher *m = calloc(1, sizeof(*m));
	uint32_t a;
	int bottom = 0;

	*out = NULL;
	if (m == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "grammar: out of memory");
	m->g = g;
	m->v = v;
	m->cap_node = 1024;
	m->node = malloc(m->cap_node * sizeof(*m->node));
	if (m->node == NULL || table_grow(m) != 0) {
		grammar_matcher_free(m);
		return ember_seterr(err, EMBER_ENOMEM, "grammar: out of memory");
	}
	m->n_node = 2; /* N_ROOT, N_BOTTOM */
	for (a = 0; a < g->rule[g->root].n_alt; a++)
		expand(m, g->alts[g->rule[g->root].first_alt + a], N_ROOT, &m->cur, &bottom);
	uniq(&m->cur);
	if (m->fault) {
		int rc = fault_msg(m, err);

		grammar_matcher_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void grammar_matcher_free(struct grammar_matcher *m)
{
	uint32_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->ccap; i++) {
		free(m->cache[i].acc);
		free(m->cache[i].dep);
	}
	free(m->cache);
	free(m->node);
	free(m->htab);
	free(m->cur.v);
	free(m->arena.v);
	free(m->tmp[0].v);
	free(m->tmp[1].v);
	free(m);
}

bool grammar_matcher_accepting(const struct grammar_matcher *m)
{
	return m->ended || (m->u8need == 0 && m->cur.n > 0 && m->cur.v[0] == N_ROOT);
}

bool grammar_matcher_done(const struct grammar_matcher *m)
{
	return m->ended || (m->u8need == 0 && m->cur.n == 1 && m->cur.v[0] == N_ROOT);
}

/* Whether token t may follow the current set (a full check). */
static int token_ok(struct grammar_matcher *m, uint32_t t)
{
	uint32_t cp = m->u8cp, need = m->u8need;

	return run_bytes(m, m->cur.v, m->cur.n, &cp, &need, m->v->bytes + m->v->off[t],
			 m->v->len[t]) >= 0;
}

int64_t grammar_matcher_fill_mask(struct grammar_matcher *m, uint32_t *mask, char *err)
{
	uint32_t words = ((uint32_t)m->v->n_vocab + 31) / 32, i, j;
	int64_t count = 0;

	memset(mask, 0, words * sizeof(uint32_t));
	if (m->ended)
		return ember_seterr(err, EMBER_ERANGE, "grammar: generation already ended");
	if (m->u8need > 0) {
		struct walk_sink sink = {.bits = mask};

		walk_from(m, m->cur.v, m->cur.n, m->u8cp, m->u8need, &sink);
	} else {
		for (i = 0; i < m->cur.n && !m->fault; i++) {
			struct centry *e;

			if (m->cur.v[i] == N_ROOT) {
				for (j = 0; j < (uint32_t)m->v->n_eog; j++)
					mask[m->v->eog_ids[j] >> 5] |= 1u << (m->v->eog_ids[j] & 31);
				continue;
			}
			e = cache_get(m, key_of(m, m->cur.v[i]));
			if (e == NULL)
				break;
			if (e->acc_bits)
				for (j = 0; j < words; j++)
					mask[j] |= e->acc[j];
			else
				for (j = 0; j < e->n_acc; j++)
					mask[e->acc[j] >> 5] |= 1u << (e->acc[j] & 31);
			for (j = 0; j < e->n_dep; j++) {
				uint32_t t = e->dep[j];

				if (!(mask[t >> 5] >> (t & 31) & 1) && token_ok(m, t))
					mask[t >> 5] |= 1u << (t & 31);
			}
		}
	}
	if (m->fault)
		return fault_msg(m, err);
	for (j = 0; j < words; j++)
		count += __builtin_popcount(mask[j]);
	if (count == 0)
		return ember_seterr(err, EMBER_ERANGE,
				    "grammar: dead end, no token of the vocabulary can continue the text");
	return count;
}

/* Advances the current set over bytes s[0..len), or leaves it unchanged. */
static int advance(struct grammar_matcher *m, const uint8_t *s, size_t len, char *err)
{
	uint32_t cp = m->u8cp, need = m->u8need;
	int r;

	if (m->ended)
		return ember_seterr(err, EMBER_EINVAL, "grammar: text after the end of generation");
	if (len == 0)
		return 0;
	r = run_bytes(m, m->cur.v, m->cur.n, &cp, &need, s, len);
	if (m->fault)
		return fault_msg(m, err);
	if (r < 0)
		return ember_seterr(err, EMBER_EINVAL, "grammar: the text does not match the grammar");
	m->cur.n = 0;
	for (uint32_t i = 0; i < m->tmp[r].n; i++)
		if (uvec_push(m, &m->cur, m->tmp[r].v[i]) != 0)
			return fault_msg(m, err);
	m->u8cp = cp;
	m->u8need = need;
	return 0;
}

int grammar_matcher_accept(struct grammar_matcher *m, int32_t token, char *err)
{
	if (token < 0 || token >= m->v->n_vocab)
		return ember_seterr(err, EMBER_EINVAL, "grammar: token %d out of range", (int)token);
	if (m->v->eog[token]) {
		if (!grammar_matcher_accepting(m))
			return ember_seterr(err, EMBER_EINVAL,
					    "grammar: end of generation before the grammar is complete");
		m->ended = true;
		return 0;
	}
	if (m->v->len[token] == 0)
		return ember_seterr(err, EMBER_EINVAL, "grammar: token %d has no text", (int)token);
	return advance(m, m->v->bytes + m->v->off[token], m->v->len[token], err);
}

int grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t len, char *err)
{
	return advance(m, (const uint8_t *)s, len, err);
}

bool grammar_matches(const struct grammar *g, const char *text, size_t len)
{
	struct grammar_matcher *m;
	bool ok;

	if (grammar_matcher_new(&m, g, NULL, NULL) != 0)
		return false;
	ok = grammar_matcher_accept_bytes(m, text, len, NULL) == 0 && grammar_matcher_accepting(m);
	grammar_matcher_free(m);
	return ok;
}
