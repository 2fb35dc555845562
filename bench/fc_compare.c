/*
 * fc_compare.c - re-measures the choice recorded in kernels.c: for an F32
 * fully-connected layer (the prefill GEMM of an F32 model), our kernel
 * (kern_matmul) against XNNPACK's xnn_create_fully_connected_nc_f32 from
 * Debian's 2022 build, same shapes, same thread count (XNNPACK on pthreadpool, Ember on its own pool).
 *
 *   build/fc_compare [N_TOK N_IN N_OUT THREADS REPS]   (512 2048 2048 2 5)
 *
 * Prints the median GFLOP/s of each, XNNPACK's one-time packing cost, and
 * the largest relative difference of their outputs. Not a test: timings.
 */
#include <math.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <xnnpack.h>

#include "bench_util.h"
#include "clock.h"
#include "dtype.h"
#include "kernels.h"

int main(int argc, char **argv)
{
	size_t n_tok = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
	size_t n_in = argc > 2 ? strtoul(argv[2], NULL, 10) : 2048;
	size_t n_out = argc > 3 ? strtoul(argv[3], NULL, 10) : 2048;
	size_t threads = argc > 4 ? strtoul(argv[4], NULL, 10) : 2;
	int reps = argc > 5 ? atoi(argv[5]) : 5, r, rc = 1;
	float *w = malloc(n_in * n_out * sizeof(float)), *x = malloc(n_tok * n_in * sizeof(float));
	float *y0 = malloc(n_tok * n_out * sizeof(float)), *y1 = malloc(n_tok * n_out * sizeof(float));
	size_t scratch_len = kern_matmul_scratch(DTYPE_F32, n_in, n_tok), i;
	void *scratch = scratch_len ? aligned_alloc(64, scratch_len) : NULL;
	pthreadpool_t pool = pthreadpool_create(threads); /* XNNPACK's */
	tpool_t ours = tpool_create((uint32_t)threads);
	xnn_operator_t op = NULL;
	double t_ours[64], t_xnn[64], t0, pack, flop = 2.0 * n_tok * n_in * n_out, maxrel = 0;
	uint64_t seed = 42;

	if (!w || !x || !y0 || !y1 || (scratch_len && !scratch) || !pool || !ours || reps < 1 || reps > 64 ||
	    n_tok == 0 || n_in == 0 || n_out == 0) {
		fprintf(stderr, "fc_compare: bad arguments or out of memory\n");
		goto out;
	}
	for (i = 0; i < n_in * n_out; i++)
		w[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
	for (i = 0; i < n_tok * n_in; i++)
		x[i] = (float)((seed = seed * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
	kern_init();
	if (xnn_initialize(NULL) != xnn_status_success) {
		fprintf(stderr, "fc_compare: xnn_initialize failed\n");
		goto out;
	}
	t0 = clock_now_s();
	if (xnn_create_fully_connected_nc_f32(n_in, n_out, n_in, n_out, w, NULL, -INFINITY, INFINITY, 0,
					      &op) != xnn_status_success ||
	    xnn_setup_fully_connected_nc_f32(op, n_tok, x, y1, pool) != xnn_status_success) {
		fprintf(stderr, "fc_compare: XNNPACK operator setup failed\n");
		goto out;
	}
	pack = clock_now_s() - t0;
	for (r = 0; r < reps; r++) {
		t0 = clock_now_s();
		kern_matmul(ours, DTYPE_F32, w, n_out, n_in, x, n_tok, y0, scratch);
		t_ours[r] = clock_now_s() - t0;
		t0 = clock_now_s();
		xnn_run_operator(op, pool);
		t_xnn[r] = clock_now_s() - t0;
	}
	for (i = 0; i < n_tok * n_out; i++) {
		double d = fabs((double)y0[i] - y1[i]) / (fabs((double)y1[i]) + 1e-3);
		maxrel = d > maxrel ? d : maxrel;
	}
	bench_sort(t_ours, (size_t)reps);
	bench_sort(t_xnn, (size_t)reps);
	printf("shape %zu x %zu -> %zu, %zu threads, kernels %s, median of %d\n", n_tok, n_in, n_out,
	       threads, cpu_level_name(kern_level()), reps);
	printf("ember kern_matmul f32: %8.1f GFLOP/s\n", flop / t_ours[reps / 2] / 1e9);
	printf("XNNPACK FC nc_f32:     %8.1f GFLOP/s (+ %.1f ms to pack the weights once)\n",
	       flop / t_xnn[reps / 2] / 1e9, pack * 1e3);
	printf("ratio ember/XNNPACK:   %8.2f; max relative difference %.2e\n",
	       t_xnn[reps / 2] / t_ours[reps / 2], maxrel);
	rc = 0;
out:
	if (op)
		xnn_delete_operator(op);
	pthreadpool_destroy(pool);
	tpool_destroy(ours);
	free(w);
	free(x);
	free(y0);
	free(y1);
	free(scratch);
	return rc;
}
