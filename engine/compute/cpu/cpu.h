/*
 * cpu.h - what the processor can do, detected once at start-up.
 *
 * Kernels are compiled per ISA in their own files (engine/compute/cpu/kernels/NAME_avx2.c,
 * NAME_avx512.c, ...) and one of them is chosen from these features
 * (STYLE.md rule 8). Each CPU architecture has its own list of levels,
 * lowest first (cpu_levels(): x86-64 scalar, avx2, avx512, amx; AArch64
 * scalar, neon, dotprod, i8mm), and a level is usable when the CPU has its
 * features and those of every level before it in that list. The environment
 * variable EMBER_CPU=<level name> caps the level, so tests can run every
 * path on one machine; it can only lower the level, never claim features
 * the CPU lacks (a name from another architecture's list is ignored).
 *
 * Thread safety: cpu_detect() is pure; call it from any thread.
 */
#ifndef EMBER_CPU_H
#define EMBER_CPU_H

#include <stddef.h>

struct cpu_features {
	unsigned avx2 : 1;        /* AVX2 + FMA + F16C, and the OS saves YMM */
	unsigned avx512 : 1;      /* AVX-512 F/BW/VL/DQ, and the OS saves ZMM */
	unsigned avx512_vnni : 1; /* VPDPBUSD on 512-bit registers */
	unsigned avx512_bf16 : 1; /* VDPBF16PS */
	unsigned avx_vnni : 1;    /* VEX-encoded VPDPBUSD (Alder Lake, Zen 5) */
	unsigned neon : 1;
	unsigned neon_dotprod : 1;
	/* AMX-TILE + AMX-INT8 + AMX-BF16 in CPUID and the tile state enabled
	 * in XCR0; a process must still ask the kernel for it (arch_prctl). */
	unsigned amx : 1;
	unsigned neon_i8mm : 1;
};

/* Kernel levels. The values only name levels; their order within one
 * architecture is cpu_levels()'s, not the enum's. */
enum cpu_level {
	CPU_LEVEL_SCALAR = 0,
	CPU_LEVEL_AVX2 = 1,
	CPU_LEVEL_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI */
	CPU_LEVEL_AMX = 3,    /* AVX-512 + AMX int8 tiles (kernels_amx.c) */
	CPU_LEVEL_NEON = 4,   /* AArch64: baseline Advanced SIMD */
	/* NEON + dot product (HWCAP asimddp), then + int8 matrix multiply
	 * (HWCAP2 i8mm): README, ARM64. */
	CPU_LEVEL_DOTPROD = 5,
	CPU_LEVEL_I8MM = 6,
	CPU_LEVEL_COUNT
};

/* The levels of the architecture this was built for, lowest first;
 * returns their count and points *list at them. */
size_t cpu_levels(const enum cpu_level **list);

/* 1 if `f` has what `level` needs (its own features and those of every
 * level before it in cpu_levels()); 0 for a level of another architecture. */
int cpu_level_usable(const struct cpu_features *f, enum cpu_level level);

/* Fills `f` from CPUID/XGETBV (x86) or the auxiliary vector (ARM). */
void cpu_detect(struct cpu_features *f);

/* Fills `f` from Linux's AArch64 auxiliary-vector masks (AT_HWCAP: asimd
 * bit 1, asimddp bit 20; AT_HWCAP2: i8mm bit 13). cpu_detect() calls it
 * with getauxval()'s on AArch64; tests call it with made-up masks on any
 * host. */
void cpu_features_from_hwcap(struct cpu_features *f, unsigned long hwcap, unsigned long hwcap2);

/* Returns the best level `f` supports, lowered by EMBER_CPU when set. An
 * EMBER_CPU naming no level of this architecture is ignored, with a line
 * on stderr naming the variable and the levels it may name. Kernels may
 * stop lower (kern_init(): a level with no table built). */
enum cpu_level cpu_select_level(const struct cpu_features *f);

/* Parses EMBER_CPU: returns a level, or -1 when unset, or -2 when unknown. */
int cpu_level_from_env(void);

const char *cpu_level_name(enum cpu_level level);

/* Writes e.g. "AVX2 FMA F16C" or "AVX2 AVX-512 VNNI" (features present),
 * NUL-terminated, truncated to `len`. Returns `buf`. */
char *cpu_describe(const struct cpu_features *f, char *buf, size_t len);

#endif
