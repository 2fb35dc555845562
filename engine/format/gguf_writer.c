/*
 * gguf_writer.c - the streaming GGUF writer (see gguf.h).
 *
 * Keys are held encoded (the bytes that follow the value type in the file),
 * so copying a key from a reader is a memcpy and the round trip is
 * byte-exact. Tensors are described first and their offsets fixed only at
 * gguf_writer_write_header(), once `general.alignment` is final.
 */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "ember.h"

#define GGUF_WRITE_VERSION 3
#define GGUF_WRITE_BUFSIZE (1 << 20)

typedef unsigned long long ull; /* for printf */

struct bytes {
	uint8_t *p; /* owned */
	size_t len, cap;
};

struct wkv {
	char *key; /* owned, NUL-terminated */
	size_t key_len;
	uint32_t type;
	struct bytes val; /* the value's encoding */
};

struct wtensor {
	char *name; /* owned, NUL-terminated */
	uint32_t type, n_dims;
	uint64_t ne[GGUF_MAX_DIMS];
	uint64_t size, offset;
};

enum wstate { W_COLLECT, W_DATA, W_DONE };

struct gguf_writer {
	char *path, *tmp; /* owned */
	FILE *f;
	struct wkv *kv; /* insertion order */
	size_t n_kv, cap_kv;
	struct wtensor *t; /* file order */
	size_t n_t, cap_t;
	uint32_t alignment;
	enum wstate state;
	int failed; /* first error of a set/add call, reported by write_header */
	char err[EMBER_ERR_MAX];
	size_t cur;           /* write_data: tensor being written */
	uint64_t cur_written; /* bytes of it written so far */
};

static int fail(struct gguf_writer *w, int code, const char *fmt, const char *arg)
{
	if (!w->failed) {
		w->failed = code;
		ember_seterr(w->err, code, fmt, arg);
	}
	return code;
}

static int bytes_put(struct bytes *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (n > SIZE_MAX / 2 - b->len || buf_grow(&b->p, &b->cap, b->len + n, 64, 0) != 0)
		return EMBER_ENOMEM;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static int bytes_u32(struct bytes *b, uint32_t v)
{
	uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};

	return bytes_put(b, le, 4);
}

static int bytes_u64(struct bytes *b, uint64_t v)
{
	int rc = bytes_u32(b, (uint32_t)v);

	return rc ? rc : bytes_u32(b, (uint32_t)(v >> 32));
}

static int bytes_str(struct bytes *b, const char *s, size_t n)
{
	int rc = bytes_u64(b, n);

	return rc ? rc : bytes_put(b, s, n);
}

int gguf_writer_new(struct gguf_writer **out, const char *path, char *err)
{
	struct gguf_writer *w;
	size_t n = strlen(path);
	int rc;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "gguf writer");
	w->path = strdup(path);
	w->tmp = malloc(n + 5);
	if (w->path == NULL || w->tmp == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "gguf writer");
		goto fail;
	}
	memcpy(w->tmp, path, n);
	memcpy(w->tmp + n, ".tmp", 5);
	w->f = fopen(w->tmp, "wb");
	if (w->f == NULL) {
		rc = ember_seterr(err, EMBER_EIO, "%s: %s", w->tmp, strerror(errno));
		goto fail;
	}
	setvbuf(w->f, NULL, _IOFBF, GGUF_WRITE_BUFSIZE);
	w->state = W_COLLECT;
	*out = w;
	return 0;
fail:
	gguf_writer_free(w);
	return rc;
}

void gguf_writer_free(struct gguf_writer *w)
{
	size_t i;

	if (w == NULL)
		return;
	if (w->f)
		fclose(w->f);
	if (w->f && w->state != W_DONE)
		unlink(w->tmp); /* a failed or abandoned write leaves nothing */
	for (i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		free(w->kv[i].val.p);
	}
	free(w->kv);
	for (i = 0; i < w->n_t; i++)
		free(w->t[i].name);
	free(w->t);
	free(w->tmp);
	free(w->path);
	free(w);
}

/* Sets key `key` (key_len bytes, not NUL-terminated; `label` names it in
 * messages) to an encoded value; takes ownership of `val` whatever the
 * outcome. */
static int put_kv(struct gguf_writer *w, const char *key, size_t key_len, const char *label,
		  uint32_t type, struct bytes *val)
{
	struct wkv *kv = NULL, *nkv;
	size_t i;

	if (w->state != W_COLLECT || key_len == 0) {
		free(val->p);
		return fail(w, EMBER_EINVAL, "key '%s': empty, or set after the header", label);
	}
	for (i = 0; i < w->n_kv && kv == NULL; i++)
		if (w->kv[i].key_len == key_len && memcmp(w->kv[i].key, key, key_len) == 0)
			kv = &w->kv[i];
	if (kv == NULL) {
		if (w->n_kv == w->cap_kv) {
			size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
			nkv = realloc(w->kv, cap * sizeof(*nkv));
			if (nkv == NULL)
				goto nomem;
			w->kv = nkv;
			w->cap_kv = cap;
		}
		kv = &w->kv[w->n_kv];
		memset(kv, 0, sizeof(*kv));
		kv->key = malloc(key_len + 1);
		if (kv->key == NULL)
			goto nomem;
		memcpy(kv->key, key, key_len);
		kv->key[key_len] = '\0';
		kv->key_len = key_len;
		w->n_kv++;
	}
	free(kv->val.p);
	kv->type = type;
	kv->val = *val;
	return 0;
nomem:
	free(val->p);
	return fail(w, EMBER_ENOMEM, "key '%s': out of memory", label);
}

static int set_scalar(struct gguf_writer *w, const char *key, uint32_t type, uint64_t bits)
{
	struct bytes b = {0};
	uint8_t le[8];
	size_t i, n = gguf_vtype_size(type);

	for (i = 0; i < n; i++)
		le[i] = (uint8_t)(bits >> (8 * i));
	if (bytes_put(&b, le, n))
		return fail(w, EMBER_ENOMEM, "key '%s': out of memory", key);
	return put_kv(w, key, strlen(key), key, type, &b);
}

int gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	return set_scalar(w, key, GGUF_TYPE_UINT32, v);
}

int gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v)
{
	return set_scalar(w, key, GGUF_TYPE_INT32, (uint32_t)v);
}

int gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v)
{
	return set_scalar(w, key, GGUF_TYPE_UINT64, v);
}

int gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v)
{
	uint32_t bits;

	memcpy(&bits, &v, 4);
	return set_scalar(w, key, GGUF_TYPE_FLOAT32, bits);
}

int gguf_writer_set_bool(struct gguf_writer *w, const char *key, int v)
{
	return set_scalar(w, key, GGUF_TYPE_BOOL, v != 0);
}

int gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v)
{
	struct bytes b = {0};

	if (bytes_str(&b, v, strlen(v))) {
		free(b.p);
		return fail(w, EMBER_ENOMEM, "key '%s': out of memory", key);
	}
	return put_kv(w, key, strlen(key), key, GGUF_TYPE_STRING, &b);
}

int gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
			    const size_t *lens, uint64_t n)
{
	struct bytes b = {0};
	uint64_t i;
	int rc;

	rc = bytes_u32(&b, GGUF_TYPE_STRING);
	if (rc == 0)
		rc = bytes_u64(&b, n);
	for (i = 0; i < n && rc == 0; i++)
		rc = bytes_str(&b, v[i], lens ? lens[i] : strlen(v[i]));
	if (rc) {
		free(b.p);
		return fail(w, rc, "key '%s': out of memory", key);
	}
	return put_kv(w, key, strlen(key), key, GGUF_TYPE_ARRAY, &b);
}

int gguf_writer_set_arr(struct gguf_writer *w, const char *key, enum gguf_vtype t, const void *v,
			uint64_t n)
{
	struct bytes b = {0};
	size_t size = gguf_vtype_size(t);
	const uint8_t *p = v;
	uint8_t le[8];
	uint64_t i;
	size_t j;
	int rc;

	if (size == 0)
		return fail(w, EMBER_EINVAL, "key '%s': array elements must be scalars", key);
	rc = bytes_u32(&b, (uint32_t)t);
	if (rc == 0)
		rc = bytes_u64(&b, n);
	/* Host-order elements to little-endian, one at a time. */
	for (i = 0; i < n && rc == 0; i++, p += size) {
		uint64_t bits = 0;
		uint32_t b32;
		uint16_t b16;
		if (size == 1)
			bits = p[0];
		else if (size == 2)
			memcpy(&b16, p, 2), bits = b16;
		else if (size == 4)
			memcpy(&b32, p, 4), bits = b32;
		else
			memcpy(&bits, p, 8);
		for (j = 0; j < size; j++)
			le[j] = (uint8_t)(bits >> (8 * j));
		rc = bytes_put(&b, le, size);
	}
	if (rc) {
		free(b.p);
		return fail(w, rc, "key '%s': out of memory", key);
	}
	return put_kv(w, key, strlen(key), key, GGUF_TYPE_ARRAY, &b);
}

int gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_kv *kv)
{
	struct bytes b = {0};
	char key[128];
	int rc = 0;

	snprintf(key, sizeof(key), "%.*s", (int)(kv->key.len < 100 ? kv->key.len : 100),
		 kv->key.ptr);
	if (kv->type == GGUF_TYPE_ARRAY) {
		rc = bytes_u32(&b, kv->arr_type);
		if (rc == 0)
			rc = bytes_u64(&b, kv->arr_n);
	}
	if (rc == 0)
		rc = bytes_put(&b, kv->data, kv->data_len);
	if (rc) {
		free(b.p);
		return fail(w, rc, "key '%s': out of memory", key);
	}
	return put_kv(w, kv->key.ptr, kv->key.len, key, kv->type, &b);
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
			   const uint64_t *ne)
{
	struct wtensor *t, *nt;
	char why[EMBER_ERR_MAX];
	uint64_t size;
	size_t i;
	int rc;

	if (w->state != W_COLLECT || name[0] == '\0')
		return fail(w, EMBER_EINVAL, "tensor '%s': empty name, or added after the header",
			    name);
	rc = gguf_tensor_nbytes(type, n_dims, ne, &size, why);
	if (rc) {
		if (!w->failed) {
			w->failed = rc;
			ember_seterr(w->err, rc, "tensor '%s': %s", name, why);
		}
		return rc;
	}
	/* Linear: a few thousand tensors, added once. */
	for (i = 0; i < w->n_t; i++)
		if (strcmp(w->t[i].name, name) == 0)
			return fail(w, EMBER_EINVAL, "tensor '%s' added twice", name);
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? 2 * w->cap_t : 64;
		nt = realloc(w->t, cap * sizeof(*nt));
		if (nt == NULL)
			return fail(w, EMBER_ENOMEM, "tensor '%s': out of memory", name);
		w->t = nt;
		w->cap_t = cap;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = strdup(name);
	if (t->name == NULL)
		return fail(w, EMBER_ENOMEM, "tensor '%s': out of memory", name);
	t->type = type;
	t->n_dims = n_dims;
	for (i = 0; i < GGUF_MAX_DIMS; i++)
		t->ne[i] = i < n_dims ? ne[i] : 1;
	t->size = size;
	w->n_t++;
	return 0;
}

static uint64_t align_up(uint64_t v, uint32_t a)
{
	return (v + a - 1) / a * a;
}

static int write_bytes(struct gguf_writer *w, const void *p, size_t n, char *err)
{
	if (n && fwrite(p, 1, n, w->f) != n)
		return ember_seterr(err, EMBER_EIO, "%s: write: %s", w->tmp, strerror(errno));
	return 0;
}

static int write_pad(struct gguf_writer *w, uint64_t pos, char *err)
{
	static const uint8_t zeros[256];
	uint64_t n = align_up(pos, w->alignment) - pos;
	int rc = 0;

	while (n > 0 && rc == 0) {
		size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
		rc = write_bytes(w, zeros, k, err);
		n -= k;
	}
	return rc;
}

/* Takes `general.alignment` from the keys (it must be a power-of-two u32)
 * and lays the tensors out at aligned offsets. */
static int layout(struct gguf_writer *w, char *err)
{
	uint64_t off = 0;
	size_t i;

	w->alignment = GGUF_DEFAULT_ALIGNMENT;
	for (i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kv[i].key, "general.alignment") != 0)
			continue;
		if (w->kv[i].type != GGUF_TYPE_UINT32)
			return ember_seterr(err, EMBER_EINVAL, "general.alignment must be a u32");
		const uint8_t *v = w->kv[i].val.p;
		w->alignment = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
			       (uint32_t)v[3] << 24;
		if (w->alignment == 0 || (w->alignment & (w->alignment - 1)) != 0)
			return ember_seterr(err, EMBER_EINVAL,
					    "general.alignment %u is not a power of two",
					    w->alignment);
	}
	for (i = 0; i < w->n_t; i++) {
		w->t[i].offset = off;
		if (w->t[i].size > UINT64_MAX - off - w->alignment)
			return ember_seterr(err, EMBER_EINVAL, "tensor data exceeds 2^64 bytes");
		off = align_up(off + w->t[i].size, w->alignment);
	}
	return 0;
}

int gguf_writer_write_header(struct gguf_writer *w, char *err)
{
	struct bytes b = {0};
	size_t i;
	uint32_t d;
	int rc;

	if (w->failed)
		return ember_seterr(err, w->failed, "%s", w->err);
	if (w->state != W_COLLECT)
		return ember_seterr(err, EMBER_EINVAL, "header already written");
	if ((rc = layout(w, err)))
		return rc;
	rc = bytes_put(&b, "GGUF", 4);
	rc = rc ? rc : bytes_u32(&b, GGUF_WRITE_VERSION);
	rc = rc ? rc : bytes_u64(&b, w->n_t);
	rc = rc ? rc : bytes_u64(&b, w->n_kv);
	for (i = 0; i < w->n_kv && rc == 0; i++) {
		rc = bytes_str(&b, w->kv[i].key, w->kv[i].key_len);
		rc = rc ? rc : bytes_u32(&b, w->kv[i].type);
		rc = rc ? rc : bytes_put(&b, w->kv[i].val.p, w->kv[i].val.len);
	}
	for (i = 0; i < w->n_t && rc == 0; i++) {
		const struct wtensor *t = &w->t[i];
		rc = bytes_str(&b, t->name, strlen(t->name));
		rc = rc ? rc : bytes_u32(&b, t->n_dims);
		for (d = 0; d < t->n_dims && rc == 0; d++)
			rc = bytes_u64(&b, t->ne[d]);
		rc = rc ? rc : bytes_u32(&b, t->type);
		rc = rc ? rc : bytes_u64(&b, t->offset);
	}
	if (rc)
		rc = ember_seterr(err, rc, "header: out of memory");
	else if ((rc = write_bytes(w, b.p, b.len, err)) == 0)
		rc = write_pad(w, b.len, err);
	free(b.p);
	if (rc == 0)
		w->state = W_DATA;
	return rc;
}

int gguf_writer_write_data(struct gguf_writer *w, const void *data, size_t len, char *err)
{
	const uint8_t *p = data;
	int rc;

	if (w->state != W_DATA)
		return ember_seterr(err, EMBER_EINVAL, "write_data before the header or after finish");
	while (len > 0) {
		struct wtensor *t;
		uint64_t left;
		size_t n;

		if (w->cur >= w->n_t)
			return ember_seterr(err, EMBER_EINVAL, "%zu bytes more than the tensors hold",
					    len);
		t = &w->t[w->cur];
		left = t->size - w->cur_written;
		n = left < len ? (size_t)left : len;
		if ((rc = write_bytes(w, p, n, err)))
			return rc;
		p += n;
		len -= n;
		w->cur_written += n;
		if (w->cur_written == t->size) {
			if ((rc = write_pad(w, t->size, err)))
				return rc;
			w->cur++;
			w->cur_written = 0;
		}
	}
	return 0;
}

int gguf_writer_finish(struct gguf_writer *w, char *err)
{
	FILE *f = w->f;

	if (w->state != W_DATA)
		return ember_seterr(err, EMBER_EINVAL, "finish before the header or twice");
	if (w->cur < w->n_t)
		return ember_seterr(err, EMBER_EINVAL, "tensor '%s': %llu of %llu bytes written",
				    w->t[w->cur].name, (ull)w->cur_written,
				    (ull)w->t[w->cur].size);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		return ember_seterr(err, EMBER_EIO, "%s: %s", w->tmp, strerror(errno));
	w->f = NULL;
	if (fclose(f) != 0) {
		unlink(w->tmp);
		return ember_seterr(err, EMBER_EIO, "%s: %s", w->tmp, strerror(errno));
	}
	if (rename(w->tmp, w->path) != 0) {
		unlink(w->tmp);
		return ember_seterr(err, EMBER_EIO, "rename %s: %s", w->tmp, strerror(errno));
	}
	w->state = W_DONE;
	return 0;
}
