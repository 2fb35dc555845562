/*
 * test_tokenizer_bpe.c - byte-level BPE against the reference vectors in
 * ../shared/tokenizer-vectors (every case must match exactly and decode
 * back to its text), plus small generated vocabularies for merge order,
 * pre-tokenizer types, fallbacks and file validation.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "tokenizer_bpe.h"
#include "testutil.h"

#define VEC_DIR "../shared/tokenizer-vectors/"
#define SEP "\n__ggml_vocab_test__\n"
#define MAX_CASES 128
#define MAX_IDS 4096

/* ---- reference vectors --------------------------------------------------- */

struct cases {
	char *inp;                 /* file contents, texts are spans of it */
	const char *text[MAX_CASES];
	size_t len[MAX_CASES];
	int32_t *ids[MAX_CASES];   /* expected ids, NULL when no .out */
	size_t n_ids[MAX_CASES];
	size_t n;
};

/* .inp holds the texts, each followed by SEP; .out one line of ids per text
 * (" 1 2 3", empty for an empty text). */
static void cases_load(struct cases *c, const char *vocab, int with_out)
{
	char path[256], *out, *line;
	size_t len, pos = 0, i;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), VEC_DIR "%s.inp", vocab);
	c->inp = test_read_file(path, &len);
	ck_assert_msg(c->inp != NULL, "cannot read %s", path);
	while (pos < len) {
		char *end = strstr(c->inp + pos, SEP);

		ck_assert_msg(end != NULL, "%s: text %zu lacks its separator", path, c->n);
		ck_assert_uint_lt(c->n, MAX_CASES);
		c->text[c->n] = c->inp + pos;
		c->len[c->n] = (size_t)(end - (c->inp + pos));
		c->n++;
		pos = (size_t)(end - c->inp) + strlen(SEP);
	}
	if (!with_out)
		return;
	snprintf(path, sizeof(path), VEC_DIR "%s.out", vocab);
	out = test_read_file(path, &len);
	ck_assert_msg(out != NULL, "cannot read %s", path);
	line = out;
	for (i = 0; i < c->n; i++) {
		char *nl = strchr(line, '\n');
		char *p = line, *q;

		ck_assert_msg(nl != NULL, "%s: %zu lines for %zu texts", path, i, c->n);
		*nl = '\0';
		c->ids[i] = malloc(MAX_IDS * sizeof(int32_t));
		ck_assert_ptr_nonnull(c->ids[i]);
		for (;;) {
			long v = strtol(p, &q, 10);

			if (q == p)
				break;
			ck_assert_uint_lt(c->n_ids[i], MAX_IDS);
			c->ids[i][c->n_ids[i]++] = (int32_t)v;
			p = q;
		}
		line = nl + 1;
	}
	free(out);
}

static void cases_free(struct cases *c)
{
	size_t i;

	for (i = 0; i < c->n; i++)
		free(c->ids[i]);
	free(c->inp);
}

static struct bpe *open_vocab(struct gguf *g, const char *vocab)
{
	char path[256], err[EMBER_ERR_MAX] = "";
	struct bpe *b = NULL;

	snprintf(path, sizeof(path), VEC_DIR "%s", vocab);
	ck_assert_msg(gguf_open(g, path, err) == 0, "%s: %s", path, err);
	ck_assert_msg(bpe_new(&b, g, err) == 0, "%s: %s", vocab, err);
	return b;
}

/* 1 if the pieces of ids[0..n) concatenate to text. */
static int decodes_to(const struct bpe *b, const int32_t *ids, size_t n, const char *text, size_t len)
{
	char buf[64];
	size_t i, off = 0;

	for (i = 0; i < n; i++) {
		int k = bpe_piece(b, ids[i], buf, sizeof(buf));

		if (k < 0 || (size_t)k > sizeof(buf) || off + (size_t)k > len ||
		    memcmp(text + off, buf, (size_t)k) != 0)
			return 0;
		off += (size_t)k;
	}
	return off == len;
}

/* Encodes every case of `vocab` with `b`; counts exact matches (when the
 * expected ids are known) and exact round trips. */
static void run_cases(const struct bpe *b, const struct cases *c, const char *vocab, size_t *n_exact,
		      size_t *n_round)
{
	static int32_t ids[MAX_IDS];
	size_t i;

	*n_exact = *n_round = 0;
	for (i = 0; i < c->n; i++) {
		int64_t n = bpe_encode(b, c->text[i], c->len[i], ids, MAX_IDS);

		ck_assert_int_ge(n, 0);
		ck_assert_int_le(n, MAX_IDS);
		if (c->ids[i] != NULL) {
			if ((size_t)n == c->n_ids[i] && memcmp(ids, c->ids[i], (size_t)n * sizeof(*ids)) == 0)
				(*n_exact)++;
			else
				fprintf(stderr, "%s: case %zu \"%.*s\": got %lld ids, want %zu\n", vocab, i,
					(int)c->len[i], c->text[i], (long long)n, c->n_ids[i]);
		}
		if (decodes_to(b, ids, (size_t)n, c->text[i], c->len[i]))
			(*n_round)++;
		else
			fprintf(stderr, "%s: case %zu does not decode back\n", vocab, i);
	}
}

static void check_reference(const char *vocab, const char *pre)
{
	struct gguf g;
	struct cases c;
	struct bpe *b = open_vocab(&g, vocab);
	size_t n_exact, n_round;

	ck_assert_str_eq(bpe_pre_name(b), pre);
	cases_load(&c, vocab, 1);
	ck_assert_uint_ge(c.n, 40);
	run_cases(b, &c, vocab, &n_exact, &n_round);
	printf("tokenizer_bpe: %s: %zu/%zu cases exact, %zu/%zu decode back\n", vocab, n_exact, c.n,
	       n_round, c.n);
	ck_assert_uint_eq(n_exact, c.n);
	ck_assert_uint_eq(n_round, c.n);
	cases_free(&c);
	bpe_free(b);
	gguf_close(&g);
}

START_TEST(gpt2_vocab_matches_reference_ids)
{
	check_reference("ggml-vocab-gpt-2.gguf", "gpt-2");
}
END_TEST

START_TEST(falcon_vocab_matches_reference_ids)
{
	check_reference("ggml-vocab-falcon.gguf", "falcon");
}
END_TEST

START_TEST(gpt_neox_vocab_round_trips_gpt2_texts)
{
	struct gguf g;
	struct cases c;
	struct bpe *b = open_vocab(&g, "ggml-vocab-gpt-neox.gguf");
	size_t n_exact, n_round;

	ck_assert_str_eq(bpe_pre_name(b), "default");
	ck_assert_int_eq(bpe_n_vocab(b), 50432);
	cases_load(&c, "ggml-vocab-gpt-2.gguf", 0);
	run_cases(b, &c, "gpt-neox", &n_exact, &n_round);
	printf("tokenizer_bpe: ggml-vocab-gpt-neox.gguf: %zu/%zu gpt-2 texts decode back\n", n_round, c.n);
	ck_assert_uint_eq(n_round, c.n);
	cases_free(&c);
	bpe_free(b);
	gguf_close(&g);
}
END_TEST

START_TEST(short_buffers_report_the_size_needed)
{
	struct gguf g;
	struct bpe *b = open_vocab(&g, "ggml-vocab-gpt-2.gguf");
	int32_t ids[8], one[1];
	char piece[2];

	/* " Hello world" is 18435 995 in GPT-2. */
	ck_assert_int_eq(bpe_encode(b, " Hello world", 12, ids, 8), 2);
	ck_assert_int_eq(bpe_encode(b, " Hello world", 12, one, 1), 2);
	ck_assert_int_eq(one[0], 18435);
	ck_assert_int_eq(bpe_piece(b, 18435, piece, sizeof(piece)), 6);
	ck_assert_int_eq(memcmp(piece, " H", 2), 0);
	ck_assert_int_eq(bpe_piece(b, -1, piece, sizeof(piece)), EMBER_ERANGE);
	ck_assert_int_eq(bpe_piece(b, 50257, piece, sizeof(piece)), EMBER_ERANGE);
	ck_assert_int_eq(bpe_encode(b, "", 0, ids, 8), 0);
	bpe_free(b);
	gguf_close(&g);
}
END_TEST

/* ---- generated vocabularies -------------------------------------------------- */

/* A minimal GGUF v3 in memory: string keys and string arrays, no tensors. */
struct mini {
	uint8_t buf[1 << 16];
	size_t len;
	uint64_t n_kv;
};

static void put(struct mini *m, const void *p, size_t n)
{
	ck_assert_uint_le(m->len + n, sizeof(m->buf));
	memcpy(m->buf + m->len, p, n);
	m->len += n;
}

static void put_u32(struct mini *m, uint32_t v)
{
	put(m, &v, 4);
}

static void put_str(struct mini *m, const char *s, size_t n)
{
	uint64_t len = n;

	put(m, &len, 8);
	put(m, s, n);
}

static void mini_key_str(struct mini *m, const char *key, const char *val)
{
	put_str(m, key, strlen(key));
	put_u32(m, GGUF_TYPE_STRING);
	put_str(m, val, strlen(val));
	m->n_kv++;
}

static void mini_key_arr(struct mini *m, const char *key, const char *const *v, const size_t *lens,
			 size_t n)
{
	uint64_t n64 = n;
	size_t i;

	put_str(m, key, strlen(key));
	put_u32(m, GGUF_TYPE_ARRAY);
	put_u32(m, GGUF_TYPE_STRING);
	put(m, &n64, 8);
	for (i = 0; i < n; i++)
		put_str(m, v[i], lens ? lens[i] : strlen(v[i]));
}

/* GPT-2's mapped character for byte `c`, as UTF-8 in out (returns length). */
static size_t mapped_char(int c, char *out)
{
	int cp = c, n = 0, k;

	if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174)) {
		for (k = 0; k < c; k++)
			n += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174);
		cp = 256 + n;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	out[0] = (char)(0xC0 | cp >> 6);
	out[1] = (char)(0x80 | (cp & 0x3F));
	return 2;
}

/*
 * Vocabulary: ids 0..255 are the 256 byte characters (id = byte), then
 * `extra` tokens; merges as given (NULL: no merges key). `pre` NULL: no
 * pre key.
 */
static struct mini *mini_vocab(const char *model, const char *pre, const char *const *extra,
			       size_t n_extra, const char *const *merges, size_t n_merges, int with_merges)
{
	struct mini *m = calloc(1, sizeof(*m));
	static char bytes[256][2];
	const char *toks[256 + 16];
	size_t lens[256 + 16], i;
	uint64_t zero = 0;

	ck_assert_ptr_nonnull(m);
	ck_assert_uint_le(n_extra, 16);
	put(m, "GGUF", 4);
	put_u32(m, 3);
	put(m, &zero, 8);
	put(m, &zero, 8); /* n_kv, patched at the end */
	mini_key_str(m, "tokenizer.ggml.model", model);
	if (pre != NULL)
		mini_key_str(m, "tokenizer.ggml.pre", pre);
	for (i = 0; i < 256; i++) {
		lens[i] = mapped_char((int)i, bytes[i]);
		toks[i] = bytes[i];
	}
	for (i = 0; i < n_extra; i++) {
		toks[256 + i] = extra[i];
		lens[256 + i] = strlen(extra[i]);
	}
	mini_key_arr(m, "tokenizer.ggml.tokens", toks, lens, 256 + n_extra);
	m->n_kv++;
	if (with_merges) {
		mini_key_arr(m, "tokenizer.ggml.merges", merges, NULL, n_merges);
		m->n_kv++;
	}
	memcpy(m->buf + 16, &m->n_kv, 8);
	while (m->len % 32 != 0)
		put(m, &zero, 1);
	return m;
}

struct mini_bpe {
	struct mini *m;
	struct gguf g;
	struct bpe *b;
	char err[EMBER_ERR_MAX];
	int rc;
};

static void mini_open(struct mini_bpe *t, struct mini *m)
{
	t->m = m;
	t->b = NULL;
	t->err[0] = '\0';
	ck_assert_msg(gguf_open_memory(&t->g, m->buf, m->len, t->err) == 0, "%s", t->err);
	t->rc = bpe_new(&t->b, &t->g, t->err);
}

static void mini_close(struct mini_bpe *t)
{
	bpe_free(t->b);
	gguf_close(&t->g);
	free(t->m);
}

/* Encodes `text` and compares with the expected ids (terminated by -1). */
static void expect_ids(const struct bpe *b, const char *text, const int32_t *want)
{
	int32_t ids[64];
	int64_t n = bpe_encode(b, text, strlen(text), ids, 64), i;

	for (i = 0; want[i] >= 0; i++) {
		ck_assert_msg(i < n, "\"%s\": %lld ids, want more", text, (long long)n);
		ck_assert_msg(ids[i] == want[i], "\"%s\": id %lld is %d, want %d", text, (long long)i,
			      ids[i], want[i]);
	}
	ck_assert_msg(n == i, "\"%s\": %lld ids, want %lld", text, (long long)n, (long long)i);
}

START_TEST(lowest_rank_merges_first)
{
	static const char *const extra[] = {"ab", "bc"};
	static const char *const bc_first[] = {"b c", "a b"};
	static const char *const ab_first[] = {"a b", "b c"};
	struct mini_bpe t;

	mini_open(&t, mini_vocab("gpt2", "gpt-2", extra, 2, bc_first, 2, 1));
	ck_assert_msg(t.rc == 0, "%s", t.err);
	expect_ids(t.b, "abc", (const int32_t[]){'a', 257, -1});
	mini_close(&t);
	mini_open(&t, mini_vocab("gpt2", "gpt-2", extra, 2, ab_first, 2, 1));
	ck_assert_msg(t.rc == 0, "%s", t.err);
	expect_ids(t.b, "abc", (const int32_t[]){256, 'c', -1});
	/* Equal ranks go left to right: "abab" -> ab ab. */
	expect_ids(t.b, "abab", (const int32_t[]){256, 256, -1});
	mini_close(&t);
}
END_TEST

START_TEST(merged_symbol_missing_from_vocab_falls_back_to_bytes)
{
	static const char *const merges[] = {"x y"}; /* "xy" is no token */
	struct mini_bpe t;

	mini_open(&t, mini_vocab("gpt2", "gpt-2", NULL, 0, merges, 1, 1));
	ck_assert_msg(t.rc == 0, "%s", t.err);
	expect_ids(t.b, "xy", (const int32_t[]){'x', 'y', -1});
	mini_close(&t);
}
END_TEST

START_TEST(pre_tokenizers_split_digits_per_type)
{
	static const char *const extra[] = {"12", "123", "45", "1234", "xyz"};
	static const char *const merges[] = {"1 2", "12 3", "4 5", "123 4"};
	struct mini_bpe t;

	/* gpt-2: one word; 123 4 (rank 3) loses to 4 5 (rank 2). */
	mini_open(&t, mini_vocab("gpt2", "gpt-2", extra, 5, merges, 4, 1));
	expect_ids(t.b, "12345", (const int32_t[]){257, 258, -1});
	mini_close(&t);
	/* llama3 takes digits three at a time. */
	mini_open(&t, mini_vocab("gpt2", "llama-bpe", extra, 5, merges, 4, 1));
	expect_ids(t.b, "12345", (const int32_t[]){257, 258, -1});
	expect_ids(t.b, "12344", (const int32_t[]){257, '4', '4', -1});
	/* ...and takes a word that is a whole token without merging. */
	expect_ids(t.b, "xyz", (const int32_t[]){260, -1});
	mini_close(&t);
	/* qwen2 one digit at a time. */
	mini_open(&t, mini_vocab("gpt2", "qwen2", extra, 5, merges, 4, 1));
	ck_assert_int_eq(bpe_clean_spaces(t.b), 0);
	expect_ids(t.b, "12345", (const int32_t[]){'1', '2', '3', '4', '5', -1});
	mini_close(&t);
	/* falcon: groups of three ASCII digits after the gpt-2 split. */
	mini_open(&t, mini_vocab("gpt2", "falcon", extra, 5, merges, 4, 1));
	expect_ids(t.b, "1234", (const int32_t[]){257, '4', -1});
	mini_close(&t);
	/* gpt-2 itself: 123 then 4, then (rank 3) 1234. */
	mini_open(&t, mini_vocab("gpt2", "gpt-2", extra, 5, merges, 4, 1));
	expect_ids(t.b, "1234", (const int32_t[]){259, -1});
	expect_ids(t.b, "xyz", (const int32_t[]){'x', 'y', 'z', -1});
	mini_close(&t);
}
END_TEST

START_TEST(whitespace_is_unicode_white_space)
{
	/* Mapped " \xc2" and " \xe1": they merge when the space and the next
	 * character are in one word. */
	static const char *const extra[] = {"\xc4\xa0\xc3\x82", "\xc4\xa0\xc3\xa1"};
	static const char *const merges[] = {"\xc4\xa0 \xc3\x82", "\xc4\xa0 \xc3\xa1"};
	struct mini_bpe t;

	mini_open(&t, mini_vocab("gpt2", "gpt-2", extra, 2, merges, 2, 1));
	ck_assert_msg(t.rc == 0, "%s", t.err);
	/* U+0085 is whitespace: the space before it stands alone (\s+(?!\S)). */
	expect_ids(t.b, "a \xc2\x85" "b", (const int32_t[]){'a', ' ', 0xc2, 0x85, 'b', -1});
	/* U+00A2 is a symbol: " \u00a2" is one word. */
	expect_ids(t.b, "a \xc2\xa2", (const int32_t[]){'a', 256, 0xa2, -1});
	/* U+180E is no longer White_Space (PCRE2's \s still takes it). */
	expect_ids(t.b, "a \xe1\xa0\x8e" "b", (const int32_t[]){'a', 257, 0xa0, 0x8e, 'b', -1});
	mini_close(&t);
}
END_TEST

START_TEST(invalid_utf8_becomes_replacement_character)
{
	struct mini_bpe t;
	int32_t ids[8];
	char out[8];
	int64_t n, i;
	size_t off = 0;

	mini_open(&t, mini_vocab("gpt2", NULL, NULL, 0, NULL, 0, 1));
	ck_assert_msg(t.rc == 0, "%s", t.err);
	ck_assert_str_eq(bpe_pre_name(t.b), "default");
	expect_ids(t.b, "a\xff", (const int32_t[]){'a', 0xef, 0xbf, 0xbd, -1});
	/* A surrogate passes through as its three bytes. */
	expect_ids(t.b, "\xed\xa0\x80", (const int32_t[]){0xed, 0xa0, 0x80, -1});
	n = bpe_encode(t.b, "\xc3", 1, ids, 8);
	ck_assert_int_eq(n, 3);
	for (i = 0; i < n; i++)
		off += (size_t)bpe_piece(t.b, ids[i], out + off, sizeof(out) - off);
	ck_assert_uint_eq(off, 3);
	ck_assert_int_eq(memcmp(out, "\xef\xbf\xbd", 3), 0);
	mini_close(&t);
}
END_TEST

START_TEST(bad_files_are_refused_with_a_reason)
{
	static const char *const bad[] = {"a b", "abc"};
	static const char *const trailing[] = {"ab "};
	struct mini_bpe t;

	mini_open(&t, mini_vocab("gpt2", "gpt-2", NULL, 0, NULL, 0, 0));
	ck_assert_int_eq(t.rc, EMBER_EFORMAT);
	ck_assert_ptr_nonnull(strstr(t.err, "tokenizer.ggml.merges"));
	ck_assert_ptr_null(t.b);
	mini_close(&t);

	mini_open(&t, mini_vocab("gpt2", "gpt-2", NULL, 0, bad, 2, 1));
	ck_assert_int_eq(t.rc, EMBER_EFORMAT);
	ck_assert_ptr_nonnull(strstr(t.err, "merges[1]"));
	mini_close(&t);

	mini_open(&t, mini_vocab("gpt2", "gpt-2", NULL, 0, trailing, 1, 1));
	ck_assert_int_eq(t.rc, EMBER_EFORMAT);
	mini_close(&t);

	mini_open(&t, mini_vocab("gpt2", "no-such-pre", NULL, 0, NULL, 0, 1));
	ck_assert_int_eq(t.rc, EMBER_EUNSUPPORTED);
	ck_assert_ptr_nonnull(strstr(t.err, "no-such-pre"));
	mini_close(&t);

	mini_open(&t, mini_vocab("llama", NULL, NULL, 0, NULL, 0, 1));
	ck_assert_int_eq(t.rc, EMBER_EUNSUPPORTED);
	mini_close(&t);
}
END_TEST

Suite *suite_tokenizer_bpe(void)
{
	Suite *s = suite_create("tokenizer_bpe");
	TCase *ref = tcase_create("reference");
	TCase *gen = tcase_create("generated");

	tcase_set_timeout(ref, 60);
	tcase_add_test(ref, gpt2_vocab_matches_reference_ids);
	tcase_add_test(ref, falcon_vocab_matches_reference_ids);
	tcase_add_test(ref, gpt_neox_vocab_round_trips_gpt2_texts);
	tcase_add_test(ref, short_buffers_report_the_size_needed);
	tcase_add_test(gen, lowest_rank_merges_first);
	tcase_add_test(gen, merged_symbol_missing_from_vocab_falls_back_to_bytes);
	tcase_add_test(gen, pre_tokenizers_split_digits_per_type);
	tcase_add_test(gen, whitespace_is_unicode_white_space);
	tcase_add_test(gen, invalid_utf8_becomes_replacement_character);
	tcase_add_test(gen, bad_files_are_refused_with_a_reason);
	suite_add_tcase(s, ref);
	suite_add_tcase(s, gen);
	return s;
}
