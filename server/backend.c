/*
 * backend.c - adapter from backend.h to the engine (engine.h).
 *
 * Loading runs on a thread of its own (model_open + tokenizer_new +
 * engine_new can take seconds for a large file): the loop answers /health
 * with 503 "loading" meanwhile and 200 once `status` turns READY. Until
 * then every other field but the configuration belongs to the loader; the
 * atomic store of `status` publishes them to the loop.
 *
 * A request: chat messages are rendered here with the chat template (a
 * string concatenation bounded by max_body, cheap enough for the loop),
 * the stop texts of the template family are added to the client's, a seed
 * is drawn when the client gave none, and engine_submit copies it all.
 * The engine tokenizes on its worker; its callbacks are forwarded to the
 * request's gen_sink.
 */
#include "backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "detok.h"
#include "engine.h"
#include "jinja.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"

struct backend {
	const struct config *cfg;
	struct metrics *metrics;
	_Atomic int status;          /* enum backend_status */
	char message[EMBER_ERR_MAX]; /* FAILED: why (written before status) */
	char model_id[128];
	enum chat_template template_choice; /* from the config */
	pthread_t loader;
	bool loader_started;
	/* the loader's until READY, then read-only */
	struct model model;
	struct tokenizer *tok;
	struct engine *engine;
	struct chat_style chat;      /* what chat requests render with */
	char *template_src;          /* --chat-template-file's text, or NULL */
	size_t template_len;
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

static void *loader_main(void *arg)
{
	struct backend *b = arg;
	const struct config *c = b->cfg;
	struct engine_config ec = {
		.workers = (uint32_t)c->workers,
		.threads = (uint32_t)c->threads,
		.slots = (uint32_t)c->slots,
		.n_ctx = (uint32_t)c->context,
		.prefill_chunk = (uint32_t)c->prefill_chunk,
		.kv_cache_mb = (uint32_t)c->kv_cache_mb,
		.max_sessions = (uint32_t)c->max_sessions,
		.session_idle_s = (uint32_t)c->session_idle,
		/* The config's queue counts waiting requests; 0 means none may
		 * wait, which the engine spells as 0 = default, so keep 1. */
		.queue_max = c->queue > 0 ? (uint32_t)c->queue : 1,
	};
	char err[EMBER_ERR_MAX] = "";

	kern_init();
	if (ec.threads == 0)
		ec.threads = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	if (model_open(&b->model, c->model, err) != 0 ||
	    tokenizer_new(&b->tok, b->model.gguf, err) != 0)
		goto fail;
	chat_style_init(&b->chat, b->template_choice, b->model.gguf, b->tok);
	if (b->chat.warning[0])
		fprintf(stderr, "emberd: warning: %s\n", b->chat.warning);
	if (b->template_src != NULL &&
	    chat_style_set_template(&b->chat, b->template_src, b->template_len, err) != 0)
		goto fail;
	if (engine_new(&b->engine, &b->model, b->tok, &ec, err) != 0)
		goto fail;
	atomic_store(&b->status, BACKEND_READY);
	return NULL;
fail:
	snprintf(b->message, sizeof(b->message), "%s", err);
	atomic_store(&b->status, BACKEND_FAILED);
	return NULL;
}

/* Reads and test-parses --chat-template-file at start-up, so a bad file is
 * an error now rather than a surprise at the first request. */
static int backend_read_template(struct backend *b, const char *path, char *err)
{
	FILE *f = fopen(path, "rb");
	struct jinja_template *t;
	char why[EMBER_ERR_MAX] = "";
	long size;

	if (f == NULL)
		return ember_seterr(err, EMBER_EIO, "chat_template_file %s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || size > (16L << 20) ||
	    fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return ember_seterr(err, EMBER_EIO, "chat_template_file %s: unreadable or over 16 MiB", path);
	}
	b->template_src = malloc((size_t)size + 1);
	if (b->template_src == NULL || fread(b->template_src, 1, (size_t)size, f) != (size_t)size) {
		fclose(f);
		free(b->template_src);
		b->template_src = NULL;
		return ember_seterr(err, EMBER_EIO, "chat_template_file %s: read failed", path);
	}
	fclose(f);
	b->template_src[size] = '\0';
	b->template_len = (size_t)size;
	t = jinja_parse(b->template_src, b->template_len, why);
	if (t == NULL) {
		free(b->template_src);
		b->template_src = NULL;
		return ember_seterr(err, EMBER_EINVAL, "chat_template_file %s: %s", path, why);
	}
	jinja_free(t);
	return 0;
}

int backend_new(const struct config *cfg, struct metrics *metrics,
		struct backend **out, char *err)
{
	struct backend *b = calloc(1, sizeof(*b));
	const char *tname = cfg->chat_template;
	FILE *f;
	int t;

	*out = NULL;
	if (b == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "backend");
	b->cfg = cfg;
	b->metrics = metrics;
	if (cfg->model == NULL) {
		atomic_store(&b->status, BACKEND_NO_MODEL);
		*out = b;
		return 0;
	}
	t = tname == NULL || tname[0] == '\0' ? CHAT_TEMPLATE_AUTO
					      : chat_template_from_name(tname);
	if (t < 0) {
		free(b->template_src);
		free(b);
		return ember_seterr(err, EMBER_EINVAL,
				    "chat_template '%s': not auto, chatml, "
				    "llama3, gemma, phi3, zephyr, llama2, phi2 "
				    "or falcon", tname);
	}
	b->template_choice = (enum chat_template)t;
	if (cfg->chat_template_file != NULL && cfg->chat_template_file[0] != '\0' &&
	    backend_read_template(b, cfg->chat_template_file, err) != 0) {
		free(b->template_src);
		free(b);
		return EMBER_EINVAL;
	}
	/* A missing file is worth failing at start-up for, not a 503 later. */
	f = fopen(cfg->model, "rb");
	if (f == NULL) {
		int e = errno;

		free(b->template_src);
		free(b);
		return ember_seterr(err, EMBER_EIO, "model %s: %s", cfg->model,
				    strerror(e));
	}
	fclose(f);
	model_id_from_path(cfg->model, b->model_id, sizeof(b->model_id));
	atomic_store(&b->status, BACKEND_LOADING);
	if (pthread_create(&b->loader, NULL, loader_main, b) != 0) {
		free(b->template_src);
		free(b);
		return ember_seterr(err, EMBER_ENOMEM, "cannot start the loader");
	}
	b->loader_started = true;
	*out = b;
	return 0;
}

void backend_free(struct backend *b)
{
	if (b == NULL)
		return;
	if (b->loader_started)
		pthread_join(b->loader, NULL);
	engine_free(b->engine);
	chat_style_free(&b->chat);
	free(b->template_src);
	tokenizer_free(b->tok);
	model_free(&b->model);
	free(b);
}

enum backend_status backend_status(const struct backend *b, const char **msg)
{
	if (msg != NULL)
		*msg = b->message;
	return (enum backend_status)atomic_load(&b->status);
}

static bool ready(const struct backend *b)
{
	return atomic_load(&b->status) == BACKEND_READY;
}

const char *backend_model_id(const struct backend *b)
{
	return b->model_id[0] ? b->model_id : NULL;
}

int64_t backend_context(const struct backend *b)
{
	return ready(b) ? (int64_t)engine_n_ctx(b->engine) : 0;
}

void backend_refresh_metrics(struct backend *b)
{
	struct engine_stats st;

	if (!ready(b))
		return;
	engine_stats(b->engine, &st);
	metrics_set_queue_depth(b->metrics, st.queue_depth);
	metrics_set_slots_busy(b->metrics, st.slots_busy);
	metrics_set_kv_cache_bytes(b->metrics, (int64_t)st.kv_bytes);
}

/* ---- requests ------------------------------------------------------------ */

static void on_text(void *data, const char *text, size_t len, int n_tokens)
{
	const struct gen_sink *sink = data;

	sink->text_cb(sink->data, text, len, n_tokens);
}

static void on_done(void *data, const struct engine_result *er)
{
	const struct gen_sink *sink = data;
	struct gen_result r = {
		.prompt_tokens = er->prompt_tokens,
		.completion_tokens = er->completion_tokens,
		.cached_tokens = er->cached_tokens,
		.ttft_ms = er->ttft_ms,
		.prefill_tps = er->prefill_tps,
		.decode_tps = er->decode_tps,
		.error = er->code,
	};

	switch (er->finish) {
	case ENGINE_FINISH_STOP: r.finish = GEN_FINISH_STOP; break;
	case ENGINE_FINISH_LENGTH: r.finish = GEN_FINISH_LENGTH; break;
	case ENGINE_FINISH_CANCELLED: r.finish = GEN_FINISH_CANCELLED; break;
	default: r.finish = GEN_FINISH_ERROR; break;
	}
	if (r.finish == GEN_FINISH_ERROR && er->code == EMBER_ECONTEXT)
		snprintf(r.message, sizeof(r.message),
			 "This model's maximum context length is %u tokens. "
			 "However, your prompt is %lld tokens long. Please "
			 "reduce the length of the prompt.",
			 (unsigned)er->n_ctx, (long long)er->prompt_tokens);
	else
		snprintf(r.message, sizeof(r.message), "%s", er->message);
	if (r.finish == GEN_FINISH_ERROR && r.error == 0)
		r.error = EMBER_EIO;
	sink->done_cb(sink->data, &r);
}

/* Renders the chat messages into a malloc'd prompt. */
static int render_chat(const struct backend *b, const struct gen_request *req,
		       char **out, size_t *len, char *err)
{
	return backend_apply_template(b, req, out, len, err);
}

int backend_apply_template(const struct backend *b, const struct gen_request *req,
			   char **out, size_t *len, char *err)
{
	struct chat_msg stackmsgs[8] = {{0}}, *msgs = stackmsgs;
	size_t i;
	int rc;

	if (req->n_messages > 8) {
		msgs = malloc(req->n_messages * sizeof(*msgs));
		if (msgs == NULL)
			return ember_seterr(err, EMBER_ENOMEM, "messages");
	}
	for (i = 0; i < req->n_messages; i++) {
		msgs[i].role = gen_role_name(req->messages[i].role);
		msgs[i].content = req->messages[i].content;
		msgs[i].tool_calls = req->messages[i].tool_calls;
		msgs[i].tool_call_id = req->messages[i].tool_call_id;
	}
	if (!ready(b)) {
		rc = ember_seterr(err, EMBER_EBUSY, "model not loaded");
		goto done;
	}
	rc = chat_render(&b->chat, msgs, req->n_messages, req->tools, 1, out, len, err);
done:
	if (msgs != stackmsgs)
		free(msgs);
	return rc;
}

static uint64_t random_seed(void)
{
	struct timespec ts;
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
}

/* Client stops first; the family's end-of-turn texts fill what is left of
 * the engine's four (its end-of-generation tokens stop it regardless). */
static size_t collect_stops(const struct backend *b,
			    const struct gen_request *req, const char **stops)
{
	size_t n = 0, i, j;

	for (i = 0; i < req->n_stop && n < ENGINE_MAX_STOP; i++)
		stops[n++] = req->stop[i];
	if (req->kind != GEN_CHAT)
		return n;
	for (i = 0; i < b->chat.n_stops && n < ENGINE_MAX_STOP; i++) {
		for (j = 0; j < n && strcmp(stops[j], b->chat.stops[i]); j++)
			;
		if (j == n)
			stops[n++] = b->chat.stops[i];
	}
	return n;
}

int backend_submit(struct backend *b, const struct gen_request *req,
		   const struct gen_sink *sink, uint64_t *id, char *err)
{
	const char *stops[ENGINE_MAX_STOP];
	struct sampler_config sc;
	struct engine_request er = {0};
	char *prompt = NULL;
	size_t len = 0;
	int rc;

	*id = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	if (req->kind == GEN_CHAT) {
		rc = render_chat(b, req, &prompt, &len, err);
		if (rc != 0)
			return rc;
		er.prompt = prompt;
	} else {
		er.prompt = req->prompt;
		len = req->prompt_len;
	}
	sampler_config_default(&sc);
	sc.temperature = req->temperature;
	sc.top_p = req->top_p;
	sc.top_k = req->top_k;
	sc.min_p = req->min_p;
	sc.presence_penalty = req->presence_penalty;
	sc.frequency_penalty = req->frequency_penalty;
	sc.seed = req->has_seed ? req->seed : random_seed();
	er.prompt_len = len;
	er.add_special = true;
	/* Templated text needs its markers as control tokens; raw completion
	 * prompts get the same, as llama.cpp's server does, so clients that
	 * template themselves work. */
	er.parse_special = true;
	er.sampling = &sc;
	er.max_tokens = req->max_tokens;
	er.n_stop = collect_stops(b, req, stops);
	er.stop = stops;
	er.session = req->session;
	er.on_text = on_text;
	er.on_done = on_done;
	er.data = (void *)sink;
	rc = engine_submit(b->engine, &er, id, err);
	free(prompt);
	backend_refresh_metrics(b);
	return rc;
}

void backend_cancel(struct backend *b, uint64_t id)
{
	if (ready(b))
		engine_cancel(b->engine, id);
}

/* ---- tokenizer ---------------------------------------------------------- */

int backend_tokenize(struct backend *b, const char *text, size_t len,
		     bool add_special, bool parse_special, int32_t **ids,
		     size_t *n, char *err)
{
	int64_t need, got;
	int32_t *buf;

	*ids = NULL;
	*n = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	/* One pass: a token covers at least one byte but for the few the
	 * tokenizer adds (BOS, EOS, a space prefix), so len + 16 ids almost
	 * always suffice; a second pass only when they do not. */
	if (len > SIZE_MAX / sizeof(*buf) - 16)
		return ember_seterr(err, EMBER_ERANGE, "tokenize: text too long");
	buf = malloc((len + 16) * sizeof(*buf));
	if (buf == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokens");
	need = tokenizer_encode(b->tok, text, len, add_special, parse_special,
				buf, len + 16);
	if (need < 0) {
		free(buf);
		return ember_seterr(err, (int)need, "tokenize: %s",
				    ember_strerror((int)need));
	}
	if ((size_t)need > len + 16) {
		int32_t *nb = realloc(buf, (size_t)need * sizeof(*buf));
		if (nb == NULL) {
			free(buf);
			return ember_seterr(err, EMBER_ENOMEM, "tokens");
		}
		buf = nb;
		got = tokenizer_encode(b->tok, text, len, add_special, parse_special,
				       buf, (size_t)need);
		if (got != need) {
			free(buf);
			return ember_seterr(err, EMBER_EIO, "tokenize: unstable count");
		}
	}
	*ids = buf;
	*n = (size_t)need;
	return 0;
}

/* Raw token bytes may stop inside a UTF-8 sequence; JSON needs valid
 * UTF-8, so pass them through detok (no stops), which replaces what cannot
 * be decoded with U+FFFD. */
static int to_utf8(const char *raw, size_t len, char **text, size_t *out_len)
{
	struct detok d;
	size_t cap = DETOK_OUT_MAX(len) + DETOK_OUT_MAX(0), n = 0, m = 0;
	char *buf = malloc(cap + 1);

	if (buf == NULL)
		return EMBER_ENOMEM;
	detok_init(&d, NULL, 0, NULL);
	detok_push(&d, raw, len, buf, cap, &n);
	detok_flush(&d, buf + n, cap - n, &m);
	buf[n + m] = '\0';
	*text = buf;
	*out_len = n + m;
	return 0;
}

int backend_detokenize(struct backend *b, const int32_t *ids, size_t n,
		       char **text, size_t *len, char *err)
{
	int32_t n_vocab;
	int64_t need;
	char *raw;
	size_t i;
	int rc;

	*text = NULL;
	*len = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	n_vocab = tokenizer_n_vocab(b->tok);
	for (i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab)
			return ember_seterr(err, EMBER_ERANGE,
					    "tokens[%zu] = %d is outside the "
					    "vocabulary [0, %d)", i, ids[i],
					    n_vocab);
	need = tokenizer_decode(b->tok, ids, n, 1, NULL, 0);
	if (need < 0)
		return ember_seterr(err, (int)need, "detokenize failed");
	raw = malloc((size_t)need + 1);
	if (raw == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "text");
	tokenizer_decode(b->tok, ids, n, 1, raw, (size_t)need);
	rc = to_utf8(raw, (size_t)need, text, len);
	free(raw);
	return rc == 0 ? 0 : ember_seterr(err, rc, "text");
}

/* ---- sessions ----------------------------------------------------------- */

int backend_session_new(struct backend *b, const char *system, uint64_t *id,
			char *err)
{
	struct engine_session_opts o = {
		.system = system,
		.system_len = system ? strlen(system) : 0,
		.add_special = true,
		.parse_special = true,
	};

	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return engine_session_new(b->engine, &o, id, err);
}

int backend_session_clone(struct backend *b, uint64_t id, uint64_t *clone_id,
			  char *err)
{
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return engine_session_clone(b->engine, id, clone_id, err);
}

int backend_session_info(struct backend *b, uint64_t id,
			 struct backend_session_info *info)
{
	struct engine_session_info ei;
	int rc;

	if (!ready(b))
		return EMBER_EBUSY;
	rc = engine_session_info(b->engine, id, &ei);
	if (rc != 0)
		return rc;
	info->n_tokens = ei.n_tokens;
	info->n_ctx = ei.n_ctx;
	info->n_left = ei.n_left;
	info->busy = ei.busy;
	info->cached = ei.cached;
	info->idle_s = ei.idle_s;
	return 0;
}

int backend_session_delete(struct backend *b, uint64_t id)
{
	if (!ready(b))
		return EMBER_EBUSY;
	return engine_session_delete(b->engine, id);
}
