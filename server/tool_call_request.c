/* tool_call_request.c - the request side of tool calling: `tools`,
 * `tool_choice`, `parallel_tool_calls` checked, and the grammar that
 * forces a call. See tool_call.h. */
#include "tool_call_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"
#include "buf.h"
#include "ember.h"
#include "json_schema.h"

static int refuse(struct api_error *e, const char *param, const char *code, const char *msg)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, code, "%s", msg);
	return EMBER_EINVAL;
}

/* OpenAI's rule for function names; it also keeps them safe inside GBNF
 * and JSON literals. */
static bool valid_name(json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);

	if (!json_is_string(v) || n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* tools[i]: {"type":"function","function":{"name","description"?,
 * "parameters"?,"strict"?}}. */
static int check_tool(json_t *t, size_t i, struct api_error *e)
{
	json_t *fn = api_openai_field(t, "function"), *v;
	char param[64];

	snprintf(param, sizeof(param), "tools[%zu]", i);
	if (!json_is_object(t))
		return refuse(e, param, "invalid_type", "Each tool must be an object.");
	v = api_openai_field(t, "type");
	if (!json_is_string(v) || strcmp(json_string_value(v), "function") != 0) {
		snprintf(param, sizeof(param), "tools[%zu].type", i);
		return refuse(e, param, "invalid_value",
			      "Only tools of type 'function' are supported.");
	}
	snprintf(param, sizeof(param), "tools[%zu].function", i);
	if (!json_is_object(fn))
		return refuse(e, param, "invalid_type", "A function tool needs a 'function' object.");
	snprintf(param, sizeof(param), "tools[%zu].function.name", i);
	if (!valid_name(api_openai_field(fn, "name")))
		return refuse(e, param, "invalid_value",
			      "A function name must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'.");
	snprintf(param, sizeof(param), "tools[%zu].function.description", i);
	if ((v = api_openai_field(fn, "description")) != NULL && !json_is_string(v))
		return refuse(e, param, "invalid_type", "Expected a string.");
	snprintf(param, sizeof(param), "tools[%zu].function.parameters", i);
	if ((v = api_openai_field(fn, "parameters")) != NULL && !json_is_object(v))
		return refuse(e, param, "invalid_type", "Expected a JSON Schema object.");
	snprintf(param, sizeof(param), "tools[%zu].function.strict", i);
	if ((v = api_openai_field(fn, "strict")) != NULL && !json_is_boolean(v))
		return refuse(e, param, "invalid_type", "Expected a boolean.");
	return 0;
}

static const char *tool_name(json_t *tools, size_t i)
{
	return json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
}

/* tool_choice into r->tool_mode / r->tool_name. */
static int read_choice(json_t *tc, json_t *tools, struct gen_request *r, struct api_error *e)
{
	json_t *fn, *name;
	size_t i;

	r->tool_mode = tools ? GEN_TOOLS_AUTO : GEN_TOOLS_OFF;
	if (tc == NULL)
		return 0;
	if (tools == NULL && !(json_is_string(tc) && strcmp(json_string_value(tc), "none") == 0))
		return refuse(e, "tool_choice", "invalid_value",
			      "'tool_choice' is only allowed when 'tools' are specified.");
	if (json_is_string(tc)) {
		const char *s = json_string_value(tc);

		if (strcmp(s, "none") == 0)
			r->tool_mode = GEN_TOOLS_OFF;
		else if (strcmp(s, "required") == 0)
			r->tool_mode = GEN_TOOLS_REQUIRED;
		else if (strcmp(s, "auto") != 0)
			return refuse(e, "tool_choice", "invalid_value",
				      "'tool_choice' must be 'none', 'auto', 'required' or "
				      "{\"type\":\"function\",\"function\":{\"name\":...}}.");
	} else if (json_is_object(tc)) {
		fn = api_openai_field(tc, "function");
		name = json_is_object(fn) ? api_openai_field(fn, "name") : NULL;
		if (!json_is_string(api_openai_field(tc, "type")) ||
		    strcmp(json_string_value(api_openai_field(tc, "type")), "function") != 0 ||
		    !json_is_string(name))
			return refuse(e, "tool_choice", "invalid_value",
				      "A named 'tool_choice' is {\"type\":\"function\",\"function\":"
				      "{\"name\":...}}.");
		for (i = 0; i < json_array_size(tools); i++)
			if (strcmp(tool_name(tools, i), json_string_value(name)) == 0)
				break;
		if (i == json_array_size(tools))
			return refuse(e, "tool_choice.function.name", "invalid_value",
				      "'tool_choice' names a function that is not in 'tools'.");
		r->tool_mode = GEN_TOOLS_NAMED;
		if ((r->tool_name = strdup(json_string_value(name))) == NULL)
			return api_error_oom(e);
	} else {
		return refuse(e, "tool_choice", "invalid_type", "Expected a string or an object.");
	}
	return 0;
}

int tool_call_read_request(json_t *root, struct gen_request *r, struct api_error *e)
{
	json_t *tools = api_openai_field(root, "tools");
	json_t *ptc = api_openai_field(root, "parallel_tool_calls");
	char err[JSON_SCHEMA_ERR_MAX], param[64];
	int rc;

	if (api_openai_field(root, "functions") || api_openai_field(root, "function_call"))
		return refuse(e, api_openai_field(root, "functions") ? "functions" : "function_call",
			      "unsupported_parameter",
			      "The deprecated 'functions' and 'function_call' are not supported: "
			      "use 'tools' and 'tool_choice'.");
	if (ptc != NULL && !json_is_boolean(ptc))
		return refuse(e, "parallel_tool_calls", "invalid_type", "Expected a boolean.");
	r->parallel_tool_calls = ptc == NULL || json_is_true(ptc);
	if (tools != NULL) {
		if (!json_is_array(tools) || json_array_size(tools) == 0)
			return refuse(e, "tools", "invalid_value", "'tools' must be a non-empty array.");
		for (size_t i = 0; i < json_array_size(tools); i++)
			if ((rc = check_tool(json_array_get(tools, i), i, e)) != 0)
				return rc;
	}
	if ((rc = read_choice(api_openai_field(root, "tool_choice"), tools, r, e)) != 0)
		return rc;
	if (r->tool_mode != GEN_TOOLS_OFF && r->grammar != NULL)
		return refuse(e, "tools", "invalid_value",
			      "'tools' cannot be combined with 'response_format', 'json_schema' or "
			      "'grammar' (that grammar would forbid the calls); use tool_choice 'none'.");
	if (r->tool_mode != GEN_TOOLS_REQUIRED && r->tool_mode != GEN_TOOLS_NAMED)
		return 0;
	/* The arguments will be constrained by these schemas: a keyword the
	 * compiler does not cover is an error now, not a silent hint. */
	for (size_t i = 0; i < json_array_size(tools); i++) {
		json_t *fn = api_openai_field(json_array_get(tools, i), "function");
		json_t *schema = api_openai_field(fn, "parameters");
		char *g = NULL;

		if (schema == NULL || (r->tool_name && strcmp(r->tool_name, tool_name(tools, i)) != 0))
			continue;
		if (json_schema_to_gbnf(schema, &g, err) != 0) {
			snprintf(param, sizeof(param), "tools[%zu].function.parameters", i);
			api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
				      "'%s': %s", param, err);
			return EMBER_EINVAL;
		}
		free(g);
	}
	return 0;
}

/* ---- the grammar ----------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void put(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom || buf_grow(&b->p, &b->cap, b->n + n + 1, 1024, 0) != 0) {
		b->oom = true;
		return;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void puts_(struct sbuf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* A GBNF literal of `s` (already GBNF-escaped), nothing when empty. */
static void lit(struct sbuf *b, const char *s)
{
	if (*s == '\0')
		return;
	puts_(b, " \"");
	puts_(b, s);
	puts_(b, "\"");
}

static bool name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool name_char(char c)
{
	return name_start(c) || (c >= '0' && c <= '9') || c == '-';
}

/* Copies GBNF `g` with every rule name prefixed by `prefix`, so several
 * schemas' rules live in one grammar. Literals, classes, comments and
 * repetition counts are copied as they are. */
static void put_renamed(struct sbuf *b, const char *g, const char *prefix)
{
	size_t i = 0, n = strlen(g);

	while (i < n) {
		char c = g[i];
		size_t j = i + 1;

		if (c == '"' || c == '[') {
			char end = c == '"' ? '"' : ']';

			while (j < n && g[j] != end)
				j += g[j] == '\\' && j + 1 < n ? 2 : 1;
			j = j < n ? j + 1 : n;
		} else if (c == '#') {
			while (j < n && g[j] != '\n')
				j++;
		} else if (name_start(c)) {
			while (j < n && name_char(g[j]))
				j++;
			puts_(b, prefix);
		}
		put(b, g + i, j - i);
		i = j;
	}
	puts_(b, "\n");
}

int tool_call_grammar(enum tool_family fam, const char *tools_json, const char *name, bool parallel,
		      char **gbnf, char *err)
{
	const struct tool_family_row *f = tool_family_row(fam);
	json_t *tools = json_loads(tools_json ? tools_json : "", 0, NULL);
	struct sbuf b = {0}, rules = {0};
	char serr[JSON_SCHEMA_ERR_MAX], prefix[32];
	size_t i, n_fn = 0;
	int rc = 0;

	*gbnf = NULL;
	if (!json_is_array(tools)) {
		rc = ember_seterr(err, EMBER_EINVAL, "tools: not an array");
		goto out;
	}
	puts_(&b, "root ::=");
	lit(&b, f->g_open);
	puts_(&b, parallel ? " call (" : " call");
	if (parallel) {
		lit(&b, f->g_sep);
		puts_(&b, " call )*");
	}
	lit(&b, f->g_close);
	puts_(&b, "\ncall ::=");
	lit(&b, f->g_call_open);
	puts_(&b, " fn");
	lit(&b, f->g_call_close);
	puts_(&b, "\nfn ::=");
	for (i = 0; i < json_array_size(tools); i++) {
		json_t *fn = json_object_get(json_array_get(tools, i), "function");
		json_t *schema = api_openai_field(fn, "parameters");
		const char *nm = json_string_value(json_object_get(fn, "name"));
		char *g = NULL;

		if (nm == NULL || (name != NULL && strcmp(nm, name) != 0))
			continue;
		snprintf(prefix, sizeof(prefix), "t%zu-", i);
		if (schema != NULL && json_schema_to_gbnf(schema, &g, serr) != 0) {
			rc = ember_seterr(err, EMBER_EINVAL, "tools[%zu].function.parameters: %s", i, serr);
			goto out;
		}
		put_renamed(&rules, g ? g : "root ::= \"{}\"", prefix);
		free(g);
		puts_(&b, n_fn++ ? " | " : " ");
		puts_(&b, prefix);
		puts_(&b, "fn");
		puts_(&rules, prefix);
		puts_(&rules, "fn ::= \"{\\\"name\\\": \\\"");
		puts_(&rules, nm); /* checked: [A-Za-z0-9_-] only */
		puts_(&rules, "\\\", \\\"");
		puts_(&rules, f->args_key);
		puts_(&rules, "\\\": \" ");
		puts_(&rules, prefix);
		puts_(&rules, "root \"}\"\n");
	}
	if (n_fn == 0) {
		rc = ember_seterr(err, EMBER_EINVAL, "tool_choice: no such function in tools");
		goto out;
	}
	puts_(&b, "\n");
	put(&b, rules.p ? rules.p : "", rules.n);
	if (b.oom || rules.oom) {
		rc = ember_seterr(err, EMBER_ENOMEM, "tool grammar: out of memory");
		goto out;
	}
	*gbnf = b.p;
	b.p = NULL;
out:
	free(b.p);
	free(rules.p);
	json_decref(tools);
	return rc;
}
