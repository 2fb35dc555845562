/* cpu.c - CPU feature detection (see cpu.h). */
#include "cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "env.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long cpu__xgetbv(void)
{
	unsigned eax, edx;

	/* Raw opcode so this file needs no -mxsave. */
	__asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
	return ((unsigned long long)edx << 32) | eax;
}

void cpu_detect(struct cpu_features *f)
{
	unsigned a, b, c, d, max;
	int osxsave, fma, f16c, ymm_ok = 0, zmm_ok = 0;

	memset(f, 0, sizeof(*f));
	max = __get_cpuid_max(0, NULL);
	if (max < 1)
		return;
	__cpuid(1, a, b, c, d);
	osxsave = (c >> 27) & 1;
	fma = (c >> 12) & 1;
	f16c = (c >> 29) & 1;
	if (osxsave) {
		unsigned long long xcr0 = cpu__xgetbv();
		/* The kernel must save XMM+YMM (bits 1,2) and, for AVX-512, the
		 * opmask and both ZMM halves (bits 5,6,7); otherwise using the
		 * registers corrupts state across context switches. */
		ymm_ok = (xcr0 & 0x6) == 0x6;
		zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
	}
	if (max < 7)
		return;
	__cpuid_count(7, 0, a, b, c, d);
	/* AMX-BF16, -TILE, -INT8 are EDX bits 22, 24, 25; XCR0 bits 17 and 18
	 * are the tile configuration and data. */
	f->amx = osxsave && ((d >> 22) & 1) && ((d >> 24) & 1) && ((d >> 25) & 1) &&
		 (cpu__xgetbv() & 0x60000) == 0x60000;
	f->avx2 = ymm_ok && fma && f16c && ((b >> 5) & 1);
	f->avx512 = zmm_ok && ((b >> 16) & 1) /* F */ && ((b >> 17) & 1) /* DQ */ &&
		    ((b >> 30) & 1) /* BW */ && ((b >> 31) & 1) /* VL */;
	f->avx512_vnni = f->avx512 && ((c >> 11) & 1);
	__cpuid_count(7, 1, a, b, c, d);
	f->avx512_bf16 = f->avx512 && ((a >> 5) & 1);
	f->avx_vnni = f->avx2 && ((a >> 4) & 1);
}
#elif defined(__aarch64__)
#include <sys/auxv.h>

void cpu_detect(struct cpu_features *f)
{
	cpu_features_from_hwcap(f, getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
}
#else
void cpu_detect(struct cpu_features *f)
{
	memset(f, 0, sizeof(*f));
}
#endif

/* Linux's AArch64 HWCAP bits (asm/hwcap.h, the kernel's ABI), spelled
 * here so this builds, and its tests run, on any host. */
#define CPU__HWCAP_ASIMD (1ul << 1)
#define CPU__HWCAP_ASIMDDP (1ul << 20)
#define CPU__HWCAP2_I8MM (1ul << 13)

void cpu_features_from_hwcap(struct cpu_features *f, unsigned long hwcap, unsigned long hwcap2)
{
	memset(f, 0, sizeof(*f));
	/* Advanced SIMD is part of every Linux AArch64 system; the bit is
	 * still read, so a made-up mask without it means no NEON. */
	f->neon = (hwcap & CPU__HWCAP_ASIMD) != 0;
	f->neon_dotprod = f->neon && (hwcap & CPU__HWCAP_ASIMDDP) != 0;
	f->neon_i8mm = f->neon && (hwcap2 & CPU__HWCAP2_I8MM) != 0;
}

static const char *const cpu__level_names[CPU_LEVEL_COUNT] = {
	[CPU_LEVEL_SCALAR] = "scalar", [CPU_LEVEL_AVX2] = "avx2",
	[CPU_LEVEL_AVX512] = "avx512", [CPU_LEVEL_AMX] = "amx",
	[CPU_LEVEL_NEON] = "neon",     [CPU_LEVEL_DOTPROD] = "dotprod",
	[CPU_LEVEL_I8MM] = "i8mm",
};

#if defined(__x86_64__) || defined(__i386__)
static const enum cpu_level cpu__list[] = {CPU_LEVEL_SCALAR, CPU_LEVEL_AVX2, CPU_LEVEL_AVX512,
					   CPU_LEVEL_AMX};
#elif defined(__aarch64__)
static const enum cpu_level cpu__list[] = {CPU_LEVEL_SCALAR, CPU_LEVEL_NEON, CPU_LEVEL_DOTPROD,
					   CPU_LEVEL_I8MM};
#else
static const enum cpu_level cpu__list[] = {CPU_LEVEL_SCALAR};
#endif
#define CPU__N_LIST (sizeof(cpu__list) / sizeof(cpu__list[0]))

size_t cpu_levels(const enum cpu_level **list)
{
	*list = cpu__list;
	return CPU__N_LIST;
}

/* Position of `level` in this architecture's list, or -1. */
static int cpu__rank(enum cpu_level level)
{
	for (size_t i = 0; i < CPU__N_LIST; i++)
		if (cpu__list[i] == level)
			return (int)i;
	return -1;
}

/* The features `level` adds to the one before it in its list. */
static int cpu__own_features(const struct cpu_features *f, enum cpu_level level)
{
	switch (level) {
	case CPU_LEVEL_SCALAR:
		return 1;
	case CPU_LEVEL_AVX2:
		return f->avx2;
	case CPU_LEVEL_AVX512:
		return f->avx512 && f->avx512_vnni;
	case CPU_LEVEL_AMX:
		return f->amx && f->avx512_bf16;
	case CPU_LEVEL_NEON:
		return f->neon;
	case CPU_LEVEL_DOTPROD:
		return f->neon_dotprod;
	case CPU_LEVEL_I8MM:
		return f->neon_i8mm;
	default:
		return 0;
	}
}

int cpu_level_usable(const struct cpu_features *f, enum cpu_level level)
{
	int rank = cpu__rank(level);

	if (rank < 0)
		return 0;
	for (int i = 0; i <= rank; i++)
		if (!cpu__own_features(f, cpu__list[i]))
			return 0;
	return 1;
}

const char *cpu_level_name(enum cpu_level level)
{
	if ((unsigned)level >= CPU_LEVEL_COUNT)
		return "unknown";
	return cpu__level_names[level];
}

int cpu_level_from_env(void)
{
	const char *s = getenv("EMBER_CPU");

	if (s == NULL || *s == '\0')
		return -1;
	for (int i = 0; i < CPU_LEVEL_COUNT; i++)
		if (strcmp(s, cpu__level_names[i]) == 0)
			return i;
	return -2;
}

/* EMBER_CPU names no level of this architecture: said (naming the ones
 * it may name), then ignored. */
static void cpu__refuse_env(void)
{
	const char *words[CPU__N_LIST];
	char err[EMBER_ERR_MAX];
	size_t i;

	for (i = 0; i < CPU__N_LIST; i++)
		words[i] = cpu__level_names[cpu__list[i]];
	if (env_parse_choice("EMBER_CPU", getenv("EMBER_CPU"), words, CPU__N_LIST, &i, err) != 0)
		fprintf(stderr, "ember: %s; not capped\n", err);
}

enum cpu_level cpu_select_level(const struct cpu_features *f)
{
	int env = cpu_level_from_env(), best = 0;

	if (env == -2 || (env >= 0 && cpu__rank((enum cpu_level)env) < 0))
		cpu__refuse_env();

	while (best + 1 < (int)CPU__N_LIST && cpu_level_usable(f, cpu__list[best + 1]))
		best++;
	/* A cap names a level of this architecture; any other name is ignored. */
	if (env >= 0 && cpu__rank((enum cpu_level)env) >= 0 &&
	    cpu__rank((enum cpu_level)env) < best)
		best = cpu__rank((enum cpu_level)env);
	return cpu__list[best];
}

char *cpu_describe(const struct cpu_features *f, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
#define CPU__ADD(cond, name)                                                   \
	do {                                                                   \
		if ((cond) && n < len) {                                       \
			int w = snprintf(buf + n, len - n, "%s%s", n ? " " : "", name); \
			n += w > 0 ? (size_t)w : 0;                            \
		}                                                              \
	} while (0)
	CPU__ADD(f->avx2, "AVX2 FMA F16C");
	CPU__ADD(f->avx_vnni, "AVX-VNNI");
	CPU__ADD(f->avx512, "AVX-512");
	CPU__ADD(f->avx512_vnni, "VNNI");
	CPU__ADD(f->avx512_bf16, "AVX512-BF16");
	CPU__ADD(f->amx, "AMX");
	CPU__ADD(f->neon, "NEON");
	CPU__ADD(f->neon_dotprod, "DOTPROD");
	CPU__ADD(f->neon_i8mm, "I8MM");
#undef CPU__ADD
	if (n == 0)
		snprintf(buf, len, "none (scalar kernels)");
	return buf;
}
