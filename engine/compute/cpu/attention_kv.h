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

/* Positions j0 .. j0+n-1 of a cache head block of layer il as floats: in
 * place for F32 rows that do not wrap, else converted or copied into `buf`
 * (n * d floats): a ring layer (kv_cache.h) may wrap inside a block. */
const float *attn_kv_rows(const struct kv_cache *kv, uint32_t il, const void *head, uint32_t j0,
			  uint32_t n, uint32_t d, float *buf);

/* Positions j0 .. j0+n-1 of an F16 cache head block in place, or NULL
 * when the rows are not F16 or wrap around a ring layer. */
const uint16_t *attn_kv_rows_f16(const struct kv_cache *kv, uint32_t il, const void *head,
				 uint32_t j0, uint32_t n, uint32_t d);

/* Asks for positions j0 .. j0+n-1 of a cache head block (up to a ring
 * layer's wrap) ahead of their reads. */
void attn_kv_prefetch(const struct kv_cache *kv, uint32_t il, const void *head, uint32_t j0,
		      uint32_t n, uint32_t d);

/* pf's range k: positions j0 .. j0+n-1 of a cache head block (up to a
 * ring layer's wrap, as attn_kv_prefetch()). */
void attn_pf_set(struct attn_pf *pf, int k, const struct kv_cache *kv, uint32_t il,
		 const void *head, uint32_t j0, uint32_t n, uint32_t d);

/* The next `lines` lines of pf (NULL: none), K's first. */
void attn_pf_step(struct attn_pf *pf, size_t lines);

/* Whether pf (or NULL) has lines left to ask for. */
static inline int attn_pf_pending(const struct attn_pf *pf)
{
	return pf && (pf->left[0] || pf->left[1]);
}

#endif
