/*
 * arch.h - architecture descriptions: how one decoder-only transformer
 * family differs from another, expressed as data (in the spirit of AI Edge
 * Torch's ModelConfig). model.c binds tensors by these flags and forward.c
 * runs one generic block driven by them; adding an architecture is a table
 * entry in arch.c (plus, if it uses new GGUF tensor names, a role in
 * model.c's name table), never a copy of the forward pass.
 *
 * The block every entry describes (x: the residual stream):
 *
 *   sequential:  x += attn(norm1(x));  x += mlp(norm2(x))
 *   parallel:    h = norm1(x);  x += attn(h) + mlp(norm2 ? norm2(x) : h)
 *
 *   attn: q, k, v = h W_q (+b), h W_k (+b), h W_v (+b)   (or one fused W_qkv
 *         whose rows are [q | k | v], the order llama.cpp's converters write)
 *         rotary on the first n_rot dims of each q/k head, or ALiBi
 *         causal softmax(q k^T / sqrt(d)) v per head (ALiBi: softmax((q k_j
 *         + m_h j) / sqrt(d)), the bias added before the scaling as HF's
 *         Falcon does), kv heads shared by
 *         n_head / n_head_kv query heads (MHA, GQA, MQA follow from counts)
 *   mlp:  gated:      down(act(gate(h)) * up(h))   (Phi-3: gate and up
 *                     fused in ffn_up's [gate | up] rows)
 *         non-gated:  down(act(up(h)))
 *
 * Variants of today's models, each present only where the file has it:
 * per-head RMSNorm of q and k before RoPE (attn_q_norm / attn_k_norm),
 * norms of the attention and MLP outputs before the residual add
 * (post_attention_norm / post_ffw_norm), sliding-window layers (swa),
 * soft-capped scores and logits (softcap), and the rope tables of
 * model.h (Llama 3's rope_freqs, Phi-3's longrope factors, linear).
 *
 * Norms as GGUF stores them: Gemma's RMSNorm multiplies by (1 + w), but
 * llama.cpp's converter folds the 1 into the stored weight, so Gemma is a
 * plain ARCH_NORM_RMS here.
 *
 * Thread safety: the table is constant; lookups are pure.
 */
#ifndef EMBER_ARCH_H
#define EMBER_ARCH_H

#include <stddef.h>
#include <stdint.h>

enum arch_norm {
	ARCH_NORM_RMS,   /* x / sqrt(mean(x^2) + eps) * w */
	ARCH_NORM_LAYER, /* (x - mean) / sqrt(var + eps) * w (+ b when the bias tensor exists) */
};

enum arch_act {
	ARCH_ACT_SILU,      /* x * sigmoid(x) */
	ARCH_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
	ARCH_ACT_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt(2))) */
};

enum arch_rope {
	ARCH_ROPE_NONE, /* no rotary (ALiBi or learned positions) */
	/* llama.cpp "NORM": rotates adjacent pairs (x[2i], x[2i+1]). The
	 * converter permutes LLaMA's Q/K rows so this equals HF's halves. */
	ARCH_ROPE_NORM,
	/* llama.cpp "NEOX": rotates (x[i], x[i + n_rot/2]), HF's rotate_half. */
	ARCH_ROPE_NEOX,
};

enum arch_alibi {
	ARCH_ALIBI_NONE,
	ARCH_ALIBI_F32,  /* bias m_h * j in float */
	/* HF Falcon: build_alibi_tensor rounds the slope to bfloat16, and
	 * torch's type promotion casts the integer position to bfloat16
	 * before the product, which is rounded to bfloat16 again:
	 * bias = bf16(bf16(m_h) * bf16(j)). Exact for j < 256 and slopes that
	 * are powers of two. */
	ARCH_ALIBI_BF16,
};

enum arch_residual {
	ARCH_RESIDUAL_SEQUENTIAL,
	ARCH_RESIDUAL_PARALLEL,
};

/* Tensor roles: every weight a block may use, named as llama.cpp names them
 * (model.c maps each role to its GGUF name and expected shape). */
enum arch_tensor {
	ARCH_T_TOKEN_EMBD,
	ARCH_T_OUTPUT_NORM,
	ARCH_T_OUTPUT_NORM_B,
	ARCH_T_OUTPUT,
	ARCH_T_OUTPUT_B,
	/* Rotary frequency tables (llama.cpp's): rope_freqs divides frequency
	 * i (Llama 3's scaling), the long/short factors are Phi-3's longrope. */
	ARCH_T_ROPE_FREQS,
	ARCH_T_ROPE_LONG,
	ARCH_T_ROPE_SHORT,
	/* per layer from here on */
	ARCH_T_ATTN_NORM,
	ARCH_T_ATTN_NORM_B,
	ARCH_T_ATTN_Q,
	ARCH_T_ATTN_Q_B,
	ARCH_T_ATTN_K,
	ARCH_T_ATTN_K_B,
	ARCH_T_ATTN_V,
	ARCH_T_ATTN_V_B,
	ARCH_T_ATTN_QKV,
	ARCH_T_ATTN_QKV_B,
	ARCH_T_ATTN_OUT,
	ARCH_T_ATTN_OUT_B,
	ARCH_T_FFN_NORM,
	ARCH_T_FFN_NORM_B,
	ARCH_T_FFN_GATE,
	ARCH_T_FFN_GATE_B,
	ARCH_T_FFN_UP,
	ARCH_T_FFN_UP_B,
	ARCH_T_FFN_DOWN,
	ARCH_T_FFN_DOWN_B,
	/* Per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3), and the
	 * norms of the attention and MLP outputs (Gemma 2 and 3). */
	ARCH_T_ATTN_Q_NORM,
	ARCH_T_ATTN_K_NORM,
	ARCH_T_ATTN_POST_NORM,
	ARCH_T_FFN_POST_NORM,
	ARCH_T_COUNT
};

#define ARCH_T_FIRST_LAYER ARCH_T_ATTN_NORM

/* Which layers attend through a sliding window (<arch>.attention.sliding_window
 * keys before and including the query's own). */
enum arch_swa {
	ARCH_SWA_NONE,
	ARCH_SWA_EVEN,  /* Gemma 2: layers 0, 2, 4, ... */
	ARCH_SWA_5_1,   /* Gemma 3: every layer but each sixth ((il + 1) % 6 == 0) */
};

/* Whether an architecture uses a tensor. */
enum arch_use {
	ARCH_NO = 0, /* must be absent from the block's computation (ignored if present) */
	ARCH_OPT,    /* used when the file has it (biases of some variants) */
	ARCH_REQ,    /* the model does not load without it */
};

struct arch_desc {
	/* Our name for the row: general.architecture, or for a variant its
	 * own ("falcon-rw"). */
	const char *name;
	/* general.architecture of its files; keys are "<gguf_arch>.<key>". */
	const char *gguf_arch;
	/* Variants sharing a gguf_arch: the bool key "<gguf_arch>.<when_true>"
	 * that selects this row when true; NULL for the plain row. */
	const char *when_true;
	enum arch_norm norm;
	enum arch_act act;
	int mlp_gated; /* 1: down(act(gate) * up); 0: down(act(up)) */
	enum arch_rope rope;
	enum arch_alibi alibi; /* ALiBi bias added to scores (needs rope = NONE) */
	enum arch_residual residual;
	/* Multiply token embeddings by sqrt(n_embd) (Gemma). */
	int embd_scale_sqrt;
	/* output.weight may be absent: the head reuses token_embd (tied). */
	int tied_output;
	/* Phi-3: ffn_up holds [gate | up] (2 n_ff rows), no ffn_gate. */
	int ffn_gate_up_fused;
	/* Sliding-window layers; with rope.freq_base_swa their RoPE base
	 * differs and rope scaling applies to the other layers only. */
	enum arch_swa swa;
	/* The attention scale when the file has no attention.scale key is
	 * 1/sqrt(head_dim_k), except 1/sqrt(n_embd / n_head) for models of
	 * exactly this many layers (llama.cpp's rule for Gemma 2 27B and
	 * Gemma 3 27B, whose query_pre_attn_scalar GGUF does not carry). */
	uint32_t scale_embd_layers;
	/* Reads <arch>.attn_logit_softcapping / final_logit_softcapping. */
	int softcap;
	/* ARCH_NO / ARCH_OPT / ARCH_REQ per role. Attention takes ATTN_Q/K/V
	 * or the fused ATTN_QKV; when both forms are optional, each layer must
	 * have one (model.c checks). ffn_norm absent under a parallel residual
	 * means the MLP reads norm1's output. */
	unsigned char tensors[ARCH_T_COUNT];
};

/* The entry whose name equals `name` ("falcon-rw"), or NULL. */
const struct arch_desc *arch_find(const char *name, size_t len);

/* Answers whether the bool key "<gguf_arch>.<suffix>" of a file is true. */
typedef int (*arch_flag_cb)(const char *suffix, void *data);

/*
 * The entry for a file whose general.architecture is `gguf_arch`: of the
 * rows with that gguf_arch, the first variant whose when_true key
 * is_true() confirms, else the plain row; NULL when none has that
 * gguf_arch. ("falcon" + falcon.use_alibi = true gives "falcon-rw".)
 */
const struct arch_desc *arch_select(const char *gguf_arch, size_t len, arch_flag_cb is_true,
				    void *data);

/*
 * ALiBi slope of head h of n_head (Press et al., as HF's
 * build_alibi_tensor and llama.cpp's max_alibi_bias compute it): with p the
 * largest power of two <= n_head, heads h < p get 2^(-max_bias (h+1) / p),
 * the others (when n_head is not a power of two) 2^(-max_bias/2 *
 * (2(h-p)+1) / p). HF's slopes are max_bias = 8.
 */
double arch_alibi_slope(uint32_t h, uint32_t n_head, double max_bias);

/* Whether layer il of an architecture attends through its sliding window. */
int arch_layer_is_swa(const struct arch_desc *a, uint32_t il);

/* Names of the table's entries, NULL-terminated (for messages and docs). */
const char *const *arch_names(void);

/* Human-readable names of enum values (inspect, messages). */
const char *arch_norm_name(enum arch_norm n);
const char *arch_act_name(enum arch_act a);
const char *arch_rope_name(enum arch_rope r);

#endif
