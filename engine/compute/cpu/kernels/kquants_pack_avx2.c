/*
 * kquants_pack_avx2.c - the avx2 level's K-quant packers (kern_pack_fn,
 * run at load and by kern_unpack_rows()): Q4_K and Q6_K in groups of 8
 * rows with rows in vector lanes, the layouts kquants_gemv_avx2.c's
 * kl_unpack_pk() and kl_unpack_pk6() read. Each is a permutation of the
 * group's bits (same size, unpack restores the file bytes).
 */
#if defined(__x86_64__)
#include <assert.h>
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels_impl.h"
#include "kquants_q6_avx2.h"
#include "quants.h"

/* kern_pack_fn of packed Q4_K (pack_rows 8): per super-block of each
 * group, dword k of row r to dword 8k + r (unpack: back), through tmp. */
void kern_avx2_pack_q4_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp)
{
	const size_t row = nb * bs, nd = bs / 4;

	assert(g == 8 && n_out % 8 == 0 && bs == sizeof(struct kern_block_q4_k));
	for (size_t o = 0; o < n_out; o += 8) {
		char *grp = (char *)w + o * row;
		memcpy(tmp, grp, 8 * row);
		for (size_t b = 0; b < nb; b++)
			for (size_t r = 0; r < 8; r++)
				for (size_t k = 0; k < nd; k++) {
					char *f = grp + r * row + b * bs + 4 * k;
					char *p = grp + b * 8 * bs + 4 * (8 * k + r);
					const char *src = (const char *)tmp + (unpack ? p - grp : f - grp);
					memcpy(unpack ? f : p, src, 4);
				}
	}
	(void)g;
}

/* Packed Q6_K's byte offsets in a group's super-block (kquants_gemv_avx2.c
 * kl_unpack_pk6()): the 6-bit vectors, the scales, the d. */
#define KP6_W(n, c, v) (32 * (24 * (n) + 3 * (c) + (v)))
#define KP6_SC 1536
#define KP6_D 1664

/* File block b (210 bytes) to row r of packed super-block p. */
static void kp6_pack(const uint8_t *b, size_t r, uint8_t *p)
{
	const __m256i m3 = _mm256_set1_epi8(0x03);

	for (int n = 0; n < 2; n++) {
		__m256i q[4];
		uint8_t v8[3][32];
		kg_q6_unpack((const char *)b, n, q);
		for (int v = 0; v < 3; v++) { /* bits 2v, 2v + 1 of 4n + 3 on top */
			const __m256i t = _mm256_and_si256(_mm256_srli_epi16(q[3], 2 * v), m3);
			_mm256_storeu_si256((__m256i *)v8[v], _mm256_or_si256(q[v], _mm256_slli_epi16(t, 6)));
		}
		for (int c = 0; c < 8; c++)
			for (int v = 0; v < 3; v++)
				memcpy(p + KP6_W(n, c, v) + 4 * r, v8[v] + 4 * c, 4);
	}
	for (int i = 0; i < 4; i++)
		memcpy(p + KP6_SC + 32 * i + 4 * r, b + 192 + 4 * i, 4);
	memcpy(p + KP6_D + 2 * r, b + 208, 2);
}

/* Row r of packed super-block p back to file block b. */
static void kp6_unpack(const uint8_t *p, size_t r, uint8_t *b)
{
	uint8_t q[256];

	for (int n = 0; n < 2; n++)
		for (int c = 0; c < 8; c++)
			for (int e = 0; e < 4; e++) {
				uint8_t top = 0;
				for (int v = 0; v < 3; v++) {
					const uint8_t x = p[KP6_W(n, c, v) + 4 * r + (size_t)e];
					q[32 * (4 * n + v) + 4 * c + e] = x & 0x3f;
					top |= (uint8_t)((x >> 6) << (2 * v));
				}
				q[32 * (4 * n + 3) + 4 * c + e] = top;
			}
	for (int n = 0; n < 2; n++)
		for (int l = 0; l < 32; l++) {
			const uint8_t *s = q + 128 * n + l;
			b[64 * n + l] = (uint8_t)((s[0] & 0x0f) | (s[64] & 0x0f) << 4);
			b[64 * n + 32 + l] = (uint8_t)((s[32] & 0x0f) | (s[96] & 0x0f) << 4);
			b[128 + 32 * n + l] = (uint8_t)(s[0] >> 4 | (s[32] >> 4) << 2 |
							(s[64] >> 4) << 4 | (s[96] >> 4) << 6);
		}
	for (int i = 0; i < 4; i++)
		memcpy(b + 192 + 4 * i, p + KP6_SC + 32 * i + 4 * r, 4);
	memcpy(b + 208, p + KP6_D + 2 * r, 2);
}

/* kern_pack_fn of packed Q6_K (pack_rows 8): each group's super-block s
 * of its 8 rows to bytes 8 x 210 s .. of the group (unpack: back), through
 * tmp. */
void kern_avx2_pack_q6_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp)
{
	const size_t row = nb * bs;

	assert(g == 8 && n_out % 8 == 0 && bs == sizeof(struct kern_block_q6_k));
	for (size_t o = 0; o < n_out; o += 8) {
		uint8_t *grp = (uint8_t *)w + o * row;
		const uint8_t *t = tmp;
		memcpy(tmp, grp, 8 * row);
		for (size_t s = 0; s < nb; s++)
			for (size_t r = 0; r < 8; r++) {
				if (unpack)
					kp6_unpack(t + 8 * bs * s, r, grp + r * row + s * bs);
				else
					kp6_pack(t + r * row + s * bs, r, grp + 8 * bs * s);
			}
	}
	(void)g;
}

#endif
