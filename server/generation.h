/*
 * generation.h - one generation over HTTP: a validated gen_request goes to
 * the backend, the text comes back through a gen_stream (stream.h), and
 * this module answers the request with one JSON body or a Server-Sent
 * Events stream in the shapes of api_response.h.
 *
 * Streaming status: the HTTP status line goes out with the first event, not
 * at submit. The prompt is rendered and tokenized on a worker, so an error
 * found there before any text (a prompt longer than the context) still
 * gets its own status and an OpenAI error body (400 context_length_exceeded
 * with the numbers). An error after text has gone out becomes an
 * {"error":{...}} event followed by [DONE].
 *
 * Cancellation: when the exchange ends before the generation does (the
 * client disconnected, the server closes), the request is cancelled in
 * the backend, whose worker stops at its next step and frees the slot.
 * The generation's memory (including the gen_request the worker borrows)
 * lives until the worker's done_cb has arrived on the loop.
 *
 * Threads: the loop thread only.
 */
#ifndef EMBER_GENERATION_H
#define EMBER_GENERATION_H

#include <uv.h>

#include "api_response.h"
#include "backend.h"
#include "gen_request.h"
#include "http.h"

/* Submits `gr` (taken over: freed here whatever happens) for `req` and
 * answers it in format `fmt` now (errors) or later. `model` names the model
 * in responses (borrowed; must outlive the request). */
/* Loop thread: copies a finished generation's token counts and time to
 * first token onto its request, for the access log (also used by the
 * Ollama endpoints, ollama_gen.c). */
void generation_note_result(struct http_req *req, const struct engine_result *r);

void generation_start(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      struct gen_request *gr, enum api_format fmt,
		      const char *model);

#endif
