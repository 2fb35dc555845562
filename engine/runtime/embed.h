/*
 * embed.h - the worker's side of embedding jobs (engine.h on_embed);
 * engine_pooling() and engine_pooling_name() are engine.h's. Not a public
 * header.
 *
 * Threads: the worker that owns `w`, without the lock.
 */
#ifndef EMBER_EMBED_H
#define EMBER_EMBED_H

#include "engine_impl.h"

/* Sets up slot `s` (its tokens in place, n_tok > 0) for an embedding:
 * a temporary cache of n_tok positions and the pooling sums. Returns 0,
 * EMBER_EINVAL, EMBER_EUNSUPPORTED (the model's pooling), EMBER_ENOMEM,
 * with detail in err; embed_end frees what was made in any case. */
int embed_begin(struct worker *w, struct seq *s, char *err);

/* Evaluates the next chunk of at most max_tok tokens (the share of the
 * step's budget the scheduler gave it; 0: nothing); *finished when the
 * last one is in, the pooled, L2-normalized vector then at
 * embed_result(s) [n_embd]. Returns 0 or the pass's error. */
int embed_step(struct worker *w, struct seq *s, uint32_t max_tok, bool *finished, char *err);
/* The tokens embed_step would evaluate next with no budget limit. */
uint32_t embed_next_chunk(const struct seq *s);
const float *embed_result(const struct seq *s);

/* Frees the slot's embedding state (NULL-safe: no-op without one). */
void embed_end(struct seq *s);

#endif
