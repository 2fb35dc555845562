/*
 * fuzz_jinja.c - a chat template from untrusted bytes (a model file's
 * tokenizer.chat_template, --chat-template-file): the Jinja interpreter must
 * parse or refuse it, and render it or fail with an error, within its
 * limits, never crash. Input: template bytes, then optionally a NUL byte and
 * the context JSON (default: a short conversation).
 * libFuzzer target (make fuzz); replay.c runs the kept corpus in make test.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char default_ctx[] =
	"{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"},"
	"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"f\","
	"\"arguments\":{\"a\":1}}}]},{\"role\":\"tool\",\"content\":\"r\"}],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
	"\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[EMBER_ERR_MAX], *out = NULL;
	const uint8_t *nul = memchr(data, 0, size);
	size_t tlen = nul ? (size_t)(nul - data) : size, olen;
	/* Exact-size heap copies, so ASan sees any read past the end. */
	char *tmpl = malloc(tlen ? tlen : 1);
	const char *ctx = default_ctx;
	size_t clen = sizeof(default_ctx) - 1;
	char *cbuf = NULL;
	struct jinja_template *t;

	if (tmpl == NULL)
		return 0;
	memcpy(tmpl, data, tlen);
	if (nul) {
		clen = size - tlen - 1;
		cbuf = malloc(clen ? clen : 1);
		if (cbuf == NULL) {
			free(tmpl);
			return 0;
		}
		memcpy(cbuf, nul + 1, clen);
		ctx = cbuf;
	}
	t = jinja_parse(tmpl, tlen, err);
	if (t != NULL && jinja_render(t, ctx, clen, &out, &olen, err) == 0)
		free(out);
	jinja_free(t);
	free(cbuf);
	free(tmpl);
	return 0;
}
