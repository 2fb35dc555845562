/* membw.c - the machine's streaming read bandwidth, to set decode rates
 * against (issue 17: decode >= 85% of it).
 *
 *   build/membw [THREADS [MIB [REPS [VARIANT,...]]]]   (2 1024 7 all)
 *   build/membw --spin                             (SMT check, below)
 *
 * Each thread reads its own contiguous share of a MIB-mebibyte buffer
 * (far larger than the caches), summed so nothing is optimised away; the
 * buffer is touched first so no page fault is timed. One number cannot
 * say what the machine streams: a single stream of 8-byte loads leaves
 * bandwidth unused on some CPUs, while a GEMV reads 4-16 rows side by
 * side with software prefetch. So several read patterns (variants, in
 * membw_read.c) run, alternated pass by pass so all see the same machine
 * load:
 *
 *   u64        one stream, 8-byte loads, 4 sums (the original figure)
 *   ymm        one stream, 32-byte loads, 4 vector sums
 *   zmm        one stream, 64-byte loads, 4 vector sums (AVX-512 CPUs)
 *   ymm-pf1k   ymm + software prefetch into L2, 1 KiB ahead
 *   ymm-pf4k   ymm + prefetch into L2, 4 KiB ahead
 *   rows4      4 rows of 4 KiB side by side, 32 bytes of each in turn
 *              (an F16 GEMV tile of width 2048)
 *   rows16     16 rows of 1152 bytes side by side (a Q4_0 GEMV tile of
 *              width 2048)
 *   rows16-pf  rows16 + the next tile prefetched into L2 as this one
 *              is read (what the Q4_0 tile does)
 *   rows16-pf2 the same, two tiles ahead
 *   rows16p-pf2 the same bytes as packed Q4_0 rows (kernels.h
 *              KERN_PACKED): a tile is one linear stream of 288-byte
 *              blocks (16 rows' block b), the tile two ahead prefetched
 *              block for block (qv__prefetch_ahead)
 *   rows4-pf   rows4 + the next tile prefetched into L2
 *   seg4       rows of 4 KiB one after another, each read as 4 segments
 *              of 1 KiB side by side (a one-row GEMV, one accumulator per
 *              segment)
 *   zmm-il64k  zmm, but the threads take alternate 64 KiB chunks of the
 *              whole buffer instead of a share each (llama.cpp's mul_mat
 *              hands 16-row chunks out from one counter, so its threads
 *              read neighbouring addresses at once)
 *   q6rows     a Q6_K one-token GEMV's reads (kz_q6_rows, n_in 2048): 4
 *              rows of 1680 bytes side by side, a 210-byte super-block of
 *              each in turn, the same super-block 16 rows on prefetched
 *              into L2 (kg_prefetch_rows); -nopf without the prefetch,
 *              -lin with the group 16 rows on prefetched as one linear
 *              stream instead
 *   q6lin      the same loads, each row whole before the next (one stream
 *              a thread), no software prefetch
 *   q6far      the same loads from 4 rows a quarter of the share apart (4
 *              long streams), no software prefetch
 *   *-w        with ~22 cycles of arithmetic per row and super-block
 *              between the loads (the body's pace, not the core's issue
 *              rate)
 *   *-tok      one TinyLlama Q6_K decode token: its 89 matrices (848.5 MB)
 *              in order, each thread its share of each, a spinning
 *              barrier after each matrix (the pool's join)
 *   *-2m       the same pattern over a second buffer in 2 MiB pages
 *              (madvise MADV_HUGEPAGE; the line "2 MiB pages" says how
 *              much of it the kernel gave): Ember's weights live in such
 *              pages (engine/format/gguf_map.h). The others read 4 KiB
 *              pages, where a page walk every 4 KiB and prefetchers that
 *              stop at page ends cost a third of the rate on a Zen 4.
 *
 * Prints, per variant, the best and median GB/s over REPS passes (wall
 * time, all threads; in brackets the same bytes over the slowest thread's
 * CPU time, a rate while running that a loaded machine distorts less but
 * which cannot tell whether both threads ran at once), then the machine's
 * streaming bandwidth, the one decode is compared with: the variant with
 * the best median over the even passes (0, 2, ...), and its median over
 * the odd passes (1, 3, ...), which took no part in the choice. Why held
 * out: twenty-odd variants stream within a few percent of each other, so
 * the best of their medians over all passes is the luckiest one, biased
 * up by the noise (twelfth session, LEVELS.md "dec12": up to ~1 GB/s,
 * 5%, on a shared host). REPS >= 2 for a held-out figure (1: the one pass). Off x86-64 only u64 runs.
 * VARIANT runs only the ones named (a comma-separated list). Not a test: a timing. On a shared
 * machine, run it in the same minutes as the benchmark it is compared
 * with; medians say more than bests there.
 *
 * --spin answers whether the vCPUs are separate cores or SMT siblings:
 * it times a compute-bound loop (dependent integer multiply-adds, no
 * memory) on 1 thread, then on 2 pinned to CPUs 0 and 1, per second of
 * each thread's CPU time (a loaded machine takes wall time away, not the
 * rate while running). Four chains of a 3-cycle multiply and an add keep
 * a core's one 64-bit multiplier busy every cycle: separate cores keep
 * the per-thread rate at 2 threads, SMT siblings of one core lose about
 * half of it whenever both run.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "clock.h"
#include "membw_read.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MEMBW_MAX_THREADS 64
#define MEMBW_MAX_REPS 64

/* The matrices of a TinyLlama Q6_K decode token in the order they are
 * read, in rows of MEMBW_Q6_ROW bytes (down's 2048 rows of 4620 bytes
 * as 5632 of 1680): per layer q|k|v, o, up|gate, down; then output.
 * 848.5 MB. The -tok variants read them as one token does: each thread
 * its share of each matrix, then wait for the other threads (a spinning
 * barrier, as the pool's join), then the next matrix. */
static const size_t membw_tok_layer[4] = {2560, 2048, 11264, 5632};
#define MEMBW_TOK_LAYERS 22
#define MEMBW_TOK_OUTPUT 32000

static size_t membw_tok_rows(size_t i)
{
	return i < 4 * MEMBW_TOK_LAYERS ? membw_tok_layer[i % 4] : MEMBW_TOK_OUTPUT;
}

#define MEMBW_TOK_MATS (4 * MEMBW_TOK_LAYERS + 1)

#define MEMBW_HUGE ((size_t)2 << 20)

/* `bytes` of anonymous memory, 2 MiB aligned, advised for 2 MiB pages
 * (huge) or against them (so the 4 KiB figures stay 4 KiB ones under THP
 * "always"); written once so no page fault is timed. NULL if none. */
static char *membw_alloc(size_t bytes, int huge)
{
	char *p;
#if defined(__linux__)
	char *m = mmap(NULL, bytes + MEMBW_HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)m + MEMBW_HUGE - 1) & ~(uintptr_t)(MEMBW_HUGE - 1));
	(void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
	(void)huge;
	p = aligned_alloc(64, bytes);
	if (p == NULL)
		return NULL;
#endif
	for (size_t i = 0; i < bytes / 8; i++)
		((uint64_t *)p)[i] = i;
	return p;
}

/* MiB of anonymous memory in huge pages (the 2 MiB buffer's, as the
 * other is advised against them); -1 if unknown. */
static long membw_huge_mib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[128];
	long kb = -1;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

struct membw_part {
	membw_fn fn;
	const char *p;
	size_t n;     /* bytes from p this thread reads (chunk 0) or spans */
	size_t chunk; /* 0: all n; else `chunk` bytes every `stride` */
	size_t stride;
	pthread_barrier_t *start;
	uint64_t sum;
	double cpu_s; /* the thread's CPU time for its share */
	double t0, t1; /* wall clock at its start and end */
	int tok;      /* read a token's matrices from p (membw_tok_rows) */
	int idx, nth; /* this thread, of nth */
	atomic_uint *bar_n, *bar_gen; /* the spinning barrier after each matrix */
};

/* Waits until all nth threads arrive (spinning, as the pool's join does
 * between decode's loops). */
static void membw_barrier(atomic_uint *n, atomic_uint *gen, unsigned nth)
{
	unsigned g = atomic_load_explicit(gen, memory_order_acquire);

	if (atomic_fetch_add_explicit(n, 1, memory_order_acq_rel) + 1 == nth) {
		atomic_store_explicit(n, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(gen, 1, memory_order_release);
		return;
	}
	while (atomic_load_explicit(gen, memory_order_acquire) == g) {
#if defined(__x86_64__)
		_mm_pause();
#endif
	}
}

/* One decode token's matrices, this thread's share of each (whole 4-row
 * groups, 64-byte aligned), a barrier after each. */
static uint64_t membw_read_tok(const struct membw_part *m)
{
	uint64_t sum = 0;
	size_t off = 0;

	for (size_t i = 0; i < MEMBW_TOK_MATS; i++) {
		const size_t g = membw_tok_rows(i) / 4;
		const size_t g0 = g * (size_t)m->idx / (size_t)m->nth;
		const size_t g1 = g * (size_t)(m->idx + 1) / (size_t)m->nth;
		sum += m->fn(m->p + off + g0 * 4 * MEMBW_Q6_ROW, (g1 - g0) * 4 * MEMBW_Q6_ROW);
		off += g * 4 * MEMBW_Q6_ROW;
		membw_barrier(m->bar_n, m->bar_gen, (unsigned)m->nth);
	}
	return sum;
}

static size_t membw_tok_bytes(void)
{
	size_t b = 0;

	for (size_t i = 0; i < MEMBW_TOK_MATS; i++)
		b += membw_tok_rows(i) * MEMBW_Q6_ROW;
	return b;
}

static void *membw_read(void *arg)
{
	struct membw_part *m = arg;

	struct timespec a, b;

	pthread_barrier_wait(m->start);
	m->t0 = clock_now_s();
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
	if (m->tok)
		m->sum = membw_read_tok(m);
	else if (m->chunk == 0)
		m->sum = m->fn(m->p, m->n);
	else
		for (size_t o = 0; o + m->chunk <= m->n; o += m->stride)
			m->sum += m->fn(m->p + o, m->chunk);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
	m->t1 = clock_now_s();
	m->cpu_s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9;
	return NULL;
}

/* 1 if `name` is in the comma-separated `list` ("all": every variant). */
static int membw_listed(const char *list, const char *name)
{
	const size_t n = strlen(name);

	if (strcmp(list, "all") == 0)
		return 1;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		const size_t k = e ? (size_t)(e - p) : strlen(p);
		if (k == n && strncmp(p, name, n) == 0)
			return 1;
		p += k + (e != NULL);
	}
	return 0;
}

static int membw_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of the passes r = first, first + 2, ... of t[0..reps) (t not
 * sorted: pass order). */
static double membw_median_every(const double *t, int reps, int first)
{
	double s[MEMBW_MAX_REPS];
	size_t n = 0;

	for (int r = first; r < reps; r += 2)
		s[n++] = t[r];
	qsort(s, n, sizeof(double), membw_cmp);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* GB one pass of mv reads. */
static double membw_gb(const struct membw_variant *mv, size_t share, int threads)
{
	return mv->tok ? (double)membw_tok_bytes() / 1e9 : (double)share * threads / 1e9;
}

/* One pass of `mv` over the buffer on `threads` threads: wall seconds
 * from the first thread's start to the last one's end, as the threads
 * clock them (under chrt -f the workers hold both CPUs and this thread
 * ran only after one had finished: 500-2000 "GB/s"); *cpu gets the
 * longest thread's CPU seconds. share * threads bytes are read, in a
 * share per thread or (mv->chunk) in alternate chunks. */
static double membw_pass(const struct membw_variant *mv, const char *buf, size_t share,
			 int threads, uint64_t *sum, double *cpu)
{
	pthread_t th[MEMBW_MAX_THREADS];
	struct membw_part part[MEMBW_MAX_THREADS];
	pthread_barrier_t start;
	atomic_uint bar_n = 0, bar_gen = 0;
	double t0 = 0, t1 = 0;

	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		size_t c = mv->chunk;
		if (mv->tok)
			part[i] = (struct membw_part){.fn = mv->fn, .p = buf, .start = &start,
						      .tok = 1, .idx = i, .nth = threads,
						      .bar_n = &bar_n, .bar_gen = &bar_gen};
		else if (c == 0)
			part[i] = (struct membw_part){.fn = mv->fn, .p = buf + (size_t)i * share,
						      .n = share, .start = &start};
		else
			part[i] = (struct membw_part){.fn = mv->fn, .p = buf + (size_t)i * c,
						      .n = share * (size_t)threads - (size_t)i * c,
						      .chunk = c, .stride = c * (size_t)threads,
						      .start = &start};
		pthread_create(&th[i], NULL, membw_read, &part[i]);
	}
	pthread_barrier_wait(&start);
	*cpu = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		*sum += part[i].sum;
		if (part[i].cpu_s > *cpu)
			*cpu = part[i].cpu_s;
		if (i == 0 || part[i].t0 < t0)
			t0 = part[i].t0;
		if (i == 0 || part[i].t1 > t1)
			t1 = part[i].t1;
	}
	pthread_barrier_destroy(&start);
	return t1 - t0;
}

/* ---- SMT check ----------------------------------------------------------------- */

struct membw_spin {
	int cpu;
	uint64_t iters, out;
	double s;
};

static void *membw_spin_run(void *arg)
{
	struct membw_spin *m = arg;
	cpu_set_t set;
	uint64_t a = 1, b = 3, c = 5, d = 7;
	struct timespec t0, t1;

	CPU_ZERO(&set);
	CPU_SET(m->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	/* four independent multiply-add chains: the integer multiplier of a
	 * core is busy every cycle, so an SMT sibling would halve the rate */
	for (uint64_t i = 0; i < m->iters; i++) {
		a = a * 0x9E3779B97F4A7C15ull + i;
		b = b * 0xC2B2AE3D27D4EB4Full + i;
		c = c * 0x165667B19E3779F9ull + i;
		d = d * 0x27D4EB2F165667C5ull + i;
		__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	m->s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	m->out = a ^ b ^ c ^ d;
	return NULL;
}

static int membw_spin_check(void)
{
	const uint64_t iters = 400000000ull;

	for (int n = 1; n <= 2; n++) {
		pthread_t th[2];
		struct membw_spin m[2];

		for (int i = 0; i < n; i++) {
			m[i] = (struct membw_spin){i, iters, 0, 0};
			pthread_create(&th[i], NULL, membw_spin_run, &m[i]);
		}
		for (int i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < n; i++)
			printf("spin: %d thread(s), cpu %d: %.2f G mul-add chains per CPU second "
			       "(%llu)\n",
			       n, i,
			       4.0 * iters / m[i].s / 1e9, (unsigned long long)(m[i].out & 0xff));
	}
	printf("spin: separate cores keep each thread's rate at 2 threads; SMT siblings of "
	       "one core lose it\n");
	return 0;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 2;
	long mib = argc > 2 ? atol(argv[2]) : 1024;
	int reps = argc > 3 ? atoi(argv[3]) : 7;
	const char *only = argc > 4 ? argv[4] : "all";
	int run[MEMBW_NVAR], best_v = -1, sel_v = -1, any = 0, any_huge = 0;
	double t[MEMBW_NVAR][MEMBW_MAX_REPS], c[MEMBW_NVAR][MEMBW_MAX_REPS], ho[MEMBW_NVAR];
	double best_gb = 0, sel_gb = 0;
	size_t bytes, share;
	uint64_t sum = 0;
	char *buf, *hbuf = NULL;

	if (argc > 1 && strcmp(argv[1], "--spin") == 0)
		return membw_spin_check();
	if (threads < 1 || threads > MEMBW_MAX_THREADS || mib < 16 || mib > 65536 || reps < 1 ||
	    reps > MEMBW_MAX_REPS) {
		fprintf(stderr, "usage: membw [THREADS [MIB [REPS [VARIANT]]]] | membw --spin\n");
		return 2;
	}
	for (size_t v = 0; v < MEMBW_NVAR; v++) {
		const struct membw_variant *mv = &membw_variants[v];
		run[v] = membw_listed(only, mv->name) &&
			 membw_runs(mv) && (!mv->tok || membw_tok_bytes() <= ((size_t)mib << 20));
		any |= run[v];
		any_huge |= run[v] && mv->huge;
	}
	if (!any) {
		fprintf(stderr, "membw: no variant '%s' runs on this CPU\n", only);
		return 2;
	}
	bytes = (size_t)mib << 20;
	/* a multiple of every variant's step (16 and 18 KiB tiles, 64 KiB
	 * chunks) */
	share = bytes / (size_t)threads / (576 * 1024) * (576 * 1024);
	buf = membw_alloc(bytes, 0);
	if (buf != NULL && any_huge)
		hbuf = membw_alloc(bytes, 1);
	if (buf == NULL || (any_huge && hbuf == NULL)) {
		fprintf(stderr, "membw: out of memory\n");
		return 1;
	}
	/* variants alternate within each round, so a burst of load from
	 * other processes hits all of them alike */
	for (int r = 0; r < reps; r++)
		for (size_t v = 0; v < MEMBW_NVAR; v++)
			if (run[v])
				t[v][r] = membw_pass(&membw_variants[v],
						     membw_variants[v].huge ? hbuf : buf, share,
						     threads, &sum, &c[v][r]);
	printf("membw: %d threads, %ld MiB, %d passes each (checksum %llu)\n", threads, mib, reps,
	       (unsigned long long)(sum & 0xff));
	if (any_huge)
		printf("membw: 2 MiB pages: %ld of %ld MiB of the -2m buffer\n", membw_huge_mib(),
		       mib);
	for (size_t v = 0; v < MEMBW_NVAR; v++) {
		double gb = membw_gb(&membw_variants[v], share, threads), med, even;
		if (!run[v])
			continue;
		even = gb / membw_median_every(t[v], reps, 0);
		ho[v] = gb / membw_median_every(t[v], reps, reps > 1);
		qsort(t[v], (size_t)reps, sizeof(double), membw_cmp);
		qsort(c[v], (size_t)reps, sizeof(double), membw_cmp);
		med = gb / t[v][reps / 2];
		printf("  %-15s best %6.1f GB/s  median %6.1f GB/s   (CPU time: best %6.1f, median "
		       "%6.1f)\n",
		       membw_variants[v].name, gb / t[v][0], med, gb / c[v][0], gb / c[v][reps / 2]);
		if (med > best_gb) {
			best_gb = med;
			best_v = (int)v;
		}
		if (even > sel_gb) {
			sel_gb = even;
			sel_v = (int)v;
		}
	}
	printf("membw: the best median over all passes: %.1f GB/s (variant %s; biased up by the "
	       "choice)\n",
	       best_gb, membw_variants[best_v].name);
	printf("membw: %d threads, %ld MiB: best %.1f GB/s, median %.1f GB/s (variant %s, the "
	       "best median of the even passes; median of the odd passes, held out)\n",
	       threads, mib, membw_gb(&membw_variants[sel_v], share, threads) / t[sel_v][0],
	       ho[sel_v], membw_variants[sel_v].name);
	/* the buffers go with the process */
	return 0;
}
