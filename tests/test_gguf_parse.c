/*
 * test_gguf_parse.c - the GGUF reader on files assembled in memory: a
 * small valid file, every truncation of it, a table of malformed files
 * (each rejected with a reason), nesting within the limit, missing and
 * non-regular paths, and seeded byte flips. Whole files (the golden
 * llama file, the writer) are in test_gguf.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "testutil.h"

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

/* A malformed file: build's bytes, or without build the one field
 * wrong of one of two shapes: with t.ne, one_tensor(t...); else a header
 * of kv.version and kv.n_kv keys and then one u32 key kv.key = kv.value. */
struct bad_case {
	const char *name;
	int code;
	const char *msg; /* a substring the error message must contain */
	void (*build)(struct buf *b);
	struct {
		uint32_t version;
		uint64_t n_kv;
		const char *key;
		uint32_t value;
	} kv;
	struct {
		uint32_t type, n_dims;
		const uint64_t *ne;
		uint64_t offset;
	} t;
};

static void bad_case_build(struct buf *b, const struct bad_case *c)
{
	if (c->build) {
		c->build(b);
	} else if (c->t.ne) {
		one_tensor(b, c->t.type, c->t.n_dims, c->t.ne, c->t.offset);
	} else {
		header(b, c->kv.version, 0, c->kv.n_kv);
		kv_u32(b, c->kv.key, c->kv.value);
	}
}

static const struct bad_case bad_cases[] = {
	{"bad magic", EMBER_EFORMAT, "magic", .build = bad_magic},
	{"version 1", EMBER_EUNSUPPORTED, "version 1", .kv = {1, 1, "a", 1}},
	{"version 4", EMBER_EUNSUPPORTED, "version 4", .kv = {4, 1, "a", 1}},
	{"big-endian", EMBER_EUNSUPPORTED, "big-endian", .kv = {3u << 24, 1, "a", 1}},
	{"absurd n_kv", EMBER_EFORMAT, "n_kv", .kv = {3, 1ull << 60, "a", 1}},
	{"absurd n_tensors", EMBER_EFORMAT, "n_tensors", .build = absurd_n_tensors},
	{"absurd string length", EMBER_EFORMAT, "length", .build = absurd_string_length},
	{"array count overflow", EMBER_EFORMAT, "cannot fit", .build = array_count_overflows_size},
	{"string array count", EMBER_EFORMAT, "cannot fit", .build = string_array_count_absurd},
	{"unknown value type", EMBER_EFORMAT, "value type 13", .build = unknown_value_type},
	{"unknown array elem type", EMBER_EFORMAT, "element type",
	 .build = unknown_array_element_type},
	{"nesting bomb", EMBER_EFORMAT, "nested", .build = nesting_bomb},
	{"duplicate key", EMBER_EFORMAT, "duplicate key 'a'", .build = duplicate_key},
	{"empty key", EMBER_EFORMAT, "empty key", .kv = {3, 1, "", 1}},
	{"alignment 48", EMBER_EFORMAT, "power of two",
	 .kv = {3, 1, "general.alignment", 48}},
	{"alignment 0", EMBER_EFORMAT, "power of two", .kv = {3, 1, "general.alignment", 0}},
	{"alignment as string", EMBER_EFORMAT, "not u32", .build = alignment_wrong_type},
	{"unknown tensor type", EMBER_EUNSUPPORTED, "type 4",
	 .t = {4, 1, NE_8, 0}}, /* 4 was Q4_2, removed */
	{"tensor type 2^32-1", EMBER_EUNSUPPORTED, "unknown tensor type",
	 .t = {0xffffffffu, 1, NE_8, 0}},
	{"n_dims 0", EMBER_EFORMAT, "0 dimensions", .t = {DTYPE_F32, 0, NE_8, 0}},
	{"n_dims 5", EMBER_EFORMAT, "5 dimensions", .t = {DTYPE_F32, 5, NE_5, 0}},
	{"ne zero", EMBER_EFORMAT, "zero", .t = {DTYPE_F32, 2, NE_ZERO, 0}},
	{"ne product overflow", EMBER_EFORMAT, "overflow", .t = {DTYPE_F32, 2, NE_HUGE, 0}},
	{"ne bytes past file", EMBER_EFORMAT, "past end of file",
	 .t = {DTYPE_F64, 2, NE_BYTES_HUGE, 0}},
	{"ne bytes overflow", EMBER_EFORMAT, "byte size overflows",
	 .t = {DTYPE_F64, 2, NE_BYTES_OVERFLOW, 0}}, /* 2^62 elements, 2^65 bytes */
	{"ne[0] % block", EMBER_EFORMAT, "multiple of the q8_0 block",
	 .t = {DTYPE_Q8_0, 1, NE_33, 0}},
	{"offset past end", EMBER_EFORMAT, "tensor 'w': data [",
	 .t = {DTYPE_F32, 1, NE_8, 64}},
	{"offset near 2^64", EMBER_EFORMAT, "past end of file",
	 .t = {DTYPE_F32, 1, NE_8, UINT64_MAX - 31}},
	{"offset misaligned", EMBER_EFORMAT, "alignment", .t = {DTYPE_F32, 1, NE_8, 4}},
	{"data section missing", EMBER_EFORMAT, "past end of file", .build = data_section_missing},
	{"overlapping tensors", EMBER_EFORMAT, "overlap", .build = overlapping_tensors},
	{"duplicate tensor name", EMBER_EFORMAT, "duplicate tensor name",
	 .build = duplicate_tensor_name},
};

START_TEST(malformed_files_are_rejected_with_a_reason)
{
	const struct bad_case *bc = &bad_cases[_i];
	char err[EMBER_ERR_MAX] = "";
	struct buf b = {0};
	struct gguf g;
	uint8_t *copy;
	int rc;

	bad_case_build(&b, bc);
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

Suite *suite_gguf_parse(void)
{
	Suite *s = suite_create("gguf_parse");
	TCase *tc = tcase_create("gguf_parse");

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
