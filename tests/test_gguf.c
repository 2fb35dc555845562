/*
 * test_gguf.c - the GGUF reader and writer: the golden llama file, a
 * byte-exact round trip, a table of malformed files assembled in memory,
 * every truncation and seeded byte flips of a small valid file.
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

/* ---- assembling GGUF bytes ------------------------------------------------ */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		ck_assert_ptr_nonnull(b->p);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void u32(struct buf *b, uint32_t v)
{
	uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};

	put(b, le, 4);
}

static void u64(struct buf *b, uint64_t v)
{
	u32(b, (uint32_t)v);
	u32(b, (uint32_t)(v >> 32));
}

static void str(struct buf *b, const char *s)
{
	u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void header(struct buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	put(b, "GGUF", 4);
	u32(b, version);
	u64(b, n_tensors);
	u64(b, n_kv);
}

static void kv_u32(struct buf *b, const char *key, uint32_t v)
{
	str(b, key);
	u32(b, GGUF_TYPE_UINT32);
	u32(b, v);
}

static void kv_str(struct buf *b, const char *key, const char *v)
{
	str(b, key);
	u32(b, GGUF_TYPE_STRING);
	str(b, v);
}

/* A tensor info with ne[0..n_dims) from `ne`. */
static void tinfo(struct buf *b, const char *name, uint32_t type, uint32_t n_dims,
		  const uint64_t *ne, uint64_t offset)
{
	uint32_t i;

	str(b, name);
	u32(b, n_dims);
	for (i = 0; i < n_dims; i++)
		u64(b, ne[i]);
	u32(b, type);
	u64(b, offset);
}

/* Pads to the default alignment, then `n` data bytes (a counting pattern). */
static void data(struct buf *b, size_t n)
{
	uint8_t z = 0;
	size_t i;

	while (b->len % GGUF_DEFAULT_ALIGNMENT)
		put(b, &z, 1);
	for (i = 0; i < n; i++) {
		z = (uint8_t)i;
		put(b, &z, 1);
	}
}

static const uint64_t NE_4x2[] = {4, 2}, NE_8[] = {8}, NE_16[] = {16}, NE_32[] = {32};

/* Two kvs that every small file shares, then one string array. */
static void small_kvs(struct buf *b)
{
	kv_str(b, "general.architecture", "test");
	kv_u32(b, "general.alignment", 32);
	str(b, "tok");
	u32(b, GGUF_TYPE_ARRAY);
	u32(b, GGUF_TYPE_STRING);
	u64(b, 3);
	str(b, "a");
	str(b, "");
	str(b, "xyz");
}

/* The small valid file: 3 kvs, t0 f32 [4,2] at 0, t1 q8_0 [32] at 32; the
 * last tensor ends the file, so any shorter prefix is invalid. */
static void build_valid(struct buf *b)
{
	header(b, 3, 2, 3);
	small_kvs(b);
	tinfo(b, "t0", DTYPE_F32, 2, NE_4x2, 0);
	tinfo(b, "t1", DTYPE_Q8_0, 1, NE_32, 32);
	data(b, 32 + 34);
}

/* Opens `len` bytes from a heap copy of exactly that size, so ASan sees
 * any read past the end. */
static int open_copy(struct gguf *g, const uint8_t *p, size_t len, char *err, uint8_t **copy)
{
	*copy = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(*copy);
	memcpy(*copy, p, len);
	return gguf_open_memory(g, *copy, len, err);
}

/* Reads everything a loader would, to prove the pointers stay in bounds. */
static void touch_all(const struct gguf *g)
{
	volatile uint8_t sink = 0;
	struct gguf_str s;
	uint64_t i, j;
	double d;

	for (i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		for (j = 0; j < kv->arr_n && kv->type == GGUF_TYPE_ARRAY; j++) {
			if (gguf_arr_str(kv, j, &s) == 0 && s.len)
				sink ^= (uint8_t)(s.ptr[0] ^ s.ptr[s.len - 1]);
			if (gguf_arr_num(kv, j, &d) == 0)
				sink ^= (uint8_t)(d != 0);
		}
	}
	for (i = 0; i < g->n_tensors; i++) {
		const uint8_t *p = g->tensors[i].data;
		sink ^= (uint8_t)(p[0] ^ p[g->tensors[i].size - 1]);
	}
	(void)sink;
}

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

START_TEST(writer_keeps_key_order_types_and_alignment)
{
	static const char *const toks[] = {"<s>", "hello", ""};
	static const float scores[] = {0.5f, -1.25f, 3};
	static const int32_t ids[] = {-7, 0, 42};
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
	ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "first"), 0);
	ck_assert_int_eq(gguf_writer_set_i32(w, "x.i32", -5), 0);
	ck_assert_int_eq(gguf_writer_set_u64(w, "x.u64", 1ull << 40), 0);
	ck_assert_int_eq(gguf_writer_set_f32(w, "x.f32", 0.25f), 0);
	ck_assert_int_eq(gguf_writer_set_bool(w, "x.bool", 7), 0);
	ck_assert_int_eq(gguf_writer_set_arr_str(w, "x.toks", toks, NULL, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.scores", GGUF_TYPE_FLOAT32, scores, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.ids", GGUF_TYPE_INT32, ids, 3), 0);
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
	ck_assert_int_eq(gguf_writer_set_str(w, "general.architecture", "first"), 0);
	ck_assert_int_eq(gguf_writer_set_i32(w, "x.i32", -5), 0);
	ck_assert_int_eq(gguf_writer_set_u64(w, "x.u64", 1ull << 40), 0);
	ck_assert_int_eq(gguf_writer_set_f32(w, "x.f32", 0.25f), 0);
	ck_assert_int_eq(gguf_writer_set_bool(w, "x.bool", 7), 0);
	ck_assert_int_eq(gguf_writer_set_arr_str(w, "x.toks", toks, NULL, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.scores", GGUF_TYPE_FLOAT32, scores, 3), 0);
	ck_assert_int_eq(gguf_writer_set_arr(w, "x.ids", GGUF_TYPE_INT32, ids, 3), 0);
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

/* ---- malformed files -------------------------------------------------------- */

START_TEST(small_valid_file_opens)
{
	char err[EMBER_ERR_MAX] = "";
	struct buf b = {0};
	struct gguf_str s;
	struct gguf g;
	uint8_t *copy;

	build_valid(&b);
	ck_assert_msg(open_copy(&g, b.p, b.len, err, &copy) == 0, "%s", err);
	ck_assert_int_eq(gguf_arr_str(gguf_find_kv(&g, "tok"), 2, &s), 0);
	ck_assert(gguf_str_eq(s, "xyz"));
	ck_assert_uint_eq(gguf_find_tensor(&g, "t1")->size, 34);
	touch_all(&g);
	gguf_close(&g);
	free(copy);
	free(b.p);
}
END_TEST

START_TEST(every_truncation_is_rejected)
{
	char err[EMBER_ERR_MAX];
	struct buf b = {0};
	struct gguf g;
	uint8_t *copy;
	size_t cut;

	build_valid(&b);
	for (cut = 0; cut < b.len; cut++) {
		err[0] = '\0';
		ck_assert_msg(open_copy(&g, b.p, cut, err, &copy) < 0, "cut at %zu opened", cut);
		ck_assert_msg(err[0] != '\0', "cut at %zu: no message", cut);
		free(copy);
	}
	free(b.p);
}
END_TEST

static void bad_magic(struct buf *b)
{
	build_valid(b);
	b->p[0] = 'X';
}

static void version_1(struct buf *b)
{
	header(b, 1, 0, 1);
	kv_u32(b, "a", 1);
}

static void version_4(struct buf *b)
{
	header(b, 4, 0, 1);
	kv_u32(b, "a", 1);
}

static void big_endian(struct buf *b)
{
	header(b, 3u << 24, 0, 1);
	kv_u32(b, "a", 1);
}

static void absurd_n_kv(struct buf *b)
{
	header(b, 3, 0, 1ull << 60);
	kv_u32(b, "a", 1);
}

static void absurd_n_tensors(struct buf *b)
{
	header(b, 3, 1ull << 60, 1);
	kv_u32(b, "a", 1);
	tinfo(b, "t", DTYPE_F32, 1, NE_8, 0);
	data(b, 32);
}

static void absurd_string_length(struct buf *b)
{
	header(b, 3, 0, 1);
	u64(b, 1ull << 60);
	put(b, "key", 3);
	u32(b, GGUF_TYPE_UINT8);
	put(b, "\0", 1);
}

static void array_count_overflows_size(struct buf *b)
{
	header(b, 3, 0, 1);
	str(b, "arr");
	u32(b, GGUF_TYPE_ARRAY);
	u32(b, GGUF_TYPE_UINT64);
	u64(b, 1ull << 61); /* * 8 wraps to 0 */
	u64(b, 0);
}

static void string_array_count_absurd(struct buf *b)
{
	header(b, 3, 0, 1);
	str(b, "arr");
	u32(b, GGUF_TYPE_ARRAY);
	u32(b, GGUF_TYPE_STRING);
	u64(b, 1ull << 62);
	str(b, "x");
}

static void unknown_value_type(struct buf *b)
{
	header(b, 3, 0, 1);
	str(b, "k");
	u32(b, GGUF_TYPE_COUNT);
	u64(b, 0);
}

static void unknown_array_element_type(struct buf *b)
{
	header(b, 3, 0, 1);
	str(b, "k");
	u32(b, GGUF_TYPE_ARRAY);
	u32(b, 99);
	u64(b, 1);
	u64(b, 0);
}

static void nesting_bomb(struct buf *b)
{
	int i;

	header(b, 3, 0, 1);
	str(b, "k");
	u32(b, GGUF_TYPE_ARRAY);
	for (i = 0; i < 10000; i++) {
		u32(b, GGUF_TYPE_ARRAY);
		u64(b, 1);
	}
	u32(b, GGUF_TYPE_UINT8);
	u64(b, 0);
}

static void duplicate_key(struct buf *b)
{
	header(b, 3, 0, 3);
	kv_u32(b, "a", 1);
	kv_u32(b, "b", 1);
	kv_str(b, "a", "again");
}

static void empty_key(struct buf *b)
{
	header(b, 3, 0, 1);
	kv_u32(b, "", 1);
}

static void alignment_not_pow2(struct buf *b)
{
	header(b, 3, 0, 1);
	kv_u32(b, "general.alignment", 48);
}

static void alignment_zero(struct buf *b)
{
	header(b, 3, 0, 1);
	kv_u32(b, "general.alignment", 0);
}

static void alignment_wrong_type(struct buf *b)
{
	header(b, 3, 0, 1);
	kv_str(b, "general.alignment", "32");
}

/* One f32 tensor with the given shape/type/offset and 64 data bytes. */
static void one_tensor(struct buf *b, uint32_t type, uint32_t n_dims, const uint64_t *ne,
		       uint64_t offset)
{
	header(b, 3, 1, 1);
	kv_str(b, "general.architecture", "test");
	tinfo(b, "w", type, n_dims, ne, offset);
	data(b, 64);
}

static const uint64_t NE_5[] = {2, 2, 2, 2, 2}, NE_ZERO[] = {8, 0},
		      NE_HUGE[] = {1ull << 32, 1ull << 32}, NE_BYTES_HUGE[] = {1ull << 30, 1ull << 30},
		      NE_BYTES_OVERFLOW[] = {1ull << 31, 1ull << 31},
		      NE_33[] = {33};

static void unknown_tensor_type(struct buf *b)
{
	one_tensor(b, 4, 1, NE_8, 0); /* 4 was Q4_2, removed */
}

static void tensor_type_huge(struct buf *b)
{
	one_tensor(b, 0xffffffffu, 1, NE_8, 0);
}

static void n_dims_0(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 0, NE_8, 0);
}

static void n_dims_5(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 5, NE_5, 0);
}

static void ne_zero(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 2, NE_ZERO, 0);
}

static void ne_product_overflow(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 2, NE_HUGE, 0);
}

static void ne_bytes_past_file(struct buf *b)
{
	one_tensor(b, DTYPE_F64, 2, NE_BYTES_HUGE, 0);
}

static void ne_bytes_overflow(struct buf *b)
{
	one_tensor(b, DTYPE_F64, 2, NE_BYTES_OVERFLOW, 0); /* 2^62 elements, 2^65 bytes */
}

static void ne0_not_block_multiple(struct buf *b)
{
	one_tensor(b, DTYPE_Q8_0, 1, NE_33, 0);
}

static void offset_past_end(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 1, NE_8, 64);
}

static void offset_huge(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 1, NE_8, UINT64_MAX - 31);
}

static void offset_misaligned(struct buf *b)
{
	one_tensor(b, DTYPE_F32, 1, NE_8, 4);
}

static void data_section_missing(struct buf *b)
{
	header(b, 3, 1, 1);
	kv_str(b, "general.architecture", "test");
	tinfo(b, "w", DTYPE_F32, 1, NE_8, 0);
}

static void overlapping_tensors(struct buf *b)
{
	header(b, 3, 2, 1);
	kv_str(b, "general.architecture", "test");
	tinfo(b, "big", DTYPE_F32, 1, NE_16, 0); /* [0, 64) */
	tinfo(b, "inside", DTYPE_F32, 1, NE_8, 32);
	data(b, 96);
}

static void duplicate_tensor_name(struct buf *b)
{
	header(b, 3, 2, 1);
	kv_str(b, "general.architecture", "test");
	tinfo(b, "w", DTYPE_F32, 1, NE_8, 0);
	tinfo(b, "w", DTYPE_F32, 1, NE_8, 32);
	data(b, 64);
}

struct bad_case {
	const char *name;
	void (*build)(struct buf *b);
	int code;
	const char *msg; /* a substring the error message must contain */
};

static const struct bad_case bad_cases[] = {
	{"bad magic", bad_magic, EMBER_EFORMAT, "magic"},
	{"version 1", version_1, EMBER_EUNSUPPORTED, "version 1"},
	{"version 4", version_4, EMBER_EUNSUPPORTED, "version 4"},
	{"big-endian", big_endian, EMBER_EUNSUPPORTED, "big-endian"},
	{"absurd n_kv", absurd_n_kv, EMBER_EFORMAT, "n_kv"},
	{"absurd n_tensors", absurd_n_tensors, EMBER_EFORMAT, "n_tensors"},
	{"absurd string length", absurd_string_length, EMBER_EFORMAT, "length"},
	{"array count overflow", array_count_overflows_size, EMBER_EFORMAT, "cannot fit"},
	{"string array count", string_array_count_absurd, EMBER_EFORMAT, "cannot fit"},
	{"unknown value type", unknown_value_type, EMBER_EFORMAT, "value type 13"},
	{"unknown array elem type", unknown_array_element_type, EMBER_EFORMAT, "element type"},
	{"nesting bomb", nesting_bomb, EMBER_EFORMAT, "nested"},
	{"duplicate key", duplicate_key, EMBER_EFORMAT, "duplicate key 'a'"},
	{"empty key", empty_key, EMBER_EFORMAT, "empty key"},
	{"alignment 48", alignment_not_pow2, EMBER_EFORMAT, "power of two"},
	{"alignment 0", alignment_zero, EMBER_EFORMAT, "power of two"},
	{"alignment as string", alignment_wrong_type, EMBER_EFORMAT, "not u32"},
	{"unknown tensor type", unknown_tensor_type, EMBER_EUNSUPPORTED, "type 4"},
	{"tensor type 2^32-1", tensor_type_huge, EMBER_EUNSUPPORTED, "unknown tensor type"},
	{"n_dims 0", n_dims_0, EMBER_EFORMAT, "0 dimensions"},
	{"n_dims 5", n_dims_5, EMBER_EFORMAT, "5 dimensions"},
	{"ne zero", ne_zero, EMBER_EFORMAT, "zero"},
	{"ne product overflow", ne_product_overflow, EMBER_EFORMAT, "overflow"},
	{"ne bytes past file", ne_bytes_past_file, EMBER_EFORMAT, "past end of file"},
	{"ne bytes overflow", ne_bytes_overflow, EMBER_EFORMAT, "byte size overflows"},
	{"ne[0] % block", ne0_not_block_multiple, EMBER_EFORMAT, "multiple of the q8_0 block"},
	{"offset past end", offset_past_end, EMBER_EFORMAT, "tensor 'w': data ["},
	{"offset near 2^64", offset_huge, EMBER_EFORMAT, "past end of file"},
	{"offset misaligned", offset_misaligned, EMBER_EFORMAT, "alignment"},
	{"data section missing", data_section_missing, EMBER_EFORMAT, "past end of file"},
	{"overlapping tensors", overlapping_tensors, EMBER_EFORMAT, "overlap"},
	{"duplicate tensor name", duplicate_tensor_name, EMBER_EFORMAT, "duplicate tensor name"},
};

START_TEST(malformed_files_are_rejected_with_a_reason)
{
	const struct bad_case *bc = &bad_cases[_i];
	char err[EMBER_ERR_MAX] = "";
	struct buf b = {0};
	struct gguf g;
	uint8_t *copy;
	int rc;

	bc->build(&b);
	rc = open_copy(&g, b.p, b.len, err, &copy);
	ck_assert_msg(rc == bc->code, "%s: got %d (%s), want %d", bc->name, rc, err, bc->code);
	ck_assert_msg(strstr(err, bc->msg) != NULL, "%s: message '%s' lacks '%s'", bc->name, err,
		      bc->msg);
	ck_assert_ptr_null(g.kv); /* left closed */
	free(copy);
	free(b.p);
}
END_TEST

START_TEST(nested_arrays_within_the_limit_are_accepted)
{
	char err[EMBER_ERR_MAX] = "";
	struct buf b = {0};
	const struct gguf_kv *kv;
	struct gguf g;
	uint8_t *copy;
	double d;

	header(&b, 3, 0, 2);
	str(&b, "nested");
	u32(&b, GGUF_TYPE_ARRAY);
	u32(&b, GGUF_TYPE_ARRAY); /* [[1, 2], ["s"]] */
	u64(&b, 2);
	u32(&b, GGUF_TYPE_UINT16);
	u64(&b, 2);
	u32(&b, 0x00020001);
	u32(&b, GGUF_TYPE_STRING);
	u64(&b, 1);
	str(&b, "s");
	kv_u32(&b, "after", 5);
	ck_assert_msg(open_copy(&g, b.p, b.len, err, &copy) == 0, "%s", err);
	kv = gguf_find_kv(&g, "nested");
	ck_assert_int_eq(kv->arr_type, GGUF_TYPE_ARRAY);
	ck_assert_uint_eq(kv->arr_n, 2);
	ck_assert_int_eq(gguf_arr_num(kv, 0, &d), EMBER_ETYPE);
	ck_assert_ptr_nonnull(gguf_find_kv(&g, "after"));
	gguf_close(&g);
	free(copy);
	free(b.p);
}
END_TEST

START_TEST(open_reports_missing_and_non_regular_files)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g;

	ck_assert_int_eq(gguf_open(&g, "/nonexistent/model.gguf", err), EMBER_EIO);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/model.gguf"));
	ck_assert_int_eq(gguf_open(&g, "/tmp", err), EMBER_EFORMAT);
	gguf_close(&g);
}
END_TEST

/* xorshift64*: a seeded, reproducible stream. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

START_TEST(random_byte_flips_never_crash)
{
	char err[EMBER_ERR_MAX];
	struct buf b = {0};
	uint64_t seed = 0x5eed5eedull;
	int iter, k, opened = 0;
	struct gguf g;
	uint8_t *copy;

	build_valid(&b);
	copy = malloc(b.len);
	for (iter = 0; iter < 2000; iter++) {
		int flips = 1 + (int)(next_rand(&seed) % 4);
		memcpy(copy, b.p, b.len);
		for (k = 0; k < flips; k++) {
			/* mostly the header region, where the structure is */
			uint64_t r = next_rand(&seed);
			size_t at = (size_t)(r % (r & 1 ? b.len : 200));
			copy[at] ^= (uint8_t)(1u << (r >> 8) % 8 | (r >> 16 & 0xff));
		}
		if (gguf_open_memory(&g, copy, b.len, err) == 0) {
			touch_all(&g);
			opened++;
			gguf_close(&g);
		}
	}
	ck_assert_int_gt(opened, 0); /* some flips hit data bytes and stay valid */
	ck_assert_int_lt(opened, 2000);
	free(copy);
	free(b.p);
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
	tcase_add_test(tc, small_valid_file_opens);
	tcase_add_test(tc, every_truncation_is_rejected);
	tcase_add_loop_test(tc, malformed_files_are_rejected_with_a_reason, 0,
			    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, nested_arrays_within_the_limit_are_accepted);
	tcase_add_test(tc, open_reports_missing_and_non_regular_files);
	tcase_add_test(tc, random_byte_flips_never_crash);
	suite_add_tcase(s, tc);
	return s;
}
