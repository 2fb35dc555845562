/* api_embed.c - the embedding endpoints. See api_embed.h. */
#include "api_embed.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_ollama.h"
#include "api_openai.h"
#include "clock.h"
#include "jsonw.h"

/* ---- parsing ------------------------------------------------------------ */

static int fail(struct api_error *e, const char *param, const char *fmt, const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value", fmt, what);
	return EMBER_EINVAL;
}

static int read_text(json_t *v, const char *param, struct api_embed_input *in,
		     struct api_error *e)
{
	in->len = json_string_length(v);
	if (in->len == 0)
		return fail(e, param, "'%s' must not be empty.", param);
	in->text = malloc(in->len + 1);
	if (!in->text)
		return api_error_oom(e);
	memcpy(in->text, json_string_value(v), in->len + 1);
	return 0;
}

static int read_ids(json_t *v, const char *param, struct api_embed_input *in,
		    struct api_error *e)
{
	size_t i, n = json_array_size(v);

	if (n == 0)
		return fail(e, param, "'%s' must not be empty.", param);
	in->ids = malloc(n * sizeof(int32_t));
	if (!in->ids)
		return api_error_oom(e);
	in->n_ids = n;
	for (i = 0; i < n; i++) {
		json_t *t = json_array_get(v, i);

		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > INT32_MAX)
			return fail(e, param, "'%s' must hold token ids (integers >= 0).", param);
		in->ids[i] = (int32_t)json_integer_value(t);
	}
	return 0;
}

/* `input`: a string, an array of strings, an array of token ids or an
 * array of arrays of ids (those two only where `ids_ok`). */
static int read_inputs(json_t *v, const char *param, bool ids_ok, struct api_embed_request *r,
		       struct api_error *e)
{
	char sub[64];
	size_t i, n;
	int rc;

	if (json_is_string(v)) {
		if (!(r->in = calloc(1, sizeof(*r->in))))
			return api_error_oom(e);
		r->n = 1;
		return read_text(v, param, &r->in[0], e);
	}
	if (!json_is_array(v))
		return fail(e, param, "'%s' must be a string or an array.", param);
	n = json_array_size(v);
	if (n == 0)
		return fail(e, param, "'%s' must not be empty.", param);
	if (ids_ok && json_is_integer(json_array_get(v, 0))) {
		if (!(r->in = calloc(1, sizeof(*r->in))))
			return api_error_oom(e);
		r->n = 1;
		return read_ids(v, param, &r->in[0], e);
	}
	if (n > API_EMBED_MAX_INPUTS) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
			      "'%s' holds %zu inputs; at most %d are accepted.", param, n,
			      API_EMBED_MAX_INPUTS);
		return EMBER_EINVAL;
	}
	if (!(r->in = calloc(n, sizeof(*r->in))))
		return api_error_oom(e);
	r->n = n;
	for (i = 0; i < n; i++) {
		json_t *x = json_array_get(v, i);

		snprintf(sub, sizeof(sub), "%s[%zu]", param, i);
		if (json_is_string(x))
			rc = read_text(x, sub, &r->in[i], e);
		else if (ids_ok && json_is_array(x))
			rc = read_ids(x, sub, &r->in[i], e);
		else
			rc = fail(e, sub, "'%s' must be a string%s.",
				  ids_ok ? " or an array of token ids" : "");
		if (rc)
			return rc;
	}
	return 0;
}

static int read_openai(json_t *root, struct api_embed_request *r, struct api_error *e)
{
	json_t *v = api_openai_field(root, "encoding_format"), *d;

	if (v && (!json_is_string(v) || (strcmp(json_string_value(v), "float") &&
					  strcmp(json_string_value(v), "base64"))))
		return fail(e, "encoding_format", "'%s' must be \"float\" or \"base64\".",
			    "encoding_format");
	r->base64 = v && !strcmp(json_string_value(v), "base64");
	d = api_openai_field(root, "dimensions");
	if (d && (!json_is_integer(d) || json_integer_value(d) < 1))
		return fail(e, "dimensions", "'%s' must be a positive integer.", "dimensions");
	r->dimensions = d ? json_integer_value(d) : 0;
	return 0;
}

/* Ollama's options on an embedding: only hints that change nothing of the
 * vector pass (api_ollama.c's list); anything else is refused by name. */
static int read_ollama(json_t *root, struct api_embed_request *r, struct api_error *e)
{
	json_t *v = api_openai_field(root, "truncate"), *d = api_openai_field(root, "dimensions");
	const char *bad;

	if (v && !json_is_boolean(v))
		return fail(e, "truncate", "'%s' must be a boolean.", "truncate");
	r->truncate = !v || json_is_true(v);
	if (d && (!json_is_integer(d) || json_integer_value(d) < 1))
		return fail(e, "dimensions", "'%s' must be a positive integer.", "dimensions");
	r->dimensions = d ? json_integer_value(d) : 0;
	v = api_openai_field(root, "options");
	if (v && !json_is_object(v))
		return fail(e, "options", "'%s' must be an object.", "options");
	if (v && (bad = api_ollama_embed_option_refused(v)) != NULL) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "options", "invalid_value",
			      "option '%.64s' is not supported on embeddings", bad);
		return EMBER_EINVAL;
	}
	return 0;
}

int api_embed_parse(const char *body, size_t len, enum api_embed_kind kind,
		    struct api_embed_request *r, struct api_error *e)
{
	const char *key;
	json_t *root, *v;
	int rc = EMBER_EINVAL;

	memset(r, 0, sizeof(*r));
	memset(e, 0, sizeof(*e));
	r->kind = kind;
	root = api_openai_decode_object(body, len, e);
	if (!root)
		return EMBER_EINVAL;
	v = api_openai_field(root, "model");
	if (v && !json_is_string(v)) {
		rc = fail(e, "model", "'%s' must be a string.", "model");
		goto out;
	}
	if (v && !(r->model = strdup(json_string_value(v)))) {
		rc = api_error_oom(e);
		goto out;
	}
	key = kind == API_EMBED_OLLAMA_LEGACY ? "prompt"
	      : kind == API_EMBED_LLAMA && api_openai_field(root, "content") ? "content" : "input";
	v = api_openai_field(root, key);
	if (!v) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, key, "missing_required_parameter",
			      "Missing required parameter: '%s'.", key);
		goto out;
	}
	if (kind == API_EMBED_OLLAMA_LEGACY && !json_is_string(v))
		rc = fail(e, key, "'%s' must be a string.", key);
	else
		rc = read_inputs(v, key, kind == API_EMBED_OPENAI || kind == API_EMBED_LLAMA, r, e);
	if (rc == 0 && kind == API_EMBED_OPENAI)
		rc = read_openai(root, r, e);
	if (rc == 0 && (kind == API_EMBED_OLLAMA || kind == API_EMBED_OLLAMA_LEGACY))
		rc = read_ollama(root, r, e);
out:
	json_decref(root);
	if (rc)
		api_embed_request_free(r);
	return rc;
}

void api_embed_request_free(struct api_embed_request *r)
{
	size_t i;

	for (i = 0; r->in && i < r->n; i++) {
		free(r->in[i].text);
		free(r->in[i].ids);
	}
	free(r->in);
	free(r->model);
	memset(r, 0, sizeof(*r));
}

void api_embed_base64(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = tab[(v >> 6) & 63];
		out[o++] = tab[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
}

/* ---- one request in flight ------------------------------------------------ */

struct embed_call;

struct embed_item {
	struct embed_call *c;
	size_t i;
};

struct embed_call {
	struct http_req *req;       /* NULL once the exchange ended */
	struct backend *b;
	const char *model;
	struct api_embed_request r;
	struct embed_item *items;   /* [r.n] callback data */
	uint64_t *ids;              /* [r.n] engine ids, 0 = not submitted */
	float *vec;                 /* [r.n][d] */
	size_t d;
	char pooling[16];
	uv_async_t async;
	pthread_mutex_t lock;       /* guards the fields below */
	size_t n_submitted, n_done;
	int64_t prompt_tokens;
	bool failed;
	struct engine_result err;   /* the first failure */
	size_t err_input;
	/* loop only */
	struct api_error submit_err; /* status != 0: a submit failed */
	bool answered, closing;
};

static void call_closed(uv_handle_t *h)
{
	struct embed_call *c = h->data;

	pthread_mutex_destroy(&c->lock);
	api_embed_request_free(&c->r);
	free(c->items);
	free(c->ids);
	free(c->vec);
	free(c);
}

static void call_close(struct embed_call *c)
{
	if (!c->closing) {
		c->closing = true;
		uv_close((uv_handle_t *)&c->async, call_closed);
	}
}

/* Worker thread. */
static void on_embed(void *data, const float *vec, size_t n)
{
	struct embed_item *it = data;
	struct embed_call *c = it->c;

	if (n == c->d)
		memcpy(c->vec + it->i * c->d, vec, n * sizeof(float));
}

/* Worker thread: the wake-up is sent under the lock, so the loop cannot
 * free the call between the count and the send. */
static void on_done(void *data, const struct engine_result *res)
{
	struct embed_item *it = data;
	struct embed_call *c = it->c;

	pthread_mutex_lock(&c->lock);
	if (res->finish != ENGINE_FINISH_STOP && !c->failed) {
		c->failed = true;
		c->err = *res;
		c->err_input = it->i;
	}
	c->prompt_tokens += res->prompt_tokens;
	c->n_done++;
	uv_async_send(&c->async);
	pthread_mutex_unlock(&c->lock);
}

static bool is_ollama(const struct embed_call *c)
{
	return c->r.kind == API_EMBED_OLLAMA || c->r.kind == API_EMBED_OLLAMA_LEGACY;
}

static void respond_error(struct embed_call *c, const struct api_error *e)
{
	if (is_ollama(c))
		api_ollama_respond_error(c->req, e);
	else
		http_respond_error(c->req, e);
}

static void result_error(struct embed_call *c, struct api_error *e)
{
	const struct engine_result *r = &c->err;

	if (r->finish == ENGINE_FINISH_CANCELLED)
		api_error_from_code(e, EMBER_ECANCELED, NULL, "The request was cancelled "
				    "(server shutting down).");
	else if (r->code == EMBER_ECONTEXT)
		api_error_from_code(e, EMBER_ECONTEXT, "input", "input %zu has %lld tokens, more "
				    "than the context of %u", c->err_input,
				    (long long)r->prompt_tokens, (unsigned)r->n_ctx);
	else
		api_error_from_code(e, r->code ? r->code : EMBER_EIO, "input", "input %zu: %s",
				    c->err_input, r->message);
}

static void write_vec(struct jsonw *w, const float *v, size_t d)
{
	char num[32];
	size_t k;

	jsonw_raw(w, "[");
	for (k = 0; k < d; k++) {
		/* %.9g round-trips a float exactly. */
		snprintf(num, sizeof(num), "%s%.9g", k ? "," : "", (double)v[k]);
		jsonw_raw(w, num);
	}
	jsonw_raw(w, "]");
}

static void respond_ok(struct embed_call *c)
{
	struct jsonw w;
	size_t i;
	char *b64 = NULL;

	jsonw_init(&w);
	switch (c->r.kind) {
	case API_EMBED_OPENAI:
		if (c->r.base64 && !(b64 = malloc(4 * ((c->d * 4 + 2) / 3) + 1)))
			break;
		jsonw_raw(&w, "{\"object\":\"list\",\"data\":[");
		for (i = 0; i < c->r.n; i++) {
			jsonw_raw(&w, i ? ",{" : "{");
			jsonw_raw(&w, "\"object\":\"embedding\",\"index\":");
			jsonw_int(&w, (int64_t)i);
			jsonw_raw(&w, ",\"embedding\":");
			if (b64) {
				/* little-endian float32, as OpenAI's */
				api_embed_base64((const unsigned char *)(c->vec + i * c->d),
						 c->d * sizeof(float), b64);
				jsonw_str(&w, b64);
			} else {
				write_vec(&w, c->vec + i * c->d, c->d);
			}
			jsonw_raw(&w, "}");
		}
		jsonw_raw(&w, "],\"model\":");
		jsonw_str(&w, c->model);
		jsonw_raw(&w, ",\"pooling\":");
		jsonw_str(&w, c->pooling);
		jsonw_raw(&w, ",\"usage\":{\"prompt_tokens\":");
		jsonw_int(&w, c->prompt_tokens);
		jsonw_raw(&w, ",\"total_tokens\":");
		jsonw_int(&w, c->prompt_tokens);
		jsonw_raw(&w, "}}");
		break;
	case API_EMBED_LLAMA:
		jsonw_raw(&w, "[");
		for (i = 0; i < c->r.n; i++) {
			jsonw_raw(&w, i ? ",{\"index\":" : "{\"index\":");
			jsonw_int(&w, (int64_t)i);
			jsonw_raw(&w, ",\"embedding\":[");
			write_vec(&w, c->vec + i * c->d, c->d);
			jsonw_raw(&w, "]}");
		}
		jsonw_raw(&w, "]");
		break;
	case API_EMBED_OLLAMA:
		jsonw_raw(&w, "{\"model\":");
		jsonw_str(&w, c->r.model ? c->r.model : c->model);
		jsonw_raw(&w, ",\"embeddings\":[");
		for (i = 0; i < c->r.n; i++) {
			if (i)
				jsonw_raw(&w, ",");
			write_vec(&w, c->vec + i * c->d, c->d);
		}
		jsonw_raw(&w, "],\"pooling\":");
		jsonw_str(&w, c->pooling);
		jsonw_raw(&w, ",\"total_duration\":");
		jsonw_int(&w, (int64_t)(clock_now_ns() - c->req->start_ns));
		jsonw_raw(&w, ",\"load_duration\":0,\"prompt_eval_count\":");
		jsonw_int(&w, c->prompt_tokens);
		jsonw_raw(&w, "}");
		break;
	case API_EMBED_OLLAMA_LEGACY:
		jsonw_raw(&w, "{\"embedding\":");
		write_vec(&w, c->vec, c->d);
		jsonw_raw(&w, "}");
		break;
	}
	free(b64);
	c->req->prompt_tokens = (long)c->prompt_tokens;
	http_respond_json(c->req, 200, jsonw_ok(&w) ? jsonw_take(&w) : NULL);
	jsonw_free(&w);
}

/* Loop: answers once every submitted job is done. */
static void on_async(uv_async_t *a)
{
	struct embed_call *c = a->data;
	struct api_error e;
	bool all;

	pthread_mutex_lock(&c->lock);
	all = c->n_done == c->n_submitted;
	pthread_mutex_unlock(&c->lock);
	if (!all || c->closing)
		return;
	if (c->req && !c->answered) {
		c->answered = true;
		if (c->submit_err.status) {
			respond_error(c, &c->submit_err);
		} else if (c->failed) {
			result_error(c, &e);
			respond_error(c, &e);
		} else {
			respond_ok(c);
		}
	}
	if (!c->req)
		call_close(c);
}

/* http.c's user_free: the exchange ended (answered, or the client left). */
static void on_exchange_end(void *user)
{
	struct embed_call *c = user;
	size_t i;
	bool all;

	c->req = NULL;
	pthread_mutex_lock(&c->lock);
	all = c->n_done == c->n_submitted;
	pthread_mutex_unlock(&c->lock);
	if (all) {
		call_close(c);
		return;
	}
	for (i = 0; i < c->r.n; i++)
		if (c->ids[i])
			backend_cancel(c->b, c->ids[i]);
}

static void submit_error(struct embed_call *c, int rc, const char *detail)
{
	if (rc == EMBER_EBUSY)
		api_error_not_loaded(&c->submit_err, backend_status(c->b, NULL) == BACKEND_LOADING);
	else if (rc == EMBER_EFULL) {
		api_error_from_code(&c->submit_err, rc, NULL, "The server is busy: %s. Retry later.",
				    detail);
		c->submit_err.status = backend_full_status(c->b);
	} else {
		api_error_from_code(&c->submit_err, rc, "input", "%s", detail);
	}
}

/* Checks the model name and dimensions against the served model. */
static int check_model(struct embed_call *c, const struct backend_model_info *mi,
		       struct api_error *e)
{
	const char *id = c->model;

	if (is_ollama(c)) {
		if (!c->r.model || !c->r.model[0]) {
			api_error_set(e, 400, API_ERR_INVALID_REQUEST, "model", NULL,
				      "model is required");
			return EMBER_EINVAL;
		}
		if (!api_ollama_model_ok(c->r.model, id)) {
			api_error_set(e, 404, API_ERR_NOT_FOUND, "model", NULL,
				      "model '%.100s' not found", c->r.model);
			return EMBER_ENOTFOUND;
		}
	} else if (c->r.model && c->r.model[0] && id && strcmp(c->r.model, id) != 0) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "model", "model_not_found",
			      "The model '%.64s' is not served here; this server serves '%s' "
			      "(GET /v1/models).", c->r.model, id);
		return EMBER_EINVAL;
	}
	if (c->r.dimensions && c->r.dimensions != (int64_t)mi->n_embd) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "dimensions", "invalid_value",
			      "'dimensions' %lld is not supported: this model's embeddings have "
			      "%u dimensions (shortening them is not implemented).",
			      (long long)c->r.dimensions, mi->n_embd);
		return EMBER_EINVAL;
	}
	return 0;
}

void api_embed_handle(uv_loop_t *loop, struct backend *b, struct http_req *req,
		      enum api_embed_kind kind, const char *model)
{
	struct backend_model_info mi;
	struct embed_call *c = calloc(1, sizeof(*c));
	char detail[EMBER_ERR_MAX] = "";
	struct api_error e;
	size_t i;
	int rc;

	if (!c) {
		http_respond_json(req, 500, NULL);
		return;
	}
	c->req = req;
	c->b = b;
	c->model = model ? model : "";
	c->r.kind = kind;
	/* Ollama's routes read any body as JSON, as Ollama does. */
	if ((!is_ollama(c) &&
	     api_openai_check_content_type(http_req_header(req, "Content-Type"), &e) != 0) ||
	    api_embed_parse(req->body, req->body_len, kind, &c->r, &e) != 0) {
		c->r.kind = kind;
		respond_error(c, &e);
		free(c);
		return;
	}
	if ((rc = backend_model_info(b, &mi)) != 0) {
		api_error_not_loaded(&e, backend_status(b, NULL) == BACKEND_LOADING);
		respond_error(c, &e);
		api_embed_request_free(&c->r);
		free(c);
		return;
	}
	if (check_model(c, &mi, &e) != 0) {
		respond_error(c, &e);
		api_embed_request_free(&c->r);
		free(c);
		return;
	}
	c->d = mi.n_embd;
	snprintf(c->pooling, sizeof(c->pooling), "%s", mi.pooling);
	c->items = calloc(c->r.n, sizeof(*c->items));
	c->ids = calloc(c->r.n, sizeof(*c->ids));
	c->vec = calloc(c->r.n * c->d, sizeof(float));
	if (!c->items || !c->ids || !c->vec || uv_async_init(loop, &c->async, on_async) != 0) {
		free(c->items);
		free(c->ids);
		free(c->vec);
		api_embed_request_free(&c->r);
		free(c);
		http_respond_json(req, 500, NULL);
		return;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->async.data = c;
	req->user = c;
	req->user_free = on_exchange_end;
	for (i = 0; i < c->r.n; i++) {
		const struct api_embed_input *in = &c->r.in[i];

		c->items[i] = (struct embed_item){c, i};
		pthread_mutex_lock(&c->lock);
		rc = backend_embed(b, in->text, in->len, in->ids, in->n_ids, c->r.truncate, on_embed,
				   on_done, &c->items[i], &c->ids[i], detail);
		if (rc == 0)
			c->n_submitted++;
		pthread_mutex_unlock(&c->lock);
		if (rc != 0) {
			size_t k;

			submit_error(c, rc, detail);
			for (k = 0; k < i; k++)
				backend_cancel(b, c->ids[k]);
			break;
		}
	}
	/* Answers now when nothing is running (every submit failed). */
	uv_async_send(&c->async);
}
