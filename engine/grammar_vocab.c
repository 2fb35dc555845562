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
		if ((size_t)len > sizeof(buf)) {
			pieces[i] = malloc((size_t)len);
			if (pieces[i] == NULL) {
				rc = ember_seterr(err, EMBER_ENOMEM, "grammar vocabulary: out of memory");
				goto out;
			}
			len = tokenizer_piece(tok, i, 0, pieces[i], (size_t)len);
		} else {
			pieces[i] = malloc((size_t)len);
			if (pieces[i] == NULL) {
				rc = ember_seterr(err, EMBER_ENOMEM, "grammar vocabulary: out of memory");
				goto out;
			}
			memcpy(pieces[i], buf, (size_t)len);
		}
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

void grammar_vocab_free(struct grammar_vocab *v)
{
	if (v == NULL)
		return;
	free(v->bytes);
	free(v->off);
	free(v->len);
	free(v->eog);
	free(v->eog_ids);
	free(v->sorted);
	free(v->node);
	free(v);
}

int32_t grammar_vocab_n(const struct grammar_vocab *v)
{
	return v->n_vocab;
}
