/*
 * recipe.h - quantization recipes: which GGUF type each tensor is written
 * in, for `ember convert -q` and `ember quantize -q`.
 *
 *   f32         every tensor F32
 *   f16, bf16   2-D+ tensors F16 / BF16
 *   int8        2-D+ tensors Q8_0
 *   int4        2-D+ tensors Q4_0
 *   int4-mixed  Q8_0 for token_embd.weight and output.weight, Q4_0 for the
 *               other 2-D+ tensors (attention and MLP)
 *
 * As llama.cpp's converter does, 1-D tensors (norms, biases) and any tensor
 * named *_norm.weight stay F32 in every recipe, and a tensor whose rows are
 * not a multiple of the 32-element block falls back to F16 in the
 * quantized recipes. `--keep PATTERN=TYPE` overrides (fnmatch glob on the
 * GGUF tensor name; TYPE f32, f16, bf16, q8_0/int8, q4_0/int4) come last;
 * of several matching overrides the last one given wins.
 *
 * llama.cpp's presets (q4_k_m, q4_k_s, q5_k_m, q6_k, q3_k_m, q2_k, q4_1,
 * q5_0, q5_1, iq4_nl, iq4_xs) follow llama-quantize's per-tensor policy
 * (without an importance matrix), kept as a table in recipe.c: a base type,
 * output.weight (and token_embd.weight when tied) in Q6_K, and some
 * attn_v / ffn_down / attn_output / attn_qkv tensors in a higher type by
 * layer; a tensor whose rows do not fit the chosen block falls back as
 * llama.cpp's does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K ->
 * Q4_0, IQ4_XS -> IQ4_NL, then F16). The policy needs the model's shape:
 * callers pass every tensor name to recipe_count() and the head counts to
 * recipe_set_heads() before recipe_pick().
 *
 * Ownership: struct recipe is caller storage with no heap parts.
 * Thread safety: pure functions.
 */
#ifndef EMBER_RECIPE_H
#define EMBER_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#define RECIPE_MAX_KEEP 16
#define RECIPE_MAX_PATTERN 128

/* In the order of recipe.c's table (a kind indexes it). */
enum recipe_kind {
	RECIPE_F32,
	RECIPE_F16,
	RECIPE_BF16,
	RECIPE_INT8,
	RECIPE_INT4,
	RECIPE_INT4_MIXED,
	RECIPE_Q4_K_M,
	RECIPE_Q4_K_S,
	RECIPE_Q5_K_M,
	RECIPE_Q6_K,
	RECIPE_Q3_K_M,
	RECIPE_Q2_K,
	RECIPE_Q4_1,
	RECIPE_Q5_0,
	RECIPE_Q5_1,
	RECIPE_IQ4_NL,
	RECIPE_IQ4_XS,
};

struct recipe_keep {
	char pattern[RECIPE_MAX_PATTERN];
	uint32_t type;
};

struct recipe {
	enum recipe_kind kind;
	struct recipe_keep keep[RECIPE_MAX_KEEP];
	size_t n_keep;
	/* The model, for the llama.cpp presets (recipe_count, recipe_set_heads). */
	uint32_t n_attn_v, n_ffn_down; /* tensors of each */
	uint32_t n_gqa;                /* query heads per KV head (0: unknown, as 1) */
	int has_output;                /* output.weight present (else tied) */
};

/* Counts tensor `name` into the model shape the presets' policy reads. */
void recipe_count(struct recipe *r, const char *name);

/* Sets the heads (n_head_kv 0: as n_head). */
void recipe_set_heads(struct recipe *r, uint32_t n_head, uint32_t n_head_kv);

/* Sets `r` to the recipe named `name` with no overrides. 0, or EMBER_EINVAL
 * with the list of recipes in `err`. */
int recipe_parse(struct recipe *r, const char *name, char *err);

/* Adds an override "PATTERN=TYPE". 0, or EMBER_EINVAL / EMBER_EFULL. */
int recipe_add_keep(struct recipe *r, const char *spec, char *err);

/* The type for tensor `name` of shape ne[0..n_dims) (ne[0] innermost).
 * 0 and *type set, or EMBER_EINVAL when an override asks for a block type
 * that does not divide ne[0]. */
int recipe_pick(const struct recipe *r, const char *name, uint32_t n_dims, const uint64_t *ne,
		uint32_t *type, char *err);

/* llama.cpp's general.file_type value for the recipe (0 F32, 1 F16, 2 Q4_0,
 * 7 Q8_0, 32 BF16, 15 Q4_K_M, ...: its LLAMA_FTYPE_MOSTLY_* numbers). */
uint32_t recipe_file_type(const struct recipe *r);

/* Writes the recipe as given on the command line ("int4-mixed --keep
 * output.weight=q8_0") into buf; this is what `ember.recipe` records. */
void recipe_describe(const struct recipe *r, char *buf, size_t size);

#endif
