/*
 * ollama_gen.h - one /api/generate or /api/chat generation in Ollama's
 * shapes: the gen_request goes to the backend as generation.c sends
 * OpenAI ones, and the text comes back through a gen_stream (stream.h).
 *
 * Streamed (Ollama's default): application/x-ndjson, one object per line,
 *   {"model","created_at","response":"text","done":false}       (generate)
 *   {"model","created_at","message":{"role":"assistant","content":"text"},
 *    "done":false}                                                (chat)
 * and a last one with empty text, "done":true, "done_reason" ("stop" or
 * "length") and total_duration, load_duration (0: the model stays
 * loaded), prompt_eval_count, prompt_eval_duration, eval_count,
 * eval_duration (nanoseconds). Not streamed: that last object with the
 * whole text. An error before any text is its HTTP status with
 * {"error": "..."}; after text, an {"error": "..."} line ends the stream.
 * `context` (Ollama's token list for continuing) is not returned.
 *
 * Threads: the loop thread only.
 */
#ifndef EMBER_OLLAMA_GEN_H
#define EMBER_OLLAMA_GEN_H

#include <stdbool.h>
#include <uv.h>

#include "backend.h"
#include "gen_request.h"
#include "http.h"

/* Submits `gr` (taken over: freed here whatever happens) for `req`;
 * answers as /api/chat when `chat`, else as /api/generate. */
void ollama_gen_start(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      struct gen_request *gr, bool chat);

/* Answers a request with nothing to generate (no prompt, no messages):
 * Ollama's "the model is loaded" reply, done_reason "load". */
void ollama_gen_respond_loaded(struct http_req *req, const struct gen_request *gr, bool chat);

#endif
