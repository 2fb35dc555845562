/* test_tokenizer.c - the public front (tokenizer.h) on every reference
 * vocabulary, SentencePiece and BPE alike: the path the engine uses. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "tokenizer.h"
#include "testutil.h"

#define VEC_DIR "../shared/tokenizer-vectors/"
#define VEC_SEP "\n__ggml_vocab_test__\n"

/* Runs every case of one vector file through tokenizer_encode (no BOS, no
 * special parsing, as the reference vectors were made) and decode. */
static void check_vectors(const char *name)
{
	char path[256], err[EMBER_ERR_MAX] = "";
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	size_t in_len, out_len, cases = 0;
	char *in, *out, *text, *line;
	int32_t ids[4096];
	char dec[16384];

	snprintf(path, sizeof(path), VEC_DIR "%s", name);
	ck_assert_msg(gguf_open(&g, path, err) == 0, "%s: %s", path, err);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s: %s", name, err);
	snprintf(path, sizeof(path), VEC_DIR "%s.inp", name);
	in = test_read_file(path, &in_len);
	snprintf(path, sizeof(path), VEC_DIR "%s.out", name);
	out = test_read_file(path, &out_len);
	ck_assert(in && out);
	text = in;
	line = out;
	for (;;) {
		char *sep = strstr(text, VEC_SEP), *nl = strchr(line, '\n'), *p;
		int64_t n, i, m;

		if (sep == NULL || nl == NULL)
			break;
		*sep = '\0';
		*nl = '\0';
		n = tokenizer_encode(t, text, (size_t)(sep - text), 0, 0, ids, 4096);
		ck_assert_int_ge(n, 0);
		for (i = 0, p = line; *p; i++) {
			long want = strtol(p, &p, 10);
			ck_assert_msg(i < n && ids[i] == want, "%s case %zu: id %ld differs", name, cases, (long)i);
			while (*p == ' ')
				p++;
		}
		ck_assert_msg(i == n, "%s case %zu: %ld ids, want %ld", name, cases, (long)n, (long)i);
		m = tokenizer_decode(t, ids, (size_t)n, 0, dec, sizeof(dec));
		ck_assert_int_eq(m, sep - text);
		ck_assert_msg(memcmp(dec, text, (size_t)m) == 0, "%s case %zu: decode differs", name, cases);
		cases++;
		text = sep + strlen(VEC_SEP);
		line = nl + 1;
	}
	ck_assert_uint_ge(cases, 40);
	free(in);
	free(out);
	tokenizer_free(t);
	gguf_close(&g);
}

START_TEST(spm_llama_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-llama-spm.gguf");
}
END_TEST

START_TEST(spm_phi3_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-phi-3.gguf");
}
END_TEST

START_TEST(bpe_gpt2_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-gpt-2.gguf");
}
END_TEST

START_TEST(bpe_falcon_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-falcon.gguf");
}
END_TEST

START_TEST(bpe_llama3_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-llama-bpe.gguf");
}
END_TEST

START_TEST(bpe_qwen2_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-qwen2.gguf");
}
END_TEST

/* "gemma4": SentencePiece-style BPE (spaces as U+2581, raw UTF-8 merges,
 * <0xAB> byte fallback); refused as unsupported before. */
START_TEST(bpe_gemma4_vectors_exact_through_front)
{
	check_vectors("ggml-vocab-gemma-4.gguf");
}
END_TEST

/* A single piece with the leading SentencePiece space, decoded into a
 * buffer of exactly the size asked for (as /detokenize does): the space is
 * dropped without cutting the piece ("Helll" before). */
START_TEST(decode_of_one_leading_space_piece_fits_its_size)
{
	char err[EMBER_ERR_MAX] = "", buf[16];
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	int32_t ids[4];
	int64_t n, need;

	ck_assert_msg(gguf_open(&g, VEC_DIR "ggml-vocab-llama-spm.gguf", err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	n = tokenizer_encode(t, "Hello", 5, 0, 0, ids, 4);
	ck_assert_int_eq(n, 1); /* "▁Hello" */
	need = tokenizer_decode(t, ids, 1, 0, NULL, 0);
	ck_assert_int_eq(need, 5);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(tokenizer_decode(t, ids, 1, 0, buf, (size_t)need), 5);
	ck_assert_int_eq(memcmp(buf, "Hellox", 6), 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(tokenizer_decode(t, ids, 1, 0, buf, 3), 5);
	ck_assert_int_eq(memcmp(buf, "Helx", 4), 0);
	tokenizer_free(t);
	gguf_close(&g);
}
END_TEST

START_TEST(bpe_adds_no_bos_and_parses_specials_when_asked)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	int32_t ids[16];
	const char *eot = "<|endoftext|>";
	int64_t n;

	ck_assert_msg(gguf_open(&g, VEC_DIR "ggml-vocab-gpt-2.gguf", err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	n = tokenizer_encode(t, "Hi", 2, 1, 0, ids, 16);
	ck_assert_int_eq(n, 1); /* gpt-2 adds no BOS */
	n = tokenizer_encode(t, eot, strlen(eot), 0, 1, ids, 16);
	ck_assert_int_eq(n, 1);
	ck_assert(tokenizer_is_eog(t, ids[0]));
	n = tokenizer_encode(t, eot, strlen(eot), 0, 0, ids, 16);
	ck_assert_int_gt(n, 1); /* plain text when not parsing specials */
	tokenizer_free(t);
	gguf_close(&g);
}
END_TEST

/* "\u0000" is an ordinary character (issue 15): on SentencePiece (byte
 * fallback <0x00>) and byte-level BPE vocabularies alike, a NUL is one token
 * of the one byte, between the text around it, and decodes back in place. */
START_TEST(nul_is_an_ordinary_byte_to_every_tokenizer)
{
	static const char *const vocabs[] = {"llama-spm", "phi-3", "llama-bpe", "qwen2", "gemma-4"};
	char err[EMBER_ERR_MAX] = "", path[128], buf[16];

	for (size_t k = 0; k < sizeof(vocabs) / sizeof(vocabs[0]); k++) {
		struct gguf g = {0};
		struct tokenizer *t = NULL;
		int32_t ids[8];
		int64_t n;

		snprintf(path, sizeof(path), VEC_DIR "ggml-vocab-%s.gguf", vocabs[k]);
		ck_assert_msg(gguf_open(&g, path, err) == 0, "%s", err);
		ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
		n = tokenizer_encode(t, "a\0b", 3, 0, 1, ids, 8);
		ck_assert_msg(n == 3, "%s: %lld ids", vocabs[k], (long long)n);
		ck_assert_int_eq(tokenizer_piece(t, ids[1], 0, buf, sizeof(buf)), 1);
		ck_assert_int_eq(buf[0], '\0');
		ck_assert_int_eq(tokenizer_decode(t, ids, 3, 0, buf, sizeof(buf)), 3);
		ck_assert_msg(memcmp(buf, "a\0b", 3) == 0, "%s decodes the NUL in place", vocabs[k]);
		tokenizer_free(t);
		gguf_close(&g);
	}
}
END_TEST

Suite *suite_tokenizer(void)
{
	Suite *s = suite_create("tokenizer");
	TCase *tc = tcase_create("front");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, spm_llama_vectors_exact_through_front);
	tcase_add_test(tc, spm_phi3_vectors_exact_through_front);
	tcase_add_test(tc, bpe_gpt2_vectors_exact_through_front);
	tcase_add_test(tc, bpe_falcon_vectors_exact_through_front);
	tcase_add_test(tc, bpe_llama3_vectors_exact_through_front);
	tcase_add_test(tc, bpe_qwen2_vectors_exact_through_front);
	tcase_add_test(tc, bpe_gemma4_vectors_exact_through_front);
	tcase_add_test(tc, decode_of_one_leading_space_piece_fits_its_size);
	tcase_add_test(tc, bpe_adds_no_bos_and_parses_specials_when_asked);
	tcase_add_test(tc, nul_is_an_ordinary_byte_to_every_tokenizer);
	suite_add_tcase(s, tc);
	return s;
}
