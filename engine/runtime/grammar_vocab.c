/*
 * grammar_vocab.c - the vocabulary as a byte trie for the grammar mask
 * (grammar.h). Tokens are sorted by their bytes; a trie node covers the
 * contiguous run of sorted tokens sharing its prefix, those ending exactly
 * there first, and its children are contiguous in the node array, so a
 * walk needs no pointers and a whole subtree is one range of tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar_vocab.h"
#include "tokenizer.h"

static int cmp_tok(const void *a, const void *b, void *arg)
{
	const struct grammar_vocab *v = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t lx = v->len[x], ly = v->len[y], n = lx < ly ? lx : ly;
	int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], n);

	if (c != 0)
		return c;
	return lx < ly ? -1 : lx > ly ? 1 : (x < y ? -1 : 1);
}

/* Fills node `ni` for sorted[lo, hi), all sharing `depth` bytes; appends
 * its children. Returns 0 or -1 (out of memory). */
static int build(struct grammar_vocab *v, uint32_t ni, uint32_t lo, uint32_t hi, uint32_t depth,
		 uint32_t *cap)
{
	uint32_t i = lo, n_child = 0, first, c;

	while (i < hi && v->len[v->sorted[i]] == depth)
		i++;
	v->node[ni].lo = lo;
	v->node[ni].hi = hi;
	v->node[ni].n_end = i - lo;
	for (c = i; c < hi;) {
		uint8_t byte = v->bytes[v->off[v->sorted[c]] + depth];

		while (c < hi && v->bytes[v->off[v->sorted[c]] + depth] == byte)
			c++;
		n_child++;
	}
	if (v->n_node + n_child > *cap) {
		uint32_t nc = *cap * 2 + n_child;
		struct gtnode *nn = realloc(v->node, (size_t)nc * sizeof(*nn));

		if (nn == NULL)
			return -1;
		v->node = nn;
		*cap = nc;
	}
	first = v->n_node;
	v->node[ni].child = first;
	v->node[ni].n_child = n_child;
	v->n_node += n_child;
	for (c = i, n_child = 0; c < hi; n_child++) {
		uint32_t s = c;
		uint8_t byte = v->bytes[v->off[v->sorted[c]] + depth];

		while (c < hi && v->bytes[v->off[v->sorted[c]] + depth] == byte)
			c++;
		v->node[first + n_child].byte = byte;
		if (build(v, first + n_child, s, c, depth + 1, cap) != 0)
			return -1;
	}
	return 0;
}

int grammar_vocab_new(struct grammar_vocab **out, int32_t n_vocab, const char *const *pieces,
		      const uint32_t *lens, const uint8_t *eog, char *err)
{
	struct grammar_vocab *v;
	uint64_t total = 0;
	uint32_t cap = 1024;
	int32_t i;

	*out = NULL;
	if (n_vocab <= 0)
		return ember_seterr(err, EMBER_EINVAL, "grammar vocabulary: no tokens");
	for (i = 0; i < n_vocab; i++)
		total += lens[i];
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		goto nomem;
	pthread_mutex_init(&v->lock, NULL);
	v->n_vocab = n_vocab;
	v->bytes = malloc(total + 1);
	v->off = malloc((size_t)n_vocab * sizeof(*v->off));
	v->len = malloc((size_t)n_vocab * sizeof(*v->len));
	v->eog = calloc((size_t)n_vocab, 1);
	v->sorted = malloc((size_t)n_vocab * sizeof(*v->sorted));
	v->node = malloc(cap * sizeof(*v->node));
	if (!v->bytes || !v->off || !v->len || !v->eog || !v->sorted || !v->node)
		goto nomem;
	total = 0;
	for (i = 0; i < n_vocab; i++) {
		v->off[i] = total;
		v->len[i] = lens[i];
		if (lens[i])
			memcpy(v->bytes + total, pieces[i], lens[i]);
		total += lens[i];
		v->eog[i] = eog != NULL && eog[i];
		if (v->eog[i])
			v->n_eog++;
		else if (lens[i] > 0)
			v->sorted[v->n_sorted++] = i;
	}
	v->eog_ids = malloc((size_t)(v->n_eog + 1) * sizeof(*v->eog_ids));
	if (v->eog_ids == NULL)
		goto nomem;
	v->n_eog = 0;
	for (i = 0; i < n_vocab; i++)
		if (v->eog[i])
			v->eog_ids[v->n_eog++] = i;
	qsort_r(v->sorted, v->n_sorted, sizeof(*v->sorted), cmp_tok, v);
	memset(&v->node[0], 0, sizeof(v->node[0]));
	v->n_node = 1;
	if (build(v, 0, 0, v->n_sorted, 0, &cap) != 0)
		goto nomem;
	*out = v;
	return 0;
nomem:
	grammar_vocab_free(v);
	return ember_seterr(err, EMBER_ENOMEM, "grammar vocabulary: out of memory");
}

int grammar_vocab_from_tokenizer(struct grammar_vocab **out, const struct tokenizer *tok, char *err)
{
	int32_t n = tokenizer_n_vocab(tok), i;
	char **pieces = calloc((size_t)n, sizeof(*pieces));
	uint32_t *lens = calloc((size_t)n, sizeof(*lens));
	uint8_t *eog = calloc((size_t)n, 1);
	char buf[256];
	int rc = 0;

	if (!pieces || !lens || !eog) {
		rc = ember_seterr(err, EMBER_ENOMEM, "grammar vocabulary: out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		int len = tokenizer_piece(tok, i, 0, buf, sizeof(buf));

		eog[i] = (uint8_t)(tokenizer_is_eog(tok, i) == 1);
		if (len <= 0)
			continue;
		pieces[i] = malloc((size_t)len);
		if (pieces[i] == NULL) {
			rc = ember_seterr(err, EMBER_ENOMEM, "grammar vocabulary: out of memory");
			goto out;
		}
		/* a piece longer than buf is asked for again, into its own */
		if ((size_t)len > sizeof(buf))
			len = tokenizer_piece(tok, i, 0, pieces[i], (size_t)len);
		else
			memcpy(pieces[i], buf, (size_t)len);
		lens[i] = len > 0 ? (uint32_t)len : 0;
	}
	rc = grammar_vocab_new(out, n, (const char *const *)pieces, lens, eog, err);
out:
	if (pieces)
		for (i = 0; i < n; i++)
			free(pieces[i]);
	free(pieces);
	free(lens);
	free(eog);
	return rc;
}

/* A class table and everything it owns (table_build(); fields it did
 * not get to are NULL). */
static void table_free(struct gclass_table *t)
{
	free(t->ranges);
	free(t->run);
	free(t->run_cp);
	free(t->cum);
	free(t->other);
	free(t->other_cp);
	free(t->other_off);
	free(t->tail);
	free(t->tail_off);
	free(t->lcp);
	free(t);
}

void grammar_vocab_free(struct grammar_vocab *v)
{
	if (v == NULL)
		return;
	while (v->tables) {
		struct gclass_table *t = v->tables;

		v->tables = t->next;
		table_free(t);
	}
	pthread_mutex_destroy(&v->lock);
	free(v->bytes);
	free(v->off);
	free(v->len);
	free(v->eog);
	free(v->eog_ids);
	free(v->sorted);
	free(v->node);
	free(v);
}

/* Whether cp lies in the positive ranges r[0 .. 2n). */
static int in_ranges(const uint32_t *r, uint32_t n, uint32_t cp)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (cp < r[2 * mid])
			hi = mid;
		else if (cp > r[2 * mid + 1])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

/* Decodes one whole, valid code point at s[0..n); its length, or 0. */
static uint32_t next_cp(const uint8_t *s, uint32_t n, uint32_t *cp)
{
	uint32_t len, i, c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, c = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, c = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, c = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

struct other_sort {
	const struct grammar_vocab *v;
	const struct gclass_table *t;
};

static int cmp_other(const void *a, const void *b, void *arg)
{
	const struct other_sort *o = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct gclass_table *t = o->t;
	int32_t ix = t->other[x], iy = t->other[y];
	uint32_t lx = o->v->len[ix] - t->other_off[x], ly = o->v->len[iy] - t->other_off[y];
	int c;

	if (t->other_cp[x] != t->other_cp[y])
		return t->other_cp[x] < t->other_cp[y] ? -1 : 1;
	c = memcmp(o->v->bytes + o->v->off[ix] + t->other_off[x],
		   o->v->bytes + o->v->off[iy] + t->other_off[y], lx < ly ? lx : ly);
	return c ? c : lx < ly ? -1 : lx > ly;
}

/* Orders the other tokens by (prefix code points, tail bytes). */
static int sort_others(const struct grammar_vocab *v, struct gclass_table *t)
{
	struct other_sort o = {v, t};
	uint32_t *idx = malloc((t->n_other + 1) * sizeof(*idx)), i;
	int32_t *id = malloc((t->n_other + 1) * sizeof(*id));
	uint8_t *cp = malloc(t->n_other + 1);
	uint16_t *off = malloc((t->n_other + 1) * sizeof(*off));
	int rc = -1;

	if (!idx || !id || !cp || !off)
		goto out;
	for (i = 0; i < t->n_other; i++)
		idx[i] = i;
	qsort_r(idx, t->n_other, sizeof(*idx), cmp_other, &o);
	for (i = 0; i < t->n_other; i++) {
		id[i] = t->other[idx[i]];
		cp[i] = t->other_cp[idx[i]];
		off[i] = t->other_off[idx[i]];
		if (v->len[id[i]] - off[i] > t->max_rest)
			t->max_rest = v->len[id[i]] - off[i];
	}
	memcpy(t->other, id, t->n_other * sizeof(*id));
	memcpy(t->other_cp, cp, t->n_other);
	memcpy(t->other_off, off, t->n_other * sizeof(*off));
	/* The tails side by side, and what each shares with the one before:
	 * the matcher then reads them in order and compares nothing. */
	t->tail_off = malloc((t->n_other + 1) * sizeof(*t->tail_off));
	t->lcp = calloc(t->n_other + 1, sizeof(*t->lcp));
	if (!t->tail_off || !t->lcp)
		goto out;
	t->tail_off[0] = 0;
	for (i = 0; i < t->n_other; i++)
		t->tail_off[i + 1] = t->tail_off[i] + (v->len[t->other[i]] - t->other_off[i]);
	t->tail = malloc((size_t)t->tail_off[t->n_other] + 1);
	if (t->tail == NULL)
		goto out;
	for (i = 0; i < t->n_other; i++) {
		const uint8_t *s = v->bytes + v->off[t->other[i]] + t->other_off[i];
		uint32_t n = t->tail_off[i + 1] - t->tail_off[i], k = 0;

		memcpy(t->tail + t->tail_off[i], s, n);
		if (i > 0 && t->other_cp[i] == t->other_cp[i - 1]) {
			const uint8_t *p = t->tail + t->tail_off[i - 1];
			uint32_t pn = t->tail_off[i] - t->tail_off[i - 1];

			while (k < n && k < pn && k < UINT16_MAX && p[k] == s[k])
				k++;
		}
		t->lcp[i] = (uint16_t)k;
	}
	rc = 0;
out:
	free(idx);
	free(id);
	free(cp);
	free(off);
	return rc;
}

/* Orders the run tokens by code points (a counting sort) and makes the
 * cumulative bit sets. */
static int bucket_runs(const struct grammar_vocab *v, struct gclass_table *t)
{
	int32_t *run = malloc((t->n_run + 1) * sizeof(*run));
	uint32_t pos[GVOCAB_RUN_MAX + 2] = {0}, i, c, k;

	t->words = ((uint32_t)v->n_vocab + 31) / 32;
	t->cum = calloc((size_t)GVOCAB_CUM * t->words, sizeof(*t->cum));
	if (run == NULL || t->cum == NULL) {
		free(run);
		return -1;
	}
	for (i = 0; i < t->n_run; i++)
		t->bucket[t->run_cp[i] + 1]++;
	for (c = 1; c <= GVOCAB_RUN_MAX + 1; c++)
		t->bucket[c] += t->bucket[c - 1];
	memcpy(pos, t->bucket, sizeof(pos));
	for (i = 0; i < t->n_run; i++)
		run[pos[t->run_cp[i]]++] = t->run[i];
	memcpy(t->run, run, t->n_run * sizeof(*run));
	for (i = 0; i < t->n_run; i++)
		t->run_cp[i] = 0;
	for (c = 0; c <= GVOCAB_RUN_MAX; c++)
		for (i = t->bucket[c]; i < t->bucket[c + 1]; i++)
			t->run_cp[i] = (uint8_t)c;
	for (k = 1; k <= GVOCAB_CUM; k++) {
		uint32_t *bits = t->cum + (size_t)(k - 1) * t->words;

		if (k > 1)
			memcpy(bits, bits - t->words, t->words * sizeof(*bits));
		for (i = t->bucket[k]; i < t->bucket[k + 1]; i++)
			bits[t->run[i] >> 5] |= 1u << (t->run[i] & 31);
	}
	free(run);
	return 0;
}

static struct gclass_table *table_build(const struct grammar_vocab *v, const uint32_t *ranges,
					uint32_t n)
{
	struct gclass_table *t = calloc(1, sizeof(*t));
	uint32_t i, cap = v->n_sorted;

	if (t == NULL)
		return NULL;
	t->ranges = malloc((2 * (size_t)n + 1) * sizeof(*t->ranges));
	t->run = malloc(cap * sizeof(*t->run));
	t->run_cp = malloc(cap);
	t->other = malloc(cap * sizeof(*t->other));
	t->other_cp = malloc(cap);
	t->other_off = malloc(cap * sizeof(*t->other_off));
	if (!t->ranges || !t->run || !t->run_cp || !t->other || !t->other_cp || !t->other_off)
		goto fail;
	memcpy(t->ranges, ranges, 2 * (size_t)n * sizeof(*ranges));
	t->n_ranges = n;
	for (i = 0; i < v->n_sorted; i++) {
		int32_t id = v->sorted[i];
		const uint8_t *s = v->bytes + v->off[id];
		uint32_t len = v->len[id], off = 0, ncp = 0, cp, k;

		while (off < len && ncp < GVOCAB_RUN_MAX && off < UINT16_MAX) {
			k = next_cp(s + off, len - off, &cp);
			if (k == 0 || !in_ranges(ranges, n, cp))
				break;
			off += k;
			ncp++;
		}
		if (off == len) {
			t->run[t->n_run] = id;
			t->run_cp[t->n_run++] = (uint8_t)ncp;
		} else {
			t->other[t->n_other] = id;
			t->other_cp[t->n_other] = (uint8_t)ncp;
			t->other_off[t->n_other++] = (uint16_t)off;
		}
	}
	if (sort_others(v, t) != 0 || bucket_runs(v, t) != 0)
		goto fail;
	return t;
fail:
	table_free(t);
	return NULL;
}

const struct gclass_table *grammar_vocab_class_table(const struct grammar_vocab *cv,
						     const uint32_t *ranges, uint32_t n)
{
	/* The tables are a cache: the vocabulary's contents never change. */
	struct grammar_vocab *v = (struct grammar_vocab *)cv;
	struct gclass_table *t;

	pthread_mutex_lock(&v->lock);
	for (t = v->tables; t; t = t->next)
		if (t->n_ranges == n && !memcmp(t->ranges, ranges, 2 * (size_t)n * sizeof(*ranges)))
			break;
	if (t == NULL && (t = table_build(v, ranges, n)) != NULL) {
		t->next = v->tables;
		v->tables = t;
	}
	pthread_mutex_unlock(&v->lock);
	return t;
}

int32_t grammar_vocab_n(const struct grammar_vocab *v)
{
	return v->n_vocab;
}
