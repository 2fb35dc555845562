/*
 * forward_alloc.c - a forward pass's and a session's lifetime (forward.h):
 * the scratch arena sized for max_batch tokens and the largest matrix
 * product's scratch, the pool (borrowed or owned), and a session's KV
 * cache. forward.c runs the steps on what is made here.
 */
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "ember.h"
#include "forward_impl.h"
#include "kernels.h"

/* ---- session lifetime ---------------------------------------------------- */

static size_t round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* Largest kern_matmul scratch of any weight the model multiplies. */
static size_t matmul_scratch_size(const struct model *m, uint32_t B)
{
	size_t best = kern_matmul_scratch(m->w[ARCH_T_OUTPUT].type, m->hp.n_embd, B);
	uint32_t il;
	int r;

	for (il = 0; il < m->hp.n_layer; il++)
		for (r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++) {
			const struct model_weight *w = &m->layers[il].w[r];
			size_t s;

			if (!w->data || w->n_out == 1)
				continue;
			s = kern_matmul_scratch(w->type, w->n_in, B);
			if (s > best)
				best = s;
		}
	return best;
}

/* Carves every scratch buffer out of one 64-byte aligned arena. */
static int alloc_scratch(struct forward_pass *f)
{
	const struct model_hparams *hp = &f->m->hp;
	const size_t B = f->max_batch;
	const size_t dq = (size_t)hp->n_head * hp->head_dim_k;
	const size_t dk = (size_t)hp->n_head_kv * hp->head_dim_k;
	const size_t dv = (size_t)hp->n_head_kv * hp->head_dim_v;
	int fused = 0;
	const size_t gate_mul = f->m->arch->ffn_gate_up_fused ? 2 : 1; /* [gate | up] rows */
	void **bufs[] = {(void **)&f->x, (void **)&f->xn, (void **)&f->y_attn,
			 (void **)&f->y_mlp, (void **)&f->q, (void **)&f->k, (void **)&f->v,
			 (void **)&f->qkv, (void **)&f->attn_out, (void **)&f->gate,
			 (void **)&f->up, (void **)&f->rope, (void **)&f->pos, (void **)&f->row0,
			 (void **)&f->tiles, (void **)&f->rope_swa, (void **)&f->seq,
			 (void **)&f->lrow, (void **)&f->glu_xb};
	size_t lens[] = {B * hp->n_embd, B * hp->n_embd, B * hp->n_embd, B * hp->n_embd,
			       B * dq, B * dk, B * dv, 0,
			       B * hp->n_head * hp->head_dim_v, B * hp->n_ff * gate_mul, B * hp->n_ff,
			       B * (hp->n_rot / 2) * 2, B, B,
			       (B * sizeof(struct attention_tile) + sizeof(float) - 1) / sizeof(float),
			       hp->has_rope_base_swa ? B * (hp->n_rot / 2) * 2 : 0, B, B,
			       /* glu_xb: bf16 pairs, tokens padded to 32 */
			       f->m->arch->mlp_gated && f->m->arch->act == ARCH_ACT_SILU &&
					       !f->m->arch->ffn_gate_up_fused
				       ? (B + 32) * hp->n_ff / 2 + 16
				       : 0};
	size_t mm = round64(matmul_scratch_size(f->m, f->max_batch));
	size_t total = mm, off = mm, i;
	uint8_t *base;

	for (i = 0; i < hp->n_layer; i++)
		fused |= f->m->layers[i].w[ARCH_T_ATTN_QKV].data != NULL;
	lens[7] = fused ? B * (dq + dk + dv) : 0; /* qkv */
	/* Lengths count 4-byte words (floats, uint32_t; the tiles rounded up). */
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		total += round64(lens[i] * sizeof(float));
	base = aligned_alloc(64, total > 0 ? total : 64);
	if (!base)
		return EMBER_ENOMEM;
	f->arena = base;
	f->mm_scratch = base;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		*bufs[i] = lens[i] ? (void *)(base + off) : NULL;
		off += round64(lens[i] * sizeof(float));
	}
	return 0;
}

int forward_pass_new(struct forward_pass **out, const struct model *m,
		     const struct forward_opts *o, char *err)
{
	struct forward_opts def = {0};
	struct forward_pass *f;
	int rc;

	*out = NULL;
	if (!o)
		o = &def;
	if ((rc = compute_check_model(m, err)) < 0)
		return rc;
	f = calloc(1, sizeof(*f));
	if (!f)
		return ember_seterr(err, EMBER_ENOMEM, "forward: pass");
	f->m = m;
	if ((rc = attention_init(&f->attn, &m->hp, m->arch->alibi, err)) < 0)
		goto fail;
	attention_set_window(&f->attn, m->arch, m->hp.n_swa);
	f->max_batch = o->max_batch ? o->max_batch : FORWARD_DEFAULT_BATCH;
	f->pool = o->pool;
	if (!f->pool && o->n_threads > 1) {
		f->pool = tpool_create(o->n_threads);
		if (!f->pool) {
			rc = ember_seterr(err, EMBER_ENOMEM, "forward: thread pool of %u", o->n_threads);
			goto fail;
		}
		f->owns_pool = 1;
	}
	if ((rc = alloc_scratch(f)) < 0) {
		ember_seterr(err, rc, "forward: scratch for %u tokens", f->max_batch);
		goto fail;
	}
	*out = f;
	return 0;
fail:
	forward_pass_free(f);
	return rc;
}

void forward_pass_free(struct forward_pass *f)
{
	if (!f)
		return;
	free(f->arena);
	attention_free(&f->attn);
	if (f->owns_pool)
		tpool_destroy(f->pool);
	free(f);
}

uint32_t forward_pass_max_batch(const struct forward_pass *f)
{
	return f->max_batch;
}

int forward_new(struct forward_ctx **out, const struct model *m, const struct forward_opts *o,
		char *err)
{
	struct forward_opts def = {0}, po;
	struct forward_ctx *c;
	uint32_t n_ctx;
	int rc;

	*out = NULL;
	if (!o)
		o = &def;
	n_ctx = o->n_ctx ? o->n_ctx : m->hp.n_ctx_train;
	if (n_ctx == 0)
		return ember_seterr(err, EMBER_EINVAL, "forward: context size is zero");
	c = calloc(1, sizeof(*c));
	if (!c)
		return ember_seterr(err, EMBER_ENOMEM, "forward: session");
	po = *o;
	po.max_batch = o->max_batch ? o->max_batch : FORWARD_DEFAULT_BATCH;
	if (po.max_batch > n_ctx)
		po.max_batch = n_ctx;
	if ((rc = forward_pass_new(&c->p, m, &po, err)) < 0)
		goto fail;
	/* Sliding-window layers keep a ring of their window plus one step. */
	if ((rc = kv_cache_init_ring(&c->kv, &m->hp, n_ctx, o->kv_type, m->arch, po.max_batch,
				     err)) < 0)
		goto fail;
	*out = c;
	return 0;
fail:
	forward_free(c);
	return rc;
}

void forward_free(struct forward_ctx *c)
{
	if (!c)
		return;
	kv_cache_free(&c->kv);
	forward_pass_free(c->p);
	free(c);
}

uint32_t forward_n_pos(const struct forward_ctx *c)
{
	return c->kv.n_pos;
}

uint32_t forward_n_ctx(const struct forward_ctx *c)
{
	return c->kv.n_ctx;
}

void forward_rewind(struct forward_ctx *c, uint32_t n_pos)
{
	kv_cache_truncate(&c->kv, n_pos);
}

struct kv_cache *forward_kv(struct forward_ctx *c)
{
	return &c->kv;
}

const struct model *forward_model(const struct forward_ctx *c)
{
	return c->p->m;
}
