/* api_openai.c - OpenAI request bodies into struct gen_request. See
 * api_openai.h. */
#include "api_openai.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_fields.h"
#include "ember.h"
#include "grammar.h"
#include "json_schema.h"
#include "tool_call.h"

/* Whether `ct` names media type `want` (then the end or parameters). */
static bool media_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	return strncasecmp(ct, want, n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

int api_openai_check_content_type(const char *ct, struct api_error *e)
{
	if (ct == NULL)
		return 0;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	/* Form encoding is what curl -d sends without -H; the body is
	 * parsed as JSON all the same (a form body fails as invalid JSON). */
	if (media_is(ct, "application/json") ||
	    media_is(ct, "application/x-www-form-urlencoded"))
		return 0;
	api_error_set(e, 415, API_ERR_INVALID_REQUEST, NULL,
		      "unsupported_media_type",
		      "Content-Type must be application/json");
	return EMBER_EINVAL;
}

int api_openai_check_depth(const char *body, size_t len, int max_depth)
{
	int depth = 0, in_str = 0;
	size_t i;

	for (i = 0; i < len; i++) {
		char c = body[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
			continue;
		}
		if (c == '"')
			in_str = 1;
		else if (c == '[' || c == '{') {
			if (++depth > max_depth)
				return EMBER_EINVAL;
		} else if (c == ']' || c == '}')
			depth--;
	}
	return 0;
}

/* ---- field readers: each returns 0, or -1 with `e` filled ------------ */

static int bad(struct api_error *e, const char *param, const char *fmt,
	       const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
		      fmt, param, what);
	return EMBER_EINVAL;
}

static int wrong_type(struct api_error *e, const char *param, const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_type",
		      "Invalid type for '%s': expected %s.", param, what);
	return EMBER_EINVAL;
}

json_t *api_openai_field(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

static int read_number(json_t *obj, const char *key, double lo, double hi,
		       int lo_open, float *out, struct api_error *e)
{
	json_t *v = api_openai_field(obj, key);
	double x;

	if (v == NULL)
		return 0;
	if (!json_is_number(v))
		return wrong_type(e, key, "a number");
	x = json_number_value(v);
	if (!(x >= lo && x <= hi) || (lo_open && x <= lo)) {
		char range[64];

		snprintf(range, sizeof(range), "%s%g, %g]", lo_open ? "(" : "[",
			 lo, hi);
		return bad(e, key, "'%s' must be in %s.", range);
	}
	*out = (float)x;
	return 0;
}

static int read_int(json_t *obj, const char *key, json_int_t lo, json_int_t hi,
		    json_int_t *out, struct api_error *e)
{
	json_t *v = api_openai_field(obj, key);
	json_int_t x;

	if (v == NULL)
		return 0;
	if (!json_is_integer(v))
		return wrong_type(e, key, "an integer");
	x = json_integer_value(v);
	if (x < lo || x > hi) {
		char range[64];

		snprintf(range, sizeof(range), "[%lld, %lld]", (long long)lo,
			 (long long)hi);
		return bad(e, key, "'%s' must be in %s.", range);
	}
	*out = x;
	return 0;
}

static int read_bool(json_t *obj, const char *key, bool *out,
		     struct api_error *e)
{
	json_t *v = api_openai_field(obj, key);

	if (v == NULL)
		return 0;
	if (!json_is_boolean(v))
		return wrong_type(e, key, "a boolean");
	*out = json_is_true(v);
	return 0;
}

/* A JSON string as a C string. "\u0000" is valid JSON but would silently
 * cut a C string short: refused here, by the field's name `param`, where
 * the length is not carried (the prompt and message contents carry it; see
 * read_prompt, read_content). */
static int dup_string(json_t *v, char **out, const char *param, struct api_error *e)
{
	if (strlen(json_string_value(v)) != json_string_length(v)) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
			      "'%s' cannot hold a NUL character (\\u0000); it is supported "
			      "in 'prompt' and message contents only.", param);
		return EMBER_EINVAL;
	}
	*out = strdup(json_string_value(v));
	return *out ? 0 : api_error_oom(e);
}

static int read_stop(json_t *obj, struct gen_request *r, struct api_error *e)
{
	json_t *v = api_openai_field(obj, "stop"), *s;
	char most[16];
	size_t i;
	int rc;

	if (v == NULL)
		return 0;
	if (json_is_string(v)) {
		if (json_string_length(v) == 0)
			return bad(e, "stop", "'%s' must not be empty%s.", "");
		r->n_stop = 1;
		return dup_string(v, &r->stop[0], "stop", e);
	}
	if (!json_is_array(v))
		return wrong_type(e, "stop", "a string or an array of strings");
	snprintf(most, sizeof(most), "%d", GEN_MAX_STOP);
	if (json_array_size(v) > GEN_MAX_STOP)
		return bad(e, "stop", "'%s' holds at most %s strings.", most);
	json_array_foreach(v, i, s) {
		if (!json_is_string(s))
			return wrong_type(e, "stop", "an array of strings");
		if (json_string_length(s) == 0)
			return bad(e, "stop", "'%s' must not hold empty strings%s.",
				   "");
		if ((rc = dup_string(s, &r->stop[r->n_stop], "stop", e)) != 0)
			return rc;
		r->n_stop++;
	}
	return 0;
}

/* ---- structured output ------------------------------------------------ */

static int structured_error(struct api_error *e, const char *param, const char *msg)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
		      "'%s': %s", param, msg);
	return EMBER_EINVAL;
}

/* A schema into r->grammar; errors name `param`. */
static int use_schema(json_t *schema, const char *param, struct gen_request *r,
		      struct api_error *e)
{
	char err[JSON_SCHEMA_ERR_MAX];

	if (!json_is_object(schema) && !json_is_boolean(schema))
		return wrong_type(e, param, "a JSON Schema object");
	if (json_schema_to_gbnf(schema, &r->grammar, err) != 0)
		return structured_error(e, param, err);
	return 0;
}

static int read_response_format(json_t *rf, struct gen_request *r,
				struct api_error *e)
{
	json_t *t, *js, *v;
	const char *type;

	if (!json_is_object(rf))
		return wrong_type(e, "response_format", "an object");
	t = json_object_get(rf, "type");
	if (!json_is_string(t))
		return wrong_type(e, "response_format.type", "a string");
	type = json_string_value(t);
	if (!strcmp(type, "text"))
		return 0;
	if (!strcmp(type, "json_object")) {
		r->grammar = json_schema_any_object();
		return r->grammar ? 0 : api_error_oom(e);
	}
	if (strcmp(type, "json_schema") != 0) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "response_format.type",
			      "invalid_value",
			      "response_format type '%.64s' is not supported (text, "
			      "json_object, json_schema are).", type);
		return EMBER_EINVAL;
	}
	js = json_object_get(rf, "json_schema");
	if (!json_is_object(js))
		return wrong_type(e, "response_format.json_schema", "an object");
	v = json_object_get(js, "name");
	if (v != NULL && !json_is_string(v))
		return wrong_type(e, "response_format.json_schema.name", "a string");
	v = json_object_get(js, "strict");
	if (v != NULL && !json_is_null(v) && !json_is_boolean(v))
		return wrong_type(e, "response_format.json_schema.strict", "a boolean");
	v = json_object_get(js, "schema");
	if (v == NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST,
			      "response_format.json_schema.schema",
			      "missing_required_parameter",
			      "Missing required parameter: "
			      "'response_format.json_schema.schema'.");
		return EMBER_EINVAL;
	}
	/* strict or not, the output is constrained: a schema is never only a
	 * hint here. */
	return use_schema(v, "response_format.json_schema.schema", r, e);
}

/*
 * response_format (OpenAI), json_schema and grammar (llama.cpp's server):
 * at most one, compiled to r->grammar. Tool fields outside chat are refused
 * rather than ignored (chat's: tool_call.c).
 */
static int read_structured(json_t *root, bool render_only, struct gen_request *r,
			   struct api_error *e)
{
	static const char *const fields[] = {"response_format", "json_schema",
					     "grammar"};
	json_t *v, *tc;
	const char *given = NULL;
	size_t i;

	if (!render_only && r->kind != GEN_CHAT &&
	    (api_openai_field(root, "tools") || api_openai_field(root, "functions") ||
	     api_openai_field(root, "function_call") ||
	     ((tc = api_openai_field(root, "tool_choice")) &&
	      !(json_is_string(tc) && !strcmp(json_string_value(tc), "none"))))) {
		const char *f = api_openai_field(root, "tools") ? "tools"
				: api_openai_field(root, "functions") ? "functions"
				: api_openai_field(root, "function_call") ? "function_call"
				: "tool_choice";

		api_error_set(e, 400, API_ERR_INVALID_REQUEST, f, "unsupported_parameter",
			      "'%s' is not supported here: tool calling needs "
			      "/v1/chat/completions.", f);
		return EMBER_EINVAL;
	}
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (api_openai_field(root, fields[i]) == NULL)
			continue;
		if (given != NULL) {
			api_error_set(e, 400, API_ERR_INVALID_REQUEST, fields[i],
				      "invalid_value",
				      "'%s' and '%s' cannot be used together.", given,
				      fields[i]);
			return EMBER_EINVAL;
		}
		given = fields[i];
	}
	if ((v = api_openai_field(root, "response_format")) != NULL)
		return read_response_format(v, r, e);
	if ((v = api_openai_field(root, "json_schema")) != NULL)
		return use_schema(v, "json_schema", r, e);
	if ((v = api_openai_field(root, "grammar")) != NULL) {
		struct grammar *g = NULL;
		char err[EMBER_ERR_MAX];

		if (!json_is_string(v))
			return wrong_type(e, "grammar", "a string (GBNF)");
		if (json_string_length(v) == 0)
			return 0; /* llama.cpp's clients send "" for none */
		if (grammar_parse_gbnf(&g, json_string_value(v), json_string_length(v),
				       err) != 0)
			return structured_error(e, "grammar", err);
		grammar_free(g);
		return dup_string(v, &r->grammar, "grammar", e);
	}
	return 0;
}

/* Fields shared by both endpoints. */
static int read_common(json_t *root, const struct api_limits *lim,
		       struct gen_request *r, struct api_error *e)
{
	json_int_t x, mt = -1, mct = -1;
	json_t *v, *so;
	int rc;

	if ((v = api_openai_field(root, "model")) != NULL) {
		if (!json_is_string(v))
			return wrong_type(e, "model", "a string");
		if ((rc = dup_string(v, &r->model, "model", e)) != 0)
			return rc;
	}
	if ((rc = read_int(root, "max_tokens", 1, INT64_MAX, &mt, e)) != 0 ||
	    (rc = read_int(root, "max_completion_tokens", 1, INT64_MAX, &mct, e)) != 0)
		return rc;
	/* The newer name wins when a client sends both. Above the server's
	 * cap it is clamped, not refused: clients routinely send a large
	 * max_tokens meaning "as much as you will give", and the answer's
	 * finish_reason "length" tells them where it stopped. */
	if (mct > 0 || mt > 0)
		r->max_tokens = (int32_t)((mct > 0 ? mct : mt) > lim->max_tokens
						  ? lim->max_tokens
						  : (mct > 0 ? mct : mt));
	if ((rc = read_number(root, "temperature", 0, 2, 0, &r->temperature, e)) ||
	    (rc = read_number(root, "top_p", 0, 1, 1, &r->top_p, e)) ||
	    (rc = read_number(root, "min_p", 0, 1, 0, &r->min_p, e)) ||
	    (rc = read_number(root, "presence_penalty", -2, 2, 0,
			      &r->presence_penalty, e)) ||
	    (rc = read_number(root, "frequency_penalty", -2, 2, 0,
			      &r->frequency_penalty, e)))
		return rc;
	x = 0;
	if ((rc = read_int(root, "top_k", 0, INT32_MAX, &x, e)) != 0)
		return rc;
	r->top_k = (int32_t)x;
	if (api_openai_field(root, "seed") != NULL) {
		if ((rc = read_int(root, "seed", INT64_MIN, INT64_MAX, &x, e)) != 0)
			return rc;
		r->has_seed = true;
		r->seed = (uint64_t)x;
	}
	x = 1;
	if ((rc = read_int(root, "n", 1, 128, &x, e)) != 0)
		return rc;
	r->n = (uint32_t)x;
	if ((rc = read_stop(root, r, e)) != 0 ||
	    (rc = read_bool(root, "stream", &r->stream, e)) != 0)
		return rc;
	if ((so = api_openai_field(root, "stream_options")) != NULL) {
		if (!json_is_object(so))
			return wrong_type(e, "stream_options", "an object");
		if (!r->stream)
			return bad(e, "stream_options",
				   "'%s' is only allowed when stream is true%s.",
				   "");
		if (read_bool(so, "include_usage", &r->include_usage, e) != 0) {
			snprintf(e->param, sizeof(e->param),
				 "stream_options.include_usage");
			return EMBER_EINVAL;
		}
	}
	return 0;
}

/* Content: a string, or an array of {"type":"text","text":...} parts,
 * joined with "\n"; *out_len bytes, NUL included ("\u0000" is an
 * ordinary character): copied by length. */
static int read_content(json_t *v, const char *param, char **out, size_t *out_len,
			struct api_error *e)
{
	size_t i, total = 0, n = 0;
	json_t *part, *t;
	char *buf;

	if (json_is_string(v)) {
		n = json_string_length(v);
		if ((*out = malloc(n + 1)) == NULL)
			return api_error_oom(e);
		memcpy(*out, json_string_value(v), n + 1);
		*out_len = n;
		return 0;
	}
	if (!json_is_array(v))
		return wrong_type(e, param, "a string or an array of text parts");
	json_array_foreach(v, i, part) {
		t = json_object_get(part, "type");
		if (!json_is_string(t) ||
		    strcmp(json_string_value(t), "text") != 0 ||
		    !json_is_string(json_object_get(part, "text")))
			return bad(e, param,
				   "'%s' parts must be {\"type\": \"text\", "
				   "\"text\": string}%s.", "");
		total += json_string_length(json_object_get(part, "text")) + 1;
	}
	buf = malloc(total + 1);
	if (buf == NULL)
		return api_error_oom(e);
	json_array_foreach(v, i, part) {
		t = json_object_get(part, "text");
		if (i > 0)
			buf[n++] = '\n';
		memcpy(buf + n, json_string_value(t), json_string_length(t));
		n += json_string_length(t);
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
}

static int read_role(json_t *v, const char *param, enum gen_role *role,
		     struct api_error *e)
{
	const char *s;

	if (!json_is_string(v))
		return wrong_type(e, param, "a string");
	/* "user\u0000x" must not read as "user": a NUL fails every name */
	s = strlen(json_string_value(v)) == json_string_length(v) ? json_string_value(v) : "";
	if (!strcmp(s, "system") || !strcmp(s, "developer"))
		*role = GEN_ROLE_SYSTEM;
	else if (!strcmp(s, "user"))
		*role = GEN_ROLE_USER;
	else if (!strcmp(s, "assistant"))
		*role = GEN_ROLE_ASSISTANT;
	else if (!strcmp(s, "tool"))
		*role = GEN_ROLE_TOOL;
	else
		return bad(e, param,
			   "'%s' must be system, developer, user, assistant "
			   "or tool%s.", "");
	return 0;
}

/* A JSON value as compact text the chat template reads (tools, tool calls). */
static int dump_json(json_t *v, char **out, struct api_error *e)
{
	*out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	return *out == NULL ? api_error_oom(e) : 0;
}

/* An assistant's tool_calls (an array, kept as JSON text) and a tool
 * message's tool_call_id. */
static int read_tool_fields(json_t *m, size_t i, struct gen_message *msg,
			    struct api_error *e)
{
	json_t *calls = json_object_get(m, "tool_calls");
	json_t *id = json_object_get(m, "tool_call_id");
	char param[64];
	int rc;

	if (calls != NULL && !json_is_null(calls)) {
		snprintf(param, sizeof(param), "messages[%zu].tool_calls", i);
		if (!json_is_array(calls))
			return wrong_type(e, param, "an array");
		if (msg->role != GEN_ROLE_ASSISTANT)
			return bad(e, param, "'%s' is allowed on assistant "
				   "messages only%s.", "");
		if ((rc = dump_json(calls, &msg->tool_calls, e)) != 0)
			return rc;
	}
	if (id != NULL && !json_is_null(id)) {
		snprintf(param, sizeof(param), "messages[%zu].tool_call_id", i);
		if (!json_is_string(id))
			return wrong_type(e, param, "a string");
		if ((rc = dup_string(id, &msg->tool_call_id, param, e)) != 0)
			return rc;
	}
	return 0;
}

/* "tools": an array of tool definitions, handed to the chat template. */
static int read_tools(json_t *root, struct gen_request *r,
		      struct api_error *e)
{
	json_t *v = api_openai_field(root, "tools");

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return wrong_type(e, "tools", "an array");
	if (json_array_size(v) == 0)
		return 0;
	return dump_json(v, &r->tools, e);
}

static int read_messages(json_t *root, struct gen_request *r,
			 struct api_error *e)
{
	json_t *v = api_openai_field(root, "messages"), *m, *c;
	char param[64];
	size_t i;
	int rc;

	if (v == NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "messages",
			      "missing_required_parameter",
			      "Missing required parameter: 'messages'.");
		return EMBER_EINVAL;
	}
	if (!json_is_array(v))
		return wrong_type(e, "messages", "an array");
	if (json_array_size(v) == 0)
		return bad(e, "messages", "'%s' must not be empty%s.", "");
	r->messages = calloc(json_array_size(v), sizeof(*r->messages));
	if (r->messages == NULL)
		return api_error_oom(e);
	json_array_foreach(v, i, m) {
		struct gen_message *msg = &r->messages[i];

		snprintf(param, sizeof(param), "messages[%zu]", i);
		if (!json_is_object(m))
			return wrong_type(e, param, "an object");
		snprintf(param, sizeof(param), "messages[%zu].role", i);
		if ((rc = read_role(json_object_get(m, "role"), param, &msg->role, e)))
			return rc;
		r->n_messages++; /* from here gen_request_free frees it */
		if ((rc = read_tool_fields(m, i, msg, e)) != 0)
			return rc;
		snprintf(param, sizeof(param), "messages[%zu].content", i);
		c = json_object_get(m, "content");
		/* null content is an assistant turn that only calls tools */
		if ((c == NULL || json_is_null(c)) && msg->tool_calls != NULL)
			continue;
		if (c == NULL || json_is_null(c))
			return wrong_type(e, param,
					  "a string or an array of text parts");
		if ((rc = read_content(c, param, &msg->content, &msg->content_len, e)) != 0)
			return rc;
	}
	return 0;
}

#define PROMPT_TYPES "a string, an array of strings, an array of token ids " \
	"or an array of token-id arrays"

/* One element of an array prompt: a string or an array of token ids. */
static int read_prompt_item(json_t *v, struct gen_prompt *p, const char *param,
			    struct api_error *e)
{
	json_t *t;
	size_t i;

	if (json_is_string(v)) {
		p->len = json_string_length(v);
		if ((p->text = malloc(p->len + 1)) == NULL)
			return api_error_oom(e);
		memcpy(p->text, json_string_value(v), p->len + 1);
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) == 0)
		return wrong_type(e, param, "a string or a non-empty array of token ids");
	if ((p->ids = malloc(json_array_size(v) * sizeof(int32_t))) == NULL)
		return api_error_oom(e);
	json_array_foreach(v, i, t) {
		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > INT32_MAX)
			return bad(e, param, "'%s' must hold token ids (integers "
				   "from 0)%s.", "");
		p->ids[i] = (int32_t)json_integer_value(t);
	}
	p->n_ids = json_array_size(v);
	return 0;
}

/* OpenAI's array prompts: token ids (one prompt), or strings and token-id
 * arrays (one prompt each). */
static int read_prompts(json_t *v, struct gen_request *r, struct api_error *e)
{
	bool ids = json_array_size(v) > 0 && json_is_integer(json_array_get(v, 0));
	size_t i, n = ids ? 1 : json_array_size(v);
	char param[48];
	json_t *t;
	int rc;

	if (n == 0)
		return bad(e, "prompt", "'%s' must not be empty%s.", "");
	if ((r->prompt = calloc(1, 1)) == NULL ||
	    (r->prompts = calloc(n, sizeof(*r->prompts))) == NULL)
		return api_error_oom(e);
	r->n_prompts = n;
	if (ids)
		return read_prompt_item(v, &r->prompts[0], "prompt", e);
	json_array_foreach(v, i, t) {
		snprintf(param, sizeof(param), "prompt[%zu]", i);
		if ((rc = read_prompt_item(t, &r->prompts[i], param, e)) != 0)
			return rc;
	}
	return 0;
}

static int read_prompt(json_t *root, struct gen_request *r,
		       struct api_error *e)
{
	json_t *v = api_openai_field(root, "prompt");

	if (v == NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "prompt",
			      "missing_required_parameter",
			      "Missing required parameter: 'prompt'.");
		return EMBER_EINVAL;
	}
	if (json_is_array(v) && json_array_size(v) == 1 &&
	    json_is_string(json_array_get(v, 0)))
		v = json_array_get(v, 0);
	if (json_is_array(v))
		return read_prompts(v, r, e);
	if (!json_is_string(v))
		return wrong_type(e, "prompt", PROMPT_TYPES);
	/* may hold NUL ("\u0000" is an ordinary character): copied by length */
	r->prompt_len = json_string_length(v);
	r->prompt = malloc(r->prompt_len + 1);
	if (r->prompt == NULL)
		return api_error_oom(e);
	memcpy(r->prompt, json_string_value(v), r->prompt_len + 1);
	return 0;
}

json_t *api_openai_decode_object(const char *body, size_t len, struct api_error *e)
{
	json_error_t jerr;
	json_t *root;

	if (api_openai_check_depth(body, len, API_MAX_DEPTH) != 0) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, NULL,
			      "invalid_json",
			      "JSON nests deeper than %d levels.", API_MAX_DEPTH);
		return NULL;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (root == NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, NULL,
			      "invalid_json",
			      "Invalid JSON body: %s (line %d, column %d).",
			      jerr.text, jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, NULL,
			      "invalid_json", "The body must be a JSON object.");
		return NULL;
	}
	return root;
}

int api_openai_parse_root(json_t *root, const struct api_limits *lim,
			  enum gen_kind kind, struct gen_request *req,
			  struct api_error *e)
{
	int rc;

	gen_request_init(req, kind, lim->max_tokens);
	memset(e, 0, sizeof(*e));
	if ((rc = kind == GEN_CHAT ? read_messages(root, req, e)
				   : read_prompt(root, req, e)) != 0 ||
	    (kind == GEN_CHAT && (rc = read_tools(root, req, e)) != 0))
		goto fail;
	if ((rc = read_common(root, lim, req, e)) == 0 &&
	    read_structured(root, lim->render_only, req, e) != 0)
		rc = EMBER_EINVAL;
	if (rc == 0 && !lim->render_only)
		rc = api_fields_read(root, req, e);
	if (rc == 0 && kind == GEN_CHAT && !lim->render_only)
		rc = tool_call_read_request(root, req, e);
	/* A tool call's text is parsed out of the answer after generation,
	 * so per-token records would not line up with what is returned. */
	if (rc == 0 && req->logprobs && req->tool_mode != GEN_TOOLS_OFF) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "logprobs", "unsupported_value",
			      "logprobs with tools is not supported");
		rc = EMBER_EINVAL;
	}
	/* Combinations this server does not answer (never a wrong answer):
	 * tool calls are parsed out of one choice's text; echo and suffix
	 * shape one text prompt. */
	if (rc == 0 && req->n > 1 && req->tool_mode != GEN_TOOLS_OFF) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "n", "unsupported_value",
			      "n > 1 with tools is not supported; ask for one choice.");
		rc = EMBER_EINVAL;
	}
	if (rc == 0 && req->prompts != NULL && req->echo) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "echo", "unsupported_value",
			      "echo with an array prompt (token ids or several prompts) is not "
			      "supported; echo needs one string prompt.");
		rc = EMBER_EINVAL;
	}
	if (rc == 0 && req->prompts != NULL && req->suffix != NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "suffix", "unsupported_value",
			      "suffix with an array prompt (token ids or several prompts) is not "
			      "supported; suffix needs one string prompt.");
		rc = EMBER_EINVAL;
	}
fail:
	if (rc != 0)
		gen_request_free(req);
	return rc;
}

static int parse(const char *body, size_t len, const struct api_limits *lim,
		 enum gen_kind kind, struct gen_request *req,
		 struct api_error *e)
{
	json_t *root;
	int rc;

	gen_request_init(req, kind, lim->max_tokens);
	memset(e, 0, sizeof(*e));
	root = api_openai_decode_object(body, len, e);
	if (root == NULL)
		return EMBER_EINVAL;
	rc = api_openai_parse_root(root, lim, kind, req, e);
	json_decref(root);
	return rc;
}

int api_openai_parse_chat(const char *body, size_t len,
			  const struct api_limits *lim, struct gen_request *req,
			  struct api_error *e)
{
	return parse(body, len, lim, GEN_CHAT, req, e);
}

int api_openai_parse_completion(const char *body, size_t len,
				const struct api_limits *lim,
				struct gen_request *req, struct api_error *e)
{
	return parse(body, len, lim, GEN_COMPLETION, req, e);
}
