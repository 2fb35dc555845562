/*
 * test_vulkan.c - the Vulkan device (engine/compute/vulkan/) on whatever
 * Vulkan device is present (Mesa's lavapipe in `make test`): every shader
 * against the CPU's reference code on random data (dequantization through
 * kern_dequantize_row, rotary through rope.c, norms, activations and
 * attention as forward.c / attention.c define them, in double); every
 * block type's own matmul, prefill gemm and embed on random blocks,
 * K-quant rows of 3 super-blocks. Through compute.h: test_vulkan_pass.c. Without a Vulkan
 * device (or a build without it) each test says why it is skipped and
 * passes.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "compute.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "model.h"
#include "rope.h"
#include "testutil.h"
#include "vk.h"
#include "vk_pc.h"

static uint64_t rng = 88172645463325252ull;

static float frand(void) /* uniform in [-1, 1) */
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *frands(size_t n, float scale)
{
	float *x = malloc(n * sizeof(float));
	size_t i;

	ck_assert_ptr_nonnull(x);
	for (i = 0; i < n; i++)
		x[i] = frand() * scale;
	return x;
}

static void run(const char *name, void *pc, size_t pcb, void *const *bufs, const size_t *bytes,
		const size_t *at, uint32_t n, uint32_t gx, uint32_t gy, uint32_t gz)
{
	char err[EMBER_ERR_MAX] = "";
	int rc = vk_test_dispatch(name, pc, pcb, bufs, bytes, at, n, gx, gy, gz, err);

	ck_assert_msg(rc == 0, "%s: %s", name, err);
}

/* The shader that reads type t: the shared one for the float types, Q8_0
 * and Q4_0, else its own (<base>_<type>). */
static int shader_is_shared(uint32_t t)
{
	return t == DTYPE_F32 || t == DTYPE_F16 || t == DTYPE_BF16 || t == DTYPE_Q8_0 ||
	       t == DTYPE_Q4_0;
}

static void shader_name(char *buf, size_t cap, const char *base, uint32_t t)
{
	if (shader_is_shared(t))
		snprintf(buf, cap, "%s", base);
	else
		snprintf(buf, cap, "%s_%s", base, dtype_name(t));
}

/* ---- matmul: every weight type, bias, accumulate, cap -------------------- */

static const uint32_t mm_types[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q8_0, DTYPE_Q4_0,
				   DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q5_1, DTYPE_IQ4_NL, DTYPE_Q2_K,
				   DTYPE_Q3_K, DTYPE_Q4_K, DTYPE_Q5_K, DTYPE_Q6_K, DTYPE_IQ4_XS};
#define N_MM_TYPES (int)(sizeof(mm_types) / sizeof(mm_types[0]))

/* Row width for type t: whole super-blocks for the 256-element types, a
 * width that is not a multiple of 32 for F32/F16 (the tail path). */
static uint32_t width_for(uint32_t t, uint32_t small)
{
	if (t == DTYPE_F32 || t == DTYPE_F16)
		return small + 4;
	if (t == DTYPE_Q2_K || t == DTYPE_Q3_K || t == DTYPE_Q4_K || t == DTYPE_Q5_K ||
	    t == DTYPE_Q6_K || t == DTYPE_IQ4_XS)
		return 768; /* 3 super-blocks, 24 blocks: threads of a row left idle */
	return small;
}

/* One row of n elements of type t from src: converted or quantized by the
 * CPU's own code; the IQ4 types (which it does not quantize) get random
 * nibbles and a fixed scale. */
static void make_row(uint32_t t, const float *src, uint8_t *dst, uint32_t n)
{
	size_t i, blk = t == DTYPE_IQ4_NL ? 18 : 136, per = t == DTYPE_IQ4_NL ? 32 : 256;

	if (t == DTYPE_F32) {
		memcpy(dst, src, (size_t)n * 4);
	} else if (t == DTYPE_F16 || t == DTYPE_BF16) {
		for (i = 0; i < n; i++)
			((uint16_t *)dst)[i] = t == DTYPE_F16 ? kern_fp32_to_fp16(src[i])
							      : kern_fp32_to_bf16(src[i]);
	} else if (t == DTYPE_IQ4_NL || t == DTYPE_IQ4_XS) {
		for (i = 0; i < dtype_row_size(t, n); i++)
			dst[i] = (uint8_t)((frand() + 1.0f) * 127.9f);
		for (i = 0; i < n / per; i++) {
			uint16_t d = kern_fp32_to_fp16(0.01f);

			memcpy(dst + i * blk, &d, 2);
		}
	} else {
		ck_assert_int_eq(kern_quantize_row(t, src, dst, n), 0);
	}
}

/* Shader `base` (matmul or gemm, its copy for type t) over n_out rows x
 * n_tok tokens against the dequantized rows in double. */
static void check_matmul(const char *base, uint32_t t, uint32_t n_out, uint32_t n_tok)
{
	const uint32_t n_in = width_for(t, 96), gemm = strcmp(base, "gemm") == 0;
	const size_t row = dtype_row_size(t, n_in);
	float *wf = frands((size_t)n_out * n_in, 1.0f), *x = frands((size_t)n_tok * n_in, 1.0f);
	float *bias = frands(n_out, 1.0f), *y = frands((size_t)n_tok * n_out, 1.0f);
	double *want = calloc((size_t)n_tok * n_out, sizeof(double));
	uint8_t *w = calloc(n_out, row);
	float deq[768];
	char name[32];
	uint32_t o, k, i;
	double pre_max = 0.0, want_max = 1e-30, tol = 1e-5;

	if (test_vulkan_skip())
		goto done;
	for (o = 0; o < n_out; o++)
		make_row(t, wf + o * n_in, w + o * row, n_in);
	/* y = W x + b (+ y, then capped: the flags the head and residual use) */
	for (o = 0; o < n_out; o++) {
		ck_assert_int_eq(kern_dequantize_row(t, w + o * row, deq, n_in), 0);
		for (k = 0; k < n_tok; k++) {
			double s = bias[o];

			for (i = 0; i < n_in; i++)
				s += (double)deq[i] * x[k * n_in + i];
			pre_max = fmax(pre_max, fabs(s));
			s = 3.0 * tanh(s / 3.0);
			want[k * n_out + o] = s + y[k * n_out + o];
			want_max = fmax(want_max, fabs(want[k * n_out + o]));
		}
	}
	{
		struct pc_matmul pc = {0, 0, 0, 0, t, n_in, n_out, n_tok, 1 | 2 | 4, 3.0f};
		void *bufs[] = {w, x, y, bias};
		size_t bytes[] = {n_out * row, (size_t)n_tok * n_in * 4, (size_t)n_tok * n_out * 4,
				  n_out * 4};
		size_t at[] = {0, 8, 16, 24};

		shader_name(name, sizeof(name), base, t);
		if (gemm) /* tiles of 64 rows x 32 tokens */
			run(name, &pc, sizeof(pc), bufs, bytes, at, 4, (n_out + 63) / 64,
			    (n_tok + 31) / 32, 1);
		else
			run(name, &pc, sizeof(pc), bufs, bytes, at, 4, n_out, (n_tok + 7) / 8, 1);
	}
	/* IQ4_XS's random scales make sums of ~300 before the cap: float
	 * rounding is relative to those, not to the capped results */
	if (t == DTYPE_IQ4_XS) {
		tol = 1e-5 * fmax(1.0, pre_max / want_max);
		printf("vulkan %s iq4_xs: sums before the cap up to %.3g\n", base, pre_max);
	}
	snprintf(name, sizeof(name), "%s %s", base, dtype_name(t));
	test_vulkan_close(y, want, (size_t)n_tok * n_out, tol, name);
done:
	free(wf), free(x), free(bias), free(y), free(want), free(w);
}

START_TEST(matmul_matches_dequantized_reference)
{
	check_matmul("matmul", mm_types[_i], 37, 11);
}
END_TEST

/* The prefill GEMM: ragged in both tiles (70 rows = 64 + 6, 37 tokens =
 * 32 + 5), F32/F16 rows with a tail past the last whole block. */
START_TEST(gemm_matches_dequantized_reference)
{
	check_matmul("gemm", mm_types[_i], 70, 37);
}
END_TEST

/* ---- norms ---------------------------------------------------------------- */

START_TEST(norms_match_forward_c)
{
	/* 0: RMSNorm; 1: LayerNorm with bias, through a row map; 2: RMSNorm of
	 * more rows than one dispatch dimension holds (heads of a long chunk). */
	const int layer = _i == 1;
	const uint32_t d = _i == 2 ? 8 : 200, rows = _i == 2 ? 40000 : 5;
	float *x = frands((size_t)rows * d, 2.0f), *gain = frands(d, 1.0f), *b = frands(d, 1.0f);
	float *out = calloc((size_t)rows * d, sizeof(float));
	double *want = calloc((size_t)rows * d, sizeof(double));
	uint32_t map[5] = {4, 0, 3, 1, 2}, r, i;

	if (test_vulkan_skip())
		goto done;
	for (r = 0; r < rows; r++) {
		const float *xr = x + (size_t)(layer ? map[r] : r) * d;
		double mean = 0.0, var = 0.0;

		for (i = 0; layer && i < d; i++)
			mean += xr[i] / (double)d;
		for (i = 0; i < d; i++)
			var += (xr[i] - mean) * (xr[i] - mean);
		for (i = 0; i < d; i++)
			want[(size_t)r * d + i] = (xr[i] - mean) / sqrt(var / d + 1e-5) * gain[i] +
						  (layer ? b[i] : 0.0);
	}
	{
		struct pc_norm pc = {0, 0, 0, 0, 0, d, d, d, layer ? 1 | 2 | 4 : 0, 1e-5f, rows};
		void *bufs[] = {x, out, gain, b, map};
		size_t bytes[] = {(size_t)rows * d * 4, (size_t)rows * d * 4, d * 4, d * 4, sizeof(map)};
		size_t at[] = {0, 8, 16, 24, 32};

		run("norm", &pc, sizeof(pc), bufs, bytes, at, 5, rows < 32768 ? rows : 32768,
		    (rows + 32767) / 32768, 1);
	}
	test_vulkan_close(out, want, (size_t)rows * d, 1e-5,
		     _i == 0 ? "rmsnorm" : _i == 1 ? "layernorm" : "rmsnorm 40000 rows");
done:
	free(x), free(gain), free(b), free(out), free(want);
}
END_TEST

/* ---- rotary: rope.c's table and rotation ----------------------------------- */

START_TEST(rope_matches_rope_c)
{
	const uint32_t n = 6, heads = 3, hd = 32;
	struct arch_desc a = *arch_find("llama", 5);
	struct model m = {0};
	uint32_t pos[6] = {0, 1, 2, 7, 100, 4000};
	float *x = frands((size_t)n * heads * hd, 1.0f), *table, *y;
	double *want;
	size_t i;

	if (test_vulkan_skip()) {
		free(x);
		return;
	}
	a.rope = _i ? ARCH_ROPE_NEOX : ARCH_ROPE_NORM;
	m.arch = &a;
	m.hp.head_dim_k = hd;
	m.hp.n_rot = 24; /* partial rotary, as StableLM */
	table = calloc((size_t)n * m.hp.n_rot, sizeof(float));
	y = malloc((size_t)n * heads * hd * sizeof(float));
	want = malloc((size_t)n * heads * hd * sizeof(double));
	rope_fill(&m.hp, pos, table, 0, n, 10000.0, 0.5, NULL, 1.0);
	memcpy(y, x, (size_t)n * heads * hd * sizeof(float));
	rope_apply(&m, table, y, n, heads);
	for (i = 0; i < (size_t)n * heads * hd; i++)
		want[i] = y[i];
	{
		struct pc_rope pc = {0, 0, n, heads, hd, m.hp.n_rot / 2, _i};
		void *bufs[] = {x, table};
		size_t bytes[] = {(size_t)n * heads * hd * 4, (size_t)n * m.hp.n_rot * 4};
		size_t at[] = {0, 8};

		run("rope", &pc, sizeof(pc), bufs, bytes, at, 2, (n * heads * 12 + 63) / 64, 1, 1);
	}
	test_vulkan_close(x, want, (size_t)n * heads * hd, 1e-6, _i ? "rope neox" : "rope norm");
	free(x), free(table), free(y), free(want);
}
END_TEST

/* ---- activations: forward.c's activate() ------------------------------------ */

START_TEST(activations_match_forward_c)
{
	const uint32_t act = (uint32_t)_i / 2, gated = (uint32_t)_i % 2, n = 1000;
	float *g = frands(n, 6.0f), *u = frands(n, 2.0f);
	double *want = malloc(n * sizeof(double));
	uint32_t i;
	char what[32];

	if (test_vulkan_skip())
		goto done;
	for (i = 0; i < n; i++) {
		double v = gated ? g[i] : u[i], a;

		a = act == 0 ? v / (1.0 + exp(-v))
		    : act == 1 ? 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
			       : 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
		want[i] = gated ? a * u[i] : a;
	}
	{
		struct pc_act pc = {0, 0, n, act, gated};
		void *bufs[] = {g, u};
		size_t bytes[] = {n * 4, n * 4};
		size_t at[] = {0, 8};

		run("act", &pc, sizeof(pc), bufs, bytes, at, 2, (n + 63) / 64, 1, 1);
	}
	snprintf(what, sizeof(what), "act %s%s", arch_act_name((enum arch_act)act),
		 gated ? " gated" : "");
	test_vulkan_close(u, want, n, 1e-6, what);
done:
	free(g), free(u), free(want);
}
END_TEST

/* ---- embedding rows ----------------------------------------------------------- */

START_TEST(embed_matches_dequantize_row)
{
	const uint32_t t = mm_types[_i], d = width_for(t, 64) == 68 ? 64 : width_for(t, 64);
	/* (the shader may contract d * q - m into one FMA: 1e-6, not 0; the
	 * per-type embeds write a 32-element block per invocation) */
	const uint32_t per = shader_is_shared(t) ? 1 : 32;
	const uint32_t vocab = 9, n = 4;
	const size_t row = dtype_row_size(t, d);
	float *src = frands((size_t)vocab * d, 1.0f), *x = calloc((size_t)n * d, sizeof(float));
	uint8_t *w = calloc(vocab, row);
	uint32_t tokens[4] = {8, 0, 3, 3}, r, i;
	double *want = malloc((size_t)n * d * sizeof(double));
	float deq[768];
	char name[32];

	if (test_vulkan_skip())
		goto done;
	for (r = 0; r < vocab; r++)
		make_row(t, src + r * d, w + r * row, d);
	for (r = 0; r < n; r++) {
		kern_dequantize_row(t, w + tokens[r] * row, deq, d);
		for (i = 0; i < d; i++)
			want[r * d + i] = deq[i] * 8.0;
	}
	{
		struct pc_embed pc = {0, 0, 0, t, d, n, 8.0f};
		void *bufs[] = {w, x, tokens};
		size_t bytes[] = {vocab * row, (size_t)n * d * 4, sizeof(tokens)};
		size_t at[] = {0, 8, 16};

		shader_name(name, sizeof(name), "embed", t);
		run(name, &pc, sizeof(pc), bufs, bytes, at, 3, (n * d / per + 63) / 64, 1, 1);
	}
	test_vulkan_close(x, want, (size_t)n * d, 1e-6, dtype_name(t));
done:
	free(src), free(x), free(w), free(want);
}
END_TEST

/* ---- keys and values into a cache, then attention ------------------------------ */

/* Cache element (head h, position j, dim i), F32 or F16 as stored. */
static double cache_at(const void *c, int f16, uint32_t n_ctx, uint32_t d, uint32_t h,
		       uint32_t j, uint32_t i)
{
	size_t e = ((size_t)h * n_ctx + j) * d + i;

	return f16 ? kern_fp16_to_fp32(((const uint16_t *)c)[e]) : ((const float *)c)[e];
}

/* Variants: 0 plain F32, 1 F16 cache + window + soft-cap, 2 ALiBi (bf16). */
START_TEST(kv_store_and_attention_match_the_reference)
{
	const int f16 = _i == 1;
	const uint32_t heads = 4, kvh = 2, dk = 32, dv = 48, n_ctx = 80, pos0 = 70, n = 9;
	const uint32_t window = _i == 1 ? 20 : 0, alibi = _i == 2 ? 2 : 0;
	const float scale = 0.2f, cap = _i == 1 ? 5.0f : 0.0f;
	const size_t elt = f16 ? 2 : 4, kb = (size_t)kvh * n_ctx * dk * elt;
	const size_t vb = (size_t)kvh * n_ctx * dv * elt;
	float *q = frands((size_t)n * heads * dk, 1.0f), *k = frands((size_t)n * kvh * dk, 1.0f);
	float *v = frands((size_t)n * kvh * dv, 1.0f), *out = calloc((size_t)n * heads * dv, 4);
	float *pre = frands((size_t)kvh * n_ctx * (dk > dv ? dk : dv), 1.0f);
	float slopes[4];
	uint8_t *kc = calloc(1, kb), *vc = calloc(1, vb);
	double *want = calloc((size_t)n * heads * dv, sizeof(double));
	uint32_t t, h, j, i;

	if (test_vulkan_skip())
		goto done;
	for (h = 0; h < heads; h++)
		slopes[h] = kern_bf16_to_fp32(kern_fp32_to_bf16(
			(float)arch_alibi_slope(h, heads, 8.0)));
	/* Earlier positions, as a previous step left them. */
	for (i = 0; i < (size_t)kvh * n_ctx * dk; i++)
		f16 ? (void)(((uint16_t *)kc)[i] = kern_fp32_to_fp16(pre[i]))
		    : (void)(((float *)kc)[i] = pre[i]);
	for (i = 0; i < (size_t)kvh * n_ctx * dv; i++)
		f16 ? (void)(((uint16_t *)vc)[i] = kern_fp32_to_fp16(pre[i] * 0.5f))
		    : (void)(((float *)vc)[i] = pre[i] * 0.5f);
	{
		struct pc_kv_store pc = {0, 0, 0, 0, 0, pos0, n, kvh, dk, dv, n_ctx, (uint32_t)f16, 0};
		void *bufs[] = {k, v, kc, vc};
		size_t bytes[] = {(size_t)n * kvh * dk * 4, (size_t)n * kvh * dv * 4, kb, vb};
		size_t at[] = {0, 8, 16, 24};

		run("kv_store", &pc, sizeof(pc), bufs, bytes, at, 4,
		    (uint32_t)((n * kvh * (dk + dv) + 63) / 64), 1, 1);
	}
	/* The new rows landed where kv_cache.h would put them. */
	for (t = 0; t < n; t++)
		for (h = 0; h < kvh; h++)
			for (i = 0; i < dk; i++) {
				double got = cache_at(kc, f16, n_ctx, dk, h, pos0 + t, i);
				double w = f16 ? kern_fp16_to_fp32(kern_fp32_to_fp16(
							 k[(t * kvh + h) * dk + i]))
					       : k[(t * kvh + h) * dk + i];

				ck_assert_msg(got == w, "kv_store key %u %u %u: %g != %g", t, h, i,
					      got, w);
			}
	/* softmax((q.k + bias) scale, capped) v over the causal (windowed) range */
	for (t = 0; t < n; t++)
		for (h = 0; h < heads; h++) {
			const uint32_t g = h / (heads / kvh), p = pos0 + t;
			const uint32_t lo = window && p + 1 > window ? p + 1 - window : 0;
			double s[80], mx = -INFINITY, l = 0.0;

			for (j = lo; j <= p; j++) {
				double d = 0.0;

				for (i = 0; i < dk; i++)
					d += q[(t * heads + h) * dk + i] *
					     cache_at(kc, f16, n_ctx, dk, g, j, i);
				if (alibi)
					d += kern_bf16_to_fp32(kern_fp32_to_bf16(
						slopes[h] * kern_bf16_to_fp32(kern_fp32_to_bf16((float)j))));
				s[j] = d * scale;
				if (cap > 0)
					s[j] = cap * tanh(s[j] / cap);
				mx = fmax(mx, s[j]);
			}
			for (j = lo; j <= p; j++)
				l += exp(s[j] - mx);
			for (i = 0; i < dv; i++) {
				double acc = 0.0;

				for (j = lo; j <= p; j++)
					acc += exp(s[j] - mx) * cache_at(vc, f16, n_ctx, dv, g, j, i);
				want[(t * heads + h) * dv + i] = acc / l;
			}
		}
	{
		struct pc_attention pc = {0, 0, 0, 0, 0, 0, pos0, heads, kvh, dk, dv, n_ctx,
					  (uint32_t)f16, window, alibi, scale, cap, 0};
		void *bufs[] = {q, out, kc, vc, slopes};
		size_t bytes[] = {(size_t)n * heads * dk * 4, (size_t)n * heads * dv * 4, kb, vb,
				  sizeof(slopes)};
		size_t at[] = {0, 8, 16, 24, 32};

		run("attention", &pc, sizeof(pc), bufs, bytes, at, 5, heads, n, 1);
	}
	test_vulkan_close(out, want, (size_t)n * heads * dv, 1e-5,
		     _i == 0 ? "attention f32" : _i == 1 ? "attention f16 window cap"
							   : "attention alibi");
done:
	free(q), free(k), free(v), free(out), free(pre), free(kc), free(vc), free(want);
}
END_TEST

Suite *suite_vulkan(void)
{
	Suite *s = suite_create("vulkan");
	TCase *tc = tcase_create("shaders");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, matmul_matches_dequantized_reference, 0, N_MM_TYPES);
	tcase_add_loop_test(tc, gemm_matches_dequantized_reference, 0, N_MM_TYPES);
	tcase_add_loop_test(tc, norms_match_forward_c, 0, 3);
	tcase_add_loop_test(tc, rope_matches_rope_c, 0, 2);
	tcase_add_loop_test(tc, activations_match_forward_c, 0, 6);
	tcase_add_loop_test(tc, embed_matches_dequantize_row, 0, N_MM_TYPES);
	tcase_add_loop_test(tc, kv_store_and_attention_match_the_reference, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}
