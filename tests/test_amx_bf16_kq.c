/*
 * test_amx_bf16_kq.c - the AMX bf16 prefill on Q4_K, Q5_K and Q6_K rows
 * (amx_bf16_kq.h's B tiles in kernels_amx_bf16.c's GEMM), on any AVX-512
 * CPU with AVX512-BF16: both kernel files compiled here on the software
 * tile model (amx_tile_model.h), as test_amx_bf16.c does for Q4_0/Q8_0.
 *   - each B tile, file layout and packed rows, bit for bit against
 *     kern_dequantize_row() (quants_ref.c, ggml's arithmetic) rounded to
 *     bf16 (nearest even);
 *   - the GEMM against a float64 product of the bf16-rounded operands
 *     (1e-5 of sum |w x|) and the exact one (2^-7 of sum |w x|), packed
 *     rows bit for bit the file layout's, row tails the VNNI path's; the
 *     real tiles (on AMX machines) against the same references;
 *   - sampled rows (n_exact) and EMBER_AMX_BF16=0 (the switch off): the
 *     avx512 level's VNNI GEMM bit for bit;
 *   - the prompt rows' Q8_K blocks left to demand (a->lazy): made by the
 *     paths that read them (row tails, no work memory), the eager bytes;
 *   - golden: llama-256's K-quant files' logits with every K-quant
 *     product through the bf16 path within 1.25x llama.cpp's distance of
 *     the exact dequantized reference (test_amx_bf16.c's bound for Q4_0).
 */
#include <check.h>
#include <stdio.h>

#if defined(__x86_64__)
#include "amx_tile_model.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* every AMX symbol of the two files becomes this test's own */
#define kern_amx_gemm_q8_0 kqm_amx_gemm_q8_0
#define kern_amx_gemm_q4_0 kqm_amx_gemm_q4_0
#define kern_amx_i8_gemm_q8_0 kqm_amx_i8_gemm_q8_0
#define kern_amx_i8_gemm_q4_0 kqm_amx_i8_gemm_q4_0
#define kern_amx_pgemm_q8_0 kqm_amx_pgemm_q8_0
#define kern_amx_pgemm_q4_0 kqm_amx_pgemm_q4_0
#define kern_amx_gemm_q4_k kqm_amx_gemm_q4_k
#define kern_amx_gemm_q5_k kqm_amx_gemm_q5_k
#define kern_amx_gemm_q6_k kqm_amx_gemm_q6_k
#define kern_amx_pgemm_q4_k kqm_amx_pgemm_q4_k
#define kern_amx_pgemm_q5_k kqm_amx_pgemm_q5_k
#define kern_amx_pgemm_q6_k kqm_amx_pgemm_q6_k
#define kern_amxbf_gemm_q4_k kqm_amxbf_gemm_q4_k
#define kern_amxbf_gemm_q5_k kqm_amxbf_gemm_q5_k
#define kern_amxbf_gemm_q6_k kqm_amxbf_gemm_q6_k
#define kern_amxbf_pgemm_q4_k kqm_amxbf_pgemm_q4_k
#define kern_amxbf_pgemm_q5_k kqm_amxbf_pgemm_q5_k
#define kern_amxbf_pgemm_q6_k kqm_amxbf_pgemm_q6_k
#define kern_amxbf_pgemm_q8_0 kqm_amxbf_pgemm_q8_0
#define kern_amxbf_pgemm_q4_0 kqm_amxbf_pgemm_q4_0
#define kern_ops_amx kqm_ops_amx
#define kern_amx_enable kqm_amx_enable
#define kern_amxbf_gemm_q8_0 kqm_amxbf_gemm_q8_0
#define kern_amxbf_gemm_q4_0 kqm_amxbf_gemm_q4_0
#define kern_amxbf_on kqm_amxbf_on
#define kern_amxbf_act_row kqm_amxbf_act_row
#define kern_amxbf_b_tile kqm_amxbf_b_tile
#define kern_amxbf_enable kqm_amxbf_enable
#define kern_amxbf_selftest kqm_amxbf_selftest
#define kern_amxbf_scratch kqm_amxbf_scratch
#define kern_amxbf_tiles kqm_amxbf_tiles
#define kern_amxbf_describe kqm_amxbf_describe
#define kern_amxbf_gemm_f16 kqm_amxbf_gemm_f16
#define kern_amxbf_gemm_bf16 kqm_amxbf_gemm_bf16
#define kern_amxbf_glu kqm_amxbf_glu
#define kern_amxbf_glu_ok kqm_amxbf_glu_ok
#define kern_amxbf_glu_y kqm_amxbf_glu_y
#define kern_amx_prompt_args kqm_amx_prompt_args
#define AMX_ALLOC(n) model_alloc(n)
#define AMXBF_ALLOC(n) model_alloc(n)
#include "kernels_amx.c"
#include "kernels_amx_bf16.c"
/* the library's own (real tiles), for AMX machines */
#undef kern_amxbf_gemm_q4_k
#undef kern_amxbf_gemm_q6_k
#undef kern_amxbf_pgemm_q4_k
#undef kern_amxbf_pgemm_q6_k
#undef kern_amxbf_on
#undef kern_amxbf_enable
void kern_amxbf_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
extern int kern_amxbf_on;
int kern_amxbf_enable(char *why, size_t len);


#include "ember.h"
#include "forward.h"
#include "model.h"
#include "testutil.h"

static const uint32_t kqm_types[] = {DTYPE_Q4_K, DTYPE_Q5_K, DTYPE_Q6_K};

static uint16_t kqm_bits(float f)
{
	uint32_t u;

	f = amxbf__round(f);
	memcpy(&u, &f, sizeof(u));
	return (uint16_t)(u >> 16);
}

/* n_out random rows of K-quant wt (every byte random: scales, mins and
 * quants; d and dmin 1e-4 .. 0.01). */
static uint8_t *kqm_weights(uint32_t wt, size_t n_out, size_t n_in, uint32_t *s)
{
	const size_t row = (size_t)dtype_row_size(wt, n_in), bs = dtype_type_size(wt);
	const size_t d_at = wt == DTYPE_Q6_K ? offsetof(struct kern_block_q6_k, d) : 0;
	uint8_t *w = malloc(row * n_out);

	ck_assert_ptr_nonnull(w);
	for (size_t i = 0; i < row * n_out; i++)
		w[i] = (uint8_t)amx_selftest_rand(s);
	for (size_t i = 0; i < row * n_out / bs; i++)
		for (int k = 0; k < (wt == DTYPE_Q6_K ? 1 : 2); k++) {
			uint16_t h = kern_fp32_to_fp16((float)(amx_selftest_rand(s) % 100 + 1) * 1e-4f);

			memcpy(w + i * bs + d_at + 2 * k, &h, sizeof(h));
		}
	return w;
}

/* w packed as the amx level packs it at load (its pack_fn: Q5_K groups
 * of 4; Q4_K groups of KERN_K4L_ROWS = 16 and Q6_K of KERN_Q6L_ROWS = 16,
 * rows in dword lanes). */
static uint8_t *kqm_packed(uint32_t wt, const uint8_t *w, size_t n_out, size_t n_in)
{
	const size_t row = (size_t)dtype_row_size(wt, n_in), bs = dtype_type_size(wt);
	const size_t g = wt == DTYPE_Q6_K ? KERN_Q6L_ROWS : wt == DTYPE_Q4_K ? KERN_K4L_ROWS : 4;
	uint8_t *p = malloc(row * n_out), *tmp = malloc(16 * row);

	ck_assert(p && tmp);
	memcpy(p, w, row * n_out);
	ck_assert_uint_eq(kqm_ops_amx.pack_rows[wt], g);
	ck_assert_uint_eq(n_out % g, 0);
	kqm_ops_amx.pack_fn[wt](p, n_out, n_in / KERN_QKK, bs, g, 0, tmp);
	free(tmp);
	return p;
}

/* Each B tile, file layout and packed, against the scalar dequantization. */
START_TEST(kq_tiles_match_the_scalar_dequantization)
{
	uint32_t s = 17;

	if (!test_bf16_tiles_run("amx_bf16_kq"))
		return;
	for (size_t ti = 0; ti < 3; ti++) {
		const uint32_t wt = kqm_types[ti];
		const size_t n_in = 512, row = (size_t)dtype_row_size(wt, n_in);
		uint8_t *w = kqm_weights(wt, 32, n_in, &s), *p = kqm_packed(wt, w, 32, n_in);
		uint16_t bt[512] __attribute__((aligned(64)));
		float f[32][512];

		for (int n = 0; n < 32; n++)
			ck_assert_int_eq(kern_dequantize_row(wt, w + n * row, f[n], n_in), 0);
		for (int pk = 0; pk < 2; pk++)
			for (size_t g = 0; g < 2; g++)
				for (size_t b = 0; b < n_in / 32; b++) {
					memset(bt, 0xff, sizeof(bt));
					kqm_amxbf_b_tile(pk ? wt | KERN_PACKED : wt,
							 (const char *)(pk ? p : w) + g * 16 * row, row, b,
							 bt);
					for (int r = 0; r < 16; r++)
						for (int n = 0; n < 16; n++)
							for (int i = 0; i < 2; i++)
								ck_assert_msg(
									bt[r * 32 + 2 * n + i] ==
										kqm_bits(f[16 * g + n][32 * b + 2 * r + i]),
									"%s%s group %zu block %zu: tile row %d, weight row %d",
									dtype_name(wt), pk ? " packed" : "", g, b, r, n);
				}
		free(w);
		free(p);
	}
}
END_TEST

struct kqm_case {
	size_t n_out, o0, n_in, n_tok;
};

/* n_out, o0, n_in (chunks of 512: 1280 has three, the last half), n_tok */
static const struct kqm_case kqm_cases[] = {
	{32, 0, 256, 32}, {48, 16, 1280, 33}, {176, 0, 512, 70}, {40, 0, 768, 101},
	{16, 0, 1536, 17}, {292, 4, 512, 40},
};
#define KQM_N_CASES (sizeof(kqm_cases) / sizeof(kqm_cases[0]))

/* One shape on bf16 GEMM g (packed rows): against the references, the
 * file layout's bits (gf's), rows past the last 16 the VNNI path's. A
 * shape the level cannot pack (Q6_K's groups of 16: n_out or o0 not a
 * multiple, kern_pack_type() keeps the file type) runs gf alone. */
static void kqm_check(uint32_t wt, const struct kqm_case *c, uint32_t *s, kern_gemm_fn g,
		      kern_gemm_fn gf)
{
	const size_t n_out = c->n_out, n_in = c->n_in, n_tok = c->n_tok;
	const size_t row = (size_t)dtype_row_size(wt, n_in), nk = n_in / KERN_QKK;
	const size_t bf_end = c->o0 + (n_out - c->o0) / 16 * 16, pr = kqm_ops_amx.pack_rows[wt];
	const int pk = n_out % pr == 0 && c->o0 % pr == 0;
	uint8_t *w = kqm_weights(wt, n_out, n_in, s), *p = pk ? kqm_packed(wt, w, n_out, n_in) : NULL;
	float *xf = malloc(sizeof(float) * n_tok * n_in), *wf = malloc(sizeof(float) * n_in);
	struct kern_block_q8_k *xk = malloc(sizeof(*xk) * n_tok * nk);
	const size_t ny = n_tok * n_out;
	float *y1 = calloc(ny, sizeof(float)), *y2 = calloc(ny, sizeof(float));
	float *y3 = calloc(ny, sizeof(float));
	const kern_gemm_fn vn[] = {kern_avx512_vnni_gemm_q4_k, kern_avx512_vnni_gemm_q5_k,
				   kern_avx512_vnni_gemm_q6_k};
	const int ti = wt == DTYPE_Q4_K ? 0 : wt == DTYPE_Q5_K ? 1 : 2;

	ck_assert(xf && wf && xk && y1 && y2 && y3);
	for (size_t i = 0; i < n_tok * n_in; i++)
		xf[i] = ((float)(amx_selftest_rand(s) % 20001) - 10000.0f) * 1e-4f;
	for (size_t t = 0; t < n_tok; t++)
		kern_ops_for(CPU_LEVEL_AVX512)->quantize_act_q8k(xf + t * n_in, xk + t * nk, n_in);
	struct kern_gemm_args a = {
		.w = w, .w_stride = row, .n_in = n_in, .n_tok = n_tok, .y = y3, .y_stride = n_out,
		.xk = xk, .xf = xf, .xf_stride = n_in,
	};
	gf(&a, c->o0, n_out);
	a.w = pk ? p : w;
	a.y = y1;
	(pk ? g : gf)(&a, c->o0, n_out);
	a.w = w;
	a.y = y2;
	vn[ti](&a, c->o0, n_out);
	ck_assert_msg(memcmp(y1, y3, sizeof(float) * ny) == 0,
		      "%s %zu x %zu x %zu: packed rows differ from the file layout", dtype_name(wt),
		      n_out, n_in, n_tok);
	for (size_t o = c->o0; o < n_out; o++) {
		ck_assert_int_eq(kern_dequantize_row(wt, w + o * row, wf, n_in), 0);
		for (size_t t = 0; t < n_tok; t++) {
			const float *xr = xf + t * n_in;
			const double got = y1[t * n_out + o];
			double rb = 0, re = 0, sa = 0;

			if (o >= bf_end) {
				ck_assert_msg(got == y2[t * n_out + o], "%s: tail row %zu not VNNI's",
					      dtype_name(wt), o);
				continue;
			}
			for (size_t j = 0; j < n_in; j++) {
				rb += (double)amxbf__round(wf[j]) * amxbf__round(xr[j]);
				re += (double)wf[j] * xr[j];
				sa += fabs((double)wf[j] * xr[j]);
			}
			ck_assert_msg(fabs(got - rb) <= 1e-5 * sa + 1e-30,
				      "%s %zu x %zu x %zu: row %zu token %zu: %.9g vs bf16 reference %.9g",
				      dtype_name(wt), n_out, n_in, n_tok, o, t, got, rb);
			ck_assert_msg(fabs(got - re) <= 0x1p-7 * sa,
				      "%s %zu x %zu x %zu: row %zu token %zu: %.9g vs exact %.9g",
				      dtype_name(wt), n_out, n_in, n_tok, o, t, got, re);
		}
	}
	free(w);
	free(p);
	free(xf);
	free(wf);
	free(xk);
	free(y1);
	free(y2);
	free(y3);
}

START_TEST(kq_gemm_matches_the_references)
{
	const kern_gemm_fn pg[] = {kqm_amxbf_pgemm_q4_k, kqm_amxbf_pgemm_q5_k,
				   kqm_amxbf_pgemm_q6_k};
	const kern_gemm_fn fl[] = {kqm_amxbf_gemm_q4_k, kqm_amxbf_gemm_q5_k, kqm_amxbf_gemm_q6_k};
	uint32_t s = 5;

	if (!test_bf16_tiles_run("amx_bf16_kq"))
		return;
	model_products = 0;
	for (size_t ti = 0; ti < 3; ti++)
		for (size_t i = 0; i < KQM_N_CASES; i++)
			kqm_check(kqm_types[ti], &kqm_cases[i], &s, pg[ti], fl[ti]);
	ck_assert(model_ok);
	ck_assert_int_gt(model_products, 0);
}
END_TEST

/* The library's real tiles (AMX machines): the same references. */
START_TEST(kq_real_tiles_match_the_references)
{
	if (!test_bf16_tiles_run("amx_bf16_kq"))
		return;
	if (!kern_level_runs(CPU_LEVEL_AMX)) {
		fprintf(stderr, "amx_bf16_kq: skipping the real tiles: no usable AMX here\n");
		return;
	}
	for (size_t i = 0; i < KQM_N_CASES; i++) {
		uint32_t s = 41 + (uint32_t)i;

		kqm_check(DTYPE_Q4_K, &kqm_cases[i], &s, kern_amxbf_pgemm_q4_k,
			  kern_amxbf_gemm_q4_k);
		kqm_check(DTYPE_Q6_K, &kqm_cases[i], &s, kern_amxbf_pgemm_q6_k,
			  kern_amxbf_gemm_q6_k);
	}
}
END_TEST

/* The amx level's K-quant entries: sampled rows [0, n_exact) and every
 * row with the bf16 tiles off are the avx512 VNNI GEMM's bits (the
 * GEMV's: test_kquant_batch.c); the prompt rows the bf16 GEMM's alone. */
START_TEST(kq_sampled_rows_and_bf16_off_are_the_vnni_path)
{
	const kern_gemm_fn amx[] = {kqm_amx_pgemm_q4_k, kqm_amx_pgemm_q5_k, kqm_amx_pgemm_q6_k};
	const kern_gemm_fn vn[] = {kern_avx512_vnni_pgemm_q4_k, kern_avx512_vnni_pgemm_q5_k,
				   kern_avx512_vnni_pgemm_q6_k};
	const kern_gemm_fn bf[] = {kqm_amxbf_pgemm_q4_k, kqm_amxbf_pgemm_q5_k,
				   kqm_amxbf_pgemm_q6_k};
	const size_t n_out = 64, n_in = 768, n_tok = 45, nk = n_in / KERN_QKK;
	uint32_t s = 9;

	if (!test_bf16_tiles_run("amx_bf16_kq"))
		return;
	for (size_t ti = 0; ti < 3; ti++)
		for (size_t ne = 0; ne <= n_tok; ne += 15) {
			const uint32_t wt = kqm_types[ti];
			const size_t row = (size_t)dtype_row_size(wt, n_in);
			uint8_t *w = kqm_weights(wt, n_out, n_in, &s);
			uint8_t *p = kqm_packed(wt, w, n_out, n_in);
			float *xf = malloc(sizeof(float) * n_tok * n_in);
			struct kern_block_q8_k *xk = malloc(sizeof(*xk) * n_tok * nk);
			float *y1 = calloc(n_tok * n_out, sizeof(float));
			float *y2 = calloc(n_tok * n_out, sizeof(float));

			ck_assert(xf && xk && y1 && y2);
			for (size_t i = 0; i < n_tok * n_in; i++)
				xf[i] = ((float)(amx_selftest_rand(&s) % 2001) - 1000.0f) * 1e-3f;
			for (size_t t = 0; t < n_tok; t++)
				kern_ops_for(CPU_LEVEL_AVX512)
					->quantize_act_q8k(xf + t * n_in, xk + t * nk, n_in);
			struct kern_gemm_args a = {
				.w = p, .w_stride = row, .n_in = n_in, .n_tok = n_tok, .y = y1,
				.y_stride = n_out, .xk = xk, .xf = xf, .xf_stride = n_in,
				.n_exact = ne,
			};
			for (int on = 0; on < 2; on++) {
				kqm_amxbf_on = on;
				a.y = y1;
				amx[ti](&a, 0, n_out);
				kqm_amxbf_on = 0;
				a.y = y2;
				a.n_tok = on ? ne : n_tok;
				if (a.n_tok)
					vn[ti](&a, 0, n_out);
				if (on && ne < n_tok) { /* the prompt rows alone */
					struct kern_gemm_args r = a;

					r.xk = xk + ne * nk;
					r.xf = xf + ne * n_in;
					r.y = y2 + ne * n_out;
					r.n_tok = n_tok - ne;
					r.n_exact = 0;
					kqm_amxbf_on = 1;
					bf[ti](&r, 0, n_out);
					kqm_amxbf_on = 0;
				}
				a.n_tok = n_tok;
				ck_assert_msg(memcmp(y1, y2, sizeof(float) * n_tok * n_out) == 0,
					      "%s n_exact %zu bf16 %s: not the VNNI path's bits",
					      dtype_name(wt), ne, on ? "on" : "off");
			}
			free(w);
			free(p);
			free(xf);
			free(xk);
			free(y1);
			free(y2);
		}
	/* the table packs, and decodes, as the avx512 level does */
	for (size_t ti = 0; ti < 3; ti++) {
		const uint32_t wt = kqm_types[ti];
		const struct kern_ops *v = kern_ops_for(CPU_LEVEL_AVX512);

		ck_assert_uint_eq(kqm_ops_amx.pack_rows[wt], v->pack_rows[wt]);
		ck_assert(kqm_ops_amx.pack_fn[wt] == v->pack_fn[wt]);
		ck_assert(kqm_ops_amx.pgemv[wt] == v->pgemv[wt]);
		ck_assert(kqm_ops_amx.gemv[wt] == v->gemv[wt]);
	}
}
END_TEST

/* The prompt rows' Q8_K blocks left unmade (kern_matmul's a->lazy: the
 * bf16 GEMM reads their tiles only): the paths that read them anyway (the
 * VNNI rows past the last 16, the fallback without work memory) make them
 * first (kern_act_ensure), the eager blocks' bytes, so the results are
 * the call's with every block made; where none reads them (48 rows, the
 * memory there) they stay unmade. File layout and packed rows. */
START_TEST(kq_lazy_q8k_blocks_made_on_demand)
{
	const kern_gemm_fn amx[2][3] = {
		{kqm_amx_gemm_q4_k, kqm_amx_gemm_q5_k, kqm_amx_gemm_q6_k},
		{kqm_amx_pgemm_q4_k, kqm_amx_pgemm_q5_k, kqm_amx_pgemm_q6_k}};
	static const int fails[] = {0, 1, 1 << 20};
	const size_t n_in = 512, n_tok = 37, ne = 5, nbf = n_tok - ne, nk = n_in / KERN_QKK;
	uint32_t s = 17;

	if (!test_bf16_tiles_run("amx_bf16_kq"))
		return;
	for (size_t ti = 0; ti < 3; ti++)
		for (int packed = 0; packed < 2; packed++)
			for (size_t n_out = 40; n_out <= 48; n_out += 8)
				for (size_t fi = 0; fi < 3; fi++) {
		const uint32_t wt = kqm_types[ti];
		if (packed && n_out % kqm_ops_amx.pack_rows[wt] != 0)
			continue; /* Q6_K's 40 rows: no packed form (groups of 16) */
		uint8_t *w = kqm_weights(wt, n_out, n_in, &s);
		uint8_t *p = packed ? kqm_packed(wt, w, n_out, n_in) : NULL;
		float *xf = malloc(sizeof(float) * n_tok * n_in);
		struct kern_block_q8_k *xk = malloc(sizeof(*xk) * n_tok * nk);
		struct kern_block_q8_k *xk2 = malloc(sizeof(*xk) * n_tok * nk);
		uint16_t *xb = aligned_alloc(64, sizeof(uint16_t) * kern_amxbf_tokens(nbf) * n_in);
		float *y1 = calloc(n_tok * n_out, sizeof(float));
		float *y2 = calloc(n_tok * n_out, sizeof(float));
		const struct kern_ops *v = kern_ops_for(CPU_LEVEL_AVX512);
		struct kern_act_lazy l = {.quantize_k = v->quantize_act_q8k};

		ck_assert(xf && xk && xk2 && xb && y1 && y2);
		for (size_t i = 0; i < n_tok * n_in; i++)
			xf[i] = ((float)(amx_selftest_rand(&s) % 2001) - 1000.0f) * 1e-3f;
		for (size_t t = 0; t < n_tok; t++)
			v->quantize_act_q8k(xf + t * n_in, xk + t * nk, n_in);
		for (size_t t = 0; t < kern_amxbf_tokens(nbf); t++)
			kqm_amxbf_act_row(t < nbf ? xf + (ne + t) * n_in : NULL, n_in, t, xb);
		struct kern_gemm_args a = {
			.w = packed ? p : w, .w_stride = (size_t)dtype_row_size(wt, n_in),
			.n_in = n_in, .n_tok = n_tok, .y = y1, .y_stride = n_out, .xk = xk,
			.xf = xf, .xf_stride = n_in, .n_exact = ne, .xb = xb,
		};
		kqm_amxbf_on = 1;
		/* every block made: the reference */
		model_alloc_fails = fails[fi];
		amx[packed][ti](&a, 0, n_out);
		/* the sampled tokens' blocks made, the prompt rows' NaN */
		memcpy(xk2, xk, sizeof(*xk) * ne * nk);
		memset(xk2 + ne * nk, 0xff, sizeof(*xk) * nbf * nk);
		l.xf = xf + ne * n_in;
		l.xf_stride = n_in;
		l.n_in = n_in;
		l.xk = xk2 + ne * nk;
		l.n = nbf;
		pthread_mutex_init(&l.lock, NULL);
		a.xk = xk2;
		a.lazy = &l;
		a.y = y2;
		model_alloc_fails = fails[fi];
		amx[packed][ti](&a, 0, n_out);
		model_alloc_fails = 0;
		pthread_mutex_destroy(&l.lock);
		kqm_amxbf_on = 0;
		ck_assert_msg(memcmp(y1, y2, sizeof(float) * n_tok * n_out) == 0,
			      "%s%s %zu rows, %d allocations failing: lazy blocks change the result",
			      dtype_name(wt), packed ? " packed" : "", n_out, fails[fi]);
		/* needed: a row tail, or a fallback; then the eager blocks' bytes */
		ck_assert_int_eq(l.done, n_out % 16 != 0 || fails[fi] != 0);
		if (l.done)
			ck_assert(memcmp(xk, xk2, sizeof(*xk) * n_tok * nk) == 0);
		free(w);
		free(p);
		free(xf);
		free(xk);
		free(xk2);
		free(xb);
		free(y1);
		free(y2);
	}
	model_alloc_fails = 0;
	ck_assert(model_ok);
}
END_TEST

/* ---- golden: logits through the bf16 prefill -------------------------------------- */

#define KQG_DIR "../shared/golden/quants/llama-256/"

static const char *const kqg_files[] = {"Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K"};
#define KQG_N_FILES ((int)(sizeof(kqg_files) / sizeof(kqg_files[0])))

/* Every row a prompt row (n_exact 0) on the modelled amx dispatch:
 * forward_eval's logits of every position are sampled rows otherwise. */
#define KQG_GEMM(name, fn)                                                      \
	static void name(const struct kern_gemm_args *a, size_t o0, size_t o1) \
	{                                                                       \
		struct kern_gemm_args r = *a;                                   \
		kern_act_ensure(a);                                             \
		r.n_exact = 0;                                                  \
		r.xb = NULL; /* they would hold the bf16 tokens only */         \
		r.lazy = NULL;                                                  \
		fn(&r, o0, o1);                                                 \
	}
KQG_GEMM(kqg_gemm_q4_k, kqm_amx_gemm_q4_k)
KQG_GEMM(kqg_gemm_q5_k, kqm_amx_gemm_q5_k)
KQG_GEMM(kqg_gemm_q6_k, kqm_amx_gemm_q6_k)

/* test_bf16_golden_check's switch: every K-quant GEMM on the modelled
 * bf16 path. */
static void kqg_bf16(int on)
{
	static const kern_gemm_fn fns[] = {kqg_gemm_q4_k, kqg_gemm_q5_k, kqg_gemm_q6_k};
	static kern_gemm_fn old[3];

	if (on) {
		kqm_amxbf_on = 1;
		for (int i = 0; i < 3; i++)
			old[i] = kern_test_set_gemm(kqm_types[i], fns[i]);
		model_bf16_products = 0;
		return;
	}
	for (int i = 0; i < 3; i++)
		kern_test_set_gemm(kqm_types[i], old[i]);
	kqm_amxbf_on = 0;
	ck_assert_int_gt(model_bf16_products, 0); /* the bf16 tiles ran */
}

START_TEST(golden_kq_logits_through_bf16_within_the_llamacpp_bound)
{
	static const struct test_bf16_golden g = {.suite = "amx_bf16_kq", .dir = KQG_DIR,
						  .prefix = "llama-256/", .width = 7, .own = "Q8_K",
						  .bf16 = kqg_bf16};

	test_bf16_golden_check(&g, kqg_files[_i]);
}
END_TEST

Suite *suite_amx_bf16_kq(void)
{
	Suite *s = suite_create("amx_bf16_kq");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, kq_tiles_match_the_scalar_dequantization);
	tcase_add_test(tc, kq_gemm_matches_the_references);
	tcase_add_test(tc, kq_real_tiles_match_the_references);
	tcase_add_test(tc, kq_sampled_rows_and_bf16_off_are_the_vnni_path);
	tcase_add_test(tc, kq_lazy_q8k_blocks_made_on_demand);
	tcase_add_loop_test(tc, golden_kq_logits_through_bf16_within_the_llamacpp_bound, 0,
			    KQG_N_FILES);
	suite_add_tcase(s, tc);
	return s;
}
#else
START_TEST(kq_needs_x86_64)
{
}
END_TEST

Suite *suite_amx_bf16_kq(void)
{
	Suite *s = suite_create("amx_bf16_kq");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, kq_needs_x86_64);
	suite_add_tcase(s, tc);
	return s;
}
#endif
