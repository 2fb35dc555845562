/*
 * forward.h - the transformer forward pass: token ids in, logits out, keys
 * and values kept in per-sequence caches for the next call.
 *
 * Two levels:
 *   struct forward_pass  the compute part a worker owns: every scratch
 *                        buffer, sized once for at most `max_batch` rows,
 *                        and the thread pool. forward_pass_run() evaluates
 *                        one step over several sequences at once: their
 *                        tokens become rows of one batch, so each weight
 *                        matrix is read once for all of them; attention
 *                        runs per sequence against its own kv_cache.
 *   struct forward_ctx   a single session: a pass plus one cache of its
 *                        own. forward_eval() processes any number of
 *                        tokens in steps of max_batch (prefill); one token
 *                        per call is decode.
 * Both go through the same code, so a prompt in one call, in chunks, token
 * by token, or batched with other sequences gives the same logits up to the
 * rounding of the matrix kernels' GEMM and GEMV paths. Evaluating
 * allocates nothing.
 *
 * Threads: compute is spread over a thread pool (threadpool.h): the caller's (borrowed),
 * or one the pass creates and owns when n_threads > 1. A pass (and a
 * session) is used by one thread at a time; passes sharing a pool take
 * turns (the pool serialises parallel calls). Results do not depend on the
 * number of threads: every output element is computed by one thread in a
 * fixed order. The model is read-only and shared by any number of passes.
 */
#ifndef EMBER_FORWARD_H
#define EMBER_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_cache.h"
#include "model.h"
#include "threadpool.h"

struct forward_opts {
	uint32_t n_ctx;       /* KV capacity in positions; 0: the model's context_length */
	uint32_t max_batch;   /* tokens per step (prefill chunk); 0: FORWARD_DEFAULT_BATCH */
	tpool_t pool;   /* borrowed compute threads, or NULL */
	uint32_t n_threads;   /* without `pool`: > 1 creates an owned pool of that many */
	uint32_t kv_type;     /* forward_new's cache: DTYPE_F32 (0, default) or DTYPE_F16 */
};

#define FORWARD_DEFAULT_BATCH 64

struct forward_pass;
struct forward_ctx;

enum forward_logits {
	FORWARD_LOGITS_NONE, /* this sequence's rows produce no logits */
	FORWARD_LOGITS_LAST, /* [n_vocab] for its last token */
	FORWARD_LOGITS_ALL,  /* [n_tok][n_vocab], one row per token */
	FORWARD_HIDDEN_ALL,  /* [n_tok][n_embd] after the output norm (no head);
			      * not in the same step as logits */
};

/* One sequence's part of a step: n_tok tokens evaluated at positions
 * kv->n_pos .. kv->n_pos+n_tok-1 of its cache. */
struct forward_seq {
	struct kv_cache *kv;      /* the sequence's cache (borrowed) */
	const int32_t *tokens;    /* [n_tok] */
	uint32_t n_tok;           /* >= 1 */
	enum forward_logits logits;
	/* true: all its rows exact (plan(): the rows of a short prompt,
	 * which the bf16 tiles would cost more than they save); false: only
	 * the rows whose logits are read */
	bool exact;
};

/* Creates the compute part for `m` (which must outlive it): scratch for
 * o->max_batch rows (0: FORWARD_DEFAULT_BATCH), the pool as in o (n_ctx and
 * kv_type are ignored). Returns 0, EMBER_EUNSUPPORTED, EMBER_ENOMEM. */
int forward_pass_new(struct forward_pass **out, const struct model *m,
		     const struct forward_opts *o, char *err);

/* Frees the scratch and an owned pool. NULL-safe. */
void forward_pass_free(struct forward_pass *p);

/* Rows one step may hold. */
uint32_t forward_pass_max_batch(const struct forward_pass *p);

/*
 * One step over seqs[0..n_seq): the sum of their n_tok must be at most
 * max_batch, each cache distinct and with room. Appends each sequence's
 * keys and values to its cache and advances its n_pos. Logits go to
 * `logits` (may be NULL when no sequence asks) as consecutive rows in
 * sequence order: n_tok rows for FORWARD_LOGITS_ALL, one for _LAST.
 * Returns 0; EMBER_EINVAL (no sequences, an empty one, a shared cache, too
 * many rows), EMBER_ERANGE (a token id outside the vocabulary),
 * EMBER_ECONTEXT (a cache would overflow), message in err; on error no
 * cache is changed.
 */
int forward_pass_run(struct forward_pass *p, const struct forward_seq *seqs, uint32_t n_seq,
		     float *logits, char *err);

/* Creates a session on `m` (which must outlive it): a pass of its own
 * (max_batch capped at n_ctx) and a cache of n_ctx positions of kv_type.
 * `o` NULL: defaults. Returns 0, EMBER_EINVAL or EMBER_ENOMEM (message in
 * err). */
int forward_new(struct forward_ctx **out, const struct model *m, const struct forward_opts *o,
		char *err);

/* Frees the session, its cache, pass and owned pool. NULL-safe. */
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
