/*
 * model.h - a transformer's hyper-parameters and weights, bound from an
 * opened GGUF file by the llama.cpp key and tensor names.
 *
 * model_load() looks up general.architecture in arch.c's table (a variant
 * row when its bool key is true: falcon + falcon.use_alibi is Falcon-RW),
 * reads "<arch>.*" keys, and binds every tensor role the architecture uses to the tensor of
 * that GGUF name ("blk.3.attn_q.weight"), checking its shape against the
 * hyper-parameters and its type against what the kernels multiply. Any
 * mismatch is an error naming the tensor; nothing is copied: weights point
 * into the file's read-only map.
 *
 * Ownership: struct model is caller storage. model_load() borrows the gguf
 * (which must outlive the model); model_open() opens the file itself and
 * owns it. model_free() releases what the model owns.
 *
 * Thread safety: a loaded model is immutable; any number of forward
 * sessions (forward.h) on any threads share it.
 */
#ifndef EMBER_MODEL_H
#define EMBER_MODEL_H

#include <stdint.h>

#include "arch.h"
#include "gguf.h"

struct model_hparams {
	uint32_t n_vocab;     /* rows of token_embd */
	uint32_t n_ctx_train; /* <arch>.context_length */
	uint32_t n_embd;      /* width of the residual stream */
	uint32_t n_layer;
	uint32_t n_ff;        /* MLP inner width */
	uint32_t n_head;      /* query heads */
	uint32_t n_head_kv;   /* key/value heads; n_head is a multiple of it */
	uint32_t head_dim_k;  /* per-head width of q and k */
	uint32_t head_dim_v;  /* per-head width of v */
	uint32_t n_rot;       /* leading dims of each q/k head that rotate (even) */
	float norm_eps;
	float rope_base;      /* theta_i = pos * rope_base^(-2i / n_rot) */
	float alibi_max_bias; /* ALiBi archs: <arch>.attention.max_alibi_bias, default 8 */
	/* Rope scaling (see forward.c rope_table): frequencies times
	 * rope_freq_scale (linear: 1/factor; 1 without), divided by
	 * rope_freqs (Llama 3) or a longrope factor (Phi-3: the long ones
	 * when the session's context exceeds rope_orig_ctx), cos and sin
	 * times rope_attn_factor (1 without). */
	float rope_freq_scale;
	float rope_attn_factor;
	uint32_t rope_orig_ctx;
	/* Sliding-window layers (arch->swa): n_swa keys, RoPE base
	 * rope_base_swa without scaling when the file has
	 * rope.freq_base_swa (Gemma 3), else the others' rope. */
	uint32_t n_swa;
	float rope_base_swa;
	int has_rope_base_swa;
	float attn_scale;    /* multiplies q.k: attention.scale or the arch's rule */
	float attn_softcap;  /* scores s -> c tanh(s / c); 0: none */
	float final_softcap; /* logits likewise; 0: none */
};

/* One tensor as bound from the file. Matrices are n_out rows of n_in
 * elements of `type` (GGUF ne = {n_in, n_out}); vectors (norm weights,
 * biases) are F32 with n_out = 1. data == NULL: absent (optional roles). */
struct model_weight {
	const void *data;
	uint32_t type;
	uint32_t n_in;
	uint32_t n_out;
	/* 0, or the flag the backend ORs into type for its kernels when it
	 * laid the rows out anew at load (compute_prepare_model(): the CPU's
	 * packed rows, kernels.h KERN_PACKED); type stays the file's */
	uint32_t packed;
};

/* Per-layer weights indexed by enum arch_tensor (ARCH_T_FIRST_LAYER..). */
struct model_layer {
	struct model_weight w[ARCH_T_COUNT];
};

struct model {
	const struct arch_desc *arch;
	struct model_hparams hp;
	/* Whole-model weights indexed by enum arch_tensor (< ARCH_T_FIRST_LAYER).
	 * w[ARCH_T_OUTPUT] is token_embd when the head is tied. */
	struct model_weight w[ARCH_T_FIRST_LAYER];
	int output_tied;
	struct model_layer *layers; /* [n_layer], owned */
	const struct gguf *gguf;    /* borrowed, or &own_gguf */
	struct gguf own_gguf;       /* model_open() only */
	int owns_gguf;
};

/* Binds `m` to the model in `g`. Returns 0, or EMBER_EFORMAT (missing key
 * or tensor, wrong shape), EMBER_EUNSUPPORTED (unknown architecture, a
 * weight type without kernels), EMBER_ENOMEM, with one line in `err` that
 * names the key or tensor. On failure `m` needs no model_free(). */
int model_load(struct model *m, const struct gguf *g, char *err);

/* gguf_open_weights(path) + model_load(); the model owns the file, its
 * weights in 2 MiB pages where the kernel gives them (gguf_map.h). */
int model_open(struct model *m, const char *path, char *err);

/* Same over the plain file mapping (gguf_open): for a device that uploads
 * the weights, where a private host copy would only hold memory. */
int model_open_mapped(struct model *m, const char *path, char *err);

/* Releases what `m` owns (and the file, after model_open). NULL-safe and
 * safe on a zeroed struct. */
void model_free(struct model *m);

/* The tensor's GGUF name for a role and layer ("blk.3.ffn_up.weight") into
 * buf (at least 64 bytes). Returns buf. */
const char *model_tensor_name(enum arch_tensor role, uint32_t layer, char *buf, size_t size);

/* The GGUF shape {ne0, ne1} a tensor of `role` must have under `hp`
 * (vectors: ne1 = 1): what the loader checks, and what `ember synth`
 * writes. */
void model_tensor_shape(enum arch_tensor role, const struct model_hparams *hp, uint64_t ne[2]);

#endif
