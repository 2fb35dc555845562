/*
 * vk_impl.h - what the Vulkan backend's files share: the process-wide
 * device (struct vk_ctx, one per process, opened by vk_open and never
 * closed before exit), the Vulkan entry points loaded with dlopen (so the
 * binary needs no libvulkan to start), buffers with device addresses, and
 * the shader table (vk_shaders.c, SPIR-V embedded at build time).
 *
 * Threads: the context is written once under vk__open_lock; afterwards it
 * is read-only except the queue, which is used under ctx.qlock.
 */
#ifndef EMBER_VK_IMPL_H
#define EMBER_VK_IMPL_H

#define VK_NO_PROTOTYPES
#include <pthread.h>
#include <vulkan/vulkan.h>

#include "vk.h"

#define VK_FNS(X)                                                                    \
	X(DestroyInstance) X(EnumeratePhysicalDevices) X(GetPhysicalDeviceProperties)   \
	X(GetPhysicalDeviceFeatures2) X(GetPhysicalDeviceQueueFamilyProperties)        \
	X(GetPhysicalDeviceMemoryProperties) X(EnumerateDeviceExtensionProperties)     \
	X(CreateDevice) X(GetDeviceProcAddr) X(DestroyDevice) X(GetDeviceQueue)        \
	X(CreateBuffer) X(DestroyBuffer) X(GetBufferMemoryRequirements)                \
	X(AllocateMemory) X(FreeMemory) X(BindBufferMemory) X(MapMemory)               \
	X(GetBufferDeviceAddress) X(CreateShaderModule) X(DestroyShaderModule)         \
	X(CreatePipelineLayout) X(DestroyPipelineLayout) X(CreateComputePipelines)     \
	X(DestroyPipeline) X(CreateCommandPool) X(DestroyCommandPool)                  \
	X(AllocateCommandBuffers) X(ResetCommandBuffer) X(BeginCommandBuffer)          \
	X(EndCommandBuffer) X(CmdBindPipeline) X(CmdPushConstants) X(CmdDispatch)      \
	X(CmdPipelineBarrier) X(CmdCopyBuffer) X(CmdFillBuffer) X(CreateFence)         \
	X(DestroyFence) X(ResetFences) X(WaitForFences) X(QueueSubmit)                 \
	X(GetPhysicalDeviceProperties2)

struct vk_fns {
#define VK__FN(n) PFN_vk##n n;
	VK_FNS(VK__FN)
#undef VK__FN
};

/* The block types read by a matmul and an embed of their own (shaders
 * compiled with -DQTYPE, common.glsl): DTYPE_x, name. */
#define VK_QTYPES(X)                                                                 \
	X(Q4_1, q4_1) X(Q5_0, q5_0) X(Q5_1, q5_1) X(Q2_K, q2_k) X(Q3_K, q3_k)          \
	X(Q4_K, q4_k) X(Q5_K, q5_k) X(Q6_K, q6_k) X(IQ4_NL, iq4_nl) X(IQ4_XS, iq4_xs)

/* The shaders (shaders/<name>.comp). Those before VK_SH_LAZY get their
 * pipelines when the device opens; the per-type ones and the prefill GEMM
 * when a model needs them (vk_shader_ready): each costs llvmpipe seconds
 * to compile. Each type's matmul, embed, gemm and coopmat follow one
 * another. */
enum vk_shader {
	VK_SH_EMBED,
	VK_SH_NORM,
	VK_SH_MATMUL,
	VK_SH_ROPE,
	VK_SH_KV_STORE,
	VK_SH_ATTENTION,
	VK_SH_ACT,
	VK_SH_ADD,
	VK_SH_COPY,
	VK_SH_GEMM,
	VK_SH_COOPMAT, /* only where the device has it and it is asked for */
#define VK__SH(U, l) VK_SH_MATMUL_##U, VK_SH_EMBED_##U, VK_SH_GEMM_##U, VK_SH_COOPMAT_##U,
	VK_QTYPES(VK__SH)
#undef VK__SH
	VK_SH_COUNT
};
#define VK_SH_LAZY (VK_SH_COPY + 1)

/* Push constants are at most this many bytes (the minimum every device
 * offers); each shader's block is a prefix of it. */
#define VK_PUSH_MAX 128

struct vk_ctx {
	void *lib;
	struct vk_fns f;
	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t qfam;
	int index;
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceMemoryProperties mem;
	int uma; /* a memory type is both device-local and host-visible */
	/* VK_NV_cooperative_matrix enabled (EMBER_VK_COOPMAT=1 and the device
	 * multiplies 16x16x16 f16 -> f32 in subgroups of 32): coopmat.comp
	 * may replace gemm.comp once it passed its self-check (vk_coop.c) */
	int coopmat;
	/* VK_EXT_external_memory_host: host memory (the weights' file map)
	 * imported as device memory, in units of host_align bytes */
	PFN_vkGetMemoryHostPointerPropertiesEXT host_ptr_props;
	VkDeviceSize host_align;
	pthread_mutex_t qlock;
	VkPipelineLayout layout;
	VkPipeline pipe[VK_SH_COUNT];
	/* Cache copies (vk_kv_copy_prefix), under qlock. */
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkFence fence;
};

extern struct vk_ctx vk__ctx;

/* A buffer with its memory, device address and (host-visible ones) map. */
struct vk_buf {
	VkBuffer b;
	VkDeviceMemory m;
	VkDeviceSize size;
	VkDeviceAddress addr;
	void *map;
};

enum vk_mem {
	VK_MEM_DEVICE, /* device-local; mapped too when the device is UMA */
	VK_MEM_HOST,   /* host-visible, coherent (inputs, logits) */
	/* written once by the host: device-local and host-visible where the
	 * device has such memory (UMA, resizable BAR), else host memory the
	 * device reads (the weights) */
	VK_MEM_UPLOAD,
	/* device-local, host-visible or not: the weights' chunks filled
	 * through a staging buffer (vk_model.c) */
	VK_MEM_LOCAL,
};

/* 1 when no host-visible memory type lives in the device's largest
 * device-local heap (a discrete GPU without resizable BAR): the weights
 * are then staged into it rather than written in place or imported. */
int vk_mem_needs_staging(const VkPhysicalDeviceMemoryProperties *mp);

int vk_buf_new(struct vk_buf *b, VkDeviceSize size, enum vk_mem where, char *err);

/* A buffer over `size` bytes of host memory at `host` (both multiples of
 * ctx.host_align), which must outlive it; no map. EMBER_EUNSUPPORTED when
 * the device cannot import it (no extension, or the driver refuses). */
int vk_buf_import(struct vk_buf *b, const void *host, VkDeviceSize size, char *err);
void vk_buf_free(struct vk_buf *b);

/* SPIR-V of each shader (vk_shaders.c). */
const uint32_t *vk_shader_code(enum vk_shader s, size_t *bytes);
const char *vk_shader_name(enum vk_shader s);

/* The matmul / embed / gemm shader that reads weight type t, or -1: none
 * does. */
int vk_shader_matmul(uint32_t t);
int vk_shader_embed(uint32_t t);
int vk_shader_gemm(uint32_t t);
int vk_shader_coopmat(uint32_t t);

/* Makes shader s's pipeline unless it exists (thread-safe; vk_device.c). */
int vk_shader_ready(enum vk_shader s, char *err);

/* A command pool on the compute queue's family with one primary command
 * buffer, and a fence: what each recorder (the context's, a pass, a
 * staging area, the checks) submits and waits with (vk_submit_wait).
 * reset: the buffer may be reset and recorded again. 0, or -1 with the
 * handles made so far set (start pool and fence at VK_NULL_HANDLE);
 * vk_cmd_free() releases either way (freeing the pool frees the buffer). */
int vk_cmd_new(VkCommandPool *pool, VkCommandBuffer *cb, VkFence *fence, int reset);
void vk_cmd_free(VkCommandPool pool, VkFence fence);

/* Submits cb and waits for it (fence reset first); under ctx.qlock. */
int vk_submit_wait(VkCommandBuffer cb, VkFence fence, char *err);

/* Records a compute-to-compute (and transfer) memory barrier. */
void vk_barrier(VkCommandBuffer cb);

/* Binds shader s, pushes `pc` (size bytes) and dispatches gx, gy, gz. */
void vk_dispatch(VkCommandBuffer cb, enum vk_shader s, const void *pc, size_t size, uint32_t gx,
		 uint32_t gy, uint32_t gz);

/* Dispatches s over n invocations of 64 (x up to 1024 groups, then y). */
void vk_dispatch_n(VkCommandBuffer cb, enum vk_shader s, const void *pc, size_t size, uint64_t n);

/* ---- uploads through a bounded staging buffer (vk_stage.c) ---- */

struct vk_stage;

/* A staging buffer of `bytes` host-visible bytes with its command buffer. */
int vk_stage_new(struct vk_stage **out, VkDeviceSize bytes, char *err);
void vk_stage_free(struct vk_stage *s);

/* Copies n bytes of host memory at src to byte `off` of dst on the device,
 * through the staging buffer (flushed whenever it fills). */
int vk_stage_write(struct vk_stage *s, struct vk_buf *dst, VkDeviceSize off, const void *src,
		   VkDeviceSize n, char *err);

/* Submits the copies gathered so far and waits for them. */
int vk_stage_flush(struct vk_stage *s, char *err);

/* How many submissions the stage has made. */
uint64_t vk_stage_flushes(const struct vk_stage *s);

/* ---- the cooperative-matrix GEMM's self-check (vk_coop.c) ---- */

/* coopmat.comp beside gemm.comp on the first rows of weight w (type,
 * n_in x n_out, on the device) and random activations: 0 when they agree
 * within 1e-2 x max, else EMBER_EUNSUPPORTED saying by how much. */
int vk_coopmat_check(uint32_t type, VkDeviceAddress w, uint32_t n_in, uint32_t n_out, char *err);

/* ---- the model's weights on the device (vk_model.c) ---- */

struct vk_weights;

/* The device copy of m's weights, uploaded on first use, shared (counted). */
int vk_weights_get(struct vk_weights **out, const struct model *m, char *err);
void vk_weights_put(struct vk_weights *w);

/* Device address of a weight (0: absent). layer is ignored for model-wide
 * roles. */
VkDeviceAddress vk_weights_addr(const struct vk_weights *w, int role, uint32_t layer);

/* 1 when this model's prefill GEMM runs on cooperative matrices (asked
 * for, the device has them, the self-check passed for each of its types). */
int vk_weights_coopmat(const struct vk_weights *w);

#endif
