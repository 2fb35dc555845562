/*
 * jinja_lex.c - Jinja template text to tokens (jinja_impl.h).
 *
 * First the whitespace rules Hugging Face applies (one trailing newline
 * dropped, lstrip_blocks, trim_blocks), then tokens: text, comments, tag
 * openers and closers (with "-" trimming the text beside them), and inside
 * tags names, string and number literals and operators.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "jinja_impl.h"

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int jparse_fail(struct parser *p, int line, const char *fmt, const char *arg, size_t n)
{
	if (!p->failed && p->err) {
		char what[96];
		snprintf(what, sizeof(what), fmt, (int)(n > 40 ? 40 : n), arg ? arg : "");
		snprintf(p->err, EMBER_ERR_MAX, "line %d: %s", line, what);
	}
	p->failed = 1;
	return EMBER_EFORMAT;
}

/* ---- preprocessing: the reference's lstrip_blocks and trim_blocks ---- */

char *jlex_preprocess(struct jarena *ar, const char *src, size_t len, size_t *out_len)
{
	char *a = jarena_alloc(ar, len + 1), *b = jarena_alloc(ar, len + 1);
	size_t n = 0, m = 0;

	if (!a || !b)
		return NULL;
	if (len && src[len - 1] == '\n')
		len--;
	/* lstrip_blocks: spaces and tabs from a line's start to "{%" or "{#". */
	for (size_t i = 0; i < len;) {
		if (i == 0 || src[i - 1] == '\n') {
			size_t j = i;
			while (j < len && (src[j] == ' ' || src[j] == '\t'))
				j++;
			if (j + 1 < len && src[j] == '{' && (src[j + 1] == '%' || src[j + 1] == '#' || src[j + 1] == '-'))
				i = j;
		}
		a[n++] = src[i++];
	}
	/* trim_blocks: the newline right after "%}", "#}" (and "-}"). */
	for (size_t i = 0; i < n; i++) {
		b[m++] = a[i];
		if (a[i] == '}' && i > 0 && (a[i - 1] == '%' || a[i - 1] == '#' || a[i - 1] == '-') && i + 1 < n &&
		    a[i + 1] == '\n')
			i++;
	}
	b[m] = '\0';
	*out_len = m;
	return b;
}

/* ---- lexer ---- */

static int lx_push(struct parser *p, struct tok t)
{
	if (p->nt == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct tok *nt = jarena_alloc(p->ar, cap * sizeof(*nt));
		if (!nt)
			return EMBER_ENOMEM;
		if (p->nt)
			memcpy(nt, p->t, p->nt * sizeof(*nt));
		p->t = nt;
		p->cap = cap;
	}
	p->t[p->nt++] = t;
	return 0;
}

/* "{%-" / "{{-" / "{#-": the text before loses its trailing whitespace. */
static void lx_strip_prev(struct parser *p)
{
	if (p->nt && p->t[p->nt - 1].type == TK_TEXT) {
		struct tok *t = &p->t[p->nt - 1];
		while (t->n && is_space(t->s[t->n - 1]))
			t->n--;
		if (t->n == 0)
			p->nt--;
	}
}

static int lx_string(struct parser *p, const char *s, size_t len, size_t *i, int line)
{
	char q = s[(*i)++];
	char *out = jarena_alloc(p->ar, len - *i + 1);
	size_t n = 0;

	if (!out)
		return EMBER_ENOMEM;
	while (*i < len && s[*i] != q) {
		char c = s[(*i)++];
		if (c == '\\') {
			if (*i >= len)
				break;
			char e = s[(*i)++];
			const char *from = "ntrbf\\'\"", *to = "\n\t\r\b\f\\'\"";
			const char *hit = strchr(from, e);
			if (!e || !hit)
				return jparse_fail(p, line, "unknown escape \\%.*s in a string", &s[*i - 1], 1);
			c = to[hit - from];
		}
		out[n++] = c;
	}
	if (*i >= len)
		return jparse_fail(p, line, "unterminated string%.*s", "", 0);
	(*i)++;
	return lx_push(p, (struct tok){.type = TK_STR, .s = out, .n = n, .line = line});
}

static const char *const lx_ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ",",
				     ".", ":", "|", "~", "+", "-", "*", "/", "%", "<", ">", "=", NULL};

/* One tag's inside, from after its opener to its closer. */
static int lx_tag(struct parser *p, const char *s, size_t len, size_t *ip, int *line, int is_expr)
{
	size_t i = *ip;
	int braces = 0, rc;

	for (;;) {
		while (i < len && is_space(s[i]))
			*line += s[i++] == '\n';
		if (i >= len)
			return jparse_fail(p, *line, "unclosed tag%.*s", "", 0);
		char c = s[i];
		int strip = c == '-' && i + 2 < len && s[i + 2] == '}' && (s[i + 1] == '%' || s[i + 1] == '}');
		if (strip || ((c == '%' || (c == '}' && braces == 0 && is_expr)) && i + 1 < len && s[i + 1] == '}')) {
			if (strip)
				i++;
			if ((s[i] == '%') != !is_expr)
				return jparse_fail(p, *line, "mismatched tag closer%.*s", "", 0);
			i += 2;
			if (strip)
				while (i < len && is_space(s[i]))
					*line += s[i++] == '\n';
			*ip = i;
			return lx_push(p, (struct tok){.type = is_expr ? TK_CEXPR : TK_CSTMT, .line = *line});
		}
		if (c == '\'' || c == '"') {
			if ((rc = lx_string(p, s, len, &i, *line)) < 0)
				return rc;
			continue;
		}
		if (c >= '0' && c <= '9') {
			struct tok t = {.type = TK_INT, .line = *line};
			size_t j = i;
			while (j < len && s[j] >= '0' && s[j] <= '9')
				j++;
			int after_dot = p->nt && p->t[p->nt - 1].type == TK_OP && p->t[p->nt - 1].s[0] == '.';
			if (!after_dot && j + 1 < len && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
				j++;
				while (j < len && s[j] >= '0' && s[j] <= '9')
					j++;
				t.type = TK_FLOAT;
			}
			char num[64];
			if (j - i >= sizeof(num))
				return jparse_fail(p, *line, "number too long%.*s", "", 0);
			memcpy(num, s + i, j - i);
			num[j - i] = '\0';
			if (t.type == TK_FLOAT)
				t.f = strtod(num, NULL);
			else
				t.i = strtoll(num, NULL, 10);
			i = j;
			if ((rc = lx_push(p, t)) < 0)
				return rc;
			continue;
		}
		if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			size_t j = i;
			while (j < len && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
					   (s[j] >= '0' && s[j] <= '9')))
				j++;
			if ((rc = lx_push(p, (struct tok){.type = TK_NAME, .s = s + i, .n = j - i, .line = *line})) < 0)
				return rc;
			i = j;
			continue;
		}
		size_t k;
		for (k = 0; lx_ops[k]; k++) {
			size_t on = strlen(lx_ops[k]);
			if (i + on <= len && memcmp(s + i, lx_ops[k], on) == 0)
				break;
		}
		if (!lx_ops[k])
			return jparse_fail(p, *line, "unexpected character '%.*s'", s + i, 1);
		braces += lx_ops[k][0] == '{';
		braces -= lx_ops[k][0] == '}';
		if ((rc = lx_push(p, (struct tok){.type = TK_OP, .s = lx_ops[k], .n = strlen(lx_ops[k]),
						  .line = *line})) < 0)
			return rc;
		i += strlen(lx_ops[k]);
	}
}

int jlex_run(struct parser *p, const char *s, size_t len)
{
	size_t i = 0;
	int line = 1, rc;

	while (i < len) {
		size_t j = i;
		while (j < len && !(s[j] == '{' && j + 1 < len && (s[j + 1] == '%' || s[j + 1] == '{' || s[j + 1] == '#')))
			j++;
		if (j > i) {
			if ((rc = lx_push(p, (struct tok){.type = TK_TEXT, .s = s + i, .n = j - i, .line = line})) < 0)
				return rc;
			for (; i < j; i++)
				line += s[i] == '\n';
			continue;
		}
		char kind = s[i + 1];
		int strip = i + 2 < len && s[i + 2] == '-';
		i += 2 + (size_t)strip;
		if (strip)
			lx_strip_prev(p);
		if (kind == '#') {
			size_t k = i;
			while (k + 1 < len && !(s[k] == '#' && s[k + 1] == '}'))
				line += s[k++] == '\n';
			if (k + 1 >= len)
				return jparse_fail(p, line, "unclosed comment%.*s", "", 0);
			i = k + 2;
			if (k > 0 && s[k - 1] == '-')
				while (i < len && is_space(s[i]))
					line += s[i++] == '\n';
			if ((rc = lx_push(p, (struct tok){.type = TK_COMMENT, .line = line})) < 0)
				return rc;
			continue;
		}
		if ((rc = lx_push(p, (struct tok){.type = kind == '%' ? TK_OSTMT : TK_OEXPR, .line = line})) < 0)
			return rc;
		if ((rc = lx_tag(p, s, len, &i, &line, kind == '{')) < 0)
			return rc;
	}
	return lx_push(p, (struct tok){.type = TK_END, .line = line});
}

