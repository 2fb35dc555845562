/* engine_fim.c - fill-in-the-middle prompts (engine.h engine_fim_prompt):
 * finding the model's FIM tokens and wrapping a prefix and a suffix in
 * them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "gguf.h"

/* Token texts of the FIM families, prefix / suffix / middle, for files
 * whose GGUF does not name the ids (older conversions). */
static const char *const fim_names[][3] = {
	{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"},      /* Qwen2.5-Coder */
	{"<fim_prefix>", "<fim_suffix>", "<fim_middle>"},            /* StarCoder */
	{"<fim-prefix>", "<fim-suffix>", "<fim-middle>"},            /* SantaCoder */
	{"<PRE>", "<SUF>", "<MID>"},                                 /* CodeLlama */
	{"<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
	 "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
	 "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"},       /* DeepSeek-Coder */
};

static const char *const fim_keys[3] = {
	"tokenizer.ggml.fim_pre_token_id",
	"tokenizer.ggml.fim_suf_token_id",
	"tokenizer.ggml.fim_mid_token_id",
};

/* The id of the token whose vocabulary text is `name`, or -1. */
static int32_t find_token(const struct tokenizer *tok, const char *name)
{
	size_t want = strlen(name), len;
	int32_t i, n = tokenizer_n_vocab(tok);

	for (i = 0; i < n; i++) {
		const char *t = tokenizer_token_text(tok, i, &len);

		if (t != NULL && len == want && memcmp(t, name, len) == 0)
			return i;
	}
	return -1;
}

/* ids[3]: prefix, suffix, middle. Returns 0 or EMBER_EUNSUPPORTED. A
 * scan of the vocabulary per family: done once, at engine start. */
static int fim_ids(const struct engine *e, int32_t ids[3])
{
	int32_t n = tokenizer_n_vocab(e->tok);
	size_t f;
	int i;

	for (i = 0; i < 3; i++) {
		uint32_t v;

		if (e->m->gguf == NULL || gguf_get_u32(e->m->gguf, fim_keys[i], &v) != 0 ||
		    v >= (uint32_t)n)
			break;
		ids[i] = (int32_t)v;
	}
	if (i == 3)
		return 0;
	for (f = 0; f < sizeof(fim_names) / sizeof(fim_names[0]); f++) {
		for (i = 0; i < 3; i++)
			if ((ids[i] = find_token(e->tok, fim_names[f][i])) < 0)
				break;
		if (i == 3)
			return 0;
	}
	return EMBER_EUNSUPPORTED;
}

void engine_fim_init(struct engine *e)
{
	if (fim_ids(e, e->fim) != 0)
		e->fim[0] = e->fim[1] = e->fim[2] = -1;
}

int engine_fim_prompt(const struct engine *e, const char *prefix, size_t prefix_len,
		      const char *suffix, size_t suffix_len, char **out, size_t *len, char *err)
{
	const char *t[3];
	size_t tl[3], n = 0;
	const int32_t *ids = e->fim;
	char *p;
	int i;

	*out = NULL;
	*len = 0;
	if (ids[0] < 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "this model has no fill-in-the-middle tokens");
	for (i = 0; i < 3; i++) {
		t[i] = tokenizer_token_text(e->tok, ids[i], &tl[i]);
		if (t[i] == NULL)
			return ember_seterr(err, EMBER_EUNSUPPORTED, "FIM token %d has no text",
					    (int)ids[i]);
	}
	p = malloc(tl[0] + prefix_len + tl[1] + suffix_len + tl[2] + 1);
	if (p == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "FIM prompt");
	memcpy(p + n, t[0], tl[0]), n += tl[0];
	memcpy(p + n, prefix, prefix_len), n += prefix_len;
	memcpy(p + n, t[1], tl[1]), n += tl[1];
	memcpy(p + n, suffix, suffix_len), n += suffix_len;
	memcpy(p + n, t[2], tl[2]), n += tl[2];
	p[n] = '\0';
	*out = p;
	*len = n;
	return 0;
}
