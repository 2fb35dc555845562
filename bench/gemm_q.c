/*
 * gemm_q.c - times kern_matmul() on quantized (or f16/bf16/f32) weights for the matrix shapes
 * of a TinyLlama-sized layer (2048 -> 2048, 2048 -> 5632, 5632 -> 2048),
 * to tune the prefill GEMM (n_tok >= 2) and the decode GEMV (n_tok = 1).
 *
 *   build/gemm_q [TYPE N_TOK THREADS REPS [N_OUT N_IN]]   (q4_0 64 1 20; TYPE any
 *   with kernels; N_OUT N_IN: that one shape instead, e.g. 64 2048 to stay in L2;
 *   TYPE+p, e.g. q4_0p: the rows packed as the model load packs them,
 *   kernels.h KERN_PACKED, where the level has the packed form)
 *
 * Weights are random, quantized once with kern_quantize_row(); the same
 * matrix is reused, so for one token this measures cache bandwidth, not
 * DRAM. One thread is timed in thread CPU time (steadier on a shared
 * machine), more in wall time. Prints the best and median GFLOP/s per
 * shape. Prefill tokens (n_tok >= 2) are prompt rows (kern_matmul_n_split
 * with none exact: the AMX level's bf16 tiles where on, EMBER_AMX_BF16=0
 * for its int8 tiles); one token is a decode step's. Not a test: timings.
 *
 * GEMM_Q_ROWS=R (q4_0 / q8_0 / q4_k / q6_k, 2+ tokens, R and N_OUT multiples of 16,
 * where the AMX bf16 tiles are on): times the bf16 GEMM itself in calls of R rows, the way a pool of
 * two threads hands it a prefill's rows (kernels.c: about n_out / 32 rows
 * a chunk, at least 64 in prefill while each thread gets one: e.g. 64 of
 * 2048 and of TinyLlama's 256-row k and v, 176 of 5632), one thread; the activation tiles are made once, outside the timing,
 * as kern_matmul's quantizing tasks make them. A whole-matrix call reads
 * the activations from L3 once per row block (512 rows at 512 tokens), a 64-row call once
 * (LEVELS.md, amxg12).
 *
 * GEMM_Q_GLU=1 (with GEMM_Q_ROWS; N_OUT N_IN e.g. 5632 2048): the MLP's
 * gate|up shape, two matrices of that shape over the same tokens, as the
 * paired calls (kern_amxbf_glu: one A pass, silu(gate) * up into the down
 * product's bf16 tiles); GEMM_Q_GLU=0: the unpaired path it replaces, the
 * two products' calls into y, then kern_silu_mul_bf16 from y into the same
 * tiles (the down job's pre task). GFLOP/s count both products.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "threadpool.h"

#if defined(__x86_64__)
/* GEMM_Q_ROWS: the bf16 GEMM on the (packed: mt) matrix in calls of rows
 * rows, reps times; the best and median seconds in dt[0], dt[reps / 2]
 * (sorted). 0, or -1 where the bf16 tiles are not on for this type. */
static int time_bf16_rows(uint32_t mt, const char *w, size_t n_out, size_t n_in, const float *x,
			  size_t n_tok, float *y, size_t rows, int reps, double *dt)
{
	const uint32_t t = mt & ~KERN_PACKED;
	const int packed = (mt & KERN_PACKED) != 0;
	void (*fn)(const struct kern_gemm_args *, size_t, size_t) =
		t == DTYPE_Q8_0	  ? (packed ? kern_amxbf_pgemm_q8_0 : kern_amxbf_gemm_q8_0)
		: t == DTYPE_Q4_K ? (packed ? kern_amxbf_pgemm_q4_k : kern_amxbf_gemm_q4_k)
		: t == DTYPE_Q6_K ? (packed ? kern_amxbf_pgemm_q6_k : kern_amxbf_gemm_q6_k)
				  : (packed ? kern_amxbf_pgemm_q4_0 : kern_amxbf_gemm_q4_0);
	const size_t mp = kern_amxbf_tokens(n_tok);
	uint16_t *xb;
	struct kern_gemm_args a = {
		.w = w, .w_stride = (size_t)dtype_row_size(t, n_in), .n_in = n_in, .n_tok = n_tok,
		.y = y, .y_stride = n_out, .xf = x, .xf_stride = n_in,
	};

	/* rows on 16s: a row tail would take the int8 path, which reads the
	 * int8 activation blocks this does not make */
	if (!kern_amxbf_on || (t != DTYPE_Q8_0 && t != DTYPE_Q4_0 && t != DTYPE_Q4_K && t != DTYPE_Q6_K) || n_tok < 2 || rows == 0 ||
	    rows % 16 != 0 || n_out % 16 != 0)
		return -1;
	xb = aligned_alloc(64, mp * n_in * sizeof(uint16_t));
	if (!xb)
		return -1;
	for (size_t k = 0; k < mp; k++)
		kern_amxbf_act_row(k < n_tok ? x + k * n_in : NULL, n_in, k, xb);
	a.xb = xb;
	const char *glu = getenv("GEMM_Q_GLU");
	const size_t wb = (size_t)dtype_row_size(t, n_in) * n_out;
	char *w2 = glu ? malloc(wb) : NULL; /* gate: a second matrix */
	float *y2 = glu ? malloc(n_out * n_tok * sizeof(float)) : NULL;
	uint16_t *ob = glu ? aligned_alloc(64, mp * n_out * sizeof(uint16_t)) : NULL;
	struct kern_gemm_args g = a;

	if (glu && (!w2 || !y2 || !ob)) {
		free(w2), free(y2), free(ob), free(xb);
		return -1;
	}
	if (glu) {
		memcpy(w2, w, wb);
		g.w = w2;
		g.y = y2;
	}
	for (int r = -1; r < reps; r++) { /* the first: warm-up */
		double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);

		for (size_t o = 0; o < n_out; o += rows) {
			const size_t o1 = o + rows < n_out ? o + rows : n_out;

			if (glu && atoi(glu) == 1) {
				if (kern_amxbf_glu(mt, &a, &g, o, o1, ob) != 0)
					abort();
			} else {
				fn(&a, o, o1);
				if (glu)
					fn(&g, o, o1);
			}
		}
		if (glu && atoi(glu) != 1)
			for (size_t k = 0; k < n_tok; k++)
				kern_silu_mul_bf16(y + k * n_out, y2 + k * n_out, n_out,
						   kern_amxbf_row(ob, n_out, k), KERN_BF16_ROW_STEP);
		if (r >= 0)
			dt[r] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	free(w2), free(y2), free(ob);
	free(xb);
	bench_sort(dt, (size_t)reps);
	return 0;
}
#endif

static float rnd(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

int main(int argc, char **argv)
{
	size_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}}; /* out, in */
	size_t n_shapes = sizeof(shapes) / sizeof(shapes[0]);
	const char *tname = argc > 1 ? argv[1] : "q4_0";
	size_t n_tok = argc > 2 ? strtoul(argv[2], NULL, 10) : 64;
	size_t threads = argc > 3 ? strtoul(argv[3], NULL, 10) : 1;
	int reps = argc > 4 ? atoi(argv[4]) : 20;
	char base[32];
	size_t tl = strlen(tname);
	const int packed = tl > 1 && tl < sizeof(base) && tname[tl - 1] == 'p';
	int tn;
	uint32_t t;

	snprintf(base, sizeof(base), "%.*s", (int)(packed ? tl - 1 : tl), tname);
	tn = dtype_from_name(base); /* any type with kernels: q4_k, q6_k, ... */
	t = tn < 0 ? DTYPE_Q4_0 : (uint32_t)tn;
	clockid_t clk = threads > 1 ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
	tpool_t pool = threads > 1 ? tpool_create(threads) : NULL;
	unsigned seed = 1;
	int rc = 1;

	if (argc > 6) {
		shapes[0][0] = strtoul(argv[5], NULL, 10);
		shapes[0][1] = strtoul(argv[6], NULL, 10);
		n_shapes = 1;
	}

	if (tn < 0 || !kern_supports(t) || n_tok == 0 || reps <= 0 || (threads > 1 && !pool)) {
		fprintf(stderr, "usage: gemm_q [TYPE (q4_0, q8_0, q4_k, q6_k, f16...) N_TOK THREADS REPS]\n");
		return 2;
	}
	kern_init();
	if (packed && !kern_supports(t | KERN_PACKED)) {
		fprintf(stderr, "gemm_q: the %s level has no packed %s\n", cpu_level_name(kern_level()),
			base);
		return 2;
	}
	for (size_t s = 0; s < n_shapes; s++) {
		size_t n_out = shapes[s][0], n_in = shapes[s][1];
		size_t row = dtype_row_size(t, n_in);
		float *wf = malloc(n_in * sizeof(float));
		float *x = malloc(n_in * n_tok * sizeof(float));
		float *y = malloc(n_out * n_tok * sizeof(float));
		/* on 64 bytes, as a model's weights are on the format's 32 at
		 * worst: malloc() put them 16 past a line, or anywhere after a
		 * free raised its mmap threshold, so a shape's ZMM loads each
		 * straddled two lines or not by chance (packed Q6_K at 8
		 * tokens 294 against 338 GFLOP/s, LEVELS.md q6t22) */
		char *w = aligned_alloc(64, (row * n_out + 63) & ~(size_t)63);
		const uint32_t mt = packed ? kern_pack_type(t, n_out, n_in) : t;
		void *scratch = aligned_alloc(64, (kern_matmul_scratch(mt, n_in, n_tok) + 63) & ~(size_t)63);
		char err[EMBER_ERR_MAX];
		double *dt = malloc((size_t)reps * sizeof(double));

		if (!wf || !x || !y || !w || !scratch || !dt)
			goto next;
		for (size_t o = 0; o < n_out; o++) {
			for (size_t i = 0; i < n_in; i++)
				wf[i] = rnd(&seed);
			kern_quantize_row(t, wf, w + o * row, n_in);
		}
		if (packed && kern_pack_rows(t, w, n_out, n_in, err) != 0) {
			fprintf(stderr, "gemm_q: %s\n", err);
			goto next;
		}
		for (size_t i = 0; i < n_in * n_tok; i++)
			x[i] = rnd(&seed);
		const struct kern_mm_part part = {w, n_out, y, 0};
		const size_t n_exact = n_tok == 1; /* decode: exact; prefill: prompt rows */

		if (getenv("GEMM_Q_ROWS")) {
			const size_t rows = strtoul(getenv("GEMM_Q_ROWS"), NULL, 10);
			int got = -1;
#if defined(__x86_64__)
			got = time_bf16_rows(mt, w, n_out, n_in, x, n_tok, y, rows, reps, dt);
#endif
			if (got != 0) {
				fprintf(stderr, "gemm_q: GEMM_Q_ROWS needs the AMX bf16 tiles, "
						"q4_0, q8_0, q4_k or q6_k, 2+ tokens, rows on 16s\n");
				goto next;
			}
			double flop = 2.0 * (double)n_out * (double)n_in * (double)n_tok *
				      (getenv("GEMM_Q_GLU") ? 2 : 1);
			printf("%s%s %5zu x %5zu  n_tok %4zu  calls of %zu rows:  best %6.1f  median "
			       "%6.1f GFLOP/s\n",
			       tname,
			       getenv("GEMM_Q_GLU") ? (atoi(getenv("GEMM_Q_GLU")) == 1 ? " glu paired"
										: " glu unpaired")
						    : "",
			       n_out, n_in, n_tok, rows, flop / dt[0] * 1e-9,
			       flop / dt[reps / 2] * 1e-9);
			rc = 0;
			goto next;
		}

		kern_matmul_n_split(pool, mt, n_in, &part, 1, x, n_tok, n_exact, scratch, NULL, NULL,
				    1); /* warm up */
		for (int r = 0; r < reps; r++) {
			double t0 = bench_clock_s(clk);
			kern_matmul_n_split(pool, mt, n_in, &part, 1, x, n_tok, n_exact, scratch, NULL,
					    NULL, 1);
			dt[r] = bench_clock_s(clk) - t0;
		}
		bench_sort(dt, (size_t)reps);
		double flop = 2.0 * (double)n_out * (double)n_in * (double)n_tok;
		printf("%s %5zu x %5zu  n_tok %4zu  threads %zu:  best %6.1f  median %6.1f GFLOP/s\n",
		       tname, n_out, n_in, n_tok, threads, flop / dt[0] * 1e-9,
		       flop / dt[reps / 2] * 1e-9);
		rc = 0;
next:
		free(wf);
		free(x);
		free(y);
		free(w);
		free(scratch);
		free(dt);
	}
	tpool_destroy(pool);
	return rc;
}
