/*
 * jinja_value.c - the Jinja interpreter's arena, values and JSON.
 *
 * JSON comes in (the render context) and goes out (the tojson filter) here,
 * with our own small reader and writer: engine/ does not link jansson
 * (STYLE.md rule 5), and tojson must format exactly as the reference
 * renderer does anyway.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "jinja_impl.h"

struct jarena_chunk {
	struct jarena_chunk *next;
	size_t cap, used;
	max_align_t data[];
};

#define JARENA_CHUNK (64u << 10)

void *jarena_alloc(struct jarena *a, size_t n)
{
	size_t need = (n + 15) & ~(size_t)15;
	struct jarena_chunk *c = a->head;

	if (need < n || (a->limit && (need > a->limit || a->used > a->limit - need)))
		return NULL;
	if (!c || c->cap - c->used < need) {
		size_t cap = need > JARENA_CHUNK ? need : JARENA_CHUNK;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	void *p = (char *)c->data + c->used;
	c->used += need;
	a->used += need;
	memset(p, 0, n);
	return p;
}

void jarena_free(struct jarena *a)
{
	struct jarena_chunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = 0;
}

/* ---- byte strings ---- */

void jbuf_put(struct jbuf *b, const char *s, size_t n)
{
	if (b->oom || n == 0)
		return;
	if (b->cap - b->n < n + 1) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap - b->n < n + 1) {
			if (cap > ((size_t)1 << 40)) {
				b->oom = 1;
				return;
			}
			cap *= 2;
		}
		/* Arena memory is not freed one piece at a time: the old copy
		 * stays until the render ends. Doubling keeps that within 2x. */
		char *p = jarena_alloc(b->ar, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		if (b->n)
			memcpy(p, b->p, b->n);
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

void jbuf_putc(struct jbuf *b, char c)
{
	jbuf_put(b, &c, 1);
}

/* ---- containers ---- */

struct jlist *jlist_new(struct jarena *ar, size_t cap)
{
	struct jlist *l = jarena_alloc(ar, sizeof(*l));

	if (!l)
		return NULL;
	if (cap && !(l->v = jarena_alloc(ar, cap * sizeof(*l->v))))
		return NULL;
	l->cap = cap;
	return l;
}

int jlist_push(struct jarena *ar, struct jlist *l, struct jval v)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct jval *nv = jarena_alloc(ar, cap * sizeof(*nv));
		if (!nv)
			return EMBER_ENOMEM;
		if (l->n)
			memcpy(nv, l->v, l->n * sizeof(*nv));
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = v;
	return 0;
}

struct jdict *jdict_new(struct jarena *ar)
{
	return jarena_alloc(ar, sizeof(struct jdict));
}

struct jval *jdict_get(const struct jdict *d, const char *k, size_t kn)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->kn[i] == kn && memcmp(d->kp[i], k, kn) == 0)
			return &d->v[i];
	return NULL;
}

int jdict_set(struct jarena *ar, struct jdict *d, const char *k, size_t kn, struct jval v)
{
	struct jval *slot = jdict_get(d, k, kn);

	if (slot) {
		*slot = v;
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		const char **kp = jarena_alloc(ar, cap * sizeof(*kp));
		size_t *knv = jarena_alloc(ar, cap * sizeof(*knv));
		struct jval *nv = jarena_alloc(ar, cap * sizeof(*nv));
		if (!kp || !knv || !nv)
			return EMBER_ENOMEM;
		if (d->n) {
			memcpy(kp, d->kp, d->n * sizeof(*kp));
			memcpy(knv, d->kn, d->n * sizeof(*knv));
			memcpy(nv, d->v, d->n * sizeof(*nv));
		}
		d->kp = kp;
		d->kn = knv;
		d->v = nv;
		d->cap = cap;
	}
	d->kp[d->n] = k;
	d->kn[d->n] = kn;
	d->v[d->n++] = v;
	return 0;
}

/* ---- scalars ---- */

struct jval jv_str(const char *p, size_t n)
{
	struct jval v = {.t = JT_STR};
	v.u.s.p = p;
	v.u.s.n = n;
	return v;
}

struct jval jv_int(int64_t i)
{
	struct jval v = {.t = JT_INT};
	v.u.i = i;
	return v;
}

struct jval jv_bool(int b)
{
	struct jval v = {.t = JT_BOOL};
	v.u.i = b != 0;
	return v;
}

int jv_truthy(struct jval v)
{
	switch (v.t) {
	case JT_BOOL:
	case JT_INT:
		return v.u.i != 0;
	case JT_FLOAT:
		return v.u.f != 0 && !isnan(v.u.f);
	case JT_STR:
		return v.u.s.n != 0;
	case JT_LIST:
		return v.u.l->n != 0;
	case JT_DICT:
		return v.u.d->n != 0 || v.u.d->is_ns;
	case JT_FUNC:
	case JT_MACRO:
		return 1;
	default:
		return 0;
	}
}

static int jv_is_num(struct jval v)
{
	return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL;
}

/* The reference compares with JavaScript's `==` on the underlying values:
 * numbers and booleans by number, strings by content, null equals
 * undefined, containers by identity. */
int jv_equal(struct jval a, struct jval b)
{
	if ((a.t == JT_NONE || a.t == JT_UNDEF) && (b.t == JT_NONE || b.t == JT_UNDEF))
		return 1;
	if (jv_is_num(a) && jv_is_num(b)) {
		double x = a.t == JT_FLOAT ? a.u.f : (double)a.u.i;
		double y = b.t == JT_FLOAT ? b.u.f : (double)b.u.i;
		if (a.t != JT_FLOAT && b.t != JT_FLOAT)
			return a.u.i == b.u.i;
		return x == y;
	}
	if (a.t != b.t)
		return 0;
	switch (a.t) {
	case JT_STR:
		return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
	case JT_LIST:
		return a.u.l == b.u.l;
	case JT_DICT:
		return a.u.d == b.u.d;
	case JT_MACRO:
		return a.u.m == b.u.m;
	case JT_FUNC:
		return a.u.fn == b.u.fn;
	default:
		return 0;
	}
}

/* ---- JSON in ---- */

struct jreader {
	struct jarena *ar;
	const char *s, *end;
	int depth;
	char *err;
};

static void jr_ws(struct jreader *r)
{
	while (r->s < r->end && (*r->s == ' ' || *r->s == '\t' || *r->s == '\n' || *r->s == '\r'))
		r->s++;
}

static int jr_fail(struct jreader *r, const char *what)
{
	if (r->err)
		snprintf(r->err, EMBER_ERR_MAX, "context JSON: %s", what);
	return EMBER_EFORMAT;
}

static int jr_hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static void jr_utf8(struct jbuf *b, unsigned cp)
{
	char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xC0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xE0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (char)(0xF0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		u[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	jbuf_put(b, u, n);
}

static int jr_string(struct jreader *r, struct jval *out)
{
	struct jbuf b = {.ar = r->ar};

	r->s++; /* the opening quote */
	jbuf_put(&b, "", 0);
	while (r->s < r->end && *r->s != '"') {
		unsigned char c = (unsigned char)*r->s;
		if (c < 0x20)
			return jr_fail(r, "control character in a string");
		if (c != '\\') {
			const char *start = r->s;
			while (r->s < r->end && *r->s != '"' && *r->s != '\\' && (unsigned char)*r->s >= 0x20)
				r->s++;
			jbuf_put(&b, start, (size_t)(r->s - start));
			continue;
		}
		if (r->end - r->s < 2)
			return jr_fail(r, "unterminated string");
		char e = r->s[1];
		r->s += 2;
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char map[] = "\"\\/\b\f\n\r\t";
			jbuf_putc(&b, map[simple - "\"\\/bfnrt"]);
			continue;
		}
		unsigned cp, lo;
		if (e != 'u' || r->end - r->s < 4 || jr_hex4(r->s, &cp) < 0)
			return jr_fail(r, "bad escape in a string");
		r->s += 4;
		if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->s >= 6 && r->s[0] == '\\' && r->s[1] == 'u' &&
		    jr_hex4(r->s + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			r->s += 6;
		}
		jr_utf8(&b, cp);
	}
	if (r->s >= r->end)
		return jr_fail(r, "unterminated string");
	r->s++;
	if (b.oom)
		return EMBER_ENOMEM;
	*out = jv_str(b.p ? b.p : "", b.n);
	return 0;
}

static int jr_value(struct jreader *r, struct jval *out);

static int jr_container(struct jreader *r, struct jval *out)
{
	int is_obj = *r->s == '{';
	char close = is_obj ? '}' : ']';
	int rc;

	if (++r->depth > JINJA_DEPTH_MAX)
		return jr_fail(r, "nested too deeply");
	r->s++;
	if (is_obj) {
		out->t = JT_DICT;
		if (!(out->u.d = jdict_new(r->ar)))
			return EMBER_ENOMEM;
	} else {
		out->t = JT_LIST;
		if (!(out->u.l = jlist_new(r->ar, 0)))
			return EMBER_ENOMEM;
	}
	jr_ws(r);
	if (r->s < r->end && *r->s == close) {
		r->s++;
		r->depth--;
		return 0;
	}
	for (;;) {
		struct jval k = {0}, v;
		jr_ws(r);
		if (is_obj) {
			if (r->s >= r->end || *r->s != '"')
				return jr_fail(r, "expected a key");
			if ((rc = jr_string(r, &k)) < 0)
				return rc;
			jr_ws(r);
			if (r->s >= r->end || *r->s != ':')
				return jr_fail(r, "expected ':'");
			r->s++;
		}
		if ((rc = jr_value(r, &v)) < 0)
			return rc;
		rc = is_obj ? jdict_set(r->ar, out->u.d, k.u.s.p, k.u.s.n, v) : jlist_push(r->ar, out->u.l, v);
		if (rc < 0)
			return rc;
		jr_ws(r);
		if (r->s < r->end && *r->s == ',') {
			r->s++;
			continue;
		}
		if (r->s < r->end && *r->s == close) {
			r->s++;
			r->depth--;
			return 0;
		}
		return jr_fail(r, "expected ',' or a closing bracket");
	}
}

static int jr_number(struct jreader *r, struct jval *out)
{
	const char *p = r->s;
	char tmp[64];
	int is_float = 0;

	if (p < r->end && *p == '-')
		p++;
	while (p < r->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
			      *p == '-')) {
		if (*p == '.' || *p == 'e' || *p == 'E')
			is_float = 1;
		p++;
	}
	size_t n = (size_t)(p - r->s);
	if (n == 0 || n >= sizeof(tmp))
		return jr_fail(r, "bad number");
	memcpy(tmp, r->s, n);
	tmp[n] = '\0';
	char *e;
	double d = strtod(tmp, &e);
	if (*e || e == tmp)
		return jr_fail(r, "bad number");
	r->s = p;
	/* As the reference: a number with no fraction is an integer. */
	if ((!is_float || (d == floor(d) && fabs(d) < 9007199254740992.0)) && fabs(d) < 9.2e18) {
		*out = jv_int(is_float ? (int64_t)d : strtoll(tmp, NULL, 10));
		return 0;
	}
	out->t = JT_FLOAT;
	out->u.f = d;
	return 0;
}

static int jr_value(struct jreader *r, struct jval *out)
{
	jr_ws(r);
	memset(out, 0, sizeof(*out));
	if (r->s >= r->end)
		return jr_fail(r, "unexpected end");
	switch (*r->s) {
	case '"':
		return jr_string(r, out);
	case '{':
	case '[':
		return jr_container(r, out);
	}
	static const struct {
		const char *w;
		size_t n;
		uint8_t t;
		int b;
	} words[] = {{"true", 4, JT_BOOL, 1}, {"false", 5, JT_BOOL, 0}, {"null", 4, JT_NONE, 0}};
	for (size_t i = 0; i < 3; i++)
		if ((size_t)(r->end - r->s) >= words[i].n && memcmp(r->s, words[i].w, words[i].n) == 0) {
			r->s += words[i].n;
			out->t = words[i].t;
			out->u.i = words[i].b;
			return 0;
		}
	return jr_number(r, out);
}

int jv_from_json(struct jarena *ar, const char *s, size_t n, struct jval *out, char *err)
{
	struct jreader r = {.ar = ar, .s = s, .end = s + n, .err = err};
	int rc = jr_value(&r, out);

	if (rc == EMBER_ENOMEM && err)
		snprintf(err, EMBER_ERR_MAX, "context JSON: out of memory");
	if (rc < 0)
		return rc;
	jr_ws(&r);
	if (r.s != r.end)
		return jr_fail(&r, "trailing characters");
	return 0;
}

/* ---- out ---- */

static void jw_string(struct jbuf *b, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;

	jbuf_putc(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		const char *esc = NULL;
		char u[6];
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c == '\b')
			esc = "\\b";
		else if (c == '\f')
			esc = "\\f";
		else if (c >= 0x20)
			continue;
		jbuf_put(b, p + start, i - start);
		if (esc) {
			jbuf_put(b, esc, strlen(esc));
		} else {
			memcpy(u, "\\u00", 4);
			u[4] = hex[c >> 4];
			u[5] = hex[c & 15];
			jbuf_put(b, u, 6);
		}
		start = i + 1;
	}
	if (start < n) /* an empty string may have no bytes: no NULL + 0 */
		jbuf_put(b, p + start, n - start);
	jbuf_putc(b, '"');
}

/* The shortest text that reads back as f (JavaScript's Number#toString for
 * the numbers templates meet). */
static void jw_double(struct jbuf *b, double f)
{
	char tmp[40];
	if (!isfinite(f)) {
		jbuf_put(b, isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity", isnan(f) ? 3 : f > 0 ? 8 : 9);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, f);
		if (strtod(tmp, NULL) == f)
			break;
	}
	jbuf_put(b, tmp, strlen(tmp));
}

static void jw_indent(struct jbuf *b, int indent, int depth)
{
	jbuf_putc(b, '\n');
	for (int i = 0; i < indent * depth; i++)
		jbuf_putc(b, ' ');
}

/* Before item i of a list or dict at `depth`: the separator after the
 * first, then (indent > 0) a new line at the item's depth. */
static void jw_item(struct jbuf *b, size_t i, const char *sep, int indent, int depth)
{
	if (i)
		jbuf_put(b, sep, strlen(sep));
	if (indent > 0)
		jw_indent(b, indent, depth + 1);
}

/* The closing bracket of a list or dict of n items, on a line of its own
 * when indented and not empty. */
static void jw_close(struct jbuf *b, char bracket, size_t n, int indent, int depth)
{
	if (indent > 0 && n)
		jw_indent(b, indent, depth);
	jbuf_putc(b, bracket);
}

void jv_to_json(struct jbuf *b, struct jval v, int indent, int depth)
{
	/* Values can hold themselves ({% set ns.x = ns %}, list.append(list)):
	 * stop at the nesting limit instead of recursing for ever. */
	if (depth > JINJA_DEPTH_MAX) {
		b->deep = b->oom = 1;
		return;
	}
	char tmp[32];
	const char *sep = indent > 0 ? "," : ", ";

	switch (v.t) {
	case JT_BOOL:
		jbuf_put(b, v.u.i ? "true" : "false", v.u.i ? 4 : 5);
		return;
	case JT_INT:
		snprintf(tmp, sizeof(tmp), "%lld", (long long)v.u.i);
		jbuf_put(b, tmp, strlen(tmp));
		return;
	case JT_FLOAT:
		jw_double(b, v.u.f);
		return;
	case JT_STR:
		jw_string(b, v.u.s.p, v.u.s.n);
		return;
	case JT_LIST:
		jbuf_putc(b, '[');
		for (size_t i = 0; i < v.u.l->n; i++) {
			jw_item(b, i, sep, indent, depth);
			jv_to_json(b, v.u.l->v[i], indent, depth + 1);
		}
		jw_close(b, ']', v.u.l->n, indent, depth);
		return;
	case JT_DICT:
		jbuf_putc(b, '{');
		for (size_t i = 0; i < v.u.d->n; i++) {
			jw_item(b, i, sep, indent, depth);
			jw_string(b, v.u.d->kp[i], v.u.d->kn[i]);
			jbuf_put(b, ": ", 2);
			jv_to_json(b, v.u.d->v[i], indent, depth + 1);
		}
		jw_close(b, '}', v.u.d->n, indent, depth);
		return;
	default:
		jbuf_put(b, "null", 4);
		return;
	}
}

void jv_to_text(struct jbuf *b, struct jval v)
{
	char tmp[40];

	switch (v.t) {
	case JT_STR:
		jbuf_put(b, v.u.s.p, v.u.s.n);
		return;
	case JT_FLOAT:
		if (isfinite(v.u.f) && v.u.f == floor(v.u.f) && fabs(v.u.f) < 1e21) {
			snprintf(tmp, sizeof(tmp), "%.1f", v.u.f);
			jbuf_put(b, tmp, strlen(tmp));
		} else {
			jw_double(b, v.u.f);
		}
		return;
	case JT_BOOL: /* these print as their JSON */
	case JT_INT:
	case JT_LIST:
	case JT_DICT:
		jv_to_json(b, v, 0, 0);
		return;
	default:
		return;
	}
}
