/*
 * attention_kv.c - a cache head block's rows for attention.c
 * (attention_kv.h).
 */
#include "attention_kv.h"

#include <string.h>

#include "dtype.h"
#include "kernels.h"

/* Positions j0 .. j0+n-1 of a cache head block of layer il as floats: in
 * place for F32 rows that do not wrap, else converted or copied into `buf`
 * (n * d floats): a ring layer (kv_cache.h) may wrap inside a block. */
const float *attn_kv_rows(const struct kv_cache *kv, uint32_t il, const void *head, uint32_t j0,
			  uint32_t n, uint32_t d, float *buf)
{
	const uint32_t r0 = kv_cache_row(kv, il, j0);
	const uint32_t n1 = kv_cache_is_ring(kv, il) && r0 + n > kv->rows[il] ? kv->rows[il] - r0 : n;

	if (kv->type == DTYPE_F32) {
		if (n1 == n)
			return (const float *)head + (size_t)r0 * d;
		memcpy(buf, (const float *)head + (size_t)r0 * d, (size_t)n1 * d * sizeof(float));
		memcpy(buf + (size_t)n1 * d, head, (size_t)(n - n1) * d * sizeof(float));
		return buf;
	}
	kern_fp16_to_fp32_row((const uint16_t *)head + (size_t)r0 * d, buf, (size_t)n1 * d);
	if (n1 < n)
		kern_fp16_to_fp32_row(head, buf + (size_t)n1 * d, (size_t)(n - n1) * d);
	return buf;
}

/* Positions j0 .. j0+n-1 of an F16 cache head block in place, or NULL
 * when the rows are not F16 or wrap around a ring layer. */
const uint16_t *attn_kv_rows_f16(const struct kv_cache *kv, uint32_t il, const void *head,
				 uint32_t j0, uint32_t n, uint32_t d)
{
	const uint32_t r0 = kv_cache_row(kv, il, j0);

	if (kv->type != DTYPE_F16 || (kv_cache_is_ring(kv, il) && r0 + n > kv->rows[il]))
		return NULL;
	return (const uint16_t *)head + (size_t)r0 * d;
}

/* Asks for positions j0 .. j0+n-1 of a cache head block (up to a ring
 * layer's wrap) ahead of their reads. */
void attn_kv_prefetch(const struct kv_cache *kv, uint32_t il, const void *head, uint32_t j0,
		      uint32_t n, uint32_t d)
{
	struct attn_pf pf = {0};

	attn_pf_set(&pf, 0, kv, il, head, j0, n, d);
	attn_pf_step(&pf, SIZE_MAX);
}

/* pf's range k: positions j0 .. j0+n-1 of a cache head block (up to a
 * ring layer's wrap). */
void attn_pf_set(struct attn_pf *pf, int k, const struct kv_cache *kv, uint32_t il,
		 const void *head, uint32_t j0, uint32_t n, uint32_t d)
{
	const uint32_t r0 = kv_cache_row(kv, il, j0);
	const uint32_t n1 = kv_cache_is_ring(kv, il) && r0 + n > kv->rows[il] ? kv->rows[il] - r0 : n;

	pf->p[k] = (const char *)head + (size_t)r0 * d * kv->elt;
	pf->left[k] = (size_t)n1 * d * kv->elt;
}

/* The next `lines` lines of pf (NULL: none), K's first. */
void attn_pf_step(struct attn_pf *pf, size_t lines)
{
	if (!pf)
		return;
	for (int k = 0; k < 2; k++)
		for (; pf->left[k] && lines; lines--) {
			__builtin_prefetch(pf->p[k], 0, 3);
			pf->p[k] += 64;
			pf->left[k] = pf->left[k] > 64 ? pf->left[k] - 64 : 0;
		}
}
