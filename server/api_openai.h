/*
 * api_openai.h - the OpenAI-compatible request bodies: POST
 * /v1/chat/completions and POST /v1/completions parsed with jansson into a
 * plain struct gen_request, validated field by field. A bad body yields a
 * struct api_error with status 400 (415 for a wrong Content-Type) and the
 * offending field in `param` ("messages[1].role", "temperature"), so
 * clients see exactly what to fix.
 *
 * Choices (see also README): every field OpenAI documents is honoured or
 * refused with a 400 naming it (api_fields.h); fields it does not document
 * are ignored, as OpenAI ignores them; JSON null counts as absent; `model` is
 * optional; nesting deeper than API_MAX_DEPTH, duplicate keys, invalid
 * UTF-8, NUL bytes and integers beyond int64 are rejected as malformed.
 *
 * Threads: the loop thread (pure functions, no shared state).
 */
#ifndef EMBER_API_OPENAI_H
#define EMBER_API_OPENAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api_error.h"
#include "ember.h"
#include "gen_request.h"

#define API_MAX_DEPTH 32

struct api_limits {
	int32_t max_tokens;  /* config max_tokens: the default, and the cap
			      * larger requests are clamped to */
	/* Only rendered (/apply-template), never generated: tools are then
	 * template input, not a request to call them. */
	bool render_only;
};

/* Checks a Content-Type header value: absent (NULL), application/json or
 * application/x-www-form-urlencoded (what `curl -d` sends without a
 * header; the body is still parsed as JSON, as llama-server does), any
 * case, optional parameters such as charset=utf-8, passes; anything else
 * fills `e` with 415 and returns EMBER_EINVAL. */
int api_openai_check_content_type(const char *content_type, struct api_error *e);

/* Returns 0 if `body[0..len)` nests objects/arrays at most `max_depth`
 * deep, EMBER_EINVAL otherwise. Strings are skipped (brackets inside them do not
 * count); malformed input is left for the JSON parser to reject. */
int api_openai_check_depth(const char *body, size_t len, int max_depth);

/* Parses a chat completions body into `req` (gen_request_init'ed here).
 * Returns 0, or EMBER_EINVAL (EMBER_ENOMEM when out of memory) with `e`
 * filled and `req` freed. */
/* Decodes a request body into a JSON object (new reference), refusing
 * nesting deeper than API_MAX_DEPTH, duplicate keys, invalid UTF-8 and
 * non-objects; or fills `e` (400 invalid_json) and returns NULL. */
json_t *api_openai_decode_object(const char *body, size_t len, struct api_error *e);

/* Member `key` of a request object, or NULL when it is absent or JSON null
 * (null counts as absent, above; every API's reader looks fields up so).
 * obj may be NULL or not an object: NULL. */
json_t *api_openai_field(json_t *obj, const char *key);

int api_openai_parse_chat(const char *body, size_t len,
			  const struct api_limits *lim, struct gen_request *req,
			  struct api_error *e);

/* The same from a decoded body `root` (borrowed), for API layers that
 * translate another API's names into OpenAI's first (api_llamacpp.c). */
int api_openai_parse_root(json_t *root, const struct api_limits *lim,
			  enum gen_kind kind, struct gen_request *req,
			  struct api_error *e);

/* The same for a (legacy) completions body: `prompt` is a string or an
 * array of exactly one string. */
int api_openai_parse_completion(const char *body, size_t len,
				const struct api_limits *lim,
				struct gen_request *req, struct api_error *e);

#endif
