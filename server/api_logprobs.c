/* api_logprobs.c - logprobs in OpenAI's and llama.cpp's shapes. See
 * api_logprobs.h. */
#include "api_logprobs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

#define LOGPROB_FLOOR -9999.0 /* what OpenAI reports for an impossible token */

/* A token's bytes; long pieces are cut (no vocabulary has them). */
struct piece {
	char b[256];
	size_t n;
};

static void piece_get(struct backend *b, int32_t id, struct piece *p)
{
	int n = backend_token_piece(b, id, p->b, sizeof(p->b));

	p->n = n < 0 ? 0 : (size_t)n > sizeof(p->b) ? sizeof(p->b) : (size_t)n;
}

static void write_logprob(struct jsonw *w, float lp)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%.7g", isfinite(lp) ? (double)lp : LOGPROB_FLOOR);
	jsonw_raw(w, buf);
}

/* The token as a JSON string: its text, or "bytes:\xNN..." when it is
 * not whole UTF-8. */
static void write_token(struct jsonw *w, const struct piece *p)
{
	char buf[4 * sizeof(p->b) + 8];
	size_t i, n;

	if (utf8_valid(p->b, p->n)) {
		jsonw_strn(w, p->b, p->n);
		return;
	}
	n = (size_t)snprintf(buf, sizeof(buf), "bytes:");
	for (i = 0; i < p->n; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\x%02x",
				      (unsigned char)p->b[i]);
	jsonw_strn(w, buf, n);
}

static void write_bytes(struct jsonw *w, const struct piece *p)
{
	size_t i;

	jsonw_raw(w, "[");
	for (i = 0; i < p->n; i++) {
		if (i > 0)
			jsonw_raw(w, ",");
		jsonw_int(w, (unsigned char)p->b[i]);
	}
	jsonw_raw(w, "]");
}

/* {"id":I,"token":T,"bytes":[..],"logprob":L (chat: no id) */
static void write_entry(struct jsonw *w, enum api_format fmt, struct backend *b,
			int32_t id, float logprob)
{
	struct piece p;

	piece_get(b, id, &p);
	jsonw_raw(w, "{");
	if (fmt == API_FMT_LLAMACPP) {
		jsonw_raw(w, "\"id\":");
		jsonw_int(w, id);
		jsonw_raw(w, ",");
	}
	jsonw_raw(w, "\"token\":");
	write_token(w, &p);
	jsonw_raw(w, ",\"logprob\":");
	write_logprob(w, logprob);
	jsonw_raw(w, ",\"bytes\":");
	write_bytes(w, &p);
}

static void write_entries(struct jsonw *w, enum api_format fmt, struct backend *b,
			  const struct engine_logprobs *lp, size_t n)
{
	size_t i;
	int32_t k;

	for (i = 0; i < n; i++) {
		if (i > 0)
			jsonw_raw(w, ",");
		write_entry(w, fmt, b, lp[i].token, lp[i].logprob);
		jsonw_raw(w, ",\"top_logprobs\":[");
		for (k = 0; k < lp[i].n_top; k++) {
			if (k > 0)
				jsonw_raw(w, ",");
			write_entry(w, fmt, b, lp[i].top[k].id, lp[i].top[k].logprob);
			jsonw_raw(w, "}");
		}
		jsonw_raw(w, "]}");
	}
}

static void write_legacy(struct jsonw *w, struct backend *b,
			 const struct engine_logprobs *lp, size_t n, size_t *offset)
{
	struct piece p;
	size_t i;
	int32_t k;

	jsonw_raw(w, "{\"tokens\":[");
	for (i = 0; i < n; i++) {
		piece_get(b, lp[i].token, &p);
		jsonw_raw(w, i ? "," : "");
		write_token(w, &p);
	}
	jsonw_raw(w, "],\"token_logprobs\":[");
	for (i = 0; i < n; i++) {
		jsonw_raw(w, i ? "," : "");
		write_logprob(w, lp[i].logprob);
	}
	jsonw_raw(w, "],\"top_logprobs\":[");
	for (i = 0; i < n; i++) {
		jsonw_raw(w, i ? ",{" : "{");
		for (k = 0; k < lp[i].n_top; k++) {
			piece_get(b, lp[i].top[k].id, &p);
			jsonw_raw(w, k ? "," : "");
			write_token(w, &p);
			jsonw_raw(w, ":");
			write_logprob(w, lp[i].top[k].logprob);
		}
		jsonw_raw(w, "}");
	}
	jsonw_raw(w, "],\"text_offset\":[");
	for (i = 0; i < n; i++) {
		piece_get(b, lp[i].token, &p);
		jsonw_raw(w, i ? "," : "");
		jsonw_int(w, (int64_t)*offset);
		*offset += p.n;
	}
	jsonw_raw(w, "]}");
}

void api_logprobs_write(struct jsonw *w, enum api_format fmt, struct backend *b,
			const struct engine_logprobs *lp, size_t n,
			size_t *text_offset)
{
	jsonw_reset(w);
	switch (fmt) {
	case API_FMT_COMPLETION:
		write_legacy(w, b, lp, n, text_offset);
		break;
	case API_FMT_LLAMACPP:
		jsonw_raw(w, "[");
		write_entries(w, fmt, b, lp, n);
		jsonw_raw(w, "]");
		break;
	default:
		jsonw_raw(w, "{\"content\":[");
		write_entries(w, fmt, b, lp, n);
		jsonw_raw(w, "],\"refusal\":null}");
		break;
	}
}
