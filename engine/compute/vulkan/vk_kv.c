/*
 * vk_kv.c - one sequence's K/V cache in device memory (vk.h).
 *
 * One buffer; per layer the keys [n_head_kv][rows][head_dim_k] then the
 * values [n_head_kv][rows][head_dim_v], F32 or F16 (kv_store.comp packs
 * F16 two to a word). rows is n_ctx, or for sliding-window layers of a
 * cache made with a ring step, a ring of n_swa - 1 + step rows (the CPU's
 * kv_cache.h rule and bookkeeping: rewinding past the ring's slack marks it
 * lost). Only positions < n_pos are meaningful. Copies run on the device.
 */
#include "vk_kv.h"

#include <stdlib.h>

#include "arch.h"
#include "dtype.h"
#include "ember.h"

static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;

int vk_kv_new(struct vk_kv **out, const struct model *m, uint32_t n_ctx, uint32_t type,
	      uint32_t ring_step, char *err)
{
	const struct model_hparams *hp = &m->hp;
	const struct arch_desc *a = m->arch;
	struct vk_kv *kv;
	uint64_t bytes = 0;
	uint32_t il;
	int rc;

	*out = NULL;
	if (n_ctx == 0 || (type != DTYPE_F32 && type != DTYPE_F16))
		return ember_seterr(err, EMBER_EINVAL, "vulkan: kv cache of %u positions of type %u",
				    n_ctx, type);
	if (!(kv = calloc(1, sizeof(*kv))) || !(kv->rows = calloc(hp->n_layer + 1, 4)) ||
	    !(kv->base = calloc(hp->n_layer + 1, 8))) {
		vk_kv_free(kv);
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: kv cache");
	}
	kv->n_ctx = n_ctx;
	kv->f16 = type == DTYPE_F16;
	kv->n_layer = hp->n_layer;
	kv->row_k = (uint64_t)hp->head_dim_k * (kv->f16 ? 2 : 4);
	kv->row_v = (uint64_t)hp->head_dim_v * (kv->f16 ? 2 : 4);
	kv->heads = hp->n_head_kv;
	/* kv_cache_init_ring()'s rule, so budgets (compute_kv_ring_bytes) hold. */
	if (a->swa != ARCH_SWA_NONE && hp->n_swa > 0 && ring_step > 0 &&
	    (uint64_t)hp->n_swa - 1 + ring_step < n_ctx) {
		kv->ring_rows = hp->n_swa - 1 + ring_step;
		kv->max_step = ring_step;
	}
	for (il = 0; il < hp->n_layer; il++) {
		kv->rows[il] = kv->ring_rows && arch_layer_is_swa(a, il) ? kv->ring_rows : n_ctx;
		kv->base[il] = bytes;
		bytes += (uint64_t)kv->heads * kv->rows[il] * (kv->row_k + kv->row_v);
	}
	if ((rc = vk_buf_new(&kv->buf, bytes, VK_MEM_DEVICE, err)) < 0) {
		vk_kv_free(kv);
		return rc;
	}
	*out = kv;
	return 0;
}

void vk_kv_free(struct vk_kv *kv)
{
	if (!kv)
		return;
	vk_buf_free(&kv->buf);
	free(kv->rows);
	free(kv->base);
	free(kv);
}

uint32_t vk_kv_n_pos(const struct vk_kv *kv)
{
	return kv->n_pos;
}

/* kv_cache.c's ring_holds: every ring layer still holds the keys a query
 * at position n_pos - 1 sees. */
static int ring_holds(const struct vk_kv *kv, uint32_t n_pos)
{
	uint32_t window = kv->ring_rows - kv->max_step + 1; /* n_swa */
	uint32_t need = n_pos > window ? n_pos - window : 0;

	return kv->n_hi <= kv->ring_rows || need >= kv->n_hi - kv->ring_rows;
}

int vk_kv_holds(const struct vk_kv *kv, uint32_t n_pos)
{
	return !kv->ring_rows || n_pos == 0 || (!kv->lost && ring_holds(kv, n_pos));
}

void vk_kv_truncate(struct vk_kv *kv, uint32_t n_pos)
{
	if (n_pos == 0) { /* nothing to keep: a ring starts over */
		kv->n_pos = kv->n_hi = 0;
		kv->lost = 0;
		return;
	}
	if (n_pos >= kv->n_pos)
		return;
	kv->n_pos = n_pos;
	if (kv->ring_rows && !ring_holds(kv, n_pos))
		kv->lost = 1;
}

void vk_kv_advance(struct vk_kv *kv, uint32_t n)
{
	kv->n_pos += n;
	if (kv->n_pos > kv->n_hi)
		kv->n_hi = kv->n_pos;
}

VkDeviceAddress vk_kv_k(const struct vk_kv *kv, uint32_t il)
{
	return kv->buf.addr + kv->base[il];
}

VkDeviceAddress vk_kv_v(const struct vk_kv *kv, uint32_t il)
{
	return vk_kv_k(kv, il) + (uint64_t)kv->heads * kv->rows[il] * kv->row_k;
}

/* Regions copying positions p0 .. n-1 of one head's rows (R of them; a
 * ring wraps once at most) at src/dst offset `at`, rows of `row` bytes. */
static uint32_t span(VkBufferCopy *r, uint64_t at, uint64_t row, uint32_t R, uint32_t p0,
		     uint32_t n, int ring)
{
	uint32_t a = ring ? p0 % R : p0, len = n - p0, first = len < R - a ? len : R - a;

	r[0] = (VkBufferCopy){at + a * row, at + a * row, (uint64_t)first * row};
	if (first == len)
		return 1;
	r[1] = (VkBufferCopy){at, at, (uint64_t)(len - first) * row};
	return 2;
}

int vk_kv_copy_prefix(struct vk_kv *dst, const struct vk_kv *src, uint32_t n, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	VkBufferCopy *r;
	uint32_t l, h, i = 0;
	int rc;

	/* Same layouts only (same n_ctx and ring): row p is the same row in
	 * both; a ring that lost the window is refused as on the CPU. */
	if (dst->n_ctx != src->n_ctx || dst->f16 != src->f16 || dst->n_layer != src->n_layer ||
	    dst->ring_rows != src->ring_rows || n > src->n_pos || src->lost ||
	    (src->ring_rows && !ring_holds(src, n)))
		return ember_seterr(err, EMBER_EINVAL, "vulkan: kv copy between unlike caches");
	dst->n_pos = dst->n_hi = n;
	dst->lost = 0;
	if (n == 0 || dst == src)
		return 0;
	if (!(r = calloc((size_t)src->n_layer * src->heads * 4, sizeof(*r))))
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: kv copy");
	for (l = 0; l < src->n_layer; l++) {
		const uint32_t R = src->rows[l], ring = vk_kv_is_ring(src, l);
		const uint32_t p0 = ring && n > R ? n - R : 0;
		const uint64_t v0 = src->base[l] + (uint64_t)src->heads * R * src->row_k;

		for (h = 0; h < src->heads; h++) {
			i += span(r + i, src->base[l] + h * src->row_k * R, src->row_k, R, p0, n,
				  ring);
			i += span(r + i, v0 + h * src->row_v * R, src->row_v, R, p0, n, ring);
		}
	}
	/* The context's command buffer serves every copy, one at a time. */
	pthread_mutex_lock(&copy_lock);
	c->f.ResetCommandBuffer(c->cb, 0);
	c->f.BeginCommandBuffer(c->cb, &bi);
	c->f.CmdCopyBuffer(c->cb, src->buf.b, dst->buf.b, i, r);
	c->f.EndCommandBuffer(c->cb);
	rc = vk_submit_wait(c->cb, c->fence, err);
	pthread_mutex_unlock(&copy_lock);
	free(r);
	return rc;
}
