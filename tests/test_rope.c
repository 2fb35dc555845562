/*
 * test_rope.c - rope_apply() against the rotation written out per pair
 * (a = x0 c - x1 s, b = x0 s + x1 c, each product rounded, no FMA), bit
 * for bit: for adjacent pairs (Llama) and NeoX halves, full and partial
 * rotary widths whose pair counts are not multiples of the vector
 * steps, several rows and heads.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "model.h"
#include "rope.h"

static uint64_t rp_rng = 0x243f6a8885a308d3ull;

static float rp_uniform(void)
{
	rp_rng = rp_rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)(rp_rng >> 40) / 16777216.0f * 8.0f - 4.0f;
}

/* The rotation of one pair, kept out of any vector form: volatile stops
 * the compiler from vectorising or contracting this reference. */
static void rp_pair(float *a, float *b, float c, float s)
{
	volatile float p0 = *a * c, p1 = *b * s, p2 = *a * s, p3 = *b * c;

	*a = p0 - p1;
	*b = p2 + p3;
}

static void rp_check(int neox, uint32_t hd, uint32_t n_rot)
{
	struct arch_desc a = *arch_find("llama", 5);
	struct model m;
	const uint32_t n = 3, heads = 5, half = n_rot / 2;
	const size_t len = (size_t)n * heads * hd;
	float *x = malloc(len * sizeof(float)), *ref = malloc(len * sizeof(float));
	float *table = malloc((size_t)n * half * 2 * sizeof(float));

	memset(&m, 0, sizeof(m));
	a.rope = neox ? ARCH_ROPE_NEOX : ARCH_ROPE_NORM;
	m.arch = &a;
	m.hp.head_dim_k = hd;
	m.hp.n_rot = n_rot;
	for (size_t i = 0; i < len; i++)
		x[i] = ref[i] = rp_uniform();
	for (size_t i = 0; i < (size_t)n * half * 2; i++)
		table[i] = rp_uniform() / 4.0f;
	rope_apply(&m, table, x, n, heads);
	for (uint32_t t = 0; t < n; t++)
		for (uint32_t h = 0; h < heads; h++)
			for (uint32_t i = 0; i < half; i++) {
				float *xh = ref + ((size_t)t * heads + h) * hd;
				const float *cs = table + ((size_t)t * half + i) * 2;

				if (neox)
					rp_pair(&xh[i], &xh[i + half], cs[0], cs[1]);
				else
					rp_pair(&xh[2 * i], &xh[2 * i + 1], cs[0], cs[1]);
			}
	ck_assert_msg(memcmp(x, ref, len * sizeof(float)) == 0, "rope %s hd=%u n_rot=%u differs",
		      neox ? "neox" : "norm", hd, n_rot);
	free(x);
	free(ref);
	free(table);
}

START_TEST(rope_equals_the_pairwise_rotation_bit_for_bit)
{
	static const uint32_t shapes[][2] = {{64, 64}, {64, 24}, {80, 80}, {96, 22}, {6, 6}, {8, 2}};

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		rp_check(0, shapes[k][0], shapes[k][1]);
		rp_check(1, shapes[k][0], shapes[k][1]);
	}
}
END_TEST

Suite *suite_rope(void)
{
	Suite *s = suite_create("rope");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, rope_equals_the_pairwise_rotation_bit_for_bit);
	suite_add_tcase(s, tc);
	return s;
}
