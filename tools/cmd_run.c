/*
 * cmd_run.c - `ember run`: prompt in, streamed text out, timings at the end.
 *
 * The smallest complete use of the engine: tokenizer -> forward (one
 * prefill, then one decode step per token) -> sampler -> detok, all on this
 * thread plus the forward's compute pool. Text goes to stdout as it is
 * generated (never a split UTF-8 sequence); timings go to stderr.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chat.h"
#include "commands.h"
#include "detok.h"
#include "ember.h"
#include "forward.h"
#include "kernels.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

struct run_args {
	const char *model, *prompt, *system;
	int chat;
	long n_predict, threads, ctx;
	const char *stops[DETOK_MAX_STOPS]; /* may point into style below */
	size_t n_stops;
	struct chat_style style;            /* --chat: the model's template */
	struct sampler_config sc;
	int has_seed;
};

static double run_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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
			if (a->n_stops == DETOK_MAX_STOPS) {
				fprintf(stderr, "ember run: at most %d --stop strings\n", DETOK_MAX_STOPS);
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

/*
 * With --chat: renders [system,] user = prompt with the model's template
 * into *out (malloc'd, owned by the caller) and appends the family's
 * end-of-turn texts to the stop strings (as many as fit).
 */
static int run_render_chat(struct run_args *a, const struct model *m, const struct tokenizer *tok,
			   char **out, char *err)
{
	struct chat_msg msgs[2];
	size_t n = 0, i, len;
	int rc;

	chat_style_init(&a->style, CHAT_TEMPLATE_AUTO, m->gguf, tok);
	if (a->style.warning[0])
		fprintf(stderr, "warning: %s\n", a->style.warning);
	if (a->system)
		msgs[n++] = (struct chat_msg){.role = "system", .content = a->system};
	msgs[n++] = (struct chat_msg){.role = "user", .content = a->prompt};
	rc = chat_style_render(&a->style, msgs, n, out, &len, err);
	if (rc < 0)
		return rc;
	for (i = 0; i < a->style.n_stops && a->n_stops < DETOK_MAX_STOPS; i++)
		a->stops[a->n_stops++] = a->style.stops[i];
	fprintf(stderr, "[chat template: %s]\n",
		a->style.jinja ? "the model's own (Jinja)" : chat_template_name(a->style.family));
	return 0;
}

/* Writes `len` bytes of text through the detokenizer; returns DETOK_STOP
 * when a stop string ended the output. */
static int run_emit(struct detok *d, const char *piece, size_t len, char *out, size_t cap)
{
	size_t n = 0;
	int st = detok_push(d, piece, len, out, cap, &n);

	if (st >= 0 && n > 0) {
		fwrite(out, 1, n, stdout);
		fflush(stdout);
	}
	return st;
}

int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct model m = {0};
	struct tokenizer *tok = NULL;
	struct forward_ctx *f = NULL;
	struct sampler *s = NULL;
	struct detok d;
	struct forward_opts fo = {0};
	char err[EMBER_ERR_MAX] = "", piece[256], out[DETOK_OUT_MAX(256)], *chat_text = NULL;
	const char *text;
	int32_t *ids = NULL, tok_id;
	float *logits = NULL;
	int64_t n_ids;
	long n_gen = 0;
	double t0, t_first = 0, t_prefill, t_end;
	int rc = 1, st = DETOK_CONTINUE, pn;
	const char *why = "length";

	rc = run_parse_args(argc, argv, &a);
	if (rc != 0)
		return rc < 0 ? 1 : 0;
	rc = 1;
	kern_init();
	if (model_open(&m, a.model, err) < 0 || tokenizer_new(&tok, m.gguf, err) < 0 ||
	    sampler_config_validate(&a.sc, err) < 0)
		goto fail;
	if (a.chat && run_render_chat(&a, &m, tok, &chat_text, err) < 0)
		goto fail;
	text = a.chat ? chat_text : a.prompt;
	if (detok_init(&d, a.stops, a.n_stops, err) < 0)
		goto fail;
	fo.n_ctx = (uint32_t)a.ctx;
	fo.n_threads = (uint32_t)a.threads;
	if (forward_new(&f, &m, &fo, err) < 0 ||
	    sampler_new(&s, &a.sc, (int32_t)m.hp.n_vocab, err) < 0)
		goto fail;
	t0 = run_now_ms();
	/* Chat markup is tokenized with its special tokens (chat.h). */
	n_ids = tokenizer_encode(tok, text, strlen(text), 1, a.chat, NULL, 0);
	ids = n_ids > 0 ? malloc((size_t)n_ids * sizeof(*ids)) : NULL;
	logits = malloc((size_t)m.hp.n_vocab * sizeof(*logits));
	if (ids == NULL || logits == NULL) {
		ember_seterr(err, n_ids <= 0 ? EMBER_EINVAL : EMBER_ENOMEM, "cannot tokenize the prompt");
		goto fail;
	}
	tokenizer_encode(tok, text, strlen(text), 1, a.chat, ids, (size_t)n_ids);
	if (forward_eval(f, ids, (size_t)n_ids, logits, 0, err) < 0)
		goto fail;
	t_prefill = run_now_ms();
	while (n_gen < a.n_predict) {
		tok_id = sampler_sample(s, logits, (int32_t)m.hp.n_vocab);
		if (tok_id < 0) {
			ember_seterr(err, tok_id, "sampling failed: %s", ember_strerror(tok_id));
			goto fail;
		}
		if (n_gen++ == 0)
			t_first = run_now_ms();
		if (tokenizer_is_eog(tok, tok_id)) {
			why = "end of sequence";
			break;
		}
		sampler_accept(s, tok_id);
		pn = tokenizer_piece(tok, tok_id, 0, piece, sizeof(piece));
		st = run_emit(&d, piece, pn > 0 && (size_t)pn <= sizeof(piece) ? (size_t)pn : 0, out, sizeof(out));
		if (st == DETOK_STOP) {
			why = "stop string";
			break;
		}
		if (n_gen == a.n_predict)
			break;
		if (forward_n_pos(f) >= forward_n_ctx(f)) {
			why = "context full";
			break;
		}
		if (forward_eval(f, &tok_id, 1, logits, 0, err) < 0)
			goto fail;
	}
	if (st != DETOK_STOP) {
		size_t n = 0;
		detok_flush(&d, out, sizeof(out), &n);
		fwrite(out, 1, n, stdout);
	}
	t_end = run_now_ms();
	printf("\n");
	fprintf(stderr, "\n[%s] seed %llu, %ld prompt tokens, %ld generated\n", why,
		(unsigned long long)a.sc.seed, (long)n_ids, n_gen);
	fprintf(stderr, "time to first token: %.1f ms\n", t_first - t0);
	fprintf(stderr, "prefill: %.1f tokens/s\n", n_ids / ((t_prefill - t0) / 1e3));
	if (n_gen > 1)
		fprintf(stderr, "decode:  %.1f tokens/s\n", (n_gen - 1) / ((t_end - t_first) / 1e3));
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "ember run: %s\n", err[0] ? err : "failed");
	free(chat_text);
	chat_style_free(&a.style);
	free(ids);
	free(logits);
	sampler_free(s);
	forward_free(f);
	tokenizer_free(tok);
	model_free(&m);
	return rc;
}
