/*
 * cmd_run.c - `ember run`: prompt in, streamed text out, timings at the end.
 *
 * Generates through the engine (engine.h) like the server does: one worker
 * with one slot, an F32 cache and 64-token prefill steps (what a plain
 * forward loop would use), so its text is the server's text for the same
 * request. Text goes to stdout as the engine streams it (never a split
 * UTF-8 sequence); timings go to stderr.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ember.h"
#include "engine.h"
#include "sampler.h"

struct run_args {
	const char *model, *prompt, *system;
	int chat;
	long n_predict, threads, ctx;
	const char *stops[ENGINE_MAX_STOP];
	size_t n_stops;
	struct sampler_config sc;
	int has_seed;
};

static void run_usage(FILE *f)
{
	fprintf(f, "usage: ember run -m FILE -p PROMPT [-n N] [-t THREADS] [--ctx N]\n"
		   "                 [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S]\n"
		   "                 [--repeat-penalty R] [--stop TEXT]... [--chat [--system TEXT]]\n"
		   "  --chat renders the prompt as a user turn with the model's chat template\n"
		   "  defaults: -n 128, -t 2, --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05,\n"
		   "  a random seed (printed to stderr); --temp 0 is greedy.\n");
}

static int run_parse_num(const char *name, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || !(v >= lo && v <= hi)) {
		fprintf(stderr, "ember run: bad value '%s' for --%s (%g..%g)\n", s, name, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int run_parse_args(int argc, char **argv, struct run_args *a)
{
	static const struct option longopts[] = {
		{"model", required_argument, 0, 'm'},   {"prompt", required_argument, 0, 'p'},
		{"n-predict", required_argument, 0, 'n'}, {"threads", required_argument, 0, 't'},
		{"ctx", required_argument, 0, 'c'},     {"temp", required_argument, 0, 'T'},
		{"top-k", required_argument, 0, 'K'},   {"top-p", required_argument, 0, 'P'},
		{"min-p", required_argument, 0, 'M'},   {"seed", required_argument, 0, 'S'},
		{"repeat-penalty", required_argument, 0, 'R'}, {"stop", required_argument, 0, 's'},
		{"chat", no_argument, 0, 'C'},          {"system", required_argument, 0, 'Y'},
		{"help", no_argument, 0, 'h'},          {0, 0, 0, 0},
	};
	double v;
	int c;

	memset(a, 0, sizeof(*a));
	a->n_predict = 128;
	a->threads = 2;
	sampler_config_default(&a->sc);
	a->sc.temperature = 0.8f;
	a->sc.top_k = 40;
	a->sc.top_p = 0.95f;
	a->sc.min_p = 0.05f;
	optind = 1;
	while ((c = getopt_long(argc, argv, "m:p:n:t:h", longopts, NULL)) != -1) {
		const char *name = NULL;
		int i;

		for (i = 0; longopts[i].name; i++)
			if (longopts[i].val == c)
				name = longopts[i].name;
		switch (c) {
		case 'm': a->model = optarg; break;
		case 'p': a->prompt = optarg; break;
		case 'n': if (run_parse_num(name, optarg, 1, 1 << 20, &v)) return -1; a->n_predict = (long)v; break;
		case 't': if (run_parse_num(name, optarg, 1, 256, &v)) return -1; a->threads = (long)v; break;
		case 'c': if (run_parse_num(name, optarg, 1, 1 << 24, &v)) return -1; a->ctx = (long)v; break;
		case 'T': if (run_parse_num(name, optarg, 0, 100, &v)) return -1; a->sc.temperature = (float)v; break;
		case 'K': if (run_parse_num(name, optarg, 0, 1 << 24, &v)) return -1; a->sc.top_k = (int32_t)v; break;
		case 'P': if (run_parse_num(name, optarg, 0, 1, &v)) return -1; a->sc.top_p = (float)v; break;
		case 'M': if (run_parse_num(name, optarg, 0, 1, &v)) return -1; a->sc.min_p = (float)v; break;
		case 'R': if (run_parse_num(name, optarg, 0, 10, &v)) return -1; a->sc.repetition_penalty = (float)v; break;
		case 'S': if (run_parse_num(name, optarg, 0, 1.8e19, &v)) return -1; a->sc.seed = (uint64_t)v; a->has_seed = 1; break;
		case 's':
			if (a->n_stops == ENGINE_MAX_STOP) {
				fprintf(stderr, "ember run: at most %d --stop strings\n", ENGINE_MAX_STOP);
				return -1;
			}
			a->stops[a->n_stops++] = optarg;
			break;
		case 'C': a->chat = 1; break;
		case 'Y': a->system = optarg; break;
		case 'h': run_usage(stdout); return 1;
		default: run_usage(stderr); return -1;
		}
	}
	if (a->model == NULL || a->prompt == NULL || optind != argc) {
		run_usage(stderr);
		return -1;
	}
	if (!a->has_seed)
		a->sc.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	return 0;
}

/* The request's outcome, handed from the worker to the main thread. */
struct run_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	struct engine_result res;
};

static void run_on_text(void *data, const char *text, size_t len, int n_tokens)
{
	(void)data;
	(void)n_tokens;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
}

static void run_on_done(void *data, const struct engine_result *res)
{
	struct run_wait *w = data;

	pthread_mutex_lock(&w->lock);
	w->res = *res;
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Why the generation ended, in the words the summary line uses. */
static const char *run_why(const struct engine_result *r, long n_predict)
{
	if (r->finish == ENGINE_FINISH_STOP)
		return r->stop_index >= 0 ? "stop string" : "end of sequence";
	return r->completion_tokens >= n_predict ? "length" : "context full";
}

/* Submits the prompt (--chat: as [system,] user messages) and waits for
 * the engine's result. */
static int run_generate(struct engine *e, const struct run_args *a, struct engine_result *res,
			char *err)
{
	struct engine_message msgs[2];
	struct engine_request r = {0};
	struct run_wait w = {.done = 0};
	size_t n = 0;
	uint64_t id;
	int rc;

	if (a->chat) {
		if (a->system)
			msgs[n++] = (struct engine_message){.role = "system", .content = a->system};
		msgs[n++] = (struct engine_message){.role = "user", .content = a->prompt};
		r.messages = msgs;
		r.n_messages = n;
		/* Chat markup is tokenized with its special tokens (chat.h). */
		r.parse_special = true;
	} else {
		r.prompt = a->prompt;
		r.prompt_len = strlen(a->prompt);
	}
	r.add_special = true;
	r.sampling = &a->sc;
	r.max_tokens = (int32_t)a->n_predict;
	r.stop = a->stops;
	r.n_stop = a->n_stops;
	r.on_text = run_on_text;
	r.on_done = run_on_done;
	r.data = &w;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	rc = engine_submit(e, &r, &id, err);
	pthread_mutex_lock(&w.lock);
	while (rc == 0 && !w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	if (rc < 0)
		return rc;
	*res = w.res;
	if (res->finish == ENGINE_FINISH_ERROR)
		return ember_seterr(err, res->code ? res->code : EMBER_EIO, "%s", res->message);
	return 0;
}

int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct engine_config ec = {.workers = 1, .slots = 1, .kv_f32 = true, .prefill_chunk = 64};
	struct engine *e = NULL;
	struct engine_result res;
	char err[EMBER_ERR_MAX] = "";
	int rc;

	rc = run_parse_args(argc, argv, &a);
	if (rc != 0)
		return rc < 0 ? 1 : 0;
	rc = 1;
	ec.threads = (uint32_t)a.threads;
	ec.n_ctx = (uint32_t)a.ctx;
	if (sampler_config_validate(&a.sc, err) < 0 || engine_open(&e, a.model, &ec, err) < 0)
		goto fail;
	if (a.chat && engine_template_warning(e)[0])
		fprintf(stderr, "warning: %s\n", engine_template_warning(e));
	if (a.chat)
		fprintf(stderr, "[chat template: %s]\n", engine_chat_template(e));
	if (run_generate(e, &a, &res, err) < 0)
		goto fail;
	printf("\n");
	fprintf(stderr, "\n[%s] seed %llu, %lld prompt tokens, %lld generated\n",
		run_why(&res, a.n_predict), (unsigned long long)a.sc.seed,
		(long long)res.prompt_tokens, (long long)res.completion_tokens);
	fprintf(stderr, "time to first token: %.1f ms\n", res.ttft_ms);
	fprintf(stderr, "prefill: %.1f tokens/s\n", res.prefill_tps);
	if (res.completion_tokens > 1)
		fprintf(stderr, "decode:  %.1f tokens/s\n", res.decode_tps);
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "ember run: %s\n", err[0] ? err : "failed");
	engine_free(e);
	return rc;
}
