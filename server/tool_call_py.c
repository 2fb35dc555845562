/* tool_call_py.c - Gemma's Python-style calls (`name(k=v, ...)`) into
 * tool calls with JSON arguments. See tool_call_impl.h.
 *
 * Only literals are read: strings ('' or "", with \\ \' \" \n \t \r
 * escapes), numbers, True/False/None, lists, tuples and dicts with string
 * keys, nested at most MAX_DEPTH deep. Positional arguments, expressions
 * and variables are not a call we can express in JSON: the text is then
 * content. */
#include "tool_call_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

#define MAX_DEPTH 32

struct py {
	const char *s;
	size_t len, i;
};

static void ws(struct py *p)
{
	while (p->i < p->len && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\r' ||
				 p->s[p->i] == '\n'))
		p->i++;
}

static bool is_ident(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (!first && c >= '0' && c <= '9');
}

static bool word(struct py *p, const char *w)
{
	size_t n = strlen(w);

	if (p->len - p->i < n || memcmp(p->s + p->i, w, n) != 0 ||
	    (p->i + n < p->len && is_ident(p->s[p->i + n], false)))
		return false;
	p->i += n;
	return true;
}

static json_t *value(struct py *p, int depth);

static json_t *string(struct py *p)
{
	char q = p->s[p->i++];
	char *out = malloc(p->len - p->i + 1);
	size_t n = 0;
	json_t *v = NULL;

	if (out == NULL)
		return NULL;
	while (p->i < p->len && p->s[p->i] != q) {
		char c = p->s[p->i++];

		if (c == '\n')
			goto out;
		if (c == '\\' && p->i < p->len) {
			c = p->s[p->i++];
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
		}
		out[n++] = c;
	}
	if (p->i >= p->len)
		goto out;
	p->i++;
	v = json_stringn(out, n); /* NULL for invalid UTF-8 */
out:
	free(out);
	return v;
}

static json_t *number(struct py *p)
{
	size_t start = p->i, n;
	bool real = false;
	char buf[64], *end;
	json_t *v;

	if (p->s[p->i] == '-')
		p->i++;
	while (p->i < p->len && strchr("0123456789.eE+-", p->s[p->i]) != NULL) {
		if (strchr(".eE", p->s[p->i]) != NULL)
			real = true;
		p->i++;
	}
	n = p->i - start;
	if (n == 0 || n >= sizeof(buf))
		return NULL;
	memcpy(buf, p->s + start, n);
	buf[n] = '\0';
	errno = 0;
	if (real) {
		double d = strtod(buf, &end);
		v = *end || errno ? NULL : json_real(d);
	} else {
		long long x = strtoll(buf, &end, 10);
		v = *end || errno ? NULL : json_integer(x);
	}
	return v;
}

/* [a, b], (a, b) or {k: v}; `close` the closing bracket. */
static json_t *container(struct py *p, char close, int depth)
{
	json_t *c = close == '}' ? json_object() : json_array();

	p->i++;
	while (c != NULL) {
		json_t *k = NULL, *v;

		ws(p);
		if (p->i < p->len && p->s[p->i] == close) {
			p->i++;
			return c;
		}
		if (close == '}') {
			k = value(p, depth + 1);
			ws(p);
			if (!json_is_string(k) || p->i >= p->len || p->s[p->i] != ':') {
				json_decref(k);
				break;
			}
			p->i++;
		}
		v = value(p, depth + 1);
		if (v == NULL || (k ? json_object_set_new(c, json_string_value(k), v)
				    : json_array_append_new(c, v)) != 0) {
			json_decref(k);
			break;
		}
		json_decref(k);
		ws(p);
		if (p->i < p->len && p->s[p->i] == ',')
			p->i++;
		else if (p->i >= p->len || p->s[p->i] != close)
			break;
	}
	json_decref(c);
	return NULL;
}

static json_t *value(struct py *p, int depth)
{
	char c;

	ws(p);
	if (p->i >= p->len || depth > MAX_DEPTH)
		return NULL;
	c = p->s[p->i];
	if (c == '"' || c == '\'')
		return string(p);
	if (c == '-' || (c >= '0' && c <= '9'))
		return number(p);
	if (c == '[')
		return container(p, ']', depth);
	if (c == '(')
		return container(p, ')', depth);
	if (c == '{')
		return container(p, '}', depth);
	if (word(p, "True"))
		return json_true();
	if (word(p, "False"))
		return json_false();
	if (word(p, "None"))
		return json_null();
	return NULL;
}

/* name(k=v, ...) at p->i, as a {"name","arguments"} object. */
static json_t *call(struct py *p)
{
	size_t start = p->i;
	json_t *args = json_object(), *obj = NULL;
	char name[128];

	while (p->i < p->len && (is_ident(p->s[p->i], p->i == start) ||
				 (p->i > start && p->s[p->i] == '.')))
		p->i++;
	if (args == NULL || p->i == start || p->i - start >= sizeof(name) || p->i >= p->len ||
	    p->s[p->i] != '(')
		goto fail;
	memcpy(name, p->s + start, p->i - start);
	name[p->i - start] = '\0';
	p->i++;
	for (;;) {
		size_t k0;
		char key[128];
		json_t *v;

		ws(p);
		if (p->i < p->len && p->s[p->i] == ')') {
			p->i++;
			break;
		}
		k0 = p->i;
		while (p->i < p->len && is_ident(p->s[p->i], p->i == k0))
			p->i++;
		if (p->i == k0 || p->i - k0 >= sizeof(key))
			goto fail;
		memcpy(key, p->s + k0, p->i - k0);
		key[p->i - k0] = '\0';
		ws(p);
		if (p->i >= p->len || p->s[p->i] != '=')
			goto fail; /* positional: no name to give it */
		p->i++;
		if ((v = value(p, 1)) == NULL || json_object_set_new(args, key, v) != 0)
			goto fail;
		ws(p);
		if (p->i < p->len && p->s[p->i] == ',')
			p->i++;
		else if (p->i >= p->len || p->s[p->i] != ')')
			goto fail;
	}
	obj = json_pack("{s:s, s:o}", "name", name, "arguments", args);
	return obj;
fail:
	json_decref(args);
	return NULL;
}

int tool_call_parse_python(const char *s, size_t len, struct tool_parse *tp)
{
	struct py p = {s, len, 0};
	int rc = 1;

	for (;;) {
		bool printed;
		json_t *c;

		ws(&p);
		while (p.i < p.len && p.s[p.i] == ';') {
			p.i++;
			ws(&p);
		}
		if (p.i == p.len)
			return tp->n_calls > 0 ? 0 : 1;
		printed = word(&p, "print");
		ws(&p);
		if (printed && (p.i >= p.len || p.s[p.i++] != '('))
			return 1;
		ws(&p);
		if ((c = call(&p)) == NULL)
			return 1;
		rc = tool_call_add_json(tp, c);
		json_decref(c);
		if (rc != 0)
			return rc;
		ws(&p);
		if (printed && (p.i >= p.len || p.s[p.i++] != ')'))
			return 1;
	}
}
