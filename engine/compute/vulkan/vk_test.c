/*
 * vk_test.c - vk_test_dispatch() (vk.h): one shader run on host data, so
 * the unit tests can hold every shader against the CPU's reference code.
 * Not used by the engine.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "vk_impl.h"

int vk_test_dispatch(const char *name, void *pc, size_t pc_bytes, void *const *bufs,
		     const size_t *bytes, const size_t *addr_at, uint32_t n_bufs, uint32_t gx,
		     uint32_t gy, uint32_t gz, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	VkCommandPool pool = VK_NULL_HANDLE;
	VkCommandBuffer cb;
	VkFence fence = VK_NULL_HANDLE;
	struct vk_buf *b = NULL;
	int s, rc;
	uint32_t i;

	if ((rc = vk_open(-1, err)) < 0)
		return rc;
	for (s = 0; s < VK_SH_COUNT && strcmp(vk_shader_name((enum vk_shader)s), name); s++)
		;
	if (s == VK_SH_COUNT || pc_bytes > VK_PUSH_MAX)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: no shader %s", name);
	if ((rc = vk_shader_ready((enum vk_shader)s, err)) < 0)
		return rc;
	if (!(b = calloc(n_bufs ? n_bufs : 1, sizeof(*b))))
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: test buffers");
	for (i = 0; i < n_bufs; i++) {
		uint64_t a;

		if ((rc = vk_buf_new(&b[i], bytes[i], VK_MEM_HOST, err)) < 0)
			goto done;
		memcpy(b[i].map, bufs[i], bytes[i]);
		a = b[i].addr;
		memcpy((char *)pc + addr_at[i], &a, sizeof(a));
	}
	rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: test command buffer");
	if (vk_cmd_new(&pool, &cb, &fence, 0) < 0)
		goto done;
	c->f.BeginCommandBuffer(cb, &bi);
	vk_dispatch(cb, (enum vk_shader)s, pc, pc_bytes, gx, gy, gz);
	c->f.EndCommandBuffer(cb);
	if ((rc = vk_submit_wait(cb, fence, err)) < 0)
		goto done;
	for (i = 0; i < n_bufs; i++)
		memcpy(bufs[i], b[i].map, bytes[i]);
done:
	vk_cmd_free(pool, fence);
	for (i = 0; i < n_bufs; i++)
		vk_buf_free(&b[i]);
	free(b);
	return rc;
}
