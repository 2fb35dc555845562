/*
 * vk_coop.c - the gate of the cooperative-matrix GEMM (coopmat.comp,
 * vk_impl.h): before a model's prefill uses it, it is run beside the tiled
 * GEMM (gemm.comp) on the model's own weights of each type (the first 64
 * rows of the first tensor of that type) and 37 tokens of random
 * activations; any distance past 1e-2 x max (f16 operands give ~1e-3), or
 * a pipeline the driver refuses, keeps the model on gemm.comp. Why: no
 * device here runs cooperative matrices (lavapipe has none), so the shader
 * has never been run; it must not be trusted blindly where it first is.
 *
 * Threads: called under the weights registry's lock (vk_model.c); the
 * queue lock is taken around the submission.
 */
#include "vk_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

#define N_TOK 37u
#define MAX_ROWS 64u

/* matmul.comp's push constants (vk_pass.c's struct pc_matmul) */
struct pc_mm {
	uint64_t w, x, y, bias;
	uint32_t type, n_in, n_out, n_tok, flags;
	float cap;
};

int vk_coopmat_check(uint32_t type, VkDeviceAddress w, uint32_t n_in, uint32_t n_out, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	const int sh_gemm = vk_shader_gemm(type), sh_coop = vk_shader_coopmat(type);
	const uint32_t rows = n_out < MAX_ROWS ? n_out : MAX_ROWS;
	const VkDeviceSize xb = (VkDeviceSize)N_TOK * n_in * 4, yb = (VkDeviceSize)N_TOK * rows * 4;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	VkCommandPool pool = VK_NULL_HANDLE;
	VkCommandBuffer cb;
	VkFence fence = VK_NULL_HANDLE;
	struct vk_buf buf = {0};
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	double worst = 0.0, mx = 1e-30;
	const float *a, *b;
	float *x;
	size_t i;
	int rc;

	if (sh_gemm < 0 || sh_coop < 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no cooperative-matrix GEMM "
				    "for type %u", type);
	if ((rc = vk_shader_ready((enum vk_shader)sh_gemm, err)) < 0 ||
	    (rc = vk_shader_ready((enum vk_shader)sh_coop, err)) < 0)
		return rc;
	if ((rc = vk_buf_new(&buf, xb + 2 * yb, VK_MEM_HOST, err)) < 0)
		return rc;
	rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: cooperative-matrix check buffers");
	if (!buf.map)
		goto done;
	x = buf.map;
	for (i = 0; i < (size_t)N_TOK * n_in; i++) { /* xorshift, uniform in [-1, 1) */
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		x[i] = (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
	}
	if (vk_cmd_new(&pool, &cb, &fence, 0) < 0)
		goto done;
	c->f.BeginCommandBuffer(cb, &bi);
	{
		struct pc_mm g = {w, buf.addr, buf.addr + xb, 0, type, n_in, rows, N_TOK, 0, 0};
		struct pc_mm k = g;

		k.y = buf.addr + xb + yb;
		vk_dispatch(cb, (enum vk_shader)sh_gemm, &g, sizeof(g), (rows + 63) / 64,
			    (N_TOK + 31) / 32, 1);
		vk_dispatch(cb, (enum vk_shader)sh_coop, &k, sizeof(k), (rows + 63) / 64,
			    (N_TOK + 31) / 32, 1);
	}
	c->f.EndCommandBuffer(cb);
	if ((rc = vk_submit_wait(cb, fence, err)) < 0)
		goto done;
	a = (const float *)((const char *)buf.map + xb);
	b = a + (size_t)N_TOK * rows;
	for (i = 0; i < (size_t)N_TOK * rows; i++) {
		worst = fmax(worst, fabs((double)a[i] - b[i]));
		mx = fmax(mx, fabs((double)a[i]));
	}
	rc = 0;
	if (!(worst <= 1e-2 * mx)) /* NaN too */
		rc = ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: the cooperative-matrix GEMM "
				  "differs from the tiled one by %.3g (max %.3g) on type %u", worst,
				  mx, type);
done:
	vk_cmd_free(pool, fence);
	vk_buf_free(&buf);
	return rc;
}
