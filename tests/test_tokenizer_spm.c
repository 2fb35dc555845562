/* test_tokenizer_spm.c - the tokenizer front and its SentencePiece backend,
 * against llama.cpp's reference vectors. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"
#include "testutil.h"

#define VEC "../shared/tokenizer-vectors/"
#define SEP "\n__ggml_vocab_test__\n"

/* The file at `path`; fails the test when it cannot be read. */
static char *spm_read(const char *path, size_t *len)
{
	char *buf = test_read_file(path, len);

	ck_assert_msg(buf != NULL, "cannot read %s", path);
	return buf;
}

struct tok_fixture {
	struct gguf g;
	struct tokenizer *t;
	char *mem; /* file copy for patched fixtures, else NULL */
};

static void open_tok(struct tok_fixture *fx, const char *path)
{
	char err[EMBER_ERR_MAX] = "";
	int rc;

	memset(fx, 0, sizeof(*fx));
	rc = gguf_open(&fx->g, path, err);
	ck_assert_msg(rc == 0, "%s: %s", path, err);
	rc = tokenizer_new(&fx->t, &fx->g, err);
	ck_assert_msg(rc == 0, "%s: %s", path, err);
}

/* Opens a copy of `path` with the bytes after `key`'s type field replaced
 * by `val` (same length), so tests can flip a flag or rename a model. */
static int open_patched(struct tok_fixture *fx, const char *path, const char *key, const void *val,
			size_t val_len, size_t val_skip, char *err)
{
	size_t len;
	char *at;
	int rc;

	memset(fx, 0, sizeof(*fx));
	fx->mem = spm_read(path, &len);
	at = memmem(fx->mem, len, key, strlen(key));
	ck_assert_ptr_nonnull(at);
	memcpy(at + strlen(key) + 4 + val_skip, val, val_len);
	rc = gguf_open_memory(&fx->g, fx->mem, len, err);
	ck_assert_msg(rc == 0, "%s", err);
	return tokenizer_new(&fx->t, &fx->g, err);
}

static void close_tok(struct tok_fixture *fx)
{
	tokenizer_free(fx->t);
	gguf_close(&fx->g);
	free(fx->mem);
}

static int64_t enc(const struct tokenizer *t, const char *s, int add_special, int parse_special,
		   int32_t *ids, size_t cap)
{
	return tokenizer_encode(t, s, strlen(s), add_special, parse_special, ids, cap);
}

/* ---- a GGUF built in memory, to carry the original SentencePiece model ---- */

struct wbuf {
	char *p;
	size_t n, cap;
};

static void put(struct wbuf *b, const void *v, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->n, v, n);
	b->n += n;
}

static void put_u32(struct wbuf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put_u64(struct wbuf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void put_str(struct wbuf *b, const char *s, size_t n)
{
	put_u64(b, n);
	put(b, s, n);
}

static void put_key(struct wbuf *b, const char *key, uint32_t type)
{
	put_str(b, key, strlen(key));
	put_u32(b, type);
}

/* The vocabulary of `src` plus TOK_KEY_SPM_MODEL = the bytes of `model`,
 * with `n_pad` unused tokens appended (a config vocab_size past the
 * model's) and token `user` (if >= 0) user-defined with "▁" written " ". */
static char *gguf_with_spm_model_ext(const struct gguf *src, const char *model, size_t *len,
				     uint64_t n_pad, int64_t user)
{
	const struct gguf_kv *tok = gguf_find_kv(src, "tokenizer.ggml.tokens");
	const struct gguf_kv *sc = gguf_find_kv(src, "tokenizer.ggml.scores");
	const struct gguf_kv *ty = gguf_find_kv(src, "tokenizer.ggml.token_type");
	struct wbuf b = {0};
	size_t mlen, i;
	char *mbytes = spm_read(model, &mlen);
	struct gguf_str s;
	double v;

	put(&b, "GGUF", 4);
	put_u32(&b, 3);
	put_u64(&b, 0);
	put_u64(&b, 5);
	put_key(&b, "tokenizer.ggml.model", GGUF_TYPE_STRING);
	put_str(&b, "llama", 5);
	put_key(&b, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
	put_u32(&b, GGUF_TYPE_STRING);
	put_u64(&b, tok->arr_n + n_pad);
	for (i = 0; i < tok->arr_n; i++) {
		char sp[256];
		size_t k, m = 0;
		ck_assert_int_eq(gguf_arr_str(tok, i, &s), 0);
		if ((int64_t)i != user) {
			put_str(&b, s.ptr, s.len);
			continue;
		}
		for (k = 0; k < s.len && m < sizeof(sp); k++) {
			if (s.len - k >= 3 && memcmp(s.ptr + k, "\xe2\x96\x81", 3) == 0) {
				sp[m++] = ' ';
				k += 2;
			} else {
				sp[m++] = s.ptr[k];
			}
		}
		put_str(&b, sp, m);
	}
	for (i = 0; i < n_pad; i++) {
		char pad[32];
		snprintf(pad, sizeof(pad), "[PAD%llu]", (unsigned long long)(tok->arr_n + i));
		put_str(&b, pad, strlen(pad));
	}
	put_key(&b, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
	put_u32(&b, GGUF_TYPE_FLOAT32);
	put_u64(&b, sc->arr_n + n_pad);
	for (i = 0; i < sc->arr_n + n_pad; i++) {
		float f = -10000.0f;

		if (i < sc->arr_n) {
			ck_assert_int_eq(gguf_arr_num(sc, i, &v), 0);
			f = (float)v;
		}
		put(&b, &f, 4);
	}
	put_key(&b, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY);
	put_u32(&b, GGUF_TYPE_INT32);
	put_u64(&b, ty->arr_n + n_pad);
	for (i = 0; i < ty->arr_n + n_pad; i++) {
		int32_t t = 5; /* unused */

		if (i < ty->arr_n) {
			ck_assert_int_eq(gguf_arr_num(ty, i, &v), 0);
			t = (int64_t)i == user ? 4 : (int32_t)v;
		}
		put(&b, &t, 4);
	}
	put_key(&b, TOK_KEY_SPM_MODEL, GGUF_TYPE_ARRAY);
	put_u32(&b, GGUF_TYPE_UINT8);
	put_u64(&b, mlen);
	put(&b, mbytes, mlen);
	while (b.n % 32 != 0)
		put(&b, "", 1);
	free(mbytes);
	*len = b.n;
	return b.p;
}

static char *gguf_with_spm_model(const struct gguf *src, const char *model, size_t *len)
{
	return gguf_with_spm_model_ext(src, model, len, 0, -1);
}

/* Deterministic text from a small alphabet that stresses merges, spaces,
 * byte fallback and multi-byte characters. */
static size_t random_text(uint32_t *seed, char *out, size_t cap)
{
	static const char *const atoms[] = {" ", "  ", "\n", "\t", "a", "e", "th", "ing", "Hello",
					    "12", "3", "\xc3\xa4", "\xf0\x9f\xa6\x99", "\xe2\x96\x81",
					    ".", "'s", "\xe4\xb8\xad", "<", "s>", "\xd0\xbd"};
	size_t n = 0, k, m, len;

	*seed = *seed * 1664525u + 1013904223u;
	m = 1 + (*seed >> 24) % 12;
	for (k = 0; k < m; k++) {
		const char *a;

		*seed = *seed * 1664525u + 1013904223u;
		a = atoms[(*seed >> 16) % (sizeof(atoms) / sizeof(atoms[0]))];
		len = strlen(a);
		if (n + len > cap)
			break;
		memcpy(out + n, a, len);
		n += len;
	}
	return n;
}

/* Runs every .inp/.out pair; returns the number of mismatches. */
static int check_vectors(const char *name, int *n_cases, int *n_round)
{
	char path[256], err[EMBER_ERR_MAX];
	struct tok_fixture fx;
	size_t inp_len, out_len;
	char *inp, *out, *p, *q, *line, *end;
	int32_t ids[512], want[512];
	char text[4096];
	int fails = 0;

	snprintf(path, sizeof(path), VEC "%s.inp", name);
	inp = spm_read(path, &inp_len);
	snprintf(path, sizeof(path), VEC "%s.out", name);
	out = spm_read(path, &out_len);
	snprintf(path, sizeof(path), VEC "%s", name);
	open_tok(&fx, path);
	*n_cases = *n_round = 0;
	p = inp;
	line = out;
	/* Each text is followed by SEP, the last one too; .out has one line of
	 * " id id ..." per text. */
	while ((q = strstr(p, SEP)) != NULL) {
		size_t len = (size_t)(q - p), n_want = 0;
		int64_t n, m;

		end = strchr(line, '\n');
		ck_assert_ptr_nonnull(end);
		*end = '\0';
		for (char *s = line, *e; *s; s = e) {
			long v = strtol(s, &e, 10);

			if (e == s)
				break;
			ck_assert_uint_lt(n_want, 512);
			want[n_want++] = (int32_t)v;
		}
		n = tokenizer_encode(fx.t, p, len, 0, 0, ids, 512);
		if (n != (int64_t)n_want || memcmp(ids, want, n_want * sizeof(*ids)) != 0) {
			fprintf(stderr, "%s case %d (\"%.*s\"): got %lld ids, want %zu\n", name, *n_cases,
				(int)len, p, (long long)n, n_want);
			fails++;
		}
		/* Round trip: the space SentencePiece adds is dropped again. */
		m = tokenizer_decode(fx.t, ids, (size_t)n, 0, text, sizeof(text));
		if (m == (int64_t)len && memcmp(text, p, len) == 0) {
			(*n_round)++;
		} else {
			snprintf(err, sizeof(err), "%.*s", (int)len, p);
			fprintf(stderr, "%s case %d: no round trip: \"%s\" -> \"%.*s\"\n", name, *n_cases, err,
				(int)(m > 0 ? m : 0), text);
		}
		(*n_cases)++;
		p = q + strlen(SEP);
		line = end + 1;
	}
	close_tok(&fx);
	free(inp);
	free(out);
	return fails;
}

START_TEST(llama_spm_vectors_match_reference_ids)
{
	int cases, round;

	ck_assert_int_eq(check_vectors("ggml-vocab-llama-spm.gguf", &cases, &round), 0);
	ck_assert_int_eq(cases, 46);
	/* Every case round-trips: no text here starts with whitespace that
	 * SentencePiece would merge differently after the prefix space. */
	ck_assert_int_eq(round, cases);
}
END_TEST

START_TEST(phi3_vectors_match_reference_ids)
{
	int cases, round;

	ck_assert_int_eq(check_vectors("ggml-vocab-phi-3.gguf", &cases, &round), 0);
	ck_assert_int_eq(cases, 46);
	ck_assert_int_eq(round, cases);
}
END_TEST

START_TEST(add_special_adds_bos_only_as_the_file_says)
{
	struct tok_fixture fx;
	char err[EMBER_ERR_MAX] = "";
	const uint8_t yes = 1;
	int32_t ids[16];
	int64_t n;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = enc(fx.t, "Hello world", 1, 0, ids, 16);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(ids[0], 1);
	ck_assert_int_eq(ids[1], 15043);
	ck_assert_int_eq(ids[2], 3186);
	ck_assert_int_eq(enc(fx.t, "", 1, 0, ids, 16), 1);
	ck_assert_int_eq(enc(fx.t, "", 0, 0, ids, 16), 0);
	close_tok(&fx);

	ck_assert_int_eq(open_patched(&fx, VEC "ggml-vocab-llama-spm.gguf", "tokenizer.ggml.add_eos_token",
				      &yes, 1, 0, err),
			 0);
	n = enc(fx.t, "Hello world", 1, 0, ids, 16);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(ids[0], 1);
	ck_assert_int_eq(ids[3], 2);
	ck_assert_int_eq(enc(fx.t, "Hello world", 0, 0, ids, 16), 2);
	close_tok(&fx);
}
END_TEST

START_TEST(special_text_maps_to_tokens_only_when_asked)
{
	struct tok_fixture fx;
	int32_t ids[32];
	int64_t n, i;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = enc(fx.t, "<s>Hello", 0, 1, ids, 32);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(ids[0], 1);
	ck_assert_int_eq(ids[1], 15043); /* "▁Hello": a prefix space after a special token */
	n = enc(fx.t, "<s>Hello", 0, 0, ids, 32);
	ck_assert_int_gt(n, 2);
	for (i = 0; i < n; i++)
		ck_assert_int_ne(ids[i], 1);
	n = enc(fx.t, "a</s>b", 0, 1, ids, 32);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(ids[1], 2);
	close_tok(&fx);

	/* Phi-3: control tokens need parse_special; their trailing whitespace
	 * is eaten (rstrip), as llama.cpp does for this family. */
	open_tok(&fx, VEC "ggml-vocab-phi-3.gguf");
	n = enc(fx.t, "<|user|>\nHi<|end|>", 0, 1, ids, 32);
	ck_assert_int_eq(ids[0], 32010);
	ck_assert_int_eq(ids[n - 1], 32007);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(enc(fx.t, "<|user|>", 0, 0, ids, 32) > 1, 1);
	close_tok(&fx);
}
END_TEST

START_TEST(pieces_render_bytes_spaces_and_control_tokens)
{
	struct tok_fixture fx;
	char buf[32];
	int n;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = tokenizer_piece(fx.t, 3 + 0x0a, 0, buf, sizeof(buf)); /* <0x0A> */
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(buf[0], '\n');
	n = tokenizer_piece(fx.t, 3 + 0xe2, 0, buf, sizeof(buf));
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq((unsigned char)buf[0], 0xe2);
	n = tokenizer_piece(fx.t, 15043, 0, buf, sizeof(buf)); /* ▁Hello */
	ck_assert_int_eq(n, 6);
	ck_assert_mem_eq(buf, " Hello", 6);
	ck_assert_int_eq(tokenizer_piece(fx.t, 1, 0, buf, sizeof(buf)), 0);
	n = tokenizer_piece(fx.t, 1, 1, buf, sizeof(buf));
	ck_assert_int_eq(n, 3);
	ck_assert_mem_eq(buf, "<s>", 3);
	/* Too small a buffer: the length needed, nothing past cap. */
	buf[2] = 'x';
	ck_assert_int_eq(tokenizer_piece(fx.t, 15043, 0, buf, 2), 6);
	ck_assert_int_eq(buf[2], 'x');
	close_tok(&fx);
}
END_TEST

START_TEST(invalid_token_ids_are_errors)
{
	struct tok_fixture fx;
	int32_t bad[2] = {15043, 32000};
	char buf[32];

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	ck_assert_int_eq(tokenizer_piece(fx.t, 32000, 0, buf, sizeof(buf)), EMBER_ERANGE);
	ck_assert_int_eq(tokenizer_piece(fx.t, -1, 0, buf, sizeof(buf)), EMBER_ERANGE);
	ck_assert_int_eq(tokenizer_decode(fx.t, bad, 2, 0, buf, sizeof(buf)), EMBER_ERANGE);
	ck_assert_ptr_null(tokenizer_token_text(fx.t, 32000, NULL));
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 32000), 0);
	close_tok(&fx);
}
END_TEST

START_TEST(encode_and_decode_report_the_size_needed)
{
	struct tok_fixture fx;
	int32_t ids[4] = {-7, -7, -7, -7};
	int32_t all[16];
	char buf[8];
	int64_t n;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = enc(fx.t, " this is 🦙.cpp", 1, 0, ids, 3);
	ck_assert_int_eq(n, 11);
	ck_assert_int_eq(ids[0], 1);
	ck_assert_int_eq(ids[3], -7);
	ck_assert_int_eq(enc(fx.t, " this is 🦙.cpp", 1, 0, NULL, 0), 11);
	ck_assert_int_eq(enc(fx.t, " this is 🦙.cpp", 1, 0, all, 16), 11);
	n = tokenizer_decode(fx.t, all, 11, 0, buf, 4);
	ck_assert_int_eq(n, 17);
	ck_assert_mem_eq(buf, " thi", 4);
	n = tokenizer_decode(fx.t, all, 11, 0, NULL, 0);
	ck_assert_int_eq(n, 17);
	close_tok(&fx);
}
END_TEST

START_TEST(decode_drops_the_prefix_space_once)
{
	struct tok_fixture fx;
	int32_t ids[16];
	char buf[64];
	int64_t n, m;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = enc(fx.t, "Hello world", 1, 0, ids, 16);
	m = tokenizer_decode(fx.t, ids, (size_t)n, 0, buf, sizeof(buf));
	ck_assert_int_eq(m, 11);
	ck_assert_mem_eq(buf, "Hello world", 11);
	m = tokenizer_decode(fx.t, ids, (size_t)n, 1, buf, sizeof(buf));
	ck_assert_int_eq(m, 15);
	ck_assert_mem_eq(buf, "<s> Hello world", 15);
	close_tok(&fx);
}
END_TEST

START_TEST(invalid_utf8_becomes_byte_tokens)
{
	struct tok_fixture fx;
	const char in[] = "a\xff" "b";
	int32_t ids[16];
	char buf[16];
	int64_t n, m;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	n = tokenizer_encode(fx.t, in, 3, 0, 0, ids, 16);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(ids[1], 3 + 0xff);
	m = tokenizer_decode(fx.t, ids, (size_t)n, 0, buf, sizeof(buf));
	ck_assert_int_eq(m, 3);
	ck_assert_mem_eq(buf, in, 3);
	close_tok(&fx);
}
END_TEST

START_TEST(end_of_generation_ids_include_eos_and_end_texts)
{
	struct tok_fixture fx;

	open_tok(&fx, VEC "ggml-vocab-phi-3.gguf");
	ck_assert_int_eq(tokenizer_eos(fx.t), 32000);
	ck_assert_int_eq(tokenizer_bos(fx.t), 1);
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 32000), 1);
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 32007), 1); /* <|end|> */
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 32001), 0); /* <|assistant|> */
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 2), 0);     /* </s> is not Phi-3's EOS */
	ck_assert_int_eq(tokenizer_n_vocab(fx.t), 32064);
	close_tok(&fx);
	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 2), 1);
	ck_assert_int_eq(tokenizer_is_eog(fx.t, 1), 0);
	close_tok(&fx);
}
END_TEST

START_TEST(unknown_tokenizer_models_are_unsupported)
{
	struct tok_fixture fx;
	char err[EMBER_ERR_MAX] = "";

	/* value: u64 length, then "llama" -> "xxxxx" */
	ck_assert_int_eq(open_patched(&fx, VEC "ggml-vocab-llama-spm.gguf", "tokenizer.ggml.model", "xxxxx",
				      5, 8, err),
			 EMBER_EUNSUPPORTED);
	ck_assert_ptr_null(fx.t);
	ck_assert_ptr_nonnull(strstr(err, "xxxxx"));
	close_tok(&fx);
}
END_TEST

START_TEST(golden_llama_model_encodes_and_decodes)
{
	static const char *const texts[] = {"Hello world", "The quick brown fox.", " two  spaces\n",
					    "Äpfel 🦙 12345"};
	struct tok_fixture fx;
	int32_t ids[128];
	char buf[256];
	size_t i;
	int64_t n, m, j;

	open_tok(&fx, "../shared/golden/llama/model-f32.gguf");
	ck_assert_int_eq(tokenizer_n_vocab(fx.t), 1000);
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		n = enc(fx.t, texts[i], 1, 0, ids, 128);
		ck_assert_int_gt(n, 1);
		ck_assert_int_le(n, 128);
		ck_assert_int_eq(ids[0], 1);
		for (j = 0; j < n; j++)
			ck_assert(ids[j] >= 0 && ids[j] < 1000);
		m = tokenizer_decode(fx.t, ids, (size_t)n, 0, buf, sizeof(buf));
		ck_assert_int_eq(m, (int64_t)strlen(texts[i]));
		ck_assert_mem_eq(buf, texts[i], (size_t)m);
	}
	close_tok(&fx);
}
END_TEST

START_TEST(original_model_bytes_encode_like_the_built_model)
{
	struct tok_fixture built, native;
	char err[EMBER_ERR_MAX] = "", text[128];
	int32_t a[256], b[256];
	uint32_t seed = 7;
	size_t len;
	int64_t na, nb;
	int i;

	open_tok(&built, "../shared/golden/llama/model-f32.gguf");
	memset(&native, 0, sizeof(native));
	native.mem = gguf_with_spm_model(&built.g, "../shared/golden/llama/hf/tokenizer.model", &len);
	ck_assert_int_eq(gguf_open_memory(&native.g, native.mem, len, err), 0);
	ck_assert_msg(tokenizer_new(&native.t, &native.g, err) == 0, "%s", err);
	for (i = 0; i < 300; i++) {
		len = random_text(&seed, text, sizeof(text));
		na = tokenizer_encode(built.t, text, len, 1, 0, a, 256);
		nb = tokenizer_encode(native.t, text, len, 1, 0, b, 256);
		ck_assert_msg(na == nb && memcmp(a, b, (size_t)na * sizeof(*a)) == 0,
			      "case %d \"%.*s\": %lld vs %lld ids", i, (int)len, text, (long long)na,
			      (long long)nb);
	}
	close_tok(&native);
	close_tok(&built);
}
END_TEST

START_TEST(original_model_must_match_the_vocabulary)
{
	struct tok_fixture other, bad;
	char err[EMBER_ERR_MAX] = "";
	size_t len;

	/* The golden model's tokenizer.model has 1000 pieces, not 32000. */
	open_tok(&other, VEC "ggml-vocab-llama-spm.gguf");
	memset(&bad, 0, sizeof(bad));
	bad.mem = gguf_with_spm_model(&other.g, "../shared/golden/llama/hf/tokenizer.model", &len);
	ck_assert_int_eq(gguf_open_memory(&bad.g, bad.mem, len, err), 0);
	ck_assert_int_eq(tokenizer_new(&bad.t, &bad.g, err), EMBER_EFORMAT);
	ck_assert_ptr_nonnull(strstr(err, "pieces"));
	close_tok(&bad);
	close_tok(&other);
}
END_TEST

/* A config.json vocab_size past the model's pieces (padding after them),
 * and a user-defined piece written with spaces for its "▁" (Gemma's added
 * tokens): both load (they were refused: "1000 pieces for 1002 tokens",
 * "piece N differs from the vocabulary") and encode as before. */
START_TEST(original_model_allows_padding_and_spaced_user_pieces)
{
	struct tok_fixture built, native;
	char err[EMBER_ERR_MAX] = "", text[128];
	const struct gguf_kv *tok;
	int32_t a[256], b[256];
	uint32_t seed = 11;
	int64_t user = -1, na, nb;
	size_t len;
	uint64_t i;

	open_tok(&built, "../shared/golden/llama/model-f32.gguf");
	tok = gguf_find_kv(&built.g, "tokenizer.ggml.tokens");
	for (i = 0; i < tok->arr_n && user < 0; i++) {
		struct gguf_str s;
		gguf_arr_str(tok, i, &s);
		if (s.len > 4 && memcmp(s.ptr, "\xe2\x96\x81", 3) == 0)
			user = (int64_t)i;
	}
	ck_assert_int_ge(user, 0);
	memset(&native, 0, sizeof(native));
	native.mem = gguf_with_spm_model_ext(&built.g, "../shared/golden/llama/hf/tokenizer.model", &len, 2, user);
	ck_assert_int_eq(gguf_open_memory(&native.g, native.mem, len, err), 0);
	ck_assert_msg(tokenizer_new(&native.t, &native.g, err) == 0, "%s", err);
	ck_assert_int_eq(tokenizer_n_vocab(native.t), (int32_t)tok->arr_n + 2);
	for (int k = 0; k < 200; k++) {
		len = random_text(&seed, text, sizeof(text));
		na = tokenizer_encode(built.t, text, len, 1, 0, a, 256);
		nb = tokenizer_encode(native.t, text, len, 1, 0, b, 256);
		ck_assert_int_gt(na, 0);
		ck_assert_int_gt(nb, 0);
	}
	close_tok(&native);
	close_tok(&built);
}
END_TEST

START_TEST(random_text_round_trips)
{
	struct tok_fixture fx;
	char text[128], back[256];
	int32_t ids[256];
	uint32_t seed = 1;
	size_t len;
	int64_t n, m;
	int i;

	open_tok(&fx, VEC "ggml-vocab-llama-spm.gguf");
	for (i = 0; i < 500; i++) {
		len = random_text(&seed, text, sizeof(text));
		/* A literal "▁" in the text cannot come back: SentencePiece
		 * spells spaces that way (the reference behaves the same). */
		if (memmem(text, len, "\xe2\x96\x81", 3) != NULL)
			continue;
		n = tokenizer_encode(fx.t, text, len, i & 1, 0, ids, 256);
		ck_assert(n >= 0 && n <= 256);
		m = tokenizer_decode(fx.t, ids, (size_t)n, 0, back, sizeof(back));
		ck_assert_msg(m == (int64_t)len && memcmp(back, text, len) == 0, "case %d \"%.*s\" -> \"%.*s\"",
			      i, (int)len, text, (int)(m > 0 ? m : 0), back);
	}
	close_tok(&fx);
}
END_TEST

Suite *suite_tokenizer_spm(void)
{
	Suite *s = suite_create("tokenizer_spm");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, llama_spm_vectors_match_reference_ids);
	tcase_add_test(tc, phi3_vectors_match_reference_ids);
	tcase_add_test(tc, add_special_adds_bos_only_as_the_file_says);
	tcase_add_test(tc, special_text_maps_to_tokens_only_when_asked);
	tcase_add_test(tc, pieces_render_bytes_spaces_and_control_tokens);
	tcase_add_test(tc, invalid_token_ids_are_errors);
	tcase_add_test(tc, encode_and_decode_report_the_size_needed);
	tcase_add_test(tc, decode_drops_the_prefix_space_once);
	tcase_add_test(tc, invalid_utf8_becomes_byte_tokens);
	tcase_add_test(tc, end_of_generation_ids_include_eos_and_end_texts);
	tcase_add_test(tc, unknown_tokenizer_models_are_unsupported);
	tcase_add_test(tc, golden_llama_model_encodes_and_decodes);
	tcase_add_test(tc, original_model_bytes_encode_like_the_built_model);
	tcase_add_test(tc, original_model_must_match_the_vocabulary);
	tcase_add_test(tc, original_model_allows_padding_and_spaced_user_pieces);
	tcase_add_test(tc, random_text_round_trips);
	suite_add_tcase(s, tc);
	return s;
}
