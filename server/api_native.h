/*
 * api_native.h - the native endpoints beside the OpenAI ones:
 *
 *   POST /tokenize    {"content": s, "add_special": b?, "parse_special": b?}
 *                     -> {"tokens": [ids]}   (defaults: true, false)
 *   POST /detokenize  {"tokens": [ids]} -> {"content": s}
 *                     (control tokens written as their text; bytes that
 *                      are not UTF-8 become U+FFFD)
 *   POST /v1/generate and POST /v1/sessions/{id}/generate take the body of
 *                     /v1/completions (generation.h answers them);
 *   POST /v1/sessions {"system": s?} -> {"id":"sess-N","object":"session",
 *                     "n_tokens","n_ctx","n_left","busy","cached","idle_s"}
 *   GET /v1/sessions/{id} -> the same object
 *   POST /v1/sessions/{id}/clone -> the new session's object
 *   DELETE /v1/sessions/{id} -> {"id","object":"session.deleted",
 *                                "deleted":true}
 *
 * Tokenizing a text of max_body bytes takes a while, so /tokenize and
 * /detokenize run the tokenizer on libuv's thread pool (uv_queue_work),
 * never on the loop; their inputs are bounded by max_body.
 *
 * Threads: every function here is called on the loop thread.
 */
#ifndef EMBER_API_NATIVE_H
#define EMBER_API_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "api_error.h"
#include "backend.h"
#include "http.h"

/* Parses a /tokenize body. On success *content (malloc'd, NUL-terminated,
 * *len bytes) is the caller's. Returns 0, or EMBER_EINVAL (EMBER_ENOMEM) with `e` filled. */
int api_native_parse_tokenize(const char *body, size_t len, char **content,
			      size_t *content_len, bool *add_special,
			      bool *parse_special, struct api_error *e);

/* Parses a /detokenize body: *ids (malloc'd, *n entries, the caller's)
 * holds integers in int32 range (the vocabulary check is the backend's).
 * Returns 0, or EMBER_EINVAL (EMBER_ENOMEM) with `e` filled. */
int api_native_parse_detokenize(const char *body, size_t len, int32_t **ids,
				size_t *n, struct api_error *e);

/* Session ids name the replica that holds the session when the config
 * sets replica_id ("sess-r1-17"), so a load balancer can route by the id
 * with no shared store; without one they are "sess-17". `replica` is
 * backend_replica_id() (NULL = none). */
#define API_SESSION_ID_MAX 48 /* bytes, with the NUL */

/* Parses an id of this replica: 0 and *id, or EMBER_EINVAL for anything else (an
 * id of another replica included). */
int api_native_parse_session_id(const char *s, const char *replica,
				uint64_t *id);

/* Writes session `id`'s name into buf[API_SESSION_ID_MAX]. */
void api_native_session_name(const char *replica, uint64_t id, char *buf);

/* 404 session_not_found for the path's id `s`; when `s` is another
 * replica's, the message says which (that replica is gone, or the
 * balancer misrouted it), so a client does not mistake it for expiry. */
void api_native_respond_session_not_found(struct backend *b,
					  struct http_req *req, const char *s);

/* Answers /tokenize or /detokenize for `req` (the body is parsed here;
 * the tokenizer runs on the loop's thread pool). */
void api_native_tokenize(uv_loop_t *loop, struct backend *b,
			 struct http_req *req);
void api_native_detokenize(uv_loop_t *loop, struct backend *b,
			   struct http_req *req);

/* The session endpoints; `id` is the path's {id} ("sess-17"), NULL for
 * POST /v1/sessions. */
void api_native_session_new(struct backend *b, struct http_req *req);
void api_native_session_get(struct backend *b, struct http_req *req,
			    const char *id);
void api_native_session_clone(struct backend *b, struct http_req *req,
			      const char *id);
void api_native_session_delete(struct backend *b, struct http_req *req,
			       const char *id);

#endif
