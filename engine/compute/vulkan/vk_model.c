/*
 * vk_model.c - which models the Vulkan path runs, and their weights in
 * device memory.
 *
 * vk_check_model() refuses, naming it, every architecture feature the
 * shaders do not implement (heads wider than 512 or of odd width) and every
 * weight type without an in-shader dequantization (F32, F16, BF16, Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K, IQ4_NL and IQ4_XS are read; e.g. Q8_K
 * and the other IQ types are not): such a model is never run
 * approximately; the CPU device still runs it. vk_weights_get() makes the
 * pipelines of the model's types (each type has its own, vk_impl.h).
 *
 * Weights: every tensor the model binds is copied once, in its GGUF
 * layout, into device buffers (chunks under the device's allocation
 * limit, each tensor 256-byte aligned) and shared by all passes of the
 * process through a counted registry keyed by the model. On unified-memory
 * devices the buffers are device-local and host-visible, written through
 * the map: the only copy besides the file's page cache. Where the device
 * has VK_EXT_external_memory_host (lavapipe, most integrated GPUs) the
 * file's map itself is imported instead (import_map): no copy at all, the
 * page cache is what the shaders read; a driver that refuses (e.g.
 * read-only pages) gets the copy. Where the device-local memory is not
 * host-visible (discrete GPUs without resizable BAR; or forced:
 * EMBER_VK_STAGING=1, vk_test_staging) the chunks are device-local and
 * filled through one bounded staging buffer (vk_stage.c): the GPU then
 * reads its own memory, not the host's over the bus (so no import
 * either).
 */
#include "vk_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"
#include "gguf.h"

#define VK_MAX_HEAD 512 /* attention.comp's MAXD */

static int check_weight(const struct model_weight *w, int role, uint32_t layer, char *err)
{
	char name[96];

	if (!w->data || vk_shader_matmul(w->type) >= 0)
		return 0;
	return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: tensor %s: no shader for type %s "
			    "(the CPU device runs it: --device=cpu)",
			    model_tensor_name((enum arch_tensor)role, layer, name, sizeof(name)),
			    dtype_name(w->type));
}

int vk_check_model(const struct model *m, char *err)
{
	const struct arch_desc *a = m->arch;
	const struct model_hparams *hp = &m->hp;
	const char *what = NULL;
	uint32_t l;
	int r, rc;


	if (hp->head_dim_k > VK_MAX_HEAD || hp->head_dim_v > VK_MAX_HEAD)
		what = "heads wider than 512";
	else if (hp->head_dim_k % 2 || hp->head_dim_v % 2 || hp->n_rot > hp->head_dim_k)
		what = "odd head widths";
	else if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
		what = "query heads not a multiple of kv heads";
	if (what)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: architecture %s: %s is not "
				    "implemented on Vulkan (the CPU device runs it: --device=cpu)",
				    a->name, what);
	for (r = 0; r < ARCH_T_FIRST_LAYER; r++)
		if ((rc = check_weight(&m->w[r], r, 0, err)) < 0)
			return rc;
	for (l = 0; l < hp->n_layer; l++)
		for (r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++)
			if ((rc = check_weight(&m->layers[l].w[r], r, l, err)) < 0)
				return rc;
	return 0;
}

/* ---- the weights ---------------------------------------------------------- */

struct vk_weights {
	const struct model *m;
	int refs;
	int imported; /* chunks are windows of the file's map, not copies */
	int staged;   /* chunks are device-local, filled through staging */
	int coopmat;  /* the prefill takes coopmat.comp (check_coopmat) */
	struct vk_weights *next;
	struct vk_buf *chunks;
	uint32_t n_chunks;
	VkDeviceAddress *addr; /* [ARCH_T_FIRST_LAYER + n_layer * ARCH_T_COUNT] */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vk_weights *reg;
static int import_off; /* vk_test_import(0): always copy */
static size_t stage_forced; /* vk_test_staging(n): staging buffer bytes */

#define STAGE_BYTES (16u << 20) /* the staging buffer: bounded, a few MiB */

/* The staging buffer's size when the weights go through one, else 0
 * (EMBER_VK_STAGING=1 forces it, 0 or unset leaves it to the device;
 * anything else is refused). */
static int staging_bytes(VkDeviceSize *out, char *err)
{
	const char *e = getenv("EMBER_VK_STAGING");

	*out = 0;
	if (e && *e && strcmp(e, "0") != 0 && strcmp(e, "1") != 0)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: EMBER_VK_STAGING=%.32s: 0 or 1", e);
	if (stage_forced)
		*out = stage_forced;
	else if ((e && strcmp(e, "1") == 0) || vk_mem_needs_staging(&vk__ctx.mem))
		*out = STAGE_BYTES;
	return 0;
}

static const struct model_weight *weight_at(const struct model *m, uint32_t slot)
{
	if (slot < ARCH_T_FIRST_LAYER)
		return &m->w[slot];
	slot -= ARCH_T_FIRST_LAYER;
	return &m->layers[slot / ARCH_T_COUNT].w[slot % ARCH_T_COUNT];
}

/* Tied heads: output is token_embd's own data, uploaded once. */
static int is_dup(const struct model *m, uint32_t slot)
{
	return slot == ARCH_T_OUTPUT && m->w[ARCH_T_OUTPUT].data == m->w[ARCH_T_TOKEN_EMBD].data;
}

static uint64_t weight_bytes(const struct model_weight *w)
{
	return dtype_row_size(w->type, w->n_in) * (uint64_t)w->n_out;
}

#define ALIGN 256u

static void weights_free(struct vk_weights *w)
{
	uint32_t i;

	for (i = 0; w->chunks && i < w->n_chunks; i++)
		vk_buf_free(&w->chunks[i]);
	free(w->chunks);
	free(w->addr);
	free(w);
}

static int import_map(struct vk_weights *w, uint64_t limit);

/* Packs the tensors into chunks of at most `limit` bytes and copies them. */
static int upload(struct vk_weights *w, char *err)
{
	const struct model *m = w->m;
	const uint32_t n_slots = ARCH_T_FIRST_LAYER + m->hp.n_layer * ARCH_T_COUNT;
	uint64_t limit = vk__ctx.props.limits.maxStorageBufferRange;
	uint64_t used = 0, *start;
	uint32_t s, c = 0;
	VkDeviceSize stage_n;
	struct vk_stage *st = NULL;
	int rc = 0;

	/* Buffers are reached by address, but keep each under the limits. */
	if (limit < (256u << 20))
		limit = 256u << 20;
	if (limit > (1u << 30))
		limit = 1u << 30;
	w->addr = calloc(n_slots, sizeof(*w->addr));
	start = calloc(n_slots + 1, sizeof(*start));
	w->chunks = calloc(n_slots + 1, sizeof(*w->chunks));
	if (!w->addr || !start || !w->chunks) {
		free(start);
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: weight table");
	}
	if ((rc = staging_bytes(&stage_n, err)) < 0) {
		free(start);
		return rc;
	}
	if (!stage_n && import_map(w, limit) == 0) {
		free(start);
		goto done;
	}
	/* Pass 1: chunk sizes (a tensor larger than the limit gets its own). */
	for (s = 0; s < n_slots; s++) {
		const struct model_weight *x = weight_at(m, s);
		uint64_t b;

		if (!x->data || is_dup(m, s))
			continue;
		b = (weight_bytes(x) + ALIGN - 1) / ALIGN * ALIGN;
		if (used && used + b > limit) {
			start[c++] = used;
			used = 0;
		}
		used += b;
	}
	start[c++] = used;
	w->n_chunks = c;
	for (s = 0; s < c && rc == 0; s++)
		rc = vk_buf_new(&w->chunks[s], start[s], stage_n ? VK_MEM_LOCAL : VK_MEM_UPLOAD, err);
	free(start);
	if (rc == 0 && stage_n)
		rc = vk_stage_new(&st, stage_n, err);
	if (rc < 0)
		return rc;
	/* Pass 2: copy, in the same order. */
	c = 0;
	used = 0;
	for (s = 0; s < n_slots; s++) {
		const struct model_weight *x = weight_at(m, s);
		uint64_t b;

		if (!x->data || is_dup(m, s))
			continue;
		b = (weight_bytes(x) + ALIGN - 1) / ALIGN * ALIGN;
		if (used && used + b > w->chunks[c].size) {
			c++;
			used = 0;
		}
		if (st) {
			if ((rc = vk_stage_write(st, &w->chunks[c], used, x->data, weight_bytes(x),
						 err)) < 0)
				break;
		} else if (!w->chunks[c].map) {
			rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: no host-visible memory for the "
					  "weights");
			break;
		} else {
			memcpy((char *)w->chunks[c].map + used, x->data, weight_bytes(x));
		}
		w->addr[s] = w->chunks[c].addr + used;
		used += b;
	}
	if (st) {
		if (rc == 0)
			rc = vk_stage_flush(st, err);
		w->staged = rc == 0;
		vk_stage_free(st);
	}
	if (rc < 0)
		return rc;
done:
	if (is_dup(m, ARCH_T_OUTPUT))
		w->addr[ARCH_T_OUTPUT] = w->addr[ARCH_T_TOKEN_EMBD];
	return 0;
}

/* The matmul and gemm pipelines of every weight type m has, and
 * token_embd's embed. */
static int ready_shaders(const struct model *m, char *err)
{
	const uint32_t n_slots = ARCH_T_FIRST_LAYER + m->hp.n_layer * ARCH_T_COUNT;
	uint32_t s;
	int rc, sh;

	for (s = 0; s < n_slots; s++) {
		const struct model_weight *x = weight_at(m, s);

		if (x->data && (sh = vk_shader_matmul(x->type)) >= 0 &&
		    ((rc = vk_shader_ready((enum vk_shader)sh, err)) < 0 ||
		     (rc = vk_shader_ready((enum vk_shader)vk_shader_gemm(x->type), err)) < 0))
			return rc;
	}
	sh = vk_shader_embed(m->w[ARCH_T_TOKEN_EMBD].type);
	return sh < 0 ? 0 : vk_shader_ready((enum vk_shader)sh, err);
}

/* ---- the file's map imported in place (VK_EXT_external_memory_host) ------ */

struct span {
	const uint8_t *p;
	uint64_t n;
	uint32_t slot;
};

static int span_cmp(const void *a, const void *b)
{
	const uint8_t *x = ((const struct span *)a)->p, *y = ((const struct span *)b)->p;

	return x < y ? -1 : x > y;
}

/* Windows of the file's map (aligned to what the device imports, each
 * under the chunk limit unless one tensor is larger) over the tensors,
 * imported as device memory: the page cache is then the only copy. 1 when
 * this model or device cannot (no extension, a weight outside a file map,
 * alignment past a page, the driver refusing, e.g. read-only pages):
 * upload() copies then. */
static int import_map(struct vk_weights *w, uint64_t limit)
{
	const struct model *m = w->m;
	const struct gguf *g = m->gguf;
	const uint32_t n_slots = ARCH_T_FIRST_LAYER + m->hp.n_layer * ARCH_T_COUNT;
	const uint64_t A = vk__ctx.host_align, page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct span *sp;
	uint32_t s, n = 0, i, c = 0;
	uintptr_t lo, hi;
	char err[EMBER_ERR_MAX];

	if (import_off || !vk__ctx.host_ptr_props || !A || A > page || page % A || !g ||
	    !g->owns_map || (uintptr_t)g->map % A)
		return 1;
	if (!(sp = calloc(n_slots, sizeof(*sp))))
		return 1;
	for (s = 0; s < n_slots; s++) {
		const struct model_weight *x = weight_at(m, s);

		if (!x->data || is_dup(m, s))
			continue;
		sp[n] = (struct span){x->data, weight_bytes(x), s};
		if (sp[n].p < g->map || sp[n].p + sp[n].n > g->map + g->size)
			goto refuse; /* made in memory at load, not the file's */
		n++;
	}
	qsort(sp, n, sizeof(*sp), span_cmp);
	/* The map covers whole pages, so rounding out to A <= page stays in it. */
	for (i = 0; i < n; c++) {
		uint32_t j = i;

		lo = (uintptr_t)sp[i].p / A * A;
		hi = ((uintptr_t)sp[i].p + sp[i].n + A - 1) / A * A;
		while (j + 1 < n &&
		       ((uintptr_t)sp[j + 1].p + sp[j + 1].n + A - 1) / A * A - lo <= limit) {
			j++;
			if (((uintptr_t)sp[j].p + sp[j].n + A - 1) / A * A > hi)
				hi = ((uintptr_t)sp[j].p + sp[j].n + A - 1) / A * A;
		}
		if (vk_buf_import(&w->chunks[c], (const void *)lo, hi - lo, err) < 0)
			goto refuse;
		for (; i <= j; i++)
			w->addr[sp[i].slot] = w->chunks[c].addr + ((uintptr_t)sp[i].p - lo);
	}
	free(sp);
	w->n_chunks = c;
	w->imported = 1;
	return 0;
refuse:
	for (i = 0; i <= c && i < n_slots + 1; i++)
		vk_buf_free(&w->chunks[i]);
	memset(w->addr, 0, n_slots * sizeof(*w->addr));
	free(sp);
	return 1;
}

void vk_test_import(int on)
{
	import_off = !on;
}

/* EMBER_VK_COOPMAT=1 on a device with cooperative matrices: coopmat.comp
 * checked against gemm.comp on the first tensor of each weight type; any
 * disagreement (or a refused pipeline) keeps the model on gemm.comp, said
 * once on stderr. */
static void check_coopmat(struct vk_weights *w)
{
	const struct model *m = w->m;
	const uint32_t n_slots = ARCH_T_FIRST_LAYER + m->hp.n_layer * ARCH_T_COUNT;
	uint32_t seen[8], n_seen = 0, s, i;
	char err[EMBER_ERR_MAX];

	if (!vk__ctx.coopmat)
		return;
	for (s = 0; s < n_slots; s++) {
		const struct model_weight *x = weight_at(m, s);

		if (!x->data || !w->addr[s] || x->n_out < 2 || s == ARCH_T_TOKEN_EMBD)
			continue;
		for (i = 0; i < n_seen && seen[i] != x->type; i++)
			;
		if (i < n_seen)
			continue;
		if (n_seen == 8 || vk_coopmat_check(x->type, w->addr[s], x->n_in, x->n_out, err) < 0) {
			if (n_seen == 8)
				snprintf(err, sizeof(err), "vulkan: more than 8 weight types");
			fprintf(stderr, "%s: the prefill keeps the tiled GEMM\n", err);
			return;
		}
		seen[n_seen++] = x->type;
	}
	w->coopmat = 1;
}

int vk_weights_coopmat(const struct vk_weights *w)
{
	return w->coopmat;
}

void vk_test_staging(size_t bytes)
{
	stage_forced = bytes;
}

/* How many registered weight sets import the file's map (imported), or
 * else were staged into device-local chunks. */
static int reg_count(int imported)
{
	struct vk_weights *w;
	int n = 0;

	pthread_mutex_lock(&reg_lock);
	for (w = reg; w; w = w->next)
		n += imported ? w->imported : w->staged;
	pthread_mutex_unlock(&reg_lock);
	return n;
}

int vk_test_n_staged(void)
{
	return reg_count(0);
}

int vk_test_n_imported(void)
{
	return reg_count(1);
}

int vk_weights_get(struct vk_weights **out, const struct model *m, char *err)
{
	struct vk_weights *w;
	int rc = 0;

	pthread_mutex_lock(&reg_lock);
	for (w = reg; w && w->m != m; w = w->next)
		;
	if (w) {
		w->refs++;
	} else if (!(w = calloc(1, sizeof(*w)))) {
		rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: weights");
	} else {
		w->m = m;
		w->refs = 1;
		if ((rc = ready_shaders(m, err)) < 0 || (rc = upload(w, err)) < 0) {
			weights_free(w);
			w = NULL;
		} else {
			check_coopmat(w);
			w->next = reg;
			reg = w;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	*out = w;
	return rc;
}

void vk_weights_put(struct vk_weights *w)
{
	struct vk_weights **p;

	if (!w)
		return;
	pthread_mutex_lock(&reg_lock);
	if (--w->refs == 0) {
		for (p = &reg; *p != w; p = &(*p)->next)
			;
		*p = w->next;
		weights_free(w);
	}
	pthread_mutex_unlock(&reg_lock);
}

VkDeviceAddress vk_weights_addr(const struct vk_weights *w, int role, uint32_t layer)
{
	if (role < ARCH_T_FIRST_LAYER)
		return w->addr[role];
	return w->addr[ARCH_T_FIRST_LAYER + layer * ARCH_T_COUNT + (role)];
}
