/* tool_call.c - model families' call syntax into OpenAI tool_calls: the
 * family table, the parsers and the streaming splitter. See tool_call.h. */
#include "tool_call_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "buf.h"
#include "ember.h"

static int parse_llama3(const char *s, size_t len, struct tool_parse *p);
static int parse_hermes(const char *s, size_t len, struct tool_parse *p);
static int parse_mistral(const char *s, size_t len, struct tool_parse *p);
static int parse_phi(const char *s, size_t len, struct tool_parse *p);
static int parse_gemma(const char *s, size_t len, struct tool_parse *p);

static const struct tool_family_row families[TOOL_FAMILY_COUNT] = {
	[TOOL_FAMILY_LLAMA3] = {"llama3", {"<|python_tag|>", "<|start_header_id|>"},
				{"<|python_tag|>"}, "{", parse_llama3,
				"parameters", "", "; ", "", "", "", "{\"name\"", true},
	[TOOL_FAMILY_HERMES] = {"hermes", {"<tool_call>"}, {"<tool_call>"}, "", parse_hermes,
				"arguments", "", "\\n", "", "<tool_call>\\n", "\\n</tool_call>", "<tool_call>", false},
	[TOOL_FAMILY_MISTRAL] = {"mistral", {"[TOOL_CALLS]"}, {"[TOOL_CALLS]"}, "[", parse_mistral,
				 "arguments", "[", ", ", "]", "", "", "[{\"name\"", true},
	[TOOL_FAMILY_PHI] = {"phi", {"<|tool_call|>", "functools"}, {"<|tool_call|>", "functools["},
			     "[", parse_phi, "arguments", "[", ", ", "]", "", "", "[{\"name\"", true},
	[TOOL_FAMILY_GEMMA] = {"gemma", {"tool_code"}, {"```tool_code"}, "{", parse_gemma,
			       "parameters", "", "\\n", "", "", "", "{\"name\"", true},
};

/* Markers are checked in this order: a template that shows several (a
 * Llama 3 header and a <tool_call> example) is the more specific one. */
static const enum tool_family detect_order[] = {
	TOOL_FAMILY_MISTRAL, TOOL_FAMILY_HERMES, TOOL_FAMILY_PHI, TOOL_FAMILY_GEMMA, TOOL_FAMILY_LLAMA3,
};

const struct tool_family_row *tool_family_row(enum tool_family f)
{
	return (unsigned)f < TOOL_FAMILY_COUNT ? &families[f] : &families[TOOL_FAMILY_LLAMA3];
}

const char *tool_call_trigger(enum tool_family f, bool *at_start)
{
	*at_start = tool_family_row(f)->lazy_at_start;
	return tool_family_row(f)->lazy_trigger;
}

const char *tool_family_name(enum tool_family f)
{
	return (unsigned)f < TOOL_FAMILY_COUNT ? families[f].name : "?";
}

enum tool_family tool_family_detect(const char *tmpl, size_t len, const char *chat_family)
{
	static const struct {
		const char *chat;
		enum tool_family f;
	} by_chat[] = {{"chatml", TOOL_FAMILY_HERMES}, {"llama3", TOOL_FAMILY_LLAMA3},
		       {"gemma", TOOL_FAMILY_GEMMA}, {"phi3", TOOL_FAMILY_PHI}};
	size_t i, m;

	for (i = 0; tmpl != NULL && i < sizeof(detect_order) / sizeof(detect_order[0]); i++) {
		const struct tool_family_row *r = &families[detect_order[i]];

		for (m = 0; m < 3 && r->markers[m] != NULL; m++)
			if (memmem(tmpl, len, r->markers[m], strlen(r->markers[m])) != NULL)
				return detect_order[i];
	}
	for (i = 0; chat_family != NULL && i < sizeof(by_chat) / sizeof(by_chat[0]); i++)
		if (strcmp(chat_family, by_chat[i].chat) == 0)
			return by_chat[i].f;
	return TOOL_FAMILY_LLAMA3;
}

/* ---- calls ------------------------------------------------------------- */

void tool_parse_free(struct tool_parse *p)
{
	for (size_t i = 0; p != NULL && i < p->n_calls; i++) {
		free(p->calls[i].name);
		free(p->calls[i].arguments);
	}
	if (p != NULL) {
		free(p->calls);
		memset(p, 0, sizeof(*p));
	}
}

static void new_call_id(char id[32])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[12];
	struct timespec ts;
	size_t i;

	/* Ids need to be unique within a conversation, not secret. */
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) ^ (unsigned char)i;
	}
	memcpy(id, "call_", 5);
	for (i = 0; i < sizeof(rnd); i++) {
		id[5 + 2 * i] = hex[rnd[i] >> 4];
		id[6 + 2 * i] = hex[rnd[i] & 15];
	}
	id[5 + 2 * sizeof(rnd)] = '\0';
}

int tool_call_add_json(struct tool_parse *p, json_t *obj)
{
	json_t *name = json_object_get(obj, "name");
	json_t *args = json_object_get(obj, "arguments");
	json_t *parsed = NULL;
	struct tool_call *c, *grown;
	int rc = 1;

	if (!json_is_object(obj) || !json_is_string(name) || json_string_length(name) == 0 ||
	    strlen(json_string_value(name)) != json_string_length(name))
		return 1;
	if (args == NULL)
		args = json_object_get(obj, "parameters");
	if (json_is_string(args)) /* some models write the arguments as a JSON string */
		args = parsed = json_loadb(json_string_value(args), json_string_length(args),
					   JSON_REJECT_DUPLICATES, NULL);
	if (args != NULL && !json_is_object(args))
		goto out;
	grown = realloc(p->calls, (p->n_calls + 1) * sizeof(*p->calls));
	if (grown == NULL) {
		rc = EMBER_ENOMEM;
		goto out;
	}
	p->calls = grown;
	c = &p->calls[p->n_calls];
	new_call_id(c->id);
	c->name = strdup(json_string_value(name));
	c->arguments = args ? json_dumps(args, JSON_COMPACT) : strdup("{}");
	if (c->name == NULL || c->arguments == NULL) {
		free(c->name);
		free(c->arguments);
		rc = EMBER_ENOMEM;
		goto out;
	}
	p->n_calls++;
	rc = 0;
out:
	json_decref(parsed);
	return rc;
}

/* ---- parsers ----------------------------------------------------------- */

static bool is_ws(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
	while (i < len && is_ws(s[i]))
		i++;
	return i;
}

static bool eat(const char *s, size_t len, size_t *i, const char *lit)
{
	size_t n = strlen(lit);

	if (len - *i < n || memcmp(s + *i, lit, n) != 0)
		return false;
	*i += n;
	return true;
}

/* A JSON object or array at s[*i]; *i moves past it. NULL if none. */
static json_t *json_at(const char *s, size_t len, size_t *i)
{
	json_error_t err;
	json_t *v;

	if (*i >= len || (s[*i] != '{' && s[*i] != '['))
		return NULL;
	v = json_loadb(s + *i, len - *i, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &err);
	if (v != NULL)
		*i += (size_t)err.position;
	return v;
}

/* A call object, or an array of them (non-empty), at s[*i]. */
static int calls_at(const char *s, size_t len, size_t *i, struct tool_parse *p)
{
	json_t *v = json_at(s, len, i);
	int rc = 1;

	if (json_is_object(v)) {
		rc = tool_call_add_json(p, v);
	} else if (json_is_array(v) && json_array_size(v) > 0) {
		for (size_t k = 0; k < json_array_size(v); k++)
			if ((rc = tool_call_add_json(p, json_array_get(v, k))) != 0)
				break;
	}
	json_decref(v);
	return rc;
}

/* {"name": ..., "parameters": ...} objects separated by ';' or whitespace,
 * after an optional <|python_tag|>. */
static int parse_llama3(const char *s, size_t len, struct tool_parse *p)
{
	size_t i = 0;
	int rc;

	eat(s, len, &i, "<|python_tag|>");
	for (;;) {
		i = skip_ws(s, len, i);
		if (i >= len || s[i] != '{')
			return 1;
		if ((rc = calls_at(s, len, &i, p)) != 0)
			return rc;
		i = skip_ws(s, len, i);
		if (i == len)
			return 0;
		if (s[i] == ';')
			i++;
	}
}

/* <tool_call>{...}</tool_call>, repeated; the last may lack its closing
 * tag (the model ended the turn there). */
static int parse_hermes(const char *s, size_t len, struct tool_parse *p)
{
	size_t i = 0;
	int rc;

	for (;;) {
		i = skip_ws(s, len, i);
		if (i == len && p->n_calls > 0)
			return 0;
		if (!eat(s, len, &i, "<tool_call>"))
			return 1;
		i = skip_ws(s, len, i);
		if (i >= len || s[i] != '{')
			return 1;
		if ((rc = calls_at(s, len, &i, p)) != 0)
			return rc;
		i = skip_ws(s, len, i);
		if (!eat(s, len, &i, "</tool_call>") && i != len)
			return 1;
	}
}

/* [TOOL_CALLS][{...}, ...], possibly repeated; the marker is a control
 * token, so it may be missing from the text. */
static int parse_mistral(const char *s, size_t len, struct tool_parse *p)
{
	size_t i = 0;
	int rc;

	for (;;) {
		i = skip_ws(s, len, i);
		if (i == len && p->n_calls > 0)
			return 0;
		if (!eat(s, len, &i, "[TOOL_CALLS]") && p->n_calls > 0)
			return 1;
		i = skip_ws(s, len, i);
		if (i >= len || s[i] != '[')
			return 1;
		if ((rc = calls_at(s, len, &i, p)) != 0)
			return rc;
	}
}

/* <|tool_call|>[{...}]<|/tool_call|> (Phi-4), functools[{...}] (Phi-3
 * fine-tunes), or the bare array at the start. */
static int parse_phi(const char *s, size_t len, struct tool_parse *p)
{
	size_t i = 0;
	int rc;

	for (;;) {
		bool tagged;

		i = skip_ws(s, len, i);
		if (i == len && p->n_calls > 0)
			return 0;
		tagged = eat(s, len, &i, "<|tool_call|>");
		if (!tagged && !eat(s, len, &i, "functools") && p->n_calls > 0)
			return 1;
		i = skip_ws(s, len, i);
		if (i >= len || (s[i] != '[' && s[i] != '{'))
			return 1;
		if ((rc = calls_at(s, len, &i, p)) != 0)
			return rc;
		i = skip_ws(s, len, i);
		if (tagged && !eat(s, len, &i, "<|/tool_call|>") && i != len)
			return 1;
	}
}

/* ```tool_code\n name(k=v) ... \n``` blocks, or JSON calls as llama3. */
static int parse_gemma(const char *s, size_t len, struct tool_parse *p)
{
	size_t i = skip_ws(s, len, 0);
	int rc;

	if (i < len && s[i] == '{')
		return parse_llama3(s + i, len - i, p);
	for (;;) {
		const char *end;

		i = skip_ws(s, len, i);
		if (i == len && p->n_calls > 0)
			return 0;
		if (!eat(s, len, &i, "```tool_code"))
			return 1;
		end = memmem(s + i, len - i, "```", 3);
		if (end == NULL)
			return 1;
		if ((rc = tool_call_parse_python(s + i, (size_t)(end - (s + i)), p)) != 0)
			return rc;
		i = (size_t)(end - s) + 3;
	}
}

/* ---- triggers ------------------------------------------------------------ */

static bool all_ws(const char *s, size_t n)
{
	return skip_ws(s, n, 0) == n;
}

/*
 * Where a call starts in s[0..len) (searching for anywhere-triggers from
 * `from`), or len when nothing does yet. *hold: how much of the text is
 * surely content (a tail that may grow into a trigger is not).
 */
static size_t find_trigger(const struct tool_family_row *f, const char *s, size_t len, size_t from,
			   size_t *hold)
{
	size_t k = skip_ws(s, len, 0), best = len, t;

	*hold = len;
	if (k < len && f->start[0] != '\0' && strchr(f->start, s[k]) != NULL)
		return *hold = k;
	for (t = 0; t < 3 && f->triggers[t] != NULL; t++) {
		size_t n = strlen(f->triggers[t]);
		const char *at = memmem(s + from, len - from, f->triggers[t], n);

		if (at != NULL && (size_t)(at - s) < best)
			best = (size_t)(at - s);
		/* the longest tail that is a proper prefix of this trigger */
		for (size_t m = n - 1; m > 0 && at == NULL; m--)
			if (m <= len && memcmp(s + len - m, f->triggers[t], m) == 0) {
				if (len - m < *hold)
					*hold = len - m;
				break;
			}
	}
	if (best < len)
		*hold = best;
	return best;
}

int tool_call_parse(enum tool_family fam, const char *text, size_t len, struct tool_parse *p)
{
	const struct tool_family_row *f = tool_family_row(fam);
	size_t hold, pos = find_trigger(f, text, len, 0, &hold);
	int rc;

	memset(p, 0, sizeof(*p));
	p->content_len = len;
	p->has_content = true;
	if (pos == len)
		return 0;
	rc = f->parse(text + pos, len - pos, p);
	if (rc == 0 && p->n_calls > 0) {
		p->content_len = pos;
		p->has_content = !all_ws(text, pos);
		return 0;
	}
	tool_parse_free(p); /* malformed: all of it is content */
	p->content_len = len;
	p->has_content = true;
	return rc == EMBER_ENOMEM ? rc : 0;
}

/* ---- streaming ----------------------------------------------------------- */

void tool_stream_init(struct tool_stream *s, enum tool_family f)
{
	memset(s, 0, sizeof(*s));
	s->family = f;
}

void tool_stream_free(struct tool_stream *s)
{
	if (s == NULL)
		return;
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

int tool_stream_feed(struct tool_stream *s, const char *text, size_t len, const char **out,
		     size_t *out_len)
{
	size_t hold, pos, limit;

	*out = "";
	*out_len = 0;
	if (s->oom)
		return EMBER_ENOMEM;
	if (len > 0) {
		if (buf_grow(&s->buf, &s->cap, s->len + len + 1, 256, 0) != 0) {
			s->oom = true;
			return EMBER_ENOMEM;
		}
		memcpy(s->buf + s->len, text, len);
		s->len += len;
		s->buf[s->len] = '\0';
	}
	if (s->triggered || s->len == 0)
		return 0;
	pos = find_trigger(tool_family_row(s->family), s->buf, s->len, s->sent, &hold);
	if (pos < s->len)
		s->triggered = true;
	limit = hold;
	/* whitespace before anything else waits: before a call it is not content */
	if (all_ws(s->buf, limit) || limit < s->sent)
		limit = s->sent;
	*out = s->buf + s->sent;
	*out_len = limit - s->sent;
	s->sent = limit;
	return 0;
}

int tool_stream_finish(struct tool_stream *s, const char **out, size_t *out_len, struct tool_parse *p)
{
	size_t end;
	int rc;

	*out = "";
	*out_len = 0;
	memset(p, 0, sizeof(*p));
	if (s->oom)
		return EMBER_ENOMEM;
	if ((rc = tool_call_parse(s->family, s->buf ? s->buf : "", s->len, p)) != 0)
		return rc;
	end = p->n_calls > 0 && !p->has_content ? 0 : p->content_len;
	if (end > s->sent) {
		*out = s->buf + s->sent;
		*out_len = end - s->sent;
		s->sent = end;
	}
	return 0;
}
