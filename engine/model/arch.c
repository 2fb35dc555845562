/* arch.c - the architecture table (arch.h). */
#include "arch.h"

#include <math.h>
#include <string.h>

/* Tensor use of the LLaMA-style block: pre-norms, separate q/k/v, gated
 * MLP, optional biases (Llama/Mistral have none; some fine-tunes carry
 * them). */
#define LLAMA_TENSORS                                                              \
	[ARCH_T_TOKEN_EMBD] = ARCH_REQ, [ARCH_T_OUTPUT_NORM] = ARCH_REQ,             \
	[ARCH_T_OUTPUT] = ARCH_OPT, [ARCH_T_ATTN_NORM] = ARCH_REQ,                    \
	[ARCH_T_ATTN_Q] = ARCH_REQ, [ARCH_T_ATTN_Q_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_K] = ARCH_REQ, [ARCH_T_ATTN_K_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_V] = ARCH_REQ, [ARCH_T_ATTN_V_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_OUT] = ARCH_REQ, [ARCH_T_ATTN_OUT_B] = ARCH_OPT,                 \
	[ARCH_T_FFN_NORM] = ARCH_REQ, [ARCH_T_FFN_GATE] = ARCH_REQ,                   \
	[ARCH_T_FFN_UP] = ARCH_REQ, [ARCH_T_FFN_DOWN] = ARCH_REQ

/* LayerNorm with bias everywhere a norm is. */
#define NORM_BIASES                                                                \
	[ARCH_T_OUTPUT_NORM_B] = ARCH_REQ, [ARCH_T_ATTN_NORM_B] = ARCH_REQ

/* The GPT-style parallel block (Phi-2, Falcon): one norm feeding both
 * attention and a non-gated MLP of up/down. */
#define PARALLEL_TENSORS                                                           \
	[ARCH_T_TOKEN_EMBD] = ARCH_REQ, [ARCH_T_OUTPUT_NORM] = ARCH_REQ,             \
	[ARCH_T_ATTN_NORM] = ARCH_REQ, [ARCH_T_ATTN_OUT] = ARCH_REQ,                  \
	[ARCH_T_FFN_UP] = ARCH_REQ, [ARCH_T_FFN_DOWN] = ARCH_REQ, NORM_BIASES

/*
 * One row per general.architecture value, plus variants of one (when_true)
 * that a bool key of the file selects. Adding one: set its flags and the roles it
 * uses; its keys are read as "<gguf_arch>.<key>" by model.c. Each
 * row below reproduces its golden model (../shared/golden/<arch>) within
 * the README's tolerance (tests/test_forward.c).
 */
static const struct arch_desc arch_table[] = {
	{
		/* LLaMA 1/2/3, TinyLlama, SmolLM, Mistral (converted as "llama"). */
		.name = "llama",
		.gguf_arch = "llama",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NORM,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		/* Llama 3.x carries its rope scaling as rope_freqs. */
		.tensors = {LLAMA_TENSORS, [ARCH_T_ROPE_FREQS] = ARCH_OPT},
	},
	{
		/* Gemma: the converter folds RMSNorm's (1 + w) into w. */
		.name = "gemma",
		.gguf_arch = "gemma",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_GELU_TANH,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.embd_scale_sqrt = 1,
		.tied_output = 1,
		.tensors = {LLAMA_TENSORS},
	},
	{
		/* Qwen2: q/k/v biases (optional in LLAMA_TENSORS). */
		.name = "qwen2",
		.gguf_arch = "qwen2",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		.tensors = {LLAMA_TENSORS},
	},
	{
		/* StableLM 2 / 3B: partial rotary from rope.dimension_count.
		 * (Variants with per-head q/k norms or a parallel residual
		 * need roles not listed yet.) */
		.name = "stablelm",
		.gguf_arch = "stablelm",
		.norm = ARCH_NORM_LAYER,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tensors = {LLAMA_TENSORS, NORM_BIASES, [ARCH_T_FFN_NORM_B] = ARCH_REQ},
	},
	{
		/* Phi-2: partial rotary, biases on every linear and the head;
		 * older conversions fuse q/k/v. */
		.name = "phi2",
		.gguf_arch = "phi2",
		.norm = ARCH_NORM_LAYER,
		.act = ARCH_ACT_GELU_TANH,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_PARALLEL,
		.tensors = {PARALLEL_TENSORS, [ARCH_T_OUTPUT] = ARCH_REQ,
			    [ARCH_T_OUTPUT_B] = ARCH_REQ, [ARCH_T_ATTN_Q] = ARCH_OPT,
			    [ARCH_T_ATTN_Q_B] = ARCH_OPT, [ARCH_T_ATTN_K] = ARCH_OPT,
			    [ARCH_T_ATTN_K_B] = ARCH_OPT, [ARCH_T_ATTN_V] = ARCH_OPT,
			    [ARCH_T_ATTN_V_B] = ARCH_OPT, [ARCH_T_ATTN_QKV] = ARCH_OPT,
			    [ARCH_T_ATTN_QKV_B] = ARCH_OPT, [ARCH_T_ATTN_OUT_B] = ARCH_REQ,
			    [ARCH_T_FFN_UP_B] = ARCH_REQ, [ARCH_T_FFN_DOWN_B] = ARCH_REQ},
	},
	{
		/* Falcon-7B layout: fused q/k/v (the converter reorders it to
		 * [q | k | v]), multi-query. Falcon-40B's second norm
		 * (attn_norm_2) needs a role not listed yet. */
		.name = "falcon",
		.gguf_arch = "falcon",
		.norm = ARCH_NORM_LAYER,
		.act = ARCH_ACT_GELU_ERF,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_PARALLEL,
		.tied_output = 1,
		.tensors = {PARALLEL_TENSORS, [ARCH_T_OUTPUT] = ARCH_OPT,
			    [ARCH_T_ATTN_QKV] = ARCH_REQ, [ARCH_T_ATTN_QKV_B] = ARCH_OPT,
			    [ARCH_T_ATTN_OUT_B] = ARCH_OPT, [ARCH_T_FFN_UP_B] = ARCH_OPT,
			    [ARCH_T_FFN_DOWN_B] = ARCH_OPT},
	},
	{
		/* Falcon-RW (falcon-rw-1b): HF's Falcon with alibi, a
		 * sequential block, full multi-head attention and biases on
		 * every linear and norm; fused q/k/v regrouped to [q | k | v]
		 * by the converter; tied head. */
		.name = "falcon-rw",
		.gguf_arch = "falcon",
		.when_true = "use_alibi",
		.norm = ARCH_NORM_LAYER,
		.act = ARCH_ACT_GELU_ERF,
		.rope = ARCH_ROPE_NONE,
		.alibi = ARCH_ALIBI_BF16,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		.tensors = {[ARCH_T_TOKEN_EMBD] = ARCH_REQ, [ARCH_T_OUTPUT_NORM] = ARCH_REQ,
			    [ARCH_T_OUTPUT] = ARCH_OPT, NORM_BIASES,
			    [ARCH_T_ATTN_NORM] = ARCH_REQ, [ARCH_T_ATTN_QKV] = ARCH_REQ,
			    [ARCH_T_ATTN_QKV_B] = ARCH_REQ, [ARCH_T_ATTN_OUT] = ARCH_REQ,
			    [ARCH_T_ATTN_OUT_B] = ARCH_REQ, [ARCH_T_FFN_NORM] = ARCH_REQ,
			    [ARCH_T_FFN_NORM_B] = ARCH_REQ, [ARCH_T_FFN_UP] = ARCH_REQ,
			    [ARCH_T_FFN_UP_B] = ARCH_REQ, [ARCH_T_FFN_DOWN] = ARCH_REQ,
			    [ARCH_T_FFN_DOWN_B] = ARCH_REQ},
	},
	{
		/* Qwen3: Qwen2 with per-head q/k RMSNorms and an explicit
		 * head_dim (attention.key_length). */
		.name = "qwen3",
		.gguf_arch = "qwen3",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		.tensors = {LLAMA_TENSORS, [ARCH_T_ATTN_Q_NORM] = ARCH_REQ,
			    [ARCH_T_ATTN_K_NORM] = ARCH_REQ},
	},
	{
		/* Phi-3 / Phi-3.5: fused qkv (or split), fused [gate | up] in
		 * ffn_up, longrope factors when the file has them. */
		.name = "phi3",
		.gguf_arch = "phi3",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.ffn_gate_up_fused = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		.tensors = {[ARCH_T_TOKEN_EMBD] = ARCH_REQ, [ARCH_T_OUTPUT_NORM] = ARCH_REQ,
			    [ARCH_T_OUTPUT] = ARCH_OPT, [ARCH_T_ROPE_LONG] = ARCH_OPT,
			    [ARCH_T_ROPE_SHORT] = ARCH_OPT, [ARCH_T_ATTN_NORM] = ARCH_REQ,
			    [ARCH_T_ATTN_QKV] = ARCH_OPT, [ARCH_T_ATTN_Q] = ARCH_OPT,
			    [ARCH_T_ATTN_K] = ARCH_OPT, [ARCH_T_ATTN_V] = ARCH_OPT,
			    [ARCH_T_ATTN_OUT] = ARCH_REQ, [ARCH_T_FFN_NORM] = ARCH_REQ,
			    [ARCH_T_FFN_UP] = ARCH_REQ, [ARCH_T_FFN_DOWN] = ARCH_REQ},
	},
	{
		/* Gemma 2: four norms per layer (the GGUF stores 1 + w),
		 * soft-capped attention scores and logits, sliding window on
		 * even layers. */
		.name = "gemma2",
		.gguf_arch = "gemma2",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_GELU_TANH,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.embd_scale_sqrt = 1,
		.tied_output = 1,
		.swa = ARCH_SWA_EVEN,
		.scale_embd_layers = 46,
		.softcap = 1,
		.tensors = {LLAMA_TENSORS, [ARCH_T_ATTN_POST_NORM] = ARCH_REQ,
			    [ARCH_T_FFN_POST_NORM] = ARCH_REQ},
	},
	{
		/* Gemma 3 (text): Gemma 2's block without soft-capping, with
		 * per-head q/k norms, five sliding layers (RoPE base
		 * rope.freq_base_swa) to one global. */
		.name = "gemma3",
		.gguf_arch = "gemma3",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_GELU_TANH,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NEOX,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.embd_scale_sqrt = 1,
		.tied_output = 1,
		.swa = ARCH_SWA_5_1,
		.scale_embd_layers = 62,
		.tensors = {LLAMA_TENSORS, [ARCH_T_ATTN_Q_NORM] = ARCH_REQ,
			    [ARCH_T_ATTN_K_NORM] = ARCH_REQ, [ARCH_T_ATTN_POST_NORM] = ARCH_REQ,
			    [ARCH_T_FFN_POST_NORM] = ARCH_REQ},
	},
};

#define N_ARCH (sizeof(arch_table) / sizeof(arch_table[0]))

static const char *const arch_name_list[N_ARCH + 1] = {"llama", "gemma", "qwen2", "stablelm",
							"phi2", "falcon", "falcon-rw", "qwen3",
							"phi3", "gemma2", "gemma3", NULL};

const struct arch_desc *arch_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < N_ARCH; i++)
		if (strlen(arch_table[i].name) == len && memcmp(arch_table[i].name, name, len) == 0)
			return &arch_table[i];
	return NULL;
}

const struct arch_desc *arch_select(const char *gguf_arch, size_t len, arch_flag_cb is_true,
				    void *data)
{
	const struct arch_desc *plain = NULL;
	size_t i;

	for (i = 0; i < N_ARCH; i++) {
		const struct arch_desc *a = &arch_table[i];

		if (strlen(a->gguf_arch) != len || memcmp(a->gguf_arch, gguf_arch, len) != 0)
			continue;
		if (!a->when_true && !plain)
			plain = a;
		else if (a->when_true && is_true && is_true(a->when_true, data))
			return a;
	}
	return plain;
}

double arch_alibi_slope(uint32_t h, uint32_t n_head, double max_bias)
{
	uint32_t p = 1;

	while (p <= n_head / 2)
		p *= 2;
	if (h < p)
		return pow(2.0, -max_bias * (h + 1) / p);
	return pow(2.0, -max_bias / 2.0 * (2 * (h - p) + 1) / p);
}

const char *const *arch_names(void)
{
	return arch_name_list;
}

const char *arch_norm_name(enum arch_norm n)
{
	switch (n) {
	case ARCH_NORM_RMS: return "rmsnorm";
	case ARCH_NORM_LAYER: return "layernorm";
	}
	return "?";
}

const char *arch_act_name(enum arch_act a)
{
	switch (a) {
	case ARCH_ACT_SILU: return "silu";
	case ARCH_ACT_GELU_TANH: return "gelu-tanh";
	case ARCH_ACT_GELU_ERF: return "gelu";
	}
	return "?";
}

const char *arch_rope_name(enum arch_rope r)
{
	switch (r) {
	case ARCH_ROPE_NONE: return "none";
	case ARCH_ROPE_NORM: return "norm";
	case ARCH_ROPE_NEOX: return "neox";
	}
	return "?";
}

int arch_layer_is_swa(const struct arch_desc *a, uint32_t il)
{
	switch (a->swa) {
	case ARCH_SWA_NONE: return 0;
	case ARCH_SWA_EVEN: return il % 2 == 0;
	case ARCH_SWA_5_1: return (il + 1) % 6 != 0;
	}
	return 0;
}
