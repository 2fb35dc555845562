/*
 * safetensors.c - safetensors header parsing and shard mapping (see
 * safetensors.h). Tensors are sorted by name within a shard, shards by file
 * name: the order llama.cpp's converter writes them in, so our files list
 * tensors in the same order as its files.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"

#define ST_MAX_HEADER (100u << 20) /* the format's own limit */

typedef unsigned long long ull;

/* safetensors dtype names: the ones we read, and the ones we recognise only
 * to refuse them with a clear message. */
static const struct {
	const char *name;
	int type; /* dtype id, or -1: known but unsupported */
} st_dtypes[] = {
	{"F32", DTYPE_F32}, {"F16", DTYPE_F16}, {"BF16", DTYPE_BF16}, {"F64", -1},
	{"I64", -1},        {"I32", -1},        {"I16", -1},          {"I8", -1},
	{"U8", -1},         {"BOOL", -1},       {"F8_E4M3", -1},      {"F8_E5M2", -1},
	{"U16", -1},        {"U32", -1},        {"U64", -1},
};

static int dtype_lookup(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (strcmp(name, st_dtypes[i].name) == 0)
			return st_dtypes[i].type;
	return -2;
}

static int grow_tensors(struct safetensors *st, size_t extra)
{
	struct st_tensor *t;

	t = realloc(st->tensors, (st->n_tensors + extra) * sizeof(*t));
	if (t == NULL && st->n_tensors + extra > 0)
		return EMBER_ENOMEM;
	st->tensors = t;
	return 0;
}

/* Reads one tensor entry into `t` (name already set). */
static int parse_entry(struct st_tensor *t, json_t *v, uint64_t data_size, char *err)
{
	json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *offs = json_object_get(v, "data_offsets");
	json_int_t begin, end;
	uint64_t n = 1, size;
	size_t i;
	int type;

	if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(shape) ||
	    !json_is_array(offs) || json_array_size(offs) != 2 ||
	    !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)))
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': needs dtype, shape and data_offsets [begin, end]",
				    t->name);
	type = dtype_lookup(json_string_value(dt));
	if (type < 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "tensor '%s': dtype %s not supported (F32, F16, BF16 are)", t->name,
				    json_string_value(dt));
	if (json_array_size(shape) > ST_MAX_DIMS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "tensor '%s': %zu dimensions (at most %d)",
				    t->name, json_array_size(shape), ST_MAX_DIMS);
	t->type = (uint32_t)type;
	t->n_dims = (uint32_t)json_array_size(shape);
	for (i = 0; i < t->n_dims; i++) {
		json_t *d = json_array_get(shape, i);
		json_int_t dim = json_is_integer(d) ? json_integer_value(d) : -1;

		if (dim < 0 || (dim > 0 && n > UINT64_MAX / (uint64_t)dim))
			return ember_seterr(err, EMBER_EFORMAT, "tensor '%s': bad shape", t->name);
		t->shape[i] = (uint64_t)dim;
		n *= (uint64_t)dim;
	}
	for (; i < ST_MAX_DIMS; i++)
		t->shape[i] = 1;
	if (n > UINT64_MAX / dtype_type_size(t->type))
		return ember_seterr(err, EMBER_EFORMAT, "tensor '%s': shape too large", t->name);
	size = n * dtype_type_size(t->type);
	begin = json_integer_value(json_array_get(offs, 0));
	end = json_integer_value(json_array_get(offs, 1));
	if (begin < 0 || end < begin || (uint64_t)end > data_size)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': data_offsets [%lld, %lld] outside the data (%llu bytes)",
				    t->name, (long long)begin, (long long)end, (ull)data_size);
	if ((uint64_t)(end - begin) != size)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': %lld bytes of data, but %s x shape needs %llu", t->name,
				    (long long)(end - begin), json_string_value(dt), (ull)size);
	t->n_elems = n;
	t->nbytes = size;
	t->data = (const void *)(uintptr_t)begin; /* rebased by the caller */
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const struct st_tensor *)a)->data;
	uintptr_t y = (uintptr_t)((const struct st_tensor *)b)->data;

	return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

int safetensors_parse_header(struct safetensors *st, const char *json, size_t len,
			     const uint8_t *data, uint64_t data_size, uint32_t file, char *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr), *v;
	struct st_tensor *first;
	const char *key;
	size_t n0 = st->n_tensors, n = 0, i;
	int rc;

	if (root == NULL || !json_is_object(root)) {
		rc = ember_seterr(err, EMBER_EFORMAT, "header is not a JSON object: %s",
				  root ? "wrong type" : jerr.text);
		goto fail;
	}
	rc = grow_tensors(st, json_object_size(root));
	if (rc < 0) {
		ember_seterr(err, rc, "safetensors header");
		goto fail;
	}
	json_object_foreach(root, key, v) {
		struct st_tensor *t = &st->tensors[n0 + n];

		if (strcmp(key, "__metadata__") == 0)
			continue;
		memset(t, 0, sizeof(*t));
		if (key[0] == '\0' || (t->name = strdup(key)) == NULL) {
			rc = ember_seterr(err, key[0] ? EMBER_ENOMEM : EMBER_EFORMAT, "empty tensor name");
			goto fail;
		}
		st->n_tensors = n0 + ++n; /* owned by st from here */
		t->file = file;
		rc = parse_entry(t, v, data_size, err);
		if (rc < 0)
			goto fail;
	}
	/* Overlap check: sorted by begin, each must start at or after the end
	 * of the one before. */
	first = st->tensors + n0;
	qsort(first, n, sizeof(*first), cmp_offset);
	for (i = 1; i < n; i++) {
		if ((uintptr_t)first[i].data < (uintptr_t)first[i - 1].data + first[i - 1].nbytes) {
			rc = ember_seterr(err, EMBER_EFORMAT, "tensors '%s' and '%s' overlap",
					  first[i - 1].name, first[i].name);
			goto fail;
		}
	}
	for (i = 0; i < n; i++)
		first[i].data = data + (uintptr_t)first[i].data;
	qsort(first, n, sizeof(*first), cmp_name);
	rc = 0;
fail:
	json_decref(root);
	return rc;
}

/* Maps `path` and parses its header as shard number `file`. */
static int open_shard(struct safetensors *st, const char *path, char *err)
{
	struct st_file *f, *nf;
	struct stat sb;
	uint64_t hlen = 0;
	int fd, rc, i;

	nf = realloc(st->files, (st->n_files + 1) * sizeof(*nf));
	if (nf == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "%s", path);
	st->files = nf;
	f = &st->files[st->n_files];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (f->path == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "%s", path);
	st->n_files++;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ember_seterr(err, EMBER_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return ember_seterr(err, EMBER_EIO, "%s: not a regular file", path);
	}
	if (sb.st_size < 8) {
		close(fd);
		return ember_seterr(err, EMBER_EFORMAT, "%s: truncated (%lld bytes)", path,
				    (long long)sb.st_size);
	}
	f->size = (size_t)sb.st_size;
	f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return ember_seterr(err, EMBER_EIO, "%s: mmap: %s", path, strerror(errno));
	}
	for (i = 7; i >= 0; i--)
		hlen = hlen << 8 | f->map[i];
	if (hlen > f->size - 8 || hlen > ST_MAX_HEADER)
		return ember_seterr(err, EMBER_EFORMAT,
				    "%s: header length %llu beyond the file (%llu bytes)", path,
				    (ull)hlen, (ull)f->size);
	rc = safetensors_parse_header(st, (const char *)f->map + 8, (size_t)hlen,
				      f->map + 8 + hlen, f->size - 8 - hlen,
				      (uint32_t)(st->n_files - 1), err);
	if (rc < 0) {
		char msg[EMBER_ERR_MAX];

		snprintf(msg, sizeof(msg), "%s", err ? err : "");
		return ember_seterr(err, rc, "%s: %s", path, msg);
	}
	return 0;
}

int safetensors_open_file(struct safetensors *st, const char *path, char *err)
{
	int rc;

	memset(st, 0, sizeof(*st));
	rc = open_shard(st, path, err);
	if (rc < 0)
		safetensors_close(st);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Checks the index: names its shards (plain file names, sorted, unique) and
 * after they are open, that each tensor is where the index says. */
static int open_index(struct safetensors *st, const char *dir, const char *index, char *err)
{
	json_error_t jerr;
	json_t *root = json_load_file(index, 0, &jerr), *map, *v;
	const char **names = NULL, *key;
	size_t n = 0, i, j;
	char path[PATH_MAX];
	int rc;

	map = json_object_get(root, "weight_map");
	if (!json_is_object(map) || json_object_size(map) == 0) {
		rc = ember_seterr(err, EMBER_EFORMAT, "%s: %s", index,
				  root ? "no weight_map object" : jerr.text);
		goto fail;
	}
	names = calloc(json_object_size(map), sizeof(*names));
	if (names == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "%s", index);
		goto fail;
	}
	json_object_foreach(map, key, v) {
		const char *s = json_string_value(v);

		if (s == NULL || s[0] == '\0' || s[0] == '.' || strchr(s, '/') != NULL) {
			rc = ember_seterr(err, EMBER_EFORMAT, "%s: tensor '%s': bad shard name",
					  index, key);
			goto fail;
		}
		names[n++] = s;
	}
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0, j = 0; i < n; i++)
		if (j == 0 || strcmp(names[i], names[j - 1]) != 0)
			names[j++] = names[i];
	for (i = 0; i < j; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		rc = open_shard(st, path, err);
		if (rc < 0)
			goto fail;
	}
	json_object_foreach(map, key, v) {
		const struct st_tensor *t = safetensors_find(st, key);

		if (t == NULL || strcmp(strrchr(st->files[t->file].path, '/') + 1,
					json_string_value(v)) != 0) {
			rc = ember_seterr(err, EMBER_EFORMAT, "%s: tensor '%s' is not in %s", index,
					  key, json_string_value(v));
			goto fail;
		}
	}
	rc = 0;
fail:
	free(names);
	json_decref(root);
	return rc;
}

int safetensors_open_dir(struct safetensors *st, const char *dir, char *err)
{
	char path[PATH_MAX];
	size_t i, j;
	int rc;

	memset(st, 0, sizeof(*st));
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	if (access(path, F_OK) == 0) {
		rc = open_shard(st, path, err);
	} else {
		snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
		if (access(path, F_OK) != 0) {
			rc = ember_seterr(err, EMBER_ENOTFOUND,
					  "%s: no model.safetensors or model.safetensors.index.json",
					  dir);
			goto fail;
		}
		rc = open_index(st, dir, path, err);
	}
	if (rc < 0)
		goto fail;
	/* A name in two shards would make the checkpoint ambiguous. */
	for (i = 0; st->n_files > 1 && i < st->n_tensors; i++)
		for (j = i + 1; j < st->n_tensors; j++)
			if (strcmp(st->tensors[i].name, st->tensors[j].name) == 0) {
				rc = ember_seterr(err, EMBER_EFORMAT, "tensor '%s' is in two shards",
						  st->tensors[i].name);
				goto fail;
			}
	return 0;
fail:
	safetensors_close(st);
	return rc;
}

void safetensors_close(struct safetensors *st)
{
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < st->n_tensors; i++)
		free(st->tensors[i].name);
	free(st->tensors);
	for (i = 0; i < st->n_files; i++) {
		if (st->files[i].map)
			munmap(st->files[i].map, st->files[i].size);
		free(st->files[i].path);
	}
	free(st->files);
	memset(st, 0, sizeof(*st));
}

const struct st_tensor *safetensors_find(const struct safetensors *st, const char *name)
{
	size_t i;

	for (i = 0; i < st->n_tensors; i++)
		if (strcmp(st->tensors[i].name, name) == 0)
			return &st->tensors[i];
	return NULL;
}
