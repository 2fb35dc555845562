/*
 * engine_model.c - the engine's model (engine.h): the one load sequence
 * (kernels, GGUF, tokenizer, chat template), engine_open, and the text
 * helpers every front end shares (tokenize, detokenize, render).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "compute.h"
#include "engine.h"
#include "engine_impl.h"
#include "jinja.h"

struct engine_model {
	struct model model;
	struct tokenizer *tok;
};

bool engine_template_known(const char *name)
{
	return !name || !name[0] || chat_template_from_name(name) >= 0;
}

int engine_model_open(struct engine_model **out, const char *path, const char *chat_template,
		      char *err)
{
	struct engine_model *em;
	int rc;

	*out = NULL;
	if (!engine_template_known(chat_template))
		return ember_seterr(err, EMBER_EINVAL, "unknown chat template '%s'", chat_template);
	em = calloc(1, sizeof(*em));
	if (!em)
		return ember_seterr(err, EMBER_ENOMEM, "model");
	compute_init();
	/* a Vulkan device uploads the weights: no 2 MiB-page host copy */
	if ((rc = compute_device_vulkan() ? model_open_mapped(&em->model, path, err)
					  : model_open(&em->model, path, err)) < 0 ||
	    (rc = compute_prepare_model(&em->model, err)) < 0 ||
	    (rc = tokenizer_new(&em->tok, em->model.gguf, err)) < 0) {
		engine_model_free(em);
		return rc;
	}
	*out = em;
	return 0;
}

void engine_model_free(struct engine_model *em)
{
	if (!em)
		return;
	tokenizer_free(em->tok);
	model_free(&em->model);
	free(em);
}

const struct model *engine_model_weights(const struct engine_model *em)
{
	return &em->model;
}

const struct tokenizer *engine_model_tokenizer(const struct engine_model *em)
{
	return em->tok;
}

int engine_open(struct engine **out, const char *path, const struct engine_config *cfg,
		char *err)
{
	struct engine_model *em;
	int rc;

	*out = NULL;
	if ((rc = engine_model_open(&em, path, cfg ? cfg->chat_template : NULL, err)) < 0)
		return rc;
	if ((rc = engine_new(out, &em->model, em->tok, cfg, err)) < 0) {
		engine_model_free(em);
		return rc;
	}
	(*out)->owned = em;
	return 0;
}

const struct model *engine_model(const struct engine *e)
{
	return e->m;
}

const char *engine_chat_template(const struct engine *e)
{
	return e->chat.jinja ? "the model's own (Jinja)" : chat_template_name(e->chat.family);
}

/* ---- text ------------------------------------------------------------------- */

int engine_tokenize(const struct engine *e, const char *text, size_t len, bool add_special,
		    bool parse_special, int32_t **ids, size_t *n, char *err)
{
	int64_t need, got;
	int32_t *buf;

	*ids = NULL;
	*n = 0;
	/* One pass: a token covers at least one byte but for the few the
	 * tokenizer adds (BOS, EOS, a space prefix), so len + 16 ids almost
	 * always suffice; a second pass only when they do not. */
	if (len > SIZE_MAX / sizeof(*buf) - 16)
		return ember_seterr(err, EMBER_ERANGE, "tokenize: text too long");
	buf = malloc((len + 16) * sizeof(*buf));
	if (!buf)
		return ember_seterr(err, EMBER_ENOMEM, "tokens");
	need = tokenizer_encode(e->tok, text, len, add_special, parse_special, buf, len + 16);
	if (need < 0) {
		free(buf);
		return ember_seterr(err, (int)need, "tokenize: %s", ember_strerror((int)need));
	}
	if ((size_t)need > len + 16) {
		int32_t *nb = realloc(buf, (size_t)need * sizeof(*buf));

		if (!nb) {
			free(buf);
			return ember_seterr(err, EMBER_ENOMEM, "tokens");
		}
		buf = nb;
		got = tokenizer_encode(e->tok, text, len, add_special, parse_special, buf,
				       (size_t)need);
		if (got != need) {
			free(buf);
			return ember_seterr(err, EMBER_EIO, "tokenize: unstable count");
		}
	}
	*ids = buf;
	*n = (size_t)need;
	return 0;
}

/* Raw token bytes may stop inside a UTF-8 sequence; callers need valid
 * UTF-8, so they pass through detok (no stops), which replaces what cannot
 * be decoded with U+FFFD. */
static int to_utf8(const char *raw, size_t len, char **text, size_t *out_len)
{
	struct detok d;
	size_t cap = DETOK_OUT_MAX(len) + DETOK_OUT_MAX(0), n = 0, m = 0;
	char *buf = malloc(cap + 1);

	if (!buf)
		return EMBER_ENOMEM;
	detok_init(&d, NULL, 0, NULL);
	detok_push(&d, raw, len, buf, cap, &n);
	detok_flush(&d, buf + n, cap - n, &m);
	buf[n + m] = '\0';
	*text = buf;
	*out_len = n + m;
	return 0;
}

int engine_detokenize(const struct engine *e, const int32_t *ids, size_t n, char **text,
		      size_t *len, char *err)
{
	int32_t n_vocab = tokenizer_n_vocab(e->tok);
	int64_t need;
	char *raw;
	size_t i;
	int rc;

	*text = NULL;
	*len = 0;
	for (i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			return ember_seterr(err, EMBER_ERANGE, "tokens[%zu] = %d is outside the "
					    "vocabulary [0, %d)", i, ids[i], n_vocab);
	need = tokenizer_decode(e->tok, ids, n, 1, NULL, 0);
	if (need < 0)
		return ember_seterr(err, (int)need, "detokenize failed");
	raw = malloc((size_t)need + 1);
	if (!raw)
		return ember_seterr(err, EMBER_ENOMEM, "text");
	tokenizer_decode(e->tok, ids, n, 1, raw, (size_t)need);
	rc = to_utf8(raw, (size_t)need, text, len);
	free(raw);
	return rc == 0 ? 0 : ember_seterr(err, rc, "text");
}

int engine_render(const struct engine *e, const struct engine_message *msgs, size_t n,
		  const char *tools_json, char **out, size_t *len, char *err)
{
	struct chat_msg stackmsgs[8] = {{0}}, *cm = stackmsgs;
	size_t i;
	int rc;

	*out = NULL;
	*len = 0;
	if (n > 8 && !(cm = malloc(n * sizeof(*cm))))
		return ember_seterr(err, EMBER_ENOMEM, "messages");
	for (i = 0; i < n; i++)
		cm[i] = (struct chat_msg){.role = msgs[i].role, .content = msgs[i].content,
					  .content_len = msgs[i].content_len,
					  .tool_calls = msgs[i].tool_calls,
					  .tool_call_id = msgs[i].tool_call_id};
	rc = chat_render(&e->chat, cm, n, tools_json, 1, out, len, err);
	if (cm != stackmsgs)
		free(cm);
	return rc;
}

int engine_template_check(const char *src, size_t len, char *err)
{
	char why[EMBER_ERR_MAX] = "";
	struct jinja_template *t = jinja_parse(src, len, why);

	if (!t)
		return ember_seterr(err, EMBER_EINVAL, "%s", why);
	jinja_free(t);
	return 0;
}

const char *engine_template_warning(const struct engine *e)
{
	return e->chat.warning;
}

const char *engine_chat_template_source(const struct engine *e, size_t *len, const char **family)
{
	*len = e->chat.jinja ? e->chat.jinja_len : 0;
	*family = chat_template_name(e->chat.family);
	return e->chat.jinja ? e->chat.jinja_src : NULL;
}
