/*
 * vk_stage.c - uploads into device memory the host cannot map, through one
 * bounded host-visible staging buffer (vk_impl.h): bytes are gathered into
 * it, and when it is full (or the destination changes) one command buffer
 * copies the gathered regions on the device and is waited for, so a model
 * of any size goes through a buffer of a few MiB. Used once per model at
 * load (vk_model.c) for devices whose device-local memory is not
 * host-visible (discrete GPUs without resizable BAR), or when forced
 * (EMBER_VK_STAGING=1, vk_test_staging) so lavapipe tests the path.
 *
 * Threads: a stage is one thread's; submissions take the queue lock.
 */
#include "vk_impl.h"

#include <stdlib.h>
#include <string.h>

#include "ember.h"

#define MAX_REGIONS 64u

struct vk_stage {
	struct vk_buf buf;
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkFence fence;
	VkDeviceSize used;
	struct vk_buf *dst; /* where the gathered regions go */
	VkBufferCopy reg[MAX_REGIONS];
	uint32_t n_reg;
	uint64_t n_flush;
};

int vk_stage_new(struct vk_stage **out, VkDeviceSize bytes, char *err)
{
	struct vk_stage *s;
	int rc;

	*out = NULL;
	if (!(s = calloc(1, sizeof(*s))))
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: staging");
	if ((rc = vk_buf_new(&s->buf, bytes, VK_MEM_HOST, err)) < 0)
		goto fail;
	rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: staging buffer of %llu bytes not mappable",
			  (unsigned long long)bytes);
	if (!s->buf.map)
		goto fail;
	rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: staging command buffer");
	if (vk_cmd_new(&s->pool, &s->cb, &s->fence, 1) < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	vk_stage_free(s);
	return rc;
}

void vk_stage_free(struct vk_stage *s)
{
	if (!s)
		return;
	vk_cmd_free(s->pool, s->fence);
	vk_buf_free(&s->buf);
	free(s);
}

int vk_stage_flush(struct vk_stage *s, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	int rc;

	if (s->n_reg == 0)
		return 0;
	c->f.ResetCommandBuffer(s->cb, 0);
	c->f.BeginCommandBuffer(s->cb, &bi);
	c->f.CmdCopyBuffer(s->cb, s->buf.b, s->dst->b, s->n_reg, s->reg);
	/* the copies before any shader reads the weights */
	vk_barrier(s->cb);
	c->f.EndCommandBuffer(s->cb);
	rc = vk_submit_wait(s->cb, s->fence, err);
	s->n_reg = 0;
	s->used = 0;
	s->n_flush++;
	return rc;
}

int vk_stage_write(struct vk_stage *s, struct vk_buf *dst, VkDeviceSize off, const void *src,
		   VkDeviceSize n, char *err)
{
	const uint8_t *p = src;
	int rc;

	if (off > dst->size || n > dst->size - off)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: staged copy past its buffer");
	while (n) {
		VkDeviceSize take;

		if (s->used == s->buf.size || s->n_reg == MAX_REGIONS || (s->n_reg && s->dst != dst))
			if ((rc = vk_stage_flush(s, err)) < 0)
				return rc;
		take = s->buf.size - s->used < n ? s->buf.size - s->used : n;
		memcpy((uint8_t *)s->buf.map + s->used, p, take);
		s->reg[s->n_reg++] = (VkBufferCopy){s->used, off, take};
		s->dst = dst;
		s->used += take;
		off += take;
		p += take;
		n -= take;
	}
	return 0;
}

uint64_t vk_stage_flushes(const struct vk_stage *s)
{
	return s->n_flush;
}
