/*
 * convert_arch.c - per-architecture conversion tables (see convert_arch.h).
 *
 * Each table lists the keys llama.cpp's converter (commit d32676d) writes
 * for the architecture, in its order, and the tensor names of its
 * gguf-py tensor map; ../shared/golden/<arch>/model-f32.gguf are the
 * reference files the tests compare against.
 */
#include "convert_arch.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- LLaMA family: LLaMA (permuted q/k), Gemma, Qwen2, StableLM ---------- */

#define LLAMA_LAYER(QX, KX, NX)                                                          \
	{"model.layers.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, NX, CT_REQUIRED}, \
	{"model.layers.#.self_attn.q_proj", "blk.#.attn_q", D_Q, D_EMBD, QX, CT_REQUIRED},      \
	{"model.layers.#.self_attn.k_proj", "blk.#.attn_k", D_KV, D_EMBD, KX, CT_REQUIRED},     \
	{"model.layers.#.self_attn.v_proj", "blk.#.attn_v", D_KV, D_EMBD, XF_NONE, CT_REQUIRED}, \
	{"model.layers.#.self_attn.o_proj", "blk.#.attn_output", D_EMBD, D_Q, XF_NONE,          \
	 CT_REQUIRED},                                                                           \
	{"model.layers.#.post_attention_layernorm", "blk.#.ffn_norm", D_EMBD, D_NONE, NX,       \
	 CT_REQUIRED},                                                                           \
	{"model.layers.#.mlp.gate_proj", "blk.#.ffn_gate", D_FF, D_EMBD, XF_NONE, CT_REQUIRED}, \
	{"model.layers.#.mlp.up_proj", "blk.#.ffn_up", D_FF, D_EMBD, XF_NONE, CT_REQUIRED},     \
	{"model.layers.#.mlp.down_proj", "blk.#.ffn_down", D_EMBD, D_FF, XF_NONE, CT_REQUIRED}

#define LLAMA_GLOBAL(NX)                                                                      \
	{"model.embed_tokens", "token_embd", D_VOCAB, D_EMBD, XF_NONE, CT_REQUIRED},           \
	{"model.norm", "output_norm", D_EMBD, D_NONE, NX, CT_REQUIRED},                        \
	{"lm_head", "output", D_VOCAB, D_EMBD, XF_NONE, 0}

static const struct conv_tensor llama_tensors[] = {
	LLAMA_GLOBAL(XF_NONE),
	LLAMA_LAYER(XF_ROPE_Q, XF_ROPE_K, XF_NONE),
};

static const struct conv_tensor plain_tensors[] = { /* Qwen2, StableLM */
	LLAMA_GLOBAL(XF_NONE),
	LLAMA_LAYER(XF_NONE, XF_NONE, XF_NONE),
};

static const struct conv_tensor gemma_tensors[] = {
	LLAMA_GLOBAL(XF_ADD_ONE),
	LLAMA_LAYER(XF_NONE, XF_NONE, XF_ADD_ONE),
};

static const struct conv_key llama_keys[] = {
	{"block_count", HP_N_LAYER, NULL},
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"rope.freq_base", HP_ROPE_THETA, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"attention.key_length", HP_HEAD_DIM_OPT, NULL},
	{"attention.value_length", HP_HEAD_DIM_OPT, NULL},
	{"", HP_FILE_TYPE, NULL},
	{"vocab_size", HP_N_VOCAB, NULL},
	{"rope.dimension_count", HP_ROPE_DIM, NULL},
};

static const struct conv_key qwen2_keys[] = {
	{"block_count", HP_N_LAYER, NULL},
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"rope.freq_base", HP_ROPE_THETA, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
};

static const struct conv_key gemma_keys[] = {
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"block_count", HP_N_LAYER, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"attention.key_length", HP_HEAD_DIM, NULL},
	{"attention.value_length", HP_HEAD_DIM, NULL},
};

static const struct conv_key stablelm_keys[] = {
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"block_count", HP_N_LAYER, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"rope.dimension_count", HP_ROPE_DIM, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"use_parallel_residual", HP_PARALLEL, NULL},
	{"attention.layer_norm_epsilon", HP_EPS, NULL},
};

/* ---- Phi-2 ------------------------------------------------------------------ */

static const struct conv_tensor phi2_tensors[] = {
	{"lm_head", "output", D_VOCAB, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.embed_tokens", "token_embd", D_VOCAB, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.final_layernorm", "output_norm", D_EMBD, D_NONE, XF_NONE, CT_REQUIRED},
	{"model.layers.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, XF_NONE, CT_REQUIRED},
	{"model.layers.#.self_attn.q_proj", "blk.#.attn_q", D_Q, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.layers.#.self_attn.k_proj", "blk.#.attn_k", D_KV, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.layers.#.self_attn.v_proj", "blk.#.attn_v", D_KV, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.layers.#.self_attn.dense", "blk.#.attn_output", D_EMBD, D_Q, XF_NONE, CT_REQUIRED},
	{"model.layers.#.mlp.fc1", "blk.#.ffn_up", D_FF, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.layers.#.mlp.fc2", "blk.#.ffn_down", D_EMBD, D_FF, XF_NONE, CT_REQUIRED},
};

static const struct conv_key phi2_keys[] = {
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"block_count", HP_N_LAYER, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"attention.layer_norm_epsilon", HP_EPS, NULL},
	{"rope.dimension_count", HP_ROPE_DIM, NULL},
};

/* ---- Falcon ----------------------------------------------------------------- */

/* The rows Falcon-7B and Falcon-RW share: the global tensors, the block's
 * linear layers (fused q/k/v regrouped to [q | k | v]) and the keys. */
#define FALCON_GLOBAL                                                                              \
	{"transformer.word_embeddings", "token_embd", D_VOCAB, D_EMBD, XF_NONE, CT_REQUIRED},      \
	{"transformer.ln_f", "output_norm", D_EMBD, D_NONE, XF_NONE, CT_REQUIRED},                 \
	{"lm_head", "output", D_VOCAB, D_EMBD, XF_NONE, 0}

#define FALCON_LINEAR                                                                              \
	{"transformer.h.#.self_attention.query_key_value", "blk.#.attn_qkv", D_QKV, D_EMBD,        \
	 XF_FALCON_QKV, CT_REQUIRED},                                                              \
	{"transformer.h.#.self_attention.dense", "blk.#.attn_output", D_EMBD, D_Q, XF_NONE,        \
	 CT_REQUIRED},                                                                             \
	{"transformer.h.#.mlp.dense_h_to_4h", "blk.#.ffn_up", D_FF, D_EMBD, XF_NONE, CT_REQUIRED}, \
	{"transformer.h.#.mlp.dense_4h_to_h", "blk.#.ffn_down", D_EMBD, D_FF, XF_NONE, CT_REQUIRED}

#define FALCON_KEYS                                                                                \
	{"context_length", HP_N_CTX, NULL},                                                        \
	{"tensor_data_layout", HP_STR, "jploski"},                                                 \
	{"embedding_length", HP_N_EMBD, NULL},                                                     \
	{"feed_forward_length", HP_N_FF, NULL},                                                    \
	{"block_count", HP_N_LAYER, NULL},                                                         \
	{"attention.head_count", HP_N_HEAD, NULL},                                                 \
	{"attention.head_count_kv", HP_N_KV, NULL},                                                \
	{"attention.layer_norm_epsilon", HP_EPS, NULL}

/* Falcon-7B (parallel attention + MLP off one norm, multi-query), and the
 * Falcon-40B names (ln_attn / ln_mlp). */
static const struct conv_tensor falcon_tensors[] = {
	FALCON_GLOBAL,
	{"transformer.h.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, XF_NONE, 0},
	{"transformer.h.#.ln_attn", "blk.#.attn_norm", D_EMBD, D_NONE, XF_NONE, 0},
	{"transformer.h.#.ln_mlp", "blk.#.attn_norm_2", D_EMBD, D_NONE, XF_NONE, 0},
	FALCON_LINEAR,
};

static const struct conv_key falcon_keys[] = {
	FALCON_KEYS,
};

/*
 * Falcon-RW (config "alibi": true), which llama.cpp does not convert. Our
 * GGUF form, chosen to stay llama.cpp-like:
 *   general.architecture = "falcon", the Falcon keys above (head_count_kv =
 *   n_head: no multi-query), plus
 *     falcon.use_alibi                  bool  true   (no rotary embedding)
 *     falcon.attention.max_alibi_bias   f32   8.0    (llama.cpp's ALiBi key as
 *                                                     MPT/BLOOM write it; HF's
 *                                                     slopes 2^(-8(h+1)/n'))
 *     falcon.use_parallel_residual      bool  false  (sequential block)
 *   Per layer: attn_norm (input_layernorm), attn_qkv [q | k | v] as for
 *   Falcon-7B (HF's per-head (q, k, v) rows regrouped, bias too),
 *   attn_output, ffn_norm (post_attention_layernorm), ffn_up, ffn_down, all
 *   with .bias; token_embd, output_norm; no output.weight (tied head).
 */
static const struct conv_tensor falcon_rw_tensors[] = {
	FALCON_GLOBAL,
	{"transformer.h.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, XF_NONE,
	 CT_REQUIRED},
	{"transformer.h.#.post_attention_layernorm", "blk.#.ffn_norm", D_EMBD, D_NONE, XF_NONE,
	 CT_REQUIRED},
	FALCON_LINEAR,
};

static const struct conv_key falcon_rw_keys[] = {
	FALCON_KEYS,
	{"use_alibi", HP_TRUE, NULL},
	{"attention.max_alibi_bias", HP_ALIBI_MAX, NULL},
	{"use_parallel_residual", HP_FALSE, NULL},
};

/* ---- today's small models: Qwen3, Phi-3, Gemma 2 and 3 (llama.cpp v0.5.0) ---- */

static const struct conv_tensor qwen3_tensors[] = {
	LLAMA_GLOBAL(XF_NONE),
	LLAMA_LAYER(XF_NONE, XF_NONE, XF_NONE),
	{"model.layers.#.self_attn.q_norm", "blk.#.attn_q_norm", D_HEAD, D_NONE, XF_NONE,
	 CT_REQUIRED},
	{"model.layers.#.self_attn.k_norm", "blk.#.attn_k_norm", D_HEAD, D_NONE, XF_NONE,
	 CT_REQUIRED},
};

static const struct conv_key qwen3_keys[] = {
	{"block_count", HP_N_LAYER, NULL},
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"rope.freq_base", HP_ROPE_THETA, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"attention.key_length", HP_HEAD_DIM, NULL},
	{"attention.value_length", HP_HEAD_DIM, NULL},
};

/* Phi-3 keeps its fused projections: qkv rows [q | k | v], gate_up rows
 * [gate | up]. */
static const struct conv_tensor phi3_tensors[] = {
	LLAMA_GLOBAL(XF_NONE),
	{"model.layers.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, XF_NONE, CT_REQUIRED},
	{"model.layers.#.self_attn.qkv_proj", "blk.#.attn_qkv", D_QKV, D_EMBD, XF_NONE,
	 CT_REQUIRED},
	{"model.layers.#.self_attn.o_proj", "blk.#.attn_output", D_EMBD, D_Q, XF_NONE, CT_REQUIRED},
	{"model.layers.#.post_attention_layernorm", "blk.#.ffn_norm", D_EMBD, D_NONE, XF_NONE,
	 CT_REQUIRED},
	{"model.layers.#.mlp.gate_up_proj", "blk.#.ffn_up", D_FF2, D_EMBD, XF_NONE, CT_REQUIRED},
	{"model.layers.#.mlp.down_proj", "blk.#.ffn_down", D_EMBD, D_FF, XF_NONE, CT_REQUIRED},
};

static const struct conv_key phi3_keys[] = {
	{"context_length", HP_N_CTX, NULL},
	{"rope.scaling.original_context_length", HP_ORIG_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"block_count", HP_N_LAYER, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"rope.dimension_count", HP_ROPE_DIM, NULL},
	{"rope.freq_base", HP_ROPE_THETA, NULL},
	{"", HP_FILE_TYPE, NULL},
	{"attention.sliding_window", HP_SWA, NULL},
};

/* Gemma 2 and 3: four (1 + w) norms per layer; Gemma 3 adds q/k norms. */
#define GEMMA2_LAYER                                                                        \
	{"model.layers.#.input_layernorm", "blk.#.attn_norm", D_EMBD, D_NONE, XF_ADD_ONE,        \
	 CT_REQUIRED},                                                                          \
	{"model.layers.#.self_attn.q_proj", "blk.#.attn_q", D_Q, D_EMBD, XF_NONE, CT_REQUIRED},  \
	{"model.layers.#.self_attn.k_proj", "blk.#.attn_k", D_KV, D_EMBD, XF_NONE, CT_REQUIRED}, \
	{"model.layers.#.self_attn.v_proj", "blk.#.attn_v", D_KV, D_EMBD, XF_NONE, CT_REQUIRED}, \
	{"model.layers.#.self_attn.o_proj", "blk.#.attn_output", D_EMBD, D_Q, XF_NONE,           \
	 CT_REQUIRED},                                                                          \
	{"model.layers.#.post_attention_layernorm", "blk.#.post_attention_norm", D_EMBD, D_NONE, \
	 XF_ADD_ONE, CT_REQUIRED},                                                              \
	{"model.layers.#.pre_feedforward_layernorm", "blk.#.ffn_norm", D_EMBD, D_NONE,           \
	 XF_ADD_ONE, CT_REQUIRED},                                                              \
	{"model.layers.#.post_feedforward_layernorm", "blk.#.post_ffw_norm", D_EMBD, D_NONE,     \
	 XF_ADD_ONE, CT_REQUIRED},                                                              \
	{"model.layers.#.mlp.gate_proj", "blk.#.ffn_gate", D_FF, D_EMBD, XF_NONE, CT_REQUIRED},  \
	{"model.layers.#.mlp.up_proj", "blk.#.ffn_up", D_FF, D_EMBD, XF_NONE, CT_REQUIRED},      \
	{"model.layers.#.mlp.down_proj", "blk.#.ffn_down", D_EMBD, D_FF, XF_NONE, CT_REQUIRED}

static const struct conv_tensor gemma2_tensors[] = {
	LLAMA_GLOBAL(XF_ADD_ONE),
	GEMMA2_LAYER,
};

static const struct conv_tensor gemma3_tensors[] = {
	LLAMA_GLOBAL(XF_ADD_ONE),
	GEMMA2_LAYER,
	{"model.layers.#.self_attn.q_norm", "blk.#.attn_q_norm", D_HEAD, D_NONE, XF_ADD_ONE,
	 CT_REQUIRED},
	{"model.layers.#.self_attn.k_norm", "blk.#.attn_k_norm", D_HEAD, D_NONE, XF_ADD_ONE,
	 CT_REQUIRED},
};

static const struct conv_key gemma2_keys[] = {
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"block_count", HP_N_LAYER, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"attention.key_length", HP_HEAD_DIM, NULL},
	{"attention.value_length", HP_HEAD_DIM, NULL},
	{"", HP_FILE_TYPE, NULL},
	{"attn_logit_softcapping", HP_ATTN_CAP, NULL},
	{"final_logit_softcapping", HP_FINAL_CAP, NULL},
	{"attention.sliding_window", HP_SWA, NULL},
	{"attention.scale", HP_ATTN_SCALE, NULL},
};

static const struct conv_key gemma3_keys[] = {
	{"block_count", HP_N_LAYER, NULL},
	{"context_length", HP_N_CTX, NULL},
	{"embedding_length", HP_N_EMBD, NULL},
	{"feed_forward_length", HP_N_FF, NULL},
	{"attention.head_count", HP_N_HEAD, NULL},
	{"attention.head_count_kv", HP_N_KV, NULL},
	{"rope.freq_base", HP_ROPE_THETA, NULL},
	{"rope.freq_base_swa", HP_ROPE_THETA_SWA, NULL},
	{"attention.layer_norm_rms_epsilon", HP_EPS, NULL},
	{"attention.key_length", HP_HEAD_DIM, NULL},
	{"attention.value_length", HP_HEAD_DIM, NULL},
	{"", HP_FILE_TYPE, NULL},
	{"attention.sliding_window", HP_SWA, NULL},
	{"attention.scale", HP_ATTN_SCALE, NULL},
};

/* ---- the table ---------------------------------------------------------------- */

static const char *const skip_rotary[] = {"*.rotary_emb.inv_freq", NULL};
/* Gemma's head is always tied; llama.cpp drops a stored copy. */
static const char *const skip_gemma[] = {"*.rotary_emb.inv_freq", "lm_head.weight", NULL};

#define TABLES(k, t) k, N(k), t, N(t)

static const struct conv_arch arch_table[] = {
	{"LlamaForCausalLM", NULL, "llama", TABLES(llama_keys, llama_tensors), skip_rotary,
	 "llama-bpe", 0, 0, NULL, CR_LLAMA3 | CR_LINEAR, 0},
	{"GemmaForCausalLM", NULL, "gemma", TABLES(gemma_keys, gemma_tensors), skip_gemma,
	 "default", 0, 1, "<end_of_turn>", 0, 0},
	{"PhiForCausalLM", NULL, "phi2", TABLES(phi2_keys, phi2_tensors), skip_rotary, "phi-2", 1,
	 0, NULL, 0, 0},
	{"FalconForCausalLM", "alibi", "falcon", TABLES(falcon_rw_keys, falcon_rw_tensors),
	 skip_rotary, "gpt-2", 0, 0, NULL, 0, 0},
	{"FalconForCausalLM", NULL, "falcon", TABLES(falcon_keys, falcon_tensors), skip_rotary,
	 "falcon", 0, 0, NULL, 0, 0},
	{"StableLmForCausalLM", NULL, "stablelm", TABLES(stablelm_keys, plain_tensors),
	 skip_rotary, "gpt-2", 0, 0, NULL, 0, 0},
	{"Qwen2ForCausalLM", NULL, "qwen2", TABLES(qwen2_keys, plain_tensors), skip_rotary,
	 "qwen2", 0, 0, NULL, 0, 0},
	{"Qwen3ForCausalLM", NULL, "qwen3", TABLES(qwen3_keys, qwen3_tensors), skip_rotary,
	 "qwen2", 0, 0, NULL, 0, 0},
	{"Phi3ForCausalLM", NULL, "phi3", TABLES(phi3_keys, phi3_tensors), skip_rotary, "default",
	 0, 0, NULL, CR_LONGROPE, 0},
	{"Gemma2ForCausalLM", NULL, "gemma2", TABLES(gemma2_keys, gemma2_tensors), skip_gemma,
	 "default", 0, 1, "<end_of_turn>", 0, 2},
	{"Gemma3ForCausalLM", NULL, "gemma3", TABLES(gemma3_keys, gemma3_tensors), skip_gemma,
	 "default", 0, 1, "<end_of_turn>", CR_LINEAR, 6},
};

const struct conv_arch *convert_arch_find(json_t *config, char *err)
{
	const char *name = json_string_value(json_array_get(json_object_get(config, "architectures"), 0));
	char list[EMBER_ERR_MAX / 2] = "";
	const char *suffix;
	size_t i, n = 0, len;

	for (i = 0; name && i < N(arch_table); i++) {
		const struct conv_arch *a = &arch_table[i];

		if (strcmp(a->hf_arch, name) == 0 &&
		    (a->when_true == NULL || json_is_true(json_object_get(config, a->when_true))))
			return a;
	}
	/* The list without the common "ForCausalLM", so every name fits. */
	for (i = 0; i < N(arch_table) && n < sizeof(list); i++) {
		if (i > 0 && strcmp(arch_table[i].hf_arch, arch_table[i - 1].hf_arch) == 0)
			continue;
		suffix = strstr(arch_table[i].hf_arch, "ForCausalLM");
		len = suffix ? (size_t)(suffix - arch_table[i].hf_arch) : strlen(arch_table[i].hf_arch);
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%.*s", n ? ", " : "", (int)len,
				      arch_table[i].hf_arch);
	}
	ember_seterr(err, EMBER_EUNSUPPORTED,
		     "architecture '%.64s' not supported (supported: %s, each ForCausalLM)",
		     name ? name : "(config.json has no architectures)", list);
	return NULL;
}

/* ---- hyper-parameters ------------------------------------------------------- */

/* The first of `keys` (NULL-ended) present in config. */
static json_t *find_key(json_t *config, const char *const *keys)
{
	for (; *keys; keys++)
		if (json_object_get(config, *keys) && !json_is_null(json_object_get(config, *keys)))
			return json_object_get(config, *keys);
	return NULL;
}

/* A count: 0 (absent, *out = dflt), or EMBER_EFORMAT if present but not an
 * integer in 1..2^31 (dflt 0 = required). */
static int get_count(json_t *config, const char *const *keys, uint32_t dflt, uint32_t *out,
		     char *err)
{
	json_t *v = find_key(config, keys);

	if (v == NULL) {
		*out = dflt;
		return dflt ? 0 : ember_seterr(err, EMBER_EFORMAT, "config.json: no %s", keys[0]);
	}
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > (1 << 30))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: %s is not a count", keys[0]);
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static const char *const K_CTX[] = {"max_position_embeddings", "n_positions", "n_ctx", NULL};
static const char *const K_EMBD[] = {"hidden_size", "n_embd", "d_model", NULL};
static const char *const K_LAYER[] = {"num_hidden_layers", "n_layer", "num_layers", NULL};
static const char *const K_HEAD[] = {"num_attention_heads", "n_head", NULL};
static const char *const K_KV[] = {"num_key_value_heads", "num_kv_heads", "n_head_kv", NULL};
static const char *const K_FF[] = {"intermediate_size", "ffn_hidden_size", "n_inner", NULL};
static const char *const K_VOCAB[] = {"vocab_size", NULL};
static const char *const K_HEAD_DIM[] = {"head_dim", NULL};
static const char *const K_EPS[] = {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", NULL};
static const char *const K_THETA[] = {"rope_theta", NULL};
static const char *const K_PARTIAL[] = {"partial_rotary_factor", NULL};
static const char *const K_PARALLEL[] = {"use_parallel_residual", "parallel_attn", NULL};

static const char *const K_ORIG_CTX[] = {"original_max_position_embeddings", NULL};
static const char *const K_SWA[] = {"sliding_window", NULL};

/* A positive number under `key`: 0 (absent or null: *out = 0) or
 * EMBER_EFORMAT. */
static int get_positive(json_t *config, const char *key, float *out, char *err)
{
	json_t *v = json_object_get(config, key);

	*out = 0.0f;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !(json_number_value(v) > 0.0) || json_number_value(v) > 1e30)
		return ember_seterr(err, EMBER_EFORMAT, "config.json: bad %s", key);
	*out = (float)json_number_value(v);
	return 0;
}

int convert_arch_hparams(json_t *config, struct conv_hparams *hp, char *err)
{
	json_t *v;
	int rc;

	memset(hp, 0, sizeof(*hp));
	if ((rc = get_count(config, K_EMBD, 0, &hp->n_embd, err)) < 0 ||
	    (rc = get_count(config, K_LAYER, 0, &hp->n_layer, err)) < 0 ||
	    (rc = get_count(config, K_HEAD, 0, &hp->n_head, err)) < 0 ||
	    (rc = get_count(config, K_VOCAB, 0, &hp->n_vocab, err)) < 0 ||
	    (rc = get_count(config, K_CTX, 2048, &hp->n_ctx, err)) < 0 ||
	    (rc = get_count(config, K_FF, 4 * hp->n_embd, &hp->n_ff, err)) < 0 ||
	    (rc = get_count(config, K_HEAD_DIM, hp->n_embd / hp->n_head, &hp->head_dim, err)) < 0)
		return rc;
	/* Without a kv head count, multi-query (Falcon-7B) means one. */
	rc = get_count(config, K_KV,
		       json_is_true(json_object_get(config, "multi_query")) ? 1 : hp->n_head,
		       &hp->n_kv, err);
	if (rc < 0)
		return rc;
	if (hp->n_layer > 4096 || hp->head_dim == 0 || hp->n_head % hp->n_kv != 0 ||
	    (uint64_t)hp->n_head * hp->head_dim > (1u << 30))
		return ember_seterr(err, EMBER_EFORMAT,
				    "config.json: inconsistent heads (%u heads of %u, %u kv heads, "
				    "%u layers)", hp->n_head, hp->head_dim, hp->n_kv, hp->n_layer);
	hp->rope_dim = hp->head_dim;
	v = find_key(config, K_PARTIAL);
	if (v != NULL) {
		if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1)
			return ember_seterr(err, EMBER_EFORMAT, "config.json: bad partial_rotary_factor");
		hp->rope_dim = (uint32_t)(json_number_value(v) * hp->head_dim);
	}
	v = find_key(config, K_EPS);
	hp->eps = v ? (float)json_number_value(v) : 1e-5f;
	if (v && (!json_is_number(v) || !(hp->eps > 0.0f)))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: bad norm epsilon");
	v = find_key(config, K_THETA);
	hp->has_rope_theta = v != NULL;
	hp->rope_theta = v ? (float)json_number_value(v) : 10000.0f;
	if (v && (!json_is_number(v) || !(hp->rope_theta > 0.0f)))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: bad rope_theta");
	v = find_key(config, K_PARALLEL);
	hp->parallel = v ? json_is_true(v) : 1;
	hp->has_head_dim = find_key(config, K_HEAD_DIM) != NULL;
	if ((rc = get_count(config, K_ORIG_CTX, hp->n_ctx, &hp->orig_ctx, err)) < 0)
		return rc;
	v = find_key(config, K_SWA);
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 1 ||
			  json_integer_value(v) > (1 << 30)))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: bad sliding_window");
	hp->n_swa = v ? (uint32_t)json_integer_value(v) : 0;
	if ((rc = get_positive(config, "rope_local_base_freq", &hp->rope_theta_swa, err)) < 0 ||
	    (rc = get_positive(config, "attn_logit_softcapping", &hp->attn_cap, err)) < 0 ||
	    (rc = get_positive(config, "final_logit_softcapping", &hp->final_cap, err)) < 0 ||
	    (rc = get_positive(config, "query_pre_attn_scalar", &hp->attn_scale, err)) < 0)
		return rc;
	if (hp->attn_scale > 0.0f)
		hp->attn_scale = (float)(1.0 / sqrt((double)hp->attn_scale));
	return 0;
}

/* ---- tensor names -------------------------------------------------------------- */

/* Matches `name` (n bytes) against pattern `pat` with '#' a decimal number
 * (no leading zeros). Returns 1 with *layer set (or -1 when no '#'). */
static int match_base(const char *pat, const char *name, size_t n, long *layer)
{
	const char *hash = strchr(pat, '#'), *p;
	size_t pre, post;
	char *end;

	*layer = -1;
	if (hash == NULL)
		return strlen(pat) == n && memcmp(pat, name, n) == 0;
	pre = (size_t)(hash - pat);
	post = strlen(hash + 1);
	if (n < pre + post + 1 || memcmp(name, pat, pre) != 0 ||
	    memcmp(name + n - post, hash + 1, post) != 0)
		return 0;
	p = name + pre;
	if (p[0] < '0' || p[0] > '9' || (p[0] == '0' && p + 1 != name + n - post))
		return 0;
	*layer = strtol(p, &end, 10);
	return end == name + n - post && *layer < 100000;
}

const struct conv_tensor *convert_arch_map(const struct conv_arch *a, const struct conv_hparams *hp,
					   const char *hf, char *gguf, size_t size, int *is_bias)
{
	const char *dot = strrchr(hf, '.');
	size_t i, n;
	long layer;

	if (dot == NULL || (strcmp(dot, ".weight") != 0 && strcmp(dot, ".bias") != 0))
		return NULL;
	n = (size_t)(dot - hf);
	for (i = 0; i < a->n_tensors; i++) {
		const struct conv_tensor *t = &a->tensors[i];
		const char *hash;

		if (!match_base(t->hf, hf, n, &layer) || layer >= (long)hp->n_layer)
			continue;
		hash = strchr(t->gguf, '#');
		if (hash)
			snprintf(gguf, size, "%.*s%ld%s%s", (int)(hash - t->gguf), t->gguf, layer,
				 hash + 1, dot);
		else
			snprintf(gguf, size, "%s%s", t->gguf, dot);
		*is_bias = strcmp(dot, ".bias") == 0;
		return t;
	}
	return NULL;
}

int convert_arch_skipped(const struct conv_arch *a, const char *hf)
{
	const char *const *s;

	for (s = a->skip; s && *s; s++)
		if (fnmatch(*s, hf, 0) == 0)
			return 1;
	return 0;
}

uint64_t convert_arch_dim(const struct conv_hparams *hp, enum conv_dim d)
{
	switch (d) {
	case D_EMBD: return hp->n_embd;
	case D_VOCAB: return hp->n_vocab;
	case D_FF: return hp->n_ff;
	case D_Q: return (uint64_t)hp->n_head * hp->head_dim;
	case D_KV: return (uint64_t)hp->n_kv * hp->head_dim;
	case D_QKV: return (uint64_t)(hp->n_head + 2 * hp->n_kv) * hp->head_dim;
	case D_HEAD: return hp->head_dim;
	case D_FF2: return 2 * (uint64_t)hp->n_ff;
	default: return 1;
	}
}

/* ---- row permutations ------------------------------------------------------------ */

uint64_t *convert_arch_perm(enum conv_xform xf, const struct conv_hparams *hp, uint64_t rows,
			    int *rc)
{
	uint64_t *perm, r, hd = hp->head_dim, heads, half, per_group, g, q;

	*rc = 0;
	if (xf != XF_ROPE_Q && xf != XF_ROPE_K && xf != XF_FALCON_QKV)
		return NULL;
	perm = malloc(rows * sizeof(*perm));
	if (perm == NULL) {
		*rc = EMBER_ENOMEM;
		return NULL;
	}
	if (xf == XF_FALCON_QKV) {
		/* Source: n_kv groups of (per_group q heads, k, v), hd rows each. */
		per_group = hp->n_head / hp->n_kv;
		for (r = 0; r < rows; r++) {
			uint64_t head = r / hd, src;

			if (head < hp->n_head) {
				g = head / per_group;
				q = head % per_group;
				src = g * (per_group + 2) + q;
			} else if (head < (uint64_t)hp->n_head + hp->n_kv) {
				src = (head - hp->n_head) * (per_group + 2) + per_group;
			} else {
				src = (head - hp->n_head - hp->n_kv) * (per_group + 2) + per_group + 1;
			}
			perm[r] = src * hd + r % hd;
		}
		return perm;
	}
	/* Rotate-half pairs (i, i + hd/2) become adjacent rows (2i, 2i + 1). */
	heads = xf == XF_ROPE_Q ? hp->n_head : hp->n_kv;
	hd = rows / heads;
	half = hd / 2;
	if (hd % 2 != 0 || rows % heads != 0) {
		free(perm);
		*rc = EMBER_EFORMAT;
		return NULL;
	}
	for (r = 0; r < rows; r++) {
		uint64_t h = r / hd, k = r % hd;
		perm[r] = h * hd + (k % 2) * half + k / 2;
	}
	return perm;
}
