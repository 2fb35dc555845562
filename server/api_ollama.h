/*
 * api_ollama.h - Ollama's API, so apps that only speak Ollama work:
 *
 *   GET  /                "Ollama is running"
 *   GET  /api/version     {"version"}  (Ember's version)
 *   GET  /api/tags        the served model as "<id>:latest", with details
 *   POST /api/show        {"model"} -> details, model_info, template, capabilities
 *   GET  /api/ps          the served model (always loaded)
 *   POST /api/generate    {"model","prompt","system"?,"raw"?,"format"?,"options"?,
 *                          "stream"? (default true),"keep_alive"?}
 *   POST /api/chat        {"model","messages","format"?,"options"?,"stream"?,
 *                          "keep_alive"?}
 *   (POST /api/embed, /api/embeddings: api_embed.h)
 *
 * Streaming is NDJSON (application/x-ndjson): one object per line, the last
 * with done: true, done_reason and the counts and durations (ns);
 * ollama_gen.h runs it. Model names: the served id, or it with ":latest"
 * (as Ollama clients send them); another is 404 {"error":"model 'x' not
 * found"}. Every error is Ollama's {"error": "..."}.
 *
 * `options` map to the sampler (temperature, top_k, top_p, min_p, seed,
 * num_predict, stop, repeat_penalty, repeat_last_n, presence_penalty,
 * frequency_penalty); num_ctx up to the server's context is accepted (the
 * context is the server's); hints that do not change the output (num_gpu,
 * num_thread, use_mmap ...: OLLAMA_HINTS in api_ollama.c) are accepted and
 * ignored; mirostat, tfs_z, typical_p and penalize_newline are refused
 * unless at their neutral values; unknown options are refused by name.
 * `format` "json" or a JSON schema goes through the structured-output path
 * (json_schema.h). Refused by name: images, template, suffix, context,
 * tools, think: true, system with raw.
 *
 * Threads: the loop thread; the parsers are pure.
 */
#ifndef EMBER_API_OLLAMA_H
#define EMBER_API_OLLAMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "api_error.h"
#include "backend.h"
#include "gen_request.h"
#include "http.h"

struct api_ollama_limits {
	int32_t max_tokens;  /* the server's max_tokens: default and cap */
	int64_t n_ctx;       /* the server's context (num_ctx above it is refused) */
};

/* What a generate/chat body asks beyond the gen_request. */
struct api_ollama_extra {
	bool chat;           /* /api/chat */
	bool load_only;      /* no prompt / no messages: Ollama's "load the model" */
};

/* Whether the client's model `name` names the served model `id`: equal,
 * or `id` + ":latest". */
bool api_ollama_model_ok(const char *name, const char *id);

/* Answers `e` as {"error": e->message} with its status (and Retry-After). */
void api_ollama_respond_error(struct http_req *req, const struct api_error *e);

/* Parses `options` into `r`: 0, or EMBER_EINVAL with `e` naming the option. */
int api_ollama_read_options(json_t *options, const struct api_ollama_limits *lim,
			    struct gen_request *r, struct api_error *e);

/* The first option of `options` an embedding cannot honour (anything but
 * the ignored hints and num_ctx), or NULL. */
const char *api_ollama_embed_option_refused(json_t *options);

/* Parses an /api/generate (x->chat false) or /api/chat (true) body into
 * `r` (gen_request_init'ed here; stream defaults to true). Returns 0, or
 * EMBER_EINVAL (EMBER_ENOMEM) with `e` filled and `r` freed. */
int api_ollama_parse(const char *body, size_t len, const struct api_ollama_limits *lim,
		     struct gen_request *r, struct api_ollama_extra *x, struct api_error *e);

/* The handlers; `id` is the served model's id (NULL: none). */
void api_ollama_root(struct http_req *req);
void api_ollama_version(struct http_req *req);
void api_ollama_tags(struct backend *b, struct http_req *req, bool running);
void api_ollama_show(struct backend *b, struct http_req *req);
void api_ollama_generate(uv_loop_t *loop, struct backend *b, struct http_req *req,
			 bool chat, int32_t max_tokens);

#endif
