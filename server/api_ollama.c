/* api_ollama.c - Ollama's API: requests and the informational endpoints.
 * See api_ollama.h; the generation itself is ollama_gen.c. */
#include "api_ollama.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_openai.h"
#include "json_schema.h"
#include "ollama_gen.h"

/* ---- names and errors ------------------------------------------------------ */

bool api_ollama_model_ok(const char *name, const char *id)
{
	size_t n;

	if (!name || !id)
		return false;
	n = strlen(id);
	return strcmp(name, id) == 0 ||
	       (strncmp(name, id, n) == 0 && strcmp(name + n, ":latest") == 0);
}

void api_ollama_respond_error(struct http_req *req, const struct api_error *e)
{
	json_t *o = json_pack("{s:s}", "error", e->message);
	char num[16];

	if (e->retry_after > 0) {
		snprintf(num, sizeof(num), "%d", e->retry_after);
		http_req_add_header(req, "Retry-After", num);
	}
	http_respond_json(req, e->status ? e->status : 500,
			  o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

static int bad(struct api_error *e, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(struct api_error *e, const char *param, const char *fmt, ...)
{
	va_list ap;

	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value", "%s", "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return EMBER_EINVAL;
}

/* ---- options ------------------------------------------------------------------ */

/* Hints about hardware and loading that leave the output unchanged: a
 * client may send them; there is nothing to do with them here. */
static const char *const OLLAMA_HINTS[] = {
	"numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all",
	"vocab_only", "use_mmap", "use_mlock", "num_thread", "embedding_only", "num_keep",
};

static bool is_hint(const char *k)
{
	size_t i;

	for (i = 0; i < sizeof(OLLAMA_HINTS) / sizeof(OLLAMA_HINTS[0]); i++)
		if (!strcmp(k, OLLAMA_HINTS[i]))
			return true;
	return false;
}

const char *api_ollama_embed_option_refused(json_t *options)
{
	const char *k;
	json_t *v;

	json_object_foreach(options, k, v)
		if (!is_hint(k) && strcmp(k, "num_ctx") != 0 && !json_is_null(v))
			return k;
	return NULL;
}

static int num(json_t *v, const char *k, double lo, double hi, double *out, struct api_error *e)
{
	if (!json_is_number(v))
		return bad(e, k, "option '%s' must be a number", k);
	*out = json_number_value(v);
	if (!(*out >= lo && *out <= hi))
		return bad(e, k, "option '%s' must be in [%g, %g]", k, lo, hi);
	return 0;
}

static int integer(json_t *v, const char *k, json_int_t *out, struct api_error *e)
{
	if (!json_is_integer(v))
		return bad(e, k, "option '%s' must be an integer", k);
	*out = json_integer_value(v);
	return 0;
}

/* Stop strings stay C strings (detok matches them as such): a NUL is
 * refused by name rather than cutting one short. */
static int stop_has_nul(json_t *s)
{
	return strlen(json_string_value(s)) != json_string_length(s);
}

static int read_stop(json_t *v, struct gen_request *r, struct api_error *e)
{
	json_t *s;
	size_t i;

	if (json_is_string(v)) {
		if (json_string_length(v) == 0)
			return 0;
		if (stop_has_nul(v))
			return bad(e, "stop", "option 'stop' cannot hold a NUL character (\\u0000)");
		r->stop[0] = strdup(json_string_value(v));
		r->n_stop = r->stop[0] ? 1 : 0;
		return r->stop[0] ? 0 : api_error_oom(e);
	}
	if (!json_is_array(v))
		return bad(e, "stop", "option 'stop' must be an array of strings");
	if (json_array_size(v) > GEN_MAX_STOP)
		return bad(e, "stop", "option 'stop' holds %zu strings; at most %d are supported",
			   json_array_size(v), GEN_MAX_STOP);
	json_array_foreach(v, i, s) {
		if (!json_is_string(s) || json_string_length(s) == 0)
			return bad(e, "stop", "option 'stop' must hold non-empty strings");
		if (stop_has_nul(s))
			return bad(e, "stop", "option 'stop' cannot hold a NUL character (\\u0000)");
		if (!(r->stop[r->n_stop] = strdup(json_string_value(s))))
			return api_error_oom(e);
		r->n_stop++;
	}
	return 0;
}

/* One option that has a neutral value: accepted only at it. */
static int neutral(json_t *v, const char *k, double want, struct api_error *e)
{
	if (json_is_number(v) && json_number_value(v) == want)
		return 0;
	return bad(e, k, "option '%s' is not supported (only %g, which turns it off)", k, want);
}

int api_ollama_read_options(json_t *o, const struct api_ollama_limits *lim,
			    struct gen_request *r, struct api_error *e)
{
	const char *k;
	json_t *v;
	json_int_t n = 0;
	double x = 0;
	int rc = 0;

	if (!json_is_object(o))
		return bad(e, "options", "'options' must be an object");
	json_object_foreach(o, k, v) {
		if (json_is_null(v) || is_hint(k))
			continue;
		if (!strcmp(k, "temperature")) {
			if (!(rc = num(v, k, 0, 2, &x, e)))
				r->temperature = (float)x;
		} else if (!strcmp(k, "top_k")) {
			if (!(rc = integer(v, k, &n, e)))
				r->top_k = n < 0 ? 0 : n > INT32_MAX ? INT32_MAX : (int32_t)n;
		} else if (!strcmp(k, "top_p")) {
			if (!(rc = num(v, k, 0, 1, &x, e)))
				r->top_p = x > 0 ? (float)x : 1.0f; /* 0 turns it off, as Ollama */
		} else if (!strcmp(k, "min_p")) {
			if (!(rc = num(v, k, 0, 1, &x, e)))
				r->min_p = (float)x;
		} else if (!strcmp(k, "seed")) {
			if (!(rc = integer(v, k, &n, e))) {
				r->has_seed = true;
				r->seed = (uint64_t)n;
			}
		} else if (!strcmp(k, "num_predict")) {
			/* 0, -1 (no limit) and -2 (fill the context): the server's cap */
			if (!(rc = integer(v, k, &n, e)) && n > 0 && n < lim->max_tokens)
				r->max_tokens = (int32_t)n;
		} else if (!strcmp(k, "stop")) {
			rc = read_stop(v, r, e);
		} else if (!strcmp(k, "repeat_penalty")) {
			if (!(rc = num(v, k, 0, 1e6, &x, e)))
				r->repeat_penalty = x > 0 ? (float)x : 1.0f;
		} else if (!strcmp(k, "repeat_last_n")) {
			/* -1: the whole context, as Ollama */
			if (!(rc = integer(v, k, &n, e)))
				r->repeat_last_n = n < 0 || n > 65536 ? 65536 : (int32_t)n;
		} else if (!strcmp(k, "presence_penalty")) {
			if (!(rc = num(v, k, -2, 2, &x, e)))
				r->presence_penalty = (float)x;
		} else if (!strcmp(k, "frequency_penalty")) {
			if (!(rc = num(v, k, -2, 2, &x, e)))
				r->frequency_penalty = (float)x;
		} else if (!strcmp(k, "num_ctx")) {
			if (!(rc = integer(v, k, &n, e)) && lim->n_ctx > 0 && n > lim->n_ctx)
				rc = bad(e, k, "option 'num_ctx' %lld exceeds this server's context "
					 "of %lld tokens", (long long)n, (long long)lim->n_ctx);
		} else if (!strcmp(k, "mirostat")) {
			rc = neutral(v, k, 0, e);
		} else if (!strcmp(k, "mirostat_tau") || !strcmp(k, "mirostat_eta")) {
			/* only used with mirostat, which stays 0 */
			rc = json_is_number(v) ? 0 : bad(e, k, "option '%s' must be a number", k);
		} else if (!strcmp(k, "tfs_z") || !strcmp(k, "typical_p")) {
			rc = neutral(v, k, 1, e);
		} else if (!strcmp(k, "penalize_newline")) {
			if (!json_is_true(v))
				rc = bad(e, k, "option 'penalize_newline' false is not supported");
		} else {
			rc = bad(e, k, "option '%.64s' is not supported", k);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- generate / chat bodies ----------------------------------------------------- */

/* A string field; `nul_ok`: it may hold NUL ("\u0000", an ordinary
 * character of the texts that are copied by length). */
static int str_field(json_t *root, const char *k, bool nul_ok, json_t **out, struct api_error *e)
{
	*out = api_openai_field(root, k);
	if (*out && !json_is_string(*out))
		return bad(e, k, "'%s' must be a string", k);
	if (*out && !nul_ok && strlen(json_string_value(*out)) != json_string_length(*out))
		return bad(e, k, "'%s' must not hold NUL characters", k);
	return 0;
}

/* Fields Ollama has and this server does not: refused when they ask for
 * something (non-empty, true). */
static int refuse_unsupported(json_t *root, bool chat, struct api_error *e)
{
	static const char *const when_set[] = {"images", "template", "suffix", "context",
					       "tools"};
	json_t *v;
	size_t i;

	for (i = 0; i < sizeof(when_set) / sizeof(when_set[0]); i++) {
		v = api_openai_field(root, when_set[i]);
		if (!v || (json_is_string(v) && json_string_length(v) == 0) ||
		    (json_is_array(v) && json_array_size(v) == 0))
			continue;
		if (chat && (!strcmp(when_set[i], "template") || !strcmp(when_set[i], "suffix")))
			continue;
		return bad(e, when_set[i], "'%s' is not supported by this server",
			   when_set[i]);
	}
	v = api_openai_field(root, "think");
	if (v && !json_is_false(v))
		return bad(e, "think", "'think' is not supported by this server");
	return 0;
}

static int read_format(json_t *root, struct gen_request *r, struct api_error *e)
{
	char err[JSON_SCHEMA_ERR_MAX];
	json_t *v = api_openai_field(root, "format");

	if (!v || (json_is_string(v) && json_string_length(v) == 0))
		return 0;
	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "json") != 0)
			return bad(e, "format", "'format' must be \"json\" or a JSON schema");
		r->grammar = json_schema_any_object();
		return r->grammar ? 0 : api_error_oom(e);
	}
	if (!json_is_object(v))
		return bad(e, "format", "'format' must be \"json\" or a JSON schema");
	if (json_schema_to_gbnf(v, &r->grammar, err) != 0)
		return bad(e, "format", "'format': %s", err);
	return 0;
}

/* A message of the JSON string `text` (NULL: ""), copied by length. */
static int add_message(struct gen_request *r, enum gen_role role, json_t *text,
		       struct api_error *e)
{
	struct gen_message *m = &r->messages[r->n_messages];
	size_t n = text ? json_string_length(text) : 0;

	m->role = role;
	if (!(m->content = malloc(n + 1)))
		return api_error_oom(e);
	memcpy(m->content, text ? json_string_value(text) : "", n + 1);
	m->content_len = n;
	r->n_messages++;
	return 0;
}

static int read_messages(json_t *v, struct gen_request *r, struct api_error *e)
{
	json_t *m, *c, *role;
	char p[64];
	size_t i;

	if (!json_is_array(v))
		return bad(e, "messages", "'messages' must be an array");
	if (!(r->messages = calloc(json_array_size(v) + 1, sizeof(*r->messages))))
		return api_error_oom(e);
	json_array_foreach(v, i, m) {
		const char *rs;
		enum gen_role gr;
		json_t *x;

		if (!json_is_object(m))
			return bad(e, "messages", "messages[%zu] must be an object", i);
		role = json_object_get(m, "role");
		rs = json_is_string(role) && strlen(json_string_value(role)) == json_string_length(role)
			     ? json_string_value(role) : "";
		if (!strcmp(rs, "system"))
			gr = GEN_ROLE_SYSTEM;
		else if (!strcmp(rs, "user"))
			gr = GEN_ROLE_USER;
		else if (!strcmp(rs, "assistant"))
			gr = GEN_ROLE_ASSISTANT;
		else if (!strcmp(rs, "tool"))
			gr = GEN_ROLE_TOOL;
		else
			return bad(e, "messages", "messages[%zu].role must be system, user, "
				   "assistant or tool", i);
		snprintf(p, sizeof(p), "messages[%zu]", i);
		x = api_openai_field(m, "images");
		if (x && !(json_is_array(x) && json_array_size(x) == 0))
			return bad(e, "images", "%s.images: images are not supported by this "
				   "server", p);
		x = api_openai_field(m, "tool_calls");
		if (x && !(json_is_array(x) && json_array_size(x) == 0))
			return bad(e, "tool_calls", "%s.tool_calls: tool calls are not "
				   "supported on /api/chat by this server", p);
		x = api_openai_field(m, "thinking");
		if (x && !(json_is_string(x) && json_string_length(x) == 0))
			return bad(e, "thinking", "%s.thinking is not supported by this server", p);
		c = api_openai_field(m, "content");
		if (c && !json_is_string(c))
			return bad(e, "content", "%s.content must be a string", p);
		if (add_message(r, gr, c, e))
			return EMBER_ENOMEM;
	}
	return 0;
}

/* /api/generate: raw sends the prompt as is; otherwise it is a user turn
 * (after `system`) rendered with the model's chat template, as Ollama. */
static int read_generate(json_t *root, struct gen_request *r, struct api_ollama_extra *x,
			 struct api_error *e)
{
	json_t *prompt, *system, *raw = api_openai_field(root, "raw");
	int rc;

	if ((rc = str_field(root, "prompt", true, &prompt, e)) ||
	    (rc = str_field(root, "system", true, &system, e)))
		return rc;
	if (raw && !json_is_boolean(raw))
		return bad(e, "raw", "'raw' must be a boolean");
	if (!prompt || json_string_length(prompt) == 0) {
		x->load_only = true; /* Ollama loads the model and says so */
		return 0;
	}
	if (raw && json_is_true(raw)) {
		if (system && json_string_length(system))
			return bad(e, "system", "'system' cannot be used with 'raw': the prompt "
				   "is sent as is");
		r->kind = GEN_COMPLETION;
		r->prompt_len = json_string_length(prompt);
		if (!(r->prompt = malloc(r->prompt_len + 1)))
			return api_error_oom(e);
		memcpy(r->prompt, json_string_value(prompt), r->prompt_len + 1);
		return 0;
	}
	if (!(r->messages = calloc(2, sizeof(*r->messages))))
		return api_error_oom(e);
	if (system && json_string_length(system) &&
	    add_message(r, GEN_ROLE_SYSTEM, system, e))
		return EMBER_ENOMEM;
	return add_message(r, GEN_ROLE_USER, prompt, e);
}

int api_ollama_parse(const char *body, size_t len, const struct api_ollama_limits *lim,
		     struct gen_request *r, struct api_ollama_extra *x, struct api_error *e)
{
	json_t *root, *v;
	int rc = EMBER_EINVAL;

	gen_request_init(r, GEN_CHAT, lim->max_tokens);
	r->stream = true;
	x->load_only = false;
	memset(e, 0, sizeof(*e));
	if (!(root = api_openai_decode_object(body, len, e)))
		return EMBER_EINVAL;
	if ((rc = str_field(root, "model", false, &v, e)))
		goto out;
	if (!v || json_string_length(v) == 0) {
		rc = bad(e, "model", "model is required");
		goto out;
	}
	if (!(r->model = strdup(json_string_value(v)))) {
		rc = api_error_oom(e);
		goto out;
	}
	if ((rc = refuse_unsupported(root, x->chat, e)))
		goto out;
	v = api_openai_field(root, "stream");
	if (v && !json_is_boolean(v)) {
		rc = bad(e, "stream", "'stream' must be a boolean");
		goto out;
	}
	if (v)
		r->stream = json_is_true(v);
	v = api_openai_field(root, "keep_alive"); /* the model stays loaded whatever it says */
	if (v && !json_is_string(v) && !json_is_number(v)) {
		rc = bad(e, "keep_alive", "'keep_alive' must be a duration string or a number");
		goto out;
	}
	if (x->chat) {
		v = api_openai_field(root, "messages");
		if (!v || (json_is_array(v) && json_array_size(v) == 0))
			x->load_only = true;
		else
			rc = read_messages(v, r, e);
	} else {
		rc = read_generate(root, r, x, e);
	}
	if (rc)
		goto out;
	if ((v = api_openai_field(root, "options")) && (rc = api_ollama_read_options(v, lim, r, e)))
		goto out;
	rc = read_format(root, r, e);
out:
	json_decref(root);
	if (rc)
		gen_request_free(r);
	return rc;
}

/* ---- informational endpoints ------------------------------------------------------ */

void api_ollama_root(struct http_req *req)
{
	static const char text[] = "Ollama is running";

	http_respond(req, 200, "text/plain; charset=utf-8", text, sizeof(text) - 1);
}

void api_ollama_version(struct http_req *req)
{
	json_t *o = json_pack("{s:s}", "version", EMBER_VERSION);

	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

static void iso_time(int64_t t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "1.1B", "270M": Ollama's parameter_size. */
static void param_size(uint64_t n, char *buf, size_t size)
{
	if (n >= 1000000000ull)
		snprintf(buf, size, "%.1fB", (double)n / 1e9);
	else if (n >= 1000000ull)
		snprintf(buf, size, "%.0fM", (double)n / 1e6);
	else
		snprintf(buf, size, "%.0fK", (double)n / 1e3);
}

/* Not a SHA-256 of the file (hashing gigabytes per listing is not worth
 * it): an FNV-1a identifier of its name, size and mtime, as 64 hex
 * digits, stable while the file is unchanged. */
static void digest(const char *id, const struct backend_model_info *mi, char *out)
{
	uint64_t h = 1469598103934665603ull, parts[4];
	int i;
	const char *p;

	for (p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	for (i = 0; i < 4; i++) {
		h = (h ^ (i == 0 ? mi->file_size : (uint64_t)mi->mtime + (uint64_t)i)) *
		    1099511628211ull;
		parts[i] = h;
	}
	snprintf(out, 65, "%016llx%016llx%016llx%016llx", (unsigned long long)parts[0],
		 (unsigned long long)parts[1], (unsigned long long)parts[2],
		 (unsigned long long)parts[3]);
}

static json_t *details(const struct backend_model_info *mi)
{
	char ps[32], q[32];
	size_t i;

	param_size(mi->n_params, ps, sizeof(ps));
	snprintf(q, sizeof(q), "%s", mi->weight_type ? mi->weight_type : "unknown");
	for (i = 0; q[i]; i++)
		q[i] = (char)(q[i] >= 'a' && q[i] <= 'z' ? q[i] - 32 : q[i]);
	return json_pack("{s:s,s:s,s:s,s:[s],s:s,s:s}", "parent_model", "", "format", "gguf",
			 "family", mi->arch, "families", mi->arch, "parameter_size", ps,
			 "quantization_level", q);
}

/* The served model in /api/tags (running false) or /api/ps (true). */
static json_t *model_entry(const char *id, const struct backend_model_info *mi, bool running)
{
	char name[160], when[32], dg[65];
	json_t *o;

	snprintf(name, sizeof(name), "%s:latest", id);
	digest(id, mi, dg);
	iso_time(mi->mtime, when, sizeof(when));
	o = json_pack("{s:s,s:s,s:I,s:s,s:o}", "name", name, "model", name, "size",
		      (json_int_t)mi->file_size, "digest", dg, "details", details(mi));
	if (!o)
		return NULL;
	if (running) {
		/* Loaded for the daemon's life: no expiry (Ollama's far future). */
		json_object_set_new(o, "expires_at", json_string("2318-01-01T00:00:00Z"));
		json_object_set_new(o, "size_vram", json_integer(0));
		json_object_set_new(o, "context_length", json_integer(mi->n_ctx));
	} else {
		json_object_set_new(o, "modified_at", json_string(when));
	}
	return o;
}

void api_ollama_tags(struct backend *b, struct http_req *req, bool running)
{
	struct backend_model_info mi;
	const char *id = backend_model_id(b);
	json_t *list = json_array(), *o;

	if (list && id && backend_model_info(b, &mi) == 0)
		json_array_append_new(list, model_entry(id, &mi, running));
	o = json_pack("{s:o}", "models", list);
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

void api_ollama_show(struct backend *b, struct http_req *req)
{
	struct backend_model_info mi;
	const char *id = backend_model_id(b);
	json_t *root, *v, *o = NULL, *info;
	struct api_error e;
	char key[128], when[32];

	if (!(root = api_openai_decode_object(req->body, req->body_len, &e))) {
		api_ollama_respond_error(req, &e);
		return;
	}
	v = api_openai_field(root, "model");
	if (!v)
		v = api_openai_field(root, "name"); /* older clients */
	if (!json_is_string(v) || json_string_length(v) == 0) {
		bad(&e, "model", "model is required");
	} else if (!api_ollama_model_ok(json_string_value(v), id)) {
		api_error_set(&e, 404, API_ERR_NOT_FOUND, "model", NULL, "model '%.100s' not found",
			      json_string_value(v));
	} else if (backend_model_info(b, &mi) != 0) {
		api_error_not_loaded(&e, backend_status(b, NULL) == BACKEND_LOADING);
	} else {
		e.status = 0;
	}
	json_decref(root);
	if (e.status) {
		api_ollama_respond_error(req, &e);
		return;
	}
	info = json_pack("{s:s,s:I}", "general.architecture", mi.arch,
			 "general.parameter_count", (json_int_t)mi.n_params);
#define INFO(suffix, val)                                                          \
	do {                                                                       \
		snprintf(key, sizeof(key), "%s." suffix, mi.arch);                 \
		json_object_set_new(info, key, json_integer((json_int_t)(val)));   \
	} while (0)
	if (info) {
		INFO("context_length", mi.n_ctx_train);
		INFO("embedding_length", mi.n_embd);
		INFO("block_count", mi.n_layer);
		INFO("attention.head_count", mi.n_head);
		INFO("vocab_size", mi.n_vocab);
	}
#undef INFO
	iso_time(mi.mtime, when, sizeof(when));
	o = json_pack("{s:s,s:s,s:s%,s:o,s:o,s:[s,s],s:s}", "modelfile", "", "parameters", "",
		      "template", mi.chat_template, mi.chat_template_len, "details", details(&mi),
		      "model_info", info, "capabilities", "completion", "embedding",
		      "modified_at", when);
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

/* ---- generate / chat --------------------------------------------------------------- */

void api_ollama_generate(uv_loop_t *loop, struct backend *b, struct http_req *req, bool chat,
			 int32_t max_tokens)
{
	struct api_ollama_limits lim = {.max_tokens = max_tokens, .n_ctx = backend_context(b)};
	struct api_ollama_extra x = {.chat = chat};
	const char *id = backend_model_id(b);
	struct gen_request gr;
	struct api_error e;

	/* No Content-Type check: Ollama reads any body as JSON (curl -d sends
	 * form encoding), and so do these routes. */
	if (api_ollama_parse(req->body, req->body_len, &lim, &gr, &x, &e) != 0) {
		api_ollama_respond_error(req, &e);
		return;
	}
	if (!api_ollama_model_ok(gr.model, id)) {
		api_error_set(&e, 404, API_ERR_NOT_FOUND, "model", NULL, "model '%.100s' not found",
			      gr.model);
		gen_request_free(&gr);
		api_ollama_respond_error(req, &e);
		return;
	}
	if (x.load_only) {
		ollama_gen_respond_loaded(req, &gr, chat);
		gen_request_free(&gr);
		return;
	}
	ollama_gen_start(loop, b, req, &gr, chat);
}
