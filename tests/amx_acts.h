/*
 * amx_acts.h - test data for the AMX kernels' tests (test_amx_bf16.c,
 * test_amx_split.c): random Q8_0/Q4_0 rows, the same rows packed as the
 * avx512 level packs them, and random activations with the int8 path's
 * blocks and summaries made from them, set in a kern_gemm_args. Include
 * after the kernel files (kernels_impl.h, amx_selftest.h) and check.h.
 */
#ifndef EMBER_TEST_AMX_ACTS_H
#define EMBER_TEST_AMX_ACTS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* n_out random rows of type wt, n_in elements (scales 1e-4 .. 0.1). */
static uint8_t *amx_test_weights(uint32_t wt, size_t n_out, size_t n_in, uint32_t *s)
{
	const size_t row = (size_t)dtype_row_size(wt, n_in);
	const size_t bs = wt == DTYPE_Q8_0 ? sizeof(struct kern_block_q8_0)
					   : sizeof(struct kern_block_q4_0);
	uint8_t *w = malloc(row * n_out);

	ck_assert_ptr_nonnull(w);
	for (size_t i = 0; i < row * n_out; i++)
		w[i] = (uint8_t)amx_selftest_rand(s);
	for (size_t i = 0; i < row * n_out / bs; i++) {
		uint16_t h = kern_fp32_to_fp16((float)(amx_selftest_rand(s) % 1000 + 1) * 1e-4f);

		memcpy(w + i * bs, &h, sizeof(h));
	}
	return w;
}

/* w's n_out rows (a multiple of 16) tiled as the avx512 level packs them. */
static uint8_t *amx_test_packed(uint32_t wt, const uint8_t *w, size_t n_out, size_t n_in)
{
	const size_t row = (size_t)dtype_row_size(wt, n_in), bs = dtype_type_size(wt);
	uint8_t *p = malloc(row * n_out), *tmp = malloc(16 * row);

	ck_assert(p && tmp);
	memcpy(p, w, row * n_out);
	(wt == DTYPE_Q4_0 ? kern_avx512_pack_q4_0 : kern_avx512_pack_q8_0)(
		p, n_out, n_in / dtype_block(wt), bs, 16, 0, tmp);
	free(tmp);
	return p;
}

/* n_tok tokens of n_in random activations (-1 .. 1, from *s): floats,
 * and the int8 path's blocks and summaries, set in a's fields. */
struct amx_acts {
	float *xf, *xd;
	struct kern_block_q8a *x;
	int32_t *xs8;
};

static void amx_acts_make(struct amx_acts *m, size_t n_tok, size_t n_in, uint32_t *s,
			  struct kern_gemm_args *a)
{
	const size_t nb = n_in / KERN_QK, pad = kern_act_groups_pad(nb);

	m->xf = malloc(sizeof(float) * n_tok * n_in);
	m->x = malloc(sizeof(*m->x) * n_tok * nb);
	m->xd = malloc(sizeof(float) * n_tok * pad);
	m->xs8 = malloc(sizeof(int32_t) * n_tok * pad);
	ck_assert(m->xf && m->x && m->xd && m->xs8);
	for (size_t i = 0; i < n_tok * n_in; i++)
		m->xf[i] = ((float)(amx_selftest_rand(s) % 2001) - 1000.0f) * 1e-3f;
	for (size_t k = 0; k < n_tok; k++) {
		kern_ops_ref.quantize_act(m->xf + k * n_in, m->x + k * nb, n_in);
		kern_act_summarize(m->x + k * nb, nb, m->xd + k * pad, m->xs8 + k * pad);
	}
	a->n_in = n_in;
	a->x = m->x;
	a->x_stride = nb * sizeof(*m->x);
	a->n_tok = n_tok;
	a->xd = m->xd;
	a->xs8 = m->xs8;
	a->xd_stride = pad;
	a->xf = m->xf;
	a->xf_stride = n_in;
}

static void amx_acts_free(struct amx_acts *m)
{
	free(m->xf);
	free(m->x);
	free(m->xd);
	free(m->xs8);
}

#endif
