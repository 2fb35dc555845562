/* rope.c - rotary tables and their application (rope.h). */
#include "rope.h"

#include <math.h>
#include <stddef.h>

const float *rope_divisors(const struct model *m, uint32_t n_ctx)
{
	if (m->w[ARCH_T_ROPE_FREQS].data)
		return m->w[ARCH_T_ROPE_FREQS].data;
	if (m->w[ARCH_T_ROPE_LONG].data)
		return n_ctx > m->hp.rope_orig_ctx ? m->w[ARCH_T_ROPE_LONG].data
						   : m->w[ARCH_T_ROPE_SHORT].data;
	return NULL;
}

void rope_fill(const struct model_hparams *hp, const uint32_t *pos, float *table, uint32_t r0,
	       uint32_t n, double base, double scale, const float *div, double mscale)
{
	const uint32_t half = hp->n_rot / 2;
	uint32_t t, i;

	for (t = r0; t < r0 + n; t++)
		for (i = 0; i < half; i++) {
			double freq = pow(base, -2.0 * i / hp->n_rot) * scale / (div ? div[i] : 1.0);
			double theta = (double)pos[t] * freq;
			float *cs = table + ((size_t)t * half + i) * 2;

			cs[0] = (float)(cos(theta) * mscale);
			cs[1] = (float)(sin(theta) * mscale);
		}
}

void rope_apply(const struct model *m, const float *table, float *x, uint32_t n, uint32_t n_heads)
{
	const uint32_t hd = m->hp.head_dim_k, half = m->hp.n_rot / 2;
	const int neox = m->arch->rope == ARCH_ROPE_NEOX;
	uint32_t t, h, i;

	if (m->arch->rope == ARCH_ROPE_NONE)
		return;
	for (t = 0; t < n; t++)
		for (h = 0; h < n_heads; h++) {
			float *xh = x + ((size_t)t * n_heads + h) * hd;
			const float *cs = table + (size_t)t * half * 2;

			for (i = 0; i < half; i++) {
				float *a = neox ? &xh[i] : &xh[2 * i];
				float *b = neox ? &xh[i + half] : &xh[2 * i + 1];
				float c = cs[2 * i], s = cs[2 * i + 1], x0 = *a, x1 = *b;

				*a = x0 * c - x1 * s;
				*b = x0 * s + x1 * c;
			}
		}
}
