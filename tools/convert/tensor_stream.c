/* tensor_stream.c - row-by-row type conversion into a GGUF writer. */
#include "tensor_stream.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"
#include "kernels.h"

#define COPY_CHUNK (4u << 20) /* bytes per write when copying unchanged */

void tensor_stream_init(struct tensor_stream *s)
{
	memset(s, 0, sizeof(*s));
}

void tensor_stream_free(struct tensor_stream *s)
{
	if (s == NULL)
		return;
	free(s->row);
	free(s->out);
	memset(s, 0, sizeof(*s));
}

static int reserve(struct tensor_stream *s, uint64_t cols)
{
	float *row;
	uint8_t *out;

	if (cols <= s->cap)
		return 0;
	if (cols > SIZE_MAX / sizeof(float))
		return EMBER_ENOMEM;
	row = realloc(s->row, (size_t)cols * sizeof(float));
	if (row == NULL)
		return EMBER_ENOMEM;
	s->row = row;
	out = realloc(s->out, (size_t)cols * sizeof(float)); /* no type is wider than F32 */
	if (out == NULL)
		return EMBER_ENOMEM;
	s->out = out;
	s->cap = (size_t)cols;
	return 0;
}

static int copy_bytes(struct gguf_writer *w, const uint8_t *p, uint64_t n, char *err)
{
	while (n > 0) {
		size_t k = n < COPY_CHUNK ? (size_t)n : COPY_CHUNK;
		int rc = gguf_writer_write_data(w, p, k, err);

		if (rc < 0)
			return rc;
		p += k;
		n -= k;
	}
	return 0;
}

int tensor_stream_write(struct tensor_stream *s, struct gguf_writer *w,
			const struct tensor_src *src, uint32_t dst_type, char *err)
{
	uint64_t r, src_row = dtype_row_size(src->type, src->cols);
	uint64_t dst_row = dtype_row_size(dst_type, src->cols);
	int rc;

	if (src->type == dst_type && src->perm == NULL && src->add == 0.0f)
		return copy_bytes(w, src->data, src_row * src->rows, err);
	if (src->type != DTYPE_F32 && src->type != DTYPE_F16 && src->type != DTYPE_BF16)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "cannot convert %s to %s (the source "
				    "must be f32, f16 or bf16)", dtype_name(src->type),
				    dtype_name(dst_type));
	if (dst_row == 0)
		return ember_seterr(err, EMBER_EINVAL, "rows of %llu elements cannot be %s",
				    (unsigned long long)src->cols, dtype_name(dst_type));
	rc = reserve(s, src->cols);
	if (rc < 0)
		return ember_seterr(err, rc, "row of %llu elements", (unsigned long long)src->cols);
	for (r = 0; r < src->rows; r++) {
		uint64_t from = src->perm ? src->perm[r] : r;
		const uint8_t *p = (const uint8_t *)src->data + from * src_row;
		size_t i, n = (size_t)src->cols;

		rc = kern_dequantize_row(src->type, p, s->row, n);
		if (rc == 0 && src->add != 0.0f)
			for (i = 0; i < n; i++)
				s->row[i] += src->add;
		if (rc == 0)
			rc = kern_quantize_row(dst_type, s->row, s->out, n);
		if (rc < 0)
			return ember_seterr(err, rc, "%s to %s", dtype_name(src->type),
					    dtype_name(dst_type));
		rc = gguf_writer_write_data(w, s->out, (size_t)dst_row, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void tensor_stream_release(const void *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t begin = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t end = ((uintptr_t)p + n) & ~(page - 1);

	/* Only whole pages inside the range: a neighbour may still be needed.
	 * Advice, so a failure changes nothing but memory use. */
	if (end > begin)
		(void)madvise((void *)begin, end - begin, MADV_DONTNEED);
}
