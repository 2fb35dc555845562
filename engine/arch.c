/* arch.c - the architecture table (arch.h). */
#include "arch.h"

#include <string.h>

/* Tensor use shared by the LLaMA-style block: pre-norms, separate q/k/v,
 * gated MLP, optional biases (Mistral/Llama have none; some fine-tunes and
 * Qwen-style variants carry q/k/v biases). */
#define LLAMA_TENSORS                                                              \
	[ARCH_T_TOKEN_EMBD] = ARCH_REQ, [ARCH_T_OUTPUT_NORM] = ARCH_REQ,             \
	[ARCH_T_OUTPUT] = ARCH_OPT, [ARCH_T_ATTN_NORM] = ARCH_REQ,                    \
	[ARCH_T_ATTN_Q] = ARCH_REQ, [ARCH_T_ATTN_Q_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_K] = ARCH_REQ, [ARCH_T_ATTN_K_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_V] = ARCH_REQ, [ARCH_T_ATTN_V_B] = ARCH_OPT,                     \
	[ARCH_T_ATTN_OUT] = ARCH_REQ, [ARCH_T_ATTN_OUT_B] = ARCH_OPT,                 \
	[ARCH_T_FFN_NORM] = ARCH_REQ, [ARCH_T_FFN_GATE] = ARCH_REQ,                   \
	[ARCH_T_FFN_UP] = ARCH_REQ, [ARCH_T_FFN_DOWN] = ARCH_REQ

/*
 * One row per general.architecture value. To add one (gemma, phi2, falcon,
 * stablelm, qwen2, ...): set its norm/act/rope/residual flags and which
 * tensor roles it uses; keys are read as "<name>.<key>" by model.c.
 *   gemma:    RMS (1+w folded by the converter), GELU_TANH gated, NEOX,
 *             embd_scale_sqrt, tied output, attention.key_length may differ
 *             from n_embd / n_head.
 *   phi2:     LAYER norm with bias, GELU_TANH non-gated, NEOX with
 *             rope.dimension_count < head dim, PARALLEL (no ffn_norm), biases
 *             on q/k/v/out/up/down and on output.
 *   falcon:   LAYER with bias, GELU_ERF non-gated, NEOX, PARALLEL, fused
 *             ATTN_QKV, MQA/GQA from the counts, tied output.
 *   stablelm: LAYER with bias, SILU gated, NEOX partial rotary, sequential,
 *             optional q/k/v biases.
 *   qwen2:    RMS, SILU gated, NEOX, q/k/v biases, tied output optional.
 */
static const struct arch_desc arch_table[] = {
	{
		.name = "llama",
		.norm = ARCH_NORM_RMS,
		.act = ARCH_ACT_SILU,
		.mlp_gated = 1,
		.rope = ARCH_ROPE_NORM,
		.residual = ARCH_RESIDUAL_SEQUENTIAL,
		.tied_output = 1,
		.tensors = {LLAMA_TENSORS},
	},
};

#define N_ARCH (sizeof(arch_table) / sizeof(arch_table[0]))

static const char *const arch_name_list[N_ARCH + 1] = {"llama", NULL};

const struct arch_desc *arch_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < N_ARCH; i++)
		if (strlen(arch_table[i].name) == len && memcmp(arch_table[i].name, name, len) == 0)
			return &arch_table[i];
	return NULL;
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
