/*
 * api_error.h - errors in the shape OpenAI clients parse:
 *
 *   {"error":{"message":"...","type":"invalid_request_error",
 *             "param":"temperature","code":null}}
 *
 * with the HTTP status that goes with them. A struct api_error is a plain
 * value (no allocation) that validation code fills and the HTTP layer turns
 * into a response; rate_limit_error responses also carry Retry-After.
 * Pure functions: any thread.
 */
#ifndef EMBER_API_ERROR_H
#define EMBER_API_ERROR_H

#include <stdbool.h>

enum api_error_type {
	API_ERR_NONE = 0,
	API_ERR_INVALID_REQUEST, /* 400, 404 (route), 405, 413, 415 */
	API_ERR_AUTHENTICATION,  /* 401 */
	API_ERR_NOT_FOUND,       /* 404 of a named object (model, session) */
	API_ERR_RATE_LIMIT,      /* 429, with Retry-After */
	API_ERR_SERVER,          /* 500, 503 */
};

struct api_error {
	int status;                /* HTTP status; 0 = no error */
	enum api_error_type type;
	int retry_after;           /* seconds, for 429 and 503; 0 = none */
	char param[64];            /* offending request field, "" = null */
	char code[48];             /* machine-readable code, "" = null */
	char message[256];
};

/* Fills `e` with the 500 "out of memory" that request readers answer
 * when an allocation fails; returns EMBER_ENOMEM for them to pass on. */
int api_error_oom(struct api_error *e);

/* Fills `e`. `param` and `code` may be NULL (JSON null). The message is
 * printf-formatted and truncated to fit. */
void api_error_set(struct api_error *e, int status, enum api_error_type type,
		   const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

/* The OpenAI name of `type` ("invalid_request_error"). Never NULL. */
/* Fills `e` from an EMBER_E* code through the one code-to-HTTP table
 * (400 invalid / context, 404 not found, 409 busy, 429 full with
 * Retry-After, 503 cancelled, else 500); `param` is kept where it names
 * the culprit (400, 404); the message is formatted from fmt. */
void api_error_from_code(struct api_error *e, int code, const char *param,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* 503 model_not_loaded naming why: a failed load, or the model file
 * changed since it was loaded (backend_model_changed). */
void api_error_model_failed(struct api_error *e, const char *why);

/* 503 model_not_loaded, with Retry-After while the model still loads. */
void api_error_not_loaded(struct api_error *e, bool loading);

const char *api_error_type_name(enum api_error_type type);

/* Returns the JSON body for `e` as a malloc'd NUL-terminated string the
 * caller frees, or NULL when out of memory. */
char *api_error_json(const struct api_error *e);

#endif
