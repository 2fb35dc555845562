/*
 * forward.h - a session that runs the transformer forward pass: token ids
 * in, logits out, keys and values kept for the next call.
 *
 * One struct forward_ctx per sequence. It borrows the model (read-only,
 * shared by any number of sessions) and owns its KV cache and every
 * scratch buffer, all allocated once by forward_new() for at most
 * `max_batch` tokens per step: evaluating allocates nothing. A prompt
 * longer than max_batch is processed in chunks of max_batch (prefill);
 * one token per call is decode. Both go through the same code, so a
 * prompt in one call, in chunks, or token by token gives the same logits
 * up to the rounding of the matrix kernels' GEMM and GEMV paths.
 *
 * Threads: compute is spread over a pthreadpool: the caller's (borrowed),
 * or one the session creates and owns when n_threads > 1. A session is
 * used by one thread at a time; sessions sharing a pool take turns (the
 * pool serialises parallel calls). Results do not depend on the number of
 * threads: every output element is computed by one thread in a fixed order.
 */
#ifndef EMBER_FORWARD_H
#define EMBER_FORWARD_H

#include <pthreadpool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_cache.h"
#include "model.h"

struct forward_opts {
	uint32_t n_ctx;       /* KV capacity in positions; 0: the model's context_length */
	uint32_t max_batch;   /* tokens per step (prefill chunk); 0: FORWARD_DEFAULT_BATCH */
	pthreadpool_t pool;   /* borrowed compute threads, or NULL */
	uint32_t n_threads;   /* without `pool`: > 1 creates an owned pool of that many */
};

#define FORWARD_DEFAULT_BATCH 64

struct forward_ctx;

/* Creates a session on `m` (which must outlive it). `o` NULL: defaults.
 * Returns 0, EMBER_EINVAL or EMBER_ENOMEM (message in err). */
int forward_new(struct forward_ctx **out, const struct model *m, const struct forward_opts *o,
		char *err);

/* Frees the session, its cache, scratch and owned pool. NULL-safe. */
void forward_free(struct forward_ctx *f);

/*
 * Runs tokens[0..n_tok) at positions n_pos .. n_pos+n_tok-1 and appends
 * them to the cache. Logits, when `logits` is not NULL:
 *   all_positions: [n_tok][n_vocab], row t for the token at tokens[t];
 *   otherwise:     [n_vocab] for the last token only (the cheap case).
 * Returns 0; EMBER_ERANGE for a token id outside the vocabulary,
 * EMBER_ECONTEXT when the cache would overflow, EMBER_EINVAL for n_tok == 0
 * (message in err); on error the session is unchanged.
 */
int forward_eval(struct forward_ctx *f, const int32_t *tokens, size_t n_tok, float *logits,
		 int all_positions, char *err);

/* Positions in the cache (tokens evaluated so far). */
uint32_t forward_n_pos(const struct forward_ctx *f);

/* Capacity of the cache in positions. */
uint32_t forward_n_ctx(const struct forward_ctx *f);

/* Forgets positions >= n_pos, so the next eval continues from there. */
void forward_rewind(struct forward_ctx *f, uint32_t n_pos);

/* The session's cache (clone, inspection). Owned by the session. */
struct kv_cache *forward_kv(struct forward_ctx *f);

/* The model the session runs. */
const struct model *forward_model(const struct forward_ctx *f);

#endif
