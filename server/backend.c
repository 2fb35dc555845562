/*
 * backend.c - adapter from backend.h to the engine.
 *
 * The engine (model, forward, tokenizer, sampler, scheduler) is not linked
 * yet, so this is the stub every caller already codes against: with
 * --no-model it reports NO_MODEL; with a model configured it checks the
 * file can be opened and reports FAILED ("engine not available"), so
 * /health tells the truth and generation answers 503.
 */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct backend {
	const struct config *cfg;
	struct metrics *metrics;
	enum backend_status status;
	char message[EMBER_ERR_MAX];
	char model_id[128];
};

/* "/models/TinyLlama-Q8_0.gguf" -> "TinyLlama-Q8_0" */
static void model_id_from_path(const char *path, char *out, size_t size)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".gguf") == 0)
		n -= 5;
	if (n >= size)
		n = size - 1;
	memcpy(out, base, n);
	out[n] = '\0';
}

int backend_new(const struct config *cfg, struct metrics *metrics,
		struct backend **out, char *err)
{
	struct backend *b = calloc(1, sizeof(*b));
	FILE *f;

	*out = NULL;
	if (b == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "backend");
	b->cfg = cfg;
	b->metrics = metrics;
	if (cfg->model == NULL) {
		b->status = BACKEND_NO_MODEL;
		*out = b;
		return 0;
	}
	f = fopen(cfg->model, "rb");
	if (f == NULL) {
		int e = errno;

		free(b);
		return ember_seterr(err, EMBER_EIO, "model %s: %s", cfg->model,
				    strerror(e));
	}
	fclose(f);
	model_id_from_path(cfg->model, b->model_id, sizeof(b->model_id));
	b->status = BACKEND_FAILED;
	snprintf(b->message, sizeof(b->message),
		 "engine not available in this build");
	*out = b;
	return 0;
}

void backend_free(struct backend *b)
{
	free(b);
}

enum backend_status backend_status(const struct backend *b, const char **msg)
{
	if (msg != NULL)
		*msg = b->message;
	return b->status;
}

const char *backend_model_id(const struct backend *b)
{
	return b->model_id[0] ? b->model_id : NULL;
}

int backend_submit(struct backend *b, const struct gen_request *req,
		   const struct gen_sink *sink, uint64_t *id, char *err)
{
	(void)req;
	(void)sink;
	*id = 0;
	if (b->status != BACKEND_READY)
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return ember_seterr(err, EMBER_EUNSUPPORTED, "no engine");
}

void backend_cancel(struct backend *b, uint64_t id)
{
	(void)b;
	(void)id;
}

int64_t backend_context(const struct backend *b)
{
	(void)b;
	return 0;
}

void backend_refresh_metrics(struct backend *b)
{
	(void)b;
}

int backend_tokenize(struct backend *b, const char *text, size_t len,
		     bool add_special, bool parse_special, int32_t **ids,
		     size_t *n, char *err)
{
	(void)b; (void)text; (void)len; (void)add_special; (void)parse_special;
	*ids = NULL;
	*n = 0;
	return ember_seterr(err, EMBER_EBUSY, "model not loaded");
}

int backend_detokenize(struct backend *b, const int32_t *ids, size_t n,
		       char **text, size_t *len, char *err)
{
	(void)b; (void)ids; (void)n;
	*text = NULL;
	*len = 0;
	return ember_seterr(err, EMBER_EBUSY, "model not loaded");
}

int backend_session_new(struct backend *b, const char *system, uint64_t *id,
			char *err)
{
	(void)b; (void)system;
	*id = 0;
	return ember_seterr(err, EMBER_EBUSY, "model not loaded");
}

int backend_session_clone(struct backend *b, uint64_t id, uint64_t *clone_id,
			  char *err)
{
	(void)b; (void)id;
	*clone_id = 0;
	return ember_seterr(err, EMBER_EBUSY, "model not loaded");
}

int backend_session_info(struct backend *b, uint64_t id,
			 struct backend_session_info *info)
{
	(void)b; (void)id; (void)info;
	return EMBER_EBUSY;
}

int backend_session_delete(struct backend *b, uint64_t id)
{
	(void)b; (void)id;
	return EMBER_EBUSY;
}
