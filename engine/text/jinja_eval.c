/*
 * jinja_eval.c - runs a parsed template (jinja_impl.h): expressions,
 * statements, scopes, and the public jinja_parse/jinja_render.
 *
 * Semantics follow the reference renderer (@huggingface/jinja), which is
 * what Hugging Face's chat templates are checked against: `for` and macro
 * bodies get their own scope (a `set` inside a loop does not leak out, hence
 * namespace()), `if` does not; none and undefined print as ""; booleans
 * print as "true"/"false".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "jinja_impl.h"

struct jinja_template {
	struct jarena ar;
	struct jnode *body;
};

void jfail(struct jctx *c, int rc, const char *fmt, ...)
{
	va_list ap;

	if (c->err) {
		va_start(ap, fmt);
		vsnprintf(c->err, EMBER_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	c->rc = rc;
	longjmp(c->fail, 1);
}

void *jalloc(struct jctx *c, size_t n)
{
	void *p = jarena_alloc(&c->ar, n);
	if (!p)
		jfail(c, EMBER_ERANGE, "template render exceeds %u MiB", JINJA_MEM_MAX >> 20);
	return p;
}

void jbuf_fail(struct jctx *c, const struct jbuf *b)
{
	if (b->deep)
		jfail(c, EMBER_ERANGE, "a value nested more than %d levels deep (a list or namespace that contains itself?)",
		      JINJA_DEPTH_MAX);
	jalloc(c, (size_t)-1);
	jfail(c, EMBER_ERANGE, "template render exceeds %u MiB", JINJA_MEM_MAX >> 20);
}

struct jval jv_strdup(struct jctx *c, const char *s, size_t n)
{
	char *p = jalloc(c, n + 1);
	if (n)
		memcpy(p, s, n);
	return jv_str(p, n);
}

struct jval jv_stringify(struct jctx *c, struct jval v)
{
	struct jbuf b = {.ar = &c->ar};

	if (v.t == JT_STR)
		return v;
	jv_to_text(&b, v);
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p ? b.p : "", b.n);
}

const char *jv_type_name(struct jval v)
{
	static const char *const names[] = {"undefined", "none",     "boolean",  "integer", "float",
					    "string",    "list",     "mapping",  "function", "macro"};
	return v.t < sizeof(names) / sizeof(names[0]) ? names[v.t] : "?";
}

static void jstep(struct jctx *c)
{
	if (++c->steps > JINJA_STEPS_MAX)
		jfail(c, EMBER_ERANGE, "template runs more than %u steps", JINJA_STEPS_MAX);
}

static void jenter(struct jctx *c)
{
	if (++c->depth > JINJA_RENDER_DEPTH_MAX)
		jfail(c, EMBER_ERANGE, "template recursion deeper than %d", JINJA_RENDER_DEPTH_MAX);
}

/* ---- scopes ---- */

static struct jscope *scope_new(struct jctx *c, struct jscope *parent)
{
	struct jscope *s = jalloc(c, sizeof(*s));
	s->vars = jdict_new(&c->ar);
	if (!s->vars)
		jalloc(c, (size_t)-1);
	s->parent = parent;
	return s;
}

static void scope_set(struct jctx *c, struct jscope *s, const char *k, size_t n, struct jval v)
{
	if (jdict_set(&c->ar, s->vars, k, n, v) < 0)
		jalloc(c, (size_t)-1);
}

static struct jval scope_get(struct jscope *s, const char *k, size_t n)
{
	for (; s; s = s->parent) {
		struct jval *v = jdict_get(s->vars, k, n);
		if (v)
			return *v;
	}
	return (struct jval){.t = JT_UNDEF};
}

/* ---- expressions ---- */

static void eval_args(struct jctx *c, struct jscope *s, const struct jnode *list, struct jargs *a)
{
	size_t n = 0;

	memset(a, 0, sizeof(*a));
	for (const struct jnode *x = list; x; x = x->next)
		n += x->kind != JN_KWARG;
	a->pos = n ? jalloc(c, n * sizeof(*a->pos)) : NULL;
	for (const struct jnode *x = list; x; x = x->next) {
		if (x->kind != JN_KWARG) {
			a->pos[a->npos++] = jeval(c, s, x);
			continue;
		}
		if (!a->kw && !(a->kw = jdict_new(&c->ar)))
			jalloc(c, (size_t)-1);
		if (jdict_set(&c->ar, a->kw, x->s, x->n, jeval(c, s, x->a)) < 0)
			jalloc(c, (size_t)-1);
	}
}

static int64_t as_index(struct jctx *c, struct jval v, const char *what)
{
	if (v.t == JT_INT || v.t == JT_BOOL)
		return v.u.i;
	jfail(c, EMBER_ETYPE, "%s must be an integer, not %s", what, jv_type_name(v));
}

static struct jval eval_index(struct jctx *c, struct jval obj, struct jval key)
{
	if (obj.t == JT_DICT && key.t == JT_STR) {
		struct jval *v = jdict_get(obj.u.d, key.u.s.p, key.u.s.n);
		return v ? *v : (struct jval){.t = JT_UNDEF};
	}
	if (obj.t == JT_LIST || obj.t == JT_STR) {
		int64_t n = obj.t == JT_LIST ? (int64_t)obj.u.l->n : (int64_t)obj.u.s.n;
		int64_t i = as_index(c, key, "an index");
		if (i < 0)
			i += n;
		if (i < 0 || i >= n)
			return (struct jval){.t = JT_UNDEF};
		return obj.t == JT_LIST ? obj.u.l->v[i] : jv_str(obj.u.s.p + i, 1);
	}
	if (obj.t == JT_UNDEF || obj.t == JT_NONE || obj.t == JT_DICT)
		return (struct jval){.t = JT_UNDEF};
	jfail(c, EMBER_ETYPE, "cannot index a %s", jv_type_name(obj));
}

/* Python's slice rules, for lists and strings (bytes). */
static struct jval eval_slice(struct jctx *c, struct jscope *s, const struct jnode *n)
{
	struct jval obj = jeval(c, s, n->a);
	int64_t len, start, stop, step = 1;

	if (obj.t != JT_LIST && obj.t != JT_STR)
		jfail(c, EMBER_ETYPE, "cannot slice a %s", jv_type_name(obj));
	len = obj.t == JT_LIST ? (int64_t)obj.u.l->n : (int64_t)obj.u.s.n;
	if (n->d && (step = as_index(c, jeval(c, s, n->d), "a slice step")) == 0)
		jfail(c, EMBER_ETYPE, "slice step cannot be zero");
	start = step > 0 ? 0 : len - 1;
	stop = step > 0 ? len : -len - 1;
	if (n->b && jeval(c, s, n->b).t != JT_NONE) {
		start = as_index(c, jeval(c, s, n->b), "a slice bound");
		start = start < 0 ? start + len : start;
		start = start < 0 ? (step > 0 ? 0 : -1) : start > len ? (step > 0 ? len : len - 1) : start;
		if (step < 0 && start >= len)
			start = len - 1;
	}
	if (n->c && jeval(c, s, n->c).t != JT_NONE) {
		stop = as_index(c, jeval(c, s, n->c), "a slice bound");
		stop = stop < 0 ? stop + len : stop;
		stop = stop < 0 ? (step > 0 ? 0 : -1) : stop > len ? len : stop;
	} else if (step < 0) {
		stop = -1;
	}
	if (obj.t == JT_LIST) {
		struct jlist *l = jlist_new(&c->ar, 0);
		if (!l)
			jalloc(c, (size_t)-1);
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			if (jlist_push(&c->ar, l, obj.u.l->v[i]) < 0)
				jalloc(c, (size_t)-1);
		return (struct jval){.t = JT_LIST, .u.l = l};
	}
	if (step == 1)
		return jv_str(obj.u.s.p + start, stop > start ? (size_t)(stop - start) : 0);
	struct jbuf b = {.ar = &c->ar};
	jbuf_put(&b, "", 0);
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
		jbuf_putc(&b, obj.u.s.p[i]);
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p ? b.p : "", b.n);
}

static struct jval eval_call(struct jctx *c, struct jscope *s, const struct jnode *n)
{
	struct jargs a;

	if (n->a->kind == JN_ATTR) {
		struct jval obj = jeval(c, s, n->a->a);
		struct jval *member = obj.t == JT_DICT ? jdict_get(obj.u.d, n->a->s, n->a->n) : NULL;
		eval_args(c, s, n->list, &a);
		if (member && (member->t == JT_MACRO || member->t == JT_FUNC))
			return jcall_value(c, *member, &a);
		int found;
		struct jval r = jmethod_call(c, obj, n->a->s, n->a->n, &a, &found);
		if (found)
			return r;
		jfail(c, EMBER_ETYPE, "line %d: %s has no method '%.*s'", n->line, jv_type_name(obj), (int)n->a->n,
		      n->a->s);
	}
	struct jval fn = jeval(c, s, n->a);
	eval_args(c, s, n->list, &a);
	if (fn.t != JT_MACRO && fn.t != JT_FUNC)
		jfail(c, EMBER_ETYPE, "line %d: cannot call a %s", n->line, jv_type_name(fn));
	return jcall_value(c, fn, &a);
}

static struct jval as_text(struct jctx *c, struct jval v, int line)
{
	if (v.t == JT_UNDEF || v.t == JT_NONE)
		jfail(c, EMBER_ETYPE, "line %d: cannot concatenate %s", line, jv_type_name(v));
	return jv_stringify(c, v);
}

static struct jval concat(struct jctx *c, struct jval x, struct jval y)
{
	char *p = jalloc(c, x.u.s.n + y.u.s.n + 1);
	/* an empty string may have no bytes at all (p NULL) */
	if (x.u.s.n)
		memcpy(p, x.u.s.p, x.u.s.n);
	if (y.u.s.n)
		memcpy(p + x.u.s.n, y.u.s.p, y.u.s.n);
	return jv_str(p, x.u.s.n + y.u.s.n);
}

static int contains(struct jctx *c, struct jval item, struct jval box, int line)
{
	if (box.t == JT_UNDEF)
		return 0;
	if (box.t == JT_LIST) {
		for (size_t i = 0; i < box.u.l->n; i++)
			if (jv_equal(item, box.u.l->v[i]))
				return 1;
		return 0;
	}
	if (box.t == JT_STR && item.t == JT_STR)
		return item.u.s.n == 0 || memmem(box.u.s.p, box.u.s.n, item.u.s.p, item.u.s.n) != NULL;
	if (box.t == JT_DICT && item.t == JT_STR)
		return jdict_get(box.u.d, item.u.s.p, item.u.s.n) != NULL;
	jfail(c, EMBER_ETYPE, "line %d: 'in' on a %s and a %s", line, jv_type_name(item), jv_type_name(box));
}

static struct jval eval_arith(struct jctx *c, int op, struct jval x, struct jval y, int line)
{
	int xf = x.t == JT_FLOAT, yf = y.t == JT_FLOAT;
	int xn = x.t == JT_INT || xf || x.t == JT_BOOL, yn = y.t == JT_INT || yf || y.t == JT_BOOL;

	if (op == JOP_CAT)
		return concat(c, as_text(c, x, line), as_text(c, y, line));
	if (xn && yn) {
		double a = xf ? x.u.f : (double)x.u.i, b = yf ? y.u.f : (double)y.u.i;
		int is_float = xf || yf;
		struct jval r = {.t = JT_FLOAT};
		switch (op) {
		case JOP_ADD: r.u.f = a + b; break;
		case JOP_SUB: r.u.f = a - b; break;
		case JOP_MUL: r.u.f = a * b; break;
		case JOP_DIV:
			if (b == 0)
				jfail(c, EMBER_ETYPE, "line %d: division by zero", line);
			r.u.f = a / b;
			return r;
		case JOP_FLOORDIV:
		case JOP_MOD:
			if (b == 0)
				jfail(c, EMBER_ETYPE, "line %d: division by zero", line);
			if (!is_float) {
				int64_t q = x.u.i / y.u.i, m = x.u.i % y.u.i;
				if (m != 0 && ((m < 0) != (y.u.i < 0))) {
					q--;
					m += y.u.i;
				}
				return jv_int(op == JOP_FLOORDIV ? q : m);
			}
			r.u.f = op == JOP_FLOORDIV ? __builtin_floor(a / b) : a - b * __builtin_floor(a / b);
			return r;
		case JOP_POW:
			r.u.f = __builtin_pow(a, b);
			is_float = is_float || b < 0;
			break;
		case JOP_LT: return jv_bool(a < b);
		case JOP_LE: return jv_bool(a <= b);
		case JOP_GT: return jv_bool(a > b);
		case JOP_GE: return jv_bool(a >= b);
		}
		if (!is_float && r.u.f > -9.2e18 && r.u.f < 9.2e18) {
			if (op == JOP_ADD)
				return jv_int(x.u.i + y.u.i);
			if (op == JOP_SUB)
				return jv_int(x.u.i - y.u.i);
			return jv_int((int64_t)r.u.f);
		}
		return r;
	}
	if (x.t == JT_STR && y.t == JT_STR && op >= JOP_LT && op <= JOP_GE) {
		size_t m = x.u.s.n < y.u.s.n ? x.u.s.n : y.u.s.n;
		int cmp = memcmp(x.u.s.p, y.u.s.p, m);
		cmp = cmp ? cmp : (x.u.s.n > y.u.s.n) - (x.u.s.n < y.u.s.n);
		return jv_bool(op == JOP_LT ? cmp < 0 : op == JOP_LE ? cmp <= 0 : op == JOP_GT ? cmp > 0 : cmp >= 0);
	}
	if (op == JOP_ADD && x.t == JT_LIST && y.t == JT_LIST) {
		struct jlist *l = jlist_new(&c->ar, x.u.l->n + y.u.l->n);
		if (!l)
			jalloc(c, (size_t)-1);
		for (size_t i = 0; i < x.u.l->n; i++)
			jlist_push(&c->ar, l, x.u.l->v[i]);
		for (size_t i = 0; i < y.u.l->n; i++)
			jlist_push(&c->ar, l, y.u.l->v[i]);
		return (struct jval){.t = JT_LIST, .u.l = l};
	}
	if (op == JOP_ADD && (x.t == JT_STR || y.t == JT_STR))
		return concat(c, as_text(c, x, line), as_text(c, y, line));
	jfail(c, EMBER_ETYPE, "line %d: unsupported operands %s and %s", line, jv_type_name(x), jv_type_name(y));
}

static struct jval eval_binary(struct jctx *c, struct jscope *s, const struct jnode *n)
{
	struct jval x = jeval(c, s, n->a);

	if (n->op == JOP_AND)
		return jv_truthy(x) ? jeval(c, s, n->b) : x;
	if (n->op == JOP_OR)
		return jv_truthy(x) ? x : jeval(c, s, n->b);
	struct jval y = jeval(c, s, n->b);
	switch (n->op) {
	case JOP_EQ:
		return jv_bool(jv_equal(x, y));
	case JOP_NE:
		return jv_bool(!jv_equal(x, y));
	case JOP_IN:
		return jv_bool(contains(c, x, y, n->line));
	case JOP_NOTIN:
		return jv_bool(!contains(c, x, y, n->line));
	}
	return eval_arith(c, n->op, x, y, n->line);
}

/* A filter chain whose innermost operand is JN_NONE gets `subject` there
 * (block set and filter blocks). */
static struct jval eval_filter(struct jctx *c, struct jscope *s, const struct jnode *n, const struct jval *subject)
{
	struct jargs a;
	struct jval v;

	if (subject && n->a->kind == JN_NONE)
		v = *subject;
	else if (subject && n->a->kind == JN_FILTER)
		v = eval_filter(c, s, n->a, subject);
	else
		v = jeval(c, s, n->a);
	eval_args(c, s, n->list, &a);
	return jfilter_apply(c, s, n->s, n->n, v, &a);
}

struct jval jeval(struct jctx *c, struct jscope *s, const struct jnode *n)
{
	struct jval v = {.t = JT_UNDEF};
	struct jargs a;

	jstep(c);
	jenter(c);
	switch (n->kind) {
	case JN_STR: v = jv_str(n->s, n->n); break;
	case JN_INT: v = jv_int(n->i); break;
	case JN_FLOAT: v.t = JT_FLOAT; v.u.f = n->f; break;
	case JN_BOOL: v = jv_bool((int)n->i); break;
	case JN_NONE: v.t = JT_NONE; break;
	case JN_NAME: v = scope_get(s, n->s, n->n); break;
	case JN_LIST:
		v.t = JT_LIST;
		if (!(v.u.l = jlist_new(&c->ar, 0)))
			jalloc(c, (size_t)-1);
		for (const struct jnode *x = n->list; x; x = x->next)
			if (jlist_push(&c->ar, v.u.l, jeval(c, s, x)) < 0)
				jalloc(c, (size_t)-1);
		break;
	case JN_DICT:
		v.t = JT_DICT;
		if (!(v.u.d = jdict_new(&c->ar)))
			jalloc(c, (size_t)-1);
		for (const struct jnode *x = n->list; x; x = x->next) {
			struct jval k = jeval(c, s, x->a);
			if (k.t != JT_STR)
				jfail(c, EMBER_ETYPE, "line %d: dict keys must be strings", x->line);
			if (jdict_set(&c->ar, v.u.d, k.u.s.p, k.u.s.n, jeval(c, s, x->b)) < 0)
				jalloc(c, (size_t)-1);
		}
		break;
	case JN_ATTR: {
		struct jval obj = jeval(c, s, n->a);
		v = eval_index(c, obj, jv_str(n->s, n->n));
		break;
	}
	case JN_INDEX: {
		struct jval obj = jeval(c, s, n->a);
		v = eval_index(c, obj, jeval(c, s, n->b));
		break;
	}
	case JN_SLICE: v = eval_slice(c, s, n); break;
	case JN_CALL: v = eval_call(c, s, n); break;
	case JN_FILTER: v = eval_filter(c, s, n, NULL); break;
	case JN_TEST: {
		struct jval x = jeval(c, s, n->a);
		eval_args(c, s, n->list, &a);
		v = jv_bool(jtest_apply(c, n->s, n->n, x, &a) != n->neg);
		break;
	}
	case JN_UNARY: {
		struct jval x = jeval(c, s, n->a);
		if (n->op == JOP_NOT)
			v = jv_bool(!jv_truthy(x));
		else if (x.t == JT_INT || x.t == JT_BOOL)
			v = jv_int(n->op == JOP_NEG ? -x.u.i : x.u.i);
		else if (x.t == JT_FLOAT)
			v = x, v.u.f = n->op == JOP_NEG ? -x.u.f : x.u.f;
		else
			jfail(c, EMBER_ETYPE, "line %d: unary minus on a %s", n->line, jv_type_name(x));
		break;
	}
	case JN_BINARY: v = eval_binary(c, s, n); break;
	case JN_COND:
		if (jv_truthy(jeval(c, s, n->b)))
			v = jeval(c, s, n->a);
		else if (n->c)
			v = jeval(c, s, n->c);
		break;
	default:
		jfail(c, EMBER_ETYPE, "line %d: not an expression", n->line);
	}
	c->depth--;
	return v;
}

/* ---- statements ---- */

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static int exec_list(struct jctx *c, struct jscope *s, const struct jnode *n, struct jbuf *out);

static struct jval render_block(struct jctx *c, struct jscope *s, const struct jnode *body)
{
	struct jbuf b = {.ar = &c->ar};
	jbuf_put(&b, "", 0);
	exec_list(c, s, body, &b);
	if (b.oom)
		jbuf_fail(c, &b);
	return jv_str(b.p ? b.p : "", b.n);
}

struct jval jcall_value(struct jctx *c, struct jval fn, struct jargs *a)
{
	if (fn.t == JT_FUNC)
		return jfn_call(c, fn.u.fn, a);
	const struct jnode *m = fn.u.m;
	struct jscope *s = scope_new(c, c->root);
	size_t i = 0;
	jenter(c);
	for (const struct jnode *p = m->list; p; p = p->next, i++) {
		struct jval v = {.t = JT_UNDEF}, *kw = a->kw ? jdict_get(a->kw, p->s, p->n) : NULL;
		if (i < a->npos)
			v = a->pos[i];
		else if (kw)
			v = *kw;
		else if (p->kind == JN_KWARG)
			v = jeval(c, c->root, p->a);
		scope_set(c, s, p->s, p->n, v);
	}
	struct jval r = render_block(c, s, m->b);
	c->depth--;
	return r;
}

static void assign(struct jctx *c, struct jscope *s, const struct jnode *target, struct jval v)
{
	if (target->kind == JN_ATTR) {
		struct jval ns = scope_get(s, target->a->s, target->a->n);
		if (ns.t != JT_DICT || !ns.u.d->is_ns)
			jfail(c, EMBER_ETYPE, "line %d: cannot set an attribute of a %s (not a namespace)",
			      target->line, jv_type_name(ns));
		if (jdict_set(&c->ar, ns.u.d, target->s, target->n, v) < 0)
			jalloc(c, (size_t)-1);
		return;
	}
	if (!target->next) {
		scope_set(c, s, target->s, target->n, v);
		return;
	}
	/* set a, b = pair */
	size_t i = 0;
	if (v.t != JT_LIST)
		jfail(c, EMBER_ETYPE, "line %d: cannot unpack a %s", target->line, jv_type_name(v));
	for (const struct jnode *t = target; t; t = t->next, i++)
		scope_set(c, s, t->s, t->n, i < v.u.l->n ? v.u.l->v[i] : (struct jval){.t = JT_UNDEF});
	if (i != v.u.l->n)
		jfail(c, EMBER_ETYPE, "line %d: unpacking %zu values into %zu names", target->line, v.u.l->n, i);
}

/* The sequence a for loop walks: a list as is, a dict's keys, a string's
 * characters (bytes). */
static struct jlist *iterable(struct jctx *c, struct jval v, int line)
{
	struct jlist *l = NULL;

	if (v.t == JT_LIST)
		return v.u.l;
	if (v.t == JT_UNDEF || v.t == JT_NONE) {
		l = jlist_new(&c->ar, 0);
	} else if (v.t == JT_DICT) {
		l = jlist_new(&c->ar, v.u.d->n);
		for (size_t i = 0; l && i < v.u.d->n; i++)
			jlist_push(&c->ar, l, jv_str(v.u.d->kp[i], v.u.d->kn[i]));
	} else if (v.t == JT_STR) {
		l = jlist_new(&c->ar, v.u.s.n);
		for (size_t i = 0; l && i < v.u.s.n; i++)
			jlist_push(&c->ar, l, jv_str(v.u.s.p + i, 1));
	} else {
		jfail(c, EMBER_ETYPE, "line %d: cannot iterate over a %s", line, jv_type_name(v));
	}
	if (!l)
		jalloc(c, (size_t)-1);
	return l;
}

static void exec_for(struct jctx *c, struct jscope *s, const struct jnode *n, struct jbuf *out)
{
	struct jlist *all = iterable(c, jeval(c, s, n->a), n->line), *items = all;
	struct jscope *body = scope_new(c, s);
	struct jval loop = {.t = JT_DICT};

	if (n->d) { /* `for x in xs if cond`: filter first, so loop.length counts the kept ones */
		if (!(items = jlist_new(&c->ar, 0)))
			jalloc(c, (size_t)-1);
		for (size_t i = 0; i < all->n; i++) {
			assign(c, body, n->list, all->v[i]);
			if (jv_truthy(jeval(c, body, n->d)) && jlist_push(&c->ar, items, all->v[i]) < 0)
				jalloc(c, (size_t)-1);
		}
	}
	if (items->n == 0) {
		if (n->c)
			exec_list(c, s, n->c, out);
		return;
	}
	if (!(loop.u.d = jdict_new(&c->ar)))
		jalloc(c, (size_t)-1);
	for (size_t i = 0; i < items->n; i++) {
		int64_t len = (int64_t)items->n, k = (int64_t)i;
		struct {
			const char *name;
			struct jval v;
		} f[] = {
			{"index", jv_int(k + 1)},
			{"index0", jv_int(k)},
			{"revindex", jv_int(len - k)},
			{"revindex0", jv_int(len - k - 1)},
			{"first", jv_bool(k == 0)},
			{"last", jv_bool(k == len - 1)},
			{"length", jv_int(len)},
			{"previtem", k > 0 ? items->v[k - 1] : (struct jval){.t = JT_UNDEF}},
			{"nextitem", k + 1 < len ? items->v[k + 1] : (struct jval){.t = JT_UNDEF}},
		};
		for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++) {
			if (i > 0) { /* same keys, same order: overwrite in place */
				loop.u.d->v[j] = f[j].v;
				continue;
			}
			if (jdict_set(&c->ar, loop.u.d, f[j].name, strlen(f[j].name), f[j].v) < 0)
				jalloc(c, (size_t)-1);
		}
		/* One scope reused: an iteration allocates nothing of its own. */
		jstep(c);
		body->vars->n = 0;
		scope_set(c, body, "loop", 4, loop);
		assign(c, body, n->list, items->v[i]);
		if (exec_list(c, body, n->b, out) == FLOW_BREAK)
			break;
	}
}

static int exec_list(struct jctx *c, struct jscope *s, const struct jnode *n, struct jbuf *out)
{
	int flow = FLOW_NEXT;

	jenter(c);
	for (; n && flow == FLOW_NEXT; n = n->next) {
		jstep(c);
		switch (n->kind) {
		case JS_TEXT:
			jbuf_put(out, n->s, n->n);
			break;
		case JS_OUTPUT:
			jv_to_text(out, jeval(c, s, n->a));
			break;
		case JS_IF:
			flow = exec_list(c, s, jv_truthy(jeval(c, s, n->a)) ? n->b : n->c, out);
			break;
		case JS_FOR:
			exec_for(c, s, n, out);
			break;
		case JS_SET:
			assign(c, s, n->list, jeval(c, s, n->a));
			break;
		case JS_SETBLOCK: {
			struct jval v = render_block(c, s, n->b);
			assign(c, s, n->list, n->d ? eval_filter(c, s, n->d, &v) : v);
			break;
		}
		case JS_FILTERBLOCK: {
			struct jval v = render_block(c, s, n->b);
			jv_to_text(out, eval_filter(c, s, n->d, &v));
			break;
		}
		case JS_MACRO:
			scope_set(c, s, n->s, n->n, (struct jval){.t = JT_MACRO, .u.m = n});
			break;
		case JS_BREAK:
			flow = FLOW_BREAK;
			break;
		case JS_CONTINUE:
			flow = FLOW_CONTINUE;
			break;
		default:
			jfail(c, EMBER_ETYPE, "line %d: not a statement", n->line);
		}
		if (out->oom)
			jbuf_fail(c, out);
	}
	c->depth--;
	return flow;
}

/* ---- public ---- */

struct jinja_template *jinja_parse(const char *src, size_t len, char *err)
{
	struct jinja_template *t = calloc(1, sizeof(*t));

	if (!t) {
		if (err)
			snprintf(err, EMBER_ERR_MAX, "out of memory");
		return NULL;
	}
	t->ar.limit = JINJA_MEM_MAX;
	if (jinja_parse_tree(&t->ar, src ? src : "", src ? len : 0, &t->body, err) < 0) {
		jinja_free(t);
		return NULL;
	}
	return t;
}

void jinja_free(struct jinja_template *t)
{
	if (!t)
		return;
	jarena_free(&t->ar);
	free(t);
}

int jinja_render(const struct jinja_template *t, const char *context_json, size_t context_len, char **out,
		 size_t *len, char *err)
{
	struct jctx *c = calloc(1, sizeof(*c));
	struct jval ctx;
	struct jbuf b;
	int rc;

	*out = NULL;
	*len = 0;
	if (!c) {
		if (err)
			snprintf(err, EMBER_ERR_MAX, "out of memory");
		return EMBER_ENOMEM;
	}
	c->ar.limit = JINJA_MEM_MAX;
	c->err = err;
	if ((rc = jv_from_json(&c->ar, context_json, context_len, &ctx, err)) < 0)
		goto done;
	if (ctx.t != JT_DICT) {
		if (err)
			snprintf(err, EMBER_ERR_MAX, "context JSON: not an object");
		rc = EMBER_EFORMAT;
		goto done;
	}
	if (setjmp(c->fail)) {
		rc = c->rc;
		goto done;
	}
	c->root = scope_new(c, NULL);
	for (int i = 0; i < JFN_COUNT; i++)
		scope_set(c, c->root, jfn_names[i], strlen(jfn_names[i]), (struct jval){.t = JT_FUNC, .u.fn = i});
	for (size_t i = 0; i < ctx.u.d->n; i++)
		scope_set(c, c->root, ctx.u.d->kp[i], ctx.u.d->kn[i], ctx.u.d->v[i]);
	b = (struct jbuf){.ar = &c->ar};
	jbuf_put(&b, "", 0);
	/* Top-level sets and macros live beside the context's variables, where
	 * macro bodies (whose scope's parent is the root) can see them. */
	exec_list(c, c->root, t->body, &b);
	if (b.oom)
		jbuf_fail(c, &b);
	if (!(*out = malloc(b.n + 1))) {
		rc = EMBER_ENOMEM;
		if (err)
			snprintf(err, EMBER_ERR_MAX, "out of memory");
		goto done;
	}
	memcpy(*out, b.p ? b.p : "", b.n + 1);
	*len = b.n;
	rc = 0;
done:
	jarena_free(&c->ar);
	free(c);
	return rc;
}
