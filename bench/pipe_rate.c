/*
 * pipe_rate.c - the issue rate of the instruction mixes the AVX-512 VNNI
 * product tiles are made of, in core cycles, so a kernel's GFLOP/s can be
 * set against its floor on the CPU at hand (LEVELS.md, "The 8-token
 * step's floor", nineteenth session; issue 17's batched-decode target).
 *
 *   build/pipe_rate [MILLIONS]   (iterations, default 20)
 *
 * A "unit" is what one token costs a 16-row tile for one 32-element
 * block: 8 VPDPBUSD on ZMM (16 rows x 32 int8 products). Each mix runs
 * 16 units an iteration over 8 independent accumulator chains (more than
 * VPDPBUSD's latency times its rate, so only throughput counts) and
 * prints cycles per unit and the GFLOP/s ceiling per core it implies
 * (2 x 512 operations a unit). The mixes are the per-block float and
 * integer steps of kernels_qvnni_avx512.c (Q4_0/Q8_0: float(S), dw*dx,
 * one FMA per block and token: the batch must equal the one-token GEMV
 * bit for bit, so the multiply cannot be hoisted) and of the K-quant tiles
 * (an integer scale a sub-block: VPMULLD or VPDPWSSD).
 *
 * Cycles come from a calibration against a chain of dependent scalar adds
 * (one cycle each on every x86 core since the P6), so the figure is in
 * the core's clock whatever turbo does, not the TSC's. Not a test:
 * timings, x86-64 with AVX512-VNNI only (elsewhere it says so and exits 0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "bench_util.h"

/* Thread CPU time: the helpers' builds beside a run take the core away,
 * not cycles from the mix. */
static double now_s(void)
{
	return bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* ns per core cycle: 64 dependent adds an iteration, one cycle each. */
static double pipe_ns_per_cycle(long n)
{
	unsigned long x = 1;
	double t0 = now_s();

	for (long i = 0; i < n; i++)
		__asm__ volatile(".rept 64\n\tadd %0, %0\n\t.endr" : "+r"(x));
	return (now_s() - t0) * 1e9 / ((double)n * 64);
}

/* Eight accumulator chains as named registers (an array indexed in a
 * loop can be kept on the stack, which would time the stores). */
#define PIPE_ALL(op) op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7)
#define PIPE_DECL(i)                                                                           \
	__m512i a##i = _mm512_setzero_si512();                                                \
	__m512 f##i = _mm512_setzero_ps();
#define PIPE_DP(i) a##i = _mm512_dpbusd_epi32(a##i, w, x);
#define PIPE_KEEP(i) __asm__ volatile("" : "+v"(a##i), "+v"(f##i));
#define PIPE_SUM(i) sink += _mm512_reduce_add_ps(f##i) + (float)_mm512_reduce_add_epi32(a##i);

/* The extras of one unit on chain i (k: which of its two an iteration).
 * The per-token scale comes from memory, as the tiles' broadcast of dx. */
#define X_NONE(i, k)
#define X_CVT_FMA(i, k) f##i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a##i), s, f##i);
#define X_Q4_0(i, k)                                                                           \
	f##i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a##i),                                      \
			       _mm512_mul_ps(s, _mm512_set1_ps(xd[2 * (i) + (k)])), f##i);
#define X_MULLD(i, k) a##i = _mm512_mullo_epi32(a##i, _mm512_set1_epi32(xs[2 * (i) + (k)]));
#define X_DPWSSD(i, k) a##i = _mm512_dpwssd_epi32(a##i, w, _mm512_set1_epi32(xs[2 * (i) + (k)]));

/* 16 units an iteration: 128 VPDPBUSD over the 8 chains, then each
 * chain's two units' extras. Returns seconds. */
#define PIPE_FN(name, X)                                                                       \
	static __attribute__((noinline)) double name(long n, const float *xd, const int *xs)  \
	{                                                                                      \
		__m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);                      \
		__m512 s = _mm512_set1_ps(1.0001f);                                            \
		volatile float sink = 0;                                                       \
		double t0;                                                                     \
		PIPE_ALL(PIPE_DECL)                                                            \
		(void)xd;                                                                      \
		__asm__ volatile("" : "+v"(s)); /* a vector, as dw: no scalar multiply */    \
		(void)xs;                                                                      \
		t0 = now_s();                                                                  \
		for (long it = 0; it < n; it++) {                                              \
			PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) \
			PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) \
			PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) \
			PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) PIPE_ALL(PIPE_DP) \
			X(0, 0) X(1, 0) X(2, 0) X(3, 0) X(4, 0) X(5, 0) X(6, 0) X(7, 0)         \
			X(0, 1) X(1, 1) X(2, 1) X(3, 1) X(4, 1) X(5, 1) X(6, 1) X(7, 1)         \
			PIPE_ALL(PIPE_KEEP)                                                    \
			__asm__ volatile("" ::: "memory"); /* reload xd, xs */                \
		}                                                                              \
		t0 = now_s() - t0;                                                             \
		PIPE_ALL(PIPE_SUM)                                                             \
		return t0;                                                                     \
	}

PIPE_FN(pipe_mix_vnni, X_NONE)
PIPE_FN(pipe_mix_cvt_fma, X_CVT_FMA)
PIPE_FN(pipe_mix_q4_0, X_Q4_0)
PIPE_FN(pipe_mix_mulld, X_MULLD)
PIPE_FN(pipe_mix_dpwssd, X_DPWSSD)

/* 16 "units" of 8 FMAs an iteration over the 8 float chains. */
static __attribute__((noinline)) double pipe_mix_fma(long n, const float *xd, const int *xs)
{
	__m512 s = _mm512_set1_ps(1.0001f), d = _mm512_set1_ps(0.5f);
	volatile float sink = 0;
	double t0;

	PIPE_ALL(PIPE_DECL)
	(void)xd;
	(void)xs;
	t0 = now_s();
	for (long it = 0; it < n; it++) {
		for (int u = 0; u < 16; u++) {
#define PIPE_FM(i) f##i = _mm512_fmadd_ps(f##i, s, d);
			PIPE_ALL(PIPE_FM)
			PIPE_ALL(PIPE_KEEP)
		}
	}
	t0 = now_s() - t0;
	PIPE_ALL(PIPE_SUM)
	return t0;
}

static const struct {
	const char *name;
	double (*run)(long n, const float *xd, const int *xs);
	double ops; /* operations a unit: 512 int8 multiply-adds, or 8 FMAs */
} pipe_mixes[] = {
	{"8 vpdpbusd", pipe_mix_vnni, 1024},
	{"8 vpdpbusd + cvt + fma (dw*dx hoisted)", pipe_mix_cvt_fma, 1024},
	{"8 vpdpbusd + cvt + mul + fma (Q4_0/Q8_0)", pipe_mix_q4_0, 1024},
	{"8 vpdpbusd + vpmulld (K-quant scale)", pipe_mix_mulld, 1024},
	{"8 vpdpbusd + vpdpwssd", pipe_mix_dpwssd, 1024},
	{"8 vfmadd (f32, 16 lanes)", pipe_mix_fma, 256},
};

int main(int argc, char **argv)
{
	long n = (argc > 1 ? atol(argv[1]) : 20) * 100000;
	float xd[16];
	int xs[16];
	double ns;

	if (n <= 0) {
		fprintf(stderr, "usage: pipe_rate [MILLIONS]\n");
		return 2;
	}
	if (!__builtin_cpu_supports("avx512vnni")) {
		printf("pipe_rate: this CPU has no AVX512-VNNI; nothing to measure\n");
		return 0;
	}
	for (int i = 0; i < 16; i++) {
		xd[i] = 1.0f + (float)i / 64;
		xs[i] = 1 + i % 3;
	}
	ns = pipe_ns_per_cycle(n * 4);
	printf("core clock %.2f GHz (dependent adds); cycles per unit (16 rows x 32 int8 x 1 "
	       "token), one thread, best of 3\n",
	       1.0 / ns);
	for (size_t m = 0; m < sizeof(pipe_mixes) / sizeof(pipe_mixes[0]); m++) {
		double best = 1e30, cyc;

		for (int r = 0; r < 3; r++) {
			double t = pipe_mixes[m].run(n, xd, xs);

			best = t < best ? t : best;
		}
		cyc = best * 1e9 / ns / ((double)n * 16);
		printf("  %-42s %6.2f cycles/unit  ceiling %6.1f GFLOP/s a core\n",
		       pipe_mixes[m].name, cyc, pipe_mixes[m].ops / cyc / ns);
	}
	return 0;
}
#else
int main(void)
{
	printf("pipe_rate: x86-64 only; nothing to measure\n");
	return 0;
}
#endif
