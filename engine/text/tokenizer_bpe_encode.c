/*
 * tokenizer_bpe_encode.c - byte-level BPE encoding and pieces (see
 * tokenizer_bpe.h): lenient UTF-8 made canonical, the pre-tokenizer's
 * regex splits, lowest-rank-first merging, the byte fallback, and undoing
 * the bytes-to-unicode mapping for pieces. Loading is tokenizer_bpe.c.
 */
#include "tokenizer_bpe_impl.h"

#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tokenizer_impl.h"
#include "utf8.h"

/* ---- UTF-8 ------------------------------------------------------------------ */

/* 1 if `s` is strict UTF-8 (what PCRE2 accepts and re-encoding keeps). */
static int utf8_is_canonical(const uint8_t *s, size_t n)
{
	char tmp[4];
	size_t i = 0, adv;

	while (i < n) {
		uint32_t cp;

		if (s[i] < 0x80) {
			i++;
			continue;
		}
		cp = utf8_decode_lenient(s + i, n - i, &adv);
		if ((cp == 0xFFFD && adv == 1) || (cp >= 0xD800 && cp <= 0xDFFF) || utf8_encode(cp, tmp) != adv)
			return 0;
		i += adv;
	}
	return 1;
}

/*
 * Builds what the reference tokenizes: `canon`, the text re-encoded code
 * point by code point, and `subject`, the same bytes for PCRE2 except that
 * surrogates (which it refuses) become U+E000, a private-use character of
 * the same length and class. Both hold up to 3 * n bytes. Returns the
 * length.
 */
static size_t utf8_canonicalize(const uint8_t *s, size_t n, char *canon, char *subject)
{
	size_t i = 0, o = 0, adv, k;

	while (i < n) {
		uint32_t cp = utf8_decode_lenient(s + i, n - i, &adv);

		k = utf8_encode(cp, canon + o);
		if (cp >= 0xD800 && cp <= 0xDFFF)
			utf8_encode(0xE000, subject + o);
		else
			memcpy(subject + o, canon + o, k);
		o += k;
		i += adv;
	}
	return o;
}

/* ---- encoding ------------------------------------------------------------------ */

struct bpe_frag {
	size_t off, len; /* bytes of the canonical text */
};

struct bpe_sym {
	int32_t prev, next; /* -1 = none */
	uint32_t off, len;  /* in the word's mapped text; len 0 = merged away */
};

struct bpe_pair {
	int32_t rank;
	int32_t left, right; /* symbols */
	uint32_t len;        /* left.len + right.len when queued */
};

/* Scratch of one bpe_encode call. */
struct bpe_work {
	const struct bpe *b;
	const char *canon;
	char *mapped;           /* (2 * max_word) the word after bytes-to-unicode */
	struct bpe_sym *syms;   /* (max_word) */
	struct bpe_pair *heap;  /* (3 * max_word) min-heap by (rank, left) */
	size_t n_heap;
	int32_t *ids;
	size_t cap;
	int64_t n_ids;
};

static int frag_split(const struct bpe *b, int r, const char *subject, const struct bpe_frag *in,
		      size_t n_in, struct bpe_frag *out, size_t *n_out, pcre2_match_data *md)
{
	size_t f, n = 0;

	for (f = 0; f < n_in; f++) {
		const char *s = subject + in[f].off;
		size_t len = in[f].len, pos = 0, last = 0;

		while (pos < len) {
			int rc = pcre2_match(b->regex[r], (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
			PCRE2_SIZE *ov;

			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0)
				return EMBER_ERANGE;
			ov = pcre2_get_ovector_pointer(md);
			if (ov[1] <= ov[0]) {
				/* No pattern here matches empty; step over a character
				 * so that one never loops. */
				pos = ov[0] + 1;
				while (pos < len && ((uint8_t)s[pos] & 0xC0) == 0x80)
					pos++;
				continue;
			}
			if (ov[0] > last)
				out[n++] = (struct bpe_frag){in[f].off + last, ov[0] - last};
			out[n++] = (struct bpe_frag){in[f].off + ov[0], ov[1] - ov[0]};
			last = pos = ov[1];
		}
		if (last < len)
			out[n++] = (struct bpe_frag){in[f].off + last, len - last};
	}
	*n_out = n;
	return 0;
}

static void emit(struct bpe_work *w, int32_t id)
{
	if ((size_t)w->n_ids < w->cap)
		w->ids[w->n_ids] = id;
	w->n_ids++;
}

static int pair_less(const struct bpe_pair *a, const struct bpe_pair *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct bpe_work *w, struct bpe_pair p)
{
	size_t i = w->n_heap++;

	while (i > 0 && pair_less(&p, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = p;
}

static struct bpe_pair heap_pop(struct bpe_work *w)
{
	struct bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, n = w->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!pair_less(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n > 0)
		w->heap[i] = last;
	return top;
}

static void queue_pair(struct bpe_work *w, int32_t left, int32_t right)
{
	const struct bpe_sym *l, *r;
	int32_t rank;

	if (left < 0 || right < 0)
		return;
	l = &w->syms[left];
	r = &w->syms[right];
	rank = bpe_find_rank(w->b, w->mapped + l->off, l->len, w->mapped + r->off, r->len);
	if (rank >= 0)
		heap_push(w, (struct bpe_pair){rank, left, right, l->len + r->len});
}

/* Emits the token of one merged symbol, or its single bytes that are
 * tokens (the reference's fallback; other bytes are dropped). */
static void emit_symbol(struct bpe_work *w, const char *text, size_t len)
{
	int32_t id = bpe_find_token(w->b, text, len);
	size_t i;

	if (id >= 0) {
		emit(w, id);
		return;
	}
	for (i = 0; i < len; i++) {
		id = w->b->spm ? w->b->byte_tok[(uint8_t)text[i]] : bpe_find_token(w->b, text + i, 1);
		if (id >= 0)
			emit(w, id);
	}
}

/* spm: one symbol per UTF-8 character of the raw word (valid: canonical). */
static int32_t spm_symbols(struct bpe_work *w, const uint8_t *s, uint32_t len, uint32_t *off)
{
	int32_t n = 0;
	uint32_t i = 0;

	memcpy(w->mapped, s, len);
	while (i < len) {
		uint32_t k = s[i] < 0x80 ? 1 : s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : 4;
		if (k > len - i)
			k = len - i;
		w->syms[n] = (struct bpe_sym){n - 1, -1, i, k};
		if (n > 0)
			w->syms[n - 1].next = n;
		n++;
		i += k;
	}
	*off = len;
	return n;
}

static void encode_word(struct bpe_work *w, const struct bpe_frag *word)
{
	const uint8_t *s = (const uint8_t *)w->canon + word->off;
	uint32_t off = 0;
	int32_t i, n = (int32_t)word->len;

	if (w->b->spm) {
		n = spm_symbols(w, s, word->len, &off);
		/* a run of newlines that is a token is that token (llama.cpp) */
		if (s[0] == '\n') {
			int32_t id = bpe_find_token(w->b, (const char *)s, word->len);
			if (id >= 0) {
				emit(w, id);
				return;
			}
		}
	}
	for (i = 0; i < n && !w->b->spm; i++) {
		uint8_t k = w->b->byte_utf8_len[s[i]];

		memcpy(w->mapped + off, w->b->byte_utf8[s[i]], k);
		w->syms[i] = (struct bpe_sym){i - 1, i + 1 < n ? i + 1 : -1, off, k};
		off += k;
	}
	if (w->b->pre->ignore_merges) {
		int32_t id = bpe_find_token(w->b, w->mapped, off);

		if (id >= 0) {
			emit(w, id);
			return;
		}
	}
	w->n_heap = 0;
	for (i = 1; i < n; i++)
		queue_pair(w, i - 1, i);
	while (w->n_heap > 0) {
		struct bpe_pair p = heap_pop(w);
		struct bpe_sym *l = &w->syms[p.left], *r = &w->syms[p.right];

		/* Stale: one side was merged into something else since. */
		if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.len)
			continue;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->syms[r->next].prev = p.left;
		queue_pair(w, l->prev, p.left);
		queue_pair(w, p.left, l->next);
	}
	for (i = 0; i >= 0; i = w->syms[i].next)
		emit_symbol(w, w->mapped + w->syms[i].off, w->syms[i].len);
}

int64_t bpe_encode(const struct bpe *b, const char *text, size_t len, int32_t *ids, size_t cap)
{
	struct bpe_work w = {.b = b, .ids = ids, .cap = cap};
	char *canon_buf = NULL, *escaped = NULL;
	const char *subject = text;
	struct bpe_frag *frags[2] = {NULL, NULL};
	pcre2_match_data *md = NULL;
	size_t n, n_frag, i, max_word = 0;
	int r, cur = 0, rc = EMBER_ENOMEM;

	if (len == 0)
		return 0;
	if (len > SIZE_MAX / 18)
		return EMBER_ERANGE;
	if (b->spm && memchr(text, ' ', len)) {
		/* SentencePiece's normalizer: every space is U+2581 "▁" */
		size_t k = 0;
		if ((escaped = malloc(3 * len)) == NULL)
			return EMBER_ENOMEM;
		for (i = 0; i < len; i++) {
			if (text[i] == ' ') {
				memcpy(escaped + k, "\xe2\x96\x81", 3);
				k += 3;
			} else {
				escaped[k++] = text[i];
			}
		}
		text = escaped;
		len = k;
	}
	subject = text;
	w.canon = text;
	n = len;
	if (!utf8_is_canonical((const uint8_t *)text, len)) {
		canon_buf = malloc(6 * len);
		if (canon_buf == NULL)
			goto fail;
		n = utf8_canonicalize((const uint8_t *)text, len, canon_buf, canon_buf + 3 * len);
		w.canon = canon_buf;
		subject = canon_buf + 3 * len;
	}
	/* A split never yields more pieces than bytes. */
	frags[0] = malloc(n * sizeof(*frags[0]));
	frags[1] = malloc(n * sizeof(*frags[1]));
	md = pcre2_match_data_create(1, NULL);
	if (frags[0] == NULL || frags[1] == NULL || md == NULL)
		goto fail;
	frags[0][0] = (struct bpe_frag){0, n};
	n_frag = 1;
	for (r = 0; r < b->n_regex; r++) {
		rc = frag_split(b, r, subject, frags[cur], n_frag, frags[cur ^ 1], &n_frag, md);
		if (rc != 0)
			goto fail;
		cur ^= 1;
	}
	for (i = 0; i < n_frag; i++)
		if (frags[cur][i].len > max_word)
			max_word = frags[cur][i].len;
	rc = EMBER_ENOMEM;
	if (max_word > INT32_MAX / 3)
		goto fail;
	w.mapped = malloc(2 * max_word);
	w.syms = malloc(max_word * sizeof(*w.syms));
	w.heap = malloc(3 * max_word * sizeof(*w.heap));
	if (w.mapped == NULL || w.syms == NULL || w.heap == NULL)
		goto fail;
	for (i = 0; i < n_frag; i++)
		encode_word(&w, &frags[cur][i]);
	rc = 0;
fail:
	free(w.heap);
	free(w.syms);
	free(w.mapped);
	pcre2_match_data_free(md);
	free(frags[1]);
	free(frags[0]);
	free(canon_buf);
	free(escaped);
	return rc != 0 ? rc : w.n_ids;
}

/* ---- decoding ------------------------------------------------------------------ */

int bpe_piece(const struct bpe *b, int32_t id, char *buf, size_t cap)
{
	const struct bpe_span *t;
	size_t i = 0, n = 0, adv;

	if (id < 0 || id >= b->n_vocab || b->toks[id].len > INT32_MAX)
		return EMBER_ERANGE;
	t = &b->toks[id];
	if (b->spm) { /* raw UTF-8, "▁" is a space, <0xAB> is that byte */
		int byte = tok_parse_byte_piece((struct gguf_str){.len = t->len, .ptr = t->ptr});
		if (byte >= 0) {
			if (cap > 0)
				buf[0] = (char)byte;
			return 1;
		}
		while (i < t->len) {
			int sp = t->len - i >= 3 && memcmp(t->ptr + i, "\xe2\x96\x81", 3) == 0;
			if (n < cap)
				buf[n] = sp ? ' ' : t->ptr[i];
			n++;
			i += sp ? 3 : 1;
		}
		return (int)n;
	}
	while (i < t->len) {
		uint32_t cp = utf8_decode_lenient((const uint8_t *)t->ptr + i, t->len - i, &adv);

		/* Only the canonical spelling of a mapped character stands for
		 * a byte; anything else is copied through. */
		if (cp < BPE_N_MAPPED && b->cp_byte[cp] >= 0 && adv == (cp < 0x80 ? 1u : 2u)) {
			if (n < cap)
				buf[n] = (char)b->cp_byte[cp];
			n++;
		} else {
			size_t k;

			for (k = 0; k < adv; k++, n++)
				if (n < cap)
					buf[n] = t->ptr[i + k];
		}
		i += adv;
	}
	return (int)n;
}
