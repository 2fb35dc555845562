/*
 * kv_cache.h - the keys and values of one sequence's past positions, F32
 * or F16.
 *
 * Layout (one allocation each for K and V, head-major so that attention
 * for one kv head streams a contiguous block):
 *
 *   k: [n_layer][n_head_kv][n_ctx][head_dim_k]   elements of `type`
 *   v: [n_layer][n_head_kv][n_ctx][head_dim_v]
 *
 * Positions 0 .. n_pos-1 are filled; the forward pass writes positions
 * n_pos .. n_pos+n_tok-1 of every layer, then advances n_pos once the
 * whole batch is done. Keys are stored after rotary embedding, so they are
 * reused as they are. F16 halves the memory (and the bytes attention
 * streams per decoded token) for a rounding of about 1e-3 relative.
 *
 * Sliding-window layers (kv_cache_init_ring): a layer whose attention sees
 * only the last n_swa keys keeps ring_rows = n_swa - 1 + max_step rows,
 * position p in row p % ring_rows, so a step of up to max_step tokens still
 * finds every key its queries see (for Gemma 3, five layers in six: the
 * cache shrinks to about a sixth at long contexts). A ring forgets:
 * rewinding further than the ring's slack, or copying a prefix it no
 * longer holds, marks the cache `lost` (the forward pass then refuses it)
 * or fails; never a silent wrong answer.
 *
 * Ownership: struct kv_cache is caller storage owning both arrays.
 * Thread safety: one sequence's; the forward pass writes disjoint rows from
 * its pool threads.
 */
#ifndef EMBER_KV_CACHE_H
#define EMBER_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "arch.h"
#include "model.h"

struct kv_cache {
	uint32_t n_layer, n_head_kv, head_dim_k, head_dim_v;
	uint32_t n_ctx; /* capacity in positions */
	uint32_t n_pos; /* positions filled */
	uint32_t type;  /* DTYPE_F32 or DTYPE_F16 */
	size_t elt;     /* bytes per element: 4 or 2 */
	void *k;        /* [n_layer][n_head_kv][rows of the layer][head_dim_k], owned */
	void *v;        /* [n_layer][n_head_kv][rows of the layer][head_dim_v], owned */
	uint32_t *rows; /* [n_layer] positions held: n_ctx, or ring_rows for ring layers; owned */
	size_t *base;   /* [n_layer] first row of the layer (all heads before it); owned */
	uint32_t ring_rows; /* rows of a ring layer; 0: no ring */
	uint32_t max_step;  /* ring: most tokens one step may add */
	uint32_t n_hi;  /* ring: one past the newest position ever written since reset */
	int lost;       /* ring: a rewind went past what the ring holds */
};

/* Allocates a cache for `n_ctx` positions of model `hp` with elements of
 * `type` (DTYPE_F32 or DTYPE_F16). Returns 0, EMBER_EINVAL (n_ctx == 0,
 * another type) or EMBER_ENOMEM (message in err). */
int kv_cache_init(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		  uint32_t type, char *err);

/* kv_cache_init() whose layers that `arch` marks sliding keep a ring of
 * n_swa - 1 + max_step rows (when smaller than n_ctx), for steps of at most
 * max_step tokens. arch->swa == ARCH_SWA_NONE or n_swa == 0: a full cache. */
int kv_cache_init_ring(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
		       uint32_t type, const struct arch_desc *arch, uint32_t max_step, char *err);

/* Whether a query at position n_pos would still find every key its window
 * sees after a rewind to n_pos (always 1 without a ring, and for n_pos 0). */
int kv_cache_holds(const struct kv_cache *c, uint32_t n_pos);

/* Bytes kv_cache_init_ring() would allocate. */
size_t kv_cache_bytes_for(const struct model_hparams *hp, uint32_t n_ctx, uint32_t type,
			  const struct arch_desc *arch, uint32_t max_step);

/* Whether layer il's rows are a ring. */
static inline int kv_cache_is_ring(const struct kv_cache *c, uint32_t il)
{
	return c->rows[il] != c->n_ctx;
}

/* Row of position `pos` in layer il. */
static inline uint32_t kv_cache_row(const struct kv_cache *c, uint32_t il, uint32_t pos)
{
	return kv_cache_is_ring(c, il) ? pos % c->rows[il] : pos;
}

/* Frees the arrays. NULL-safe, safe on a zeroed struct. */
void kv_cache_free(struct kv_cache *c);

/* Forgets positions >= n_pos (rewinding a session); no-op when n_pos is
 * not below the current fill. Contents need not be cleared: attention only
 * reads positions below n_pos. A ring rewound past its slack is marked
 * lost; n_pos 0 always starts over (and clears that mark). */
void kv_cache_truncate(struct kv_cache *c, uint32_t n_pos);

/* Copies the first `n` filled positions of `src` into `dst` and sets
 * dst->n_pos = n (same shapes and type; prefix reuse, session clone).
 * Returns 0 or EMBER_EINVAL on a mismatch or n > src->n_pos. */
int kv_cache_copy_prefix(struct kv_cache *dst, const struct kv_cache *src, uint32_t n);

/* kv_cache_copy_prefix() of all of src's positions. */
int kv_cache_copy(struct kv_cache *dst, const struct kv_cache *src);

/* Rows of layer `il`, kv head `h`: [rows[il]][head_dim_k] / [rows[il]][head_dim_v]
 * elements of c->type (position p at row kv_cache_row(c, il, p)). */
static inline void *kv_cache_k(const struct kv_cache *c, uint32_t il, uint32_t h)
{
	return (char *)c->k + (c->base[il] + (size_t)h * c->rows[il]) * c->head_dim_k * c->elt;
}

static inline void *kv_cache_v(const struct kv_cache *c, uint32_t il, uint32_t h)
{
	return (char *)c->v + (c->base[il] + (size_t)h * c->rows[il]) * c->head_dim_v * c->elt;
}

/* Bytes of the cache's two arrays. */
size_t kv_cache_bytes(const struct kv_cache *c);

#endif
