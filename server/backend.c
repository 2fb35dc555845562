/*
 * backend.c - the server's side of the engine (engine.h): the loader
 * thread and request translation.
 *
 * Loading runs on a thread of its own (engine_open can take seconds for a
 * large file): the loop answers /health with 503 "loading" meanwhile and
 * 200 once `status` turns READY. Until then every other field but the
 * configuration belongs to the loader; the atomic store of `status`
 * publishes them to the loop.
 *
 * A request: its messages or prompt, sampling (a seed drawn when the
 * client gave none) and stop strings become an engine request, which
 * engine_submit copies; the engine renders the chat template (adding the
 * family's stop texts) and tokenizes off the loop, and calls the
 * request's gen_sink directly.
 */
#include "backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "engine.h"
#include "gguf.h"
#include "model_watch.h"

struct backend {
	const struct config *cfg;
	struct metrics *metrics;
	_Atomic int status;          /* enum backend_status */
	char message[EMBER_ERR_MAX]; /* FAILED: why (written before status) */
	char model_id[128];
	pthread_t loader;
	bool loader_started;
	struct engine *engine;       /* the loader's until READY */
	char *template_src;          /* --chat-template-file's text, or NULL */
	size_t template_len;
	char vocab_type[32];         /* backend_model_info's, filled on first use (loop thread) */
	struct model_watch watch;    /* the file as loaded (model_watch.h) */
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
		.chat_template = c->chat_template,
		.chat_template_src = b->template_src,
		.chat_template_len = b->template_len,
	};
	char err[EMBER_ERR_MAX] = "";

	if (ec.threads == 0)
		ec.threads = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	/* The watch opens the file before the engine does and checks after
	 * that both saw the same, unchanged file. */
	if (model_watch_open(&b->watch, c->model, err) != 0 ||
	    engine_open(&b->engine, c->model, &ec, err) != 0 ||
	    model_watch_check(&b->watch, true, err) != 0 ||
	    model_watch_guard(engine_model(b->engine)->gguf->map,
			      engine_model(b->engine)->gguf->size, c->model, err) != 0) {
		snprintf(b->message, sizeof(b->message), "%s", err);
		atomic_store(&b->status, BACKEND_FAILED);
		return NULL;
	}
	if (engine_template_warning(b->engine)[0])
		fprintf(stderr, "emberd: warning: %s\n", engine_template_warning(b->engine));
	atomic_store(&b->status, BACKEND_READY);
	return NULL;
}

/* Reads and test-parses --chat-template-file at start-up, so a bad file is
 * an error now rather than a surprise at the first request. */
static int backend_read_template(struct backend *b, const char *path, char *err)
{
	FILE *f = fopen(path, "rb");
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
		return ember_seterr(err, EMBER_EIO, "chat_template_file %s: read failed", path);
	}
	fclose(f);
	b->template_src[size] = '\0';
	b->template_len = (size_t)size;
	if (engine_template_check(b->template_src, b->template_len, why) != 0)
		return ember_seterr(err, EMBER_EINVAL, "chat_template_file %s: %s", path, why);
	return 0;
}

int backend_new(const struct config *cfg, struct metrics *metrics,
		struct backend **out, char *err)
{
	struct backend *b = calloc(1, sizeof(*b));
	const char *tname = cfg->chat_template;
	FILE *f;

	*out = NULL;
	if (b == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "backend");
	b->cfg = cfg;
	b->metrics = metrics;
	b->watch.fd = -1;
	if (cfg->model == NULL) {
		atomic_store(&b->status, BACKEND_NO_MODEL);
		*out = b;
		return 0;
	}
	if (!engine_template_known(tname)) {
		free(b);
		return ember_seterr(err, EMBER_EINVAL,
				    "chat_template '%s': not auto, chatml, "
				    "llama3, gemma, phi3, zephyr, llama2, phi2 "
				    "or falcon", tname);
	}
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
	model_watch_close(&b->watch);
	free(b->template_src);
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

bool backend_model_changed(struct backend *b)
{
	char why[EMBER_ERR_MAX];

	if (!ready(b))
		return false;
	if (model_watch_check(&b->watch, false, why) == 0)
		return false;
	/* Loop thread, after READY: the loader is done with `message`. */
	snprintf(b->message, sizeof(b->message), "%s", why);
	atomic_store(&b->status, BACKEND_FAILED);
	fprintf(stderr, "emberd: error: %s\n", why);
	return true;
}

const char *backend_model_id(const struct backend *b)
{
	return b->model_id[0] ? b->model_id : NULL;
}

const char *backend_replica_id(const struct backend *b)
{
	return b->cfg->replica_id;
}

int backend_full_status(const struct backend *b)
{
	return b->cfg->full_status == CONFIG_FULL_503 ? 503 : 429;
}

const char *backend_chat_template(const struct backend *b)
{
	return ready(b) ? engine_chat_template(b->engine) : "";
}

int64_t backend_context(const struct backend *b)
{
	return ready(b) ? (int64_t)engine_n_ctx(b->engine) : 0;
}

static const char *kv_str(const struct gguf *g, const char *key, char *buf, size_t size)
{
	struct gguf_str v;

	if (gguf_get_str(g, key, &v) != 0)
		return "";
	snprintf(buf, size, "%.*s", (int)(v.len < size ? v.len : size - 1), v.ptr);
	return buf;
}

int backend_fim_prompt(struct backend *b, const char *prefix, size_t prefix_len,
		       const char *suffix, size_t suffix_len, char **out,
		       size_t *len, char *err)
{
	*out = NULL;
	*len = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return engine_fim_prompt(b->engine, prefix, prefix_len, suffix, suffix_len,
				 out, len, err);
}

int backend_token_piece(struct backend *b, int32_t id, char *buf, size_t cap)
{
	if (!ready(b))
		return EMBER_EBUSY;
	return engine_token_piece(b->engine, id, buf, cap);
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
	metrics_set_engine_counts(b->metrics, st.steps, st.prefill_tokens, st.decode_tokens);
	metrics_set_engine_account(b->metrics, &st);
}

/* ---- requests ------------------------------------------------------------ */

static uint64_t random_seed(void)
{
	struct timespec ts;
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec;
}

/* The request's messages as engine messages: into `stack` when they fit,
 * else a malloc'd array (*out != stack: the caller frees it). */
static int messages(const struct gen_request *req, struct engine_message *stack,
		    size_t n_stack, struct engine_message **out, char *err)
{
	size_t i;

	*out = stack;
	if (req->n_messages > n_stack &&
	    !(*out = malloc(req->n_messages * sizeof(**out))))
		return ember_seterr(err, EMBER_ENOMEM, "messages");
	for (i = 0; i < req->n_messages; i++) {
		(*out)[i].role = gen_role_name(req->messages[i].role);
		(*out)[i].content = req->messages[i].content;
		(*out)[i].content_len = req->messages[i].content_len;
		(*out)[i].tool_calls = req->messages[i].tool_calls;
		(*out)[i].tool_call_id = req->messages[i].tool_call_id;
	}
	return 0;
}

/* Prompt `p` of `req` with `n` choices, choice j calling sinks[j] (all
 * with the same callbacks); seeds are the request's (or a drawn one) plus
 * the choice's OpenAI index p * n + j. */
static int submit_prompt(struct backend *b, const struct gen_request *req, size_t p, uint32_t n,
			 const struct gen_sink *sinks, uint64_t *id, char *err)
{
	struct engine_message stack[8], *msgs = stack;
	void *data_stack[8], **data = data_stack;
	struct sampler_config sc;
	struct engine_request er = {0};
	char *tool_gbnf = NULL, lazy_err[EMBER_ERR_MAX];
	uint32_t j;
	int rc;

	*id = 0;
	if (!ready(b) || backend_model_changed(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	if (n > 8 && !(data = malloc(n * sizeof(*data))))
		return ember_seterr(err, EMBER_ENOMEM, "choices");
	for (j = 0; j < n; j++)
		data[j] = sinks[j].data;
	er.n = n;
	er.choice_data = data;
	if (req->prompts) {
		const struct gen_prompt *gp = &req->prompts[p];

		er.prompt = gp->text;
		er.prompt_len = gp->text ? gp->len : 0;
		er.tokens = gp->ids;
		er.n_tokens = gp->n_ids;
	} else if (req->kind == GEN_CHAT) {
		if ((rc = messages(req, stack, 8, &msgs, err)) != 0)
			return rc;
		er.messages = msgs;
		er.n_messages = req->n_messages;
		er.tools = req->tools;
	} else {
		er.prompt = req->prompt;
		er.prompt_len = req->prompt_len;
	}
	sampler_config_default(&sc);
	sc.temperature = req->temperature;
	sc.top_p = req->top_p;
	sc.top_k = req->top_k;
	sc.min_p = req->min_p;
	sc.presence_penalty = req->presence_penalty;
	sc.frequency_penalty = req->frequency_penalty;
	sc.repetition_penalty = req->repeat_penalty;
	sc.penalty_last_n = req->repeat_last_n;
	sc.seed = (req->has_seed ? req->seed : random_seed()) + p * n;
	er.add_special = true;
	/* Templated text needs its markers as control tokens; raw completion
	 * prompts get the same, as llama.cpp's server does, so clients that
	 * template themselves work. */
	er.parse_special = true;
	er.sampling = &sc;
	er.max_tokens = req->max_tokens;
	er.n_stop = req->n_stop;
	er.stop = (const char *const *)req->stop;
	er.session = req->session;
	er.grammar = req->grammar;
	if (req->tool_mode == GEN_TOOLS_REQUIRED || req->tool_mode == GEN_TOOLS_NAMED) {
		/* a call forced in the model's own syntax (tool_call.h) */
		if ((rc = tool_call_grammar(backend_tool_family(b), req->tools, req->tool_name,
					    req->parallel_tool_calls, &tool_gbnf, err)) != 0)
			goto out;
		er.grammar = tool_gbnf;
	} else if (req->tool_mode == GEN_TOOLS_AUTO && req->grammar == NULL &&
		   tool_call_grammar(backend_tool_family(b), req->tools, NULL, req->parallel_tool_calls,
				     &tool_gbnf, lazy_err) == 0) {
		/* free text; a call, once begun, follows its schema. A schema the
		 * compiler does not cover leaves the call unconstrained. */
		er.grammar = tool_gbnf;
		er.grammar_trigger = tool_call_trigger(backend_tool_family(b), &er.grammar_trigger_at_start);
	}
	er.grammar_len = er.grammar ? strlen(er.grammar) : 0;
	er.on_text = sinks[0].text_cb;
	er.on_done = sinks[0].done_cb;
	er.logit_bias = req->logit_bias;
	er.n_logit_bias = req->n_logit_bias;
	if (req->logprobs) {
		er.on_logprobs = sinks[0].logprobs_cb;
		er.top_logprobs = req->top_logprobs;
	}
	er.data = sinks[0].data;
	rc = engine_submit(b->engine, &er, id, err);
out:
	free(tool_gbnf);
	if (msgs != stack)
		free(msgs);
	if (data != data_stack)
		free(data);
	backend_refresh_metrics(b);
	return rc;
}

int backend_submit(struct backend *b, const struct gen_request *req,
		   const struct gen_sink *sink, uint64_t *id, char *err)
{
	return submit_prompt(b, req, 0, 1, sink, id, err);
}

int backend_submit_prompt(struct backend *b, const struct gen_request *req, size_t p,
			  const struct gen_sink *sinks, uint64_t *id, char *err)
{
	return submit_prompt(b, req, p, req->n, sinks, id, err);
}

int backend_model_info(struct backend *b, struct backend_model_info *info)
{
	struct engine_stats es;
	const struct model *m;
	const struct gguf *g;
	uint64_t count[64] = {0}, i, best = 0;
	struct gguf_str s;
	struct stat st;
	uint32_t d;

	memset(info, 0, sizeof(*info));
	if (!ready(b))
		return EMBER_EBUSY;
	m = engine_model(b->engine);
	g = m->gguf;
	info->chat_template = "";
	snprintf(info->arch, sizeof(info->arch), "unknown");
	if (gguf_get_str(g, "general.architecture", &s) == 0 && s.len < sizeof(info->arch))
		snprintf(info->arch, sizeof(info->arch), "%.*s", (int)s.len, s.ptr);
	if (gguf_get_str(g, "tokenizer.chat_template", &s) == 0) {
		info->chat_template = s.ptr; /* not NUL-terminated: use the length */
		info->chat_template_len = (size_t)s.len;
	}
	for (i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		uint64_t n = 1;

		for (d = 0; d < t->n_dims; d++)
			n *= t->ne[d];
		info->n_params += n;
		if (t->n_dims >= 2 && t->type < 64)
			count[t->type]++;
	}
	for (d = 0; d < 64; d++)
		if (count[d] > count[best])
			best = d;
	info->weight_type = dtype_name((uint32_t)best);
	info->pooling = engine_pooling_name(engine_pooling(b->engine));
	info->file_size = g->size;
	if (stat(b->cfg->model, &st) == 0)
		info->mtime = (int64_t)st.st_mtime;
	info->n_ctx_train = m->hp.n_ctx_train;
	info->n_ctx = engine_n_ctx(b->engine);
	info->n_embd = m->hp.n_embd;
	info->n_layer = m->hp.n_layer;
	info->n_head = m->hp.n_head;
	info->n_vocab = m->hp.n_vocab;
	if (b->vocab_type[0] == '\0')
		kv_str(g, "tokenizer.ggml.model", b->vocab_type, sizeof(b->vocab_type));
	info->vocab_type = b->vocab_type;
	engine_stats(b->engine, &es);
	info->slots_total = es.slots_total;
	info->slots_busy = es.slots_busy;
	return 0;
}

int backend_embed(struct backend *b, const char *text, size_t len, const int32_t *ids,
		  size_t n_ids, bool truncate, engine_embed_cb on_embed, engine_done_cb on_done,
		  void *data, uint64_t *id, char *err)
{
	struct engine_request er = {0};
	int rc;

	*id = 0;
	if (!ready(b) || backend_model_changed(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	if (ids) {
		er.embed_tokens = ids;
		er.embed_n_tokens = n_ids;
	} else {
		er.prompt = text;
		er.prompt_len = len;
		er.add_special = true;
	}
	er.embed_truncate = truncate;
	er.on_embed = on_embed;
	er.on_done = on_done;
	er.data = data;
	rc = engine_submit(b->engine, &er, id, err);
	backend_refresh_metrics(b);
	return rc;
}

bool backend_renders_tools(const struct backend *b)
{
	const char *family, *src = NULL;
	size_t len = 0;

	if (ready(b))
		src = engine_chat_template_source(b->engine, &len, &family);
	/* the same test chat_render() applies */
	return src != NULL && memmem(src, len, "tools", 5) != NULL;
}

enum tool_family backend_tool_family(const struct backend *b)
{
	const char *family = NULL, *src = NULL;
	size_t len = 0;

	if (ready(b))
		src = engine_chat_template_source(b->engine, &len, &family);
	return tool_family_detect(src, len, family);
}

int backend_apply_template(const struct backend *b, const struct gen_request *req,
			   char **out, size_t *len, char *err)
{
	struct engine_message stack[8], *msgs = stack;
	int rc;

	*out = NULL;
	*len = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	if ((rc = messages(req, stack, 8, &msgs, err)) != 0)
		return rc;
	rc = engine_render(b->engine, msgs, req->n_messages, req->tools, out, len, err);
	if (msgs != stack)
		free(msgs);
	return rc;
}

void backend_cancel(struct backend *b, uint64_t id)
{
	if (ready(b))
		engine_cancel(b->engine, id);
}

void backend_cancel_all(struct backend *b)
{
	if (ready(b))
		engine_cancel_all(b->engine);
}

/* ---- tokenizer ---------------------------------------------------------- */

int backend_tokenize(struct backend *b, const char *text, size_t len,
		     bool add_special, bool parse_special, int32_t **ids,
		     size_t *n, char *err)
{
	*ids = NULL;
	*n = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return engine_tokenize(b->engine, text, len, add_special, parse_special,
			       ids, n, err);
}

int backend_detokenize(struct backend *b, const int32_t *ids, size_t n,
		       char **text, size_t *len, char *err)
{
	*text = NULL;
	*len = 0;
	if (!ready(b))
		return ember_seterr(err, EMBER_EBUSY, "model not loaded");
	return engine_detokenize(b->engine, ids, n, text, len, err);
}

/* ---- sessions ----------------------------------------------------------- */

int backend_session_new(struct backend *b, const char *system, size_t system_len,
			uint64_t *id, char *err)
{
	struct engine_session_opts o = {
		.system = system,
		.system_len = system ? system_len : 0,
		.add_special = true,
		.parse_special = true,
	};

	if (!ready(b) || backend_model_changed(b))
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
			 struct engine_session_info *info)
{
	if (!ready(b))
		return EMBER_EBUSY;
	return engine_session_info(b->engine, id, info);
}

int backend_session_delete(struct backend *b, uint64_t id)
{
	if (!ready(b))
		return EMBER_EBUSY;
	return engine_session_delete(b->engine, id);
}
