/*
 * config.h - emberd's settings: one declarative table (config.c) drives the
 * conf file parser, EMBER_* environment variables, --key=value flags,
 * validation, `emberd --help` and the shipped example `conf/emberd.conf`.
 *
 * Precedence, lowest first: built-in defaults < conf file (--config=PATH or
 * EMBER_CONFIG) < environment (EMBER_<KEY>, upper case) < command-line flags.
 * No conf file is read unless one is named: the daemon's behaviour never
 * depends on a file it was not told about.
 *
 * Ownership: a struct config owns its strings; config_free() releases them.
 * Threads: build it on the main thread before the loop starts; afterwards it
 * is read-only and may be read from any thread.
 */
#ifndef EMBER_CONFIG_H
#define EMBER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The longest replica_id (session ids must fit the server's buffers). */
#define CONFIG_REPLICA_ID_MAX 16

enum config_full_status { CONFIG_FULL_429, CONFIG_FULL_503 };

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

struct config {
	char *model;          /* GGUF path; NULL = none configured */
	char *host;           /* listen address (numeric IPv4/IPv6) */
	int64_t port;
	int64_t threads;      /* compute threads per worker; 0 = one per core */
	char *device;         /* "cpu", "vulkan", "vulkan:N"; NULL/"" = cpu (compute.h) */
	int64_t workers;
	int64_t slots;        /* concurrent sequences per worker */
	int64_t context;      /* tokens per slot; 0 = the model's own */
	int64_t max_body;     /* bytes */
	int64_t max_tokens;   /* upper bound and default for generated tokens */
	int64_t queue;        /* requests waiting for a slot before 429 */
	char *api_key;        /* comma-separated keys; NULL/"" = no auth */
	char *cors_origins;   /* comma-separated origins, "*" = any */
	char *cors_headers;   /* preflight's allowed headers; ""/NULL = echo the request's */
	int64_t log_level;    /* enum log_level */
	char *chat_template;  /* NULL = the model's own */
	char *chat_template_file; /* NULL/"" = none; a Jinja file overriding the model's */
	int64_t drain_timeout; /* seconds */
	int64_t timeout;      /* idle connection timeout, seconds */
	int64_t header_timeout; /* seconds to receive a request header (http.h) */
	int64_t max_connections; /* open connections at most */
	int64_t stream_buffer_kb; /* unread stream output before cancelling */
	int64_t prefill_chunk; /* prompt tokens per batch step */
	int64_t kv_cache_mb;  /* KV budget per worker, 0 = context * slots */
	int64_t max_sessions; /* live sessions */
	int64_t session_idle; /* seconds before an unused session is deleted */
	char *replica_id;     /* this replica's name in session ids; NULL = none */
	int64_t full_status;  /* 0: 429 when full, 1: 503 (CONFIG_FULL_*) */
	bool no_model;        /* hidden test mode: serve without a model */
};

/* Fills `c` with the built-in defaults. Call config_free() afterwards. */
void config_init(struct config *c);

/* Releases the strings of `c` (NULL allowed); `c` may be re-initialised. */
void config_free(struct config *c);

/* Sets one key from its text form, validated against the table (type,
 * bounds, choices). Returns 0, or EMBER_ENOTFOUND for an unknown key,
 * EMBER_EINVAL / EMBER_ERANGE with one line of detail in `err`. */
int config_set(struct config *c, const char *key, const char *value, char *err);

/* Applies `key = value` lines of conf file text (# comments, blank lines).
 * `source` names the text in error messages ("emberd.conf"). Stops at the
 * first bad line: "emberd.conf:12: ..." in `err`. */
int config_parse_text(struct config *c, const char *text, const char *source,
		      char *err);

/* Reads and applies the conf file at `path`. */
int config_load_file(struct config *c, const char *path, char *err);

/* Applies EMBER_<KEY> variables from `envp` (NULL-terminated "K=V"
 * strings). Other EMBER_* variables (EMBER_CPU, EMBER_CONFIG) are ignored. */
int config_apply_env(struct config *c, char **envp, char *err);

/* Applies --key=value flags (and bare --flag for booleans) from argv[1..].
 * --config=PATH is accepted and skipped (config_load reads it). Anything
 * else is an error, so typos never pass silently. */
int config_apply_args(struct config *c, int argc, char **argv, char *err);

/* The whole sequence: defaults, conf file, environment, flags, then
 * config_validate(). `c` must be config_init()ed. */
int config_load(struct config *c, int argc, char **argv, char **envp,
		char *err);

/* Checks rules that span keys (a model is required unless no_model, ...). */
int config_validate(const struct config *c, char *err);

/* Writes the documented example conf file (every visible key at its
 * default): the shipped conf/emberd.conf is exactly this output. */
void config_write_example(FILE *f);

/* Walks a comma-separated value (api_key, cors_origins): sets *item and
 * *len to the next entry with the spaces around it trimmed (possibly
 * empty) and returns true, or returns false at the end. Start with
 * *cursor = the value. */
bool config_list_next(const char **cursor, const char **item, size_t *len);

/* Writes the --help text: usage and one line per key. */
void config_write_help(FILE *f);

/* Returns the name of a log level ("info"), never NULL. */
const char *config_log_level_name(int level);

#endif
