/*
 * server_impl.h - the server's state, shared by server.c (the loop,
 * dispatch and shutdown) and routes.c (the route table and its handlers).
 * Ownership: server_run owns the one struct server, on its stack.
 * Threads: the loop thread only.
 */
#ifndef EMBER_SERVER_IMPL_H
#define EMBER_SERVER_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "backend.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "sd_notify.h"

enum server_state { RUNNING, DRAINING, STOPPED };

struct server {
	const struct config *cfg;
	const struct logger *log;
	uv_loop_t loop;
	struct http_server http;
	struct metrics metrics;
	struct backend *backend;
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_timer_t drain_timer;  /* polls for an empty server while draining */
	uv_timer_t watchdog;     /* WATCHDOG=1 every WATCHDOG_USEC / 2 */
	uv_timer_t ready_timer;  /* waits for the model, then READY=1 */
	struct sd_notify notify; /* systemd's socket; sends are no-ops without */
	uint64_t drain_deadline_ns;
	bool drain_cancelled;    /* drain timeout hit: generations cancelled */
	enum server_state state;
	int exit_code;
	time_t started;
};

#endif
