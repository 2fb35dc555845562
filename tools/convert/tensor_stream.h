/*
 * tensor_stream.h - writes one tensor into a GGUF writer row by row,
 * converting its type on the way: the memory-light core of `ember convert`
 * and `ember quantize`.
 *
 * Each output row is one source row (optionally taken from a permuted row
 * index, optionally with a constant added to every element) converted to
 * float, then to the output type with kern_quantize_row(), so rounding is
 * the GGUF reference rule. Only one row of floats and one output row are
 * held; source pages already consumed can be dropped with
 * tensor_stream_release(), so converting a model never holds more than
 * about one tensor's source bytes resident.
 *
 * Ownership: struct tensor_stream is caller storage owning its two row
 * buffers; tensor_stream_free() releases them. One thread.
 */
#ifndef EMBER_TENSOR_STREAM_H
#define EMBER_TENSOR_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct tensor_stream {
	float *row;   /* [cap] floats */
	uint8_t *out; /* one output row: up to cap * 4 bytes */
	size_t cap;   /* elements */
};

/* Where the rows come from: rows x cols elements of `type`, row-major. */
struct tensor_src {
	uint32_t type; /* F32, F16, BF16; any type when copied unchanged */
	const void *data;
	uint64_t rows, cols;
	const uint64_t *perm; /* output row r is source row perm[r]; NULL = identity */
	float add;            /* added to every element; 0 = nothing (keeps -0.0) */
};

void tensor_stream_init(struct tensor_stream *s);
void tensor_stream_free(struct tensor_stream *s);

/* Writes `src` to `w` as `dst_type` (the tensor's data, exactly its size).
 * Same type, no permutation and nothing added: the bytes are copied as they
 * are (any type). Otherwise the source must be F32, F16 or BF16 and
 * cols a multiple of dst_type's block: EMBER_EUNSUPPORTED / EMBER_EINVAL.
 * Writer errors are passed on. */
int tensor_stream_write(struct tensor_stream *s, struct gguf_writer *w,
			const struct tensor_src *src, uint32_t dst_type, char *err);

/* Drops the pages inside [p, p + n) of a read-only file mapping from the
 * resident set (they are re-read from the file if touched again). */
void tensor_stream_release(const void *p, size_t n);

#endif
