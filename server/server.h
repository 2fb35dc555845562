/*
 * server.h - the daemon's loop: owns the libuv loop, the HTTP glue, the
 * route table and its handlers, metrics, the backend (engine adapter) and
 * the signal-driven shutdown.
 *
 * Shutdown: SIGTERM or SIGINT (uv_signal, so the "handler" runs on the
 * loop as an ordinary callback) stops accepting connections and waits for
 * the requests in flight, at most drain_timeout seconds, then exits 0. A
 * second SIGINT during the drain closes everything at once (exit 130).
 *
 * Threads: server_run() runs the loop on the calling thread and returns
 * when the loop ends; engine workers only reach it through uv_async.
 */
#ifndef EMBER_SERVER_H
#define EMBER_SERVER_H

#include "config.h"
#include "log.h"

/* Serves until shut down. `cfg` must be validated (config_load) and
 * outlive the call. Returns the process exit status: 0 after a graceful
 * drain, 130 after a second SIGINT, 1 if start-up failed (reason logged). */
int server_run(const struct config *cfg, const struct logger *log);

#endif
