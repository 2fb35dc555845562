/*
 * vk.h - the Vulkan device behind compute.h (README, Vulkan): what the
 * compute seam (compute_cpu.c's device switch) calls when the process runs
 * on a Vulkan device. Built with `make VULKAN=1`; otherwise stub/vk_stub.c
 * answers every call with "not built with Vulkan".
 *
 *   vk_open            loads libvulkan (dlopen: the binary runs without
 *                      it) and opens device N once per process
 *   vk_check_model     refuses, by name, any architecture feature or
 *                      weight type the shaders do not implement
 *   struct vk_kv       one sequence's K/V cache in device memory
 *   struct vk_pass     a worker's forward pass: device scratch, a command
 *                      buffer, host-visible inputs and logits; weights are
 *                      uploaded once per model and shared by every pass
 *
 * Ownership: objects are the caller's, freed with their _free. Threads: the
 * device is shared; a pass and its caches are driven by one thread at a
 * time (the queue is locked around each submission).
 */
#ifndef EMBER_VK_H
#define EMBER_VK_H

#include <stddef.h>
#include <stdint.h>

#include "compute.h"
#include "model.h"

struct vk_kv;
struct vk_pass;

/* 1 when this binary has the Vulkan backend (make VULKAN=1). */
int vk_built(void);

/* Opens Vulkan device `index` (-1: the first) unless one is open. Returns
 * 0, or EMBER_EUNSUPPORTED with the reason (no libvulkan, no device, a
 * missing feature, not built with Vulkan). */
int vk_open(int index, char *err);

/* The open device's name ("llvmpipe (LLVM 15.0.6, 256 bits)"), or NULL. */
const char *vk_device_name(void);

/* One line per Vulkan device (index, name, type, API version, memory,
 * whether it qualifies) into buf; "vulkan: ..." why none when none.
 * Opens nothing that stays open. Returns buf. */
char *vk_describe(char *buf, size_t cap);

int vk_check_model(const struct model *m, char *err);

/* ring_step > 0: sliding-window layers keep rings (compute_kv_new). */
int vk_kv_new(struct vk_kv **out, const struct model *m, uint32_t n_ctx, uint32_t type,
	      uint32_t ring_step, char *err);
void vk_kv_free(struct vk_kv *kv);
uint32_t vk_kv_n_pos(const struct vk_kv *kv);
int vk_kv_holds(const struct vk_kv *kv, uint32_t n_pos);
void vk_kv_truncate(struct vk_kv *kv, uint32_t n_pos);
int vk_kv_copy_prefix(struct vk_kv *dst, const struct vk_kv *src, uint32_t n, char *err);

int vk_pass_new(struct vk_pass **out, const struct model *m, uint32_t max_batch, char *err);
void vk_pass_free(struct vk_pass *p);

/* compute_pass_run() on the device: kvs[i] is seqs[i]'s cache. */
int vk_pass_run(struct vk_pass *p, const struct compute_seq *seqs, struct vk_kv *const *kvs,
		uint32_t n_seq, float *logits, char *err);

/* Test hook (tests/test_vulkan.c checks each shader against the CPU):
 * runs shader `name` once on the open device. Each host buffer bufs[i]
 * (bytes[i]) is copied into a device buffer whose address is written at
 * byte addr_at[i] of the push constants `pc`; groups gx, gy, gz; then the
 * buffers are copied back. Returns 0, EMBER_EINVAL (unknown shader),
 * EMBER_EUNSUPPORTED (no device), EMBER_ENOMEM. */
int vk_test_dispatch(const char *name, void *pc, size_t pc_bytes, void *const *bufs,
		     const size_t *bytes, const size_t *addr_at, uint32_t n_bufs, uint32_t gx,
		     uint32_t gy, uint32_t gz, char *err);

/* Test hooks: vk_test_import(0) makes weights uploaded from now on be
 * copied even where the file's map could be imported (1: import again);
 * vk_test_n_imported() counts the weight sets now held as imported maps. */
void vk_test_import(int on);
int vk_test_n_imported(void);

/* Test hooks: vk_test_staging(n > 0) makes weights uploaded from now on go
 * through a staging buffer of n bytes into device-local memory, as on a
 * device whose device-local memory is not host-visible (0: only where the
 * device needs it, or EMBER_VK_STAGING=1 asks); vk_test_n_staged() counts
 * the weight sets now held that were staged. */
void vk_test_staging(size_t bytes);
int vk_test_n_staged(void);

#endif
