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
#include "grammar_matcher.h"
#include "grammar_vocab.h"

#define MAX_EXPAND 100000 /* expansions per code point before giving up */
#define CACHE_MAX 512 /* cached keys per matcher (at 128k: up to 8 MiB) */
#define MAX_EXPAND_DEPTH 2000 /* nested alternatives opened at once (stack) */

/* ---- small vectors and the node table -------------------------------------- */

int gm_uvec_push(struct grammar_matcher *m, struct uvec *u, uint32_t x)
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
void gm_expand(struct grammar_matcher *m, uint32_t pos, uint32_t parent, struct uvec *out,
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
			gm_uvec_push(m, out, intern(m, pos, parent));
			return;
		}
		if (e->type == GE_END) {
			if (parent == N_ROOT) {
				gm_uvec_push(m, out, N_ROOT);
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
		if (g->rule[e->val].n_alt > 1 && m->depth >= MAX_EXPAND_DEPTH) {
			m->fault = EMBER_ERANGE; /* a chain of rules too long to open */
			return;
		}
		m->depth++;
		for (a = 0; a + 1 < g->rule[e->val].n_alt; a++)
			gm_expand(m, g->alts[g->rule[e->val].first_alt + a], cont, out, bottom);
		m->depth--;
		pos = g->alts[g->rule[e->val].first_alt + a];
		parent = cont;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void gm_uniq(struct uvec *u)
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
void gm_step_byte(struct grammar_matcher *m, const uint32_t *in, uint32_t n, uint32_t *cp,
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
				gm_uvec_push(m, out, in[i]);
		} else if (gclass_has(cls, g->ranges, c)) {
			gm_expand(m, nd->pos + 1, nd->parent, out, bottom);
		}
	}
	gm_uniq(out);
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

		gm_step_byte(m, cur < 0 ? in : m->tmp[cur].v, cur < 0 ? n : m->tmp[cur].n, cp, need,
			  s[i], &m->tmp[nx], &bottom);
		cur = nx;
		if (m->tmp[cur].n == 0)
			return -1;
	}
	return cur;
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
			gm_uvec_push(m, to, t);
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

		gm_step_byte(m, m->arena.v + off, n, &ccp, &cneed, ch->byte, &m->tmp[0], &bottom);
		for (i = 0; i < m->tmp[0].n; i++)
			gm_uvec_push(m, &m->arena, m->tmp[0].v[i]);
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
		gm_uvec_push(m, &m->arena, in[i]);
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

	if (m->n_cache >= CACHE_MAX) {
		/* Bounded repetitions make a key per position, each up to
		 * n_vocab / 8 bytes: a long generation starts afresh rather
		 * than grow without bound. */
		for (i = 0; i < m->ccap; i++) {
			free(m->cache[i].acc);
			free(m->cache[i].dep);
		}
		memset(m->cache, 0, m->ccap * sizeof(*m->cache));
		m->n_cache = 0;
	}
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
	if (gm_split_by_class(m, key, accbits, &n_acc, &dep)) {
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
		gm_expand(m, g->alts[g->rule[g->root].first_alt + a], N_ROOT, &m->cur, &bottom);
	gm_uniq(&m->cur);
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
		if (gm_uvec_push(m, &m->cur, m->tmp[r].v[i]) != 0)
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
