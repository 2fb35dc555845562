/*
 * kquants_gemv_avx512.c - the Q4_K, Q5_K and Q6_K one-token GEMVs on the
 * AVX-512 VNNI level: kquants_gemv.h's steps with the ZMM row bodies of
 * kquants_gemv_zmm.h (KG_ZMM; per 128 weights two VPDPBUSD, one
 * VPACKSSDW, one VPDPWSSD). KG_MADD serves the shared code's unused AVX2
 * bodies only.
 *
 * Also their packed forms (kernels.h KERN_PACKED, groups of KG_R = 4
 * rows): the same row bodies, the same instructions per row, with the
 * four rows' bases a block apart and a row's super-blocks 4 blocks apart,
 * so the step reads one linear stream (LEVELS.md, "Packed rows").
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels_impl.h"
#include "quants.h"

#define KG_FN(name) kern_avx512_##name
#define KG_ZMM 1
#define KG_CHAINS 2
#define KG_MADD(acc, p, s) _mm256_dpwssd_epi32((acc), (p), (s))
#define KG_GEMM_Q4_K kern_avx512_vnni_gemm_q4_k
#define KG_GEMM_Q5_K kern_avx512_vnni_gemm_q5_k
#define KG_GEMM_Q6_K kern_avx512_vnni_gemm_q6_k
#define KG_GEMM_Q2_K kern_avx512_gemm_q2_k
#define KG_GEMM_Q3_K kern_avx512_gemm_q3_k

#include "kquants_gemv.h"

/* One packed group of four rows (o a multiple of 4). */
static __attribute__((noinline)) void kp_q4k(const struct kern_gemm_args *a, size_t o, size_t end)
{
	kz_k4_body(a, o, 4, 0, end, 1, 1);
}

static __attribute__((noinline)) void kp_q5k(const struct kern_gemm_args *a, size_t o, size_t end)
{
	kz_k4_body(a, o, 4, 1, end, 1, 1);
}

static __attribute__((noinline)) void kp_q6k(const struct kern_gemm_args *a, size_t o, size_t end,
					     const __m512i *bias, size_t s0, size_t s1)
{
	kz_q6_rows(a, o, 4, 1, end, bias, s0, s1, 1);
}

/* The packed GEMVs: rows [o0, o1) whole groups; the prefetch bound as
 * kg_gemv()'s (the matrix's last row). Every call has args.xk (kernels.c
 * makes it for packed K-quants); 2+ tokens go to the packed GEMM. */
static void kp_gemv(void (*grp)(const struct kern_gemm_args *, size_t, size_t),
		    const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1;

	for (size_t o = o0; o < o1; o += KG_R)
		grp(a, o, end);
}

void kern_avx512_pgemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx512_vnni_pgemm_q4_k(a, o0, o1);
	else
		kp_gemv(kp_q4k, a, o0, o1);
}

void kern_avx512_pgemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	if (a->n_tok != 1)
		kern_avx512_vnni_pgemm_q5_k(a, o0, o1);
	else
		kp_gemv(kp_q5k, a, o0, o1);
}

/* kern_avx512_q6k_gemv()'s windows of activation offsets, packed rows. */
void kern_avx512_pgemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t end = a->y_stride > o1 ? a->y_stride : o1, nsb = a->n_in / KERN_QKK;
	__m512i bias[4 * KZ_Q6_WIN];

	if (a->n_tok != 1) {
		kern_avx512_vnni_pgemm_q6_k(a, o0, o1);
		return;
	}
	for (size_t s0 = 0; s0 < nsb; s0 += KZ_Q6_WIN) {
		const size_t s1 = nsb - s0 > KZ_Q6_WIN ? s0 + KZ_Q6_WIN : nsb;

		kz_q6_bias(a->xk, s0, s1, bias);
		for (size_t o = o0; o < o1; o += KG_R)
			kp_q6k(a, o, end, bias, s0, s1);
	}
}

#endif
