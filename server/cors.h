/*
 * cors.h - the CORS allow list (config cors_origins) for browser companion
 * apps. A response to an allowed Origin carries Access-Control-Allow-Origin
 * (the origin itself, or * when the list is "*"); preflight OPTIONS
 * requests get the allowed methods and headers: config cors_headers, or
 * by default the headers the preflight asks for, so browser SDKs that add
 * their own (the OpenAI SDK's x-stainless-*) work. Pure: any thread.
 */
#ifndef EMBER_CORS_H
#define EMBER_CORS_H

#include <stddef.h>

/* Headers a preflight answer carries besides Allow-Origin. */
#define CORS_ALLOW_METHODS "GET, POST, DELETE, OPTIONS"
#define CORS_ALLOW_HEADERS "Authorization, Content-Type"
#define CORS_MAX_AGE "600"

/* The Access-Control-Allow-Headers value of a preflight that asked for
 * `requested` (Access-Control-Request-Headers, may be NULL): the
 * configured `allowed` list when it is not empty; else `requested` itself
 * (copied into buf[size]) when it is made of header-name characters,
 * commas and spaces and fits; else CORS_ALLOW_HEADERS. */
const char *cors_allow_headers(const char *allowed, const char *requested,
			       char *buf, size_t size);

/* Returns the Access-Control-Allow-Origin value for `origin` under the
 * comma-separated `origins` list: "*" when the list holds "*", `origin`
 * itself when listed (exact match), NULL when not allowed, when the list is
 * empty or when `origin` is NULL. The result points into the arguments or
 * is a literal. */
const char *cors_allow_origin(const char *origins, const char *origin);

#endif
