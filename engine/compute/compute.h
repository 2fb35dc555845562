/*
 * compute.h - the compute-backend contract: what the runtime (engine,
 * scheduler, kv_pool) needs from whatever evaluates the model. Two opaque
 * objects and nothing about where they live:
 *
 *   struct compute_kv    one sequence's cache of past keys and values
 *                        (allocate, copy a prefix, truncate, size);
 *   struct compute_pass  the forward pass with its scratch: one step over
 *                        a batch of sequences, each on its own cache,
 *                        logits into host memory.
 *
 * No header included here names a CPU type (no pthreadpool, no host
 * pointers into caches, no kernel table), so a GPU backend can implement
 * it with device memory. Today's implementation is the CPU one
 * (compute_cpu.c over forward.c and kv_cache.c).
 *
 * Devices (README, Vulkan): the process runs on one device, chosen once at
 * start-up (compute_device_select; device.c). The seam is a device switch:
 * compute_cpu.c's objects are made by the active device and remember it, so
 * a Vulkan cache or pass (compute/vulkan/, vk.h) sits behind the same
 * opaque types and every call below goes to the device that made it.
 *
 * Ownership: each object is owned by its creator and freed with its _free.
 * Threads: one pass and its caches are driven by one thread at a time (a
 * worker); a pass may use compute threads of its own inside a call.
 */
#ifndef EMBER_COMPUTE_H
#define EMBER_COMPUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct compute_kv;
struct compute_pass;

/* Prepares the backend once per process before a model is loaded (the
 * CPU's: picks the kernels for this CPU). Idempotent, any thread. */
void compute_init(void);

/* 0 if this backend has kernels for every weight matrix of `m`, else
 * EMBER_EUNSUPPORTED naming the first tensor without ("tensor blk.0.ffn_up
 * .weight: no kernels for type q8_k"). The model layer reads any type the
 * format knows; which ones run is the backend's business, asked here when
 * a pass is made. */
int compute_check_model(const struct model *m, char *err);

/* Lays the weights of `m` out for this backend once, after loading and
 * before any pass is made (the CPU's: packs the rows of the K-quant
 * matrices its level reads faster so, in the model's private copy of the
 * file, setting model_weight.packed; kernels/LEVELS.md "Packed rows").
 * A no-op on Vulkan, under EMBER_PACK=0, or when the weights are a file
 * mapping; says on stderr what it packed. Results stay bit-identical.
 * Returns 0, or a code with one line in err (the model is then unusable). */
int compute_prepare_model(struct model *m, char *err);

/* ---- devices ------------------------------------------------------------------ */

/* Chooses the device for the process: "cpu", "vulkan" (the first usable)
 * or "vulkan:N"; NULL or "": EMBER_DEVICE, else "cpu". Call before any
 * cache or pass is made. A Vulkan build that finds no usable device says
 * so on stderr and uses the CPU (returns 0). Returns EMBER_EINVAL (bad
 * name), EMBER_EUNSUPPORTED (vulkan in a build without it); detail in err.
 * Without a call, the first use selects from EMBER_DEVICE. */
int compute_device_select(const char *spec, char *err);

/* 1 when the process runs on a Vulkan device, 0 on the CPU. */
int compute_device_vulkan(void);

/* "cpu" or "vulkan (<device name>)" into buf. Returns buf. */
const char *compute_device_name(char *buf, size_t cap);

/* One line per Vulkan device with its features, or why there are none. */
char *compute_devices_describe(char *buf, size_t cap);

/* ---- KV caches --------------------------------------------------------------- */

/* Bytes one cache of n_ctx positions of `m` with elements of `type`
 * (DTYPE_F16 or DTYPE_F32) takes: what budgets are computed from. */
size_t compute_kv_bytes(const struct model *m, uint32_t n_ctx, uint32_t type);

/* Bytes of a cache whose sliding-window layers keep only a ring of their
 * window plus steps of at most max_step tokens (compute_kv_new with that
 * max_step); 0 when the model has no sliding-window layer. */
size_t compute_kv_ring_bytes(const struct model *m, uint32_t n_ctx, uint32_t type,
			     uint32_t max_step);

/* A cache for n_ctx positions, empty; ring_step > 0: sliding-window layers
 * keep rings for steps of at most ring_step tokens. Returns 0, EMBER_EINVAL
 * (n_ctx 0, a type not F16/F32), EMBER_ENOMEM; detail in err. */
int compute_kv_new(struct compute_kv **out, const struct model *m, uint32_t n_ctx,
		   uint32_t type, uint32_t ring_step, char *err);

/* Whether a query at position n_pos still finds every key it sees (false
 * when a ring has overwritten keys of its window: rewound too far). */
bool compute_kv_holds(const struct compute_kv *kv, uint32_t n_pos);

/* NULL-safe. */
void compute_kv_free(struct compute_kv *kv);

/* Positions filled (0 .. n_pos-1). */
uint32_t compute_kv_n_pos(const struct compute_kv *kv);

/* Forgets positions >= n_pos (no-op when it holds fewer). */
void compute_kv_truncate(struct compute_kv *kv, uint32_t n_pos);

/* Makes dst hold src's first n positions (dst's own are dropped). Both
 * from the same model, type and n_ctx. Returns 0 or EMBER_EINVAL. */
int compute_kv_copy_prefix(struct compute_kv *dst, const struct compute_kv *src, uint32_t n);

/* ---- the forward pass ---------------------------------------------------------- */

struct compute_opts {
	uint32_t max_batch;  /* tokens one step may hold */
	uint32_t n_threads;  /* compute threads the pass may use; 0/1: the caller's only */
};

enum compute_logits {
	COMPUTE_LOGITS_NONE, /* this sequence produces no logits */
	COMPUTE_LOGITS_LAST, /* [n_vocab] for its last token */
	COMPUTE_LOGITS_ALL,  /* [n_tok][n_vocab] */
	/* [n_tok][n_embd]: the final hidden states (after the output norm,
	 * before the head), for embeddings. A step that asks for them asks
	 * for no logits (mixing is EMBER_EINVAL). */
	COMPUTE_HIDDEN_ALL,
};

/* One sequence's part of a step: n_tok tokens at positions n_pos ..
 * n_pos+n_tok-1 of its cache. */
struct compute_seq {
	struct compute_kv *kv;
	const int32_t *tokens;
	uint32_t n_tok;
	enum compute_logits logits;
	/* true: every row on the exact path, as sampled rows are (the CPU
	 * pass's forward_seq.exact: a short prompt's chunk, by the
	 * scheduler's rule); false: prompt rows may take faster numbers */
	bool exact;
};

/* A pass over `m` (which must outlive it). Returns 0, EMBER_EUNSUPPORTED
 * (a weight type this backend cannot run), EMBER_ENOMEM; detail in err. */
int compute_pass_new(struct compute_pass **out, const struct model *m,
		     const struct compute_opts *o, char *err);

/* NULL-safe. */
void compute_pass_free(struct compute_pass *p);

uint32_t compute_pass_max_batch(const struct compute_pass *p);

/*
 * One step over seqs[0..n_seq) (sum of n_tok <= max_batch, distinct
 * caches with room): appends each sequence's keys and values and advances
 * its n_pos; logits rows in sequence order into `logits` (host memory, may
 * be NULL when none is asked for), or hidden-state rows of n_embd floats
 * for COMPUTE_HIDDEN_ALL sequences. Returns 0, EMBER_EINVAL, EMBER_ERANGE
 * (a token outside the vocabulary), EMBER_ECONTEXT (a cache would
 * overflow), with detail in err; on error no cache changes.
 */
int compute_pass_run(struct compute_pass *p, const struct compute_seq *seqs, uint32_t n_seq,
		     float *logits, char *err);

#endif
