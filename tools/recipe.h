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
 * Ownership: struct recipe is caller storage with no heap parts.
 * Thread safety: pure functions.
 */
#ifndef EMBER_RECIPE_H
#define EMBER_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#define RECIPE_MAX_KEEP 16
#define RECIPE_MAX_PATTERN 128

enum recipe_kind { RECIPE_F32, RECIPE_F16, RECIPE_BF16, RECIPE_INT8, RECIPE_INT4, RECIPE_INT4_MIXED };

struct recipe_keep {
	char pattern[RECIPE_MAX_PATTERN];
	uint32_t type;
};

struct recipe {
	enum recipe_kind kind;
	struct recipe_keep keep[RECIPE_MAX_KEEP];
	size_t n_keep;
};

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
 * 7 Q8_0, 32 BF16). */
uint32_t recipe_file_type(const struct recipe *r);

/* Writes the recipe as given on the command line ("int4-mixed --keep
 * output.weight=q8_0") into buf; this is what `ember.recipe` records. */
void recipe_describe(const struct recipe *r, char *buf, size_t size);

#endif
