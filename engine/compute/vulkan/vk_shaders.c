/*
 * vk_shaders.c - the compute shaders' SPIR-V, compiled from shaders/<name>.comp
 * by glslc at build time (Makefile: <name>.spv.h, a C initializer list)
 * and embedded here, so the binary carries no separate shader files.
 */
#include "vk_impl.h"

static const uint32_t sh_embed[] =
#include "embed.spv.h"
;
static const uint32_t sh_norm[] =
#include "norm.spv.h"
;
static const uint32_t sh_matmul[] =
#include "matmul.spv.h"
;
static const uint32_t sh_rope[] =
#include "rope.spv.h"
;
static const uint32_t sh_kv_store[] =
#include "kv_store.spv.h"
;
static const uint32_t sh_attention[] =
#include "attention.spv.h"
;
static const uint32_t sh_act[] =
#include "act.spv.h"
;
static const uint32_t sh_add[] =
#include "add.spv.h"
;
static const uint32_t sh_copy[] =
#include "copy.spv.h"
;

static const struct {
	const char *name;
	const uint32_t *code;
	size_t bytes;
} shaders[VK_SH_COUNT] = {
	[VK_SH_EMBED] = {"embed", sh_embed, sizeof(sh_embed)},
	[VK_SH_NORM] = {"norm", sh_norm, sizeof(sh_norm)},
	[VK_SH_MATMUL] = {"matmul", sh_matmul, sizeof(sh_matmul)},
	[VK_SH_ROPE] = {"rope", sh_rope, sizeof(sh_rope)},
	[VK_SH_KV_STORE] = {"kv_store", sh_kv_store, sizeof(sh_kv_store)},
	[VK_SH_ATTENTION] = {"attention", sh_attention, sizeof(sh_attention)},
	[VK_SH_ACT] = {"act", sh_act, sizeof(sh_act)},
	[VK_SH_ADD] = {"add", sh_add, sizeof(sh_add)},
	[VK_SH_COPY] = {"copy", sh_copy, sizeof(sh_copy)},
};

const uint32_t *vk_shader_code(enum vk_shader s, size_t *bytes)
{
	*bytes = shaders[s].bytes;
	return shaders[s].code;
}

const char *vk_shader_name(enum vk_shader s)
{
	return shaders[s].name;
}
