/*
 * gguf_lookup.c - reading a parsed GGUF file (see gguf.h): the kv and
 * tensor lookups, the typed getters and array elements. gguf.c parses and
 * validates the file first, so nothing here checks bounds again.
 *
 * Ownership: everything returned points into the caller's struct gguf
 * (its map) and lives as long as it. Threads: read-only over an immutable
 * reader; any thread.
 */
#include "gguf.h"

#include <string.h>

#include "ember.h"
#include "gguf_impl.h"

int gguf_str_eq(struct gguf_str s, const char *c)
{
	size_t n = strlen(c);

	return s.len == n && memcmp(s.ptr, c, n) == 0;
}

const struct gguf_kv *gguf_find_kv(const struct gguf *g, const char *key)
{
	uint64_t i;

	for (i = 0; i < g->n_kv; i++)
		if (gguf_str_eq(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name)
{
	uint64_t h, cap = g->tensor_hash_cap;
	const struct gguf_tensor *t;

	if (cap == 0)
		return NULL;
	for (h = gguf_hash_bytes(name, strlen(name)) & (cap - 1); g->tensor_hash[h];
	     h = (h + 1) & (cap - 1)) {
		t = &g->tensors[g->tensor_hash[h] - 1];
		if (gguf_str_eq(t->name, name))
			return t;
	}
	return NULL;
}

static int find_as(const struct gguf *g, const char *key, enum gguf_vtype t,
		   const struct gguf_kv **kv)
{
	*kv = gguf_find_kv(g, key);
	if (*kv == NULL)
		return EMBER_ENOTFOUND;
	return (*kv)->type == t ? 0 : EMBER_ETYPE;
}

/* Reads any integer-typed value: *neg set when it is a negative signed one
 * (then *v holds the value as int64_t bits). */
static int read_int(const struct gguf_kv *kv, int *neg, uint64_t *v)
{
	const uint8_t *p = kv->data;
	int64_t s;

	*neg = 0;
	switch (kv->type) {
	case GGUF_TYPE_UINT8: *v = p[0]; return 0;
	case GGUF_TYPE_UINT16: *v = gguf_le16(p); return 0;
	case GGUF_TYPE_UINT32: *v = gguf_le32(p); return 0;
	case GGUF_TYPE_UINT64: *v = gguf_le64(p); return 0;
	case GGUF_TYPE_INT8: s = (int8_t)p[0]; break;
	case GGUF_TYPE_INT16: s = (int16_t)gguf_le16(p); break;
	case GGUF_TYPE_INT32: s = (int32_t)gguf_le32(p); break;
	case GGUF_TYPE_INT64: s = (int64_t)gguf_le64(p); break;
	default: return EMBER_ETYPE;
	}
	*neg = s < 0;
	*v = (uint64_t)s;
	return 0;
}

static int get_int(const struct gguf *g, const char *key, int *neg, uint64_t *v)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);

	return kv ? read_int(kv, neg, v) : EMBER_ENOTFOUND;
}

int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out)
{
	uint64_t v;
	int neg, rc = get_int(g, key, &neg, &v);

	if (rc)
		return rc;
	if (neg || v > UINT32_MAX)
		return EMBER_ETYPE;
	*out = (uint32_t)v;
	return 0;
}

int gguf_get_u64(const struct gguf *g, const char *key, uint64_t *out)
{
	uint64_t v;
	int neg, rc = get_int(g, key, &neg, &v);

	if (rc)
		return rc;
	if (neg)
		return EMBER_ETYPE;
	*out = v;
	return 0;
}

int gguf_get_i64(const struct gguf *g, const char *key, int64_t *out)
{
	uint64_t v;
	int neg, rc = get_int(g, key, &neg, &v);

	if (rc)
		return rc;
	if (!neg && v > (uint64_t)INT64_MAX)
		return EMBER_ETYPE;
	*out = (int64_t)v;
	return 0;
}

static double read_float(enum gguf_vtype t, const uint8_t *p)
{
	uint32_t u = gguf_le32(p);
	uint64_t d;
	float f;
	double x;

	if (t == GGUF_TYPE_FLOAT32) {
		memcpy(&f, &u, 4);
		return f;
	}
	d = gguf_le64(p);
	memcpy(&x, &d, 8);
	return x;
}

int gguf_get_f32(const struct gguf *g, const char *key, float *out)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);

	if (kv == NULL)
		return EMBER_ENOTFOUND;
	if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64)
		return EMBER_ETYPE;
	*out = (float)read_float(kv->type, kv->data);
	return 0;
}

int gguf_get_bool(const struct gguf *g, const char *key, int *out)
{
	const struct gguf_kv *kv;
	int rc = find_as(g, key, GGUF_TYPE_BOOL, &kv);

	if (rc == 0)
		*out = *(const uint8_t *)kv->data != 0;
	return rc;
}

static struct gguf_str read_str(const uint8_t *p)
{
	struct gguf_str s = {gguf_le64(p), (const char *)p + 8};

	return s;
}

int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out)
{
	const struct gguf_kv *kv;
	int rc = find_as(g, key, GGUF_TYPE_STRING, &kv);

	if (rc == 0)
		*out = read_str(kv->data);
	return rc;
}

int gguf_arr_str(const struct gguf_kv *kv, uint64_t i, struct gguf_str *out)
{
	if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
		return EMBER_ETYPE;
	if (i >= kv->arr_n)
		return EMBER_ERANGE;
	*out = read_str((const uint8_t *)kv->data + kv->str_offsets[i]);
	return 0;
}

int gguf_arr_num(const struct gguf_kv *kv, uint64_t i, double *out)
{
	struct gguf_kv elem;
	size_t size = gguf_vtype_size(kv->arr_type);
	uint64_t v;
	int neg;

	if (kv->type != GGUF_TYPE_ARRAY || size == 0)
		return EMBER_ETYPE;
	if (i >= kv->arr_n)
		return EMBER_ERANGE;
	elem.type = kv->arr_type;
	elem.data = (const uint8_t *)kv->data + i * size;
	if (elem.type == GGUF_TYPE_FLOAT32 || elem.type == GGUF_TYPE_FLOAT64)
		*out = read_float(elem.type, elem.data);
	else if (elem.type == GGUF_TYPE_BOOL)
		*out = *(const uint8_t *)elem.data != 0;
	else if (read_int(&elem, &neg, &v) == 0)
		*out = neg ? (double)(int64_t)v : (double)v;
	return 0;
}
