/*
 * compute_cpu.c - the CPU backend behind compute.h: a compute_kv is a
 * kv_cache in host memory, a compute_pass is forward.c's pass (its kernels
 * chosen per ISA level in kernels/, its threads a threadpool.h pool). A
 * step's sequences are translated once into forward_seq; nothing is
 * copied.
 *
 * Device switch (compute.h, devices): when the process runs on Vulkan,
 * objects are made by compute/vulkan/ (vk.h) and carry its handle (vk),
 * and each call below goes there first.
 */
#include "compute.h"

#include <stdlib.h>

#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "vk.h"

struct compute_kv {
	struct kv_cache c;
	struct vk_kv *vk; /* on the Vulkan device instead of c */
};

struct compute_pass {
	struct forward_pass *fp;
	struct forward_seq *fs; /* [max_batch]: a step has at most one row per token */
	uint32_t max_batch;
	struct vk_pass *vk;   /* on the Vulkan device instead of fp */
	struct vk_kv **vkv;   /* [max_batch] the step's device caches */
};

void compute_init(void)
{
	kern_init();
}

static int compute__check_weight(const struct model_weight *w, enum arch_tensor role,
				 uint32_t layer, char *err)
{
	char name[96];

	/* Vectors are f32 (the model checks); matrices need a gemm. */
	if (!w->data || w->type == DTYPE_F32 || kern_supports(w->type))
		return 0;
	return ember_seterr(err, EMBER_EUNSUPPORTED, "tensor %s: no kernels for type %s",
			    model_tensor_name(role, layer, name, sizeof(name)), dtype_name(w->type));
}

int compute_check_model(const struct model *m, char *err)
{
	int rc;

	kern_init();
	if (compute_device_vulkan() && (rc = vk_check_model(m, err)) < 0)
		return rc;
	for (int r = 0; r < ARCH_T_FIRST_LAYER; r++)
		if ((rc = compute__check_weight(&m->w[r], (enum arch_tensor)r, 0, err)) < 0)
			return rc;
	for (uint32_t l = 0; l < m->hp.n_layer; l++)
		for (int r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++)
			if ((rc = compute__check_weight(&m->layers[l].w[r], (enum arch_tensor)r, l,
							err)) < 0)
				return rc;
	return 0;
}

size_t compute_kv_bytes(const struct model *m, uint32_t n_ctx, uint32_t type)
{
	const struct model_hparams *hp = &m->hp;
	size_t elt = type == DTYPE_F16 ? 2 : 4;

	return (size_t)hp->n_layer * hp->n_head_kv * n_ctx * (hp->head_dim_k + hp->head_dim_v) *
	       elt;
}

size_t compute_kv_ring_bytes(const struct model *m, uint32_t n_ctx, uint32_t type,
			     uint32_t max_step)
{
	/* the Vulkan device keeps rings by the same rule (vk_kv.c) */
	return kv_cache_bytes_for(&m->hp, n_ctx, type, m->arch, max_step);
}

bool compute_kv_holds(const struct compute_kv *kv, uint32_t n_pos)
{
	if (kv->vk)
		return vk_kv_holds(kv->vk, n_pos) != 0;
	return kv_cache_holds(&kv->c, n_pos) != 0;
}

int compute_kv_new(struct compute_kv **out, const struct model *m, uint32_t n_ctx,
		   uint32_t type, uint32_t ring_step, char *err)
{
	struct compute_kv *kv = calloc(1, sizeof(*kv));
	int rc;

	*out = NULL;
	if (!kv)
		return ember_seterr(err, EMBER_ENOMEM, "kv cache");
	if (compute_device_vulkan()) {
		if ((rc = vk_kv_new(&kv->vk, m, n_ctx, type, ring_step, err)) < 0) {
			free(kv);
			return rc;
		}
		*out = kv;
		return 0;
	}
	if ((rc = ring_step ? kv_cache_init_ring(&kv->c, &m->hp, n_ctx, type, m->arch, ring_step, err)
			    : kv_cache_init(&kv->c, &m->hp, n_ctx, type, err)) < 0) {
		free(kv);
		return rc;
	}
	*out = kv;
	return 0;
}

void compute_kv_free(struct compute_kv *kv)
{
	if (!kv)
		return;
	vk_kv_free(kv->vk);
	kv_cache_free(&kv->c);
	free(kv);
}

uint32_t compute_kv_n_pos(const struct compute_kv *kv)
{
	return kv->vk ? vk_kv_n_pos(kv->vk) : kv->c.n_pos;
}

void compute_kv_truncate(struct compute_kv *kv, uint32_t n_pos)
{
	if (kv->vk)
		vk_kv_truncate(kv->vk, n_pos);
	else
		kv_cache_truncate(&kv->c, n_pos);
}

int compute_kv_copy_prefix(struct compute_kv *dst, const struct compute_kv *src, uint32_t n)
{
	if (dst->vk || src->vk)
		return dst->vk && src->vk ? vk_kv_copy_prefix(dst->vk, src->vk, n, NULL)
					  : EMBER_EINVAL;
	return kv_cache_copy_prefix(&dst->c, &src->c, n);
}

int compute_pass_new(struct compute_pass **out, const struct model *m,
		     const struct compute_opts *o, char *err)
{
	struct forward_opts fo = {.max_batch = o->max_batch, .n_threads = o->n_threads};
	struct compute_pass *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return ember_seterr(err, EMBER_ENOMEM, "compute pass");
	if (compute_device_vulkan()) {
		p->max_batch = o->max_batch ? o->max_batch : FORWARD_DEFAULT_BATCH;
		p->vkv = calloc(p->max_batch, sizeof(*p->vkv));
		if (!p->vkv) {
			free(p);
			return ember_seterr(err, EMBER_ENOMEM, "compute pass: batch");
		}
		if ((rc = vk_pass_new(&p->vk, m, p->max_batch, err)) < 0) {
			compute_pass_free(p);
			return rc;
		}
		*out = p;
		return 0;
	}
	if ((rc = forward_pass_new(&p->fp, m, &fo, err)) < 0) {
		free(p);
		return rc;
	}
	p->max_batch = forward_pass_max_batch(p->fp);
	p->fs = calloc(p->max_batch, sizeof(*p->fs));
	if (!p->fs) {
		compute_pass_free(p);
		return ember_seterr(err, EMBER_ENOMEM, "compute pass: batch");
	}
	*out = p;
	return 0;
}

void compute_pass_free(struct compute_pass *p)
{
	if (!p)
		return;
	forward_pass_free(p->fp);
	vk_pass_free(p->vk);
	free(p->vkv);
	free(p->fs);
	free(p);
}

uint32_t compute_pass_max_batch(const struct compute_pass *p)
{
	return p->max_batch;
}

int compute_pass_run(struct compute_pass *p, const struct compute_seq *seqs, uint32_t n_seq,
		     float *logits, char *err)
{
	static const enum forward_logits want[] = {
		[COMPUTE_LOGITS_NONE] = FORWARD_LOGITS_NONE,
		[COMPUTE_LOGITS_LAST] = FORWARD_LOGITS_LAST,
		[COMPUTE_LOGITS_ALL] = FORWARD_LOGITS_ALL,
		[COMPUTE_HIDDEN_ALL] = FORWARD_HIDDEN_ALL,
	};
	uint32_t i;

	if (n_seq > p->max_batch)
		return ember_seterr(err, EMBER_EINVAL, "compute: %u sequences in a step of %u rows",
				    n_seq, p->max_batch);
	for (i = 0; i < n_seq; i++) {
		if ((unsigned)seqs[i].logits > COMPUTE_HIDDEN_ALL || !seqs[i].kv)
			return ember_seterr(err, EMBER_EINVAL, "compute: sequence %u is malformed", i);
		if (p->vk) {
			if (!seqs[i].kv->vk)
				return ember_seterr(err, EMBER_EINVAL, "compute: sequence %u's cache "
						    "is not on the pass's device", i);
			p->vkv[i] = seqs[i].kv->vk;
			continue;
		}
		if (seqs[i].kv->vk)
			return ember_seterr(err, EMBER_EINVAL, "compute: sequence %u's cache is on "
					    "the Vulkan device, the pass on the CPU", i);
		p->fs[i] = (struct forward_seq){&seqs[i].kv->c, seqs[i].tokens, seqs[i].n_tok,
						want[seqs[i].logits], seqs[i].exact};
	}
	if (p->vk)
		return vk_pass_run(p->vk, seqs, p->vkv, n_seq, logits, err);
	return forward_pass_run(p->fp, p->fs, n_seq, logits, err);
}
