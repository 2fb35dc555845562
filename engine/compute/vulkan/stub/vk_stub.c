/*
 * vk_stub.c - vk.h for a build without Vulkan (make without VULKAN=1):
 * nothing opens, so no Vulkan object is ever made and the calls on them
 * are unreachable.
 */
#include <stdio.h>

#include "ember.h"
#include "vk.h"

int vk_built(void)
{
	return 0;
}

int vk_open(int index, char *err)
{
	(void)index;
	return ember_seterr(err, EMBER_EUNSUPPORTED, "vulkan: not built in (make VULKAN=1)");
}

const char *vk_device_name(void)
{
	return NULL;
}

char *vk_describe(char *buf, size_t cap)
{
	snprintf(buf, cap, "vulkan: not built in (make VULKAN=1)\n");
	return buf;
}

int vk_check_model(const struct model *m, char *err)
{
	(void)m;
	return vk_open(-1, err);
}

int vk_kv_new(struct vk_kv **out, const struct model *m, uint32_t n_ctx, uint32_t type,
	      uint32_t ring_step, char *err)
{
	(void)m, (void)n_ctx, (void)type, (void)ring_step;
	*out = NULL;
	return vk_open(-1, err);
}

void vk_kv_free(struct vk_kv *kv)
{
	(void)kv;
}

uint32_t vk_kv_n_pos(const struct vk_kv *kv)
{
	(void)kv;
	return 0;
}

int vk_kv_holds(const struct vk_kv *kv, uint32_t n_pos)
{
	(void)kv, (void)n_pos;
	return 1;
}

void vk_kv_truncate(struct vk_kv *kv, uint32_t n_pos)
{
	(void)kv, (void)n_pos;
}

int vk_kv_copy_prefix(struct vk_kv *dst, const struct vk_kv *src, uint32_t n, char *err)
{
	(void)dst, (void)src, (void)n;
	return vk_open(-1, err);
}

int vk_pass_new(struct vk_pass **out, const struct model *m, uint32_t max_batch, char *err)
{
	(void)m, (void)max_batch;
	*out = NULL;
	return vk_open(-1, err);
}

void vk_pass_free(struct vk_pass *p)
{
	(void)p;
}

int vk_pass_run(struct vk_pass *p, const struct compute_seq *seqs, struct vk_kv *const *kvs,
		uint32_t n_seq, float *logits, char *err)
{
	(void)p, (void)seqs, (void)kvs, (void)n_seq, (void)logits;
	return vk_open(-1, err);
}

int vk_test_dispatch(const char *name, void *pc, size_t pc_bytes, void *const *bufs,
		     const size_t *bytes, const size_t *addr_at, uint32_t n_bufs, uint32_t gx,
		     uint32_t gy, uint32_t gz, char *err)
{
	(void)name, (void)pc, (void)pc_bytes, (void)bufs, (void)bytes, (void)addr_at;
	(void)n_bufs, (void)gx, (void)gy, (void)gz;
	return vk_open(-1, err);
}

void vk_test_import(int on)
{
	(void)on;
}

int vk_test_n_imported(void)
{
	return 0;
}

void vk_test_staging(size_t bytes)
{
	(void)bytes;
}

int vk_test_n_staged(void)
{
	return 0;
}
