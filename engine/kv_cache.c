/* kv_cache.c - per-sequence key/value cache (kv_cache.h). */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"

int kv_cache_init(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		  uint32_t type, char *err)
{
	size_t rows;

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
	/* model.c bounds each factor, so these products fit in size_t on
	 * 64-bit hosts; calloc checks the last multiplication. */
	rows = (size_t)c->n_layer * c->n_head_kv * n_ctx;
	c->k = calloc(rows, (size_t)c->head_dim_k * c->elt);
	c->v = calloc(rows, (size_t)c->head_dim_v * c->elt);
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
	memset(c, 0, sizeof(*c));
}

void kv_cache_truncate(struct kv_cache *c, uint32_t n_pos)
{
	if (n_pos < c->n_pos)
		c->n_pos = n_pos;
}

int kv_cache_copy_prefix(struct kv_cache *dst, const struct kv_cache *src, uint32_t n)
{
	uint32_t il, h;

	if (dst->n_layer != src->n_layer || dst->n_head_kv != src->n_head_kv ||
	    dst->head_dim_k != src->head_dim_k || dst->head_dim_v != src->head_dim_v ||
	    dst->type != src->type || n > src->n_pos || dst->n_ctx < n)
		return EMBER_EINVAL;
	for (il = 0; il < src->n_layer; il++)
		for (h = 0; h < src->n_head_kv; h++) {
			memcpy(kv_cache_k(dst, il, h), kv_cache_k(src, il, h),
			       (size_t)n * src->head_dim_k * src->elt);
			memcpy(kv_cache_v(dst, il, h), kv_cache_v(src, il, h),
			       (size_t)n * src->head_dim_v * src->elt);
		}
	dst->n_pos = n;
	return 0;
}

int kv_cache_copy(struct kv_cache *dst, const struct kv_cache *src)
{
	return kv_cache_copy_prefix(dst, src, src->n_pos);
}

size_t kv_cache_bytes(const struct kv_cache *c)
{
	return (size_t)c->n_layer * c->n_head_kv * c->n_ctx * (c->head_dim_k + c->head_dim_v) *
	       c->elt;
}
