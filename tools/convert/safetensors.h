/*
 * safetensors.h - read-only access to a Hugging Face checkpoint's
 * safetensors files, one file or a sharded set, through mmap.
 *
 * The file format (little-endian):
 *
 *   header_len  u64
 *   header      header_len bytes of JSON: an object whose keys are tensor
 *               names (plus an optional "__metadata__" object of strings);
 *               each value is {"dtype": "F32", "shape": [rows, cols],
 *               "data_offsets": [begin, end]}, offsets relative to the
 *               first byte after the header, end exclusive
 *   data        the tensors, row-major, outermost dimension first
 *
 * A sharded checkpoint has model.safetensors.index.json, whose "weight_map"
 * names the shard holding each tensor.
 *
 * Validation: every byte is untrusted. Opening checks the header length
 * against the file, parses the JSON with jansson, and checks each tensor's
 * dtype (F32, F16 or BF16; any other is EMBER_EUNSUPPORTED), its shape (0..4
 * dimensions, overflow-safe), that its byte size matches dtype x shape,
 * that its offsets lie inside the data section, and that no two tensors
 * overlap. After a successful open, `data` of every tensor may be read.
 *
 * Ownership: struct safetensors is caller storage filled by
 * safetensors_open_dir(); it owns the maps, names and arrays until
 * safetensors_close(). Tensor data points into the maps.
 *
 * Threads: one thread at a time (it is a conversion tool's reader).
 */
#ifndef EMBER_SAFETENSORS_H
#define EMBER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 4

struct st_tensor {
	char *name;                  /* owned */
	uint32_t type;               /* DTYPE_F32, DTYPE_F16 or DTYPE_BF16 */
	uint32_t n_dims;             /* 0..ST_MAX_DIMS */
	uint64_t shape[ST_MAX_DIMS]; /* outermost first, as in the file */
	uint64_t n_elems;
	uint64_t nbytes;
	const void *data; /* in the map of files[file] */
	uint32_t file;
};

struct st_file {
	char *path; /* owned */
	uint8_t *map;
	size_t size;
};

struct safetensors {
	struct st_file *files; /* owned; shards in file-name order */
	size_t n_files;
	struct st_tensor *tensors; /* owned; by shard, then by name (strcmp) */
	size_t n_tensors;
};

/* Opens the checkpoint in `dir`: model.safetensors, or else the shards named
 * by model.safetensors.index.json (every tensor the index names must be in
 * its shard; a name in two shards is an error). Returns 0, or a negative
 * code with the reason in `err` and `st` left closed. */
int safetensors_open_dir(struct safetensors *st, const char *dir, char *err);

/* Opens one file as a one-shard checkpoint (tests, tools). */
int safetensors_open_file(struct safetensors *st, const char *path, char *err);

/* Releases everything. Safe on a zeroed or closed struct. */
void safetensors_close(struct safetensors *st);

/* The tensor named `name`, or NULL. */
const struct st_tensor *safetensors_find(const struct safetensors *st, const char *name);

/* Parses a header already in memory (`json` of `len` bytes) describing a
 * data section of `data_size` bytes; appends the tensors to `st` as file
 * `file` with data pointers based at `data`. Exposed for tests. */
int safetensors_parse_header(struct safetensors *st, const char *json, size_t len,
			     const uint8_t *data, uint64_t data_size, uint32_t file, char *err);

#endif
