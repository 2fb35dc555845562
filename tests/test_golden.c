/*
 * test_golden.c - every golden architecture end to end through our own
 * converter: the Hugging Face checkpoint (../shared/golden/<arch>/hf)
 * converted by convert_run() at f32 reproduces the exact reference logits
 * and greedy continuation; at int8 (Q8_0) the same continuation within a
 * measured bound; and its tokenizer round-trips text and agrees with the
 * tokenizer llama.cpp's conversion carries (the arrays path, for
 * SentencePiece also against our tokenizer.model bytes path).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"
#include "ember.h"
#include "forward.h"
#include "gguf.h"
#include "model.h"
#include "tokenizer.h"
#include "testutil.h"

#define GOLDEN "../shared/golden/"
#define N_IN 24
#define N_GREEDY 16

/* The golden README's tolerance for an F32 forward pass: max|diff| <= 1e-4
 * x max|exact| at every position. */
#define TOL_F32 1e-4
/* Q8_0 weights (and the kernels' 8-bit activations) against the exact
 * reference, same measure. Measured 3.9e-3 (gemma) to 2.35e-2 (falcon-rw)
 * over the seven models, greedy continuations all identical; 2x margin. */
#define TOL_INT8 5e-2

struct golden_arch {
	const char *dir;     /* ../shared/golden/<dir> */
	const char *row;     /* the arch.c row the converted file must select */
	const char *ref_tok; /* golden dir whose llama.cpp GGUF has the same tokenizer */
};

/* falcon-rw has no llama.cpp file; its tokenizer.json is phi's (same bytes). */
static const struct golden_arch archs[] = {
	{"llama", "llama", "llama"},  {"gemma", "gemma", "gemma"},
	{"phi", "phi2", "phi"},       {"falcon", "falcon", "falcon"},
	{"stablelm", "stablelm", "stablelm"}, {"qwen2", "qwen2", "qwen2"},
	{"falcon-rw", "falcon-rw", "phi"},
	{"llama3", "llama", "llama3"}, {"qwen3", "qwen3", "qwen3"},
	{"phi3", "phi3", "phi3"}, {"phi3-longrope", "phi3", "phi3-longrope"},
	{"gemma2", "gemma2", "gemma2"}, {"gemma3", "gemma3", "gemma3"},
};

#define N_ARCHS ((int)(sizeof(archs) / sizeof(archs[0])))

/* The int8 bound holds for the first seven only: the later sets are built
 * so that each feature bites (Llama 3's q/k weights 8x, Gemma 2's caps of
 * 0.1 and 1), which 8-bit weights move by 6e-2 of max and past greedy ties. */
#define N_INT8 7

/* Tokenizer checks: all but phi3 and phi3-longrope, whose vocab_size
 * (1024) exceeds the SentencePiece model's 1000 pieces plus 11 added
 * tokens: the tokenizer part of issue #15, not the architecture's. */
static const int tok_archs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12};
#define N_TOK_ARCHS ((int)(sizeof(tok_archs) / sizeof(tok_archs[0])))

/* Converts archs[i]'s checkpoint with `recipe` to a temporary file. */
static void convert_golden(int i, const char *recipe, char *out, size_t size)
{
	char in[256], err[EMBER_ERR_MAX] = "";
	struct convert_opts o;
	int rc;

	snprintf(in, sizeof(in), GOLDEN "%s/hf", archs[i].dir);
	snprintf(out, size, "/tmp/ember_test_golden_%ld_%s_%s.gguf", (long)getpid(), archs[i].dir,
		 recipe);
	memset(&o, 0, sizeof(o));
	o.in = in;
	o.out = out;
	ck_assert_int_eq(recipe_parse(&o.recipe, recipe, err), 0);
	rc = convert_run(&o, err);
	ck_assert_msg(rc == 0, "convert %s -q %s: %s", in, recipe, err);
}

static int32_t argmax(const float *x, uint32_t n)
{
	int32_t i, best = 0;

	for (i = 1; i < (int32_t)n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/*
 * Runs the converted model at `path`: all-position logits of the input
 * within `tol` of the exact reference (the figure printed), then the
 * greedy continuation token for token.
 */
static void check_model(int i, const char *path, const char *recipe, double tol)
{
	struct forward_opts fo = {.n_ctx = N_IN + N_GREEDY};
	char err[EMBER_ERR_MAX] = "";
	struct forward_ctx *f = NULL;
	struct test_golden g;
	struct model m;
	float *logits;
	double rel;
	int k;

	ck_assert_msg(model_open(&m, path, err) == 0, "%s: %s", path, err);
	ck_assert_str_eq(m.arch->name, archs[i].row);
	test_golden_load(&g, archs[i].dir, m.hp.n_vocab);
	logits = malloc(sizeof(float) * N_IN * g.n_vocab);
	ck_assert_msg(forward_new(&f, &m, &fo, err) == 0, "%s", err);
	ck_assert_msg(forward_eval(f, g.input, N_IN, logits, 1, err) == 0, "%s", err);
	rel = test_logits_dist(logits, g.exact, N_IN, g.n_vocab);
	printf("golden: %-9s converted %-4s: max|diff|/max|exact| = %.4g (bound %.0e)\n",
	       archs[i].dir, recipe, rel, tol);
	ck_assert_msg(rel <= tol, "%s %s: %.3g of max|exact| > %.0e", archs[i].dir, recipe, rel,
		      tol);
	for (k = 0; k < N_GREEDY; k++) {
		int32_t id = argmax(k == 0 ? logits + (size_t)(N_IN - 1) * g.n_vocab : logits,
				    g.n_vocab);

		ck_assert_msg(id == g.greedy[k], "%s %s: greedy token %d is %d, expected %d",
			      archs[i].dir, recipe, k, id, g.greedy[k]);
		ck_assert_msg(forward_eval(f, &id, 1, logits, 0, err) == 0, "%s", err);
	}
	forward_free(f);
	free(logits);
	test_golden_free(&g);
	model_free(&m);
}

START_TEST(converted_f32_matches_the_exact_logits_and_greedy_continuation)
{
	char path[256];

	convert_golden(_i, "f32", path, sizeof(path));
	check_model(_i, path, "f32", TOL_F32);
	unlink(path);
}
END_TEST

START_TEST(converted_int8_keeps_the_greedy_continuation_within_its_bound)
{
	char path[256];

	convert_golden(_i, "int8", path, sizeof(path));
	check_model(_i, path, "int8", TOL_INT8);
	unlink(path);
}
END_TEST

/* ALiBi biases by absolute key position, so every way of stepping through
 * the cache must give the same logits: token by token and in chunks of 7
 * against one shot (only GEMM vs GEMV rounding differs). */
#define TOL_SAME 1e-5

START_TEST(falcon_rw_decode_and_chunks_equal_one_shot_prefill)
{
	const int rw = 6;
	char path[256], err[EMBER_ERR_MAX] = "";
	struct forward_opts one = {.n_ctx = N_IN}, seven = {.n_ctx = N_IN, .max_batch = 7};
	struct forward_ctx *f = NULL;
	struct test_golden g;
	struct model m;
	float *shot, *step;
	double rel;
	int t;

	ck_assert_str_eq(archs[rw].dir, "falcon-rw");
	convert_golden(rw, "f32", path, sizeof(path));
	ck_assert_msg(model_open(&m, path, err) == 0, "%s", err);
	test_golden_load(&g, archs[rw].dir, m.hp.n_vocab);
	shot = malloc(sizeof(float) * N_IN * g.n_vocab);
	step = malloc(sizeof(float) * N_IN * g.n_vocab);
	ck_assert_int_eq(forward_new(&f, &m, &one, err), 0);
	ck_assert_int_eq(forward_eval(f, g.input, N_IN, shot, 1, err), 0);
	forward_free(f);
	ck_assert_int_eq(forward_new(&f, &m, &one, err), 0);
	for (t = 0; t < N_IN; t++)
		ck_assert_int_eq(forward_eval(f, &g.input[t], 1, step + (size_t)t * g.n_vocab, 0, err),
				 0);
	forward_free(f);
	rel = test_logits_dist(step, shot, N_IN, g.n_vocab);
	ck_assert_msg(rel <= TOL_SAME, "decode vs prefill: %.3g", rel);
	ck_assert_int_eq(forward_new(&f, &m, &seven, err), 0);
	ck_assert_int_eq(forward_eval(f, g.input, N_IN, step, 1, err), 0);
	forward_free(f);
	rel = test_logits_dist(step, shot, N_IN, g.n_vocab);
	ck_assert_msg(rel <= TOL_SAME, "chunks of 7 vs one shot: %.3g", rel);
	free(shot);
	free(step);
	test_golden_free(&g);
	model_free(&m);
	unlink(path);
}
END_TEST

/* ---- tokenizer ---------------------------------------------------------------- */

/* Texts every golden vocabulary must carry through encode and decode:
 * words, spaces (leading, repeated), digits, punctuation, newlines and
 * multi-byte UTF-8 (byte fallback or byte-level pieces). */
static const char *const texts[] = {
	"Hello world",
	" The quick brown fox jumps over the lazy dog.",
	"numbers 12345 and   spaces\n\ttabs, newlines!?",
	"na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac",
};

#define MAX_IDS 512

struct tok_file {
	struct gguf g;
	struct tokenizer *t;
};

static void tok_open(struct tok_file *tf, const char *path)
{
	char err[EMBER_ERR_MAX] = "";

	ck_assert_msg(gguf_open(&tf->g, path, err) == 0, "%s: %s", path, err);
	ck_assert_msg(tokenizer_new(&tf->t, &tf->g, err) == 0, "%s: tokenizer: %s", path, err);
}

static void tok_close(struct tok_file *tf)
{
	tokenizer_free(tf->t);
	gguf_close(&tf->g);
}

static size_t encode(const struct tokenizer *t, const char *text, int32_t *ids)
{
	int64_t n = tokenizer_encode(t, text, strlen(text), 0, 0, ids, MAX_IDS);

	ck_assert_msg(n > 0 && n <= MAX_IDS, "encode '%s': %lld", text, (long long)n);
	return (size_t)n;
}

/* Both tokenizers give the same ids for every text. */
static void assert_same_ids(const struct tokenizer *a, const struct tokenizer *b, const char *what)
{
	int32_t ia[MAX_IDS], ib[MAX_IDS];
	size_t k, na, nb;

	for (k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
		na = encode(a, texts[k], ia);
		nb = encode(b, texts[k], ib);
		ck_assert_msg(na == nb && memcmp(ia, ib, na * sizeof(int32_t)) == 0,
			      "%s: text %zu: %zu vs %zu ids differ", what, k, na, nb);
	}
}

/* Writes `src`'s keys but `drop` (no tensors) to `path`. */
static void copy_keys_without(const struct gguf *src, const char *drop, const char *path)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf_writer *w;
	uint64_t i;

	ck_assert_int_eq(gguf_writer_new(&w, path, err), 0);
	for (i = 0; i < src->n_kv; i++)
		if (!gguf_str_eq(src->kv[i].key, drop))
			ck_assert_int_eq(gguf_writer_copy_kv(w, &src->kv[i]), 0);
	ck_assert_msg(gguf_writer_write_header(w, err) == 0, "%s", err);
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "%s", err);
	gguf_writer_free(w);
}

START_TEST(converted_tokenizer_round_trips_and_matches_llama_cpp)
{
	const int a = tok_archs[_i];
	char path[256], ref[256], arrays[300], err[EMBER_ERR_MAX] = "";
	struct tok_file ours, theirs;
	struct gguf_str model;
	int32_t ids[MAX_IDS];
	char buf[1024];
	size_t k, n;

	convert_golden(a, "f32", path, sizeof(path));
	tok_open(&ours, path);
	for (k = 0; k < sizeof(texts) / sizeof(texts[0]); k++) {
		int64_t len;

		n = encode(ours.t, texts[k], ids);
		len = tokenizer_decode(ours.t, ids, n, 0, buf, sizeof(buf));
		ck_assert_msg(len == (int64_t)strlen(texts[k]) && memcmp(buf, texts[k], (size_t)len) == 0,
			      "%s: text %zu decodes to '%.*s'", archs[a].dir, k,
			      (int)(len > 0 && len < (int64_t)sizeof(buf) ? len : 0), buf);
	}
	snprintf(ref, sizeof(ref), GOLDEN "%s/model-f32.gguf", archs[a].ref_tok);
	tok_open(&theirs, ref);
	ck_assert_int_eq(tokenizer_n_vocab(ours.t), tokenizer_n_vocab(theirs.t));
	ck_assert_int_eq(tokenizer_bos(ours.t), tokenizer_bos(theirs.t));
	ck_assert_int_eq(tokenizer_eos(ours.t), tokenizer_eos(theirs.t));
	assert_same_ids(ours.t, theirs.t, "ours vs llama.cpp's");
	tok_close(&theirs);

	/* SentencePiece: our file loads the tokenizer.model bytes; without
	 * that key the same file takes the arrays path. */
	ck_assert_int_eq(gguf_get_str(&ours.g, "tokenizer.ggml.model", &model), 0);
	if (gguf_str_eq(model, "llama")) {
		ck_assert_ptr_nonnull(gguf_find_kv(&ours.g, "ember.tokenizer.spm_model"));
		snprintf(arrays, sizeof(arrays), "%s.arrays.gguf", path);
		copy_keys_without(&ours.g, "ember.tokenizer.spm_model", arrays);
		tok_open(&theirs, arrays);
		ck_assert_ptr_null(gguf_find_kv(&theirs.g, "ember.tokenizer.spm_model"));
		assert_same_ids(ours.t, theirs.t, "spm_model bytes vs arrays");
		tok_close(&theirs);
		unlink(arrays);
		printf("golden: %-9s tokenizer: spm_model bytes path == arrays path\n",
		       archs[a].dir);
	}
	tok_close(&ours);
	(void)err;
	unlink(path);
}
END_TEST

Suite *suite_golden(void)
{
	Suite *s = suite_create("golden");
	TCase *tc = tcase_create("convert");
	TCase *tt = tcase_create("tokenizer");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, converted_f32_matches_the_exact_logits_and_greedy_continuation, 0,
			    N_ARCHS);
	tcase_add_loop_test(tc, converted_int8_keeps_the_greedy_continuation_within_its_bound, 0,
			    N_INT8);
	tcase_add_test(tc, falcon_rw_decode_and_chunks_equal_one_shot_prefill);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tt, 60);
	tcase_add_loop_test(tt, converted_tokenizer_round_trips_and_matches_llama_cpp, 0,
			    N_TOK_ARCHS);
	suite_add_tcase(s, tt);
	return s;
}
