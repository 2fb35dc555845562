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

/* 4 floats: GCC and Clang vector extension (SSE on x86-64, NEON on
 * AArch64). Built from scalars, not shuffled, so both compilers take it. */
typedef float rope_v4 __attribute__((vector_size(16)));

static rope_v4 rope_load(const float *p)
{
	return (rope_v4){p[0], p[1], p[2], p[3]};
}

static void rope_store(float *p, rope_v4 v)
{
	p[0] = v[0];
	p[1] = v[1];
	p[2] = v[2];
	p[3] = v[3];
}

/* One head's pairs [i0, half) (scalar): a = x0 c - x1 s, b = x0 s + x1 c. */
static void rope_pairs(float *xh, const float *cs, uint32_t i0, uint32_t half, int neox)
{
	for (uint32_t i = i0; i < half; i++) {
		float *a = neox ? &xh[i] : &xh[2 * i];
		float *b = neox ? &xh[i + half] : &xh[2 * i + 1];
		float c = cs[2 * i], s = cs[2 * i + 1], x0 = *a, x1 = *b;

		*a = x0 * c - x1 * s;
		*b = x0 * s + x1 * c;
	}
}

/* rope_pairs() 4 (NeoX) or 2 (adjacent pairs) at a time on 4 lanes: per
 * element the same two products and one difference or sum (C11 mode
 * contracts nothing into an FMA; x0 s + x1 c = x1 c + x0 s exactly, and
 * p - q = p + (-1 q) exactly), so the same bits as the scalar loop
 * (tests/test_rope.c). The scalar loop was ~0.3-0.4% of a step (perf,
 * decode and prefill). */
static void rope_head(float *xh, const float *cs, uint32_t half, int neox)
{
	uint32_t i = 0;

	if (neox) {
		for (; i + 4 <= half; i += 4) {
			const rope_v4 x0 = rope_load(xh + i), x1 = rope_load(xh + i + half);
			const rope_v4 c = {cs[2 * i], cs[2 * i + 2], cs[2 * i + 4], cs[2 * i + 6]};
			const rope_v4 s = {cs[2 * i + 1], cs[2 * i + 3], cs[2 * i + 5], cs[2 * i + 7]};

			rope_store(xh + i, x0 * c - x1 * s);
			rope_store(xh + i + half, x0 * s + x1 * c);
		}
	} else {
		const rope_v4 sign = {-1.0f, 1.0f, -1.0f, 1.0f};

		for (; i + 2 <= half; i += 2) {
			const rope_v4 x = rope_load(xh + 2 * i);
			const rope_v4 xs = {x[1], x[0], x[3], x[2]};
			const rope_v4 c = {cs[2 * i], cs[2 * i], cs[2 * i + 2], cs[2 * i + 2]};
			const rope_v4 s = {cs[2 * i + 1], cs[2 * i + 1], cs[2 * i + 3], cs[2 * i + 3]};

			rope_store(xh + 2 * i, x * c + (xs * s) * sign);
		}
	}
	rope_pairs(xh, cs, i, half, neox);
}

void rope_apply(const struct model *m, const float *table, float *x, uint32_t n, uint32_t n_heads)
{
	const uint32_t hd = m->hp.head_dim_k, half = m->hp.n_rot / 2;
	const int neox = m->arch->rope == ARCH_ROPE_NEOX;
	uint32_t t, h;

	if (m->arch->rope == ARCH_ROPE_NONE)
		return;
	for (t = 0; t < n; t++)
		for (h = 0; h < n_heads; h++)
			rope_head(x + ((size_t)t * n_heads + h) * hd, table + (size_t)t * half * 2, half,
				  neox);
}
