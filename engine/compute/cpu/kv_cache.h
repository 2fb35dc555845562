/*
 * kv_cache.h - the keys and values of one sequence's past positions, F32
 * or F16.
 *
 * Layout (one array each for K and V), position-blocked: positions go
 * in chunks of P = 1 << chunk_shift (KV_CACHE_CHUNK_SHIFT: 256), and a
 * chunk holds all layers' rows of its positions,
 *
 *   k: [n_ctx / P][n_layer][n_head_kv][P][head_dim_k]   elements of `type`
 *   v: [n_ctx / P][n_layer][n_head_kv][P][head_dim_v]
 *
 * the last chunk of n_ctx % P positions as [n_layer][n_head_kv][n_ctx % P][d]
 * (no padding: kv_cache_bytes_for() is n_ctx positions' rows). Within a
 * chunk one kv head's rows are contiguous, and P is a multiple of
 * attention's 64-key block, so a block of keys from a multiple of its
 * length never straddles a chunk (attention_kv.c reads one that does,
 * after a window's start, as it reads a ring's wrap). Why by position:
 * memory is committed as positions grow. Head-major over the whole
 * context ([layer][head][n_ctx][d], before 2026-11-29) put position 0 of
 * every (layer, head) block n_ctx rows apart, so in 2 MiB pages the first
 * token committed the whole cache (a 2048-position TinyLlama slot: 22 MiB
 * an array at once).
 *
 * What is committed when: nothing at init (zeroed anonymous memory). A
 * chunk of an array of 2 MiB or more (TinyLlama F16: 2.75 MiB; an 8B
 * model's: 16 MiB) puts the array in 2 MiB pages (pages.h: MADV_HUGEPAGE
 * on a 2 MiB-aligned array, when THP allows; refused or off:
 * EMBER_HUGEPAGES=0, 4 KiB pages, no error; EMBER_HUGEPAGES=always: the
 * mapping whatever the chunk, as the tests use it), so writing positions
 * 0 .. n-1 commits the huge pages over chunks 0 .. (n-1) / P: at most
 * one chunk plus a page beyond the filled positions' chunks (TinyLlama,
 * first token: 4 MiB an array of a 2048-position slot's 22). Smaller
 * chunks (small models, tests) stay in 4 KiB pages from the heap (so
 * AddressSanitizer sees their bounds): a position commits one page per
 * (layer, head) as before. Huge pages cut the TLB misses of a decode
 * step's attention, which reads every layer's rows cold (LEVELS.md,
 * att22 and kvpg23).
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

/* Positions per chunk (kv_cache.h layout): a multiple of 64. */
#define KV_CACHE_CHUNK_SHIFT 8

/* Where a layer's rows lie: a full layer among the full ones, a ring
 * layer among the rings (each set chunked on its own rows). */
struct kv_cache_layer {
	size_t base;   /* row where the layer's set starts */
	uint32_t rows; /* positions held: n_ctx, or ring_rows for ring layers */
	uint32_t head0; /* index of (layer, kv head 0) in its set's chunk */
	uint32_t heads; /* head blocks in a chunk of its set (layers x n_head_kv) */
};

struct kv_cache {
	uint32_t n_layer, n_head_kv, head_dim_k, head_dim_v;
	uint32_t n_ctx; /* capacity in positions */
	uint32_t n_pos; /* positions filled */
	uint32_t type;  /* DTYPE_F32 or DTYPE_F16 */
	size_t elt;     /* bytes per element: 4 or 2 */
	uint32_t chunk_shift; /* positions per chunk: 1 << chunk_shift */
	void *k;        /* rows of head_dim_k elements (layout above), owned */
	void *v;        /* rows of head_dim_v elements, owned */
	size_t map_len; /* 0: k and v from the heap; else one mapping of this length at k */
	struct kv_cache_layer *layer; /* [n_layer], owned */
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

/* kv_cache_init_ring() with chunks of 1 << chunk_shift positions
 * (6 .. 24: a multiple of attention's key block; tests cross chunk edges
 * with small ones) instead of KV_CACHE_CHUNK_SHIFT's. */
int kv_cache_init_chunked(struct kv_cache *c, const struct model_hparams *hp, uint32_t n_ctx,
			  uint32_t type, const struct arch_desc *arch, uint32_t max_step,
			  uint32_t chunk_shift, char *err);

/* Whether a query at position n_pos would still find every key its window
 * sees after a rewind to n_pos (always 1 without a ring, and for n_pos 0). */
int kv_cache_holds(const struct kv_cache *c, uint32_t n_pos);

/* Bytes kv_cache_init_ring() would allocate. */
size_t kv_cache_bytes_for(const struct model_hparams *hp, uint32_t n_ctx, uint32_t type,
			  const struct arch_desc *arch, uint32_t max_step);

/* Whether layer il's rows are a ring. */
static inline int kv_cache_is_ring(const struct kv_cache *c, uint32_t il)
{
	return c->layer[il].rows != c->n_ctx;
}

/* Row of position `pos` in layer il. */
static inline uint32_t kv_cache_row(const struct kv_cache *c, uint32_t il, uint32_t pos)
{
	return kv_cache_is_ring(c, il) ? pos % c->layer[il].rows : pos;
}

/* Index of position pos's row of layer il, kv head h, in rows of either
 * array (kv_cache_k_at(): times head_dim_k elements). */
static inline size_t kv_cache_index(const struct kv_cache *c, uint32_t il, uint32_t h,
				    uint32_t pos)
{
	const struct kv_cache_layer *L = &c->layer[il];
	const uint32_t row = kv_cache_row(c, il, pos), p = 1u << c->chunk_shift;
	const uint32_t c0 = row >> c->chunk_shift << c->chunk_shift; /* chunk's first row */
	const uint32_t np = L->rows - c0 < p ? L->rows - c0 : p;     /* rows in that chunk */

	return L->base + (size_t)c0 * L->heads + (size_t)(L->head0 + h) * np + (row - c0);
}

/* How many of positions pos .. pos+n-1 of a layer il head lie in
 * consecutive rows from pos's: n, or fewer up to a chunk's end or a
 * ring's wrap. */
static inline uint32_t kv_cache_run(const struct kv_cache *c, uint32_t il, uint32_t pos,
				    uint32_t n)
{
	const uint32_t row = kv_cache_row(c, il, pos), p = 1u << c->chunk_shift;
	const uint32_t to_edge = p - (row & (p - 1)), to_end = c->layer[il].rows - row;
	const uint32_t m = to_edge < to_end ? to_edge : to_end;

	return n < m ? n : m;
}

/* Position pos's key row (head_dim_k elements of c->type) of layer il,
 * kv head h; kv_cache_v_at() its value row. */
static inline void *kv_cache_k_at(const struct kv_cache *c, uint32_t il, uint32_t h,
				  uint32_t pos)
{
	return (char *)c->k + kv_cache_index(c, il, h, pos) * c->head_dim_k * c->elt;
}

static inline void *kv_cache_v_at(const struct kv_cache *c, uint32_t il, uint32_t h,
				  uint32_t pos)
{
	return (char *)c->v + kv_cache_index(c, il, h, pos) * c->head_dim_v * c->elt;
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

/* Bytes of the cache's two arrays. */
size_t kv_cache_bytes(const struct kv_cache *c);

#endif
