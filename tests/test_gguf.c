/*
 * test_gguf.c - the GGUF reader and writer on whole files: the golden
 * llama file's keys and tensors, the typed getters, a byte-exact round
 * trip through the writer, its key order and alignment, and an
 * unfinished write leaving no file. Files assembled in memory (valid,
 * malformed, truncated, byte-flipped) are in test_gguf_parse.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "gguf.h"
#include "testutil.h"

#define GOLDEN "../shared/golden/llama/model-f32.gguf"

/* ---- the golden llama file ------------------------------------------------ */

START_TEST(golden_llama_keys_and_tensors_read_back)
{
	char err[EMBER_ERR_MAX] = "";
	const struct gguf_tensor *t;
	const struct gguf_kv *kv;
	struct gguf g;
	struct gguf_str s;
	uint32_t v;
	float f;
	double d;

	ck_assert_msg(gguf_open(&g, GOLDEN, err) == 0, "%s", err);
	ck_assert_uint_eq(g.version, 3);
	ck_assert_uint_eq(g.alignment, 32);
	ck_assert_uint_eq(g.n_tensors, 21);
	ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &s), 0);
	ck_assert(gguf_str_eq(s, "llama"));
	ck_assert_int_eq(gguf_get_u32(&g, "llama.block_count", &v), 0);
	ck_assert_uint_eq(v, 2);
	ck_assert_int_eq(gguf_get_u32(&g, "llama.embedding_length", &v), 0);
	ck_assert_uint_eq(v, 128);
	ck_assert_int_eq(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f), 0);
	ck_assert_float_eq_tol(f, 1e-5f, 1e-9f);

	kv = gguf_find_kv(&g, "tokenizer.ggml.tokens");
	ck_assert_ptr_nonnull(kv);
	ck_assert_int_eq(kv->arr_type, GGUF_TYPE_STRING);
	ck_assert_uint_eq(kv->arr_n, 1000);
	ck_assert_int_eq(gguf_arr_str(kv, 1, &s), 0);
	ck_assert(gguf_str_eq(s, "<s>"));
	ck_assert_int_eq(gguf_arr_str(kv, 1000, &s), EMBER_ERANGE);
	ck_assert_int_eq(gguf_arr_num(kv, 0, &d), EMBER_ETYPE);
	kv = gguf_find_kv(&g, "tokenizer.ggml.token_type");
	ck_assert_ptr_nonnull(kv);
	ck_assert_int_eq(gguf_arr_num(kv, 0, &d), 0);
	ck_assert_double_eq(d, 2);

	t = gguf_find_tensor(&g, "token_embd.weight");
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(t->n_dims, 2);
	ck_assert_uint_eq(t->ne[0], 128);
	ck_assert_uint_eq(t->ne[1], 1000);
	ck_assert_uint_eq(t->ne[2], 1);
	ck_assert_uint_eq(t->type, DTYPE_F32);
	ck_assert_uint_eq(t->size, 128 * 1000 * 4);
	ck_assert_ptr_eq(t->data, g.map + g.data_offset + t->offset);
	ck_assert_ptr_nonnull(gguf_find_tensor(&g, "blk.1.attn_v.weight"));
	ck_assert_ptr_null(gguf_find_tensor(&g, "blk.2.attn_v.weight"));
	ck_assert_ptr_null(gguf_find_kv(&g, "llama.nope"));
	gguf_close(&g);
	gguf_close(&g); /* closing twice is harmless */
}
END_TEST

START_TEST(typed_getters_convert_or_refuse)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g;
	uint64_t u;
	int64_t i;
	uint32_t v;
	float f;
	int b;

	ck_assert_msg(gguf_open(&g, GOLDEN, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_get_u64(&g, "llama.vocab_size", &u), 0);
	ck_assert_uint_eq(u, 1000);
	ck_assert_int_eq(gguf_get_i64(&g, "llama.vocab_size", &i), 0);
	ck_assert_int_eq(i, 1000);
	ck_assert_int_eq(gguf_get_u32(&g, "general.architecture", &v), EMBER_ETYPE);
	ck_assert_int_eq(gguf_get_f32(&g, "llama.vocab_size", &f), EMBER_ETYPE);
	ck_assert_int_eq(gguf_get_u32(&g, "missing.key", &v), EMBER_ENOTFOUND);
	ck_assert_int_eq(gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", &b), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(gguf_get_bool(&g, "tokenizer.ggml.add_eos_token", &b), 0);
	ck_assert_int_eq(b, 0);
	gguf_close(&g);
}
END_TEST

/* ---- the writer ----------------------------------------------------------- */

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/ember-gguf-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	ck_assert_int_eq(test_remove_tree(tmpdir), 0);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static int exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

START_TEST(round_trip_of_llama_cpp_file_is_byte_identical)
{
	char err[EMBER_ERR_MAX] = "", out[128], tmp[140];
	struct gguf_writer *w;
	struct gguf g;
	uint8_t *a, *b;
	size_t la, lb;
	uint64_t i;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/copy.gguf", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	ck_assert_msg(gguf_open(&g, GOLDEN, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_writer_new(&w, out, err), 0);
	for (i = 0; i < g.n_kv; i++)
		ck_assert_int_eq(gguf_writer_copy_kv(w, &g.kv[i]), 0);
	for (i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
		ck_assert_int_eq(gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne), 0);
	}
	ck_assert_msg(gguf_writer_write_header(w, err) == 0, "%s", err);
	for (i = 0; i < g.n_tensors; i++) { /* in two pieces: any split is allowed */
		const struct gguf_tensor *t = &g.tensors[i];
		size_t half = (size_t)t->size / 2;
		ck_assert_int_eq(gguf_writer_write_data(w, t->data, half, err), 0);
		ck_assert_int_eq(gguf_writer_write_data(w, (const uint8_t *)t->data + half,
							(size_t)t->size - half, err),
				 0);
	}
	ck_assert(exists(tmp) && !exists(out));
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "%s", err);
	ck_assert(!exists(tmp) && exists(out));
	gguf_writer_free(w);

	a = read_all(GOLDEN, &la);
	b = read_all(out, &lb);
	ck_assert_uint_eq(la, lb);
	ck_assert_msg(memcmp(a, b, la) == 0, "round trip differs");
	free(a);
	free(b);
	gguf_close(&g);
	remove_tmpdir();
}
END_TEST

/* The writer test's keys, one of each type, in this order (the
 * architecture is set again later: it keeps its first place). */
static const char *const toks[] = {"<s>", "hello", ""};
static const float scores[] = {0.5f, -1.25f, 3};
static const int32_t ids[] = {-7, 0, 42};

static void writer_set_keys(struct gguf_writer *w)
{
	ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "first"), 0);
	ck_assert_int_eq(gguf_writer_set_i32(w, "x.i32", -5), 0);
	ck_assert_int_eq(gguf_writer_set_u64(w, "x.u64", 1ull << 40), 0);
	ck_assert_int_eq(gguf_writer_set_f32(w, "x.f32", 0.25f), 0);
	ck_assert_int_eq(gguf_writer_set_bool(w, "x.bool", 7), 0);
	ck_assert_int_eq(gguf_writer_set_arr_str(w, "x.toks", toks, NULL, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.scores", GGUF_TYPE_FLOAT32, scores, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.ids", GGUF_TYPE_INT32, ids, 3), 0);
}

START_TEST(writer_keeps_key_order_types_and_alignment)
{
	static const uint8_t blob[200] = {1, 2, 3};
	const uint64_t ne_a[] = {10}, ne_b[] = {32, 2};
	char err[EMBER_ERR_MAX] = "", out[128];
	const struct gguf_tensor *t;
	const struct gguf_kv *kv;
	struct gguf_writer *w;
	struct gguf_str s;
	struct gguf g;
	int64_t i64;
	uint32_t v;
	double d;
	float f;
	int b;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/w.gguf", tmpdir);
	ck_assert_int_eq(gguf_writer_new(&w, out, err), 0);
	writer_set_keys(w);
	ck_assert_int_eq(gguf_writer_set_u32(w, "general.alignment", 64), 0);
	ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama"), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.bad", GGUF_TYPE_STRING, toks, 3), EMBER_EINVAL);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "a", DTYPE_F32, 1, ne_a), 0);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "b", DTYPE_Q8_0, 2, ne_b), 0);
	/* the bad array above is reported again here */
	ck_assert_int_eq(gguf_writer_write_header(w, err), EMBER_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "x.bad"));
	gguf_writer_free(w);
	ck_assert(!exists(out));

	ck_assert_int_eq(gguf_writer_new(&w, out, err), 0);
	writer_set_keys(w);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "a", DTYPE_F32, 1, ne_a), 0);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "b", DTYPE_Q8_0, 2, ne_b), 0);
	ck_assert_int_eq(gguf_writer_set_u32(w, "general.alignment", 64), 0);
	ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "llama"), 0);
	ck_assert_msg(gguf_writer_write_header(w, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_writer_write_data(w, blob, 40, err), 0);
	/* b is 68 bytes; one call may span the tensor boundary */
	ck_assert_int_eq(gguf_writer_write_data(w, blob, 68, err), 0);
	ck_assert_int_eq(gguf_writer_write_data(w, blob, 1, err), EMBER_EINVAL);
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "%s", err);
	gguf_writer_free(w);

	ck_assert_msg(gguf_open(&g, out, err) == 0, "%s", err);
	ck_assert_uint_eq(g.alignment, 64);
	ck_assert(gguf_str_eq(g.kv[0].key, "general.architecture")); /* replaced in place */
	ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &s), 0);
	ck_assert(gguf_str_eq(s, "llama"));
	ck_assert_int_eq(gguf_get_i64(&g, "x.i32", &i64), 0);
	ck_assert_int_eq(i64, -5);
	ck_assert_int_eq(gguf_get_u32(&g, "x.i32", &v), EMBER_ETYPE);
	ck_assert_int_eq(gguf_get_u32(&g, "x.u64", &v), EMBER_ETYPE);
	ck_assert_int_eq(gguf_get_f32(&g, "x.f32", &f), 0);
	ck_assert_float_eq(f, 0.25f);
	ck_assert_int_eq(gguf_get_bool(&g, "x.bool", &b), 0);
	ck_assert_int_eq(b, 1);
	kv = gguf_find_kv(&g, "x.toks");
	ck_assert_int_eq(gguf_arr_str(kv, 1, &s), 0);
	ck_assert(gguf_str_eq(s, "hello"));
	ck_assert_int_eq(gguf_arr_str(kv, 2, &s), 0);
	ck_assert_uint_eq(s.len, 0);
	ck_assert_int_eq(gguf_arr_num(gguf_find_kv(&g, "x.scores"), 1, &d), 0);
	ck_assert_double_eq(d, -1.25);
	ck_assert_int_eq(gguf_arr_num(gguf_find_kv(&g, "x.ids"), 0, &d), 0);
	ck_assert_double_eq(d, -7);
	t = gguf_find_tensor(&g, "b");
	ck_assert_uint_eq(t->offset, 64);
	ck_assert_uint_eq(g.data_offset % 64, 0);
	ck_assert_uint_eq(((const uint8_t *)t->data)[0], 1);
	gguf_close(&g);
	remove_tmpdir();
}
END_TEST

START_TEST(unfinished_writer_leaves_no_file)
{
	const uint64_t ne[] = {33};
	char err[EMBER_ERR_MAX] = "", out[128], tmp[140];
	struct gguf_writer *w;
	float x[8] = {0};

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/u.gguf", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	ck_assert_int_eq(gguf_writer_new(&w, out, err), 0);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "bad", DTYPE_Q8_0, 1, ne), EMBER_EFORMAT);
	ck_assert_int_eq(gguf_writer_write_header(w, err), EMBER_EFORMAT);
	ck_assert_ptr_nonnull(strstr(err, "bad"));
	gguf_writer_free(w);
	ck_assert(!exists(out) && !exists(tmp));

	ck_assert_int_eq(gguf_writer_new(&w, out, err), 0);
	ck_assert_int_eq(gguf_writer_add_tensor(w, "x", DTYPE_F32, 1, ne), 0);
	ck_assert_int_eq(gguf_writer_write_header(w, err), 0);
	ck_assert_int_eq(gguf_writer_write_data(w, x, sizeof(x), err), 0);
	ck_assert_int_eq(gguf_writer_finish(w, err), EMBER_EINVAL); /* 32 of 132 bytes */
	ck_assert(exists(tmp));
	gguf_writer_free(w);
	ck_assert(!exists(out) && !exists(tmp));
	gguf_writer_free(NULL);

	ck_assert_int_eq(gguf_writer_new(&w, "/nonexistent-dir/x.gguf", err), EMBER_EIO);
	ck_assert_ptr_null(w);
	remove_tmpdir();
}
END_TEST

Suite *suite_gguf(void)
{
	Suite *s = suite_create("gguf");
	TCase *tc = tcase_create("gguf");

	tcase_add_test(tc, golden_llama_keys_and_tensors_read_back);
	tcase_add_test(tc, typed_getters_convert_or_refuse);
	tcase_add_test(tc, round_trip_of_llama_cpp_file_is_byte_identical);
	tcase_add_test(tc, writer_keeps_key_order_types_and_alignment);
	tcase_add_test(tc, unfinished_writer_leaves_no_file);
	suite_add_tcase(s, tc);
	return s;
}
