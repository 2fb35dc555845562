/*
 * cmd_bench.c - `ember bench`: prefill and decode speed of a model, in the
 * manner of llama-bench.
 *
 *   ember bench -m FILE [-p 512] [-n 128] [-t 2] [-r 3] [--device=cpu|vulkan[:N]]
 *
 * With --device=vulkan the Vulkan devices and their features are listed
 * first, and the kernels column names the device.
 * Tests (each after one untimed warm-up run):
 *   pp<p>: one forward_eval() of p random tokens from an empty cache (one
 *          step: max_batch = p), logits of the last token only;
 *   tg<n>: n single-token forward_eval() calls from an empty cache, logits
 *          of each token.
 * Each test is repeated r times; a markdown row reports tokens/s as
 * mean ± sd over the repetitions and their median, plus, for decode, the
 * weight bytes one token reads (every matrix once; embedding row, norms and
 * the KV cache left out) and the bandwidth that median implies.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "commands.h"
#include "compute.h"
#include "dev_session.h"
#include "dtype.h"
#include "ember.h"
#include "engine.h"
#include "forward.h"
#include "kernels.h"
#include "model.h"

#define BENCH_MAX_REPS 100

struct bench_args {
	const char *model, *device;
	long p, n, threads, reps;
};

static void bench_usage(FILE *f)
{
	fprintf(f, "usage: ember bench -m FILE [-p N] [-n N] [-t N] [-r N]\n"
		   "  -m FILE  GGUF model\n"
		   "  -p N     prompt tokens for the prefill test (default 512, 0: skip)\n"
		   "  -n N     generated tokens for the decode test (default 128, 0: skip)\n"
		   "  -t N     compute threads (default 2)\n"
		   "  -r N     repetitions of each test (default 3)\n"
		   "  --device D  cpu (default: EMBER_DEVICE or cpu), vulkan, vulkan:N\n");
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int parse_args(int argc, char **argv, struct bench_args *a)
{
	int i;

	a->model = NULL;
	a->device = NULL;
	a->p = 512;
	a->n = 128;
	a->threads = 2;
	a->reps = 3;
	for (i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		long *num = NULL, lo = 0, hi = 1 << 16;
		char *end;

		if (strcmp(opt, "-h") == 0 || strcmp(opt, "--help") == 0) {
			bench_usage(stdout);
			return 1;
		}
		if (strncmp(opt, "--device=", 9) == 0) {
			a->device = opt + 9;
			continue;
		}
		if (!val) {
			fprintf(stderr, "ember bench: %s needs a value\n", opt);
			return -1;
		}
		if (strcmp(opt, "-m") == 0 || strcmp(opt, "--model") == 0) {
			a->model = val;
		} else if (strcmp(opt, "-p") == 0) {
			num = &a->p;
		} else if (strcmp(opt, "-n") == 0) {
			num = &a->n;
		} else if (strcmp(opt, "-t") == 0 || strcmp(opt, "--threads") == 0) {
			num = &a->threads, lo = 1, hi = 1024;
		} else if (strcmp(opt, "--device") == 0) {
			a->device = val;
		} else if (strcmp(opt, "-r") == 0) {
			num = &a->reps, lo = 1, hi = BENCH_MAX_REPS;
		} else {
			fprintf(stderr, "ember bench: unknown option %s\n", opt);
			return -1;
		}
		if (num) {
			errno = 0;
			*num = strtol(val, &end, 10);
			if (errno || end == val || *end || *num < lo || *num > hi) {
				fprintf(stderr, "ember bench: bad value for %s: %s\n", opt, val);
				return -1;
			}
		}
		i++;
	}
	if (!a->model) {
		bench_usage(stderr);
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Mean, sample standard deviation and median of v[0..n) (sorts v). */
static void stats(double *v, size_t n, double *mean, double *sd, double *median)
{
	double s = 0.0, ss = 0.0;
	size_t i;

	for (i = 0; i < n; i++)
		s += v[i];
	*mean = s / n;
	for (i = 0; i < n; i++)
		ss += (v[i] - *mean) * (v[i] - *mean);
	*sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	*median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t weight_bytes(const struct model_weight *w)
{
	if (!w->data || w->n_out <= 1)
		return 0; /* absent, or a vector (norm, bias) */
	return dtype_row_size(w->type, w->n_in) * w->n_out;
}

/* Bytes of weight matrices one decoded token streams: every layer's
 * matrices and the output head (token_embd only when the head is it). */
static uint64_t decode_bytes(const struct model *m)
{
	uint64_t total = weight_bytes(&m->w[ARCH_T_OUTPUT]);
	uint32_t il;
	int r;

	for (il = 0; il < m->hp.n_layer; il++)
		for (r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++)
			total += weight_bytes(&m->layers[il].w[r]);
	return total;
}

/* Seconds for one run of the test: p > 0 prefill, else n decode steps. */
static int run_once(struct dev_session *fw, const int32_t *ids, long p, long n, float *logits,
		    double *secs, char *err)
{
	double t0;
	long i;
	int rc;

	dev_session_rewind(fw, 0);
	t0 = clock_now_s();
	if (p > 0) {
		rc = dev_session_eval(fw, ids, (size_t)p, logits, 0, err);
	} else {
		for (i = 0, rc = 0; i < n && rc == 0; i++)
			rc = dev_session_eval(fw, &ids[i], 1, logits, 0, err);
	}
	*secs = clock_now_s() - t0;
	return rc;
}

/* One markdown row for a test of `tokens` tokens (prefill when p > 0). */
static int bench_test(struct dev_session *fw, const struct bench_args *a, const char *name,
		      const int32_t *ids, long p, long n, float *logits, uint64_t dbytes,
		      double fsize, char *err)
{
	double tps[BENCH_MAX_REPS], secs, mean, sd, median;
	long tokens = p > 0 ? p : n, r;
	int rc;

	if ((rc = run_once(fw, ids, p, n, logits, &secs, err)) < 0) /* warm-up */
		return rc;
	for (r = 0; r < a->reps; r++) {
		if ((rc = run_once(fw, ids, p, n, logits, &secs, err)) < 0)
			return rc;
		tps[r] = (double)tokens / secs;
	}
	stats(tps, (size_t)a->reps, &mean, &sd, &median);
	printf("| %.2f MiB | %s | %ld | %s%ld | %.2f ± %.2f | %.2f |", fsize / (1 << 20),
	       compute_device_vulkan() ? "vulkan" : cpu_level_name(kern_level()),
	       a->threads, name, tokens, mean, sd, median);
	if (p > 0)
		printf(" - | - |\n");
	else
		printf(" %.1f MB | %.1f |\n", dbytes / 1e6, dbytes * median / 1e9);
	fflush(stdout);
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_args a;
	struct engine_model *em = NULL;
	const struct model *mp;
	struct dev_session fw = {0};
	struct forward_opts o = {0};
	char err[EMBER_ERR_MAX] = "";
	int32_t *ids = NULL;
	float *logits = NULL;
	struct stat st;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	long i, n_ids;
	int rc = parse_args(argc, argv, &a);

	if (rc != 0)
		return rc < 0 ? 2 : 0;
	rc = 1;
	if (compute_device_select(a.device, err) < 0) {
		fprintf(stderr, "ember bench: %s\n", err);
		goto done;
	}
	if (compute_device_vulkan()) {
		char list[2048], name[256];

		fputs(compute_devices_describe(list, sizeof(list)), stdout);
		printf("device: %s\n", compute_device_name(name, sizeof(name)));
	}
	if (stat(a.model, &st) < 0 || engine_model_open(&em, a.model, NULL, err) < 0) {
		fprintf(stderr, "ember bench: %s: %s\n", a.model, err[0] ? err : strerror(errno));
		goto done;
	}
	mp = engine_model_weights(em);
	n_ids = a.p > a.n ? a.p : a.n;
	if (n_ids == 0) {
		rc = 0;
		goto done;
	}
	o.n_ctx = (uint32_t)n_ids;
	o.max_batch = (uint32_t)(a.p > 0 ? a.p : 1);
	o.n_threads = (uint32_t)a.threads;
	if (dev_session_new(&fw, mp, &o, err) < 0) {
		fprintf(stderr, "ember bench: %s\n", err);
		goto done;
	}
	ids = malloc((size_t)n_ids * sizeof(*ids));
	logits = malloc((size_t)mp->hp.n_vocab * sizeof(float));
	if (!ids || !logits) {
		fprintf(stderr, "ember bench: out of memory\n");
		goto done;
	}
	for (i = 0; i < n_ids; i++) { /* xorshift64: fixed pseudo-random ids */
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		ids[i] = (int32_t)(seed % mp->hp.n_vocab);
	}
	printf("| model size | kernels | threads | test | t/s (mean ± sd) | t/s median | "
	       "weights/token | decode GB/s |\n");
	printf("| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |\n");
	if (a.p > 0 && bench_test(&fw, &a, "pp", ids, a.p, 0, logits, 0, (double)st.st_size, err) < 0)
		goto fail_eval;
	if (a.n > 0 &&
	    bench_test(&fw, &a, "tg", ids, 0, a.n, logits, decode_bytes(mp), (double)st.st_size, err) < 0)
		goto fail_eval;
	rc = 0;
	goto done;
fail_eval:
	fprintf(stderr, "ember bench: %s\n", err);
done:
	free(logits);
	free(ids);
	dev_session_free(&fw);
	engine_model_free(em);
	return rc;
}
