/*
 * attention_kv.h - a cache head block's rows as attention.c reads them
 * (in place, converted or copied for a ring layer's wrap) and asks for
 * them ahead of the reads. Internal to engine/compute/cpu.
 */
#ifndef EMBER_ATTENTION_KV_H
#define EMBER_ATTENTION_KV_H

#include <stddef.h>
#include <stdint.h>

#include "kv_cache.h"

/*
 * The cache rows of a decode task's successor (attend_region_cb), asked
 * for a few lines at a time between the task's own kernel calls rather
 * than all at its start: a burst of ~400 prefetches (8 TinyLlama
 * sequences at 100 positions: two blocks of K and V) stalls the core
 * once the L1's miss buffers (~24 on Zen 4) are taken, until most of
 * them are in, so the rows' fetch did not overlap the task's arithmetic
 * (the step's attention cold ~2.2 ms, run again on rows in cache ~1.25).
 * Up to ATTN_PF_LINES at each point keeps the core issuing arithmetic
 * (LEVELS.md, rest21).
 */
#define ATTN_PF_LINES 16
/* Keys of a decode score call between two such points. */
#define ATTN_PF_KEYS 16

struct attn_pf {
	const char *p[2]; /* K, V */
	size_t left[2];	  /* bytes */
};

/* Positions j0 .. j0+n-1 (n at most a chunk, kv_cache.h) of kv head g of
 * layer il, its values if v, else its keys, as floats: in place for F32
 * rows that lie together, else converted or copied into `buf` (n *
 * head_dim floats): a block may cross a chunk's end after a window's
 * start, or a ring layer's wrap. */
const float *attn_kv_rows(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t j0,
			  uint32_t n, float *buf);

/* The same rows as F16 in place, or NULL when they are not F16 or do not
 * lie together (the caller converts them: the kernels give the same
 * bits either way, kernels.h kern_attn_scores_f16()). */
const uint16_t *attn_kv_rows_f16(const struct kv_cache *kv, uint32_t il, uint32_t g, int v,
				 uint32_t j0, uint32_t n);

/* Asks for the same rows (up to a chunk's end or a ring layer's wrap)
 * ahead of their reads. */
void attn_kv_prefetch(const struct kv_cache *kv, uint32_t il, uint32_t g, int v, uint32_t j0,
		      uint32_t n);

/* pf's range k: the same rows (as attn_kv_prefetch()). */
void attn_pf_set(struct attn_pf *pf, int k, const struct kv_cache *kv, uint32_t il, uint32_t g,
		 int v, uint32_t j0, uint32_t n);

/* The next `lines` lines of pf (NULL: none), K's first. */
void attn_pf_step(struct attn_pf *pf, size_t lines);

/* Whether pf (or NULL) has lines left to ask for. */
static inline int attn_pf_pending(const struct attn_pf *pf)
{
	return pf && (pf->left[0] || pf->left[1]);
}

#endif
