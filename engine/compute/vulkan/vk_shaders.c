/*
 * vk_shaders.c - the compute shaders' SPIR-V, compiled from shaders/<name>.comp
 * by glslc at build time (Makefile: <name>.spv.h, a C initializer list)
 * and embedded here, so the binary carries no separate shader files;
 * matmul, embed, gemm and coopmat once more per block type of VK_QTYPES
 * (-DQTYPE).
 */
#include "vk_impl.h"

#include "dtype.h"

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
static const uint32_t sh_gemm[] =
#include "gemm.spv.h"
;
static const uint32_t sh_coopmat[] =
#include "coopmat.spv.h"
;
/* Per block type (VK_QTYPES; Makefile VK_QTYPES compiles them). */
static const uint32_t sh_matmul_q4_1[] =
#include "matmul_q4_1.spv.h"
;
static const uint32_t sh_embed_q4_1[] =
#include "embed_q4_1.spv.h"
;
static const uint32_t sh_gemm_q4_1[] =
#include "gemm_q4_1.spv.h"
;
static const uint32_t sh_coopmat_q4_1[] =
#include "coopmat_q4_1.spv.h"
;
static const uint32_t sh_matmul_q5_0[] =
#include "matmul_q5_0.spv.h"
;
static const uint32_t sh_embed_q5_0[] =
#include "embed_q5_0.spv.h"
;
static const uint32_t sh_gemm_q5_0[] =
#include "gemm_q5_0.spv.h"
;
static const uint32_t sh_coopmat_q5_0[] =
#include "coopmat_q5_0.spv.h"
;
static const uint32_t sh_matmul_q5_1[] =
#include "matmul_q5_1.spv.h"
;
static const uint32_t sh_embed_q5_1[] =
#include "embed_q5_1.spv.h"
;
static const uint32_t sh_gemm_q5_1[] =
#include "gemm_q5_1.spv.h"
;
static const uint32_t sh_coopmat_q5_1[] =
#include "coopmat_q5_1.spv.h"
;
static const uint32_t sh_matmul_q2_k[] =
#include "matmul_q2_k.spv.h"
;
static const uint32_t sh_embed_q2_k[] =
#include "embed_q2_k.spv.h"
;
static const uint32_t sh_gemm_q2_k[] =
#include "gemm_q2_k.spv.h"
;
static const uint32_t sh_coopmat_q2_k[] =
#include "coopmat_q2_k.spv.h"
;
static const uint32_t sh_matmul_q3_k[] =
#include "matmul_q3_k.spv.h"
;
static const uint32_t sh_embed_q3_k[] =
#include "embed_q3_k.spv.h"
;
static const uint32_t sh_gemm_q3_k[] =
#include "gemm_q3_k.spv.h"
;
static const uint32_t sh_coopmat_q3_k[] =
#include "coopmat_q3_k.spv.h"
;
static const uint32_t sh_matmul_q4_k[] =
#include "matmul_q4_k.spv.h"
;
static const uint32_t sh_embed_q4_k[] =
#include "embed_q4_k.spv.h"
;
static const uint32_t sh_gemm_q4_k[] =
#include "gemm_q4_k.spv.h"
;
static const uint32_t sh_coopmat_q4_k[] =
#include "coopmat_q4_k.spv.h"
;
static const uint32_t sh_matmul_q5_k[] =
#include "matmul_q5_k.spv.h"
;
static const uint32_t sh_embed_q5_k[] =
#include "embed_q5_k.spv.h"
;
static const uint32_t sh_gemm_q5_k[] =
#include "gemm_q5_k.spv.h"
;
static const uint32_t sh_coopmat_q5_k[] =
#include "coopmat_q5_k.spv.h"
;
static const uint32_t sh_matmul_q6_k[] =
#include "matmul_q6_k.spv.h"
;
static const uint32_t sh_embed_q6_k[] =
#include "embed_q6_k.spv.h"
;
static const uint32_t sh_gemm_q6_k[] =
#include "gemm_q6_k.spv.h"
;
static const uint32_t sh_coopmat_q6_k[] =
#include "coopmat_q6_k.spv.h"
;
static const uint32_t sh_matmul_iq4_nl[] =
#include "matmul_iq4_nl.spv.h"
;
static const uint32_t sh_embed_iq4_nl[] =
#include "embed_iq4_nl.spv.h"
;
static const uint32_t sh_gemm_iq4_nl[] =
#include "gemm_iq4_nl.spv.h"
;
static const uint32_t sh_coopmat_iq4_nl[] =
#include "coopmat_iq4_nl.spv.h"
;
static const uint32_t sh_matmul_iq4_xs[] =
#include "matmul_iq4_xs.spv.h"
;
static const uint32_t sh_embed_iq4_xs[] =
#include "embed_iq4_xs.spv.h"
;
static const uint32_t sh_gemm_iq4_xs[] =
#include "gemm_iq4_xs.spv.h"
;
static const uint32_t sh_coopmat_iq4_xs[] =
#include "coopmat_iq4_xs.spv.h"
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
	[VK_SH_GEMM] = {"gemm", sh_gemm, sizeof(sh_gemm)},
	[VK_SH_COOPMAT] = {"coopmat", sh_coopmat, sizeof(sh_coopmat)},
#define VK__ROW(U, l)                                                                \
	[VK_SH_MATMUL_##U] = {"matmul_" #l, sh_matmul_##l, sizeof(sh_matmul_##l)},   \
	[VK_SH_EMBED_##U] = {"embed_" #l, sh_embed_##l, sizeof(sh_embed_##l)},     \
	[VK_SH_GEMM_##U] = {"gemm_" #l, sh_gemm_##l, sizeof(sh_gemm_##l)},         \
	[VK_SH_COOPMAT_##U] = {"coopmat_" #l, sh_coopmat_##l, sizeof(sh_coopmat_##l)},
	VK_QTYPES(VK__ROW)
#undef VK__ROW
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

int vk_shader_matmul(uint32_t t)
{
	switch (t) {
	case DTYPE_F32: case DTYPE_F16: case DTYPE_BF16: case DTYPE_Q8_0: case DTYPE_Q4_0:
		return VK_SH_MATMUL;
#define VK__CASE(U, l) case DTYPE_##U: return VK_SH_MATMUL_##U;
	VK_QTYPES(VK__CASE)
#undef VK__CASE
	}
	return -1;
}

int vk_shader_embed(uint32_t t)
{
	int s = vk_shader_matmul(t);

	/* each type's embed follows its matmul in enum vk_shader */
	return s == VK_SH_MATMUL ? VK_SH_EMBED : s < 0 ? -1 : s + 1;
}

int vk_shader_gemm(uint32_t t)
{
	int s = vk_shader_matmul(t);

	/* each type's gemm follows its embed */
	return s == VK_SH_MATMUL ? VK_SH_GEMM : s < 0 ? -1 : s + 2;
}

int vk_shader_coopmat(uint32_t t)
{
	int s = vk_shader_matmul(t);

	return s == VK_SH_MATMUL ? VK_SH_COOPMAT : s < 0 ? -1 : s + 3;
}
