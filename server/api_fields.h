/*
 * api_fields.h - the OpenAI request fields beyond the sampling core that
 * api_openai.c reads: logprobs / top_logprobs, echo, suffix, and every
 * other field OpenAI documents for chat and (legacy) completions, each
 * either honoured or refused with a 400 that names it. Nothing a client
 * asked for is dropped silently; fields OpenAI does not document stay
 * ignored, as OpenAI ignores them. README's "OpenAI fields" table lists
 * every one with what happens to it.
 *
 * Threads: the loop thread (pure functions, no shared state).
 */
#ifndef EMBER_API_FIELDS_H
#define EMBER_API_FIELDS_H

#include <jansson.h>

#include "api_error.h"
#include "backend.h"
#include "gen_request.h"

#define API_MAX_TOP_LOGPROBS 20 /* OpenAI's limit (sampler.h's too) */

/* Reads the fields above from `root` into `r` (its kind says which API).
 * Returns 0, or EMBER_EINVAL / EMBER_ENOMEM with `e` filled (param names
 * the field). */
int api_fields_read(json_t *root, struct gen_request *r, struct api_error *e);

/* Checks what only the loaded model can: logit_bias ids inside its
 * vocabulary. Returns 0 (also while the model is not loaded: the submit
 * answers that), or EMBER_EINVAL with a 400 naming logit_bias. */
int api_fields_check_vocab(struct backend *b, const struct gen_request *r,
			   struct api_error *e);

#endif
