/*
 * kquants_vnni_pack_avx512.c - the prefill panels of the K-quant VNNI tiles
 * (kquants_vnni_avx512.c, 9+ tokens): a tile's 16 rows, KV_KC super-blocks
 * at a time, unpacked into struct kv_panel (values in row lanes as the
 * VPDPBUSD take them, integer scales, d and dmin as floats), once per
 * chunk, then read by every group of up to 8 tokens. The unpacking is the
 * streaming tiles' own (kquants_vnni_avx512.h), so both paths see the same
 * values; only where they go differs (registers there, the panel here).
 */
#if defined(__x86_64__)
#include "kquants_vnni_avx512.h"

/* Q4_K (Q5_K when `five`): super-blocks [s0, s0 + n) of the tile. */
void kern_avx512_kv_pack_k4(struct kv_rows rp, size_t s0, size_t n, int five, struct kv_panel *pn)
{
	const size_t qs_off = five ? 48 : 16;

	for (size_t s = 0; s < n; s++) {
		const size_t sb = (s0 + s) * rp.step;
		__m512i qh[8];

		kv__k4_head(rp, sb, pn->v[s], 0);
		if (five) {
			kv__rows16(rp, sb + 16 * rp.km, qh);
			kv__rows16(rp, sb + 32 * rp.km, qh + 4);
		}
		QV_UNROLL
		for (int p = 0; p < 4; p++)
			kv__k4_pair(rp, sb + qs_off * rp.km, p, qh, five, pn->w[s][2 * p],
				    pn->w[s][2 * p + 1], 0);
	}
}

/* Q6_K: ql (128 bytes), qh (64), 16 int8 scales, d; 32-block 4n + kk
 * takes nibble (kk >= 2: high) of ql[64n + 32(kk & 1) + l] and bits 2kk,
 * 2kk + 1 of qh[32n + l]. */
void kern_avx512_kv_pack_q6(struct kv_rows rp, size_t s0, size_t n, struct kv_panel *pn)
{
	for (size_t s = 0; s < n; s++) {
		const size_t sb = (s0 + s) * rp.step;
		__m512i h[4], g[4];

		if (rp.km == 4) { /* packed */
			kv__q6u_sb(rp, sb, pn->w[s], pn->v[s]);
			continue;
		}

		kv__rows16(rp, sb + 192, h);
		kv__rows16(rp, sb + 194, g); /* d in the top half of g[3] */
		QV_UNROLL
		for (int k = 0; k < 16; k++)
			pn->v[s][k] = kv__byte_s(h[k / 4], k % 4);
		pn->v[s][16] = _mm512_castps_si512(kv__half(g[3], 1));
		for (int hf = 0; hf < 2; hf++) {
			__m512i qh[8], ql[8], qa[8], qb[8];

			kv__rows16(rp, sb + 128 + 32 * hf, qh);
			kv__rows16(rp, sb + 128 + 32 * hf + 16, qh + 4);
			/* qa: qh bits 0-1 and 4-5 (kk 0, 2), qb: bits 2-3 and 6-7
			 * moved down two (kk 1, 3); the others clear */
			QV_UNROLL
			for (int c = 0; c < 8; c++) {
				qa[c] = _mm512_and_si512(qh[c], _mm512_set1_epi8(0x33));
				qb[c] = _mm512_and_si512(_mm512_srli_epi16(qh[c], 2),
							 _mm512_set1_epi8(0x33));
			}
			for (int half = 0; half < 2; half++) {
				kv__rows16(rp, sb + 64 * hf + 32 * half, ql);
				kv__rows16(rp, sb + 64 * hf + 32 * half + 16, ql + 4);
				QV_UNROLL
				for (int hi = 0; hi < 2; hi++) {
					const int kk = half + 2 * hi;

					QV_UNROLL
					for (int c = 0; c < 8; c++) {
						/* qh bits 2kk, 2kk + 1 to bits 4, 5 */
						__m512i q = kk == 0   ? _mm512_slli_epi16(qa[c], 4)
							    : kk == 1 ? _mm512_slli_epi16(qb[c], 4)
							    : kk == 2 ? qa[c]
								      : qb[c];
						pn->w[s][4 * hf + kk][c] = kv__q6(ql[c], hi, q);
					}
				}
			}
		}
	}
}
#endif
