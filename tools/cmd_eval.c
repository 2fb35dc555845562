/*
 * cmd_eval.c - `ember eval`: logits for given token ids, the numerical
 * check of a model.
 *
 *   ember eval -m FILE --tokens 1,2,3 [-o out.f32] [-t THREADS]
 *              [--greedy N] [--batch N] [--ctx N] [--device=cpu|vulkan[:N]]
 *
 * Evaluates the ids in one forward pass with logits for every position.
 * With -o, writes them as float32 little-endian [position][vocab];
 * otherwise prints the argmax of each position. --greedy N then feeds the
 * argmax back one token at a time and prints the N ids produced. Timings
 * go to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "compute.h"
#include "dev_session.h"
#include "ember.h"
#include "engine.h"
#include "forward.h"
#include "model.h"

struct eval_args {
	const char *model, *tokens, *out, *device;
	long threads, greedy, batch, ctx;
};

static void eval_usage(FILE *f)
{
	fprintf(f, "usage: ember eval -m FILE --tokens ID,ID,... [-o OUT.f32] [-t THREADS]\n"
		   "                  [--greedy N] [--batch N] [--ctx N]\n"
		   "  -m FILE       GGUF model\n"
		   "  --tokens IDS  comma-separated token ids\n"
		   "  -o FILE       write logits of every position (float32 LE [pos][vocab])\n"
		   "  -t N          compute threads (default 1)\n"
		   "  --greedy N    print N greedy continuation ids after the input\n"
		   "  --batch N     tokens per forward step (default %d)\n"
		   "  --ctx N       context size (default: input + greedy)\n"
		   "  --device D    cpu (default: EMBER_DEVICE or cpu), vulkan, vulkan:N\n",
		FORWARD_DEFAULT_BATCH);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int parse_args(int argc, char **argv, struct eval_args *a)
{
	int i;

	memset(a, 0, sizeof(*a));
	a->threads = 1;
	for (i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		long *num = NULL, lo = 1, hi = 1 << 20;

		if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
			eval_usage(stdout);
			return 1;
		}
		if (strncmp(opt, "--device=", 9) == 0) {
			a->device = opt + 9;
			continue;
		}
		if (!val) {
			fprintf(stderr, "ember eval: %s needs a value\n", opt);
			return -1;
		}
		if (strcmp(opt, "-m") == 0 || strcmp(opt, "--model") == 0)
			a->model = val;
		else if (strcmp(opt, "--tokens") == 0)
			a->tokens = val;
		else if (strcmp(opt, "-o") == 0)
			a->out = val;
		else if (strcmp(opt, "-t") == 0 || strcmp(opt, "--threads") == 0)
			num = &a->threads, hi = 1024;
		else if (strcmp(opt, "--greedy") == 0)
			num = &a->greedy, lo = 0;
		else if (strcmp(opt, "--batch") == 0)
			num = &a->batch;
		else if (strcmp(opt, "--ctx") == 0)
			num = &a->ctx;
		else if (strcmp(opt, "--device") == 0)
			a->device = val;
		else {
			fprintf(stderr, "ember eval: unknown option %s\n", opt);
			return -1;
		}
		if (num && parse_long(val, lo, hi, num) < 0) {
			fprintf(stderr, "ember eval: bad value for %s: %s\n", opt, val);
			return -1;
		}
		i++;
	}
	if (!a->model || !a->tokens) {
		eval_usage(stderr);
		return -1;
	}
	return 0;
}

/* Parses "1,2,3" into a new array (*out, caller frees). Returns the count
 * or -1. */
static long parse_ids(const char *s, int32_t **out)
{
	size_t cap = 1, n = 0;
	const char *p;
	int32_t *ids;

	for (p = s; *p; p++)
		cap += *p == ',';
	ids = malloc(cap * sizeof(*ids));
	if (!ids)
		return -1;
	for (p = s;;) {
		char *end;
		long v;

		errno = 0;
		v = strtol(p, &end, 10);
		if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
			free(ids);
			return -1;
		}
		ids[n++] = (int32_t)v;
		if (!*end)
			break;
		p = end + 1;
	}
	*out = ids;
	return (long)n;
}

static uint32_t argmax(const float *x, uint32_t n)
{
	uint32_t i, best = 0;

	for (i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

static int write_logits(const char *path, const float *logits, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	/* float32 little-endian: the host order on every target we build. */
	ok = fwrite(logits, sizeof(float), n, f) == n;
	ok = (fclose(f) == 0) && ok;
	return ok ? 0 : -1;
}

/* Feeds argmax back `n` times after the input; prints the ids. */
static int greedy(struct dev_session *fw, float *last, uint32_t n_vocab, long n, char *err)
{
	double t0 = clock_now_s();
	long i;
	int rc;

	printf("greedy:");
	for (i = 0; i < n; i++) {
		int32_t id = (int32_t)argmax(last, n_vocab);

		printf(" %d", id);
		if (i + 1 < n && (rc = dev_session_eval(fw, &id, 1, last, 0, err)) < 0)
			return rc;
	}
	printf("\n");
	if (n > 1)
		fprintf(stderr, "decode: %ld tokens in %.1f ms (%.1f tok/s)\n", n - 1,
			(clock_now_s() - t0) * 1e3, (double)(n - 1) / (clock_now_s() - t0));
	return 0;
}

int cmd_eval(int argc, char **argv)
{
	struct eval_args a;
	struct engine_model *em = NULL;
	const struct model *mp;
	struct dev_session fw = {0};
	struct forward_opts o = {0};
	char err[EMBER_ERR_MAX] = "";
	int32_t *ids = NULL;
	float *logits = NULL;
	long n_ids;
	uint32_t n_vocab, t;
	double t0;
	int rc = parse_args(argc, argv, &a);

	if (rc != 0)
		return rc < 0 ? 2 : 0;
	rc = 1;
	n_ids = parse_ids(a.tokens, &ids);
	if (n_ids <= 0) {
		fprintf(stderr, "ember eval: bad --tokens list: %s\n", a.tokens);
		return 2;
	}
	if (compute_device_select(a.device, err) < 0) {
		fprintf(stderr, "ember eval: %s\n", err);
		goto done;
	}
	if (engine_model_open(&em, a.model, NULL, err) < 0) {
		fprintf(stderr, "ember eval: %s: %s\n", a.model, err);
		goto done;
	}
	mp = engine_model_weights(em);
	n_vocab = mp->hp.n_vocab;
	o.n_ctx = (uint32_t)(a.ctx ? a.ctx : n_ids + a.greedy);
	o.max_batch = (uint32_t)a.batch;
	o.n_threads = (uint32_t)a.threads;
	if (dev_session_new(&fw, mp, &o, err) < 0) {
		fprintf(stderr, "ember eval: %s\n", err);
		goto done;
	}
	logits = malloc((size_t)n_ids * n_vocab * sizeof(float));
	if (!logits) {
		fprintf(stderr, "ember eval: out of memory\n");
		goto done;
	}
	t0 = clock_now_s();
	if (dev_session_eval(&fw, ids, (size_t)n_ids, logits, 1, err) < 0) {
		fprintf(stderr, "ember eval: %s\n", err);
		goto done;
	}
	fprintf(stderr, "prefill: %ld tokens in %.1f ms (%.1f tok/s), %ld thread(s)\n", n_ids,
		(clock_now_s() - t0) * 1e3, (double)n_ids / (clock_now_s() - t0), a.threads);
	if (a.out) {
		if (write_logits(a.out, logits, (size_t)n_ids * n_vocab) < 0) {
			fprintf(stderr, "ember eval: cannot write %s: %s\n", a.out, strerror(errno));
			goto done;
		}
	} else {
		printf("argmax:");
		for (t = 0; t < (uint32_t)n_ids; t++)
			printf(" %u", argmax(logits + (size_t)t * n_vocab, n_vocab));
		printf("\n");
	}
	if (a.greedy > 0 &&
	    greedy(&fw, logits + (size_t)(n_ids - 1) * n_vocab, n_vocab, a.greedy, err) < 0) {
		fprintf(stderr, "ember eval: %s\n", err);
		goto done;
	}
	rc = 0;
done:
	free(logits);
	dev_session_free(&fw);
	engine_model_free(em);
	free(ids);
	return rc;
}
