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
	uint64_t k_bytes, v_bytes; /* one layer's keys, values */
	uint64_t row_k, row_v;     /* one position of one head */
};

/* Device addresses of layer il's keys and values. */
VkDeviceAddress vk_kv_k(const struct vk_kv *kv, uint32_t il);
VkDeviceAddress vk_kv_v(const struct vk_kv *kv, uint32_t il);

#endif
