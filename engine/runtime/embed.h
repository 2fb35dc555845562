/*
 * embed.h - the worker's side of embedding jobs (engine.h on_embed);
 * engine_pooling() and engine_pooling_name() are engine.h's. Not a public
 * header.
 *
 * Threads: embed_run runs on the worker that owns `w`, without the lock.
 */
#ifndef EMBER_EMBED_H
#define EMBER_EMBED_H

#include "engine_impl.h"

/* Evaluates tokens[0..n_tok) on a temporary cache with w's pass and
 * writes the pooled, L2-normalized final hidden state into out[n_embd].
 * Returns 0, EMBER_EINVAL (no tokens), EMBER_EUNSUPPORTED (the model's
 * pooling), EMBER_ENOMEM, or the pass's error, with detail in err. */
int embed_run(struct worker *w, const int32_t *tokens, uint32_t n_tok, float *out, char *err);

#endif
