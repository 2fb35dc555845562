/*
 * gguf.h - GGUF v2/v3 model files: a reader over a read-only mmap and a
 * streaming writer.
 *
 * The file format (all integers little-endian):
 *
 *   magic      "GGUF" (4 bytes)
 *   version    u32            2 or 3 (1 is refused: 32-bit counts)
 *   n_tensors  u64
 *   n_kv       u64
 *   kv[n_kv]   key: string, value_type: u32, value
 *   tensor_info[n_tensors]
 *              name: string, n_dims: u32 (1..4), ne[n_dims]: u64,
 *              type: u32 (dtype.h), offset: u64 (from the data section,
 *              a multiple of the alignment)
 *   padding    to `general.alignment` (u32 key, default 32, a power of 2)
 *   data       tensor bytes
 *
 *   string     len: u64, bytes (UTF-8, not NUL-terminated)
 *   value      by value_type: u8 i8 u16 i16 u32 i32 f32 bool(u8) string
 *              array(elem_type: u32, n: u64, n values) u64 i64 f64
 *
 * ne[0] is the innermost (contiguous) dimension: a weight matrix of
 * n_out rows of n_in elements has ne = {n_in, n_out}.
 *
 * Ownership: struct gguf is caller storage; gguf_open() fills it and owns the
 * mapping and its index arrays until gguf_close(). Every pointer handed out
 * (strings, tensor data) points into the map and lives as long as it. After
 * gguf_open() nothing is copied: many workers and processes share the same
 * pages. gguf_open_weights() (what model_open uses) reads the file instead
 * into a private read-only copy in 2 MiB pages where the kernel gives them
 * (gguf_map.h: decode streams faster from them), shared by every worker of
 * the process but not across processes.
 *
 * Validation: gguf_open() checks every count, length, offset and size against
 * the file (overflow-safe) before anything reads it, so later accessors need
 * no checks. A bad file yields EMBER_EFORMAT (or EMBER_EUNSUPPORTED for a
 * well-formed file using something we lack) and a message naming what is
 * wrong; it never reads outside the map.
 *
 * Thread safety: after gguf_open() returns, the reader is immutable; any
 * thread may call the accessors. The writer belongs to one thread.
 */
#ifndef EMBER_GGUF_H
#define EMBER_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

enum gguf_vtype {
	GGUF_TYPE_UINT8 = 0,
	GGUF_TYPE_INT8 = 1,
	GGUF_TYPE_UINT16 = 2,
	GGUF_TYPE_INT16 = 3,
	GGUF_TYPE_UINT32 = 4,
	GGUF_TYPE_INT32 = 5,
	GGUF_TYPE_FLOAT32 = 6,
	GGUF_TYPE_BOOL = 7,
	GGUF_TYPE_STRING = 8,
	GGUF_TYPE_ARRAY = 9,
	GGUF_TYPE_UINT64 = 10,
	GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12,
	GGUF_TYPE_COUNT
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the map: `len` bytes at `ptr`, NOT NUL-terminated. */
struct gguf_str {
	uint64_t len;
	const char *ptr;
};

struct gguf_kv {
	struct gguf_str key;
	enum gguf_vtype type;
	/* For scalars: `data` points at the value's bytes in the map (for a
	 * string: its u64 length, then the bytes; use gguf_get_str()).
	 * For arrays: `arr_type` and `arr_n` describe it, and `data` points at
	 * the first element (for string arrays use gguf_arr_str()). Values may
	 * be unaligned. */
	enum gguf_vtype arr_type;
	uint64_t arr_n;
	const void *data;
	uint64_t data_len;           /* bytes at `data`: the scalar or all elements */
	const uint64_t *str_offsets; /* string arrays: offset of element i from `data` (owned) */
};

struct gguf_tensor {
	struct gguf_str name;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
	uint32_t type;              /* enum dtype */
	uint64_t offset;            /* from the start of the data section */
	uint64_t size;              /* bytes: dtype_row_size(type, ne[0]) * ne[1] * ne[2] * ne[3] */
	const void *data;           /* in the map */
};

struct gguf {
	const uint8_t *map;
	size_t size;
	int owns_map; /* 1: munmap at close (gguf_open); 0: gguf_open_memory */
	/* 1: map is gguf_open_weights()'s private copy (gguf_map.h), which a
	 * backend may make writable (gguf_map_protect) to lay weights out */
	int copy;
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	uint64_t n_kv;
	struct gguf_kv *kv; /* owned */
	uint64_t n_tensors;
	struct gguf_tensor *tensors; /* owned */
	uint32_t *tensor_hash;       /* owned: open-addressing index by name */
	uint64_t tensor_hash_cap;
};

/* Maps `path` read-only and parses it. On failure returns a negative code,
 * writes the reason to `err` and leaves `g` closed (gguf_close is a no-op). */
int gguf_open(struct gguf *g, const char *path, char *err);

/* Same, for a model whose weights decode streams token after token: the
 * file is read into 2 MiB pages where the kernel gives them (gguf_map.h),
 * else mapped as gguf_open does. Nothing else differs. */
int gguf_open_weights(struct gguf *g, const char *path, char *err);

/* Same over caller memory that must outlive `g` (tests, fuzzing). */
int gguf_open_memory(struct gguf *g, const void *buf, size_t len, char *err);

/* Releases everything. Safe on a zeroed or already-closed struct. */
void gguf_close(struct gguf *g);

/* Lookups return NULL / EMBER_ENOTFOUND when the key is absent. */
const struct gguf_kv *gguf_find_kv(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);

/* Typed scalar getters: 0, EMBER_ENOTFOUND, or EMBER_ETYPE when the stored
 * type cannot represent the result (any integer type whose value fits is
 * accepted for the integer getters; f32 or f64 for gguf_get_f32). */
int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out);
int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out);
int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out);
int gguf_get_f32(const struct gguf *g, const char *key, float *out);
int gguf_get_bool(const struct gguf *g, const char *key, int *out);
int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out);

/* Arrays: `kv` must be an array (EMBER_ETYPE otherwise). gguf_arr_str
 * needs a string array and i < arr_n; gguf_arr_num reads element i of a
 * numeric array as double. */
int gguf_arr_str(const struct gguf_kv *kv, uint64_t i, struct gguf_str *out);
int gguf_arr_num(const struct gguf_kv *kv, uint64_t i, double *out);

/* Compares a map string with a C string. */
int gguf_str_eq(struct gguf_str s, const char *c);

/* Bytes of a tensor of `type` and shape ne[0..n_dims): 0 and *out set, or
 * EMBER_EFORMAT (n_dims not 1..4, a zero dimension, ne[0] not a multiple
 * of the type's block, size overflow) / EMBER_EUNSUPPORTED (unknown type)
 * with the reason in `err`. Shared by the reader, the writer, converters. */
int gguf_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *out,
		       char *err);

/* Size of one scalar value type in bytes (0 for string/array/invalid). */
size_t gguf_vtype_size(enum gguf_vtype t);
const char *gguf_vtype_name(enum gguf_vtype t);

/*
 * Writer. Two phases so tensors can be streamed one at a time (conversion
 * never holds the whole model):
 *   1. gguf_writer_new(); set keys; gguf_writer_add_tensor() for each
 *      tensor (name, type, dims) in file order;
 *   2. gguf_writer_write_header(); then gguf_writer_write_data() for each
 *      tensor in the same order (exactly its size in bytes, any number of
 *      calls per tensor); gguf_writer_finish().
 * The file is written to "<path>.tmp" and renamed to `path` only by a
 * successful gguf_writer_finish(); gguf_writer_free() on an unfinished
 * writer removes the temporary file, so a failed write leaves nothing.
 * Keys keep insertion order; setting an existing key replaces its value.
 * A set/add call returns 0 or a negative code; the first one that failed
 * is reported again, with its message, by gguf_writer_write_header(), so a
 * converter may check only that call. Offsets are laid out there too, so
 * `general.alignment` (a power-of-two u32) may be set at any time before.
 */
struct gguf_writer;

int gguf_writer_new(struct gguf_writer **out, const char *path, char *err);
void gguf_writer_free(struct gguf_writer *w);

int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_set_bool(struct gguf_writer *w, const char *key, int v);
int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v);
/* Copies `n` strings (each `lens[i]` bytes; lens NULL = NUL-terminated). */
int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
			    const size_t *lens, uint64_t n);
/* Copies `n` elements of scalar type `t` from `v`. */
int gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype t, const void *v,
			uint64_t n);
/* Copies one key/value from a reader (convert/quantize keep metadata). */
int gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv);

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
			   const uint64_t *ne);
int gguf_writer_write_header(struct gguf_writer *w, char *err);
int gguf_writer_write_data(struct gguf_writer *w, const void *data, size_t len, char *err);
int gguf_writer_finish(struct gguf_writer *w, char *err);

#endif
