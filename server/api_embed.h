/*
 * api_embed.h - the embedding endpoints, four request and answer shapes
 * over one engine path (engine.h on_embed: the final hidden state, pooled
 * as the model declares, L2-normalized):
 *
 *   POST /v1/embeddings, /embeddings (OpenAI)
 *        {"input": s | [s] | [ids] | [[ids]], "model"?, "encoding_format"?:
 *         "float"|"base64", "dimensions"?: n_embd only, "user"?}
 *        -> {"object":"list","data":[{"object":"embedding","index",
 *            "embedding"}],"model","pooling","usage":{"prompt_tokens",
 *            "total_tokens"}}
 *   POST /embedding (llama.cpp) {"content" (or "input"): as above}
 *        -> [{"index","embedding":[[...]]}]
 *   POST /api/embed (Ollama) {"model", "input": s | [s], "truncate"?: true,
 *        "dimensions"?, "keep_alive"?, "options"?}
 *        -> {"model","embeddings":[[...]],"pooling","total_duration",
 *            "load_duration","prompt_eval_count"}
 *   POST /api/embeddings (Ollama, legacy) {"model", "prompt": s}
 *        -> {"embedding":[...]}
 *
 * Each input is one engine job (they run in parallel on the workers);
 * the answer goes when all are done. Text is tokenized with BOS/EOS as the
 * model says; an input longer than the context is 400 except on Ollama's
 * /api/embed with truncate (its default), which cuts it. Errors are in
 * OpenAI's shape, and in Ollama's {"error": "..."} on /api/.
 *
 * Threads: the loop thread, except the engine callbacks (worker threads,
 * which only copy under a lock and wake the loop).
 */
#ifndef EMBER_API_EMBED_H
#define EMBER_API_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "api_error.h"
#include "backend.h"
#include "http.h"

#define API_EMBED_MAX_INPUTS 2048 /* inputs per request */

enum api_embed_kind {
	API_EMBED_OPENAI,
	API_EMBED_LLAMA,        /* llama.cpp's /embedding */
	API_EMBED_OLLAMA,       /* /api/embed */
	API_EMBED_OLLAMA_LEGACY, /* /api/embeddings */
};

struct api_embed_input {
	char *text;             /* UTF-8, or NULL with ids */
	size_t len;
	int32_t *ids;           /* token ids, or NULL */
	size_t n_ids;
};

struct api_embed_request {
	enum api_embed_kind kind;
	char *model;            /* as named, or NULL */
	struct api_embed_input *in; /* [n] */
	size_t n;
	bool base64;            /* encoding_format "base64" */
	bool truncate;          /* Ollama's: cut inputs to the context */
	int64_t dimensions;     /* 0: not given */
};

/* Parses a body of `kind` into `r`. Returns 0, or EMBER_EINVAL (EMBER_ENOMEM)
 * with `e` filled (param names the field) and `r` freed. */
int api_embed_parse(const char *body, size_t len, enum api_embed_kind kind,
		    struct api_embed_request *r, struct api_error *e);

void api_embed_request_free(struct api_embed_request *r);

/* Standard base64 of n bytes into out (4 * ((n + 2) / 3) + 1 bytes with the
 * NUL). Exposed for the tests. */
void api_embed_base64(const unsigned char *in, size_t n, char *out);

/* Answers an embedding request of `kind` for `req` (parsed here). `model`
 * is the served model's id (borrowed; outlives the request). */
void api_embed_handle(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      enum api_embed_kind kind, const char *model);

#endif
