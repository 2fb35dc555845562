/* kv_cache.c - per-sequence key/value cache (kv_cache.h). */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"

int kv_cache_init(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		  uint32_t type, char *err)
{
	return kv_cache_init_ring(c, hp, n_ctx, type, NULL, 0, err);
}

int kv_cache_init_ring(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		       uint32_t type, const struct arch_desc *arch, uint32_t max_step, char *err)
{
	size_t rows = 0;
	uint32_t il;

	memset(c, 0, sizeof(*c));
	if (n_ctx == 0)
		return ember_seterr(err, EMBER_EINVAL, "kv cache: n_ctx must be positive");
	if (type != DTYPE_F32 && type != DTYPE_F16)
		return ember_seterr(err, EMBER_EINVAL, "kv cache: type %u is neither f32 nor f16",
				    type);
	c->n_layer = hp->n_layer;
	c->n_head_kv = hp->n_head_kv;
	c->head_dim_k = hp->head_dim_k;
	c->head_dim_v = hp->head_dim_v;
	c->n_ctx = n_ctx;
	c->type = type;
	c->elt = type == DTYPE_F16 ? 2 : 4;
	if (arch && arch->swa != ARCH_SWA_NONE && hp->n_swa > 0 && max_step > 0 &&
	    (uint64_t)hp->n_swa - 1 + max_step < n_ctx) {
		c->ring_rows = hp->n_swa - 1 + max_step;
		c->max_step = max_step;
	}
	c->rows = calloc(c->n_layer ? c->n_layer : 1, sizeof(*c->rows));
	c->base = calloc(c->n_layer ? c->n_layer : 1, sizeof(*c->base));
	if (!c->rows || !c->base) {
		kv_cache_free(c);
		return ember_seterr(err, EMBER_ENOMEM, "kv cache: layer table");
	}
	/* model.c bounds each factor, so these products fit in size_t on
	 * 64-bit hosts; calloc checks the last multiplication. */
	for (il = 0; il < c->n_layer; il++) {
		c->rows[il] = c->ring_rows && arch_layer_is_swa(arch, il) ? c->ring_rows : n_ctx;
		c->base[il] = rows;
		rows += (size_t)c->n_head_kv * c->rows[il];
	}
	c->k = calloc(rows ? rows : 1, (size_t)c->head_dim_k * c->elt);
	c->v = calloc(rows ? rows : 1, (size_t)c->head_dim_v * c->elt);
	if (!c->k || !c->v) {
		kv_cache_free(c);
		return ember_seterr(err, EMBER_ENOMEM, "kv cache: %u positions", n_ctx);
	}
	return 0;
}

void kv_cache_free(struct kv_cache *c)
{
	if (!c)
		return;
	free(c->k);
	free(c->v);
	free(c->rows);
	free(c->base);
	memset(c, 0, sizeof(*c));
}

/* Whether every ring layer still holds the keys a query at position
 * n_pos - 1 sees (positions n_pos - n_swa .. n_pos - 1 of those written). */
static int ring_holds(const struct kv_cache *c, uint32_t n_pos)
{
	uint32_t window = c->ring_rows - c->max_step + 1; /* n_swa */
	uint32_t need = n_pos > window ? n_pos - window : 0;

	return c->n_hi <= c->ring_rows || need >= c->n_hi - c->ring_rows;
}

int kv_cache_holds(const struct kv_cache *c, uint32_t n_pos)
{
	return !c->ring_rows || n_pos == 0 || (!c->lost && ring_holds(c, n_pos));
}

size_t kv_cache_bytes_for(const struct model_hparams *hp, uint32_t n_ctx, uint32_t type,
			  const struct arch_desc *arch, uint32_t max_step)
{
	const size_t elt = type == DTYPE_F16 ? 2 : 4;
	int ring = arch && arch->swa != ARCH_SWA_NONE && hp->n_swa > 0 && max_step > 0 &&
		   (uint64_t)hp->n_swa - 1 + max_step < n_ctx;
	size_t rows = 0;
	uint32_t il;

	for (il = 0; il < hp->n_layer; il++)
		rows += (size_t)hp->n_head_kv *
			(ring && arch_layer_is_swa(arch, il) ? hp->n_swa - 1 + max_step : n_ctx);
	return rows * (hp->head_dim_k + hp->head_dim_v) * elt;
}

void kv_cache_truncate(struct kv_cache *c, uint32_t n_pos)
{
	if (n_pos == 0) { /* nothing to keep: a ring starts over */
		c->n_pos = 0;
		c->n_hi = 0;
		c->lost = 0;
		return;
	}
	if (n_pos >= c->n_pos)
		return;
	c->n_pos = n_pos;
	if (c->ring_rows && !ring_holds(c, n_pos))
		c->lost = 1;
}

int kv_cache_copy_prefix(struct kv_cache *dst, const struct kv_cache *src, uint32_t n)
{
	uint32_t il, h;

	uint32_t p, p0;

	if (dst->n_layer != src->n_layer || dst->n_head_kv != src->n_head_kv ||
	    dst->head_dim_k != src->head_dim_k || dst->head_dim_v != src->head_dim_v ||
	    dst->type != src->type || n > src->n_pos || dst->n_ctx < n || src->lost ||
	    (src->ring_rows && !ring_holds(src, n)))
		return EMBER_EINVAL;
	for (il = 0; il < src->n_layer; il++) {
		const size_t rk = (size_t)src->head_dim_k * src->elt, rv = (size_t)src->head_dim_v * src->elt;

		if (!kv_cache_is_ring(src, il) && !kv_cache_is_ring(dst, il)) {
			for (h = 0; h < src->n_head_kv; h++) {
				memcpy(kv_cache_k(dst, il, h), kv_cache_k(src, il, h), (size_t)n * rk);
				memcpy(kv_cache_v(dst, il, h), kv_cache_v(src, il, h), (size_t)n * rv);
			}
			continue;
		}
		/* Position by position, the last rows the smaller side holds. */
		p0 = n > src->rows[il] ? n - src->rows[il] : 0;
		if (n - p0 > dst->rows[il])
			p0 = n - dst->rows[il];
		for (h = 0; h < src->n_head_kv; h++)
			for (p = p0; p < n; p++) {
				memcpy((char *)kv_cache_k(dst, il, h) + kv_cache_row(dst, il, p) * rk,
				       (const char *)kv_cache_k(src, il, h) + kv_cache_row(src, il, p) * rk, rk);
				memcpy((char *)kv_cache_v(dst, il, h) + kv_cache_row(dst, il, p) * rv,
				       (const char *)kv_cache_v(src, il, h) + kv_cache_row(src, il, p) * rv, rv);
			}
	}
	dst->n_pos = n;
	dst->n_hi = n;
	dst->lost = 0;
	return 0;
}

int kv_cache_copy(struct kv_cache *dst, const struct kv_cache *src)
{
	return kv_cache_copy_prefix(dst, src, src->n_pos);
}

size_t kv_cache_bytes(const struct kv_cache *c)
{
	size_t rows = 0;
	uint32_t il;

	for (il = 0; il < c->n_layer; il++)
		rows += (size_t)c->n_head_kv * c->rows[il];
	return rows * (c->head_dim_k + c->head_dim_v) * c->elt;
}
