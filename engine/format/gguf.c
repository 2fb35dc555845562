/*
 * gguf.c - the GGUF reader: parsing and validation (see gguf.h; the
 * lookups over a parsed file are gguf_lookup.c, the writer gguf_writer.c).
 *
 * Parsing is one pass with a bounds-checked cursor. Every count is compared
 * with what the bytes left could hold before anything is allocated for it,
 * so a hostile header cannot ask for a huge allocation: the index arrays are
 * at most a small multiple of the file's size.
 */
#include "gguf.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "gguf_impl.h"
#include "gguf_map.h"

/* Arrays of arrays are legal but nothing uses them; deeper nesting than
 * this is an attack on the recursion, not a model. */
#define GGUF_MAX_NESTING 8

/* Smallest possible encodings, used to bound counts by the bytes left:
 * a kv is a key (u64 length + >= 1 byte), a u32 type and >= 1 value byte;
 * a tensor info is a name (8 + >= 1), n_dims, one ne, type and offset. */
#define GGUF_MIN_KV_BYTES 14
#define GGUF_MIN_TENSOR_BYTES 33
#define GGUF_MIN_ARRAY_BYTES 12 /* elem_type u32 + n u64 */
#define GGUF_MIN_STRING_BYTES 8

typedef unsigned long long ull; /* for printf */

struct cursor {
	const uint8_t *buf;
	uint64_t size;
	uint64_t pos;
	char *err;
	char ctx[96]; /* what is being read, for messages: "key 'x'" */
};

static const char *const vtype_names[GGUF_TYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};

static const uint8_t vtype_sizes[GGUF_TYPE_COUNT] = {
	[GGUF_TYPE_UINT8] = 1,	 [GGUF_TYPE_INT8] = 1,	 [GGUF_TYPE_UINT16] = 2,
	[GGUF_TYPE_INT16] = 2,	 [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4,
	[GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,	 [GGUF_TYPE_UINT64] = 8,
	[GGUF_TYPE_INT64] = 8,	 [GGUF_TYPE_FLOAT64] = 8,
};

size_t gguf_vtype_size(enum gguf_vtype t)
{
	return (unsigned)t < GGUF_TYPE_COUNT ? vtype_sizes[t] : 0;
}

const char *gguf_vtype_name(enum gguf_vtype t)
{
	return (unsigned)t < GGUF_TYPE_COUNT ? vtype_names[t] : "?";
}

/* Copies a map string into `out` for a message: at most 48 bytes, bytes
 * that are not printable ASCII shown as '?'. */
static const char *printable(struct gguf_str s, char out[64])
{
	uint64_t i, n = s.len < 48 ? s.len : 48;

	for (i = 0; i < n; i++)
		out[i] = (s.ptr[i] >= 0x20 && s.ptr[i] < 0x7f) ? s.ptr[i] : '?';
	if (n < s.len)
		out[n++] = '.', out[n++] = '.', out[n++] = '.';
	out[n] = '\0';
	return out;
}

static int cur_need(struct cursor *c, uint64_t n, const char *what)
{
	if (n <= c->size - c->pos)
		return 0;
	return ember_seterr(c->err, EMBER_EFORMAT,
			    "%s: %s needs %llu bytes at offset %llu, only %llu left (truncated file?)",
			    c->ctx, what, (ull)n, (ull)c->pos, (ull)(c->size - c->pos));
}

static int cur_u32(struct cursor *c, uint32_t *v, const char *what)
{
	int rc = cur_need(c, 4, what);

	if (rc)
		return rc;
	*v = gguf_le32(c->buf + c->pos);
	c->pos += 4;
	return 0;
}

static int cur_u64(struct cursor *c, uint64_t *v, const char *what)
{
	int rc = cur_need(c, 8, what);

	if (rc)
		return rc;
	*v = gguf_le64(c->buf + c->pos);
	c->pos += 8;
	return 0;
}

static int cur_str(struct cursor *c, struct gguf_str *s, const char *what)
{
	uint64_t len;
	int rc = cur_u64(c, &len, what);

	if (rc)
		return rc;
	if (len > c->size - c->pos)
		return ember_seterr(c->err, EMBER_EFORMAT,
				    "%s: %s length %llu at offset %llu exceeds the %llu bytes left",
				    c->ctx, what, (ull)len, (ull)(c->pos - 8),
				    (ull)(c->size - c->pos));
	s->len = len;
	s->ptr = (const char *)c->buf + c->pos;
	c->pos += len;
	return 0;
}

/* Whether `n` elements of `et` could fit in the bytes left (checked before
 * any allocation sized by n). */
static int array_fits(struct cursor *c, uint32_t et, uint64_t n)
{
	uint64_t min;

	if (et >= GGUF_TYPE_COUNT)
		return ember_seterr(c->err, EMBER_EFORMAT, "%s: unknown array element type %u",
				    c->ctx, et);
	min = gguf_vtype_size(et);
	if (et == GGUF_TYPE_STRING)
		min = GGUF_MIN_STRING_BYTES;
	else if (et == GGUF_TYPE_ARRAY)
		min = GGUF_MIN_ARRAY_BYTES;
	if (n > (c->size - c->pos) / min)
		return ember_seterr(c->err, EMBER_EFORMAT,
				    "%s: array of %llu %s elements cannot fit in the %llu bytes left",
				    c->ctx, (ull)n, gguf_vtype_name(et), (ull)(c->size - c->pos));
	return 0;
}

static int skip_array(struct cursor *c, uint32_t et, uint64_t n, int depth, uint64_t *str_offsets);

/* Validates and steps over one value of type `type`. */
static int skip_value(struct cursor *c, uint32_t type, int depth)
{
	struct gguf_str s;
	uint32_t et;
	uint64_t n;
	int rc;

	if (type < GGUF_TYPE_COUNT && gguf_vtype_size(type) != 0) {
		rc = cur_need(c, gguf_vtype_size(type), gguf_vtype_name(type));
		if (rc == 0)
			c->pos += gguf_vtype_size(type);
		return rc;
	}
	if (type == GGUF_TYPE_STRING)
		return cur_str(c, &s, "string");
	if (type != GGUF_TYPE_ARRAY)
		return ember_seterr(c->err, EMBER_EFORMAT, "%s: unknown value type %u", c->ctx,
				    type);
	if (depth >= GGUF_MAX_NESTING)
		return ember_seterr(c->err, EMBER_EFORMAT, "%s: arrays nested deeper than %d",
				    c->ctx, GGUF_MAX_NESTING);
	if ((rc = cur_u32(c, &et, "array element type")) || (rc = cur_u64(c, &n, "array count")))
		return rc;
	return skip_array(c, et, n, depth + 1, NULL);
}

static int skip_array(struct cursor *c, uint32_t et, uint64_t n, int depth, uint64_t *str_offsets)
{
	uint64_t i, start = c->pos;
	int rc = array_fits(c, et, n);

	if (rc)
		return rc;
	if (gguf_vtype_size(et) != 0) {
		c->pos += n * gguf_vtype_size(et); /* array_fits bounded it */
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (str_offsets)
			str_offsets[i] = c->pos - start;
		if ((rc = skip_value(c, et, depth)))
			return rc;
	}
	return 0;
}

static int parse_kv(struct cursor *c, struct gguf_kv *kv, uint64_t idx)
{
	char name[64];
	uint64_t *offsets = NULL;
	uint64_t start;
	uint32_t type, et = 0;
	int rc;

	snprintf(c->ctx, sizeof(c->ctx), "kv %llu", (ull)idx);
	if ((rc = cur_str(c, &kv->key, "key")))
		return rc;
	if (kv->key.len == 0)
		return ember_seterr(c->err, EMBER_EFORMAT, "kv %llu: empty key", (ull)idx);
	snprintf(c->ctx, sizeof(c->ctx), "key '%s'", printable(kv->key, name));
	if ((rc = cur_u32(c, &type, "value type")))
		return rc;
	if (type >= GGUF_TYPE_COUNT)
		return ember_seterr(c->err, EMBER_EFORMAT, "%s: unknown value type %u", c->ctx, type);
	kv->type = (enum gguf_vtype)type;
	if (type == GGUF_TYPE_ARRAY) {
		if ((rc = cur_u32(c, &et, "array element type")) ||
		    (rc = cur_u64(c, &kv->arr_n, "array count")) ||
		    (rc = array_fits(c, et, kv->arr_n)))
			return rc;
		kv->arr_type = (enum gguf_vtype)et;
		if (et == GGUF_TYPE_STRING && kv->arr_n > 0) {
			offsets = malloc(kv->arr_n * sizeof(*offsets));
			if (offsets == NULL)
				return ember_seterr(c->err, EMBER_ENOMEM, "%s: %llu strings", c->ctx,
						    (ull)kv->arr_n);
			kv->str_offsets = offsets; /* owned by kv from here */
		}
	}
	start = c->pos;
	kv->data = c->buf + start;
	if (type == GGUF_TYPE_ARRAY)
		rc = skip_array(c, et, kv->arr_n, 1, offsets);
	else
		rc = skip_value(c, type, 0);
	kv->data_len = c->pos - start;
	return rc;
}

static int is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

static int parse_alignment(struct gguf *g, char *err)
{
	const struct gguf_kv *kv = gguf_find_kv(g, "general.alignment");

	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (kv == NULL)
		return 0;
	if (kv->type != GGUF_TYPE_UINT32)
		return ember_seterr(err, EMBER_EFORMAT, "general.alignment has type %s, not u32",
				    gguf_vtype_name(kv->type));
	g->alignment = gguf_le32(kv->data);
	if (!is_pow2(g->alignment))
		return ember_seterr(err, EMBER_EFORMAT,
				    "general.alignment %u is not a power of two", g->alignment);
	return 0;
}

int gguf_tensor_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *out,
		       char *err)
{
	uint64_t size, elems;
	uint32_t i;

	if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
		return ember_seterr(err, EMBER_EFORMAT, "%u dimensions (must be 1..%d)", n_dims,
				    GGUF_MAX_DIMS);
	if (!dtype_valid(type))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "unknown tensor type %u", type);
	for (i = 0; i < n_dims; i++)
		if (ne[i] == 0)
			return ember_seterr(err, EMBER_EFORMAT, "dimension %u is zero", i);
	/* ggml counts elements in int64_t: keep the product below INT64_MAX. */
	elems = ne[0];
	for (i = 1; i < n_dims; i++) {
		if (ne[i] > (uint64_t)INT64_MAX / elems)
			return ember_seterr(err, EMBER_EFORMAT, "element count overflows");
		elems *= ne[i];
	}
	size = dtype_row_size(type, ne[0]);
	if (size == 0)
		return ember_seterr(err, EMBER_EFORMAT,
				    "ne[0] = %llu is not a multiple of the %s block (%u)",
				    (ull)ne[0], dtype_name(type), dtype_block(type));
	for (i = 1; i < n_dims; i++) {
		if (ne[i] > UINT64_MAX / size)
			return ember_seterr(err, EMBER_EFORMAT, "byte size overflows");
		size *= ne[i];
	}
	*out = size;
	return 0;
}

static int parse_tensor_info(struct cursor *c, struct gguf_tensor *t, uint64_t idx)
{
	char name[64];
	uint32_t i;
	int rc;

	snprintf(c->ctx, sizeof(c->ctx), "tensor %llu", (ull)idx);
	if ((rc = cur_str(c, &t->name, "name")))
		return rc;
	if (t->name.len == 0)
		return ember_seterr(c->err, EMBER_EFORMAT, "tensor %llu: empty name", (ull)idx);
	snprintf(c->ctx, sizeof(c->ctx), "tensor '%s'", printable(t->name, name));
	if ((rc = cur_u32(c, &t->n_dims, "n_dims")))
		return rc;
	if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
		return ember_seterr(c->err, EMBER_EFORMAT, "%s: %u dimensions (must be 1..%d)",
				    c->ctx, t->n_dims, GGUF_MAX_DIMS);
	for (i = 0; i < GGUF_MAX_DIMS; i++)
		t->ne[i] = 1;
	for (i = 0; i < t->n_dims; i++)
		if ((rc = cur_u64(c, &t->ne[i], "ne")))
			return rc;
	if ((rc = cur_u32(c, &t->type, "type")) || (rc = cur_u64(c, &t->offset, "offset")))
		return rc;
	return 0;
}

/* Checks one tensor's type, shape and extent against the data section. */
static int check_tensor(struct gguf *g, struct gguf_tensor *t, char *err)
{
	char name[64], why[EMBER_ERR_MAX];
	uint64_t data_size = g->size - g->data_offset;
	int rc;

	printable(t->name, name);
	rc = gguf_tensor_nbytes(t->type, t->n_dims, t->ne, &t->size, why);
	if (rc)
		return ember_seterr(err, rc, "tensor '%s': %s", name, why);
	if (t->offset % g->alignment != 0)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': offset %llu is not a multiple of the alignment %u",
				    name, (ull)t->offset, g->alignment);
	if (t->offset > data_size || t->size > data_size - t->offset)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': data [%llu, %llu) past end of file (size %llu)",
				    name, (ull)(g->data_offset + t->offset),
				    (ull)(g->data_offset + t->offset + t->size), (ull)g->size);
	t->data = g->map + g->data_offset + t->offset;
	return 0;
}

struct extent {
	uint64_t begin, end, idx;
};

static int extent_cmp(const void *a, const void *b)
{
	const struct extent *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

static int check_overlaps(struct gguf *g, char *err)
{
	struct extent *ext;
	char n1[64], n2[64];
	uint64_t i;
	int rc = 0;

	if (g->n_tensors < 2)
		return 0;
	ext = malloc(g->n_tensors * sizeof(*ext));
	if (ext == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "%llu tensors", (ull)g->n_tensors);
	for (i = 0; i < g->n_tensors; i++) {
		ext[i].begin = g->tensors[i].offset;
		ext[i].end = g->tensors[i].offset + g->tensors[i].size;
		ext[i].idx = i;
	}
	qsort(ext, g->n_tensors, sizeof(*ext), extent_cmp);
	for (i = 1; i < g->n_tensors && rc == 0; i++)
		if (ext[i].begin < ext[i - 1].end)
			rc = ember_seterr(err, EMBER_EFORMAT, "tensors '%s' and '%s' overlap",
					  printable(g->tensors[ext[i - 1].idx].name, n1),
					  printable(g->tensors[ext[i].idx].name, n2));
	free(ext);
	return rc;
}

static int str_eq(struct gguf_str a, struct gguf_str b)
{
	return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* Builds an open-addressing index over names at `name_off` inside `n`
 * elements of `stride` bytes. Slots hold index + 1 (0 = empty). Returns
 * 0, EMBER_ENOMEM, or EMBER_EFORMAT with *dup set to a repeated index. */
static int index_build(const void *base, size_t stride, size_t name_off, uint64_t n,
		       uint32_t **slots_out, uint64_t *cap_out, uint64_t *dup)
{
	uint64_t cap = 16, i, h;
	uint32_t *slots;

	while (cap < 2 * n)
		cap *= 2;
	slots = calloc(cap, sizeof(*slots));
	if (slots == NULL)
		return EMBER_ENOMEM;
	for (i = 0; i < n; i++) {
		const struct gguf_str *s =
			(const void *)((const char *)base + i * stride + name_off);
		for (h = gguf_hash_bytes(s->ptr, s->len) & (cap - 1); slots[h];
		     h = (h + 1) & (cap - 1)) {
			const struct gguf_str *o = (const void *)((const char *)base +
								  (slots[h] - 1) * stride + name_off);
			if (str_eq(*s, *o)) {
				*dup = i;
				free(slots);
				return EMBER_EFORMAT;
			}
		}
		slots[h] = (uint32_t)(i + 1);
	}
	*slots_out = slots;
	*cap_out = cap;
	return 0;
}

static int parse_header(struct gguf *g, struct cursor *c)
{
	uint32_t swapped;
	int rc;

	snprintf(c->ctx, sizeof(c->ctx), "header");
	if ((rc = cur_need(c, 4, "magic")))
		return rc;
	if (memcmp(c->buf, "GGUF", 4) != 0)
		return ember_seterr(c->err, EMBER_EFORMAT, "not a GGUF file (bad magic)");
	c->pos = 4;
	if ((rc = cur_u32(c, &g->version, "version")))
		return rc;
	swapped = __builtin_bswap32(g->version);
	if (swapped == 2 || swapped == 3)
		return ember_seterr(c->err, EMBER_EUNSUPPORTED, "big-endian GGUF is not supported");
	if (g->version == 1)
		return ember_seterr(c->err, EMBER_EUNSUPPORTED,
				    "GGUF version 1 is not supported (re-convert to v3)");
	if (g->version != 2 && g->version != 3)
		return ember_seterr(c->err, EMBER_EUNSUPPORTED, "unknown GGUF version %u",
				    g->version);
	if ((rc = cur_u64(c, &g->n_tensors, "n_tensors")) || (rc = cur_u64(c, &g->n_kv, "n_kv")))
		return rc;
	if (g->n_kv > (c->size - c->pos) / GGUF_MIN_KV_BYTES || g->n_kv >= UINT32_MAX)
		return ember_seterr(c->err, EMBER_EFORMAT,
				    "n_kv %llu cannot fit in the %llu bytes left", (ull)g->n_kv,
				    (ull)(c->size - c->pos));
	if (g->n_tensors > (c->size - c->pos) / GGUF_MIN_TENSOR_BYTES ||
	    g->n_tensors >= UINT32_MAX)
		return ember_seterr(c->err, EMBER_EFORMAT,
				    "n_tensors %llu cannot fit in the %llu bytes left",
				    (ull)g->n_tensors, (ull)(c->size - c->pos));
	return 0;
}

static int parse_kvs(struct gguf *g, struct cursor *c)
{
	uint32_t *slots = NULL;
	uint64_t i, cap, dup;
	char name[64];
	int rc;

	g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof(*g->kv));
	if (g->kv == NULL)
		return ember_seterr(c->err, EMBER_ENOMEM, "%llu kvs", (ull)g->n_kv);
	for (i = 0; i < g->n_kv; i++)
		if ((rc = parse_kv(c, &g->kv[i], i)))
			return rc;
	/* The index only detects duplicates: few keys, looked up linearly. */
	rc = index_build(g->kv, sizeof(*g->kv), offsetof(struct gguf_kv, key), g->n_kv, &slots,
			 &cap, &dup);
	free(slots);
	if (rc == EMBER_EFORMAT)
		return ember_seterr(c->err, rc, "duplicate key '%s'",
				    printable(g->kv[dup].key, name));
	if (rc)
		return ember_seterr(c->err, rc, "key index");
	return parse_alignment(g, c->err);
}

static int parse_tensors(struct gguf *g, struct cursor *c)
{
	uint64_t i, dup;
	char name[64];
	int rc;

	g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*g->tensors));
	if (g->tensors == NULL)
		return ember_seterr(c->err, EMBER_ENOMEM, "%llu tensors", (ull)g->n_tensors);
	for (i = 0; i < g->n_tensors; i++)
		if ((rc = parse_tensor_info(c, &g->tensors[i], i)))
			return rc;
	/* The data section starts at the next multiple of the alignment; a
	 * file without tensors may end before it. */
	g->data_offset = (c->pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->data_offset > g->size) {
		if (g->n_tensors > 0)
			return ember_seterr(c->err, EMBER_EFORMAT,
					    "data section at %llu starts past end of file (size %llu)",
					    (ull)g->data_offset, (ull)g->size);
		g->data_offset = g->size;
	}
	for (i = 0; i < g->n_tensors; i++)
		if ((rc = check_tensor(g, &g->tensors[i], c->err)))
			return rc;
	rc = index_build(g->tensors, sizeof(*g->tensors), offsetof(struct gguf_tensor, name),
			 g->n_tensors, &g->tensor_hash, &g->tensor_hash_cap, &dup);
	if (rc == EMBER_EFORMAT)
		return ember_seterr(c->err, rc, "duplicate tensor name '%s'",
				    printable(g->tensors[dup].name, name));
	if (rc)
		return ember_seterr(c->err, rc, "tensor index");
	return check_overlaps(g, c->err);
}

int gguf_open_memory(struct gguf *g, const void *buf, size_t len, char *err)
{
	struct cursor c = {.buf = buf, .size = len, .err = err};
	int rc;

	memset(g, 0, sizeof(*g));
	g->map = buf;
	g->size = len;
	if ((rc = parse_header(g, &c)) || (rc = parse_kvs(g, &c)) || (rc = parse_tensors(g, &c)))
		goto fail;
	return 0;
fail:
	g->owns_map = 0; /* the caller (gguf_open) releases its own map */
	gguf_close(g);
	return rc;
}

static int gguf__open(struct gguf *g, const char *path, int huge, char *err)
{
	struct stat st;
	void *map = MAP_FAILED;
	int fd, rc, copy;

	memset(g, 0, sizeof(*g));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ember_seterr(err, EMBER_EIO, "%s: %m", path);
	if (fstat(fd, &st) != 0) {
		rc = ember_seterr(err, EMBER_EIO, "%s: %m", path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		rc = ember_seterr(err, EMBER_EFORMAT, "%s: %s", path,
				  S_ISREG(st.st_mode) ? "empty file" : "not a regular file");
		goto fail;
	}
	if (huge && (map = gguf_map_huge(fd, (size_t)st.st_size)) == NULL)
		map = MAP_FAILED;
	copy = map != MAP_FAILED;
	if (map == MAP_FAILED)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		rc = ember_seterr(err, EMBER_EIO, "%s: mmap: %m", path);
		goto fail;
	}
	rc = gguf_open_memory(g, map, (size_t)st.st_size, err);
	if (rc)
		goto fail;
	g->owns_map = 1;
	g->copy = copy;
	close(fd);
	return 0;
fail:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	close(fd);
	return rc;
}

int gguf_open(struct gguf *g, const char *path, char *err)
{
	return gguf__open(g, path, 0, err);
}

int gguf_open_weights(struct gguf *g, const char *path, char *err)
{
	return gguf__open(g, path, 1, err);
}

void gguf_close(struct gguf *g)
{
	uint64_t i;

	if (g == NULL)
		return;
	if (g->kv)
		for (i = 0; i < g->n_kv; i++)
			free((void *)g->kv[i].str_offsets);
	free(g->kv);
	free(g->tensors);
	free(g->tensor_hash);
	if (g->owns_map && g->map)
		munmap((void *)g->map, g->size);
	memset(g, 0, sizeof(*g));
}
