/*
 * jinja_builtins.c - the Jinja filters, tests, methods and global functions
 * that chat templates use (jinja_impl.h). Each is a row in a table or a
 * short case; an unknown name is an error naming it, never a silent "".
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "jinja_impl.h"

const char *const jfn_names[JFN_COUNT] = {"namespace", "range", "raise_exception", "strftime_now", "dict"};

#define NAME_IS(w) (n == sizeof(w) - 1 && memcmp(name, w, n) == 0)

static struct jval arg(struct jargs *a, size_t i, const char *kw)
{
	if (i < a->npos)
		return a->pos[i];
	if (kw && a->kw) {
		struct jval *v = jdict_get(a->kw, kw, strlen(kw));
		if (v)
			return *v;
	}
	return (struct jval){.t = JT_UNDEF};
}

static struct jval str_arg(struct jctx *c, struct jargs *a, size_t i, const char *kw, const char *what)
{
	struct jval v = arg(a, i, kw);
	if (v.t != JT_STR)
		jfail(c, EMBER_ETYPE, "%s: expected a string argument, got %s", what, jv_type_name(v));
	return v;
}

static struct jlist *list_new(struct jctx *c)
{
	struct jlist *l = jlist_new(&c->ar, 0);
	if (!l)
		jalloc(c, (size_t)-1);
	return l;
}

static void list_push(struct jctx *c, struct jlist *l, struct jval v)
{
	if (jlist_push(&c->ar, l, v) < 0)
		jalloc(c, (size_t)-1);
}

static struct jval list_val(struct jlist *l)
{
	return (struct jval){.t = JT_LIST, .u.l = l};
}

/* ---- strings ---- */

static int in_set(char ch, struct jval chars)
{
	if (chars.t != JT_STR)
		return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
	return memchr(chars.u.s.p, ch, chars.u.s.n) != NULL;
}

static struct jval str_strip(struct jval s, struct jval chars, int left, int right)
{
	const char *p = s.u.s.p;
	size_t n = s.u.s.n;
	while (left && n && in_set(*p, chars))
		p++, n--;
	while (right && n && in_set(p[n - 1], chars))
		n--;
	return jv_str(p, n);
}

static struct jval str_map(struct jctx *c, struct jval s, int mode)
{
	char *p = jalloc(c, s.u.s.n + 1);
	int word_start = 1;
	for (size_t i = 0; i < s.u.s.n; i++) {
		unsigned char ch = (unsigned char)s.u.s.p[i];
		int alpha = isalpha(ch);
		if (mode == 0)
			p[i] = (char)toupper(ch);
		else if (mode == 1)
			p[i] = (char)tolower(ch);
		else if (mode == 2) /* title */
			p[i] = (char)(word_start ? toupper(ch) : tolower(ch));
		else /* capitalize */
			p[i] = (char)(i == 0 ? toupper(ch) : tolower(ch));
		word_start = !alpha && !isdigit(ch);
	}
	return jv_str(p, s.u.s.n);
}

static struct jval str_split(struct jctx *c, struct jval s, struct jval sep, int64_t max)
{
	struct jlist *l = list_new(c);
	const char *p = s.u.s.p, *end = p + s.u.s.n;

	if (sep.t != JT_STR) { /* runs of whitespace, none empty */
		while (p < end) {
			while (p < end && in_set(*p, sep))
				p++;
			if (p == end)
				break;
			const char *q = p;
			while (q < end && (max == 0 || !in_set(*q, sep)))
				q++;
			list_push(c, l, jv_str(p, (size_t)(q - p)));
			max--;
			p = q;
		}
		return list_val(l);
	}
	if (sep.u.s.n == 0)
		jfail(c, EMBER_ETYPE, "split: empty separator");
	for (;;) {
		const char *q = max != 0 ? memmem(p, (size_t)(end - p), sep.u.s.p, sep.u.s.n) : NULL;
		if (!q) {
			list_push(c, l, jv_str(p, (size_t)(end - p)));
			return list_val(l);
		}
		list_push(c, l, jv_str(p, (size_t)(q - p)));
		p = q + sep.u.s.n;
		max--;
	}
}

static struct jval str_replace(struct jctx *c, struct jval s, struct jval from, struct jval to, int64_t count)
{
	struct jbuf b = {.ar = &c->ar};
	const char *p = s.u.s.p, *end = p + s.u.s.n;

	jbuf_put(&b, "", 0);
	if (from.u.s.n == 0) { /* Python: insert between every character */
		for (; p <= end && count != 0; p++, count--) {
			jbuf_put(&b, to.u.s.p, to.u.s.n);
			if (p < end)
				jbuf_putc(&b, *p);
		}
		if (p < end)
			jbuf_put(&b, p, (size_t)(end - p));
	} else {
		for (;;) {
			const char *q = count != 0 ? memmem(p, (size_t)(end - p), from.u.s.p, from.u.s.n) : NULL;
			if (!q)
				break;
			jbuf_put(&b, p, (size_t)(q - p));
			jbuf_put(&b, to.u.s.p, to.u.s.n);
			p = q + from.u.s.n;
			count--;
		}
		jbuf_put(&b, p, (size_t)(end - p));
	}
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p, b.n);
}

static int str_affix(struct jval s, struct jval x, int suffix)
{
	if (x.t == JT_LIST) {
		for (size_t i = 0; i < x.u.l->n; i++)
			if (str_affix(s, x.u.l->v[i], suffix))
				return 1;
		return 0;
	}
	if (x.t != JT_STR || x.u.s.n > s.u.s.n)
		return 0;
	return memcmp(s.u.s.p + (suffix ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n) == 0;
}

/* "{} and {}".format(a, b): positional fields only. */
static struct jval str_format(struct jctx *c, struct jval s, struct jargs *a)
{
	struct jbuf b = {.ar = &c->ar};
	size_t next = 0;

	jbuf_put(&b, "", 0);
	for (size_t i = 0; i < s.u.s.n; i++) {
		char ch = s.u.s.p[i];
		if ((ch == '{' || ch == '}') && i + 1 < s.u.s.n && s.u.s.p[i + 1] == ch) {
			jbuf_putc(&b, ch);
			i++;
		} else if (ch == '{' && i + 1 < s.u.s.n && s.u.s.p[i + 1] == '}') {
			if (next >= a->npos)
				jfail(c, EMBER_ETYPE, "format: not enough arguments");
			jv_to_text(&b, a->pos[next++]);
			i++;
		} else if (ch == '{') {
			jfail(c, EMBER_EUNSUPPORTED, "format: only '{}' fields are supported");
		} else {
			jbuf_putc(&b, ch);
		}
	}
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p, b.n);
}

static struct jval join(struct jctx *c, struct jval l, struct jval sep, struct jval attr)
{
	struct jbuf b = {.ar = &c->ar};

	if (l.t != JT_LIST)
		jfail(c, EMBER_ETYPE, "join: expected a list, got %s", jv_type_name(l));
	jbuf_put(&b, "", 0);
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct jval v = l.u.l->v[i];
		if (i && sep.t == JT_STR)
			jbuf_put(&b, sep.u.s.p, sep.u.s.n);
		if (attr.t == JT_STR && v.t == JT_DICT) {
			struct jval *x = jdict_get(v.u.d, attr.u.s.p, attr.u.s.n);
			v = x ? *x : (struct jval){.t = JT_UNDEF};
		}
		jv_to_text(&b, v);
	}
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p, b.n);
}

/* ---- methods ---- */

struct jval jmethod_call(struct jctx *c, struct jval obj, const char *name, size_t n, struct jargs *a,
			 int *found)
{
	*found = 1;
	if (obj.t == JT_STR) {
		if (NAME_IS("strip") || NAME_IS("lstrip") || NAME_IS("rstrip"))
			return str_strip(obj, arg(a, 0, "chars"), name[0] != 'r', name[0] != 'l');
		if (NAME_IS("upper"))
			return str_map(c, obj, 0);
		if (NAME_IS("lower"))
			return str_map(c, obj, 1);
		if (NAME_IS("title"))
			return str_map(c, obj, 2);
		if (NAME_IS("capitalize"))
			return str_map(c, obj, 3);
		if (NAME_IS("split")) {
			struct jval max = arg(a, 1, "maxsplit");
			return str_split(c, obj, arg(a, 0, "sep"), max.t == JT_INT ? max.u.i : -1);
		}
		if (NAME_IS("startswith") || NAME_IS("endswith"))
			return jv_bool(str_affix(obj, arg(a, 0, NULL), name[0] == 'e'));
		if (NAME_IS("replace")) {
			struct jval cnt = arg(a, 2, "count");
			return str_replace(c, obj, str_arg(c, a, 0, NULL, "replace"), str_arg(c, a, 1, NULL, "replace"),
					   cnt.t == JT_INT ? cnt.u.i : -1);
		}
		if (NAME_IS("format"))
			return str_format(c, obj, a);
		if (NAME_IS("join"))
			return join(c, arg(a, 0, NULL), obj, (struct jval){.t = JT_UNDEF});
		if (NAME_IS("find")) {
			struct jval x = str_arg(c, a, 0, NULL, "find");
			const char *q = x.u.s.n ? memmem(obj.u.s.p, obj.u.s.n, x.u.s.p, x.u.s.n) : obj.u.s.p;
			return jv_int(q ? (int64_t)(q - obj.u.s.p) : -1);
		}
	} else if (obj.t == JT_DICT) {
		if (NAME_IS("items") || NAME_IS("keys") || NAME_IS("values")) {
			struct jlist *l = list_new(c);
			for (size_t i = 0; i < obj.u.d->n; i++) {
				struct jval k = jv_str(obj.u.d->kp[i], obj.u.d->kn[i]);
				if (name[0] == 'i') {
					struct jlist *pair = list_new(c);
					list_push(c, pair, k);
					list_push(c, pair, obj.u.d->v[i]);
					list_push(c, l, list_val(pair));
				} else {
					list_push(c, l, name[0] == 'k' ? k : obj.u.d->v[i]);
				}
			}
			return list_val(l);
		}
		if (NAME_IS("get")) {
			struct jval k = str_arg(c, a, 0, NULL, "get"), *v = jdict_get(obj.u.d, k.u.s.p, k.u.s.n);
			struct jval dflt = arg(a, 1, "default");
			return v ? *v : dflt.t == JT_UNDEF ? (struct jval){.t = JT_NONE} : dflt;
		}
	} else if (obj.t == JT_LIST) {
		if (NAME_IS("append")) {
			list_push(c, obj.u.l, arg(a, 0, NULL));
			return (struct jval){.t = JT_NONE};
		}
	}
	*found = 0;
	return (struct jval){.t = JT_UNDEF};
}

/* ---- tests ---- */

int jtest_apply(struct jctx *c, const char *name, size_t n, struct jval v, struct jargs *a)
{
	if (NAME_IS("defined"))
		return v.t != JT_UNDEF;
	if (NAME_IS("undefined"))
		return v.t == JT_UNDEF;
	if (NAME_IS("none"))
		return v.t == JT_NONE;
	if (NAME_IS("string"))
		return v.t == JT_STR;
	if (NAME_IS("number"))
		return v.t == JT_INT || v.t == JT_FLOAT;
	if (NAME_IS("integer"))
		return v.t == JT_INT;
	if (NAME_IS("float"))
		return v.t == JT_FLOAT;
	if (NAME_IS("boolean"))
		return v.t == JT_BOOL;
	if (NAME_IS("true"))
		return v.t == JT_BOOL && v.u.i;
	if (NAME_IS("false"))
		return v.t == JT_BOOL && !v.u.i;
	if (NAME_IS("mapping"))
		return v.t == JT_DICT;
	if (NAME_IS("iterable") || NAME_IS("sequence"))
		return v.t == JT_LIST || v.t == JT_STR || v.t == JT_DICT;
	if (NAME_IS("callable"))
		return v.t == JT_FUNC || v.t == JT_MACRO;
	if (NAME_IS("lower") || NAME_IS("upper")) {
		if (v.t != JT_STR)
			return 0;
		for (size_t i = 0; i < v.u.s.n; i++)
			if (name[0] == 'l' ? isupper((unsigned char)v.u.s.p[i]) : islower((unsigned char)v.u.s.p[i]))
				return 0;
		return 1;
	}
	if (NAME_IS("odd") || NAME_IS("even")) {
		if (v.t != JT_INT)
			jfail(c, EMBER_ETYPE, "test %.*s: expected an integer", (int)n, name);
		return (v.u.i % 2 != 0) == (name[0] == 'o');
	}
	if (NAME_IS("divisibleby")) {
		struct jval d = arg(a, 0, NULL);
		if (v.t != JT_INT || d.t != JT_INT || d.u.i == 0)
			jfail(c, EMBER_ETYPE, "test divisibleby: expected nonzero integers");
		return v.u.i % d.u.i == 0;
	}
	if (NAME_IS("equalto") || NAME_IS("eq") || NAME_IS("==") || NAME_IS("sameas"))
		return jv_equal(v, arg(a, 0, NULL));
	if (NAME_IS("ne") || NAME_IS("!="))
		return !jv_equal(v, arg(a, 0, NULL));
	if (NAME_IS("in")) {
		struct jval box = arg(a, 0, NULL);
		if (box.t == JT_LIST) {
			for (size_t i = 0; i < box.u.l->n; i++)
				if (jv_equal(v, box.u.l->v[i]))
					return 1;
			return 0;
		}
		if (box.t == JT_STR && v.t == JT_STR)
			return memmem(box.u.s.p, box.u.s.n, v.u.s.p, v.u.s.n) != NULL || v.u.s.n == 0;
		if (box.t == JT_DICT && v.t == JT_STR)
			return jdict_get(box.u.d, v.u.s.p, v.u.s.n) != NULL;
		return 0;
	}
	jfail(c, EMBER_EUNSUPPORTED, "unknown test '%.*s'", (int)n, name);
}

/* ---- filters ---- */

static struct jval attr_of(struct jval v, struct jval attr)
{
	/* "a.b" walks nested mappings, as Jinja's attribute= arguments do */
	const char *p = attr.u.s.p, *end = p + attr.u.s.n;
	while (v.t == JT_DICT) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		const char *stop = dot ? dot : end;
		struct jval *x = jdict_get(v.u.d, p, (size_t)(stop - p));
		if (!x)
			break;
		if (!dot)
			return *x;
		v = *x;
		p = dot + 1;
	}
	return (struct jval){.t = JT_UNDEF};
}

/* select/reject/selectattr/rejectattr. */
static struct jval select_items(struct jctx *c, struct jval l, struct jargs *a, int by_attr, int keep)
{
	struct jlist *out = list_new(c);
	size_t first = by_attr ? 1 : 0;
	struct jval attr = by_attr ? str_arg(c, a, 0, NULL, "selectattr") : (struct jval){0};
	struct jval test = arg(a, first, NULL);
	struct jargs rest = {.pos = a->npos > first + 1 ? a->pos + first + 1 : NULL,
			     .npos = a->npos > first + 1 ? a->npos - first - 1 : 0};

	if (l.t != JT_LIST)
		jfail(c, EMBER_ETYPE, "select: expected a list, got %s", jv_type_name(l));
	if (test.t != JT_UNDEF && test.t != JT_STR)
		jfail(c, EMBER_ETYPE, "select: the test must be a name");
	for (size_t i = 0; i < l.u.l->n; i++) {
		struct jval v = by_attr ? attr_of(l.u.l->v[i], attr) : l.u.l->v[i];
		int ok = test.t == JT_STR ? jtest_apply(c, test.u.s.p, test.u.s.n, v, &rest) : jv_truthy(v);
		if (ok == keep)
			list_push(c, out, l.u.l->v[i]);
	}
	return list_val(out);
}

static int cmp_vals(struct jval x, struct jval y)
{
	if (x.t == JT_STR && y.t == JT_STR) {
		size_t m = x.u.s.n < y.u.s.n ? x.u.s.n : y.u.s.n;
		int r = memcmp(x.u.s.p, y.u.s.p, m);
		return r ? r : (x.u.s.n > y.u.s.n) - (x.u.s.n < y.u.s.n);
	}
	double a = x.t == JT_FLOAT ? x.u.f : (double)x.u.i, b = y.t == JT_FLOAT ? y.u.f : (double)y.u.i;
	return (a > b) - (a < b);
}

/* Stable insertion sort: lists in templates are short. */
static struct jval sort_list(struct jctx *c, struct jval l, struct jval attr, int reverse)
{
	struct jlist *out = list_new(c);
	for (size_t i = 0; i < l.u.l->n; i++)
		list_push(c, out, l.u.l->v[i]);
	for (size_t i = 1; i < out->n; i++) {
		struct jval v = out->v[i];
		struct jval kv = attr.t == JT_STR ? attr_of(v, attr) : v;
		size_t j = i;
		while (j > 0) {
			struct jval kp = attr.t == JT_STR ? attr_of(out->v[j - 1], attr) : out->v[j - 1];
			int r = cmp_vals(kp, kv);
			if (reverse ? r >= 0 : r <= 0)
				break;
			out->v[j] = out->v[j - 1];
			j--;
		}
		out->v[j] = v;
	}
	return list_val(out);
}

struct jval jfilter_apply(struct jctx *c, struct jscope *s, const char *name, size_t n, struct jval v,
			  struct jargs *a)
{
	(void)s;
	if (NAME_IS("trim") || NAME_IS("strip")) {
		if (v.t != JT_STR)
			jfail(c, EMBER_ETYPE, "trim: expected a string, got %s", jv_type_name(v));
		return str_strip(v, arg(a, 0, "chars"), 1, 1);
	}
	if (NAME_IS("upper") || NAME_IS("lower") || NAME_IS("title") || NAME_IS("capitalize")) {
		if (v.t != JT_STR)
			jfail(c, EMBER_ETYPE, "%.*s: expected a string, got %s", (int)n, name, jv_type_name(v));
		return str_map(c, v, name[0] == 'u' ? 0 : name[0] == 'l' ? 1 : name[0] == 't' ? 2 : 3);
	}
	if (NAME_IS("length") || NAME_IS("count")) {
		if (v.t == JT_STR)
			return jv_int((int64_t)v.u.s.n);
		if (v.t == JT_LIST)
			return jv_int((int64_t)v.u.l->n);
		if (v.t == JT_DICT)
			return jv_int((int64_t)v.u.d->n);
		jfail(c, EMBER_ETYPE, "length of a %s", jv_type_name(v));
	}
	if (NAME_IS("tojson")) {
		struct jval ind = arg(a, 0, "indent");
		struct jbuf b = {.ar = &c->ar};
		jbuf_put(&b, "", 0);
		jv_to_json(&b, v, ind.t == JT_INT && ind.u.i > 0 && ind.u.i < 64 ? (int)ind.u.i : 0, 0);
		if (b.oom)
			jbuf_fail(c, &b);
		return jv_str(b.p, b.n);
	}
	if (NAME_IS("join"))
		return join(c, v, arg(a, 0, "d"), arg(a, 1, "attribute"));
	if (NAME_IS("default") || NAME_IS("d")) {
		struct jval dflt = arg(a, 0, "default_value"), boolean = arg(a, 1, "boolean");
		if (dflt.t == JT_UNDEF)
			dflt = jv_str("", 0);
		if (v.t == JT_UNDEF || (jv_truthy(boolean) && !jv_truthy(v)))
			return dflt;
		return v;
	}
	if (NAME_IS("first") || NAME_IS("last")) {
		if (v.t == JT_LIST)
			return v.u.l->n ? v.u.l->v[name[0] == 'f' ? 0 : v.u.l->n - 1] : (struct jval){.t = JT_UNDEF};
		if (v.t == JT_STR)
			return v.u.s.n ? jv_str(v.u.s.p + (name[0] == 'f' ? 0 : v.u.s.n - 1), 1)
				       : (struct jval){.t = JT_UNDEF};
		jfail(c, EMBER_ETYPE, "%.*s of a %s", (int)n, name, jv_type_name(v));
	}
	if (NAME_IS("list")) {
		struct jlist *l = list_new(c);
		if (v.t == JT_LIST) {
			for (size_t i = 0; i < v.u.l->n; i++)
				list_push(c, l, v.u.l->v[i]);
		} else if (v.t == JT_STR) {
			for (size_t i = 0; i < v.u.s.n; i++)
				list_push(c, l, jv_str(v.u.s.p + i, 1));
		} else if (v.t == JT_DICT) {
			for (size_t i = 0; i < v.u.d->n; i++)
				list_push(c, l, jv_str(v.u.d->kp[i], v.u.d->kn[i]));
		} else {
			jfail(c, EMBER_ETYPE, "list of a %s", jv_type_name(v));
		}
		return list_val(l);
	}
	if (NAME_IS("string"))
		return jv_stringify(c, v);
	if (NAME_IS("int")) {
		if (v.t == JT_INT || v.t == JT_BOOL)
			return jv_int(v.u.i);
		if (v.t == JT_FLOAT)
			return jv_int((int64_t)v.u.f);
		if (v.t == JT_STR) {
			char tmp[32];
			size_t k = v.u.s.n < sizeof(tmp) - 1 ? v.u.s.n : sizeof(tmp) - 1;
			memcpy(tmp, v.u.s.p, k);
			tmp[k] = '\0';
			return jv_int(strtoll(tmp, NULL, 10));
		}
		return jv_int(0);
	}
	if (NAME_IS("abs")) {
		if (v.t == JT_INT)
			return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
		if (v.t == JT_FLOAT)
			return v.u.f < 0 ? (v.u.f = -v.u.f, v) : v;
		jfail(c, EMBER_ETYPE, "abs of a %s", jv_type_name(v));
	}
	if (NAME_IS("items") || NAME_IS("dictsort")) {
		int found;
		if (v.t == JT_UNDEF)
			return list_val(list_new(c));
		if (v.t != JT_DICT)
			jfail(c, EMBER_ETYPE, "%.*s of a %s", (int)n, name, jv_type_name(v));
		struct jargs none = {0};
		struct jval l = jmethod_call(c, v, "items", 5, &none, &found);
		if (name[0] == 'i')
			return l;
		struct jval key0 = jv_str("0", 1);
		return sort_list(c, l, key0, jv_truthy(arg(a, 1, "reverse")));
	}
	if (NAME_IS("selectattr") || NAME_IS("rejectattr"))
		return select_items(c, v, a, 1, name[0] == 's');
	if (NAME_IS("select") || NAME_IS("reject"))
		return select_items(c, v, a, 0, name[0] == 's');
	if (NAME_IS("map")) {
		struct jval attr = arg(a, 0, NULL).t == JT_UNDEF ? arg(a, 99, "attribute") : (struct jval){.t = JT_UNDEF};
		struct jval filt = arg(a, 0, NULL);
		struct jlist *out = list_new(c);
		struct jargs rest = {.pos = a->npos > 1 ? a->pos + 1 : NULL, .npos = a->npos > 1 ? a->npos - 1 : 0};
		if (v.t != JT_LIST)
			jfail(c, EMBER_ETYPE, "map: expected a list, got %s", jv_type_name(v));
		if (attr.t != JT_STR && filt.t != JT_STR)
			jfail(c, EMBER_ETYPE, "map: expected a filter name or attribute=");
		for (size_t i = 0; i < v.u.l->n; i++) {
			if (attr.t == JT_STR) {
				struct jval x = attr_of(v.u.l->v[i], attr);
				list_push(c, out, x.t == JT_UNDEF ? arg(a, 99, "default") : x);
			} else {
				list_push(c, out, jfilter_apply(c, s, filt.u.s.p, filt.u.s.n, v.u.l->v[i], &rest));
			}
		}
		return list_val(out);
	}
	if (NAME_IS("unique")) {
		struct jlist *out = list_new(c);
		if (v.t != JT_LIST)
			jfail(c, EMBER_ETYPE, "unique: expected a list");
		for (size_t i = 0; i < v.u.l->n; i++) {
			size_t j = 0;
			while (j < out->n && !jv_equal(out->v[j], v.u.l->v[i]))
				j++;
			if (j == out->n)
				list_push(c, out, v.u.l->v[i]);
		}
		return list_val(out);
	}
	if (NAME_IS("reverse")) {
		if (v.t == JT_STR) {
			char *p = jalloc(c, v.u.s.n + 1);
			for (size_t i = 0; i < v.u.s.n; i++)
				p[i] = v.u.s.p[v.u.s.n - 1 - i];
			return jv_str(p, v.u.s.n);
		}
		struct jlist *out = list_new(c);
		if (v.t != JT_LIST)
			jfail(c, EMBER_ETYPE, "reverse of a %s", jv_type_name(v));
		for (size_t i = v.u.l->n; i > 0; i--)
			list_push(c, out, v.u.l->v[i - 1]);
		return list_val(out);
	}
	if (NAME_IS("sort")) {
		if (v.t != JT_LIST)
			jfail(c, EMBER_ETYPE, "sort of a %s", jv_type_name(v));
		return sort_list(c, v, arg(a, 99, "attribute"), jv_truthy(arg(a, 0, "reverse")));
	}
	if (NAME_IS("replace")) {
		struct jval cnt = arg(a, 2, "count");
		if (v.t != JT_STR)
			jfail(c, EMBER_ETYPE, "replace: expected a string");
		return str_replace(c, v, str_arg(c, a, 0, NULL, "replace"), str_arg(c, a, 1, NULL, "replace"),
				   cnt.t == JT_INT ? cnt.u.i : -1);
	}
	if (NAME_IS("safe") || NAME_IS("e") || NAME_IS("escape"))
		return v; /* chat templates render text, not HTML: nothing to escape */
	if (NAME_IS("indent")) {
		struct jval w = arg(a, 0, "width"), first = arg(a, 1, "first");
		int64_t width = w.t == JT_INT ? w.u.i : 4;
		struct jbuf b = {.ar = &c->ar};
		if (v.t != JT_STR || width < 0 || width > 256)
			jfail(c, EMBER_ETYPE, "indent: expected a string and a width up to 256");
		jbuf_put(&b, "", 0);
		for (size_t i = 0; i < v.u.s.n; i++) {
			if ((i == 0 && jv_truthy(first)) || (i > 0 && v.u.s.p[i - 1] == '\n' && v.u.s.p[i] != '\n'))
				for (int64_t k = 0; k < width; k++)
					jbuf_putc(&b, ' ');
			jbuf_putc(&b, v.u.s.p[i]);
		}
		if (b.oom)
			jbuf_fail(c, &b);
		return jv_str(b.p, b.n);
	}
	jfail(c, EMBER_EUNSUPPORTED, "unknown filter '%.*s'", (int)n, name);
}

/* ---- global functions ---- */

struct jval jfn_call(struct jctx *c, int fn, struct jargs *a)
{
	struct jval v = {.t = JT_DICT};

	switch (fn) {
	case JFN_NAMESPACE:
	case JFN_DICT:
		if (!(v.u.d = jdict_new(&c->ar)))
			jalloc(c, (size_t)-1);
		v.u.d->is_ns = fn == JFN_NAMESPACE;
		if (a->npos && a->pos[0].t == JT_DICT)
			for (size_t i = 0; i < a->pos[0].u.d->n; i++)
				if (jdict_set(&c->ar, v.u.d, a->pos[0].u.d->kp[i], a->pos[0].u.d->kn[i],
					      a->pos[0].u.d->v[i]) < 0)
					jalloc(c, (size_t)-1);
		for (size_t i = 0; a->kw && i < a->kw->n; i++)
			if (jdict_set(&c->ar, v.u.d, a->kw->kp[i], a->kw->kn[i], a->kw->v[i]) < 0)
				jalloc(c, (size_t)-1);
		return v;
	case JFN_RANGE: {
		int64_t lo = 0, hi, step = 1;
		for (size_t i = 0; i < a->npos; i++)
			if (a->pos[i].t != JT_INT)
				jfail(c, EMBER_ETYPE, "range: expected integers");
		if (a->npos == 1)
			hi = a->pos[0].u.i;
		else if (a->npos == 2 || a->npos == 3)
			lo = a->pos[0].u.i, hi = a->pos[1].u.i, step = a->npos == 3 ? a->pos[2].u.i : 1;
		else
			jfail(c, EMBER_ETYPE, "range: expected 1 to 3 arguments");
		if (step == 0)
			jfail(c, EMBER_ETYPE, "range: step cannot be zero");
		struct jlist *l = list_new(c);
		for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) {
			if (l->n >= 1000000)
				jfail(c, EMBER_ERANGE, "range: more than 1000000 items");
			list_push(c, l, jv_int(i));
		}
		return list_val(l);
	}
	case JFN_RAISE: {
		struct jval msg = jv_stringify(c, arg(a, 0, NULL));
		jfail(c, EMBER_EINVAL, "%.*s", (int)(msg.u.s.n > 200 ? 200 : msg.u.s.n), msg.u.s.p);
	}
	case JFN_STRFTIME: {
		struct jval fmt = str_arg(c, a, 0, NULL, "strftime_now");
		char f[128], out[256];
		time_t now = time(NULL);
		struct tm tm;
		if (fmt.u.s.n >= sizeof(f))
			jfail(c, EMBER_ETYPE, "strftime_now: format too long");
		memcpy(f, fmt.u.s.p, fmt.u.s.n);
		f[fmt.u.s.n] = '\0';
		localtime_r(&now, &tm);
		size_t k = strftime(out, sizeof(out), f, &tm);
		return jv_strdup(c, out, k);
	}
	}
	jfail(c, EMBER_ETYPE, "not a function");
}
