/*
 * log.h - emberd's logging: plain lines on stderr (journald and Docker add
 * timestamps), filtered by level, and one summary line per HTTP request:
 *
 *   POST /v1/chat/completions 200 prompt=12 gen=40 ttft=35.1ms dur=812.4ms
 *
 * A struct logger is caller-owned (no global state); its level is set once
 * at start-up and only read afterwards, so any thread may log through it.
 * Each line goes out in a single fputs() of a formatted buffer, which keeps
 * lines from different threads whole.
 */
#ifndef EMBER_LOG_H
#define EMBER_LOG_H

#include <stdio.h>

#include "config.h"

struct logger {
	int level;  /* enum log_level: lines above it are dropped */
	FILE *out;  /* not owned; stderr in the daemon */
};

/* What one finished request reports. Token counts and ttft are -1 where
 * they do not apply (no generation), and are then left out of the line. */
struct log_request {
	const char *method;
	const char *path;
	int status;
	long prompt_tokens;
	long gen_tokens;
	double ttft_ms;
	double duration_ms;
};

/* Sets up `lg` to write lines at or below `level` to `out`. */
void log_init(struct logger *lg, int level, FILE *out);

/* Writes one formatted line at `level`, prefixed with the level name for
 * warn and error. The newline is added here. */
void log_printf(const struct logger *lg, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Formats the request summary line into `buf` (without newline); returns
 * `buf`. Control characters in the path are replaced by '?', so a client
 * cannot forge log lines. */
char *log_format_request(const struct log_request *r, char *buf, size_t size);

/* Writes the request summary line at info level. */
void log_request(const struct logger *lg, const struct log_request *r);

#endif
