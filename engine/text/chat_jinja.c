/*
 * chat_jinja.c - a model's own chat template (Jinja) as the renderer
 * (chat.h): loading it, building the template's context from the messages,
 * and chat_render(), the one entry point every caller renders through.
 *
 * The context is written as JSON text for jinja_render(): the interpreter
 * reads its own JSON, so the engine needs no JSON library and a message
 * travels from the API layer as plain C strings (tool calls and tools stay
 * the JSON text the client sent, re-serialized by the API layer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"
#include "ember.h"
#include "jinja.h"

/* The template's text, for what it renders (tools) and callers that read
 * its markers (engine_chat_template_source). */
static int keep_source(struct chat_style *s, const char *src, size_t len)
{
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return EMBER_ENOMEM;
	memcpy(copy, src, len);
	copy[len] = '\0';
	free(s->jinja_src);
	s->jinja_src = copy;
	s->jinja_len = len;
	return 0;
}

void chat_style_load_jinja(struct chat_style *s, const char *src, size_t len)
{
	char err[EMBER_ERR_MAX] = "";

	s->jinja = jinja_parse(src, len, err);
	if (s->jinja != NULL && keep_source(s, src, len) != 0) {
		jinja_free(s->jinja);
		s->jinja = NULL;
		snprintf(err, sizeof(err), "out of memory");
	}
	if (s->jinja == NULL)
		snprintf(s->warning, sizeof(s->warning),
			 "the model's chat template does not parse (%.150s); rendering with the '%s' family "
			 "instead", err, chat_template_name(s->family));
}

int chat_style_set_template(struct chat_style *s, const char *src, size_t len, char *err)
{
	char why[EMBER_ERR_MAX] = "";
	struct jinja_template *t = jinja_parse(src, len, why);

	if (t == NULL)
		return ember_seterr(err, EMBER_EFORMAT, "chat template: %s", why);
	if (keep_source(s, src, len) != 0) {
		jinja_free(t);
		return ember_seterr(err, EMBER_ENOMEM, "chat template: out of memory");
	}
	jinja_free(s->jinja);
	s->jinja = t;
	s->warning[0] = '\0';
	return 0;
}

void chat_style_free(struct chat_style *s)
{
	if (s == NULL)
		return;
	jinja_free(s->jinja);
	s->jinja = NULL;
	free(s->jinja_src);
	s->jinja_src = NULL;
	s->jinja_len = 0;
}

/* A growing string for the context JSON. */
struct ctxbuf {
	char *p;
	size_t n, cap;
	int oom;
};

static void cb_put(struct ctxbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->cap - b->n < n + 1) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap - b->n < n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (p == NULL) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/* The n bytes at s as a JSON string (NUL as \u0000: an ordinary
 * character, which the interpreter's strings carry by length); NULL: null. */
static void cb_strn(struct ctxbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0, i;

	if (s == NULL) {
		cb_put(b, "null", 4);
		return;
	}
	cb_put(b, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		cb_put(b, s + start, i - start);
		if (c == '"' || c == '\\') {
			esc[1] = (char)c;
			cb_put(b, esc, 2);
		} else {
			cb_put(b, esc, 6);
		}
		start = i + 1;
	}
	cb_put(b, s + start, i - start);
	cb_put(b, "\"", 1);
}

static void cb_str(struct ctxbuf *b, const char *s)
{
	cb_strn(b, s, s ? strlen(s) : 0);
}

static void cb_field(struct ctxbuf *b, const char *name, const char *text, int is_json)
{
	cb_put(b, ",", 1);
	cb_str(b, name);
	cb_put(b, ":", 1);
	if (is_json)
		cb_put(b, text, strlen(text));
	else
		cb_str(b, text);
}

static int build_context(const struct chat_style *s, const struct chat_msg *msgs, size_t n,
			 const char *tools_json, int add_generation_prompt, struct ctxbuf *b)
{
	cb_put(b, "{\"messages\":[", 13);
	for (size_t i = 0; i < n; i++) {
		const char *c = msgs[i].content;

		cb_put(b, i ? ",{\"role\":" : "{\"role\":", i ? 9 : 8);
		cb_str(b, msgs[i].role);
		cb_put(b, ",\"content\":", 11);
		/* content_len 0: a C string (chat.h) */
		cb_strn(b, c, c && !msgs[i].content_len ? strlen(c) : msgs[i].content_len);
		if (msgs[i].tool_calls)
			cb_field(b, "tool_calls", msgs[i].tool_calls, 1);
		if (msgs[i].tool_call_id)
			cb_field(b, "tool_call_id", msgs[i].tool_call_id, 0);
		cb_put(b, "}", 1);
	}
	cb_put(b, "]", 1);
	if (tools_json)
		cb_field(b, "tools", tools_json, 1);
	cb_field(b, "add_generation_prompt", add_generation_prompt ? "true" : "false", 1);
	cb_field(b, "bos_token", s->bos_text, 0);
	cb_field(b, "eos_token", s->eos_text, 0);
	cb_put(b, "}", 1);
	return b->oom ? EMBER_ENOMEM : 0;
}

/* The family table knows system, user and assistant turns with text only. */
static int table_can_render(const struct chat_msg *msgs, size_t n, const char *tools_json, char *err)
{
	if (tools_json != NULL)
		return ember_seterr(err, EMBER_EINVAL,
				    "tools need the model's own chat template, and this model has none "
				    "(or one that does not parse)");
	for (size_t i = 0; i < n; i++) {
		if (msgs[i].tool_calls != NULL || (msgs[i].role && strcmp(msgs[i].role, "tool") == 0))
			return ember_seterr(err, EMBER_EINVAL,
					    "messages[%zu]: tool calls and tool results need the model's own "
					    "chat template, and this model has none (or one that does not parse)",
					    i);
	}
	return 0;
}

int chat_render(const struct chat_style *s, const struct chat_msg *msgs, size_t n, const char *tools_json,
		int add_generation_prompt, char **out, size_t *len, char *err)
{
	struct ctxbuf ctx = {0};
	char why[EMBER_ERR_MAX] = "";
	size_t bos_len = strlen(s->bos_text);
	int rc;

	*out = NULL;
	*len = 0;
	if (n == 0)
		return ember_seterr(err, EMBER_EINVAL, "chat: no messages");
	if (s->jinja == NULL) {
		struct chat_msg *copy;
		if ((rc = table_can_render(msgs, n, tools_json, err)) != 0)
			return rc;
		/* null content (an assistant turn of tool calls) is "" here */
		if ((copy = malloc(n * sizeof(*copy))) == NULL)
			return ember_seterr(err, EMBER_ENOMEM, "chat: out of memory");
		for (size_t i = 0; i < n; i++) {
			copy[i] = msgs[i];
			if (copy[i].content == NULL)
				copy[i].content = "";
		}
		rc = chat_style_render_table(s, copy, n, add_generation_prompt, out, len, err);
		free(copy);
		return rc;
	}
	if (tools_json != NULL && s->jinja_src != NULL && memmem(s->jinja_src, s->jinja_len, "tools", 5) == NULL)
		return ember_seterr(err, EMBER_EINVAL,
				    "tools: this model's chat template does not show tool definitions to the "
				    "model, so it cannot call them");
	if ((rc = build_context(s, msgs, n, tools_json, add_generation_prompt, &ctx)) != 0) {
		free(ctx.p);
		return ember_seterr(err, rc, "chat: out of memory");
	}
	rc = jinja_render(s->jinja, ctx.p, ctx.n, out, len, why);
	free(ctx.p);
	if (rc == EMBER_ENOMEM)
		return ember_seterr(err, rc, "chat template: %s", why);
	if (rc == EMBER_EINVAL) /* raise_exception(): the template's words, as they are */
		return ember_seterr(err, rc, "%s", why);
	if (rc != 0)
		return ember_seterr(err, EMBER_EINVAL, "chat template: %s", why);
	if (s->strip_bos && bos_len > 0 && *len >= bos_len && memcmp(*out, s->bos_text, bos_len) == 0) {
		memmove(*out, *out + bos_len, *len - bos_len + 1);
		*len -= bos_len;
	}
	return 0;
}
