/*
 * convert_arch.h - the architectures `ember convert` knows, as data: one
 * table per architecture mapping Hugging Face tensor names to GGUF names
 * (with the transform each needs and its expected shape) and naming the
 * GGUF hyper-parameter keys to write.
 *
 * Names: a map entry's `hf` and `gguf` are base names in which '#' stands
 * for the layer number; the ".weight" / ".bias" suffix is carried over.
 * Shapes are HF's (outermost first): a weight is [rows, cols] (or [rows]
 * when cols is D_NONE), its bias [rows].
 *
 * Transforms, so that files match llama.cpp's converter:
 *   XF_ROPE_Q / XF_ROPE_K  LLaMA: q and k rows permuted per head from HF's
 *                          rotate-half order to the interleaved order GGUF's
 *                          "normal" rope expects (k with the kv head count)
 *   XF_ADD_ONE             Gemma: RMSNorm computes x * (1 + w); GGUF stores
 *                          1 + w (weights only)
 *   XF_FALCON_QKV          Falcon: the fused query_key_value rows grouped per
 *                          kv head (q heads of the group, k, v) regrouped as
 *                          [all q | all k | all v] (llama.cpp's "jploski"
 *                          layout); with Falcon-RW's n_kv = n_head that is
 *                          HF's per-head (q, k, v) interleave undone
 *
 * Thread safety: constant tables and pure functions.
 */
#ifndef EMBER_CONVERT_ARCH_H
#define EMBER_CONVERT_ARCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Dimensions a shape is expressed in (resolved from the hyper-parameters). */
enum conv_dim {
	D_NONE, D_EMBD, D_VOCAB, D_FF, D_Q, D_KV, D_QKV,
	D_HEAD, /* head_dim: per-head q/k norms */
	D_FF2,  /* 2 n_ff: Phi-3's fused gate_up_proj */
};

enum conv_xform { XF_NONE, XF_ROPE_Q, XF_ROPE_K, XF_ADD_ONE, XF_FALCON_QKV };

#define CT_REQUIRED 1u /* every layer (or the model) must have its weight */

struct conv_tensor {
	const char *hf;
	const char *gguf;
	enum conv_dim rows, cols;
	enum conv_xform xf;
	unsigned flags;
};

/* Where a GGUF hyper-parameter key's value comes from. */
enum conv_hp {
	HP_N_CTX,
	HP_N_EMBD,
	HP_N_FF,
	HP_N_LAYER,
	HP_N_HEAD,
	HP_N_KV,
	HP_N_VOCAB,
	HP_HEAD_DIM,
	HP_ROPE_DIM,
	HP_ROPE_THETA, /* f32; written only when config.json has rope_theta */
	HP_EPS,        /* f32 */
	HP_PARALLEL,   /* bool: use_parallel_residual / parallel_attn (default true) */
	HP_TRUE,       /* bool constants */
	HP_FALSE,
	HP_ALIBI_MAX, /* f32 8.0: the slope base of standard ALiBi */
	HP_STR,       /* the string in `str` */
	HP_FILE_TYPE, /* general.file_type, where llama.cpp writes it mid-way */
	HP_HEAD_DIM_OPT,  /* head_dim, only when config.json states it */
	HP_ORIG_CTX,      /* original_max_position_embeddings (default: n_ctx) */
	HP_ROPE_THETA_SWA, /* f32 rope_local_base_freq (Gemma 3's sliding layers) */
	HP_SWA,           /* sliding_window */
	HP_ATTN_CAP,      /* f32 attn_logit_softcapping, when not null */
	HP_FINAL_CAP,     /* f32 final_logit_softcapping, when not null */
	HP_ATTN_SCALE,    /* f32 query_pre_attn_scalar^-1/2 when config.json has it */
};

/* rope_scaling types an entry accepts (anything else is refused). */
#define CR_LLAMA3 1u   /* Llama 3.x: rope_freqs.weight divisors */
#define CR_LINEAR 2u   /* rope.scaling.type linear + factor */
#define CR_LONGROPE 4u /* Phi-3: rope_factors_long/short + attn_factor */

struct conv_key {
	const char *suffix; /* written as "<gguf_arch>.<suffix>" */
	enum conv_hp src;
	const char *str;
};

struct conv_arch {
	const char *hf_arch;   /* config.json "architectures"[0] */
	const char *when_true; /* config.json bool that selects this entry, or NULL */
	const char *gguf_arch; /* general.architecture */
	const struct conv_key *keys;
	size_t n_keys;
	const struct conv_tensor *tensors;
	size_t n_tensors;
	const char *const *skip; /* HF tensor names (globs) not converted; NULL-ended */
	const char *bpe_pre;     /* tokenizer.ggml.pre of a plain ByteLevel tokenizer.json */
	int add_bos_false;       /* writes tokenizer.ggml.add_bos_token = false (Phi-2) */
	int no_space_prefix;     /* writes tokenizer.ggml.add_space_prefix = false (Gemma) */
	const char *eot_token;   /* text of the end-of-turn token for eot_token_id, or NULL */
	unsigned rope_ok;        /* CR_* */
	/* Gemma 2 / 3: the sliding layers Ember implements (every other from
	 * 0, or 5 of each 6), checked against config.json's layer_types and
	 * sliding_window_pattern; 0 for architectures without. */
	unsigned swa_period;
};

/* Hyper-parameters read from config.json. */
struct conv_hparams {
	uint32_t n_ctx, n_embd, n_ff, n_layer, n_head, n_kv, n_vocab, head_dim, rope_dim;
	float eps, rope_theta;
	int has_rope_theta, parallel;
	int has_head_dim;
	uint32_t orig_ctx, n_swa;
	float rope_theta_swa, attn_cap, final_cap, attn_scale; /* 0: absent / null */
};

/* The rope scaling of a checkpoint as GGUF carries it: keys, and the
 * F32 tables (rope_dim / 2 floats each, owned) written as tensors. */
struct conv_rope {
	float linear_factor; /* > 0: rope.scaling.type linear */
	float attn_factor;   /* > 0: rope.scaling.attn_factor (longrope) */
	uint32_t n;
	float *freqs;        /* rope_freqs.weight (Llama 3), or NULL */
	float *longf, *shortf; /* rope_factors_long / _short.weight (longrope), or NULL */
};

/* Reads config.json's rope_scaling (and the arch's checks of its sliding
 * layers and caps) into `r`. EMBER_EUNSUPPORTED naming what the entry
 * does not implement, EMBER_EFORMAT, EMBER_ENOMEM; free with
 * convert_arch_rope_free() in every case. */
int convert_arch_rope(json_t *config, const struct conv_arch *a, const struct conv_hparams *hp,
		      struct conv_rope *r, char *err);
void convert_arch_rope_free(struct conv_rope *r);

/* The entry for `config` (its "architectures"[0] and selecting flags).
 * NULL with the supported list in `err` when there is none. */
const struct conv_arch *convert_arch_find(json_t *config, char *err);

/* Reads and validates the hyper-parameters. 0 or EMBER_EFORMAT. */
int convert_arch_hparams(json_t *config, struct conv_hparams *hp, char *err);

/* Maps HF tensor `hf` to its entry, writing the GGUF name to `gguf`
 * (`size` bytes) and 1/0 to *is_bias. NULL when no entry matches (or the
 * layer number is not below n_layer). */
const struct conv_tensor *convert_arch_map(const struct conv_arch *a, const struct conv_hparams *hp,
					   const char *hf, char *gguf, size_t size, int *is_bias);

/* 1 if the HF tensor is one the architecture deliberately drops. */
int convert_arch_skipped(const struct conv_arch *a, const char *hf);

/* Resolves a dimension. */
uint64_t convert_arch_dim(const struct conv_hparams *hp, enum conv_dim d);

/* The row permutation of transform `xf` over `rows` rows (output row r
 * reads source row perm[r]): a malloc'd array the caller frees, NULL with
 * *rc = 0 when the transform moves no rows, or NULL with *rc < 0. */
uint64_t *convert_arch_perm(enum conv_xform xf, const struct conv_hparams *hp, uint64_t rows,
			    int *rc);

#endif
