/*
 * router.h - the route table: method + path pattern -> handler.
 *
 * A pattern is a literal path whose segments may be `{name}` placeholders,
 * each matching one non-empty segment ("/v1/sessions/{id}" matches
 * "/v1/sessions/abc" but not "/v1/sessions/" or "/v1/sessions/a/b").
 * Matching is exact otherwise (no trailing-slash folding, case-sensitive).
 * A path that matches no pattern is 404; a path that matches only under
 * other methods is 405 and the match lists those methods for Allow. HEAD
 * is served by GET routes.
 *
 * The router only reads the caller's table (a constant array) and writes
 * the caller's struct route_match, whose params point into `path`. Pure:
 * any thread.
 */
#ifndef EMBER_ROUTER_H
#define EMBER_ROUTER_H

#include <stddef.h>

struct server;
struct http_req;
struct route_match;

typedef void (*route_fn)(struct server *srv, struct http_req *req,
			 const struct route_match *m);

struct route {
	const char *method;   /* "GET", "POST", "DELETE" */
	const char *pattern;  /* "/v1/sessions/{id}" */
	route_fn handler;
	const char *name;     /* metrics label, e.g. "chat_completions" */
};

#define ROUTE_MAX_PARAMS 4

struct route_param {
	const char *name;     /* into the pattern, not NUL-terminated */
	size_t name_len;
	const char *value;    /* into the path, not NUL-terminated */
	size_t len;
};

struct route_match {
	const struct route *route;  /* the match, or NULL */
	int status;                 /* 0, 404 or 405 */
	char allow[64];             /* 405 (and OPTIONS): "GET, POST" */
	size_t n_params;
	struct route_param params[ROUTE_MAX_PARAMS];
};

/* Looks `method` `path` up in `table[0..n)`. Returns 0 and sets m->route
 * on a match; otherwise returns 404 or 405 (also in m->status), with
 * m->allow filled for 405. m->allow is filled on a match too. */
int router_match(const struct route *table, size_t n, const char *method,
		 const char *path, struct route_match *m);

/* Copies the value of param `name` into `buf` (NUL-terminated). Returns its
 * length, or -1 if there is no such param or it does not fit. */
int router_param(const struct route_match *m, const char *name, char *buf,
		 size_t size);

#endif
