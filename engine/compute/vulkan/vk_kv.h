/*
 * vk_kv.h - the layout of a device K/V cache (vk_kv.c), for the pass that
 * writes and reads it (vk_pass.c). Owned by its creator; one thread at a
 * time, like every compute_kv.
 */
#ifndef EMBER_VK_KV_H
#define EMBER_VK_KV_H

#include "vk_impl.h"

struct vk_kv {
	struct vk_buf buf;
	uint32_t n_ctx, n_pos, n_layer, heads;
	int f16;
	uint64_t row_k, row_v; /* one position of one head */
	/* Sliding-window layers as rings (kv_cache.h's rule): ring_rows =
	 * n_swa - 1 + max_step rows, position p in row p % ring_rows; 0: none.
	 * n_hi: one past the newest position written since the last reset;
	 * lost: a rewind went past what a ring holds. */
	uint32_t ring_rows, max_step, n_hi;
	int lost;
	uint32_t *rows;  /* [n_layer] rows per head: n_ctx or ring_rows */
	uint64_t *base;  /* [n_layer] byte offset of the layer's keys */
};

/* Device addresses of layer il's keys and values ([heads][rows][dim]). */
VkDeviceAddress vk_kv_k(const struct vk_kv *kv, uint32_t il);
VkDeviceAddress vk_kv_v(const struct vk_kv *kv, uint32_t il);

/* Whether layer il keeps a ring (its rows: kv->rows[il]). */
static inline int vk_kv_is_ring(const struct vk_kv *kv, uint32_t il)
{
	return kv->ring_rows && kv->rows[il] == kv->ring_rows;
}

/* After a step of n tokens: n_pos and n_hi move on. */
void vk_kv_advance(struct vk_kv *kv, uint32_t n);

#endif
