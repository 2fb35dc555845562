/*
 * kernels_amx_fx.c - the outside's entry points to the split F16 / BF16
 * products of the AMX bf16 prefill (amx_bf16_fx.h): kern_matmul makes the
 * activation rows once per matmul with kern_amxbf_act_row_fx, sized by
 * kern_amxbf_widen; kern_describe() prints kern_amxbf_fx_describe(). The
 * GEMMs are kernels_amx_bf16.c's (kern_amxbf_gemm_f16 / _bf16).
 */
#if defined(__x86_64__)
#include "amx_bf16_fx.h"
#include "kernels_impl.h"

void kern_amxbf_act_row_fx(uint32_t wtype, const float *x, size_t n_in, size_t t, uint16_t *xb)
{
	amxfx_act_row(wtype, x, n_in, t, xb);
}

size_t kern_amxbf_widen(uint32_t wtype)
{
	return amxfx_widen(wtype);
}

const char *kern_amxbf_fx_describe(void)
{
	return kern_amxbf_on ? "f16/bf16 prefill: split bf16 tile products on prompt rows "
			       "(w_hi a_hi + w_hi a_lo + w_lo a_hi, fp32 sums, within 2^-16 of "
			       "each product), avx512 on sampled rows (EMBER_AMX_BF16=0: avx512 only)"
			     : "f16/bf16 prefill: avx512 (bf16 tiles off)";
}
#endif
