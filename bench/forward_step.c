/* forward_step.c - times one batched forward step, the unit of serving cost.
 *
 * Usage: forward_step MODEL [THREADS [PROMPT [STEPS [SEQS]]]]
 *
 * For B = 1, 2, 3, 4, 8, 16 sequences (each with its own F16 cache, as emberd's
 * workers keep them) it prefills PROMPT tokens per sequence, then times
 * STEPS decode steps that each evaluate one token of every sequence in one
 * forward_pass_run(), the way the scheduler batches them. Prints per step:
 * milliseconds, tokens/s (B per step), and the weight bytes read per second
 * (every weight matrix is read once per step whatever B is), so a decode
 * rate can be compared with the machine's memory bandwidth; and the
 * prefill rate of one PROMPT-token sequence. SEQS times only B = 1 and
 * B = SEQS (to profile one batch size). Best and median of STEPS.
 * Token ids are arbitrary: cost does not depend on them, so the
 * synthesized model serve_bench.sh uses is as good as a real one.
 *
 * "cpu ms" is the process CPU time of the median step (all threads): on a
 * shared machine, wall time measures the other jobs as much as Ember, and
 * with one thread CPU time is the steadier figure. The last column is the
 * median step over the 1-sequence one, the cost of batching (issue 17's
 * target: at most 1 + 0.15 B); "best cpu ms" and "cpu x 1" are the
 * least CPU time of a step and its ratio to the 1-sequence one (the
 * steadiest figures on a loaded machine); "cpu ms/tok" is that least CPU
 * time per sequence, to set beside the prefill's CPU time per prompt
 * token (last line: the prefill of the last batch size's first prompt).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "clock.h"
#include "dtype.h"
#include "ember.h"
#include "engine.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"

#define MAX_SEQ 16

/* Bytes of the matrices one decode step reads (token_embd only by row). */
static double weight_bytes(const struct model *m)
{
	double sum = 0;
	uint32_t i, l;
	const struct model_weight *w;

	for (i = 0; i < ARCH_T_FIRST_LAYER; i++) {
		w = &m->w[i];
		if (w->data && w->n_out > 1 && i != ARCH_T_TOKEN_EMBD)
			sum += (double)dtype_row_size(w->type, w->n_in) * w->n_out;
	}
	for (l = 0; l < m->hp.n_layer; l++)
		for (i = ARCH_T_FIRST_LAYER; i < ARCH_T_COUNT; i++) {
			w = &m->layers[l].w[i];
			if (w->data && w->n_out > 1)
				sum += (double)dtype_row_size(w->type, w->n_in) * w->n_out;
		}
	return sum;
}

/* Prefills every cache with n_prompt tokens; the seconds of the first. */
static int prefill(struct forward_pass *p, struct kv_cache *kv, int n_seq,
		   const int32_t *prompt, uint32_t n_prompt, double *first_s, double *first_cpu_s,
		   char *err)
{
	uint32_t chunk = forward_pass_max_batch(p), done;
	struct forward_seq s;
	double t0 = clock_now_s(), c0 = clock_cpu_s();
	int i, rc;

	for (i = 0; i < n_seq; i++) {
		kv_cache_truncate(&kv[i], 0);
		for (done = 0; done < n_prompt; done += s.n_tok) {
			s = (struct forward_seq){&kv[i], prompt + done,
						 n_prompt - done < chunk ? n_prompt - done : chunk,
						 FORWARD_LOGITS_NONE, false};
			if ((rc = forward_pass_run(p, &s, 1, NULL, err)) != 0)
				return rc;
		}
		if (i == 0) {
			*first_s = clock_now_s() - t0;
			*first_cpu_s = clock_cpu_s() - c0;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct engine_model *em = NULL;
	const struct model *mp = NULL;
	struct forward_pass *p = NULL;
	struct kv_cache kv[MAX_SEQ];
	struct forward_seq seqs[MAX_SEQ];
	struct forward_opts fo = {0};
	int32_t prompt[4096], tok[MAX_SEQ];
	double *t = NULL, *c = NULL, wb, pre_s = 0, pre_c = 0, t0, c0, one = 0, one_c = 0;
	char err[EMBER_ERR_MAX] = "";
	float *logits = NULL;
	uint32_t n_prompt, i;
	int n_threads, steps, b, k, s, only, rc = 1;

	memset(kv, 0, sizeof(kv));
	if (argc < 2) {
		fprintf(stderr, "usage: forward_step MODEL [THREADS [PROMPT [STEPS [SEQS]]]]\n");
		return 2;
	}
	n_threads = argc > 2 ? atoi(argv[2]) : 2;
	n_prompt = argc > 3 ? (uint32_t)atoi(argv[3]) : 100;
	steps = argc > 4 ? atoi(argv[4]) : 16;
	only = argc > 5 ? atoi(argv[5]) : 0;
	if (n_threads < 1 || n_prompt < 1 || n_prompt > 4000 || steps < 1 || steps > 10000 ||
	    only < 0 || only > MAX_SEQ) {
		fprintf(stderr, "forward_step: bad arguments\n");
		return 2;
	}
	if (engine_model_open(&em, argv[1], NULL, err) != 0)
		goto fail;
	mp = engine_model_weights(em);
	fo.n_threads = (uint32_t)n_threads;
	fo.max_batch = 64;
	t = malloc(sizeof(double) * (size_t)steps);
	c = malloc(sizeof(double) * (size_t)steps);
	logits = malloc(sizeof(float) * mp->hp.n_vocab * MAX_SEQ);
	if (t == NULL || c == NULL || logits == NULL || forward_pass_new(&p, mp, &fo, err) != 0)
		goto fail;
	for (b = 0; b < MAX_SEQ; b++)
		if (kv_cache_init(&kv[b], &mp->hp, n_prompt + (uint32_t)steps + 1,
				  DTYPE_F16, err) != 0)
			goto fail;
	for (i = 0; i < n_prompt; i++)
		prompt[i] = (int32_t)(1 + (i * 7919u) % (mp->hp.n_vocab - 1));
	wb = weight_bytes(mp);
	printf("weights read per decode step: %.1f MB; %d threads; prompt %u\n",
	       wb / 1e6, n_threads, n_prompt);
	printf("%4s %10s %10s %10s %12s %10s %8s %12s %8s %10s\n", "seqs", "best ms", "median ms",
	       "tok/s", "weights GB/s", "cpu ms", "x 1-seq", "best cpu ms", "cpu x 1", "cpu ms/tok");
	for (b = 1; b <= MAX_SEQ; b = b < 4 ? b + 1 : b * 2) {
		if (only != 0 && b != 1 && b != only)
			continue;
		if (prefill(p, kv, b, prompt, n_prompt, &pre_s, &pre_c, err) != 0)
			goto fail;
		for (s = 0; s < steps; s++) {
			for (k = 0; k < b; k++) {
				tok[k] = (int32_t)(1 + (s * 31u + (unsigned)k * 17u) % (mp->hp.n_vocab - 1));
				seqs[k] = (struct forward_seq){&kv[k], &tok[k], 1, FORWARD_LOGITS_LAST, false};
			}
			t0 = clock_now_s();
			c0 = clock_cpu_s();
			if (forward_pass_run(p, seqs, (uint32_t)b, logits, err) != 0)
				goto fail;
			c[s] = clock_cpu_s() - c0;
			t[s] = clock_now_s() - t0;
		}
		bench_sort(t, (size_t)steps);
		bench_sort(c, (size_t)steps);
		if (b == 1) {
			one = t[steps / 2];
			one_c = c[0];
		}
		printf("%4d %10.1f %10.1f %10.2f %12.2f %10.1f %8.2f %12.1f %8.2f %10.2f\n", b,
		       t[0] * 1e3, t[steps / 2] * 1e3, b / t[steps / 2], wb / t[steps / 2] / 1e9,
		       c[steps / 2] * 1e3, t[steps / 2] / one, c[0] * 1e3, c[0] / one_c,
		       c[0] * 1e3 / b);
	}
	printf("prefill of one %u-token prompt (chunks of %u): %.3f s, %.1f tok/s, %.2f cpu ms/tok\n",
	       n_prompt, forward_pass_max_batch(p), pre_s, n_prompt / pre_s,
	       pre_c * 1e3 / n_prompt);
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "forward_step: %s\n", err);
	for (b = 0; b < MAX_SEQ; b++)
		kv_cache_free(&kv[b]);
	forward_pass_free(p);
	free(logits);
	free(t);
	free(c);
	engine_model_free(em);
	return rc;
}
