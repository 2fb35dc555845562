/*
 * kernels_select.c - which kernels run: the level chosen once at start-up
 * (kern_init(): CPU detection, the EMBER_CPU cap, AMX's permission and
 * self-test, the EMBER_* kernel knobs), each operation's table resolved
 * from the highest level that has it (kern_resolve(), LEVELS.md), and the
 * "op NAME: LEVEL" lines that say so (kern_describe()). kernels.c drives
 * the chosen table (kernels_impl.h: kern__ops, kern__regions).
 *
 * Threads: everything here is written once, inside pthread_once
 * (kern_init(); kern_test_set_gemm() is for single-threaded tests), and
 * only read afterwards, from any thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* Chosen once by kern_init(); written only inside pthread_once. */
static pthread_once_t kern__once = PTHREAD_ONCE_INIT;
/* Streaming jobs in per-thread regions (kern__region_cb); 0 when
 * EMBER_GEMV_SPLIT=chunks asks for the former chunk-by-chunk claims, kept
 * so the two can be measured against each other on a quiet machine. */
int kern__regions = 1; /* kernels_impl.h */
/* Prefill jobs in shrinking runs of chunks, one call a run
 * (kern__runs_cb); 0 when EMBER_GEMM_SPLIT=chunks asks for one call a
 * chunk, kept to measure the two against each other. */
int kern__runs = 1; /* kernels_impl.h */
/* Set by kern_init() to kern_pack_ahead_choose(); 0 until then (no
 * prefetch: results never depend on it). */
size_t kern_pack_ahead = 0; /* kernels_impl.h */
static enum cpu_level kern__level = CPU_LEVEL_SCALAR;
/* kern_attn_bf16()'s switch below the amx level (kernels_impl.h). */
int kern_attn_bf16_on;
static struct kern_ops kern__table;
static struct kern_origin kern__org;
const struct kern_ops *kern__ops = &kern_ops_ref; /* kernels_impl.h */

const struct kern_ops *kern_ops_own(enum cpu_level level)
{
	switch (level) {
	case CPU_LEVEL_SCALAR:
		return &kern_ops_ref;
#if defined(__x86_64__)
	case CPU_LEVEL_AVX2:
		return &kern_ops_avx2;
	case CPU_LEVEL_AVX512:
		return &kern_ops_avx512;
	case CPU_LEVEL_AMX:
		return &kern_ops_amx;
#endif
#if defined(__aarch64__)
	case CPU_LEVEL_NEON:
		return &kern_ops_neon;
	case CPU_LEVEL_DOTPROD:
		return &kern_ops_dotprod;
	case CPU_LEVEL_I8MM:
		return &kern_ops_i8mm;
#endif
	default:
		return NULL;
	}
}

/* AMX needs the kernel's permission and a passing self-test on top of
 * the CPU's features: asked once (kern_amx_enable()). */
static pthread_once_t kern__amx_once = PTHREAD_ONCE_INIT;
static int kern__amx_ok;
static char kern__amx_why[128] = "not tried";

static void kern__amx_try(void)
{
#if defined(__x86_64__)
	struct cpu_features f;

	cpu_detect(&f);
	if (!cpu_level_usable(&f, CPU_LEVEL_AMX)) {
		snprintf(kern__amx_why, sizeof(kern__amx_why), "this CPU has no AMX");
		return;
	}
	kern__amx_ok = kern_amx_enable(kern__amx_why, sizeof(kern__amx_why)) == 0;
#endif
}

static int kern__amx_usable(void)
{
	pthread_once(&kern__amx_once, kern__amx_try);
	return kern__amx_ok;
}

int kern_level_runs(enum cpu_level level)
{
	struct cpu_features f;

	cpu_detect(&f);
	if (!cpu_level_usable(&f, level) || kern_ops_own(level) == NULL)
		return 0;
	return level != CPU_LEVEL_AMX || kern__amx_usable();
}

/* Every level's resolved table, as if the CPU had every feature (tests
 * run only those kern_level_runs() allows). */
static pthread_once_t kern__all_once = PTHREAD_ONCE_INIT;
static struct kern_ops kern__all[CPU_LEVEL_COUNT];

static void kern__resolve_all(void)
{
	struct cpu_features all;

	memset(&all, 0xff, sizeof(all));
	for (int l = 0; l < CPU_LEVEL_COUNT; l++)
		kern_resolve(&all, (enum cpu_level)l, &kern__all[l], NULL);
}

const struct kern_ops *kern_ops_for(enum cpu_level level)
{
	if ((unsigned)level >= CPU_LEVEL_COUNT || kern_ops_own(level) == NULL)
		return NULL;
	pthread_once(&kern__all_once, kern__resolve_all);
	return &kern__all[level];
}

/* Takes a level's entry where it has one, noting the level. */
#define KERN__TAKE(field)                                                      	do {                                                                   		if (ops->field) {                                              			out->field = ops->field;                               			org->field = level;                                    		}                                                              	} while (0)

enum cpu_level kern_resolve(const struct cpu_features *f, enum cpu_level cap,
			    struct kern_ops *out, struct kern_origin *org)
{
	const enum cpu_level *list;
	size_t n = cpu_levels(&list);
	enum cpu_level top = CPU_LEVEL_SCALAR;
	struct kern_origin dummy;

	if (org == NULL)
		org = &dummy;
	memset(out, 0, sizeof(*out));
	memset(org, 0, sizeof(*org)); /* CPU_LEVEL_SCALAR everywhere */
	/* Lowest first, so each level overrides what it does better. */
	for (size_t i = 0; i < n; i++) {
		enum cpu_level level = list[i];
		const struct kern_ops *ops = kern_ops_own(level);
		if (!cpu_level_usable(f, level))
			break;
		if (ops == NULL)
			continue;
		top = level;
		out->name = ops->name;
		KERN__TAKE(quantize_act);
		KERN__TAKE(attn_scores);
		KERN__TAKE(attn_accum);
		KERN__TAKE(fp16_row);
		KERN__TAKE(max);
		KERN__TAKE(exp_sum);
		KERN__TAKE(silu_mul);
		KERN__TAKE(exp_sum_prompt);
		KERN__TAKE(quantize_act_q8k);
		KERN__TAKE(norm_rows);
		KERN__TAKE(fp16_from_row);
		KERN__TAKE(attn_scores_f16);
		KERN__TAKE(attn_accum_f16);
		KERN__TAKE(attn_q_bf16);
		KERN__TAKE(attn_scores_bf16);
		KERN__TAKE(attn_accum_bf16);
		KERN__TAKE(attn_scores_softmax_bf16);
		KERN__TAKE(attn_accum_bf16_tiles);
#if defined(__x86_64__)
		/* Prompt-row attention on VDPBF16PS: the avx512 level where the
		 * CPU has AVX512-BF16 (the level itself does not need it); the
		 * amx level, above it, takes its tiles' instead. */
		if (level == CPU_LEVEL_AVX512 && f->avx512_bf16) {
			out->attn_q_bf16 = kern_avx512_attn_q_bf16;
			out->attn_scores_bf16 = kern_avx512_attn_scores_bf16;
			out->attn_accum_bf16 = kern_avx512_attn_accum_bf16;
			out->attn_scores_softmax_bf16 = kern_avx512_attn_scores_softmax_bf16;
			out->attn_accum_bf16_tiles = kern_avx512_attn_accum_bf16_tiles;
			org->attn_q_bf16 = org->attn_scores_bf16 = org->attn_accum_bf16 = level;
			org->attn_scores_softmax_bf16 = org->attn_accum_bf16_tiles = level;
		}
#endif
		/* A type's GEMV and GEMM come from one level: a token's result
		 * must not depend on the batch it shares (kernels_impl.h). */
		for (size_t t = 0; t < DTYPE_COUNT; t++) {
			if (ops->gemm[t] == NULL)
				continue;
			out->gemm[t] = ops->gemm[t];
			out->gemv[t] = ops->gemv[t] ? ops->gemv[t] : ops->gemm[t];
			org->gemm[t] = org->gemv[t] = level;
			/* the packed form with them, or none: a level's packed
			 * kernels compute its own gemm's results */
			out->pack_rows[t] = ops->pgemm[t] ? ops->pack_rows[t] : 0;
			out->pgemm[t] = out->pack_rows[t] ? ops->pgemm[t] : NULL;
			out->pack_fn[t] = out->pack_rows[t] ? ops->pack_fn[t] : NULL;
			out->pgemv[t] = !out->pack_rows[t] ? NULL
					: ops->pgemv[t]	   ? ops->pgemv[t]
							   : ops->pgemm[t];
		}
		if (level == cap)
			break;
	}
	return top;
}
#undef KERN__TAKE

size_t kern_pack_ahead_vendor(void)
{
#if defined(__x86_64__)
	unsigned a = 0, b = 0, c = 0, d = 0;

	/* "GenuineIntel" in EBX, EDX, ECX. Intel (Emerald Rapids, one thread,
	 * decode_prof's matrix products in CPU ms): Q4_0 52 -> 40, Q4_K_M 59
	 * -> 41, Q6_K 80 -> 57 at 8 rows; 4, 8 and 16 alike. Elsewhere none:
	 * on Zen 4 the prefetches cost 10-30% (LEVELS.md "Q6_K re-ordered"). */
	if (__get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u &&
	    c == 0x6c65746eu)
		return 8;
#endif
	return 0;
}

size_t kern_pack_ahead_choose(void)
{
	size_t v = kern_pack_ahead_vendor();

	/* a refused value leaves v, the vendor's default, and says so */
	env_size("EMBER_PACK_AHEAD", 0, KERN_PACK_AHEAD_MAX, &v);
	return v;
}

static void kern__choose(void)
{
	struct cpu_features f;
	enum cpu_level cap;
	static const char *const splits[] = {"chunks", "regions"};
	static const char *const gsplits[] = {"chunks", "runs"};
	static const char *const offon[] = {"0", "1"};
	size_t split = 1, on = 1;

	env_choice("EMBER_GEMV_SPLIT", splits, 2, &split);
	kern__regions = (int)split;
	split = 1;
	env_choice("EMBER_GEMM_SPLIT", gsplits, 2, &split);
	kern__runs = (int)split;
	env_choice("EMBER_AMX_BF16", offon, 2, &on);
	kern_attn_bf16_on = (int)on;
	/* before the AMX self-test, which may run the packed GEMVs */
	kern_pack_ahead = kern_pack_ahead_choose();
	cpu_detect(&f);
	cap = cpu_select_level(&f);
	/* AMX only with the kernel's permission for the tile data and a
	 * passing self-test (kernels_amx.c); otherwise avx512, said once. */
	if (cap == CPU_LEVEL_AMX && !kern__amx_usable()) {
		fprintf(stderr, "ember: amx: %s; using avx512\n", kern__amx_why);
		cap = CPU_LEVEL_AVX512;
	}
	kern__level = kern_resolve(&f, cap, &kern__table, &kern__org);
	kern__ops = &kern__table;
}

enum cpu_level kern_init(void)
{
	pthread_once(&kern__once, kern__choose);
	return kern__level;
}

kern_gemm_fn kern_test_set_gemm(uint32_t t, kern_gemm_fn f)
{
	kern_gemm_fn old = (kern_init(), kern__table.gemm[t]);

	kern__table.gemm[t] = f;
	return old;
}

enum cpu_level kern_level(void)
{
	return kern__level;
}

const struct kern_ops *kern_ops_active(void)
{
	kern_init();
	return kern__ops;
}

const struct kern_origin *kern_origin_active(void)
{
	kern_init();
	return &kern__org;
}

/* Appends one "op NAME: LEVEL" line; *n stops at len - 1. */
static void kern__line(char *buf, size_t len, size_t *n, const char *op, const char *sub,
		       enum cpu_level level)
{
	int w;

	if (*n + 1 >= len)
		return;
	w = snprintf(buf + *n, len - *n, "op %s%s%s: %s\n", op, sub ? " " : "", sub ? sub : "",
		     cpu_level_name(level));
	if (w > 0)
		*n = *n + (size_t)w < len ? *n + (size_t)w : len - 1;
}

char *kern_describe(char *buf, size_t len)
{
	const struct kern_origin *o = kern_origin_active();
	size_t n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (uint32_t t = 0; t < DTYPE_COUNT; t++)
		if (kern_supports(t)) {
			char sub[32];

			kern__line(buf, len, &n, "gemv", dtype_name(t), o->gemv[t]);
			kern__line(buf, len, &n, "gemm", dtype_name(t), o->gemm[t]);
			if (!kern__ops->pack_rows[t])
				continue;
			snprintf(sub, sizeof(sub), "%s packed", dtype_name(t));
			kern__line(buf, len, &n, "gemv", sub, o->gemm[t]);
			kern__line(buf, len, &n, "gemm", sub, o->gemm[t]);
		}
#if defined(__x86_64__)
	if (kern_level() == CPU_LEVEL_AMX) /* its prefill tiles (kernels_amx_bf16.c) */
		kern__line(buf, len, &n, "gemm", kern_amxbf_describe(), CPU_LEVEL_AMX);
	if (kern_level() == CPU_LEVEL_AMX)
		kern__line(buf, len, &n, "gemm", kern_amxbf_fx_describe(), CPU_LEVEL_AMX);
#endif
	kern__line(buf, len, &n, "quantize_act", NULL, o->quantize_act);
	kern__line(buf, len, &n, "quantize_act_q8k", NULL, o->quantize_act_q8k);
	kern__line(buf, len, &n, "attn_scores", NULL, o->attn_scores);
	kern__line(buf, len, &n, "attn_accum", NULL, o->attn_accum);
	kern__line(buf, len, &n, "fp16_row", NULL, o->fp16_row);
	kern__line(buf, len, &n, "fp16_from_row", NULL, o->fp16_from_row);
	kern__line(buf, len, &n, "softmax", NULL, o->exp_sum);
	kern__line(buf, len, &n, "silu_mul", NULL, o->silu_mul);
	kern__line(buf, len, &n, "norm", NULL, o->norm_rows);
	if (kern__ops->exp_sum_prompt)
		kern__line(buf, len, &n, "softmax", "prompt rows", o->exp_sum_prompt);
	if (kern_attn_f16_rows()) {
		kern__line(buf, len, &n, "attn_scores_f16", NULL, o->attn_scores_f16);
		kern__line(buf, len, &n, "attn_accum_f16", NULL, o->attn_accum_f16);
	}
	if (kern_attn_bf16()) {
		kern__line(buf, len, &n, "attn_scores", "prompt rows, bf16 tiles",
			   o->attn_scores_bf16);
		kern__line(buf, len, &n, "attn_accum", "prompt rows, bf16 tiles",
			   o->attn_accum_bf16);
	}
	return buf;
}

/* The prompt-row attention blocks (kernels.h): the amx level's bf16
 * tiles while the bf16 prefill is on (EMBER_AMX_BF16, its self-test), so
 * that one switch puts a prompt row's every product on bf16 or none; the
 * avx512 level's VDPBF16PS blocks (attention_bf16_avx512.c, CPUs with
 * AVX512-BF16 and no AMX, whose prompt rows' products are int8) unless
 * EMBER_AMX_BF16=0, the same switch: every row on the float kernels. */
int kern_attn_bf16(void)
{
#if defined(__x86_64__)
	const struct kern_ops *ops = kern_ops_active();

	if (ops->attn_q_bf16 == NULL || ops->attn_scores_bf16 == NULL ||
	    ops->attn_accum_bf16 == NULL || ops->attn_scores_softmax_bf16 == NULL ||
	    ops->attn_accum_bf16_tiles == NULL)
		return 0;
	return kern_level() == CPU_LEVEL_AMX ? kern_amxbf_on : kern_attn_bf16_on;
#else
	return 0;
#endif
}

float kern_exp_sum_prompt(float *x, size_t n, float m)
{
	return kern__ops->exp_sum_prompt ? kern__ops->exp_sum_prompt(x, n, m)
					 : kern__ops->exp_sum(x, n, m);
}

void kern_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt)
{
	kern__ops->attn_q_bf16(q, ld_q, d, nq, qt);
}

void kern_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
			   const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			   size_t nk)
{
	kern__ops->attn_scores_bf16(qt, k, f16, d, bias, scale, s, ld_s, nq, nk);
}

void kern_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			  const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	kern__ops->attn_accum_bf16(o, ld_o, r, p, ld_p, v, f16, d, nq, nk);
}

/* The fused prompt softmax and its value products (kernels.h), only
 * where kern_attn_bf16(): the score and value products from the table
 * (the amx level's tiles or the avx512 level's VDPBF16PS blocks,
 * kern_resolve); the softmax step (softmax16_avx512.h) and the outputs'
 * scaling, which use no tile instructions, the amx level's functions at
 * both levels. */
void kern_attn_softmax_bf16(float *s, size_t ld_s, const uint32_t *lo, const uint32_t *hi,
			    size_t nq, size_t nk, float *m, float *l, float *r, uint16_t *pt)
{
#if defined(__x86_64__)
	kern_amx_attn_softmax_bf16(s, ld_s, lo, hi, nq, nk, m, l, r, pt);
#else
	(void)s, (void)ld_s, (void)lo, (void)hi, (void)nq, (void)nk, (void)m, (void)l, (void)r,
		(void)pt;
#endif
}

void kern_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				   float scale, const uint32_t *lo, const uint32_t *hi, size_t nq,
				   size_t nk, float *m, float *l, float *r, uint16_t *pt)
{
	kern__ops->attn_scores_softmax_bf16(qt, k, f16, d, scale, lo, hi, nq, nk, m, l, r, pt);
}

void kern_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r, const uint16_t *pt,
				const void *v, int f16, size_t d, size_t nq, size_t nk)
{
	kern__ops->attn_accum_bf16_tiles(o, ld_o, r, pt, v, f16, d, nq, nk);
}

void kern_attn_out_bf16(const float *o, size_t ld_o, const float *l, float *out, size_t ld_out,
			size_t d, size_t n)
{
#if defined(__x86_64__)
	kern_amx_attn_out_bf16(o, ld_o, l, out, ld_out, d, n);
#else
	(void)o, (void)ld_o, (void)l, (void)out, (void)ld_out, (void)d, (void)n;
#endif
}

/* Where a prompt token's bf16 row goes (kernels.h kern_bf16_rows). */
uint16_t *kern_bf16_row(const struct kern_bf16_rows *b, size_t t)
{
#if defined(__x86_64__)
	static_assert(KERN_BF16_ROW_STEP == 512, "kern_amxbf_row's K step");
	return kern_amxbf_row(b->xb, b->n_in, t - b->n_exact);
#else
	return (void)b, (void)t, NULL;
#endif
}

/* The plain layout is kern_amxbf_act_row's (kernels.c kern__quantize_cb): Q8_0,
 * Q4_0 and the K-quants where the bf16 GEMM is on (the K-quants' Q8_K
 * blocks wait for demand as the int8 ones do: kern_act_ensure). The
 * fused writers' kernels are the avx512 ones, the amx level's silu_mul and norm_rows (checked, so their
 * tiles are the unfused rows' bits). */
int kern_bf16_plain(uint32_t wtype)
{
	wtype &= ~KERN_PACKED;
#if defined(__x86_64__)
	const struct kern_ops *ops = kern_ops_active();

	return (wtype == DTYPE_Q8_0 || wtype == DTYPE_Q4_0 || wtype == DTYPE_Q4_K ||
		wtype == DTYPE_Q5_K || wtype == DTYPE_Q6_K) &&
	       kern_init() == CPU_LEVEL_AMX &&
	       kern_amxbf_scratch(wtype, 32, 32) != 0 && ops->silu_mul == kern_avx512_silu_mul &&
	       ops->norm_rows == kern_avx512_norm_rows;
#else
	return 0;
#endif
}
