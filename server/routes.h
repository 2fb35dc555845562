/*
 * routes.h - emberd's route table: every endpoint (method and path
 * pattern), the handler that answers it and the name /metrics and the
 * access log count it under. The handlers are thin: they parse path
 * parameters and call the api_* module of their protocol with the
 * server's backend and limits.
 * Threads: the loop thread (handlers run there, from server.c's dispatch).
 */
#ifndef EMBER_ROUTES_H
#define EMBER_ROUTES_H

#include <stddef.h>

#include "router.h"

/* The table (static storage) and its length in *n. */
const struct route *routes_table(size_t *n);

#endif
