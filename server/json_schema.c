/*
 * json_schema.c - JSON Schema into GBNF (see json_schema.h for coverage).
 *
 * Each schema node becomes one rule `sN` whose body refers to the fixed
 * JSON rules below (value, string, number, ...) and to the rules of its
 * sub-schemas. Objects list their properties in schema order; a required
 * one must appear, an optional one may be skipped, and two rule chains per
 * object (before / after the first emitted property) put the commas right
 * in linear size. $refs get their rule name before their body is made, so
 * recursive schemas compile to recursive rules.
 */
#include "json_schema.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_impl.h"
#include "jsonw.h"

#define MAX_DEPTH 64

static const char BASE_RULES[] =
	"ws ::= \" \"?\n"
	"value ::= object | array | string | number | boolean | null\n"
	"object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n"
	"array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"
	"string ::= \"\\\"\" char* \"\\\"\"\n"
	"char ::= jchar | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
	"jchar ::= [^\"\\\\\\x00-\\x1f]\n"
	"number ::= integer ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
	"integer ::= \"-\"? ( \"0\" | [1-9] [0-9]* )\n"
	"boolean ::= \"true\" | \"false\"\n"
	"null ::= \"null\"\n";

int js_fail(struct ctx *c, const char *where, const char *fmt, ...)
{
	char msg[JSON_SCHEMA_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(c->err, JSON_SCHEMA_ERR_MAX, "%.160s (at %.80s)", msg, where[0] ? where : "the root");
	return -1;
}

void js_putf(struct jsonw *w, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	jsonw_raw(w, buf);
}

/* Bytes as one GBNF string literal. */
void js_put_literal(struct jsonw *w, const char *s, size_t n)
{
	size_t i;

	jsonw_raw(w, "\"");
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\') {
			char e[3] = {'\\', (char)ch, 0};

			jsonw_raw(w, e);
		} else if (ch < 0x20 || ch == 0x7f) {
			js_putf(w, "\\x%02x", ch);
		} else {
			char one[2] = {(char)ch, 0};

			jsonw_raw(w, one);
		}
	}
	jsonw_raw(w, "\"");
}

/* A JSON value's compact text as a literal. */
static int put_json_literal(struct ctx *c, struct jsonw *w, json_t *v, const char *where)
{
	char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

	if (text == NULL)
		return js_fail(c, where, "out of memory");
	js_put_literal(w, text, strlen(text));
	free(text);
	return 0;
}

/* Appends `name ::= body` and frees the body. */
static void add_rule(struct ctx *c, int n, struct jsonw *body)
{
	js_putf(&c->out, "s%d ::= ", n);
	jsonw_raw(&c->out, body->data ? body->data : "");
	jsonw_raw(&c->out, "\n");
	jsonw_free(body);
}

static int gen(struct ctx *c, json_t *s, const char *where);

/* ---- keyword table ---------------------------------------------------------- */

static const char *const KNOWN[] = {
	"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
	"enum", "const", "anyOf", "oneOf", "$ref", "$defs", "definitions", "pattern", "format",
	"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"nullable", "title", "description", "default", "examples", "$schema", "$id", "$comment",
	"deprecated", "readOnly", "writeOnly", NULL,
};

static int check_keywords(struct ctx *c, json_t *s, const char *where)
{
	const char *k;
	json_t *v;
	int i;

	json_object_foreach(s, k, v) {
		for (i = 0; KNOWN[i] && strcmp(KNOWN[i], k); i++)
			;
		if (KNOWN[i] == NULL)
			return js_fail(c, where, "unsupported JSON Schema keyword '%s'", k);
	}
	return 0;
}

int js_get_count(struct ctx *c, json_t *s, const char *key, long long *out, const char *where)
{
	json_t *v = json_object_get(s, key);

	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000)
		return js_fail(c, where, "'%s' must be an integer in [0, 1000]", key);
	*out = json_integer_value(v);
	return 1;
}

/* ---- objects and arrays ------------------------------------------------------ */

/*
 * A key that is none of the named properties (an extra property must not
 * repeat one, or its value would escape the property's schema): the
 * names' trie, where each node may close the string unless a name ends
 * there, continue along an edge, or leave the trie by any other character
 * and then take anything. Extra keys use no escapes, so no escape can
 * spell a name. Returns the rule's number.
 */
static int other_key_node(struct ctx *c, json_t *props, const char *prefix, size_t plen)
{
	struct jsonw body;
	const char *key;
	json_t *v;
	char seen[256] = {0}, edges[1024];
	size_t ne = 0;
	int r = c->n_rules++, is_key = 0;

	jsonw_init(&body);
	json_object_foreach(props, key, v) {
		size_t kl = strlen(key);
		unsigned char e;

		if (kl < plen || memcmp(key, prefix, plen) != 0)
			continue;
		if (kl == plen) {
			is_key = 1;
			continue;
		}
		e = (unsigned char)key[plen];
		if (seen[e])
			continue;
		seen[e] = 1;
		if (e < 0x80 && ne + 3 < sizeof(edges)) {
			if (e == ']' || e == '[' || e == '\\' || e == '^' || e == '-')
				edges[ne++] = '\\';
			edges[ne++] = (char)e;
		}
		{
			int sub = other_key_node(c, props, key, plen + 1);

			if (sub < 0) {
				jsonw_free(&body);
				return -1;
			}
			js_put_literal(&body, key + plen, 1);
			js_putf(&body, " s%d | ", sub);
		}
	}
	edges[ne] = '\0';
	/* Any other character (names are ASCII: gen_other_key checks). */
	js_putf(&body, "[^\"\\\\\\x00-\\x1f%s] jchar* \"\\\"\"", edges);
	if (!is_key)
		jsonw_raw(&body, " | \"\\\"\"");
	add_rule(c, r, &body);
	return r;
}

static int gen_other_key(struct ctx *c, json_t *props, const char *where)
{
	struct jsonw body;
	int r, sub;
	const char *key;
	json_t *v;

	json_object_foreach(props, key, v) {
		const unsigned char *k = (const unsigned char *)key;

		for (; *k; k++)
			if (*k < 0x20 || *k == '"' || *k == '\\' || *k >= 0x80)
				return js_fail(c, where, "additionalProperties with a property name holding "
					    "escapes or non-ASCII characters is not supported");
	}
	r = c->n_rules++;
	if ((sub = other_key_node(c, props, "", 0)) < 0)
		return -1;
	jsonw_init(&body);
	js_putf(&body, "\"\\\"\" s%d", sub);
	add_rule(c, r, &body);
	return r;
}

static int gen_object(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	json_t *extra = json_object_get(s, "additionalProperties"), *v;
	const char *key;
	size_t n = 0, i, j;
	int base = c->n_rules, extra_rule = -1, *kv = NULL, rc = -1;
	char sub[256];

	if (props != NULL && !json_is_object(props))
		return js_fail(c, where, "'properties' must be an object");
	if (req != NULL && !json_is_array(req))
		return js_fail(c, where, "'required' must be an array");
	json_array_foreach(req, i, v) {
		if (!json_is_string(v) || !json_object_get(props, json_string_value(v)))
			return js_fail(c, where, "'required' names '%s', which is not in 'properties'",
				    json_is_string(v) ? json_string_value(v) : "(not a string)");
	}
	n = props ? json_object_size(props) : 0;
	kv = calloc(n + 1, sizeof(*kv));
	if (kv == NULL)
		return js_fail(c, where, "out of memory");
	i = 0;
	json_object_foreach(props, key, v) {
		struct jsonw body;
		int r;

		snprintf(sub, sizeof(sub), "%s/properties/%s", where, key);
		if ((r = gen(c, v, sub)) < 0)
			goto out;
		jsonw_init(&body);
		{
			/* The key as JSON writes it, quotes and escapes included. */
			json_t *ks = json_string(key);
			char *quoted = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;

			json_decref(ks);
			if (quoted == NULL) {
				jsonw_free(&body);
				goto oom;
			}
			js_put_literal(&body, quoted, strlen(quoted));
			free(quoted);
		}
		js_putf(&body, " ws \":\" ws s%d ws", r);
		kv[i++] = c->n_rules;
		add_rule(c, c->n_rules++, &body);
	}
	if (extra != NULL && !json_is_false(extra)) {
		struct jsonw body;
		int r = -1, other = gen_other_key(c, props, where);

		if (other < 0)
			goto out;
		if (!json_is_true(extra)) {
			snprintf(sub, sizeof(sub), "%s/additionalProperties", where);
			if ((r = gen(c, extra, sub)) < 0)
				goto out;
		}
		jsonw_init(&body);
		if (r < 0)
			js_putf(&body, "s%d ws \":\" ws value ws", other);
		else
			js_putf(&body, "s%d ws \":\" ws s%d ws", other, r);
		extra_rule = c->n_rules;
		add_rule(c, c->n_rules++, &body);
	}
	/* S_i: properties i.. with none emitted yet; C_i: after one was. */
	base = c->n_rules;
	c->n_rules += 2 * ((int)n + 1);
	for (i = 0; i <= n; i++) {
		struct jsonw sb, cb;
		int required = 0;

		jsonw_init(&sb);
		jsonw_init(&cb);
		if (i == n) {
			if (extra_rule >= 0) {
				js_putf(&sb, "( s%d ( \",\" ws s%d )* )?", extra_rule, extra_rule);
				js_putf(&cb, "( \",\" ws s%d )*", extra_rule);
			}
		} else {
			key = NULL;
			j = 0;
			json_object_foreach(props, key, v) {
				if (j++ == i)
					break;
			}
			json_array_foreach(req, j, v)
				if (!strcmp(json_string_value(v), key))
					required = 1;
			js_putf(&sb, "s%d s%d", kv[i], base + 2 * (int)i + 3);
			js_putf(&cb, "\",\" ws s%d s%d", kv[i], base + 2 * (int)i + 3);
			if (!required) {
				js_putf(&sb, " | s%d", base + 2 * (int)i + 2);
				js_putf(&cb, " | s%d", base + 2 * (int)i + 3);
			}
		}
		add_rule(c, base + 2 * (int)i, &sb);
		add_rule(c, base + 2 * (int)i + 1, &cb);
	}
	js_putf(w, "\"{\" ws s%d \"}\" ", base);
	rc = 0;
	goto out;
oom:
	rc = js_fail(c, where, "out of memory");
out:
	free(kv);
	return rc;
}

static int gen_array(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	json_t *items = json_object_get(s, "items");
	long long lo = 0, hi = -1;
	int has_hi, item;
	char sub[256];

	if (js_get_count(c, s, "minItems", &lo, where) < 0 ||
	    (has_hi = js_get_count(c, s, "maxItems", &hi, where)) < 0)
		return -1;
	if (has_hi && hi < lo)
		return js_fail(c, where, "maxItems below minItems");
	if (items == NULL || json_is_true(items)) {
		item = -1;
	} else {
		if (json_is_array(items))
			return js_fail(c, where, "'items' as an array (tuples) is not supported");
		snprintf(sub, sizeof(sub), "%s/items", where);
		if ((item = gen(c, items, sub)) < 0)
			return -1;
	}
	char it[32];

	if (item < 0)
		snprintf(it, sizeof(it), "value");
	else
		snprintf(it, sizeof(it), "s%d", item);
	jsonw_raw(w, "\"[\" ws ");
	if (has_hi && hi == 0) {
		/* nothing inside */
	} else if (lo == 0) {
		if (has_hi)
			js_putf(w, "( %s ws ( \",\" ws %s ws ){0,%lld} )? ", it, it, hi - 1);
		else
			js_putf(w, "( %s ws ( \",\" ws %s ws )* )? ", it, it);
	} else if (has_hi) {
		js_putf(w, "%s ws ( \",\" ws %s ws ){%lld,%lld} ", it, it, lo - 1, hi - 1);
	} else {
		js_putf(w, "%s ws ( \",\" ws %s ws ){%lld,} ", it, it, lo - 1);
	}
	jsonw_raw(w, "\"]\" ");
	return 0;
}

/* ---- one schema ------------------------------------------------------------------ */

static int gen_type(struct ctx *c, json_t *s, const char *type, struct jsonw *w, const char *where)
{
	if (!strcmp(type, "string"))
		return js_gen_string(c, s, w, where);
	if (!strcmp(type, "integer"))
		return js_gen_integer(c, s, w, where);
	if (!strcmp(type, "number"))
		return js_gen_number(c, s, w, where);
	if (!strcmp(type, "object"))
		return gen_object(c, s, w, where);
	if (!strcmp(type, "array"))
		return gen_array(c, s, w, where);
	if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
		js_putf(w, "%s ", type);
		return 0;
	}
	return js_fail(c, where, "unknown type '%s'", type);
}

/* The rule for "$ref": made once per reference, named before its body so
 * that recursion refers to it. */
static int gen_ref(struct ctx *c, const char *ref, const char *where)
{
	json_t *known = json_object_get(c->refs, ref), *target = NULL;
	struct jsonw body;
	int r, sub;

	if (known)
		return (int)json_integer_value(known);
	if (!strcmp(ref, "#"))
		target = c->root;
	else if (!strncmp(ref, "#/$defs/", 8))
		target = json_object_get(json_object_get(c->root, "$defs"), ref + 8);
	else if (!strncmp(ref, "#/definitions/", 14))
		target = json_object_get(json_object_get(c->root, "definitions"), ref + 14);
	else
		return js_fail(c, where, "$ref '%s': only #, #/$defs/... and #/definitions/... are supported",
			    ref);
	if (target == NULL)
		return js_fail(c, where, "$ref '%s' names nothing in the schema", ref);
	r = c->n_rules++;
	json_object_set_new(c->refs, ref, json_integer(r));
	if ((sub = gen(c, target, ref)) < 0)
		return -1;
	jsonw_init(&body);
	js_putf(&body, "s%d", sub);
	add_rule(c, r, &body);
	return r;
}

static int gen_body(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	json_t *v, *t = json_object_get(s, "type"), *x;
	const char *alts = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
	int nullable = json_is_true(json_object_get(s, "nullable")), first = 1;
	size_t i;
	char sub[256];

	if ((v = json_object_get(s, "$ref")) != NULL) {
		int r;

		if (!json_is_string(v))
			return js_fail(c, where, "'$ref' must be a string");
		if ((r = gen_ref(c, json_string_value(v), where)) < 0)
			return -1;
		js_putf(w, "s%d ", r);
		return 0;
	}
	if ((v = json_object_get(s, "const")) != NULL)
		return put_json_literal(c, w, v, where);
	if ((v = json_object_get(s, "enum")) != NULL) {
		if (!json_is_array(v) || json_array_size(v) == 0)
			return js_fail(c, where, "'enum' must be a non-empty array");
		jsonw_raw(w, "( ");
		json_array_foreach(v, i, x) {
			jsonw_raw(w, i ? "| " : "");
			if (put_json_literal(c, w, x, where) != 0)
				return -1;
			jsonw_raw(w, " ");
		}
		jsonw_raw(w, ") ");
		return 0;
	}
	if ((v = json_object_get(s, alts)) != NULL) {
		if (!json_is_array(v) || json_array_size(v) == 0)
			return js_fail(c, where, "'%s' must be a non-empty array", alts);
		jsonw_raw(w, "( ");
		json_array_foreach(v, i, x) {
			int r;

			snprintf(sub, sizeof(sub), "%s/%s/%zu", where, alts, i);
			if ((r = gen(c, x, sub)) < 0)
				return -1;
			js_putf(w, "%ss%d ", i ? "| " : "", r);
		}
		if (nullable)
			jsonw_raw(w, "| null ");
		jsonw_raw(w, ") ");
		return 0;
	}
	if (t == NULL) {
		/* No type: what the other keywords say, else any value. */
		if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties"))
			return gen_object(c, s, w, where);
		if (json_object_get(s, "items"))
			return gen_array(c, s, w, where);
		jsonw_raw(w, "value ");
		return 0;
	}
	if (!json_is_string(t) && !json_is_array(t))
		return js_fail(c, where, "'type' must be a string or an array of strings");
	jsonw_raw(w, "( ");
	if (json_is_string(t)) {
		if (gen_type(c, s, json_string_value(t), w, where) != 0)
			return -1;
		first = 0;
	}
	json_array_foreach(t, i, x) {
		if (!json_is_string(x))
			return js_fail(c, where, "'type' must be a string or an array of strings");
		jsonw_raw(w, first ? "" : "| ");
		first = 0;
		if (gen_type(c, s, json_string_value(x), w, where) != 0)
			return -1;
	}
	if (nullable)
		jsonw_raw(w, "| null ");
	jsonw_raw(w, ") ");
	return 0;
}

/* Makes the rule for schema `s`; returns its number or -1. */
static int gen(struct ctx *c, json_t *s, const char *where)
{
	struct jsonw body;
	int r;

	if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
		s = NULL;
	} else if (json_is_false(s)) {
		return js_fail(c, where, "the schema false accepts nothing");
	} else if (!json_is_object(s)) {
		return js_fail(c, where, "a schema must be an object or a boolean");
	} else if (check_keywords(c, s, where) != 0) {
		return -1;
	}
	if (++c->depth > MAX_DEPTH) {
		c->depth--;
		return js_fail(c, where, "schema nested deeper than %d levels", MAX_DEPTH);
	}
	r = c->n_rules++;
	jsonw_init(&body);
	if (s == NULL)
		jsonw_raw(&body, "value");
	else if (gen_body(c, s, &body, where) != 0) {
		jsonw_free(&body);
		c->depth--;
		return -1;
	}
	add_rule(c, r, &body);
	c->depth--;
	return r;
}

int json_schema_to_gbnf(json_t *schema, char **gbnf, char *err)
{
	struct ctx c = {.root = schema, .err = err};
	int r;

	*gbnf = NULL;
	err[0] = '\0';
	jsonw_init(&c.out);
	c.refs = json_object();
	if (c.refs == NULL) {
		snprintf(err, JSON_SCHEMA_ERR_MAX, "out of memory");
		return -1;
	}
	jsonw_raw(&c.out, BASE_RULES);
	r = gen(&c, schema, "");
	json_decref(c.refs);
	if (r >= 0)
		js_putf(&c.out, "root ::= s%d\n", r);
	if (r < 0 || !jsonw_ok(&c.out)) {
		if (r >= 0)
			snprintf(err, JSON_SCHEMA_ERR_MAX, "out of memory");
		jsonw_free(&c.out);
		return -1;
	}
	*gbnf = jsonw_take(&c.out);
	return *gbnf ? 0 : -1;
}

char *json_schema_any_object(void)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_raw(&w, BASE_RULES);
	jsonw_raw(&w, "root ::= object\n");
	return jsonw_ok(&w) ? jsonw_take(&w) : NULL;
}
