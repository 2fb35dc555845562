/*
 * api_models.h - GET /v1/models and GET /v1/models/{id} (also without
 * /v1): OpenAI's model objects for the one model served, with llama.cpp's
 * `meta` (vocab_type, n_vocab, n_ctx_train, n_embd, n_params, size; and
 * Ember's n_ctx and arch) once the model is loaded, so a client can size
 * its prompts. An unknown id is 404 in OpenAI's error shape
 * (code model_not_found).
 *
 * Threads: the loop thread.
 */
#ifndef EMBER_API_MODELS_H
#define EMBER_API_MODELS_H

#include <time.h>

#include "backend.h"
#include "http.h"

/* Answers GET /v1/models. `started` is the daemon's start time. */
void api_models_list(struct backend *b, struct http_req *req, time_t started);

/* Answers GET /v1/models/{id}. */
void api_models_get(struct backend *b, struct http_req *req, time_t started,
		    const char *id);

/* llama.cpp's numbering of tokenizer.ggml.model (1 SPM "llama", 2 BPE
 * "gpt2", 3 WPM "bert", 4 UGM "t5", 5 RWKV; 0 otherwise). */
int api_models_vocab_type(const char *model);

#endif
