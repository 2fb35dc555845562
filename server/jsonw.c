/* jsonw.c - JSON text writer. See jsonw.h. */
#include "jsonw.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void jsonw_init(struct jsonw *w)
{
	memset(w, 0, sizeof(*w));
}

void jsonw_free(struct jsonw *w)
{
	if (w == NULL)
		return;
	free(w->data);
	memset(w, 0, sizeof(*w));
}

void jsonw_reset(struct jsonw *w)
{
	w->len = 0;
	w->oom = false;
	if (w->cap > 0)
		w->data[0] = '\0';
}

bool jsonw_ok(const struct jsonw *w)
{
	return !w->oom;
}

/* Makes room for `n` more bytes plus the NUL. */
static bool reserve(struct jsonw *w, size_t n)
{
	if (w->oom)
		return false;
	if (n > SIZE_MAX / 2 ||
	    buf_grow(&w->data, &w->cap, w->len + n + 1, 256, 0) != 0) {
		w->oom = true;
		return false;
	}
	w->data[w->len] = '\0';
	return true;
}

static void append(struct jsonw *w, const char *s, size_t n)
{
	if (!reserve(w, n))
		return;
	memcpy(w->data + w->len, s, n);
	w->len += n;
	w->data[w->len] = '\0';
}

void jsonw_raw(struct jsonw *w, const char *s)
{
	append(w, s, strlen(s));
}

void jsonw_strn(struct jsonw *w, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, run = 0;

	append(w, "\"", 1);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[7] = "\\u00";
		size_t n = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		/* Copy the plain run before this byte in one piece. */
		append(w, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			n = 6;
			break;
		}
		append(w, esc, n);
	}
	append(w, s + run, len - run);
	append(w, "\"", 1);
}

void jsonw_str(struct jsonw *w, const char *s)
{
	if (s == NULL)
		jsonw_raw(w, "null");
	else
		jsonw_strn(w, s, strlen(s));
}

void jsonw_int(struct jsonw *w, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", (long long)v);
	jsonw_raw(w, num);
}

void jsonw_num(struct jsonw *w, double v)
{
	char num[48];

	if (!isfinite(v))
		v = 0;
	snprintf(num, sizeof(num), "%.3f", v);
	jsonw_raw(w, num);
}

char *jsonw_take(struct jsonw *w)
{
	char *s;

	if (w->oom || !reserve(w, 0)) {
		jsonw_free(w);
		return NULL;
	}
	s = w->data;
	memset(w, 0, sizeof(*w));
	return s;
}
