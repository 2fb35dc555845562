/* model.c - hyper-parameters and tensor binding (model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"

/* Sanity bounds: far above any real model, low enough that products of
 * them (buffer sizes in forward.c) cannot overflow size_t. */
#define MAX_DIM (1u << 20)
#define MAX_LAYERS 4096u
#define MAX_VOCAB (1u << 22)

/* Symbolic tensor dimensions, resolved against the hyper-parameters. */
enum dim {
	D_ONE,
	D_EMBD,
	D_VOCAB,
	D_FF,
	D_Q,     /* n_head * head_dim_k */
	D_KV_K,  /* n_head_kv * head_dim_k */
	D_KV_V,  /* n_head_kv * head_dim_v */
	D_ATTN,  /* n_head * head_dim_v: attention output before projection */
	D_QKV,   /* D_Q + D_KV_K + D_KV_V: fused projection */
	D_HEAD_K, /* head_dim_k: per-head q/k norms */
	D_ROT2,  /* n_rot / 2: rotary frequency tables */
};

/* GGUF name (a format with %u for the layer from ARCH_T_FIRST_LAYER on)
 * and expected shape {ne0, ne1} of each role. Vectors have ne1 = D_ONE. */
static const struct tensor_spec {
	const char *name;
	unsigned char ne0, ne1;
} tensor_specs[ARCH_T_COUNT] = {
	[ARCH_T_TOKEN_EMBD] = {"token_embd.weight", D_EMBD, D_VOCAB},
	[ARCH_T_OUTPUT_NORM] = {"output_norm.weight", D_EMBD, D_ONE},
	[ARCH_T_OUTPUT_NORM_B] = {"output_norm.bias", D_EMBD, D_ONE},
	[ARCH_T_OUTPUT] = {"output.weight", D_EMBD, D_VOCAB},
	[ARCH_T_OUTPUT_B] = {"output.bias", D_VOCAB, D_ONE},
	[ARCH_T_ROPE_FREQS] = {"rope_freqs.weight", D_ROT2, D_ONE},
	[ARCH_T_ROPE_LONG] = {"rope_factors_long.weight", D_ROT2, D_ONE},
	[ARCH_T_ROPE_SHORT] = {"rope_factors_short.weight", D_ROT2, D_ONE},
	[ARCH_T_ATTN_NORM] = {"blk.%u.attn_norm.weight", D_EMBD, D_ONE},
	[ARCH_T_ATTN_NORM_B] = {"blk.%u.attn_norm.bias", D_EMBD, D_ONE},
	[ARCH_T_ATTN_Q] = {"blk.%u.attn_q.weight", D_EMBD, D_Q},
	[ARCH_T_ATTN_Q_B] = {"blk.%u.attn_q.bias", D_Q, D_ONE},
	[ARCH_T_ATTN_K] = {"blk.%u.attn_k.weight", D_EMBD, D_KV_K},
	[ARCH_T_ATTN_K_B] = {"blk.%u.attn_k.bias", D_KV_K, D_ONE},
	[ARCH_T_ATTN_V] = {"blk.%u.attn_v.weight", D_EMBD, D_KV_V},
	[ARCH_T_ATTN_V_B] = {"blk.%u.attn_v.bias", D_KV_V, D_ONE},
	[ARCH_T_ATTN_QKV] = {"blk.%u.attn_qkv.weight", D_EMBD, D_QKV},
	[ARCH_T_ATTN_QKV_B] = {"blk.%u.attn_qkv.bias", D_QKV, D_ONE},
	[ARCH_T_ATTN_OUT] = {"blk.%u.attn_output.weight", D_ATTN, D_EMBD},
	[ARCH_T_ATTN_OUT_B] = {"blk.%u.attn_output.bias", D_EMBD, D_ONE},
	[ARCH_T_FFN_NORM] = {"blk.%u.ffn_norm.weight", D_EMBD, D_ONE},
	[ARCH_T_FFN_NORM_B] = {"blk.%u.ffn_norm.bias", D_EMBD, D_ONE},
	[ARCH_T_FFN_GATE] = {"blk.%u.ffn_gate.weight", D_EMBD, D_FF},
	[ARCH_T_FFN_GATE_B] = {"blk.%u.ffn_gate.bias", D_FF, D_ONE},
	[ARCH_T_FFN_UP] = {"blk.%u.ffn_up.weight", D_EMBD, D_FF},
	[ARCH_T_FFN_UP_B] = {"blk.%u.ffn_up.bias", D_FF, D_ONE},
	[ARCH_T_FFN_DOWN] = {"blk.%u.ffn_down.weight", D_FF, D_EMBD},
	[ARCH_T_FFN_DOWN_B] = {"blk.%u.ffn_down.bias", D_EMBD, D_ONE},
	[ARCH_T_ATTN_Q_NORM] = {"blk.%u.attn_q_norm.weight", D_HEAD_K, D_ONE},
	[ARCH_T_ATTN_K_NORM] = {"blk.%u.attn_k_norm.weight", D_HEAD_K, D_ONE},
	[ARCH_T_ATTN_POST_NORM] = {"blk.%u.post_attention_norm.weight", D_EMBD, D_ONE},
	[ARCH_T_FFN_POST_NORM] = {"blk.%u.post_ffw_norm.weight", D_EMBD, D_ONE},
};

const char *model_tensor_name(enum arch_tensor role, uint32_t layer, char *buf, size_t size)
{
	if ((unsigned)role >= ARCH_T_COUNT) {
		snprintf(buf, size, "?");
		return buf;
	}
	if (role >= ARCH_T_FIRST_LAYER) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(buf, size, tensor_specs[role].name, (unsigned)layer);
#pragma GCC diagnostic pop
	} else {
		snprintf(buf, size, "%s", tensor_specs[role].name);
	}
	return buf;
}

static uint64_t dim_value(const struct model_hparams *hp, enum dim d)
{
	uint64_t q = (uint64_t)hp->n_head * hp->head_dim_k;
	uint64_t kv_k = (uint64_t)hp->n_head_kv * hp->head_dim_k;
	uint64_t kv_v = (uint64_t)hp->n_head_kv * hp->head_dim_v;

	switch (d) {
	case D_ONE: return 1;
	case D_EMBD: return hp->n_embd;
	case D_VOCAB: return hp->n_vocab;
	case D_FF: return hp->n_ff;
	case D_Q: return q;
	case D_KV_K: return kv_k;
	case D_KV_V: return kv_v;
	case D_ATTN: return (uint64_t)hp->n_head * hp->head_dim_v;
	case D_QKV: return q + kv_k + kv_v;
	case D_HEAD_K: return hp->head_dim_k;
	case D_ROT2: return hp->n_rot / 2;
	}
	return 0;
}

void model_tensor_shape(enum arch_tensor role, const struct model_hparams *hp, uint64_t ne[2])
{
	if ((unsigned)role >= ARCH_T_COUNT) {
		ne[0] = ne[1] = 0;
		return;
	}
	ne[0] = dim_value(hp, (enum dim)tensor_specs[role].ne0);
	ne[1] = dim_value(hp, (enum dim)tensor_specs[role].ne1);
}

/* ---- hyper-parameters ------------------------------------------------- */

static int get_u32(const struct gguf *g, const char *arch, const char *suffix, uint32_t *out,
		   int required, char *err)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	rc = gguf_get_u32(g, key, out);
	if (rc == EMBER_ENOTFOUND && !required)
		return 0;
	if (rc == EMBER_ENOTFOUND)
		return ember_seterr(err, EMBER_EFORMAT, "missing key %s", key);
	if (rc < 0)
		return ember_seterr(err, EMBER_EFORMAT, "key %s: not a 32-bit count", key);
	if (*out > MAX_DIM)
		return ember_seterr(err, EMBER_EFORMAT, "key %s: %u is out of range", key, *out);
	return 0;
}

static int get_f32(const struct gguf *g, const char *arch, const char *suffix, float *out,
		   int required, char *err)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	rc = gguf_get_f32(g, key, out);
	if (rc == EMBER_ENOTFOUND && !required)
		return 0;
	if (rc == EMBER_ENOTFOUND)
		return ember_seterr(err, EMBER_EFORMAT, "missing key %s", key);
	if (rc < 0)
		return ember_seterr(err, EMBER_EFORMAT, "key %s: not a float", key);
	if (!(*out >= 0.0f && *out < 1e30f))
		return ember_seterr(err, EMBER_EFORMAT, "key %s: value out of range", key);
	return 0;
}

/* 1 if the string key "<arch>.<suffix>" exists and equals `want`; its
 * value (or "" when absent) in buf. */
static int get_str(const struct gguf *g, const char *arch, const char *suffix, char *buf,
		   size_t size)
{
	struct gguf_str s;
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", arch, suffix);
	buf[0] = '\0';
	if (gguf_get_str(g, key, &s) < 0)
		return 0;
	snprintf(buf, size, "%.*s", (int)(s.len < size ? s.len : size - 1), s.ptr);
	return 1;
}

/*
 * The attention and rope variants of today's models. Anything a file asks
 * for that the forward pass does not do (another rope scaling type,
 * experts, a non-causal model) is refused here, by name.
 */
static int read_variants(struct model *m, const char *a, char *err)
{
	const struct gguf *g = m->gguf;
	struct model_hparams *hp = &m->hp;
	char type[64];
	float factor = 0.0f;
	uint32_t experts = 0;
	int causal = 1, rc;
	char key[128];

	hp->rope_freq_scale = 1.0f;
	hp->rope_attn_factor = 1.0f;
	if (get_str(g, a, "rope.scaling.type", type, sizeof(type)) && strcmp(type, "none") != 0) {
		if (strcmp(type, "linear") != 0)
			return ember_seterr(err, EMBER_EUNSUPPORTED, "%s.rope.scaling.type '%s' is "
					    "not supported (only linear, and Llama 3's and "
					    "Phi-3's rope factor tensors)", a, type);
		if ((rc = get_f32(g, a, "rope.scaling.factor", &factor, 1, err)) < 0)
			return rc;
		if (!(factor >= 1.0f))
			return ember_seterr(err, EMBER_EFORMAT, "%s.rope.scaling.factor must be >= 1", a);
		hp->rope_freq_scale = 1.0f / factor;
	}
	/* The older key for the same linear scaling. */
	factor = 1.0f;
	if ((rc = get_f32(g, a, "rope.scale_linear", &factor, 0, err)) < 0)
		return rc;
	if (factor != 1.0f) {
		if (!(factor >= 1.0f))
			return ember_seterr(err, EMBER_EFORMAT, "%s.rope.scale_linear must be >= 1", a);
		hp->rope_freq_scale = 1.0f / factor;
	}
	if ((rc = get_f32(g, a, "rope.scaling.attn_factor", &hp->rope_attn_factor, 0, err)) < 0 ||
	    (rc = get_u32(g, a, "rope.scaling.original_context_length", &hp->rope_orig_ctx, 0,
			  err)) < 0)
		return rc;
	if (!(hp->rope_attn_factor > 0.0f))
		return ember_seterr(err, EMBER_EFORMAT, "%s.rope.scaling.attn_factor must be positive",
				    a);
	if ((rc = get_u32(g, a, "expert_count", &experts, 0, err)) < 0)
		return rc;
	if (experts > 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "%s.expert_count %u: mixture of experts "
				    "is not supported", a, experts);
	snprintf(key, sizeof(key), "%s.attention.causal", a);
	if (gguf_get_bool(g, key, &causal) == 0 && !causal)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "%s: non-causal attention is not "
				    "supported", key);
	if (m->arch->swa != ARCH_SWA_NONE) {
		if ((rc = get_u32(g, a, "attention.sliding_window", &hp->n_swa, 1, err)) < 0)
			return rc;
		if (hp->n_swa == 0)
			return ember_seterr(err, EMBER_EFORMAT, "%s.attention.sliding_window is 0", a);
		snprintf(key, sizeof(key), "%s.rope.freq_base_swa", a);
		hp->has_rope_base_swa = gguf_find_kv(g, key) != NULL;
		if ((rc = get_f32(g, a, "rope.freq_base_swa", &hp->rope_base_swa, 0, err)) < 0)
			return rc;
		if (hp->has_rope_base_swa && !(hp->rope_base_swa > 0.0f))
			return ember_seterr(err, EMBER_EFORMAT, "%s must be positive", key);
	}
	if (m->arch->softcap) {
		/* llama.cpp's defaults: Gemma 2's released values. */
		hp->attn_softcap = 50.0f;
		hp->final_softcap = 30.0f;
		if ((rc = get_f32(g, a, "attn_logit_softcapping", &hp->attn_softcap, 0, err)) < 0 ||
		    (rc = get_f32(g, a, "final_logit_softcapping", &hp->final_softcap, 0, err)) < 0)
			return rc;
	}
	hp->attn_scale = (float)(1.0 / sqrt((double)hp->head_dim_k));
	if (m->arch->scale_embd_layers && hp->n_layer == m->arch->scale_embd_layers)
		hp->attn_scale = (float)(1.0 / sqrt((double)(hp->n_embd / hp->n_head)));
	if ((rc = get_f32(g, a, "attention.scale", &hp->attn_scale, 0, err)) < 0)
		return rc;
	if (!(hp->attn_scale > 0.0f))
		return ember_seterr(err, EMBER_EFORMAT, "%s.attention.scale must be positive", a);
	return 0;
}

static int read_hparams(struct model *m, const char *a, char *err)
{
	const struct gguf *g = m->gguf;
	struct model_hparams *hp = &m->hp;
	const char *eps_key = m->arch->norm == ARCH_NORM_RMS ? "attention.layer_norm_rms_epsilon"
							     : "attention.layer_norm_epsilon";
	int rc;

	hp->rope_base = 10000.0f;
	if ((rc = get_u32(g, a, "context_length", &hp->n_ctx_train, 1, err)) < 0 ||
	    (rc = get_u32(g, a, "embedding_length", &hp->n_embd, 1, err)) < 0 ||
	    (rc = get_u32(g, a, "block_count", &hp->n_layer, 1, err)) < 0 ||
	    (rc = get_u32(g, a, "feed_forward_length", &hp->n_ff, 1, err)) < 0 ||
	    (rc = get_u32(g, a, "attention.head_count", &hp->n_head, 1, err)) < 0)
		return rc;
	hp->n_head_kv = hp->n_head;
	if (hp->n_head == 0 || hp->n_embd == 0 || hp->n_layer == 0 || hp->n_layer > MAX_LAYERS)
		return ember_seterr(err, EMBER_EFORMAT, "%s: zero or out-of-range embedding_length, "
				    "block_count or attention.head_count", a);
	hp->head_dim_k = hp->n_embd / hp->n_head;
	hp->head_dim_v = hp->head_dim_k;
	if ((rc = get_u32(g, a, "attention.head_count_kv", &hp->n_head_kv, 0, err)) < 0 ||
	    (rc = get_u32(g, a, "attention.key_length", &hp->head_dim_k, 0, err)) < 0 ||
	    (rc = get_u32(g, a, "attention.value_length", &hp->head_dim_v, 0, err)) < 0)
		return rc;
	hp->n_rot = hp->head_dim_k;
	if ((rc = get_u32(g, a, "rope.dimension_count", &hp->n_rot, 0, err)) < 0 ||
	    (rc = get_f32(g, a, "rope.freq_base", &hp->rope_base, 0, err)) < 0 ||
	    (rc = get_f32(g, a, eps_key, &hp->norm_eps, 1, err)) < 0)
		return rc;
	if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
		return ember_seterr(err, EMBER_EFORMAT, "%s: head_count %u is not a multiple of "
				    "head_count_kv %u", a, hp->n_head, hp->n_head_kv);
	if (hp->head_dim_k == 0 || hp->head_dim_v == 0)
		return ember_seterr(err, EMBER_EFORMAT, "%s: zero head dimension", a);
	if ((uint64_t)hp->n_head * hp->head_dim_k > MAX_DIM ||
	    (uint64_t)hp->n_head * hp->head_dim_v > MAX_DIM)
		return ember_seterr(err, EMBER_EFORMAT, "%s: attention width out of range", a);
	if (m->arch->rope != ARCH_ROPE_NONE &&
	    (hp->n_rot == 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim_k))
		return ember_seterr(err, EMBER_EFORMAT, "%s.rope.dimension_count %u: must be even and "
				    "at most the head dimension %u", a, hp->n_rot, hp->head_dim_k);
	if (m->arch->rope != ARCH_ROPE_NONE && !(hp->rope_base > 0.0f))
		return ember_seterr(err, EMBER_EFORMAT, "%s.rope.freq_base must be positive", a);
	hp->alibi_max_bias = 8.0f;
	if (m->arch->alibi != ARCH_ALIBI_NONE &&
	    ((rc = get_f32(g, a, "attention.max_alibi_bias", &hp->alibi_max_bias, 0, err)) < 0 ||
	     !(hp->alibi_max_bias > 0.0f)))
		return rc < 0 ? rc : ember_seterr(err, EMBER_EFORMAT, "%s.attention.max_alibi_bias "
						  "must be positive", a);
	return read_variants(m, a, err);
}

/* ---- tensors ---------------------------------------------------------- */

/* Binds one role: checks presence against `use`, shape against the
 * hyper-parameters, type against the kernels (vectors must be F32). */
static int bind_tensor(struct model *m, enum arch_tensor role, uint32_t layer, enum arch_use use,
		       struct model_weight *out, char *err)
{
	const struct tensor_spec *spec = &tensor_specs[role];
	const struct gguf_tensor *t;
	uint64_t want[2];
	char name[96];

	memset(out, 0, sizeof(*out));
	if (use == ARCH_NO)
		return 0;
	model_tensor_shape(role, &m->hp, want);
	if (role == ARCH_T_FFN_UP && m->arch->ffn_gate_up_fused)
		want[1] *= 2; /* [gate | up] */
	model_tensor_name(role, layer, name, sizeof(name));
	t = gguf_find_tensor(m->gguf, name);
	if (!t) {
		if (use == ARCH_OPT)
			return 0;
		return ember_seterr(err, EMBER_EFORMAT, "tensor %s is missing", name);
	}
	if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != 1 || t->ne[3] != 1)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor %s has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu]",
				    name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
				    (unsigned long long)t->ne[2], (unsigned long long)t->ne[3],
				    (unsigned long long)want[0], (unsigned long long)want[1]);
	if (spec->ne1 == D_ONE && t->type != DTYPE_F32)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "tensor %s: type %s, vectors must be f32",
				    name, dtype_name(t->type));
	out->data = t->data;
	out->type = t->type;
	out->n_in = (uint32_t)want[0];
	out->n_out = (uint32_t)want[1];
	return 0;
}

/* Roles that are optional one by one but not together: attention needs
 * q, k and v or the fused qkv; a sequential block needs its ffn_norm. */
static int check_layer(const struct model *m, uint32_t il, char *err)
{
	const struct model_weight *w = m->layers[il].w;
	int split = w[ARCH_T_ATTN_Q].data && w[ARCH_T_ATTN_K].data && w[ARCH_T_ATTN_V].data;

	if (!split && !w[ARCH_T_ATTN_QKV].data)
		return ember_seterr(err, EMBER_EFORMAT, "layer %u: needs blk.%u.attn_qkv.weight or "
				    "all of attn_q, attn_k, attn_v", il, il);
	if (m->arch->residual == ARCH_RESIDUAL_SEQUENTIAL && !w[ARCH_T_FFN_NORM].data)
		return ember_seterr(err, EMBER_EFORMAT, "tensor blk.%u.ffn_norm.weight is missing", il);
	if (m->arch->mlp_gated && !m->arch->ffn_gate_up_fused && !w[ARCH_T_FFN_GATE].data)
		return ember_seterr(err, EMBER_EFORMAT, "tensor blk.%u.ffn_gate.weight is missing", il);
	return 0;
}

/* The rotary tables, when present, are positive divisors, and longrope
 * needs both and its original context. */
static int check_rope_tables(const struct model *m, char *err)
{
	static const enum arch_tensor roles[] = {ARCH_T_ROPE_FREQS, ARCH_T_ROPE_LONG,
						 ARCH_T_ROPE_SHORT};
	const int has_long = m->w[ARCH_T_ROPE_LONG].data != NULL;
	char name[96];
	size_t r;
	uint32_t i;

	for (r = 0; r < sizeof(roles) / sizeof(roles[0]); r++) {
		const struct model_weight *w = &m->w[roles[r]];

		for (i = 0; w->data && i < w->n_in; i++)
			if (!(((const float *)w->data)[i] > 0.0f && ((const float *)w->data)[i] < 1e30f))
				return ember_seterr(err, EMBER_EFORMAT, "tensor %s: value %u is not a "
						    "positive number",
						    model_tensor_name(roles[r], 0, name, sizeof(name)), i);
	}
	if (has_long != (m->w[ARCH_T_ROPE_SHORT].data != NULL))
		return ember_seterr(err, EMBER_EFORMAT, "longrope needs both rope_factors_long.weight "
				    "and rope_factors_short.weight");
	if (has_long && m->hp.rope_orig_ctx == 0)
		return ember_seterr(err, EMBER_EFORMAT, "longrope needs %s.rope.scaling."
				    "original_context_length", m->arch->gguf_arch);
	if (has_long && m->w[ARCH_T_ROPE_FREQS].data)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "rope_freqs.weight together with "
				    "longrope factors is not supported");
	return 0;
}

/* Every tensor of the file is one the architecture uses: a tensor Ember
 * would not read (rope_freqs in an architecture without it, a second norm,
 * an expert) means a feature it does not implement, so the model is
 * refused rather than run without it. */
static int check_all_bound(const struct model *m, char *err)
{
	const struct gguf *g = m->gguf;
	uint64_t i;
	int r;

	for (i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		const struct model_weight *w = m->w;
		int n = ARCH_T_FIRST_LAYER, found = 0;
		unsigned long il;
		char *end;

		if (t->name.len > 4 && memcmp(t->name.ptr, "blk.", 4) == 0) {
			il = strtoul(t->name.ptr + 4, &end, 10);
			if (end > t->name.ptr + 4 && il < m->hp.n_layer) {
				w = m->layers[il].w;
				n = ARCH_T_COUNT;
			}
		}
		for (r = 0; r < n && !found; r++)
			found = w[r].data == t->data && w[r].data != NULL;
		if (!found)
			return ember_seterr(err, EMBER_EUNSUPPORTED, "tensor %.*s is not supported for "
					    "architecture %s (a feature Ember does not implement)",
					    (int)(t->name.len < 96 ? t->name.len : 96), t->name.ptr,
					    m->arch->name);
	}
	return 0;
}

static int bind_tensors(struct model *m, char *err)
{
	const unsigned char *use = m->arch->tensors;
	const struct gguf_tensor *embd;
	uint32_t il;
	int r, rc;

	/* The vocabulary size is the embedding's row count; everything else
	 * is checked against the keys. */
	embd = gguf_find_tensor(m->gguf, tensor_specs[ARCH_T_TOKEN_EMBD].name);
	if (!embd)
		return ember_seterr(err, EMBER_EFORMAT, "tensor token_embd.weight is missing");
	if (embd->ne[1] == 0 || embd->ne[1] > MAX_VOCAB)
		return ember_seterr(err, EMBER_EFORMAT, "tensor token_embd.weight: vocabulary size "
				    "%llu out of range", (unsigned long long)embd->ne[1]);
	m->hp.n_vocab = (uint32_t)embd->ne[1];

	for (r = 0; r < ARCH_T_FIRST_LAYER; r++)
		if ((rc = bind_tensor(m, (enum arch_tensor)r, 0, (enum arch_use)use[r], &m->w[r], err)) < 0)
			return rc;
	if (!m->w[ARCH_T_OUTPUT].data) {
		if (!m->arch->tied_output)
			return ember_seterr(err, EMBER_EFORMAT, "tensor output.weight is missing");
		m->w[ARCH_T_OUTPUT] = m->w[ARCH_T_TOKEN_EMBD];
		m->output_tied = 1;
	}
	for (il = 0; il < m->hp.n_layer; il++) {
		for (r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++)
			if ((rc = bind_tensor(m, (enum arch_tensor)r, il, (enum arch_use)use[r],
					      &m->layers[il].w[r], err)) < 0)
				return rc;
		if ((rc = check_layer(m, il, err)) < 0)
			return rc;
	}
	if ((rc = check_rope_tables(m, err)) < 0)
		return rc;
	return check_all_bound(m, err);
}

struct flag_query {
	const struct gguf *g;
	const char *arch;
};

/* arch_flag_cb: whether "<arch>.<suffix>" is a bool key set to true. */
static int flag_is_true_cb(const char *suffix, void *data)
{
	const struct flag_query *q = data;
	char key[128];
	int b = 0;

	snprintf(key, sizeof(key), "%s.%s", q->arch, suffix);
	return gguf_get_bool(q->g, key, &b) == 0 && b;
}

int model_load(struct model *m, const struct gguf *g, char *err)
{
	struct gguf_str arch_name;
	char arch[64];
	int rc;

	memset(m, 0, sizeof(*m));
	m->gguf = g;
	if (gguf_get_str(g, "general.architecture", &arch_name) < 0)
		return ember_seterr(err, EMBER_EFORMAT, "missing key general.architecture");
	if (arch_name.len == 0 || arch_name.len >= sizeof(arch))
		return ember_seterr(err, EMBER_EFORMAT, "general.architecture: bad length");
	memcpy(arch, arch_name.ptr, arch_name.len);
	arch[arch_name.len] = '\0';
	m->arch = arch_select(arch, arch_name.len, flag_is_true_cb,
			      &(struct flag_query){g, arch});
	if (!m->arch)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "architecture '%s' is not supported", arch);
	if ((rc = read_hparams(m, arch, err)) < 0)
		goto fail;
	m->layers = calloc(m->hp.n_layer, sizeof(*m->layers));
	if (!m->layers) {
		rc = ember_seterr(err, EMBER_ENOMEM, "model: %u layers", m->hp.n_layer);
		goto fail;
	}
	if ((rc = bind_tensors(m, err)) < 0)
		goto fail;
	return 0;
fail:
	free(m->layers);
	memset(m, 0, sizeof(*m));
	return rc;
}

static int model__open(struct model *m, const char *path, int huge, char *err)
{
	struct gguf g;
	int rc;

	memset(m, 0, sizeof(*m));
	/* weights in 2 MiB pages: decode streams them faster (gguf_map.h) */
	if ((rc = huge ? gguf_open_weights(&g, path, err) : gguf_open(&g, path, err)) < 0)
		return rc;
	/* model_load() zeroes m, so load against a copy held in `g`, then
	 * move it into the model and repoint. */
	if ((rc = model_load(m, &g, err)) < 0) {
		gguf_close(&g);
		return rc;
	}
	m->own_gguf = g;
	m->gguf = &m->own_gguf;
	m->owns_gguf = 1;
	return 0;
}

int model_open(struct model *m, const char *path, char *err)
{
	return model__open(m, path, 1, err);
}

int model_open_mapped(struct model *m, const char *path, char *err)
{
	return model__open(m, path, 0, err);
}

void model_free(struct model *m)
{
	if (!m)
		return;
	free(m->layers);
	if (m->owns_gguf)
		gguf_close(&m->own_gguf);
	memset(m, 0, sizeof(*m));
}
