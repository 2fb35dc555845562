/*
 * model_watch.h - the served model file changing under the daemon.
 *
 * The engine maps the GGUF file read-only and MAP_SHARED, so what a client
 * gets depends on the file staying as it was loaded:
 *   - replaced by a rename (what `ember convert`/`quantize` and `cp` to a
 *     new name then `mv` do): the mapping keeps the old inode's pages and
 *     answers stay right; nothing to do (a restart loads the new file);
 *   - rewritten in place (`cp` over it): the mapping would show the new
 *     bytes under the old tensor index: wrong answers;
 *   - truncated in place: a read past the new end raises SIGBUS.
 * So the watch keeps a descriptor of the file it loaded and compares its
 * size and mtime (fstat, about a microsecond) with those at load before
 * each job, at the end of each generation and on /health (backend.c,
 * generation.c); a change turns the backend FAILED, naming it: new jobs
 * get 503 and /health 503 with the reason. And a SIGBUS on the mapping
 * (a truncation under a running job, before any check could see it) is
 * caught: one line on stderr naming the file and offset, then exit status
 * MODEL_WATCH_EXIT (systemd's Restart= then starts emberd on the current
 * file, which is loaded or refused at load). Recovering the faulting job
 * alone would mean unwinding a compute thread out of a kernel that other
 * threads wait on: not done.
 *
 * Ownership: the caller owns the struct; model_watch_close releases the fd.
 * Threads: model_watch_open runs on the loader thread before READY,
 * model_watch_check on the loop thread afterwards; the SIGBUS handler is
 * process-wide, installed once (model_watch_guard) before READY.
 */
#ifndef EMBER_MODEL_WATCH_H
#define EMBER_MODEL_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* Exit status after a SIGBUS on the model mapping (EX_IOERR). */
#define MODEL_WATCH_EXIT 74

struct model_watch {
	int fd;              /* -1 when not open */
	const char *path;    /* borrowed */
	struct stat st;      /* at open */
};

/* Opens `path` and records its size and mtime. Returns 0 or EMBER_EIO
 * with detail in `err`. */
int model_watch_open(struct model_watch *w, const char *path, char *err);

/* 0 while the file is as opened, and still the one `path` names at the
 * moment of the call when `same_path` (checked once, after the engine
 * opened the path itself); EMBER_EIO with the change in `err` otherwise.
 * A closed watch (no model) is always 0. */
int model_watch_check(const struct model_watch *w, bool same_path, char *err);

/* Closes the descriptor. Idempotent. */
void model_watch_close(struct model_watch *w);

/* Installs the SIGBUS handler for the mapping map[0..size) of `path`
 * (borrowed for the life of the process). Returns 0 or EMBER_EIO. */
int model_watch_guard(const void *map, size_t size, const char *path, char *err);

#endif
