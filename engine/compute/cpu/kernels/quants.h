/*
 * quants.h - the community block formats beyond Q8_0/Q4_0: Q4_1, Q5_0,
 * Q5_1, IQ4_NL (blocks of 32) and the 256-element super-blocks Q2_K ..
 * Q6_K, Q8_K, IQ4_XS, laid out byte for byte as in GGUF files (ggml's
 * block structs), plus the scale unpacking every kernel of these types
 * shares.
 *
 * Like kernels_impl.h, this is for the kernel files and the tests only.
 * quants_ref.c holds the scalar reference (dequantize and dot product per
 * type: the specification the SIMD levels are tested against).
 *
 * Element order inside a super-block (e = 0..255) is the one ggml's
 * dequantizers write; the helpers below give each element's scale the way
 * every kernel reads it, so the SIMD files only choose how to vectorize.
 *
 * Thread safety: constant data and pure functions.
 */
#ifndef EMBER_QUANTS_H
#define EMBER_QUANTS_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels_impl.h"

#define KERN_QKK 256 /* elements per K-quant super-block */

/* Q4_1: value j = (qs[j] & 15) * d + m, value j+16 = (qs[j] >> 4) * d + m. */
struct kern_block_q4_1 {
	uint16_t d, m; /* fp16 scale and minimum */
	uint8_t qs[KERN_QK / 2];
};
static_assert(sizeof(struct kern_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* Q5_0: Q4_0's nibbles plus a fifth bit per element in qh (bit j of the
 * little-endian word for element j): value = (q | h << 4) - 16, times d. */
struct kern_block_q5_0 {
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[KERN_QK / 2];
};
static_assert(sizeof(struct kern_block_q5_0) == 22, "Q5_0 block is 22 bytes");

/* Q5_1: Q5_0's 5-bit unsigned values, value = q * d + m. */
struct kern_block_q5_1 {
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[KERN_QK / 2];
};
static_assert(sizeof(struct kern_block_q5_1) == 24, "Q5_1 block is 24 bytes");

/* IQ4_NL: Q4_0's nibble layout, each nibble an index into the non-linear
 * table kern_iq4nl_values; value = d * table[q]. */
struct kern_block_iq4_nl {
	uint16_t d;
	uint8_t qs[KERN_QK / 2];
};
static_assert(sizeof(struct kern_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

/* Q2_K: 16 sub-blocks of 16; scales[s] holds a 4-bit scale (low) and a
 * 4-bit minimum (high); value = d * sc * q - dmin * m, q 2 bits. */
struct kern_block_q2_k {
	uint8_t scales[KERN_QKK / 16];
	uint8_t qs[KERN_QKK / 4];
	uint16_t d, dmin;
};
static_assert(sizeof(struct kern_block_q2_k) == 84, "Q2_K block is 84 bytes");

/* Q3_K: 16 sub-blocks of 16, 6-bit signed scales (stored + 32) packed in
 * 12 bytes; q = 2 low bits, minus 4 when the hmask bit is clear. */
struct kern_block_q3_k {
	uint8_t hmask[KERN_QKK / 8];
	uint8_t qs[KERN_QKK / 4];
	uint8_t scales[12];
	uint16_t d;
};
static_assert(sizeof(struct kern_block_q3_k) == 110, "Q3_K block is 110 bytes");

/* Q4_K: 8 sub-blocks of 32, 6-bit scale and minimum each packed in 12
 * bytes; value = d * sc * q - dmin * m, q 4 bits. */
struct kern_block_q4_k {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qs[KERN_QKK / 2];
};
static_assert(sizeof(struct kern_block_q4_k) == 144, "Q4_K block is 144 bytes");

/* Q5_K: Q4_K plus a fifth bit per element in qh. */
struct kern_block_q5_k {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[KERN_QKK / 8];
	uint8_t qs[KERN_QKK / 2];
};
static_assert(sizeof(struct kern_block_q5_k) == 176, "Q5_K block is 176 bytes");

/* Q6_K: 16 sub-blocks of 16 with int8 scales; q 6 bits (4 in ql, 2 in
 * qh), value = d * sc * (q - 32). */
struct kern_block_q6_k {
	uint8_t ql[KERN_QKK / 2];
	uint8_t qh[KERN_QKK / 4];
	int8_t scales[KERN_QKK / 16];
	uint16_t d;
};
static_assert(sizeof(struct kern_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* Q8_K: llama.cpp's activation format for K-quants (fp32 scale, sums of
 * each 16). Most kernels quantize activations to 32-blocks
 * (kern_block_q8a); the x86 Q2_K..Q6_K GEMVs and GEMMs take this form
 * (kern_quantize_act_q8k(), Ember's rounding rule). */
struct kern_block_q8_k {
	float d;
	int8_t qs[KERN_QKK];
	int16_t bsums[KERN_QKK / 16];
};
static_assert(sizeof(struct kern_block_q8_k) == 292, "Q8_K block is 292 bytes");

/* IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (stored + 32; low 4 bits
 * in scales_l, high 2 in scales_h), IQ4_NL's table for the values. */
struct kern_block_iq4_xs {
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[KERN_QKK / 64];
	uint8_t qs[KERN_QKK / 2];
};
static_assert(sizeof(struct kern_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

/* The 16 IQ4_NL / IQ4_XS levels (the format's definition). */
extern const int8_t kern_iq4nl_values[16];

/* Q4_K / Q5_K: scale and minimum of sub-block j (0..7), 6 bits each. */
static inline void kern_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/* Q3_K: the signed scale of sub-block j (0..15). */
static inline int kern_q3k_scale(const uint8_t *s, int j)
{
	int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
	int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;

	return (lo | (hi << 4)) - 32;
}

/* IQ4_XS: the signed scale of sub-block j (0..7). */
static inline int kern_iq4xs_scale(const struct kern_block_iq4_xs *b, int j)
{
	int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 15;
	int hi = (b->scales_h >> (2 * j)) & 3;

	return (lo | (hi << 4)) - 32;
}

/* Dequantizes n elements of a type listed here (n a multiple of its
 * block), bit for bit as ggml's reference dequantizers: plain float
 * arithmetic in their order. Returns 0, or -1 for a type not listed. */
int kern_quants_dequantize(uint32_t t, const void *src, float *dst, size_t n);

/* Quantizes n floats (a multiple of the block) to a type listed here
 * with llama.cpp's reference rules (no importance matrix), byte-identical
 * to llama-quantize's output. Returns 0, or -1 for a type it does not
 * write. quants_quantize.c. */
int kern_quants_quantize(uint32_t t, const float *src, void *dst, size_t n);

/* The scalar reference gemm of each type (kern_gemm_fn; activations are
 * kern_block_q8a rows). */
void kern_ref_gemm_q4_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q5_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q5_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_iq4_nl(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemm_iq4_xs(const struct kern_gemm_args *a, size_t o0, size_t o1);

/* kquants_gemv_ref.c: one token's activations per super-block (n a
 * multiple of 256; d = amax / 127, kern_round_q8(), sums of each 16), and
 * the scalar reference of the Q2_K..Q6_K decode GEMVs on them
 * (kern_gemm_fn; n_tok 1, reads args.xk). */
void kern_quantize_act_q8k(const float *x, struct kern_block_q8_k *y, size_t n);
void kern_ref_gemv_q8k_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemv_q8k_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemv_q8k_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemv_q8k_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_ref_gemv_q8k_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);

#if defined(__x86_64__)
/* kquants_gemv_avx2.c / kquants_gemv_avx512.c (body kquants_gemv.h): the
 * decode GEMVs on kern_block_q8_k activations, bit-identical to
 * kern_ref_gemv_q8k_*; args.xk NULL or n_tok > 1: the level's gemm. */
void kern_avx2_quantize_act_q8k(const float *x, struct kern_block_q8_k *y, size_t n);
void kern_avx512_quantize_act_q8k(const float *x, struct kern_block_q8_k *y, size_t n);
void kern_avx2_gemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemv_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemv_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* 2+ tokens: each token through the GEMV above (batch-invariant) */
void kern_avx2_gemm_q8k_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q8k_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q8k_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q8k_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* kquants_avx2.c / kquants_avx512.c (the shared body: kquants_simd.h). */
void kern_avx2_gemm_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q2_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q3_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* Q4_K packed at load for the avx2 level (groups of 8 rows, each
 * super-block's dwords with rows in lanes; kquants_gemv_avx2.c): any
 * token count, bit for bit the two above; and its kern_pack_fn. */
void kern_avx2_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pack_q4_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp);
/* Q6_K the same way (kl_unpack_pk6()'s layout; the packers are in
 * kquants_pack_avx2.c). */
void kern_avx2_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pack_q6_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp);
/* kquants_vnni_avx512.c: 16 rows x 8 tokens VNNI tiles, decode and prefill. */
void kern_avx512_vnni_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_vnni_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_vnni_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same on packed rows (kernels.h KERN_PACKED, groups of 4), and the
 * packed GEMVs (kquants_gemv_avx512.c): bit-identical to the above. */
void kern_avx512_vnni_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_vnni_pgemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_vnni_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemv_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemv_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemv_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_iq4_xs(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_iq4_nl(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q5_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q4_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_gemm_q5_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_iq4_xs(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_iq4_nl(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q5_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q4_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q5_1(const struct kern_gemm_args *a, size_t o0, size_t o1);
#endif

/* The 2+-token gemm of a K-quant whose level has a one-token GEMV on
 * kern_block_q8_k activations (args.xk, n_in / 256 blocks per token):
 * every token through that GEMV, so a token's result is its one-token
 * result bit for bit whatever its batch (the avx2 Q4_K/Q5_K/Q6_K gemms,
 * kquants_simd.h; the Q2_K/Q3_K ones, kquants_gemv.h). Rows go by
 * 32 (at most ~100 KiB of weights, kept in L2 while a block of 64 tokens
 * passes them); the GEMV shares each activation load between 4 rows, as
 * tiles share a weight unpacking between tokens. Without args.xk (a caller
 * that made only the 32-blocks): `blocks32`. */
#define KERN_TOKENS_ROWS 32
#define KERN_TOKENS_BLOCK 64

static inline void kern_gemm_tokens(kern_gemm_fn gemv, kern_gemm_fn blocks32,
				    const struct kern_gemm_args *a, size_t o0, size_t o1)
{
	const size_t nsb = a->n_in / KERN_QKK;

	if (a->xk == NULL) {
		blocks32(a, o0, o1);
		return;
	}
	for (size_t tb = 0; tb < a->n_tok; tb += KERN_TOKENS_BLOCK) {
		size_t te = a->n_tok - tb < KERN_TOKENS_BLOCK ? a->n_tok : tb + KERN_TOKENS_BLOCK;

		for (size_t o = o0; o < o1; o += KERN_TOKENS_ROWS) {
			size_t oe = o1 - o < KERN_TOKENS_ROWS ? o1 : o + KERN_TOKENS_ROWS;

			for (size_t t = tb; t < te; t++) {
				struct kern_gemm_args one = *a;

				one.n_tok = 1;
				one.xk = a->xk + t * nsb;
				one.y = a->y + t * a->y_stride;
				gemv(&one, o, oe);
			}
		}
	}
}

#endif
