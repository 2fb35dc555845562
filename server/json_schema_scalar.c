/*
 * json_schema_scalar.c - JSON Schema strings and numbers into GBNF rule
 * bodies (see json_schema.h for what is covered): integer bounds as exact
 * digit ranges, number bounds with integer ends, string lengths, formats,
 * and the pattern subset translated to GBNF over a JSON string's content
 * (quote, backslash and control characters are written escaped, as JSON
 * writes them).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_impl.h"

#define INT_LIMIT 1000000000000000LL /* |bounds| the digit ranges handle */

/* ---- integers by digit ranges ------------------------------------------------- */

/* Digit strings of a's length between a and b (same length) from i on. */
static void digits_between(struct jsonw *w, const char *a, const char *b, size_t i)
{
	size_t n = strlen(a), k;

	if (i == n)
		return;
	if (a[i] == b[i]) {
		js_putf(w, "\"%c\" ", a[i]);
		digits_between(w, a, b, i + 1);
		return;
	}
	char lo_rest[24], hi_rest[24];

	for (k = i + 1; k < n; k++) {
		lo_rest[k - i - 1] = '9';
		hi_rest[k - i - 1] = '0';
	}
	lo_rest[n - i - 1] = hi_rest[n - i - 1] = '\0';
	js_putf(w, "( \"%c\" ", a[i]);
	digits_between(w, a + i + 1, lo_rest, 0);
	if (a[i] + 1 <= b[i] - 1)
		js_putf(w, "| [%c-%c] [0-9]{%zu} ", a[i] + 1, b[i] - 1, n - i - 1);
	js_putf(w, "| \"%c\" ", b[i]);
	digits_between(w, hi_rest, b + i + 1, 0);
	jsonw_raw(w, ") ");
}

/* Non-negative integers in [lo, hi] (hi < 0: unbounded), no leading zeros. */
static void nonneg_range(struct jsonw *w, long long lo, long long hi)
{
	char a[24], b[24];
	int la, lb, L, first = 1;

	snprintf(a, sizeof(a), "%lld", lo);
	la = (int)strlen(a);
	lb = hi < 0 ? la : (int)snprintf(b, sizeof(b), "%lld", hi);
	jsonw_raw(w, "( ");
	for (L = la; L <= lb; L++) {
		char x[24], y[24];
		int k;

		if (L == la)
			snprintf(x, sizeof(x), "%s", a);
		else
			for (k = 0; k <= L; k++)
				x[k] = k == L ? '\0' : k == 0 ? '1' : '0';
		if (hi >= 0 && L == lb)
			snprintf(y, sizeof(y), "%s", b);
		else
			for (k = 0; k <= L; k++)
				y[k] = k == L ? '\0' : '9';
		jsonw_raw(w, first ? "" : "| ");
		first = 0;
		digits_between(w, x, y, 0);
	}
	if (hi < 0)
		js_putf(w, "| [1-9] [0-9]{%d,} ", la);
	jsonw_raw(w, ") ");
}

/* Integers in [lo, hi]; has_* = 0: unbounded that side. */
static void int_range(struct jsonw *w, int has_lo, long long lo, int has_hi, long long hi)
{
	int neg = !has_lo || lo < 0, pos = !has_hi || hi >= 0;

	jsonw_raw(w, "( ");
	if (neg)
		jsonw_raw(w, "\"-\" "), nonneg_range(w, has_hi && hi < 0 ? -hi : 1, has_lo ? -lo : -1);
	if (pos) {
		jsonw_raw(w, neg ? "| " : "");
		nonneg_range(w, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
	}
	jsonw_raw(w, ") ");
}

/* Reads minimum/maximum (exclusive ones shift by one for integers). */
static int read_bounds(struct ctx *c, json_t *s, int integer, int *has_lo, double *lo, int *has_hi,
		       double *hi, const char *where)
{
	static const char *const keys[] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
	int i;

	*has_lo = *has_hi = 0;
	for (i = 0; i < 4; i++) {
		json_t *v = json_object_get(s, keys[i]);
		double x;

		if (v == NULL)
			continue;
		if (!json_is_number(v))
			return js_fail(c, where, "'%s' must be a number", keys[i]);
		x = json_number_value(v);
		if (i % 2 == 1 && !integer)
			return js_fail(c, where, "'%s' on a non-integer number is not supported", keys[i]);
		if (integer)
			x = i < 2 ? ceil(x + (i == 1 ? 0.5 : 0)) : floor(x - (i == 3 ? 0.5 : 0));
		if (i < 2 && (!*has_lo || x > *lo))
			*lo = x, *has_lo = 1;
		if (i >= 2 && (!*has_hi || x < *hi))
			*hi = x, *has_hi = 1;
	}
	if ((*has_lo && fabs(*lo) > INT_LIMIT) || (*has_hi && fabs(*hi) > INT_LIMIT))
		return js_fail(c, where, "bounds beyond 1e15 are not supported");
	if (*has_lo && *has_hi && *lo > *hi)
		return js_fail(c, where, "minimum above maximum: no number is allowed");
	return 0;
}

int js_gen_integer(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	int has_lo, has_hi;
	double lo = 0, hi = 0;

	if (read_bounds(c, s, 1, &has_lo, &lo, &has_hi, &hi, where) != 0)
		return -1;
	if (!has_lo && !has_hi)
		jsonw_raw(w, "integer ");
	else
		int_range(w, has_lo, (long long)lo, has_hi, (long long)hi);
	return 0;
}

int js_gen_number(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	int has_lo, has_hi;
	double lo = 0, hi = 0;

	if (read_bounds(c, s, 0, &has_lo, &lo, &has_hi, &hi, where) != 0)
		return -1;
	if (!has_lo && !has_hi) {
		jsonw_raw(w, "number ");
		return 0;
	}
	if (!has_lo || lo < 0 || lo != floor(lo) || (has_hi && hi != floor(hi)))
		return js_fail(c, where, "number bounds other than integer ends with minimum >= 0 "
			    "are not supported (use type integer, or drop the bounds)");
	/* An integer part in [lo, hi - 1] with any fraction, or hi itself
	 * with a fraction of zeros. */
	jsonw_raw(w, "( ");
	if (!has_hi || hi > lo) {
		nonneg_range(w, (long long)lo, has_hi ? (long long)hi - 1 : -1);
		jsonw_raw(w, "( \".\" [0-9]+ )? ");
	}
	if (has_hi) {
		jsonw_raw(w, !has_hi || hi > lo ? "| " : "");
		js_putf(w, "\"%lld\" ( \".\" \"0\"+ )? ", (long long)hi);
	}
	jsonw_raw(w, ") ");
	return 0;
}

/* ---- strings -------------------------------------------------------------------- */

static const struct {
	const char *name, *gbnf;
} FORMATS[] = {
	{"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"},
	{"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )? "
		 "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
	{"date-time", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) "
		      "\"T\" ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )? "
		      "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )"},
	{"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
		 "[0-9a-fA-F]{12}"},
	{"email", "[a-zA-Z0-9._%+-]{1,64} \"@\" [a-zA-Z0-9-]{1,63} ( \".\" [a-zA-Z0-9-]{1,63} ){1,4}"},
	{"ipv4", "( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9] ) "
		 "( \".\" ( \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9] ) ){3}"},
};

/* The regex subset into GBNF over a JSON string's content. */
struct rx {
	struct ctx *c;
	const char *p, *end, *where;
	struct jsonw *w;
	int nest; /* open groups: parsing recurses on them */
};

static int rx_alt(struct rx *r);

/* A class escape (\d ...) into class ranges; 0 if `e` is not one. */
static const char *class_escape(char e, int *negated)
{
	*negated = e == 'D' || e == 'W' || e == 'S';
	switch (e) {
	case 'd': case 'D': return "0-9";
	case 'w': case 'W': return "a-zA-Z0-9_";
	case 's': case 'S': return " ";
	default: return NULL;
	}
}

/* One literal code point (possibly multi-byte UTF-8) as JSON text. */
static int rx_literal(struct rx *r, const char *s, size_t n)
{
	if (n == 1 && (unsigned char)s[0] < 0x20)
		return js_fail(r->c, r->where, "pattern: control characters are not supported");
	if (n == 1 && (s[0] == '"' || s[0] == '\\')) {
		char esc[2] = {'\\', s[0]};

		js_put_literal(r->w, esc, 2); /* JSON writes it escaped */
	} else {
		js_put_literal(r->w, s, n);
	}
	jsonw_raw(r->w, " ");
	return 0;
}

static int rx_class(struct rx *r)
{
	int neg = 0, en;
	const char *ce;

	r->p++;
	if (r->p < r->end && *r->p == '^')
		neg = 1, r->p++;
	jsonw_raw(r->w, neg ? "[^\"\\\\\\x00-\\x1f" : "[");
	while (r->p < r->end && *r->p != ']') {
		char ch = *r->p++;

		if (ch == '\\') {
			if (r->p >= r->end)
				break;
			ch = *r->p++;
			if ((ce = class_escape(ch, &en)) != NULL && !en) {
				jsonw_raw(r->w, ce);
				continue;
			}
			if (ce != NULL)
				return js_fail(r->c, r->where, "pattern: \\%c inside a class is not supported", ch);
			if (ch == 'n' || ch == 't' || ch == 'r')
				return js_fail(r->c, r->where, "pattern: control characters are not supported");
		}
		if (ch == '"' || ch == '\\')
			return js_fail(r->c, r->where, "pattern: '%c' in a class is not supported", ch);
		if ((unsigned char)ch < 0x20)
			return js_fail(r->c, r->where, "pattern: control characters are not supported");
		if (ch == ']' || ch == '[' || ch == '^')
			jsonw_raw(r->w, "\\");
		{
			char one[2] = {ch, 0};

			jsonw_raw(r->w, one);
		}
	}
	if (r->p >= r->end)
		return js_fail(r->c, r->where, "pattern: unterminated class");
	r->p++;
	jsonw_raw(r->w, "] ");
	return 0;
}

static int rx_quant(struct rx *r)
{
	const char *q = r->p;

	if (r->p >= r->end)
		return 0;
	if (*r->p == '*' || *r->p == '+' || *r->p == '?') {
		char one[3] = {*r->p++, ' ', 0};

		jsonw_raw(r->w, one);
	} else if (*r->p == '{') {
		while (r->p < r->end && *r->p != '}') {
			if (!(*r->p == '{' || *r->p == ',' || (*r->p >= '0' && *r->p <= '9')))
				return js_fail(r->c, r->where, "pattern: bad {m,n}");
			r->p++;
		}
		if (r->p >= r->end)
			return js_fail(r->c, r->where, "pattern: unterminated {m,n}");
		r->p++;
		{
			char buf[32];
			size_t n = (size_t)(r->p - q);

			if (n >= sizeof(buf))
				return js_fail(r->c, r->where, "pattern: bad {m,n}");
			memcpy(buf, q, n);
			buf[n] = '\0';
			jsonw_raw(r->w, buf);
			jsonw_raw(r->w, " ");
		}
	} else {
		return 0;
	}
	if (r->p < r->end && (*r->p == '?' || *r->p == '+'))
		return js_fail(r->c, r->where, "pattern: lazy or possessive quantifiers are not supported");
	return 0;
}

static int rx_atom(struct rx *r)
{
	const char *ce;
	int en;
	char ch = *r->p;

	if (ch == '(') {
		if (++r->nest > 64)
			return js_fail(r->c, r->where, "pattern: groups nested too deeply");
		r->p++;
		if (r->p < r->end && *r->p == '?') {
			if (r->end - r->p < 2 || r->p[1] != ':')
				return js_fail(r->c, r->where, "pattern: lookaround and named groups are not supported");
			r->p += 2;
		}
		jsonw_raw(r->w, "( ");
		if (rx_alt(r) != 0)
			return -1;
		if (r->p >= r->end || *r->p != ')')
			return js_fail(r->c, r->where, "pattern: missing )");
		r->p++;
		r->nest--;
		jsonw_raw(r->w, ") ");
		return 0;
	}
	if (ch == '[')
		return rx_class(r);
	if (ch == '.') {
		r->p++;
		jsonw_raw(r->w, "jchar ");
		return 0;
	}
	if (ch == '^' || ch == '$')
		return js_fail(r->c, r->where, "pattern: ^ and $ are supported only at the ends");
	if (ch == '*' || ch == '+' || ch == '?' || ch == '{')
		return js_fail(r->c, r->where, "pattern: a quantifier with nothing before it");
	if (ch == '\\') {
		if (r->end - r->p < 2)
			return js_fail(r->c, r->where, "pattern: a trailing backslash");
		ch = r->p[1];
		r->p += 2;
		if ((ce = class_escape(ch, &en)) != NULL) {
			js_putf(r->w, en ? "[^\"\\\\\\x00-\\x1f%s] " : "[%s] ", ce);
			return 0;
		}
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
			return js_fail(r->c, r->where, "pattern: escape \\%c is not supported", ch);
		return rx_literal(r, &ch, 1);
	}
	{
		size_t n = 1;
		unsigned char u = (unsigned char)ch;

		if (u >= 0xc0)
			n = u >= 0xf0 ? 4 : u >= 0xe0 ? 3 : 2;
		if ((size_t)(r->end - r->p) < n)
			return js_fail(r->c, r->where, "pattern: invalid UTF-8");
		r->p += n;
		return rx_literal(r, r->p - n, n);
	}
}

static int rx_alt(struct rx *r)
{
	for (;;) {
		while (r->p < r->end && *r->p != '|' && *r->p != ')') {
			if (rx_atom(r) != 0 || rx_quant(r) != 0)
				return -1;
		}
		if (r->p >= r->end || *r->p != '|')
			return 0;
		r->p++;
		jsonw_raw(r->w, "| ");
	}
}

static int gen_pattern(struct ctx *c, const char *pat, struct jsonw *w, const char *where)
{
	size_t n = strlen(pat);
	int head = n > 0 && pat[0] == '^';
	int tail = n > (size_t)head && pat[n - 1] == '$' && (n < 2 || pat[n - 2] != '\\');
	struct rx r = {.c = c, .p = pat + head, .end = pat + n - tail, .where = where, .w = w};

	/* JSON Schema patterns are not anchored: unanchored ends may hold
	 * any further text. */
	jsonw_raw(w, head ? "( " : "jchar* ( ");
	if (rx_alt(&r) != 0)
		return -1;
	if (r.p != r.end)
		return js_fail(c, where, "pattern: unmatched )");
	jsonw_raw(w, tail ? ") " : ") jchar* ");
	return 0;
}

int js_gen_string(struct ctx *c, json_t *s, struct jsonw *w, const char *where)
{
	json_t *fmt = json_object_get(s, "format"), *pat = json_object_get(s, "pattern");
	long long lo = 0, hi = -1;
	int has_lo, has_hi;
	size_t i;

	if ((has_lo = js_get_count(c, s, "minLength", &lo, where)) < 0 ||
	    (has_hi = js_get_count(c, s, "maxLength", &hi, where)) < 0)
		return -1;
	if ((fmt || pat) && (has_lo || has_hi))
		return js_fail(c, where, "minLength/maxLength together with %s are not supported",
			    fmt ? "format" : "pattern");
	if (fmt && pat)
		return js_fail(c, where, "format together with pattern is not supported");
	jsonw_raw(w, "\"\\\"\" ");
	if (fmt) {
		if (!json_is_string(fmt))
			return js_fail(c, where, "'format' must be a string");
		for (i = 0; i < sizeof(FORMATS) / sizeof(FORMATS[0]); i++)
			if (!strcmp(FORMATS[i].name, json_string_value(fmt)))
				break;
		if (i == sizeof(FORMATS) / sizeof(FORMATS[0]))
			return js_fail(c, where, "unsupported string format '%s'", json_string_value(fmt));
		jsonw_raw(w, "( ");
		jsonw_raw(w, FORMATS[i].gbnf);
		jsonw_raw(w, " ) ");
	} else if (pat) {
		if (!json_is_string(pat))
			return js_fail(c, where, "'pattern' must be a string");
		if (gen_pattern(c, json_string_value(pat), w, where) != 0)
			return -1;
	} else if (has_lo || has_hi) {
		if (has_hi && hi < lo)
			return js_fail(c, where, "maxLength below minLength");
		if (has_hi)
			js_putf(w, "char{%lld,%lld} ", lo, hi);
		else
			js_putf(w, "char{%lld,} ", lo);
	} else {
		jsonw_raw(w, "char* ");
	}
	jsonw_raw(w, "\"\\\"\" ");
	return 0;
}

