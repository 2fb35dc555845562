/*
 * attention_kv.c - a cache head block's rows for attention.c
 * (attention_kv.h).
 */
#include "attention_kv.h"

#include <string.h>

#include "dtype.h"
#include "kernels.h"

/* Position pos's row of kv head g, layer il: its value row if v, else its
 * key row; *d its elements. */
static const char *attn_kv_at(const struct kv_cache *kv, uint32_t il, uint32_t g, int v,
			      uint32_t pos, uint32_t *d)
{
	*d = v ? kv->head_dim_v : kv->head_dim_k;
	return v ? kv_cache_v_at(kv, il, g, pos) : kv_cache_k_at(kv, il, g, pos);
}

const float *attn_kv_rows(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t j0,
			  uint32_t n, float *buf)
{
	uint32_t d, m, i;
	const char *p = attn_kv_at(kv, il, g, v, j0, &d);

	m = kv_cache_run(kv, il, j0, n);
	if (kv->type == DTYPE_F32 && m == n)
		return (const float *)p;
	/* runs up to a chunk's end or a ring's wrap (at most three: a block
	 * is no longer than a chunk) */
	for (i = 0; i < n; i += m) {
		m = kv_cache_run(kv, il, j0 + i, n - i);
		p = attn_kv_at(kv, il, g, v, j0 + i, &d);
		if (kv->type == DTYPE_F32)
			memcpy(buf + (size_t)i * d, p, (size_t)m * d * sizeof(float));
		else
			kern_fp16_to_fp32_row((const uint16_t *)p, buf + (size_t)i * d, (size_t)m * d);
	}
	return buf;
}

const uint16_t *attn_kv_rows_f16(const struct kv_cache *kv, uint32_t il, uint32_t g, int v,
				 uint32_t j0, uint32_t n)
{
	uint32_t d;

	if (kv->type != DTYPE_F16 || kv_cache_run(kv, il, j0, n) < n)
		return NULL;
	return (const uint16_t *)attn_kv_at(kv, il, g, v, j0, &d);
}

void attn_kv_prefetch(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t j0,
		      uint32_t n)
{
	struct attn_pf pf = {0};

	attn_pf_set(&pf, 0, kv, il, g, v, j0, n);
	attn_pf_step(&pf, SIZE_MAX);
}

void attn_pf_set(struct attn_pf *pf, int k, const struct kv_cache *kv, uint32_t il, uint32_t g,
		 int v, uint32_t j0, uint32_t n)
{
	uint32_t d;

	pf->p[k] = attn_kv_at(kv, il, g, v, j0, &d);
	pf->left[k] = (size_t)kv_cache_run(kv, il, j0, n) * d * kv->elt;
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
