/*
 * kv_pool.h - one worker's KV caches: a fixed budget of caches of n_ctx
 * positions each, allocated on first need, kept after their sequence ends
 * (with the tokens they hold) for prefix reuse, and evicted least recently
 * used first when a new sequence needs room.
 *
 * An entry is busy while a sequence runs on it, idle otherwise. An idle
 * entry is either anonymous or pinned by a session (`owner` points at the
 * session's reference to it, which eviction clears). Anonymous entries are
 * evicted before pinned ones.
 *
 * Caches are compute.h's opaque ones: the pool never sees where they live.
 *
 * Ownership: the pool owns its entries and their caches. Threads: the
 * bookkeeping (busy, owner, last_used, acquire/release) is guarded by the
 * engine's lock, held by the caller; an entry's cache contents and tokens
 * are only written by the pool's worker, which may copy between entries
 * without the lock since no other thread writes them.
 */
#ifndef EMBER_KV_POOL_H
#define EMBER_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute.h"
#include "model.h"

struct kv_entry {
	struct compute_kv *kv;     /* compute_kv_n_pos(kv) positions filled (owned) */
	int32_t *tokens;           /* [n_ctx] the tokens behind those positions */
	struct kv_entry **owner;   /* the pinning session's pointer to this entry, or NULL */
	uint64_t last_used;        /* pool tick of the last release */
	bool busy;
	bool allocated;
};

struct kv_pool {
	const struct model *m;     /* borrowed */
	uint32_t n_ctx;
	uint32_t type;             /* DTYPE_F16 or DTYPE_F32 */
	struct kv_entry *e;        /* [n_max] */
	uint32_t n_max;
	uint32_t n_alloc;
	size_t entry_bytes;        /* cache memory of one entry */
	size_t budget;             /* bytes the entries may take */
	uint32_t ring_step;        /* > 0: sliding-window layers keep rings for steps this long */
	uint64_t tick;
};

/* What kv_pool_acquire chose: run on `entry`, whose first `n_reuse`
 * positions already hold the sequence's first tokens once the caller has
 * copied them from `copy_from` (NULL: nothing to copy). */
struct kv_claim {
	struct kv_entry *entry;
	struct kv_entry *copy_from;
	uint32_t n_reuse;
};

/* Makes the pool's caches keep only the window of sliding-window layers
 * (kv_cache_init_ring, steps of at most max_step tokens), so more entries
 * fit the budget; a prefix the ring no longer holds is not reused. Call
 * before the first acquire. 0 or EMBER_ENOMEM. */
int kv_pool_set_ring(struct kv_pool *p, uint32_t max_step, char *err);

/* Prepares a pool of floor(budget / entry size) entries (none allocated
 * yet). Returns 0, EMBER_EINVAL when not even one fits (detail in err),
 * EMBER_ENOMEM. */
int kv_pool_init(struct kv_pool *p, const struct model *m, uint32_t n_ctx, uint32_t type,
		 size_t budget, char *err);

/* Frees every cache. NULL-safe, safe on a zeroed struct. */
void kv_pool_free(struct kv_pool *p);

/*
 * Finds a cache for a sequence of tokens[0..n) (n >= 1): the idle entry
 * holding the longest prefix of them (at most n - 1, so at least one token
 * is evaluated), taken over when anonymous or copied from when pinned;
 * otherwise a fresh one (allocated within the budget, or evicted LRU,
 * anonymous first). The entry returned is busy and unpinned, with n_pos
 * = n_reuse unless a copy is pending. Returns 0, EMBER_EBUSY when every
 * entry is busy, EMBER_ENOMEM.
 */
int kv_pool_acquire(struct kv_pool *p, const int32_t *tokens, uint32_t n, struct kv_claim *c,
		    char *err);

/* Runs a session's own resident (idle) entry as it is: busy, unpinned. */
void kv_pool_take(struct kv_entry *en);

/* Copies the claim's reused prefix from copy_from (worker, lock not needed). */
void kv_pool_copy(struct kv_claim *c);

/* Marks `en` idle; `owner` (may be NULL) pins it for a session. */
void kv_pool_release(struct kv_pool *p, struct kv_entry *en, struct kv_entry **owner);

/* Bytes allocated; idle entries. */
size_t kv_pool_bytes(const struct kv_pool *p);
uint32_t kv_pool_n_idle(const struct kv_pool *p);

#endif
