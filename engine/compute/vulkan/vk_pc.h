/*
 * vk_pc.h - the push-constant blocks of the Vulkan shaders, field for
 * field as each shader declares them (scalar layout: device addresses
 * first, then 32-bit values). One copy for vk_pass.c, which records the
 * dispatches, and tests/test_vulkan.c, which dispatches single shaders
 * against the CPU reference: a field added to a shader is added here once,
 * so the two cannot drift apart. Plain data, no Vulkan headers needed.
 */
#ifndef EMBER_VK_PC_H
#define EMBER_VK_PC_H

#include <stdint.h>

struct pc_matmul {
	uint64_t w, x, y, bias;
	uint32_t type, n_in, n_out, n_tok, flags;
	float cap;
};
struct pc_norm {
	uint64_t x, out, gain, bias, map;
	uint32_t dim, stride_in, stride_out, flags;
	float eps;
	uint32_t rows;
};
struct pc_rope {
	uint64_t x, table;
	uint32_t n, heads, hd, half, neox;
};
struct pc_embed {
	uint64_t w, x, tokens;
	uint32_t type, dim, n;
	float scale;
};
struct pc_act {
	uint64_t gate, up;
	uint32_t n, act, gated;
};
struct pc_add {
	uint64_t x, y;
	uint32_t n;
};
struct pc_kv_store {
	uint64_t k, v, kc, vc;
	uint32_t r0, pos0, n, heads, dk, dv, n_ctx, f16, ring;
};
struct pc_attention {
	uint64_t q, out, kc, vc, slopes;
	uint32_t row0, pos0, heads, heads_kv, dk, dv, n_ctx, f16, window, alibi;
	float scale, cap;
	uint32_t ring;
};
struct pc_copy {
	uint64_t src, dst;
	uint32_t n, width, src_stride, off;
};

#endif
