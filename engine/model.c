/* model.c - hyper-parameters and tensor binding (model.h). */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "kernels.h"

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
	return 0;
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
	if (spec->ne1 != D_ONE && !kern_supports(t->type))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "tensor %s: no kernels for type %s", name,
				    dtype_name(t->type));
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
	if (m->arch->mlp_gated && !w[ARCH_T_FFN_GATE].data)
		return ember_seterr(err, EMBER_EFORMAT, "tensor blk.%u.ffn_gate.weight is missing", il);
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
	return 0;
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
	kern_init();
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

int model_open(struct model *m, const char *path, char *err)
{
	struct gguf g;
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = gguf_open(&g, path, err)) < 0)
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

void model_free(struct model *m)
{
	if (!m)
		return;
	free(m->layers);
	if (m->owns_gguf)
		gguf_close(&m->own_gguf);
	memset(m, 0, sizeof(*m));
}
