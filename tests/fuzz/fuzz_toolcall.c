/*
 * fuzz_toolcall.c - model output into tool calls: for every byte string
 * (the first byte picks the family and the streaming piece size), the
 * parser gives calls with object arguments or all of the text as content,
 * and the streaming splitter, fed in pieces, reassembles to exactly the
 * same answer; never a crash or a leak. libFuzzer target (make fuzz);
 * replay.c runs the kept corpus in make test.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tool_call.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_or_abort(bool cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum tool_family f;
	const char *text = (const char *)data + 1, *out;
	size_t len, step, n = 0, out_len;
	struct tool_parse p, q;
	struct tool_stream s;
	char *got;

	if (size < 1)
		return 0;
	f = (enum tool_family)(data[0] % TOOL_FAMILY_COUNT);
	step = (size_t)(data[0] / TOOL_FAMILY_COUNT) % 7 + 1;
	len = size - 1;
	if (tool_call_parse(f, text, len, &p) != 0)
		return 0;
	for (size_t i = 0; i < p.n_calls; i++) {
		json_t *a = json_loads(p.calls[i].arguments, JSON_ALLOW_NUL, NULL);

		same_or_abort(json_is_object(a) && p.calls[i].name[0] != '\0');
		json_decref(a);
	}
	same_or_abort(p.n_calls > 0 || (p.has_content && p.content_len == len));
	got = malloc(len + 1);
	tool_stream_init(&s, f);
	for (size_t i = 0; got != NULL && i < len; i += step) {
		size_t m = len - i < step ? len - i : step;

		if (tool_stream_feed(&s, text + i, m, &out, &out_len) != 0)
			break;
		memcpy(got + n, out, out_len);
		n += out_len;
	}
	if (got != NULL && tool_stream_finish(&s, &out, &out_len, &q) == 0) {
		memcpy(got + n, out, out_len);
		n += out_len;
		same_or_abort(q.n_calls == p.n_calls);
		for (size_t i = 0; i < p.n_calls; i++)
			same_or_abort(!strcmp(q.calls[i].name, p.calls[i].name) &&
				      !strcmp(q.calls[i].arguments, p.calls[i].arguments));
		same_or_abort(p.has_content ? n == p.content_len && !memcmp(got, text, n) : n == 0);
		tool_parse_free(&q);
	}
	free(got);
	tool_stream_free(&s);
	tool_parse_free(&p);
	return 0;
}
