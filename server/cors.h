/*
 * cors.h - the CORS allow list (config cors_origins) for browser companion
 * apps. A response to an allowed Origin carries Access-Control-Allow-Origin
 * (the origin itself, or * when the list is "*"); preflight OPTIONS
 * requests get the allowed methods and headers. Pure: any thread.
 */
#ifndef EMBER_CORS_H
#define EMBER_CORS_H

/* Headers a preflight answer carries besides Allow-Origin. */
#define CORS_ALLOW_METHODS "GET, POST, DELETE, OPTIONS"
#define CORS_ALLOW_HEADERS "Authorization, Content-Type"
#define CORS_MAX_AGE "600"

/* Returns the Access-Control-Allow-Origin value for `origin` under the
 * comma-separated `origins` list: "*" when the list holds "*", `origin`
 * itself when listed (exact match), NULL when not allowed, when the list is
 * empty or when `origin` is NULL. The result points into the arguments or
 * is a literal. */
const char *cors_allow_origin(const char *origins, const char *origin);

#endif
