/* decode_prof.c - where a one-token decode step's time goes.
 *
 * Usage: decode_prof MODEL [THREADS [STEPS [SEQS]]]
 *
 * Times, over STEPS alternated rounds (so both see the same machine load):
 *   step    one whole decode step (forward_pass_run, SEQS sequences (1 by
 *           default) of one token each, 100 tokens of context each, as bench/forward_step), as
 *           the server runs it;
 *   matmul  only the step's matrix products, in the step's order and
 *           grouping (q|k|v, o, up|gate, down per layer, then output),
 *           SEQS tokens, on a pool of the same size: the weight streaming
 *           (one token) or the small-batch GEMM (several).
 * Prints wall and process CPU milliseconds (best, median) of each, the
 * weight bytes per second, and the rest (step - matmul): norms, RoPE,
 * attention, the activation, the joins they add. On a shared machine,
 * CPU time with one thread is the steadier figure; compare with
 * build/membw run in the same minutes. Not a test: a timing.
 *
 * DECODE_PROF_JOBS=1 adds a table of the matmul pass by job (q|k|v, o,
 * gate|up, down, output) and weight type (a mixed file such as Q4_K_M
 * puts Q6_K on some v and down matrices and the output): jobs of that
 * kind and type per step, the median over steps of their summed wall
 * time (the activation's quantization task included, as in a step), the
 * median per job, MB a step and GB/s. Run it beside `build/membw 2 1024
 * 7` (and under `chrt -f 10` on a shared machine, LEVELS.md).
 *
 * DECODE_PROF_ATTN=1 adds the step's decode attention alone: in the
 * matmul pass, after each layer's q|k|v product, attention_run() of that
 * layer for the SEQS sequences (one query each at position 100, their
 * prompt's F16 caches), so its cache rows are as cold as in a step (the
 * weights streamed since it last read them); the queries are fixed
 * values, no RoPE or cache write. Its wall time is printed as `attn`
 * and left out of matmul's wall columns (not its CPU ones), so `rest -
 * attn` is the step's norms, activations, RoPE, cache writes and the
 * joins they add (LEVELS.md att22).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "bench_util.h"
#include "clock.h"
#include "dtype.h"
#include "ember.h"
#include "engine.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "model.h"
#include "threadpool.h"

#define PROF_CTX 100
#define PROF_SEQS 16
/* DECODE_PROF_JOBS: kinds of job x weight types kept apart */
#define PROF_KINDS 5
#define PROF_TYPES 4

static const char *const prof_kind[PROF_KINDS] = {"q|k|v", "o", "gate|up", "down", "output"};

/* One (kind, type) row of the job table: per step, summed seconds. */
struct prof_row {
	uint32_t type;
	double bytes; /* a step's */
	size_t jobs;  /* a step's */
	double *sec;  /* [steps] */
};

static struct prof_row prof_rows[PROF_KINDS][PROF_TYPES];
static int prof_on;

/* DECODE_PROF_ATTN: the attention run beside the products (matmuls()). */
static struct {
	int on;
	struct attention a;
	struct attention_tile tiles[PROF_SEQS];
	uint32_t n_tiles;
	double *sec; /* [steps], wall */
} prof_attn;

static double wbytes(const struct model_weight *w)
{
	return w->data ? (double)dtype_row_size(w->type, w->n_in) * w->n_out : 0.0;
}

/* One group of same-input matrices, as forward.c's linear_n() calls it. */
static double group(tpool_t pool, const struct model_weight *const w[], size_t n, const float *x,
		    float *y, void *scratch, size_t n_tok)
{
	struct kern_mm_part parts[KERN_MM_PARTS_MAX];
	size_t k = 0, off = 0;
	double bytes = 0;

	for (size_t i = 0; i < n; i++) {
		if (!w[i]->data)
			continue;
		parts[k++] = (struct kern_mm_part){w[i]->data, w[i]->n_out, y + off,
						   w[i]->type | w[i]->packed};
		off += w[i]->n_out * n_tok;
		bytes += wbytes(w[i]);
	}
	if (k)
		kern_matmul_n(pool, w[0]->type | w[0]->packed, w[0]->n_in, parts, k, x, n_tok,
			      scratch);
	return bytes;
}

/* group(), timed into the job table's row of its kind and type when
 * DECODE_PROF_JOBS is set (step s). Matrices of different types (q|k|v
 * of Q4_K_M: v is Q6_K in some layers) are one job where they share the
 * activations (kern_mm_parts_share), counted in the first one's type's
 * row, else one job each, as forward_linear.c's forward_linear_n() runs
 * them (until call21 they were always apart: Q4_K_M's 10 separate v
 * jobs a step made the matmul pass ~0.3 ms slower than the step's). */
static double prof_group(int kind, int s, tpool_t pool, const struct model_weight *const w[],
			 size_t n, const float *x, float *y, void *scratch, size_t n_tok)
{
	double t0, bytes = 0;
	struct prof_row *r = NULL;

	for (size_t i = 1; i < n; i++)
		if (w[i]->data && w[0]->data &&
		    !kern_mm_parts_share(w[0]->type | w[0]->packed, w[i]->type | w[i]->packed,
					 w[0]->n_in)) {
			for (size_t j = 0; j < n; j++)
				bytes += prof_group(kind, s, pool, &w[j], 1, x, y, scratch, n_tok);
			return bytes;
		}
	if (!prof_on || !w[0]->data)
		return group(pool, w, n, x, y, scratch, n_tok);
	for (int i = 0; i < PROF_TYPES && !r; i++)
		if (prof_rows[kind][i].sec == NULL || prof_rows[kind][i].type == w[0]->type)
			r = &prof_rows[kind][i];
	t0 = clock_now_s();
	bytes = group(pool, w, n, x, y, scratch, n_tok);
	if (r && r->sec) {
		r->sec[s] += clock_now_s() - t0;
		if (s == 0) {
			r->bytes += bytes;
			r->jobs++;
		}
	}
	return bytes;
}

static double matmuls(const struct model *m, tpool_t pool, const float *x, float *y, void *scratch,
		      size_t n_tok, int s)
{
	double bytes = 0;

	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct model_weight *W = m->layers[l].w;
		const struct model_weight *qkv[] = {&W[ARCH_T_ATTN_Q], &W[ARCH_T_ATTN_K], &W[ARCH_T_ATTN_V]};
		const struct model_weight *o[] = {&W[ARCH_T_ATTN_OUT]};
		const struct model_weight *ug[] = {&W[ARCH_T_FFN_UP], &W[ARCH_T_FFN_GATE]};
		const struct model_weight *d[] = {&W[ARCH_T_FFN_DOWN]};

		bytes += prof_group(0, s, pool, qkv, 3, x, y, scratch, n_tok);
		if (prof_attn.on) { /* x as the queries, y as the output */
			const double t0 = clock_now_s();

			attention_run(&prof_attn.a, pool, l, prof_attn.tiles, prof_attn.n_tiles, x, y);
			prof_attn.sec[s] += clock_now_s() - t0;
		}
		bytes += prof_group(1, s, pool, o, 1, x, y, scratch, n_tok);
		bytes += prof_group(2, s, pool, ug, 2, x, y, scratch, n_tok);
		bytes += prof_group(3, s, pool, d, 1, x, y, scratch, n_tok);
	}
	{
		const struct model_weight *out[] = {&m->w[ARCH_T_OUTPUT]};
		bytes += prof_group(4, s, pool, out, 1, x, y, scratch, n_tok);
	}
	return bytes;
}

/* The job table's rows a step can fill: one per (kind, type) seen in the
 * model, each with its per-step times; -1 when out of memory. */
static int prof_setup(const struct model *m, int steps)
{
	const struct model_weight *out = &m->w[ARCH_T_OUTPUT];
	/* every matrix of each kind (-1: none) */
	const int parts[PROF_KINDS - 1][3] = {{ARCH_T_ATTN_Q, ARCH_T_ATTN_K, ARCH_T_ATTN_V},
					      {ARCH_T_ATTN_OUT, -1, -1},
					      {ARCH_T_FFN_UP, ARCH_T_FFN_GATE, -1},
					      {ARCH_T_FFN_DOWN, -1, -1}};

	for (int k = 0; k < PROF_KINDS; k++)
		for (uint32_t l = 0; l < (k < PROF_KINDS - 1 ? m->hp.n_layer : 1) * 3; l++) {
			const int part = k < PROF_KINDS - 1 ? parts[k][l % 3] : (l ? -1 : 0);
			const struct model_weight *w =
				k < PROF_KINDS - 1 ? &m->layers[l / 3].w[part < 0 ? 0 : part] : out;
			int i = 0;

			if (part < 0)
				continue;

			if (!w->data)
				continue;
			while (i < PROF_TYPES && prof_rows[k][i].sec && prof_rows[k][i].type != w->type)
				i++;
			if (i == PROF_TYPES || prof_rows[k][i].sec)
				continue;
			prof_rows[k][i].type = w->type;
			if ((prof_rows[k][i].sec = calloc((size_t)steps, sizeof(double))) == NULL)
				return -1;
		}
	return 0;
}

static void prof_print(int steps)
{
	printf("%-8s %-6s %5s %10s %9s %9s %8s\n", "job", "type", "jobs", "ms (med)", "us/job",
	       "MB", "GB/s");
	for (int k = 0; k < PROF_KINDS; k++)
		for (int i = 0; i < PROF_TYPES; i++) {
			struct prof_row *r = &prof_rows[k][i];
			double med;

			if (!r->sec || !r->jobs)
				continue;
			bench_sort(r->sec, (size_t)steps);
			med = r->sec[steps / 2];
			printf("%-8s %-6s %5zu %10.3f %9.1f %9.1f %8.2f\n", prof_kind[k],
			       dtype_name(r->type), r->jobs, med * 1e3, med * 1e6 / (double)r->jobs,
			       r->bytes / 1e6, r->bytes / med / 1e9);
		}
}

int main(int argc, char **argv)
{
	struct engine_model *em = NULL;
	const struct model *mp = NULL;
	struct forward_pass *p = NULL;
	struct kv_cache kv[PROF_SEQS];
	struct forward_seq sq[PROF_SEQS];
	struct forward_opts fo = {0};
	int32_t prompt[PROF_CTX], tok[PROF_SEQS];
	double *t[4] = {NULL, NULL, NULL, NULL}, bytes = 0;
	char err[EMBER_ERR_MAX] = "";
	float *logits = NULL, *x = NULL, *y = NULL;
	void *scratch = NULL;
	tpool_t pool = NULL;
	int n_threads, steps, n_seq, s, rc = 1;

	memset(kv, 0, sizeof(kv));
	if (argc < 2) {
		fprintf(stderr, "usage: decode_prof MODEL [THREADS [STEPS [SEQS]]]\n");
		return 2;
	}
	n_threads = argc > 2 ? atoi(argv[2]) : 1;
	steps = argc > 3 ? atoi(argv[3]) : 20;
	n_seq = argc > 4 ? atoi(argv[4]) : 1;
	if (n_threads < 1 || steps < 1 || steps > 100000 || n_seq < 1 || n_seq > PROF_SEQS) {
		fprintf(stderr, "decode_prof: bad arguments\n");
		return 2;
	}
	if (engine_model_open(&em, argv[1], NULL, err) != 0)
		goto fail;
	mp = engine_model_weights(em);
	fo.n_threads = (uint32_t)n_threads;
	fo.max_batch = PROF_CTX;
	for (int i = 0; i < 4; i++)
		if ((t[i] = malloc(sizeof(double) * (size_t)steps)) == NULL)
			goto fail;
	logits = malloc(sizeof(float) * mp->hp.n_vocab * (size_t)n_seq);
	x = calloc(65536 * (size_t)n_seq, sizeof(float));
	y = calloc(((size_t)mp->hp.n_vocab + 65536) * (size_t)n_seq, sizeof(float));
	scratch = aligned_alloc(64, 1 << 20);
	pool = tpool_create((uint32_t)n_threads);
	prof_on = getenv("DECODE_PROF_JOBS") != NULL && atoi(getenv("DECODE_PROF_JOBS")) > 0;
	if (prof_on && prof_setup(mp, steps) != 0)
		goto fail;
	prof_attn.on = getenv("DECODE_PROF_ATTN") != NULL && atoi(getenv("DECODE_PROF_ATTN")) > 0;
	if (prof_attn.on &&
	    ((prof_attn.sec = calloc((size_t)steps, sizeof(double))) == NULL ||
	     attention_init(&prof_attn.a, &mp->hp, mp->arch->alibi, err) != 0))
		goto fail;
	if (!logits || !x || !y || !scratch || !pool || forward_pass_new(&p, mp, &fo, err) != 0)
		goto fail;
	for (int i = 0; i < PROF_CTX; i++)
		prompt[i] = 1 + (i * 7919) % (int)(mp->hp.n_vocab - 1);
	for (int i = 0; i < 65536 * n_seq; i++)
		x[i] = 0.01f * (float)(i % 17);
	for (int q = 0; q < n_seq; q++) {
		struct forward_seq pq = {&kv[q], prompt, PROF_CTX, FORWARD_LOGITS_NONE, false};

		if (kv_cache_init(&kv[q], &mp->hp, PROF_CTX + 8, DTYPE_F16, err) != 0 ||
		    forward_pass_run(p, &pq, 1, NULL, err) != 0)
			goto fail;
		sq[q] = (struct forward_seq){&kv[q], &tok[q], 1, FORWARD_LOGITS_LAST, false};
		/* the decode tile a step attends with: row q, position PROF_CTX */
		if (prof_attn.on)
			prof_attn.n_tiles += attention_plan(&prof_attn.tiles[q], &kv[q], (uint32_t)q,
							    PROF_CTX, 1);
	}
	if (prof_attn.on)
		attention_set_window(&prof_attn.a, mp->arch, mp->hp.n_swa);
	for (s = 0; s < steps; s++) {
		double t0 = clock_now_s(), c0 = clock_cpu_s();

		for (int q = 0; q < n_seq; q++)
			tok[q] = 1 + (s * 31 + q * 7) % (int)(mp->hp.n_vocab - 1);
		if (forward_pass_run(p, sq, (uint32_t)n_seq, logits, err) != 0)
			goto fail;
		t[0][s] = clock_now_s() - t0;
		t[1][s] = clock_cpu_s() - c0;
		for (int q = 0; q < n_seq; q++)
			kv_cache_truncate(&kv[q], PROF_CTX);
		t0 = clock_now_s();
		c0 = clock_cpu_s();
		bytes = matmuls(mp, pool, x, y, scratch, (size_t)n_seq, s);
		t[2][s] = clock_now_s() - t0;
		t[3][s] = clock_cpu_s() - c0;
		/* the products' wall time alone (the process CPU of an
		 * 80 us call is not resolved: matmul's CPU keeps it) */
		if (prof_attn.on)
			t[2][s] -= prof_attn.sec[s];
	}
	for (int i = 0; i < 4; i++)
		bench_sort(t[i], (size_t)steps);
	printf("decode_prof: %d threads, %d steps, %d sequences, weights %.1f MB a step\n",
	       n_threads, steps, n_seq, bytes / 1e6);
	printf("%-7s %9s %9s %9s %9s %12s\n", "", "wall best", "wall med", "cpu best", "cpu med",
	       "GB/s (med)");
	printf("%-7s %9.2f %9.2f %9.2f %9.2f %12.2f\n", "step", t[0][0] * 1e3, t[0][steps / 2] * 1e3,
	       t[1][0] * 1e3, t[1][steps / 2] * 1e3, bytes / t[0][steps / 2] / 1e9);
	printf("%-7s %9.2f %9.2f %9.2f %9.2f %12.2f\n", "matmul", t[2][0] * 1e3,
	       t[2][steps / 2] * 1e3, t[3][0] * 1e3, t[3][steps / 2] * 1e3,
	       bytes / t[2][steps / 2] / 1e9);
	printf("%-7s %9.2f %9.2f %9.2f %9.2f\n", "rest", (t[0][0] - t[2][0]) * 1e3,
	       (t[0][steps / 2] - t[2][steps / 2]) * 1e3, (t[1][0] - t[3][0]) * 1e3,
	       (t[1][steps / 2] - t[3][steps / 2]) * 1e3);
	if (prof_attn.on) {
		bench_sort(prof_attn.sec, (size_t)steps);
		printf("%-7s %9.2f %9.2f   (wall; rest - attn %.2f med)\n", "attn",
		       prof_attn.sec[0] * 1e3, prof_attn.sec[steps / 2] * 1e3,
		       (t[0][steps / 2] - t[2][steps / 2] - prof_attn.sec[steps / 2]) * 1e3);
	}
	if (prof_on)
		prof_print(steps);
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "decode_prof: %s\n", err);
	for (int q = 0; q < PROF_SEQS; q++)
		kv_cache_free(&kv[q]);
	forward_pass_free(p);
	tpool_destroy(pool);
	free(scratch);
	free(x);
	free(y);
	free(logits);
	for (int i = 0; i < 4; i++)
		free(t[i]);
	free(prof_attn.sec);
	attention_free(&prof_attn.a);
	for (int k = 0; k < PROF_KINDS; k++)
		for (int i = 0; i < PROF_TYPES; i++)
			free(prof_rows[k][i].sec);
	engine_model_free(em);
	return rc;
}
