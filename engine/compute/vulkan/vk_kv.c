/*
 * vk_kv.c - one sequence's K/V cache in device memory (vk.h).
 *
 * One buffer; per layer the keys [n_head_kv][n_ctx][head_dim_k] then the
 * values [n_head_kv][n_ctx][head_dim_v], F32 or F16 (kv_store.comp packs
 * F16 two to a word). Sliding-window layers keep every position (no ring:
 * the budget counts them as full caches). Only positions < n_pos are
 * meaningful; truncation just lowers n_pos. Copies run on the device.
 */
#include "vk_kv.h"

#include <stdlib.h>

#include "dtype.h"
#include "ember.h"

static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;

int vk_kv_new(struct vk_kv **out, const struct model *m, uint32_t n_ctx, uint32_t type,
	      char *err)
{
	const struct model_hparams *hp = &m->hp;
	struct vk_kv *kv;
	int rc;

	*out = NULL;
	if (n_ctx == 0 || (type != DTYPE_F32 && type != DTYPE_F16))
		return ember_seterr(err, EMBER_EINVAL, "vulkan: kv cache of %u positions of type %u",
				    n_ctx, type);
	if (!(kv = calloc(1, sizeof(*kv))))
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: kv cache");
	kv->n_ctx = n_ctx;
	kv->f16 = type == DTYPE_F16;
	kv->n_layer = hp->n_layer;
	kv->k_bytes = (uint64_t)hp->n_head_kv * n_ctx * hp->head_dim_k * (kv->f16 ? 2 : 4);
	kv->v_bytes = (uint64_t)hp->n_head_kv * n_ctx * hp->head_dim_v * (kv->f16 ? 2 : 4);
	kv->row_k = (uint64_t)hp->head_dim_k * (kv->f16 ? 2 : 4);
	kv->row_v = (uint64_t)hp->head_dim_v * (kv->f16 ? 2 : 4);
	kv->heads = hp->n_head_kv;
	if ((rc = vk_buf_new(&kv->buf, (kv->k_bytes + kv->v_bytes) * hp->n_layer, VK_MEM_DEVICE,
			     err)) < 0) {
		free(kv);
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
	free(kv);
}

uint32_t vk_kv_n_pos(const struct vk_kv *kv)
{
	return kv->n_pos;
}

void vk_kv_truncate(struct vk_kv *kv, uint32_t n_pos)
{
	if (n_pos < kv->n_pos)
		kv->n_pos = n_pos;
}

VkDeviceAddress vk_kv_k(const struct vk_kv *kv, uint32_t il)
{
	return kv->buf.addr + (kv->k_bytes + kv->v_bytes) * il;
}

VkDeviceAddress vk_kv_v(const struct vk_kv *kv, uint32_t il)
{
	return vk_kv_k(kv, il) + kv->k_bytes;
}

int vk_kv_copy_prefix(struct vk_kv *dst, const struct vk_kv *src, uint32_t n, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	VkBufferCopy *r;
	uint32_t l, h, i = 0;
	int rc;

	if (dst->n_ctx != src->n_ctx || dst->f16 != src->f16 || dst->n_layer != src->n_layer ||
	    n > src->n_pos)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: kv copy between unlike caches");
	dst->n_pos = n;
	if (n == 0 || dst == src)
		return 0;
	if (!(r = calloc((size_t)src->n_layer * src->heads * 2, sizeof(*r))))
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: kv copy");
	for (l = 0; l < src->n_layer; l++)
		for (h = 0; h < src->heads; h++) {
			uint64_t base = (src->k_bytes + src->v_bytes) * l;

			r[i++] = (VkBufferCopy){base + h * src->row_k * src->n_ctx,
						base + h * src->row_k * src->n_ctx, src->row_k * n};
			r[i++] = (VkBufferCopy){base + src->k_bytes + h * src->row_v * src->n_ctx,
						base + src->k_bytes + h * src->row_v * src->n_ctx,
						src->row_v * n};
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
