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
				    pn->w[s][2 * p + 1]);
	}
}

/* Q6_K: super-blocks [s0, s0 + n) of the tile; the unpacking is
 * kquants_vnni_avx512.h's: kv__q6_sb (file layout: transposes), kv__q6u_sb
 * (packed, rows in dword lanes: loads; the panel only past KV_L6_TOK
 * tokens, below them the tiles read the packed rows themselves). */
void kern_avx512_kv_pack_q6(struct kv_rows rp, size_t s0, size_t n, struct kv_panel *pn)
{
	for (size_t s = 0; s < n; s++) {
		const size_t sb = (s0 + s) * rp.step;

		if (rp.km == KV_KM_Q6L) /* packed, rows in dword lanes */
			kv__q6u_sb(rp, sb, pn->w[s], pn->v[s]);
		else
			kv__q6_sb(rp, sb, pn->w[s], pn->v[s]);
	}
}
#endif
