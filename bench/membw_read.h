/* membw_read.h - the read patterns (variants) of the bandwidth bench
 * (bench/membw.c, which documents each by name): a table of functions
 * that sum n bytes from p, each with the pages and the way the threads
 * share the buffer it wants. membw_read.c owns the table; membw.c times
 * it. Any thread may call the functions (no state).
 */
#ifndef EMBER_BENCH_MEMBW_READ_H
#define EMBER_BENCH_MEMBW_READ_H

#include <stddef.h>
#include <stdint.h>

/* The sum of the n bytes at p (n a multiple of 64 KiB: every variant's
 * step divides it), so nothing is optimised away. */
typedef uint64_t (*membw_fn)(const char *p, size_t n);

/* A Q6_K row of n_in 2048, in bytes: the q6 variants' unit (and of the
 * -tok variants' matrices, membw.c). */
#define MEMBW_Q6_ROW 1680

struct membw_variant {
	const char *name;
	membw_fn fn;
	int avx512;   /* needs AVX-512F */
	int huge;     /* reads the buffer in 2 MiB pages */
	size_t chunk; /* 0: a share per thread; else alternate chunks */
	int tok;      /* the matrices of a decode token, a barrier after each */
};

/* The variants in the order they run and print; MEMBW_NVAR of them (a
 * constant: membw.c sizes its arrays by it; membw_read.c asserts it). */
#if defined(__x86_64__)
#define MEMBW_NVAR 30
#else
#define MEMBW_NVAR 1
#endif
extern const struct membw_variant membw_variants[MEMBW_NVAR];

/* 1 if this CPU can run the variant (u64 runs anywhere). */
int membw_runs(const struct membw_variant *mv);

#endif
