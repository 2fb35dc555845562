/*
 * pack_ab.c - decode's GEMV on K-quant weights in the file layout against
 * the same weights packed (kernels.h KERN_PACKED), alternated pass by
 * pass so both see the same minutes of a host whose bandwidth swings.
 *
 *   build/pack_ab [TYPE THREADS MIB PASSES N_TOK]   (q6_k 2 512 20 1)
 *
 * Two copies of MIB MiB of random blocks each (2048 -> 5632 matrices,
 * TinyLlama's MLP up shape), in 2 MiB pages where the kernel gives them;
 * one pass is an N_TOK-token kern_matmul() over every matrix of a copy
 * (N_TOK > 1: the prefill GEMM; keep MIB small, a pass costs N_TOK
 * times the arithmetic). Prints each layout's best and median GB/s (bytes
 * read / time: wall time, or the thread's CPU time at THREADS = 1, which
 * a shared machine distorts less) and the median of the pass-pair
 * ratios. Not a test: timings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "threadpool.h"

static clockid_t pa_clock = CLOCK_MONOTONIC;

static double pa_now(void)
{
	struct timespec ts;

	clock_gettime(pa_clock, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int pa_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void *pa_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, n, MADV_HUGEPAGE);
	return p;
}

int main(int argc, char **argv)
{
	const char *tn = argc > 1 ? argv[1] : "q6_k";
	const unsigned threads = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	const size_t mib = argc > 3 ? (size_t)atol(argv[3]) : 512;
	const int passes = argc > 4 ? atoi(argv[4]) : 20;
	const size_t n_tok = argc > 5 ? (size_t)atol(argv[5]) : 1;
	const size_t n_out = 5632, n_in = 2048;
	uint32_t t = strcmp(tn, "q4_k") == 0 ? DTYPE_Q4_K : strcmp(tn, "q5_k") == 0 ? DTYPE_Q5_K
										 : DTYPE_Q6_K;
	char err[EMBER_ERR_MAX];

	kern_init();
	const size_t mat = (size_t)dtype_row_size(t, n_in) * n_out;
	const size_t n_mat = mib * ((size_t)1 << 20) / mat;
	const uint32_t pt = kern_pack_type(t, n_out, n_in);
	uint8_t *w[2] = {pa_alloc(n_mat * mat), pa_alloc(n_mat * mat)};
	float *x = malloc(n_tok * n_in * sizeof(float)), *y = malloc(n_tok * n_out * sizeof(float));
	void *scratch = aligned_alloc(64, kern_matmul_scratch(t, n_in, n_tok) + 64);
	double *gb[2], *ratio;
	tpool_t pool = tpool_create(threads);
	unsigned s = 1;

	if (pt == t || !w[0] || !w[1] || !x || !y || !scratch || n_mat == 0) {
		fprintf(stderr, "pack_ab: %s not packed at this level, or out of memory\n", tn);
		return 1;
	}
	for (size_t i = 0; i < n_mat * mat; i++) {
		s = s * 1103515245u + 12345u;
		w[0][i] = (uint8_t)(s >> 16);
	}
	for (size_t i = 0; i < n_tok * n_in; i++)
		x[i] = (float)((int)(i * 37 % 101) - 50) / 25.0f;
	if (threads <= 1)
		pa_clock = CLOCK_THREAD_CPUTIME_ID;
	memcpy(w[1], w[0], n_mat * mat);
	for (size_t m = 0; m < n_mat; m++)
		if (kern_pack_rows(t, w[1] + m * mat, n_out, n_in, err) != 0) {
			fprintf(stderr, "pack_ab: %s\n", err);
			return 1;
		}
	gb[0] = calloc((size_t)passes, sizeof(double));
	gb[1] = calloc((size_t)passes, sizeof(double));
	ratio = calloc((size_t)passes, sizeof(double));
	for (int p = 0; p < passes; p++)
		for (int l = 0; l < 2; l++) {
			const int k = (p & 1) ? 1 - l : l; /* ABBA: neither always first */
			double t0 = pa_now();
			for (size_t m = 0; m < n_mat; m++)
				kern_matmul(pool, k ? pt : t, w[k] + m * mat, n_out, n_in, x, n_tok, y,
					    scratch);
			gb[k][p] = (double)(n_mat * mat) / (pa_now() - t0) / 1e9;
		}
	for (int p = 0; p < passes; p++)
		ratio[p] = gb[1][p] / gb[0][p];
	printf("pack_ab: %s, %u threads (%s time), %zu tokens, %zu matrices %zu x %zu (%.0f MiB a "
	       "copy), %d passes\n",
	       tn, threads, threads <= 1 ? "CPU" : "wall", n_tok, n_mat, n_out, n_in,
	       (double)(n_mat * mat) / (1 << 20), passes);
	for (int l = 0; l < 2; l++) {
		qsort(gb[l], (size_t)passes, sizeof(double), pa_cmp);
		printf("  %-6s best %6.1f GB/s  median %6.1f GB/s\n", l ? "packed" : "file",
		       gb[l][passes - 1], gb[l][passes / 2]);
	}
	qsort(ratio, (size_t)passes, sizeof(double), pa_cmp);
	printf("  packed / file, pass pairs: median %.3f (min %.3f, max %.3f)\n", ratio[passes / 2],
	       ratio[0], ratio[passes - 1]);
	tpool_destroy(pool);
	return 0;
}
