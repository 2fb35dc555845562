/*
 * amx_acts.h - test activations for the AMX kernels' tests (test_amx_bf16.c,
 * test_amx_split.c): random floats and the int8 path's blocks and
 * summaries made from them, set in a kern_gemm_args. Include after the
 * kernel files (kernels_impl.h, amx_selftest.h) and check.h.
 */
#ifndef EMBER_TEST_AMX_ACTS_H
#define EMBER_TEST_AMX_ACTS_H

#include <stdint.h>
#include <stdlib.h>

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
