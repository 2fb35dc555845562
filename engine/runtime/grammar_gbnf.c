/*
 * grammar_gbnf.c - GBNF text into a compiled grammar (grammar_impl.h).
 *
 * Repetitions and groups become generated rules, as in any BNF-to-pushdown
 * compiler: X* is R ::= X R | (empty), X? is R ::= X | (empty), X{m,n} is
 * m copies of X then a chain of n-m nested optionals. The checks (left
 * recursion is refused with the rule named) and the flattening into
 * struct grammar are in grammar_rules.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar_build.h"
#include "grammar_impl.h"

#define MAX_REPEAT 1000 /* X{m,n}: m and n at most this */
#define NAME_SLOTS (2 * GRAMMAR_MAX_RULES) /* a power of two, never full */

/* Grows *buf (of *cap elements of `size`) to hold `need`; 0 or -1. */
static int grow(void **buf, uint32_t *cap, uint32_t need, size_t size)
{
	uint32_t c = *cap ? *cap : 8;
	void *nb;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	nb = realloc(*buf, (size_t)c * size);
	if (nb == NULL)
		return -1;
	*buf = nb;
	*cap = c;
	return 0;
}

static int fail(struct builder *b, const char *what)
{
	return ember_seterr(b->err, EMBER_EINVAL, "grammar line %d: %s", b->line, what);
}

int gbnf_nomem(struct builder *b)
{
	return ember_seterr(b->err, EMBER_ENOMEM, "grammar: out of memory");
}

static int seq_push(struct builder *b, struct bseq *s, uint32_t type, uint32_t val)
{
	if (grow((void **)&s->e, &s->cap, s->n + 1, sizeof(*s->e)) != 0)
		return gbnf_nomem(b);
	s->e[s->n].type = type;
	s->e[s->n].val = val;
	s->n++;
	return 0;
}

static int seq_append(struct builder *b, struct bseq *dst, const struct bseq *src)
{
	uint32_t i;

	for (i = 0; i < src->n; i++)
		if (seq_push(b, dst, src->e[i].type, src->e[i].val) != 0)
			return EMBER_ENOMEM;
	return 0;
}

/* A new rule (named or generated); returns its index or a negative error. */
static int64_t rule_add(struct builder *b, const char *name, size_t len)
{
	struct brule *r;

	if (b->n_r >= GRAMMAR_MAX_RULES)
		return fail(b, "too many rules");
	if (grow((void **)&b->r, &b->cap_r, b->n_r + 1, sizeof(*b->r)) != 0)
		return gbnf_nomem(b);
	r = &b->r[b->n_r];
	memset(r, 0, sizeof(*r));
	r->defined = name == NULL; /* generated rules get their alternatives at once */
	if (name != NULL) {
		r->name = strndup(name, len);
		if (r->name == NULL)
			return gbnf_nomem(b);
	}
	return b->n_r++;
}

/* The named rule, made on first mention (a reference may come before
 * the definition). Names are hashed: a grammar of many rules must not
 * cost quadratic time on the thread that parses requests. */
static int64_t rule_find(struct builder *b, const char *name, size_t len)
{
	uint32_t h = 2166136261u, slot;
	size_t i;
	int64_t r;

	if (b->names == NULL && (b->names = calloc(NAME_SLOTS, sizeof(*b->names))) == NULL)
		return gbnf_nomem(b);
	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 16777619u;
	for (slot = h & (NAME_SLOTS - 1); b->names[slot]; slot = (slot + 1) & (NAME_SLOTS - 1)) {
		const char *n = b->r[b->names[slot] - 1].name;

		if (strlen(n) == len && !memcmp(n, name, len))
			return b->names[slot] - 1;
	}
	r = rule_add(b, name, len);
	if (r >= 0)
		b->names[slot] = (uint32_t)r + 1;
	return r;
}

/* Adds an alternative to rule `ri` (a copy of `s`). */
static int rule_add_alt(struct builder *b, uint32_t ri, const struct bseq *s)
{
	struct brule *r = &b->r[ri];
	struct bseq *a;

	if (grow((void **)&r->alt, &r->cap_alt, r->n_alt + 1, sizeof(*r->alt)) != 0)
		return gbnf_nomem(b);
	a = &r->alt[r->n_alt++];
	memset(a, 0, sizeof(*a));
	return seq_append(b, a, s);
}

/* ---- classes ---------------------------------------------------------------- */

static int cmp_range(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Adds a class from ranges[first..] (pairs appended by the caller): sorts
 * and merges them and fills the ASCII bitmap. Returns its index. */
static int64_t class_finish(struct builder *b, uint32_t first, int neg)
{
	uint32_t n = b->n_ranges - first, i, m = 0, cp;
	uint32_t *r = b->ranges + 2 * first;
	struct gclass *c;

	qsort(r, n, 2 * sizeof(uint32_t), cmp_range);
	for (i = 0; i < n; i++) {
		if (m > 0 && r[2 * i] <= r[2 * (m - 1) + 1] + 1) {
			if (r[2 * i + 1] > r[2 * (m - 1) + 1])
				r[2 * (m - 1) + 1] = r[2 * i + 1];
			continue;
		}
		r[2 * m] = r[2 * i];
		r[2 * m + 1] = r[2 * i + 1];
		m++;
	}
	b->n_ranges = first + m;
	if (grow((void **)&b->cls, &b->cap_cls, b->n_cls + 1, sizeof(*b->cls)) != 0)
		return gbnf_nomem(b);
	c = &b->cls[b->n_cls];
	memset(c, 0, sizeof(*c));
	c->off = first;
	c->n = m;
	c->neg = (uint32_t)neg;
	for (cp = 0; cp < 128; cp++) {
		int in = 0;

		for (i = 0; i < m; i++)
			if (cp >= r[2 * i] && cp <= r[2 * i + 1])
				in = 1;
		if (in ^ neg)
			c->ascii[cp >> 5] |= 1u << (cp & 31);
	}
	return b->n_cls++;
}

static int range_push(struct builder *b, uint32_t lo, uint32_t hi)
{
	if (lo > hi)
		return fail(b, "a class range runs backwards");
	if (grow((void **)&b->ranges, &b->cap_ranges, 2 * (b->n_ranges + 1), sizeof(uint32_t)) != 0)
		return gbnf_nomem(b);
	b->ranges[2 * b->n_ranges] = lo;
	b->ranges[2 * b->n_ranges + 1] = hi;
	b->n_ranges++;
	return 0;
}

/* ---- lexing ------------------------------------------------------------------ */

static void skip_space(struct builder *b)
{
	while (b->p < b->end) {
		char c = *b->p;

		if (c == '#') {
			while (b->p < b->end && *b->p != '\n')
				b->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			if (c == '\n')
				b->line++;
			b->p++;
		} else {
			return;
		}
	}
}

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

static size_t name_len(const struct builder *b, const char *p)
{
	const char *q = p;

	while (q < b->end && is_name_char(*q))
		q++;
	return (size_t)(q - p);
}

/* Whether a `name ::=` starts at b->p (the next rule's head). */
static int at_rule_head(struct builder *b)
{
	size_t n = name_len(b, b->p);
	const char *q = b->p + n;

	if (n == 0)
		return 0;
	while (q < b->end && (*q == ' ' || *q == '\t'))
		q++;
	return b->end - q >= 3 && !memcmp(q, "::=", 3);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes one UTF-8 code point from the source. */
static int decode_utf8(struct builder *b, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)b->p;
	size_t left = (size_t)(b->end - b->p), n, i;
	uint32_t v;

	if (s[0] < 0x80) {
		n = 1, v = s[0];
	} else if ((s[0] & 0xe0) == 0xc0) {
		n = 2, v = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3, v = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4, v = s[0] & 0x07;
	} else {
		return fail(b, "invalid UTF-8");
	}
	if (n > left)
		return fail(b, "truncated UTF-8");
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return fail(b, "invalid UTF-8");
		v = (v << 6) | (s[i] & 0x3f);
	}
	b->p += n;
	*cp = v;
	return 0;
}

/* One character of a literal or class, escapes decoded. */
static int read_char(struct builder *b, uint32_t *cp)
{
	int digits = 0, i, h;
	uint32_t v = 0;

	if (b->p >= b->end)
		return fail(b, "unexpected end of text");
	if (*b->p != '\\')
		return decode_utf8(b, cp);
	if (b->end - b->p < 2)
		return fail(b, "unexpected end of text after a backslash");
	b->p += 2;
	switch (b->p[-1]) {
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 't': *cp = '\t'; return 0;
	case '\\': case '"': case '[': case ']': case '-': case '/': case '^': case '\'':
		*cp = (uint32_t)(unsigned char)b->p[-1];
		return 0;
	case 'x': digits = 2; break;
	case 'u': digits = 4; break;
	case 'U': digits = 8; break;
	default:
		return fail(b, "unknown escape");
	}
	for (i = 0; i < digits; i++) {
		if (b->p >= b->end || (h = hexval(*b->p)) < 0)
			return fail(b, "bad hex escape");
		v = v * 16 + (uint32_t)h;
		b->p++;
	}
	if (v > 0x10ffff)
		return fail(b, "code point beyond U+10FFFF");
	*cp = v;
	return 0;
}

/* ---- parsing ------------------------------------------------------------------ */

static int parse_alternates(struct builder *b, uint32_t ri, int nested);

/* Wraps a multi-element primary into a generated rule: prim = [REF r]. */
static int wrap(struct builder *b, struct bseq *prim)
{
	int64_t r;

	if (prim->n == 1)
		return 0;
	r = rule_add(b, NULL, 0);
	if (r < 0 || rule_add_alt(b, (uint32_t)r, prim) != 0)
		return r < 0 ? (int)r : EMBER_ENOMEM;
	prim->n = 0;
	return seq_push(b, prim, GE_REF, (uint32_t)r);
}

/* R ::= X R | X? ... : a rule repeating `x` (one element) zero or more
 * times (star) or at most once. Returns the rule. */
static int64_t make_rep(struct builder *b, const struct gelem *x, int star)
{
	struct bseq s = {0}, empty = {0};
	int64_t r = rule_add(b, NULL, 0);
	int rc;

	if (r < 0)
		return r;
	rc = seq_push(b, &s, x->type, x->val);
	if (rc == 0 && star)
		rc = seq_push(b, &s, GE_REF, (uint32_t)r);
	if (rc == 0)
		rc = rule_add_alt(b, (uint32_t)r, &s);
	if (rc == 0)
		rc = rule_add_alt(b, (uint32_t)r, &empty);
	free(s.e);
	return rc < 0 ? rc : r;
}

/* X{m,n} (n < 0: unbounded) in place of prim (one element). */
static int repeat(struct builder *b, struct bseq *prim, long m, long n)
{
	struct gelem x = prim->e[0];
	int64_t r;
	long i;

	prim->n = 0;
	for (i = 0; i < m; i++)
		if (seq_push(b, prim, x.type, x.val) != 0)
			return EMBER_ENOMEM;
	if (n < 0) {
		r = make_rep(b, &x, 1);
		return r < 0 ? (int)r : seq_push(b, prim, GE_REF, (uint32_t)r);
	}
	if (n == m)
		return 0;
	/* opt_1 ::= X | ; opt_k ::= X opt_{k-1} | */
	r = make_rep(b, &x, 0);
	for (i = 1; r >= 0 && i < n - m; i++) {
		struct bseq s = {0}, empty = {0};
		int64_t q = rule_add(b, NULL, 0);
		int rc = (int)(q < 0 ? q : 0);

		if (rc == 0)
			rc = seq_push(b, &s, x.type, x.val);
		if (rc == 0)
			rc = seq_push(b, &s, GE_REF, (uint32_t)r);
		if (rc == 0)
			rc = rule_add_alt(b, (uint32_t)q, &s);
		if (rc == 0)
			rc = rule_add_alt(b, (uint32_t)q, &empty);
		free(s.e);
		r = rc < 0 ? rc : q;
	}
	return r < 0 ? (int)r : seq_push(b, prim, GE_REF, (uint32_t)r);
}

static int parse_count(struct builder *b, long *v)
{
	*v = 0;
	if (b->p >= b->end || *b->p < '0' || *b->p > '9')
		return fail(b, "expected a number in {m,n}");
	while (b->p < b->end && *b->p >= '0' && *b->p <= '9') {
		*v = *v * 10 + (*b->p - '0');
		if (*v > MAX_REPEAT)
			return fail(b, "repetition count over 1000");
		b->p++;
	}
	return 0;
}

static int parse_postfix(struct builder *b, struct bseq *prim)
{
	long m, n;
	int rc;

	for (;;) {
		skip_space(b);
		if (b->p >= b->end || (*b->p != '*' && *b->p != '+' && *b->p != '?' && *b->p != '{'))
			return 0;
		if ((rc = wrap(b, prim)) != 0)
			return rc;
		switch (*b->p++) {
		case '*': rc = repeat(b, prim, 0, -1); break;
		case '+': rc = repeat(b, prim, 1, -1); break;
		case '?': rc = repeat(b, prim, 0, 1); break;
		default:
			skip_space(b);
			if ((rc = parse_count(b, &m)) != 0)
				return rc;
			skip_space(b);
			n = m;
			if (b->p < b->end && *b->p == ',') {
				b->p++;
				skip_space(b);
				n = -1;
				if (b->p < b->end && *b->p != '}' && (rc = parse_count(b, &n)) != 0)
					return rc;
				skip_space(b);
			}
			if (b->p >= b->end || *b->p != '}')
				return fail(b, "expected } after a repetition count");
			b->p++;
			if (n >= 0 && n < m)
				return fail(b, "repetition {m,n} with n < m");
			rc = repeat(b, prim, m, n);
		}
		if (rc != 0)
			return rc;
	}
}

static int parse_class(struct builder *b, struct bseq *prim)
{
	uint32_t first = b->n_ranges, lo, hi;
	int neg = 0, rc;
	int64_t c;

	b->p++; /* [ */
	if (b->p < b->end && *b->p == '^') {
		neg = 1;
		b->p++;
	}
	while (b->p < b->end && *b->p != ']') {
		if ((rc = read_char(b, &lo)) != 0)
			return rc;
		hi = lo;
		if (b->end - b->p >= 2 && b->p[0] == '-' && b->p[1] != ']') {
			b->p++;
			if ((rc = read_char(b, &hi)) != 0)
				return rc;
		}
		if ((rc = range_push(b, lo, hi)) != 0)
			return rc;
	}
	if (b->p >= b->end)
		return fail(b, "unterminated character class");
	b->p++;
	c = class_finish(b, first, neg);
	return c < 0 ? (int)c : seq_push(b, prim, GE_CHARS, (uint32_t)c);
}

static int push_char(struct builder *b, struct bseq *prim, uint32_t cp)
{
	uint32_t first = b->n_ranges;
	int64_t c;
	int rc = range_push(b, cp, cp);

	if (rc != 0)
		return rc;
	c = class_finish(b, first, 0);
	return c < 0 ? (int)c : seq_push(b, prim, GE_CHARS, (uint32_t)c);
}

/* One primary (literal, class, ., group or rule name) into prim. */
static int parse_primary(struct builder *b, struct bseq *prim)
{
	uint32_t cp;
	int64_t r;
	int rc;
	size_t n;

	switch (*b->p) {
	case '"':
		b->p++;
		while (b->p < b->end && *b->p != '"') {
			if ((rc = read_char(b, &cp)) != 0 || (rc = push_char(b, prim, cp)) != 0)
				return rc;
		}
		if (b->p >= b->end)
			return fail(b, "unterminated string literal");
		b->p++;
		return 0;
	case '[':
		return parse_class(b, prim);
	case '.': {
		uint32_t first = b->n_ranges;

		b->p++;
		r = class_finish(b, first, 1);
		return r < 0 ? (int)r : seq_push(b, prim, GE_CHARS, (uint32_t)r);
	}
	case '(':
		if (b->nest >= GRAMMAR_MAX_NEST)
			return fail(b, "groups nested too deeply");
		b->p++;
		r = rule_add(b, NULL, 0);
		if (r < 0)
			return (int)r;
		b->r[r].defined = 1;
		b->nest++;
		rc = parse_alternates(b, (uint32_t)r, 1);
		b->nest--;
		if (rc != 0)
			return rc;
		if (b->p >= b->end || *b->p != ')')
			return fail(b, "expected )");
		b->p++;
		return seq_push(b, prim, GE_REF, (uint32_t)r);
	default:
		n = name_len(b, b->p);
		if (n == 0)
			return fail(b, "unexpected character");
		r = rule_find(b, b->p, n);
		if (r < 0)
			return (int)r;
		b->p += n;
		return seq_push(b, prim, GE_REF, (uint32_t)r);
	}
}

static int parse_sequence(struct builder *b, struct bseq *seq, int nested)
{
	struct bseq prim = {0};
	int rc = 0;

	for (;;) {
		skip_space(b);
		if (b->p >= b->end || *b->p == '|' || *b->p == ')')
			break;
		if (at_rule_head(b)) {
			if (nested)
				rc = fail(b, "unclosed ( before the next rule");
			break;
		}
		prim.n = 0;
		if ((rc = parse_primary(b, &prim)) != 0 || (rc = parse_postfix(b, &prim)) != 0 ||
		    (rc = seq_append(b, seq, &prim)) != 0)
			break;
	}
	free(prim.e);
	return rc;
}

static int parse_alternates(struct builder *b, uint32_t ri, int nested)
{
	struct bseq seq = {0};
	int rc;

	for (;;) {
		seq.n = 0;
		if ((rc = parse_sequence(b, &seq, nested)) != 0 || (rc = rule_add_alt(b, ri, &seq)) != 0)
			break;
		skip_space(b);
		if (b->p >= b->end || *b->p != '|')
			break;
		b->p++;
	}
	free(seq.e);
	return rc;
}

static int parse_rules(struct builder *b)
{
	int64_t r;
	size_t n;
	int rc;

	for (;;) {
		skip_space(b);
		if (b->p >= b->end)
			return 0;
		n = name_len(b, b->p);
		if (n == 0 || !at_rule_head(b))
			return fail(b, "expected a rule: name ::= ...");
		r = rule_find(b, b->p, n);
		if (r < 0)
			return (int)r;
		if (b->r[r].defined)
			return fail(b, "rule defined twice");
		b->r[r].defined = 1;
		b->p += n;
		skip_space(b);
		b->p += 3; /* ::= */
		if ((rc = parse_alternates(b, (uint32_t)r, 0)) != 0)
			return rc;
		if (b->p < b->end && *b->p == ')')
			return fail(b, "unmatched )");
	}
}

int grammar_parse_gbnf(struct grammar **out, const char *text, size_t len, char *err)
{
	struct builder b = {.p = text, .end = text + len, .line = 1, .err = err};
	struct grammar *g = NULL;
	uint32_t i;
	int rc;

	*out = NULL;
	if (len > GRAMMAR_MAX_TEXT)
		return ember_seterr(err, EMBER_EINVAL, "grammar: longer than %u bytes", GRAMMAR_MAX_TEXT);
	if (memchr(text, '\0', len) != NULL)
		return ember_seterr(err, EMBER_EINVAL, "grammar: contains a NUL byte");
	rc = parse_rules(&b);
	if (rc == 0)
		rc = gbnf_check_rules(&b);
	if (rc != 0)
		goto out;
	g = calloc(1, sizeof(*g));
	if (g == NULL) {
		rc = gbnf_nomem(&b);
		goto out;
	}
	g->root = UINT32_MAX;
	for (i = 0; i < b.n_r; i++)
		if (b.r[i].name && !strcmp(b.r[i].name, "root"))
			g->root = i;
	if (g->root == UINT32_MAX) {
		rc = ember_seterr(err, EMBER_EINVAL, "grammar: no rule named root");
		goto out;
	}
	rc = gbnf_flatten(&b, g);
out:
	gbnf_builder_free(&b);
	if (rc != 0) {
		grammar_free(g);
		return rc;
	}
	*out = g;
	return 0;
}
