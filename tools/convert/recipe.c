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
	/* llama.cpp's presets: base type and LLAMA_FTYPE_MOSTLY_* */
	{"q4_k_m", RECIPE_Q4_K_M, DTYPE_Q4_K, 15},
	{"q4_k_s", RECIPE_Q4_K_S, DTYPE_Q4_K, 14},
	{"q5_k_m", RECIPE_Q5_K_M, DTYPE_Q5_K, 17},
	{"q6_k", RECIPE_Q6_K, DTYPE_Q6_K, 18},
	{"q3_k_m", RECIPE_Q3_K_M, DTYPE_Q3_K, 12},
	{"q2_k", RECIPE_Q2_K, DTYPE_Q2_K, 10},
	{"q4_1", RECIPE_Q4_1, DTYPE_Q4_1, 3},
	{"q5_0", RECIPE_Q5_0, DTYPE_Q5_0, 8},
	{"q5_1", RECIPE_Q5_1, DTYPE_Q5_1, 9},
	{"iq4_nl", RECIPE_IQ4_NL, DTYPE_IQ4_NL, 25},
	{"iq4_xs", RECIPE_IQ4_XS, DTYPE_IQ4_XS, 30},
};

/*
 * llama-quantize's per-tensor policy for its presets (llama models, no
 * importance matrix, no experts): for a tensor of `role` in layer i of n
 * (n counts that role's tensors), the first row of the preset whose
 * condition holds gives the type; no row: the preset's base type.
 */
enum policy_role { ROLE_ATTN_V, ROLE_FFN_DOWN, ROLE_ATTN_OUT, ROLE_ATTN_QKV, ROLE_OTHER };
enum policy_cond {
	IF_ALWAYS,
	IF_MORE_BITS, /* i < n/8, i >= 7n/8, or every third layer between */
	IF_FIRST_8TH, /* i < n/8 */
	IF_FIRST_16TH, /* i < n/16 */
	IF_LAYER_LT,  /* i < arg */
	IF_GQA_GE,    /* query heads per KV head >= arg */
};

static const struct policy_row {
	enum recipe_kind kind;
	enum policy_role role;
	enum policy_cond cond;
	int arg;
	uint32_t type;
} policy[] = {
	{RECIPE_Q4_K_M, ROLE_ATTN_V, IF_MORE_BITS, 0, DTYPE_Q6_K},
	{RECIPE_Q4_K_M, ROLE_FFN_DOWN, IF_MORE_BITS, 0, DTYPE_Q6_K},
	{RECIPE_Q4_K_M, ROLE_ATTN_QKV, IF_ALWAYS, 0, DTYPE_Q5_K},
	{RECIPE_Q4_K_S, ROLE_ATTN_V, IF_LAYER_LT, 4, DTYPE_Q5_K},
	{RECIPE_Q4_K_S, ROLE_FFN_DOWN, IF_FIRST_8TH, 0, DTYPE_Q5_K},
	{RECIPE_Q5_K_M, ROLE_ATTN_V, IF_MORE_BITS, 0, DTYPE_Q6_K},
	{RECIPE_Q5_K_M, ROLE_FFN_DOWN, IF_MORE_BITS, 0, DTYPE_Q6_K},
	{RECIPE_Q5_K_M, ROLE_ATTN_QKV, IF_ALWAYS, 0, DTYPE_Q6_K},
	{RECIPE_Q3_K_M, ROLE_ATTN_V, IF_LAYER_LT, 2, DTYPE_Q5_K},
	{RECIPE_Q3_K_M, ROLE_ATTN_V, IF_ALWAYS, 0, DTYPE_Q4_K},
	{RECIPE_Q3_K_M, ROLE_FFN_DOWN, IF_FIRST_16TH, 0, DTYPE_Q5_K},
	{RECIPE_Q3_K_M, ROLE_FFN_DOWN, IF_ALWAYS, 0, DTYPE_Q4_K},
	{RECIPE_Q3_K_M, ROLE_ATTN_OUT, IF_ALWAYS, 0, DTYPE_Q4_K},
	{RECIPE_Q3_K_M, ROLE_ATTN_QKV, IF_ALWAYS, 0, DTYPE_Q4_K},
	{RECIPE_Q2_K, ROLE_ATTN_V, IF_GQA_GE, 4, DTYPE_Q4_K},
	{RECIPE_Q2_K, ROLE_ATTN_V, IF_ALWAYS, 0, DTYPE_Q3_K},
	{RECIPE_Q2_K, ROLE_FFN_DOWN, IF_ALWAYS, 0, DTYPE_Q3_K},
	{RECIPE_Q2_K, ROLE_ATTN_OUT, IF_ALWAYS, 0, DTYPE_Q3_K},
	{RECIPE_IQ4_NL, ROLE_ATTN_V, IF_GQA_GE, 4, DTYPE_Q5_K},
	{RECIPE_IQ4_NL, ROLE_FFN_DOWN, IF_FIRST_8TH, 0, DTYPE_Q5_K},
	{RECIPE_IQ4_XS, ROLE_ATTN_V, IF_GQA_GE, 4, DTYPE_Q5_K},
	{RECIPE_IQ4_XS, ROLE_FFN_DOWN, IF_FIRST_8TH, 0, DTYPE_Q5_K},
};

/* llama.cpp's replacement when rows do not fit a 256-element type. */
static const struct {
	uint32_t from, to;
} fallback[] = {
	{DTYPE_Q2_K, DTYPE_Q4_0}, {DTYPE_Q3_K, DTYPE_Q4_0}, {DTYPE_Q4_K, DTYPE_Q5_0},
	{DTYPE_Q5_K, DTYPE_Q5_1}, {DTYPE_Q6_K, DTYPE_Q8_0}, {DTYPE_IQ4_XS, DTYPE_IQ4_NL},
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
			    "unknown recipe '%s' (f32, f16, bf16, int8, int4, int4-mixed, q4_k_m, "
			    "q4_k_s, q5_k_m, q6_k, q3_k_m, q2_k, q4_1, q5_0, q5_1, iq4_nl, iq4_xs)",
			    name);
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
	case DTYPE_Q4_1:
	case DTYPE_Q5_0:
	case DTYPE_Q5_1:
	case DTYPE_Q2_K:
	case DTYPE_Q3_K:
	case DTYPE_Q4_K:
	case DTYPE_Q5_K:
	case DTYPE_Q6_K:
	case DTYPE_IQ4_NL:
	case DTYPE_IQ4_XS:
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
				    "--keep '%s': type '%s' (f32, f16, bf16, q8_0, q4_0, a preset's "
				    "block type)", spec,
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

static int is_preset(const struct recipe *r)
{
	return r->kind >= RECIPE_Q4_K_M;
}

void recipe_count(struct recipe *r, const char *name)
{
	if (ends_with(name, ".attn_v.weight"))
		r->n_attn_v++;
	else if (ends_with(name, ".ffn_down.weight"))
		r->n_ffn_down++;
	else if (strcmp(name, "output.weight") == 0)
		r->has_output = 1;
}

void recipe_set_heads(struct recipe *r, uint32_t n_head, uint32_t n_head_kv)
{
	r->n_gqa = n_head_kv ? n_head / n_head_kv : 1;
}

static int policy_holds(const struct recipe *r, const struct policy_row *p, int i, int n)
{
	switch (p->cond) {
	case IF_ALWAYS:
		return 1;
	case IF_MORE_BITS:
		return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
	case IF_FIRST_8TH:
		return i < n / 8;
	case IF_FIRST_16TH:
		return i < n / 16;
	case IF_LAYER_LT:
		return i < p->arg;
	case IF_GQA_GE:
		return (int)(r->n_gqa ? r->n_gqa : 1) >= p->arg;
	}
	return 0;
}

/* A preset's type for a 2-D+ tensor, before the fallback. */
static uint32_t preset_type(const struct recipe *r, const char *name, uint64_t ne0)
{
	uint32_t base = recipes[r->kind].type;
	enum policy_role role = ROLE_OTHER;
	int i = 0, n = 1;
	unsigned layer;

	if (strcmp(name, "output.weight") == 0 ||
	    (!r->has_output && strcmp(name, "token_embd.weight") == 0))
		return ne0 % dtype_block(base) != 0 ? DTYPE_Q8_0 : DTYPE_Q6_K;
	if (sscanf(name, "blk.%u.", &layer) == 1)
		i = (int)layer;
	if (ends_with(name, ".attn_v.weight")) {
		role = ROLE_ATTN_V;
		n = (int)r->n_attn_v;
	} else if (ends_with(name, ".ffn_down.weight")) {
		role = ROLE_FFN_DOWN;
		n = (int)r->n_ffn_down;
	} else if (ends_with(name, ".attn_output.weight")) {
		role = ROLE_ATTN_OUT;
	} else if (ends_with(name, ".attn_qkv.weight")) {
		role = ROLE_ATTN_QKV;
	}
	for (size_t k = 0; k < sizeof(policy) / sizeof(policy[0]); k++)
		if (policy[k].kind == r->kind && policy[k].role == role &&
		    policy_holds(r, &policy[k], i, n))
			return policy[k].type;
	return base;
}

static uint32_t fallback_type(uint32_t t, uint64_t ne0)
{
	for (size_t k = 0; ne0 % dtype_block(t) != 0 && k < sizeof(fallback) / sizeof(fallback[0]);
	     k++)
		if (fallback[k].from == t)
			t = fallback[k].to;
	return ne0 % dtype_block(t) != 0 ? DTYPE_F16 : t;
}

int recipe_pick(const struct recipe *r, const char *name, uint32_t n_dims, const uint64_t *ne,
		uint32_t *type, char *err)
{
	uint32_t t = recipes[r->kind].type;
	size_t i;

	if (n_dims <= 1 || ends_with(name, "_norm.weight"))
		t = DTYPE_F32;
	else if (is_preset(r))
		t = fallback_type(preset_type(r, name, ne[0]), ne[0]);
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
