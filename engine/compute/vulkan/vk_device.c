/*
 * vk_device.c - the process's Vulkan device (vk_impl.h): libvulkan loaded
 * with dlopen, the first (or the chosen) device with a compute queue and
 * the features the shaders need (Vulkan 1.2 buffer device addresses,
 * 64-bit and scalar-layout pointers in push constants), one pipeline per
 * shader (the per-block-type ones made on first use), buffers, submission
 * and dispatch helpers.
 *
 * Memory (why): on unified-memory devices (integrated GPUs, lavapipe) a
 * memory type is both device-local and host-visible; weights go there and
 * are written through the map, so no staging copy exists. A discrete GPU
 * without such a type gets its weights staged (below). With
 * VK_EXT_external_memory_host (enabled where present) the weights are not
 * copied at all: the file's map is imported (vk_buf_import, vk_model.c).
 * A device whose largest device-local heap has no host-visible type (a
 * discrete GPU without resizable BAR) gets its weights staged into
 * device-local memory instead (vk_mem_needs_staging, vk_model.c).
 */
#include "vk_impl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

struct vk_ctx vk__ctx;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int open_rc = 1; /* 1: not tried; else vk_open's result */
static char open_err[EMBER_ERR_MAX];

static PFN_vkGetInstanceProcAddr get_proc;
static PFN_vkCreateInstance create_instance;

static int load_lib(char *err)
{
	if (vk__ctx.lib)
		return 0;
	vk__ctx.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!vk__ctx.lib)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no libvulkan.so.1 (%s)",
				    dlerror());
	get_proc = (PFN_vkGetInstanceProcAddr)dlsym(vk__ctx.lib, "vkGetInstanceProcAddr");
	create_instance = get_proc ? (PFN_vkCreateInstance)get_proc(NULL, "vkCreateInstance") : NULL;
	if (!create_instance)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: libvulkan has no loader entry");
	return 0;
}

static int make_instance(VkInstance *inst, struct vk_fns *f, char *err)
{
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
				 .pApplicationName = "ember", .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
				   .pApplicationInfo = &app};
	VkResult r;

	if (load_lib(err) < 0)
		return EMBER_EUNSUPPORTED;
	if ((r = create_instance(&ci, NULL, inst)) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no instance (VkResult %d: "
				    "no Vulkan driver?)", (int)r);
#define VK__LOAD(n) f->n = (PFN_vk##n)get_proc(*inst, "vk" #n);
	VK_FNS(VK__LOAD)
#undef VK__LOAD
	return 0;
}

/* Why device d cannot run the shaders, or NULL. */
static const char *unfit(const struct vk_fns *f, VkPhysicalDevice d, uint32_t *qfam)
{
	VkPhysicalDeviceProperties p;
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
					.pNext = &f12};
	VkQueueFamilyProperties qf[16];
	uint32_t n = 16, i;

	f->GetPhysicalDeviceProperties(d, &p);
	if (p.apiVersion < VK_API_VERSION_1_2)
		return "Vulkan 1.2 needed";
	f->GetPhysicalDeviceFeatures2(d, &f2);
	if (!f12.bufferDeviceAddress)
		return "no bufferDeviceAddress";
	if (!f12.scalarBlockLayout)
		return "no scalarBlockLayout";
	if (!f2.features.shaderInt64)
		return "no shaderInt64";
	if (p.limits.maxPushConstantsSize < VK_PUSH_MAX)
		return "push constants under 128 bytes";
	f->GetPhysicalDeviceQueueFamilyProperties(d, &n, qf);
	for (i = 0; i < n; i++)
		if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
			*qfam = i;
			return NULL;
		}
	return "no compute queue";
}

static int has_ext(const struct vk_fns *f, VkPhysicalDevice d, const char *name)
{
	VkExtensionProperties *e;
	uint32_t n = 0, i;
	int found = 0;

	if (f->EnumerateDeviceExtensionProperties(d, NULL, &n, NULL) != VK_SUCCESS || n == 0 ||
	    !(e = calloc(n, sizeof(*e))))
		return 0;
	if (f->EnumerateDeviceExtensionProperties(d, NULL, &n, e) >= 0)
		for (i = 0; i < n && !found; i++)
			found = strcmp(e[i].extensionName, name) == 0;
	free(e);
	return found;
}

/* 1 when device d can run coopmat.comp: VK_NV_cooperative_matrix with the
 * feature, a 16x16x16 f16 x f16 -> f32 subgroup shape, subgroups of 32 and
 * shaderFloat16. */
static int coopmat_fits(const struct vk_fns *f, VkInstance inst, VkPhysicalDevice d)
{
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV props =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)get_proc(
			inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &cm};
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
					.pNext = &f12};
	VkPhysicalDeviceSubgroupProperties sp = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
					  .pNext = &sp};
	VkCooperativeMatrixPropertiesNV *cp;
	uint32_t n = 0, i;
	int ok = 0;

	if (!props || !has_ext(f, d, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
		return 0;
	f->GetPhysicalDeviceFeatures2(d, &f2);
	f->GetPhysicalDeviceProperties2(d, &p2);
	if (!cm.cooperativeMatrix || !f12.shaderFloat16 || sp.subgroupSize != 32 ||
	    props(d, &n, NULL) != VK_SUCCESS || n == 0 || !(cp = calloc(n, sizeof(*cp))))
		return 0;
	for (i = 0; i < n; i++)
		cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
	if (props(d, &n, cp) >= 0)
		for (i = 0; i < n && !ok; i++)
			ok = cp[i].MSize == 16 && cp[i].NSize == 16 && cp[i].KSize == 16 &&
			     cp[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
			     cp[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
			     cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
			     cp[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
			     cp[i].scope == VK_SCOPE_SUBGROUP_NV;
	free(cp);
	return ok;
}

/* EMBER_VK_COOPMAT=1: the cooperative-matrix GEMM is asked for (0 or
 * unset: not; anything else is refused: -1). */
static int coopmat_asked(void)
{
	const char *e = getenv("EMBER_VK_COOPMAT");

	if (!e || !*e || strcmp(e, "0") == 0)
		return 0;
	return strcmp(e, "1") == 0 ? 1 : -1;
}

static const char *type_name(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
	default: return "other";
	}
}

int vk_mem_needs_staging(const VkPhysicalDeviceMemoryProperties *mp)
{
	uint32_t i, heap = UINT32_MAX;

	for (i = 0; i < mp->memoryHeapCount; i++)
		if (mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT &&
		    (heap == UINT32_MAX || mp->memoryHeaps[i].size > mp->memoryHeaps[heap].size))
			heap = i;
	for (i = 0; heap != UINT32_MAX && i < mp->memoryTypeCount; i++)
		if (mp->memoryTypes[i].heapIndex == heap &&
		    mp->memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
			return 0;
	return heap != UINT32_MAX;
}

static int is_uma(const VkPhysicalDeviceMemoryProperties *mp)
{
	const VkMemoryPropertyFlags want =
		VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
	uint32_t i;

	for (i = 0; i < mp->memoryTypeCount; i++)
		if ((mp->memoryTypes[i].propertyFlags & want) == want)
			return 1;
	return 0;
}

char *vk_describe(char *buf, size_t cap)
{
	struct vk_fns f;
	VkInstance inst;
	VkPhysicalDevice devs[16];
	uint32_t n = 16, i, q;
	char err[EMBER_ERR_MAX];
	size_t len = 0;

	buf[0] = '\0';
	if (make_instance(&inst, &f, err) < 0) {
		snprintf(buf, cap, "%s\n", err);
		return buf;
	}
	if (f.EnumeratePhysicalDevices(inst, &n, devs) < 0 || n == 0)
		snprintf(buf, cap, "vulkan: no devices\n");
	for (i = 0; i < n && len < cap; i++) {
		VkPhysicalDeviceProperties p;
		VkPhysicalDeviceMemoryProperties mp;
		const char *why = unfit(&f, devs[i], &q);
		uint64_t heap = 0;
		uint32_t h;
		int w;

		f.GetPhysicalDeviceProperties(devs[i], &p);
		f.GetPhysicalDeviceMemoryProperties(devs[i], &mp);
		for (h = 0; h < mp.memoryHeapCount; h++)
			if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT &&
			    mp.memoryHeaps[h].size > heap)
				heap = mp.memoryHeaps[h].size;
		w = snprintf(buf + len, cap - len,
			     "vulkan:%u: %s (%s, Vulkan %u.%u.%u, %llu MiB, %s): %s%s%s%s\n", i,
			     p.deviceName, type_name(p.deviceType), VK_API_VERSION_MAJOR(p.apiVersion),
			     VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion),
			     (unsigned long long)(heap >> 20),
			     is_uma(&mp) ? "unified memory" : "dedicated memory",
			     why ? "unusable: " : "usable; features used: bufferDeviceAddress "
			     "scalarBlockLayout shaderInt64",
			     why ? why : vk_mem_needs_staging(&mp)
			     ? " (device-local memory not host-visible: weights staged into it once)"
			     : has_ext(&f, devs[i], VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)
			     ? " VK_EXT_external_memory_host (weights read in place from the file's map)"
			     : " (no VK_EXT_external_memory_host: weights copied once)",
			     why ? "" : coopmat_fits(&f, inst, devs[i])
			     ? "; VK_NV_cooperative_matrix: cooperative-matrix prefill GEMM available, "
			     "opt-in (EMBER_VK_COOPMAT=1; unmeasured, self-checked at load)"
			     : has_ext(&f, devs[i], "VK_KHR_cooperative_matrix")
			     ? "; VK_KHR_cooperative_matrix present but unused (Debian 12's glslc "
			     "cannot compile it)" : "; no cooperative matrix",
			     why ? "" : "; shaders: embed norm rope matmul and prefill gemm (f32 f16 "
			     "bf16 q8_0 q4_0; q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs: a "
			     "pipeline each, on first use) kv_store attention act add copy");
		len += w > 0 ? (size_t)w : 0;
	}
	f.DestroyInstance(inst, NULL);
	return buf;
}

static int make_pipeline(enum vk_shader s, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	size_t bytes;
	const uint32_t *code = vk_shader_code(s, &bytes);
	VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
					.codeSize = bytes, .pCode = code};
	VkShaderModule mod;
	VkComputePipelineCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .pName = "main"},
		.layout = c->layout};
	VkResult r;

	if (c->f.CreateShaderModule(c->dev, &mci, NULL, &mod) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: shader %s refused",
				    vk_shader_name(s));
	pci.stage.module = mod;
	r = c->f.CreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pci, NULL, &c->pipe[s]);
	c->f.DestroyShaderModule(c->dev, mod, NULL);
	if (r != VK_SUCCESS) {
		c->pipe[s] = VK_NULL_HANDLE;
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: pipeline %s (VkResult %d)",
				    vk_shader_name(s), (int)r);
	}
	return 0;
}

static int make_pipelines(char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_MAX};
	VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
					  .pushConstantRangeCount = 1, .pPushConstantRanges = &pr};
	int s, rc;

	if (c->f.CreatePipelineLayout(c->dev, &lci, NULL, &c->layout) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: pipeline layout");
	for (s = 0; s < VK_SH_LAZY; s++)
		if ((rc = make_pipeline((enum vk_shader)s, err)) < 0)
			return rc;
	return 0;
}

/* The per-type shaders: made by the first pass (or test) that needs one,
 * then kept; a pass reads only pipelines made before it was. */
int vk_shader_ready(enum vk_shader s, char *err)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!vk__ctx.pipe[s])
		rc = make_pipeline(s, err);
	pthread_mutex_unlock(&lock);
	return rc;
}

static int open_device(int index, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkPhysicalDevice devs[16];
	uint32_t n = 16, i;
	const char *why = NULL;
	float prio = 1.0f;
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.bufferDeviceAddress = VK_TRUE, .scalarBlockLayout = VK_TRUE};
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
					.pNext = &f12, .features = {.shaderInt64 = VK_TRUE}};
	VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
				       .queueCount = 1, .pQueuePriorities = &prio};
	VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &f2,
				  .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci};
	VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
		.cooperativeMatrix = VK_TRUE};
	const char *exts[2];
	int rc;

	if (coopmat_asked() < 0)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: EMBER_VK_COOPMAT=%.32s: 0 or 1",
				    getenv("EMBER_VK_COOPMAT"));
	if ((rc = make_instance(&c->inst, &c->f, err)) < 0)
		return rc;
	if (c->f.EnumeratePhysicalDevices(c->inst, &n, devs) < 0 || n == 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no devices");
	for (i = 0; i < n; i++) {
		if (index >= 0 && (uint32_t)index != i)
			continue;
		if ((why = unfit(&c->f, devs[i], &c->qfam)) == NULL)
			break;
	}
	if (index >= 0 && (uint32_t)index >= n)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no device %d (%u found)",
				    index, n);
	if (i == n)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no usable device (%s)", why);
	c->index = (int)i;
	c->phys = devs[i];
	c->f.GetPhysicalDeviceProperties(c->phys, &c->props);
	c->f.GetPhysicalDeviceMemoryProperties(c->phys, &c->mem);
	c->uma = is_uma(&c->mem);
	qci.queueFamilyIndex = c->qfam;
	if (has_ext(&c->f, c->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
		VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
		VkPhysicalDeviceProperties2 p2 = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &hp};

		c->f.GetPhysicalDeviceProperties2(c->phys, &p2);
		c->host_align = hp.minImportedHostPointerAlignment;
		exts[dci.enabledExtensionCount++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	}
	if (coopmat_asked() == 1 && coopmat_fits(&c->f, c->inst, c->phys)) {
		exts[dci.enabledExtensionCount++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
		f12.shaderFloat16 = VK_TRUE;
		f12.pNext = &cm;
		c->coopmat = 1;
	}
	dci.ppEnabledExtensionNames = exts;
	if (c->f.CreateDevice(c->phys, &dci, NULL, &c->dev) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: device %s refused",
				    c->props.deviceName);
	if (c->host_align)
		c->host_ptr_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)c->f.GetDeviceProcAddr(
			c->dev, "vkGetMemoryHostPointerPropertiesEXT");
	c->f.GetDeviceQueue(c->dev, c->qfam, 0, &c->queue);
	pthread_mutex_init(&c->qlock, NULL);
	if (vk_cmd_new(&c->pool, &c->cb, &c->fence, 1) < 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: command pool");
	return make_pipelines(err);
}

int vk_built(void)
{
	return 1;
}

int vk_open(int index, char *err)
{
	pthread_mutex_lock(&open_lock);
	if (open_rc == 1) {
		open_rc = open_device(index, open_err);
		/* A failed open leaves what it made: the process goes on on the
		 * CPU, and the driver's objects go with it at exit. */
	}
	pthread_mutex_unlock(&open_lock);
	if (open_rc < 0)
		return ember_seterr(err, open_rc, "%s", open_err);
	if (index >= 0 && index != vk__ctx.index)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: device %d is open, not %d",
				    vk__ctx.index, index);
	return 0;
}

const char *vk_device_name(void)
{
	return open_rc == 0 ? vk__ctx.props.deviceName : NULL;
}

static int find_type(uint32_t bits, VkMemoryPropertyFlags want)
{
	uint32_t i;

	for (i = 0; i < vk__ctx.mem.memoryTypeCount; i++)
		if ((bits & (1u << i)) && (vk__ctx.mem.memoryTypes[i].propertyFlags & want) == want)
			return (int)i;
	return -1;
}

int vk_buf_new(struct vk_buf *b, VkDeviceSize size, enum vk_mem where, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				  .size = size ? size : 16,
				  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
					   VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
					   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
					   VK_BUFFER_USAGE_TRANSFER_DST_BIT};
	VkMemoryAllocateFlagsInfo afi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
					 .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &afi};
	VkBufferDeviceAddressInfo dai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
	VkMemoryRequirements req;
	const VkMemoryPropertyFlags host =
		VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	int t = -1;

	memset(b, 0, sizeof(*b));
	if (c->f.CreateBuffer(c->dev, &bci, NULL, &b->b) != VK_SUCCESS)
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: buffer of %llu bytes",
				    (unsigned long long)size);
	c->f.GetBufferMemoryRequirements(c->dev, b->b, &req);
	if (where == VK_MEM_LOCAL)
		t = find_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	else if (where != VK_MEM_HOST)
		t = find_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host);
	if (t < 0 && where == VK_MEM_DEVICE)
		t = find_type(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	if (t < 0)
		t = find_type(req.memoryTypeBits, host);
	ai.allocationSize = req.size;
	ai.memoryTypeIndex = (uint32_t)t;
	if (t < 0 || c->f.AllocateMemory(c->dev, &ai, NULL, &b->m) != VK_SUCCESS) {
		vk_buf_free(b);
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: %llu bytes of device memory",
				    (unsigned long long)size);
	}
	c->f.BindBufferMemory(c->dev, b->b, b->m, 0);
	if ((c->mem.memoryTypes[t].propertyFlags & host) == host &&
	    c->f.MapMemory(c->dev, b->m, 0, VK_WHOLE_SIZE, 0, &b->map) != VK_SUCCESS)
		b->map = NULL;
	dai.buffer = b->b;
	b->addr = c->f.GetBufferDeviceAddress(c->dev, &dai);
	b->size = size;
	return 0;
}

int vk_buf_import(struct vk_buf *b, const void *host, VkDeviceSize size, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	const VkExternalMemoryHandleTypeFlagBits ht =
		VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
	VkExternalMemoryBufferCreateInfo ebi = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO, .handleTypes = ht};
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ebi,
				  .size = size,
				  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
					   VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
					   VK_BUFFER_USAGE_TRANSFER_SRC_BIT};
	VkMemoryHostPointerPropertiesEXT hp = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT, .handleType = ht,
		.pHostPointer = (void *)(uintptr_t)host};
	VkMemoryAllocateFlagsInfo afi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
					 .pNext = &imp, .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &afi,
				   .allocationSize = size};
	VkBufferDeviceAddressInfo dai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
	VkMemoryRequirements req;
	uint32_t bits;
	int t;

	memset(b, 0, sizeof(*b));
	if (!c->host_ptr_props || !c->host_align || (uintptr_t)host % c->host_align ||
	    size % c->host_align)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: no host memory import");
	if (c->host_ptr_props(c->dev, ht, host, &hp) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: host pointer refused");
	if (c->f.CreateBuffer(c->dev, &bci, NULL, &b->b) != VK_SUCCESS)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: import buffer refused");
	c->f.GetBufferMemoryRequirements(c->dev, b->b, &req);
	bits = req.memoryTypeBits & hp.memoryTypeBits;
	t = find_type(bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	if (t < 0)
		t = find_type(bits, 0);
	ai.memoryTypeIndex = (uint32_t)t;
	if (t < 0 || req.size > size ||
	    c->f.AllocateMemory(c->dev, &ai, NULL, &b->m) != VK_SUCCESS ||
	    c->f.BindBufferMemory(c->dev, b->b, b->m, 0) != VK_SUCCESS) {
		vk_buf_free(b);
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: import of %llu bytes refused",
				    (unsigned long long)size);
	}
	dai.buffer = b->b;
	b->addr = c->f.GetBufferDeviceAddress(c->dev, &dai);
	b->size = size;
	return 0;
}

void vk_buf_free(struct vk_buf *b)
{
	if (b->b)
		vk__ctx.f.DestroyBuffer(vk__ctx.dev, b->b, NULL);
	if (b->m)
		vk__ctx.f.FreeMemory(vk__ctx.dev, b->m, NULL); /* unmaps */
	memset(b, 0, sizeof(*b));
}

int vk_cmd_new(VkCommandPool *pool, VkCommandBuffer *cb, VkFence *fence, int reset)
{
	struct vk_ctx *c = &vk__ctx;
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = reset ? VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT : 0,
		.queueFamilyIndex = c->qfam};
	VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					   .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					   .commandBufferCount = 1};
	VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};

	if (c->f.CreateCommandPool(c->dev, &pci, NULL, pool) != VK_SUCCESS)
		return -1;
	cai.commandPool = *pool;
	if (c->f.AllocateCommandBuffers(c->dev, &cai, cb) != VK_SUCCESS ||
	    c->f.CreateFence(c->dev, &fci, NULL, fence) != VK_SUCCESS)
		return -1;
	return 0;
}

void vk_cmd_free(VkCommandPool pool, VkFence fence)
{
	struct vk_ctx *c = &vk__ctx;

	if (fence)
		c->f.DestroyFence(c->dev, fence, NULL);
	if (pool)
		c->f.DestroyCommandPool(c->dev, pool, NULL);
}

int vk_submit_wait(VkCommandBuffer cb, VkFence fence, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
			   .pCommandBuffers = &cb};
	VkResult r;

	c->f.ResetFences(c->dev, 1, &fence);
	pthread_mutex_lock(&c->qlock);
	r = c->f.QueueSubmit(c->queue, 1, &si, fence);
	pthread_mutex_unlock(&c->qlock);
	if (r == VK_SUCCESS)
		r = c->f.WaitForFences(c->dev, 1, &fence, VK_TRUE, UINT64_MAX);
	if (r != VK_SUCCESS)
		return ember_seterr(err, EMBER_EIO, "vulkan: submission failed (VkResult %d)", (int)r);
	return 0;
}

void vk_barrier(VkCommandBuffer cb)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
					       VK_ACCESS_TRANSFER_READ_BIT |
					       VK_ACCESS_TRANSFER_WRITE_BIT};

	vk__ctx.f.CmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
					     VK_PIPELINE_STAGE_TRANSFER_BIT,
				     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
					     VK_PIPELINE_STAGE_TRANSFER_BIT,
				     0, 1, &mb, 0, NULL, 0, NULL);
}

void vk_dispatch(VkCommandBuffer cb, enum vk_shader s, const void *pc, size_t size, uint32_t gx,
		 uint32_t gy, uint32_t gz)
{
	struct vk_ctx *c = &vk__ctx;

	c->f.CmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe[s]);
	c->f.CmdPushConstants(cb, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)size, pc);
	c->f.CmdDispatch(cb, gx, gy, gz);
}

void vk_dispatch_n(VkCommandBuffer cb, enum vk_shader s, const void *pc, size_t size, uint64_t n)
{
	uint64_t groups = (n + 63) / 64;

	if (groups == 0)
		return;
	vk_dispatch(cb, s, pc, size, groups < 1024 ? (uint32_t)groups : 1024,
		    (uint32_t)((groups + 1023) / 1024), 1);
}
