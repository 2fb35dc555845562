/* config.c - the settings table and everything it drives. See config.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

enum config_type { CFG_STR, CFG_INT, CFG_ENUM, CFG_BOOL };

#define CFG_HIDDEN 1u /* not in --help or the example file */

struct config_key {
	const char *name;
	enum config_type type;
	const char *def;      /* text form, parsed like any other source */
	int64_t min, max;     /* CFG_INT bounds, inclusive */
	size_t offset;        /* field in struct config */
	const char *choices;  /* CFG_ENUM: "a|b|c", index = stored value */
	unsigned flags;
	const char *doc;
};

#define OFF(f) offsetof(struct config, f)
#define I64MAX INT64_MAX

static const struct config_key keys[] = {
	{"model", CFG_STR, "", 0, 0, OFF(model), NULL, 0,
	 "Path of the GGUF model file to serve (required)."},
	{"host", CFG_STR, "127.0.0.1", 0, 0, OFF(host), NULL, 0,
	 "Address to listen on; 0.0.0.0 or :: exposes the server to the network."},
	{"port", CFG_INT, "8080", 1, 65535, OFF(port), NULL, 0,
	 "TCP port to listen on."},
	{"threads", CFG_INT, "0", 0, 1024, OFF(threads), NULL, 0,
	 "Compute threads per worker; 0 = one per CPU core."},
	{"device", CFG_STR, "", 0, 0, OFF(device), NULL, 0,
	 "Device running the model: cpu, vulkan (the first usable) or vulkan:N; "
	 "empty = cpu. A build without Vulkan refuses vulkan."},
	{"workers", CFG_INT, "1", 1, 64, OFF(workers), NULL, 0,
	 "Engine workers, each with its own slots and KV caches."},
	{"slots", CFG_INT, "4", 1, 256, OFF(slots), NULL, 0,
	 "Sequences decoded together per worker (continuous batching)."},
	{"context", CFG_INT, "0", 0, 1048576, OFF(context), NULL, 0,
	 "Context length in tokens per slot; 0 = the model's own."},
	{"max_body", CFG_INT, "1048576", 1024, 1073741824, OFF(max_body), NULL, 0,
	 "Largest request body in bytes; larger ones get 413."},
	{"max_tokens", CFG_INT, "2048", 1, 1048576, OFF(max_tokens), NULL, 0,
	 "Most tokens one request may generate (and the default when it asks none)."},
	{"queue", CFG_INT, "64", 0, 65536, OFF(queue), NULL, 0,
	 "Requests waiting for a slot; when full new ones get 429 with Retry-After."},
	{"api_key", CFG_STR, "", 0, 0, OFF(api_key), NULL, 0,
	 "Comma-separated API keys for 'Authorization: Bearer'; empty = no auth."},
	{"cors_origins", CFG_STR, "", 0, 0, OFF(cors_origins), NULL, 0,
	 "Comma-separated browser origins allowed by CORS; * = any; empty = none."},
	{"cors_headers", CFG_STR, "", 0, 0, OFF(cors_headers), NULL, 0,
	 "Request headers a CORS preflight allows (comma-separated); empty = those it asks for."},
	{"log_level", CFG_ENUM, "info", 0, 0, OFF(log_level),
	 "error|warn|info|debug", 0,
	 "Log verbosity: error, warn, info (one line per request) or debug."},
	{"chat_template", CFG_STR, "", 0, 0, OFF(chat_template), NULL, 0,
	 "Chat template name overriding the model's own; empty = the model's."},
	{"chat_template_file", CFG_STR, "", 0, 0, OFF(chat_template_file), NULL, 0,
	 "Jinja chat template file overriding the model's own; empty = the model's."},
	{"drain_timeout", CFG_INT, "30", 0, 3600, OFF(drain_timeout), NULL, 0,
	 "Seconds to finish running requests after SIGTERM before exiting."},
	{"timeout", CFG_INT, "60", 1, 86400, OFF(timeout), NULL, 0,
	 "Seconds an idle connection is kept open."},
	{"header_timeout", CFG_INT, "10", 1, 3600, OFF(header_timeout), NULL, 0,
	 "Seconds a new connection has to send a whole request header (a kept-alive one: timeout plus this); slower ones are closed."},
	{"max_connections", CFG_INT, "16384", 16, 1048576, OFF(max_connections), NULL, 0,
	 "Open connections at most (also capped by the open-file limit, which emberd raises to its hard limit)."},
	{"stream_buffer_kb", CFG_INT, "1024", 16, 1048576, OFF(stream_buffer_kb), NULL, 0,
	 "KiB of a stream's output a client may leave unread; past it the generation is cancelled."},
	{"prefill_chunk", CFG_INT, "512", 1, 65536, OFF(prefill_chunk), NULL, 0,
	 "Prompt tokens per step while nothing decodes; with d streams decoding: max(16, this / (1 + d))."},
	{"kv_cache_mb", CFG_INT, "0", 0, 1048576, OFF(kv_cache_mb), NULL, 0,
	 "KV cache budget per worker in MiB; 0 = enough for context * slots."},
	{"max_sessions", CFG_INT, "64", 1, 65536, OFF(max_sessions), NULL, 0,
	 "Sessions (/v1/sessions) alive at once; more are refused with 429."},
	{"session_idle", CFG_INT, "600", 1, 604800, OFF(session_idle), NULL, 0,
	 "Seconds an unused session is kept before it is deleted."},
	{"replica_id", CFG_STR, "", 0, 0, OFF(replica_id), NULL, 0,
	 "This replica's name behind a load balancer (letters, digits, _; up to "
	 "16): session ids become sess-<replica_id>-N so the balancer can route "
	 "a session to the replica that holds it; empty = sess-N."},
	{"full_status", CFG_ENUM, "429", 0, 0, OFF(full_status), "429|503", 0,
	 "Status when the queue or the session table is full: 429, or 503 for "
	 "a replica behind a balancer that retries 503 on another (HAProxy "
	 "2.6 cannot retry 429)."},
	{"no_model", CFG_BOOL, "false", 0, 0, OFF(no_model), NULL, CFG_HIDDEN,
	 "Test mode: serve without a model; generation answers 503."},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const struct config_key *key_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strlen(keys[i].name) == len &&
		    memcmp(keys[i].name, name, len) == 0)
			return &keys[i];
	return NULL;
}

static int parse_int(const struct config_key *k, const char *v, int64_t *out,
		     char *err)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || isspace((unsigned char)*v))
		return ember_seterr(err, EMBER_EINVAL,
				    "%s: '%s' is not an integer", k->name, v);
	if (errno == ERANGE || x < k->min || x > k->max)
		return ember_seterr(err, EMBER_ERANGE,
				    "%s: %s is out of range [%lld, %lld]",
				    k->name, v, (long long)k->min,
				    (long long)k->max);
	*out = x;
	return 0;
}

static int parse_enum(const struct config_key *k, const char *v, int64_t *out,
		      char *err)
{
	const char *p = k->choices;
	int64_t i = 0;
	size_t n = strlen(v);

	while (*p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && memcmp(p, v, n) == 0) {
			*out = i;
			return 0;
		}
		i++;
		p += len + (bar != NULL);
	}
	return ember_seterr(err, EMBER_EINVAL, "%s: '%s' is not one of %s",
			    k->name, v, k->choices);
}

static int parse_bool(const struct config_key *k, const char *v, bool *out,
		      char *err)
{
	if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) {
		*out = false;
		return 0;
	}
	return ember_seterr(err, EMBER_EINVAL, "%s: '%s' is not a boolean",
			    k->name, v);
}

static int key_set(struct config *c, const struct config_key *k,
		   const char *v, char *err)
{
	char *field = (char *)c + k->offset;
	char **s, *copy;

	switch (k->type) {
	case CFG_INT:
		return parse_int(k, v, (int64_t *)(void *)field, err);
	case CFG_ENUM:
		return parse_enum(k, v, (int64_t *)(void *)field, err);
	case CFG_BOOL:
		return parse_bool(k, v, (bool *)(void *)field, err);
	case CFG_STR:
		s = (char **)(void *)field;
		copy = NULL;
		/* An empty string means "unset", so NULL is the one spelling. */
		if (*v != '\0' && (copy = strdup(v)) == NULL)
			return ember_seterr(err, EMBER_ENOMEM, "%s", k->name);
		free(*s);
		*s = copy;
		return 0;
	}
	return ember_seterr(err, EMBER_EINVAL, "%s: bad type", k->name);
}

void config_init(struct config *c)
{
	size_t i;

	memset(c, 0, sizeof(*c));
	/* Defaults are literals in the table; a failure is a table bug. */
	for (i = 0; i < NKEYS; i++)
		if (key_set(c, &keys[i], keys[i].def, NULL) != 0)
			abort();
}

void config_free(struct config *c)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < NKEYS; i++) {
		if (keys[i].type == CFG_STR) {
			char **s = (char **)(void *)((char *)c + keys[i].offset);

			free(*s);
			*s = NULL;
		}
	}
}

int config_set(struct config *c, const char *key, const char *value, char *err)
{
	const struct config_key *k = key_find(key, strlen(key));

	if (k == NULL)
		return ember_seterr(err, EMBER_ENOTFOUND, "unknown key '%s'",
				    key);
	return key_set(c, k, value, err);
}

static char *trim(char *s, char *end)
{
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

int config_parse_text(struct config *c, const char *text, const char *source,
		      char *err)
{
	char *copy = strdup(text), *line, *next, *eq, *key, *val;
	char detail[EMBER_ERR_MAX];
	int lineno = 0, rc = 0;

	if (copy == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "%s", source);
	for (line = copy; line != NULL; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		lineno++;
		key = trim(line, line + strlen(line));
		if (*key == '\0' || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (eq == NULL) {
			rc = ember_seterr(err, EMBER_EFORMAT,
					  "%s:%d: expected 'key = value'",
					  source, lineno);
			goto fail;
		}
		val = trim(eq + 1, eq + 1 + strlen(eq + 1));
		key = trim(key, eq);
		rc = config_set(c, key, val, detail);
		if (rc != 0) {
			ember_seterr(err, rc, "%s:%d: %s", source, lineno,
				     detail);
			goto fail;
		}
	}
fail:
	free(copy);
	return rc;
}

/* Conf files are small; a bigger one is a mistake, not a config. */
#define CONF_MAX (1 << 20)

int config_load_file(struct config *c, const char *path, char *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n;
	int rc;

	if (f == NULL)
		return ember_seterr(err, EMBER_EIO, "%s: %s", path,
				    strerror(errno));
	buf = malloc(CONF_MAX + 1);
	if (buf == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "%s", path);
		goto fail;
	}
	n = fread(buf, 1, CONF_MAX + 1, f);
	if (ferror(f) || n > CONF_MAX) {
		rc = ember_seterr(err, EMBER_EIO, "%s: %s", path,
				  n > CONF_MAX ? "file too large" : "read error");
		goto fail;
	}
	buf[n] = '\0';
	if (memchr(buf, '\0', n) != NULL) {
		rc = ember_seterr(err, EMBER_EFORMAT, "%s: contains NUL bytes",
				  path);
		goto fail;
	}
	rc = config_parse_text(c, buf, path, err);
fail:
	free(buf);
	fclose(f);
	return rc;
}

int config_apply_env(struct config *c, char **envp, char *err)
{
	char name[64], detail[EMBER_ERR_MAX];
	size_t i, j;
	int rc;

	for (i = 0; envp != NULL && envp[i] != NULL; i++) {
		const char *e = envp[i], *eq = strchr(e, '=');
		const struct config_key *k;
		size_t len;

		if (strncmp(e, "EMBER_", 6) != 0 || eq == NULL)
			continue;
		len = (size_t)(eq - e - 6);
		if (len == 0 || len >= sizeof(name))
			continue;
		for (j = 0; j < len; j++)
			name[j] = (char)tolower((unsigned char)e[6 + j]);
		name[len] = '\0';
		k = key_find(name, len);
		if (k == NULL)
			continue;
		rc = key_set(c, k, eq + 1, detail);
		if (rc != 0)
			return ember_seterr(err, rc, "environment %.*s: %s",
					    (int)(eq - e), e, detail);
	}
	return 0;
}

int config_apply_args(struct config *c, int argc, char **argv, char *err)
{
	char detail[EMBER_ERR_MAX];
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *name, *eq;
		const struct config_key *k;
		size_t len;

		if (strncmp(a, "--", 2) != 0)
			return ember_seterr(err, EMBER_EINVAL,
					    "unexpected argument '%s'", a);
		name = a + 2;
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		if (len == 6 && memcmp(name, "config", 6) == 0 && eq)
			continue;
		/* Flags are spelled with dashes or underscores alike. */
		{
			char buf[64];
			size_t j;

			if (len >= sizeof(buf))
				goto unknown;
			for (j = 0; j < len; j++)
				buf[j] = name[j] == '-' ? '_' : name[j];
			k = key_find(buf, len);
		}
		if (k == NULL)
			goto unknown;
		if (eq == NULL && k->type != CFG_BOOL)
			return ember_seterr(err, EMBER_EINVAL,
					    "--%s needs a value: --%s=VALUE",
					    k->name, k->name);
		rc = key_set(c, k, eq ? eq + 1 : "true", detail);
		if (rc != 0)
			return ember_seterr(err, rc, "--%s", detail);
		continue;
unknown:
		return ember_seterr(err, EMBER_ENOTFOUND,
				    "unknown option '%s' (see --help)", a);
	}
	return 0;
}

int config_load(struct config *c, int argc, char **argv, char **envp,
		char *err)
{
	const char *path = NULL;
	size_t i;
	int rc;

	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], "EMBER_CONFIG=", 13) == 0)
			path = envp[i] + 13;
	for (i = 1; i < (size_t)argc; i++)
		if (strncmp(argv[i], "--config=", 9) == 0)
			path = argv[i] + 9;
	if (path != NULL && *path != '\0') {
		rc = config_load_file(c, path, err);
		if (rc != 0)
			return rc;
	}
	rc = config_apply_env(c, envp, err);
	if (rc == 0)
		rc = config_apply_args(c, argc, argv, err);
	if (rc == 0)
		rc = config_validate(c, err);
	return rc;
}

int config_validate(const struct config *c, char *err)
{
	if (c->model == NULL && !c->no_model)
		return ember_seterr(err, EMBER_EINVAL,
				    "no model configured: pass --model=PATH, "
				    "set EMBER_MODEL or 'model =' in the conf "
				    "file");
	if (c->host == NULL)
		return ember_seterr(err, EMBER_EINVAL, "host: must not be empty");
	if (c->replica_id != NULL) {
		size_t i, n = strlen(c->replica_id);

		/* No '-': the id's last '-' then ends the replica name. */
		for (i = 0; i < n; i++)
			if (!isalnum((unsigned char)c->replica_id[i]) &&
			    c->replica_id[i] != '_')
				break;
		if (i < n || n > CONFIG_REPLICA_ID_MAX)
			return ember_seterr(err, EMBER_EINVAL,
					    "replica_id: '%s' must be 1 to %d "
					    "letters, digits or _",
					    c->replica_id,
					    CONFIG_REPLICA_ID_MAX);
	}
	if (c->context != 0 && c->prefill_chunk > c->context)
		return ember_seterr(err, EMBER_ERANGE,
				    "prefill_chunk (%lld) exceeds context (%lld)",
				    (long long)c->prefill_chunk,
				    (long long)c->context);
	return 0;
}

static void write_range(FILE *f, const struct config_key *k)
{
	if (k->type == CFG_INT)
		fprintf(f, " [%lld..%lld]", (long long)k->min,
			(long long)k->max);
	else if (k->type == CFG_ENUM)
		fprintf(f, " [%s]", k->choices);
}

void config_write_example(FILE *f)
{
	size_t i;

	fputs("# emberd.conf - settings of the Ember daemon.\n"
	      "#\n"
	      "# Generated by `emberd --print-config`; every key is shown at its\n"
	      "# default, commented out. Syntax: `key = value`, # starts a comment.\n"
	      "# The same keys work as --key=value flags and EMBER_KEY environment\n"
	      "# variables; precedence: defaults < this file < environment < flags.\n",
	      f);
	for (i = 0; i < NKEYS; i++) {
		const struct config_key *k = &keys[i];

		if (k->flags & CFG_HIDDEN)
			continue;
		fprintf(f, "\n# %s", k->doc);
		write_range(f, k);
		fprintf(f, "\n#%s =%s%s\n", k->name, *k->def ? " " : "",
			k->def);
	}
}

void config_write_help(FILE *f)
{
	size_t i;

	fputs("usage: emberd [--config=PATH] [--key=value ...]\n"
	      "       emberd --help | --version | --print-config\n"
	      "\n"
	      "Every key can also be set as 'key = value' in the conf file or as\n"
	      "the environment variable EMBER_<KEY>; precedence: defaults < file\n"
	      "< environment < flags. --print-config writes an example conf file.\n"
	      "\n"
	      "keys (default):\n",
	      f);
	for (i = 0; i < NKEYS; i++) {
		const struct config_key *k = &keys[i];

		if (k->flags & CFG_HIDDEN)
			continue;
		fprintf(f, "  --%s=%s\n      %s", k->name,
			*k->def ? k->def : "\"\"", k->doc);
		write_range(f, k);
		fputc('\n', f);
	}
}

const char *config_log_level_name(int level)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};

	if (level < 0 || level > LOG_DEBUG)
		return "info";
	return names[level];
}

bool config_list_next(const char **cursor, const char **item, size_t *len)
{
	const char *p = *cursor, *end, *e;

	if (*p == '\0')
		return false;
	end = strchr(p, ',');
	if (end == NULL)
		end = p + strlen(p);
	e = end;
	while (p < e && *p == ' ')
		p++;
	while (e > p && e[-1] == ' ')
		e--;
	*item = p;
	*len = (size_t)(e - p);
	*cursor = *end ? end + 1 : end;
	return true;
}
