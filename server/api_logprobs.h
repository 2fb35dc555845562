/*
 * api_logprobs.h - the `logprobs` of a response in the shape each API
 * gives it, from the engine's per-token records (engine.h struct
 * engine_logprobs: the distribution actually sampled from, after the
 * grammar mask, the penalties and the temperature, before top_k / top_p /
 * min_p; greedy counts as temperature 1).
 *
 *   API_FMT_CHAT, OpenAI chat:   {"content":[{"token":T,"logprob":L,
 *       "bytes":[...],"top_logprobs":[{"token","logprob","bytes"},...]},
 *       ...],"refusal":null}
 *   API_FMT_COMPLETION, OpenAI legacy: {"tokens":[T,...],
 *       "token_logprobs":[L,...],"top_logprobs":[{T:L,...},...],
 *       "text_offset":[byte offset of each token in the choice's text]}
 *   API_FMT_LLAMACPP, llama-server's completion_probabilities:
 *       [{"id":I,"token":T,"bytes":[...],"logprob":L,
 *         "top_logprobs":[{"id","token","bytes","logprob"},...]},...]
 *
 * A token whose bytes are not whole UTF-8 (a byte token) is written as
 * "bytes:\xNN..." in `token`, as OpenAI does; `bytes` are always exact.
 * An impossible token (-inf) reads -9999.0, OpenAI's floor.
 *
 * Threads: the loop thread (token pieces come from the backend's
 * tokenizer, which any thread may read).
 */
#ifndef EMBER_API_LOGPROBS_H
#define EMBER_API_LOGPROBS_H

#include <stddef.h>

#include "api_response.h"
#include "backend.h"
#include "jsonw.h"

/* Writes (after jsonw_reset) the logprobs of lp[0..n) in format `fmt`.
 * *text_offset (completions) is the byte offset of lp[0] in the choice's
 * text, advanced past the tokens written. */
void api_logprobs_write(struct jsonw *w, enum api_format fmt, struct backend *b,
			const struct engine_logprobs *lp, size_t n,
			size_t *text_offset);

#endif
