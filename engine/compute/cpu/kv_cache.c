/* kv_cache.c - per-sequence key/value cache (kv_cache.h). */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "pages.h"

int kv_cache_init(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		  uint32_t type, char *err)
{
	return kv_cache_init_ring(c, hp, n_ctx, type, NULL, 0, err);
}

int kv_cache_init_ring(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		       uint32_t type, const struct arch_desc *arch, uint32_t max_step, char *err)
{
	return kv_cache_init_chunked(c, hp, n_ctx, type, arch, max_step, KV_CACHE_CHUNK_SHIFT,
				     err);
}

/* Places each layer in its set (full layers, then ring layers: each set
 * chunked on its own rows, kv_cache.h) and returns the rows of all. */
static size_t kv_cache__place(struct kv_cache *c)
{
	uint32_t n_set[2] = {0, 0}, il;
	size_t base[2];

	for (il = 0; il < c->n_layer; il++) {
		struct kv_cache_layer *L = &c->layer[il];
		const int ring = L->rows != c->n_ctx;

		L->head0 = n_set[ring]++ * c->n_head_kv;
	}
	base[0] = 0;
	base[1] = (size_t)n_set[0] * c->n_head_kv * c->n_ctx;
	for (il = 0; il < c->n_layer; il++) {
		struct kv_cache_layer *L = &c->layer[il];
		const int ring = L->rows != c->n_ctx;

		L->base = base[ring];
		L->heads = n_set[ring] * c->n_head_kv;
	}
	return base[1] + (size_t)n_set[1] * c->n_head_kv * c->ring_rows;
}

/* The arrays of `rows` rows: one 2 MiB-aligned mapping advised for huge
 * pages when a chunk of K rows (P positions of all layers, whatever
 * n_ctx: the model's shape decides) is 2 MiB or more and THP allows
 * (kv_cache.h), or whatever the size with EMBER_HUGEPAGES=always (pages.h:
 * so tests run the mapping on small caches), else the heap. 0 or
 * EMBER_ENOMEM. */
static int kv_cache__alloc(struct kv_cache *c, size_t rows)
{
	const size_t bk = rows * c->head_dim_k * c->elt, bv = rows * c->head_dim_v * c->elt;
	const size_t chunk = ((size_t)1 << c->chunk_shift) * c->n_layer * c->n_head_kv *
			     c->head_dim_k * c->elt;
	/* each array on 2 MiB and whole 2 MiB pages (a huge page needs its
	 * whole aligned range inside the mapping; the padding is committed
	 * only with the last page, which holds rows too) */
	const size_t ak = (bk + PAGES_HUGE - 1) & ~(PAGES_HUGE - 1);
	const size_t av = (bv + PAGES_HUGE - 1) & ~(PAGES_HUGE - 1);

	const int huge = pages_mode() == PAGES_MODE_ALWAYS ||
			 (chunk >= PAGES_HUGE && pages_huge_enabled());

	if (rows && huge && (c->k = pages_map_aligned(ak + av)) != NULL) {
		c->map_len = ak + av;
		c->v = (char *)c->k + ak;
		/* refused: 4 KiB pages, the same memory */
		(void)pages_advise_huge(c->k, c->map_len);
		return 0;
	}
	c->k = calloc(rows ? rows : 1, (size_t)c->head_dim_k * c->elt);
	c->v = calloc(rows ? rows : 1, (size_t)c->head_dim_v * c->elt);
	return c->k && c->v ? 0 : EMBER_ENOMEM;
}

int kv_cache_init_chunked(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
			  uint32_t type, const struct arch_desc *arch, uint32_t max_step,
			  uint32_t chunk_shift, char *err)
{
	uint32_t il;

	memset(c, 0, sizeof(*c));
	if (n_ctx == 0)
		return ember_seterr(err, EMBER_EINVAL, "kv cache: n_ctx must be positive");
	if (type != DTYPE_F32 && type != DTYPE_F16)
		return ember_seterr(err, EMBER_EINVAL, "kv cache: type %u is neither f32 nor f16",
				    type);
	if (chunk_shift < 6 || chunk_shift > 24)
		return ember_seterr(err, EMBER_EINVAL, "kv cache: chunk of 2^%u positions",
				    chunk_shift);
	c->n_layer = hp->n_layer;
	c->n_head_kv = hp->n_head_kv;
	c->head_dim_k = hp->head_dim_k;
	c->head_dim_v = hp->head_dim_v;
	c->n_ctx = n_ctx;
	c->type = type;
	c->elt = type == DTYPE_F16 ? 2 : 4;
	c->chunk_shift = chunk_shift;
	if (arch && arch->swa != ARCH_SWA_NONE && hp->n_swa > 0 && max_step > 0 &&
	    (uint64_t)hp->n_swa - 1 + max_step < n_ctx) {
		c->ring_rows = hp->n_swa - 1 + max_step;
		c->max_step = max_step;
	}
	c->layer = calloc(c->n_layer ? c->n_layer : 1, sizeof(*c->layer));
	if (!c->layer) {
		kv_cache_free(c);
		return ember_seterr(err, EMBER_ENOMEM, "kv cache: layer table");
	}
	for (il = 0; il < c->n_layer; il++)
		c->layer[il].rows = c->ring_rows && arch_layer_is_swa(arch, il) ? c->ring_rows : n_ctx;
	/* model.c bounds each factor, so these products fit in size_t on
	 * 64-bit hosts; calloc checks the last multiplication. */
	if (kv_cache__alloc(c, kv_cache__place(c)) != 0) {
		kv_cache_free(c);
		return ember_seterr(err, EMBER_ENOMEM, "kv cache: %u positions", n_ctx);
	}
	return 0;
}

void kv_cache_free(struct kv_cache *c)
{
	if (!c)
		return;
	if (c->map_len) {
		pages_unmap(c->k, c->map_len);
	} else {
		free(c->k);
		free(c->v);
	}
	free(c->layer);
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
	const size_t rk = (size_t)src->head_dim_k * src->elt, rv = (size_t)src->head_dim_v * src->elt;
	uint32_t il, h, p, p0, m;

	if (dst->n_layer != src->n_layer || dst->n_head_kv != src->n_head_kv ||
	    dst->head_dim_k != src->head_dim_k || dst->head_dim_v != src->head_dim_v ||
	    dst->type != src->type || n > src->n_pos || dst->n_ctx < n || src->lost ||
	    (src->ring_rows && !ring_holds(src, n)))
		return EMBER_EINVAL;
	for (il = 0; il < src->n_layer; il++) {
		/* the last positions the smaller side holds (all of them
		 * without a ring), in runs of rows consecutive on both sides */
		p0 = n > src->layer[il].rows ? n - src->layer[il].rows : 0;
		if (n - p0 > dst->layer[il].rows)
			p0 = n - dst->layer[il].rows;
		for (h = 0; h < src->n_head_kv; h++)
			for (p = p0; p < n; p += m) {
				m = kv_cache_run(dst, il, p, kv_cache_run(src, il, p, n - p));
				memcpy(kv_cache_k_at(dst, il, h, p), kv_cache_k_at(src, il, h, p), m * rk);
				memcpy(kv_cache_v_at(dst, il, h, p), kv_cache_v_at(src, il, h, p), m * rv);
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
		rows += (size_t)c->n_head_kv * c->layer[il].rows;
	return rows * (c->head_dim_k + c->head_dim_v) * c->elt;
}
