/* recipe.c - per-tensor type choice (see recipe.h). */
#include "recipe.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"

static const struct {
	const char *name;
	enum recipe_kind kind;
	uint32_t type;      /* of 2-D+ tensors (int4-mixed: the attention/MLP type) */
	uint32_t file_type; /* llama.cpp's LLAMA_FTYPE_* */
} recipes[] = {
	{"f32", RECIPE_F32, DTYPE_F32, 0},
	{"f16", RECIPE_F16, DTYPE_F16, 1},
	{"bf16", RECIPE_BF16, DTYPE_BF16, 32},
	{"int8", RECIPE_INT8, DTYPE_Q8_0, 7},
	{"int4", RECIPE_INT4, DTYPE_Q4_0, 2},
	{"int4-mixed", RECIPE_INT4_MIXED, DTYPE_Q4_0, 2},
};

#define N_RECIPES (sizeof(recipes) / sizeof(recipes[0]))

int recipe_parse(struct recipe *r, const char *name, char *err)
{
	size_t i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < N_RECIPES; i++) {
		if (strcmp(name, recipes[i].name) == 0) {
			r->kind = recipes[i].kind;
			return 0;
		}
	}
	return ember_seterr(err, EMBER_EINVAL,
			    "unknown recipe '%s' (f32, f16, bf16, int8, int4, int4-mixed)", name);
}

/* Types a --keep may name: those kern_quantize_row() can write. */
static int keep_type(const char *name)
{
	if (strcmp(name, "int8") == 0)
		return DTYPE_Q8_0;
	if (strcmp(name, "int4") == 0)
		return DTYPE_Q4_0;
	switch (dtype_from_name(name)) {
	case DTYPE_F32:
	case DTYPE_F16:
	case DTYPE_BF16:
	case DTYPE_Q8_0:
	case DTYPE_Q4_0:
		return dtype_from_name(name);
	default:
		return -1;
	}
}

int recipe_add_keep(struct recipe *r, const char *spec, char *err)
{
	const char *eq = strrchr(spec, '=');
	size_t n = eq ? (size_t)(eq - spec) : 0;
	int type;

	if (eq == NULL || n == 0 || n >= RECIPE_MAX_PATTERN)
		return ember_seterr(err, EMBER_EINVAL, "--keep '%s': expected PATTERN=TYPE", spec);
	type = keep_type(eq + 1);
	if (type < 0)
		return ember_seterr(err, EMBER_EINVAL,
				    "--keep '%s': type '%s' (f32, f16, bf16, q8_0, q4_0)", spec,
				    eq + 1);
	if (r->n_keep == RECIPE_MAX_KEEP)
		return ember_seterr(err, EMBER_EFULL, "more than %d --keep options", RECIPE_MAX_KEEP);
	memcpy(r->keep[r->n_keep].pattern, spec, n);
	r->keep[r->n_keep].pattern[n] = '\0';
	r->keep[r->n_keep].type = (uint32_t)type;
	r->n_keep++;
	return 0;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

int recipe_pick(const struct recipe *r, const char *name, uint32_t n_dims, const uint64_t *ne,
		uint32_t *type, char *err)
{
	uint32_t t = recipes[r->kind].type;
	size_t i;

	if (n_dims <= 1 || ends_with(name, "_norm.weight"))
		t = DTYPE_F32;
	else if (r->kind == RECIPE_INT4_MIXED &&
		 (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "output.weight") == 0))
		t = DTYPE_Q8_0;
	if (ne[0] % dtype_block(t) != 0)
		t = DTYPE_F16;
	for (i = r->n_keep; i-- > 0;) {
		if (fnmatch(r->keep[i].pattern, name, 0) == 0) {
			t = r->keep[i].type;
			if (ne[0] % dtype_block(t) != 0)
				return ember_seterr(err, EMBER_EINVAL,
						    "--keep %s=%s: tensor '%s' has rows of %llu, "
						    "not a multiple of %u",
						    r->keep[i].pattern, dtype_name(t), name,
						    (unsigned long long)ne[0], dtype_block(t));
			break;
		}
	}
	*type = t;
	return 0;
}

uint32_t recipe_file_type(const struct recipe *r)
{
	return recipes[r->kind].file_type;
}

void recipe_describe(const struct recipe *r, char *buf, size_t size)
{
	size_t i, n;

	n = (size_t)snprintf(buf, size, "%s", recipes[r->kind].name);
	for (i = 0; i < r->n_keep && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, " --keep %s=%s", r->keep[i].pattern,
				      dtype_name(r->keep[i].type));
}
