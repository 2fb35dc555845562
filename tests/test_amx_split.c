/*
 * test_amx_split.c - numbers by token purpose on the AMX level (issue
 * 17): a call's tokens [0, n_exact) on the int8 path, the rest on the
 * bf16 tiles (kernels_amx.c amx__split, kern_matmul_n_split), and the
 * forward pass's layout of a step (sampled rows first, forward.c plan()).
 * The kernel files run on the software tile model (amx_tile_model.h) as
 * in test_amx_bf16.c, so the checks run on any CPU with AVX512-BF16:
 *   - the dispatch: exact rows bit for bit a lone int8 call's, bf16 rows
 *     a lone bf16 call's and each its own call's, whatever the split;
 *   - the bf16 tokens' int8 blocks left to demand (kern_act_ensure):
 *     the same results where a path reads them (row tails, fallbacks);
 *   - the forward pass: a sequence's sampled logits bit for bit the same
 *     alone, after a prefix hit, and in a mixed step, on the model and on
 *     the library as it runs here (real tiles on an AMX machine; another
 *     level elsewhere, said on stderr).
 */
#include <check.h>
#include <stdio.h>

#if defined(__x86_64__)
#include "amx_tile_model.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* every AMX symbol of the two files becomes this test's own */
#define kern_amx_gemm_q8_0 spm_amx_gemm_q8_0
#define kern_amx_gemm_q4_0 spm_amx_gemm_q4_0
#define kern_amx_i8_gemm_q8_0 spm_amx_i8_gemm_q8_0
#define kern_amx_i8_gemm_q4_0 spm_amx_i8_gemm_q4_0
#define kern_amx_pgemm_q8_0 spm_amx_pgemm_q8_0
#define kern_amx_pgemm_q4_0 spm_amx_pgemm_q4_0
#define kern_amx_gemm_q4_k spm_amx_gemm_q4_k
#define kern_amx_gemm_q5_k spm_amx_gemm_q5_k
#define kern_amx_gemm_q6_k spm_amx_gemm_q6_k
#define kern_amx_pgemm_q4_k spm_amx_pgemm_q4_k
#define kern_amx_pgemm_q5_k spm_amx_pgemm_q5_k
#define kern_amx_pgemm_q6_k spm_amx_pgemm_q6_k
#define kern_amxbf_gemm_q4_k spm_amxbf_gemm_q4_k
#define kern_amxbf_gemm_q5_k spm_amxbf_gemm_q5_k
#define kern_amxbf_gemm_q6_k spm_amxbf_gemm_q6_k
#define kern_amxbf_pgemm_q4_k spm_amxbf_pgemm_q4_k
#define kern_amxbf_pgemm_q5_k spm_amxbf_pgemm_q5_k
#define kern_amxbf_pgemm_q6_k spm_amxbf_pgemm_q6_k
#define kern_amxbf_pgemm_q8_0 spm_amxbf_pgemm_q8_0
#define kern_amxbf_pgemm_q4_0 spm_amxbf_pgemm_q4_0
#define kern_ops_amx spm_ops_amx
#define kern_amx_enable spm_amx_enable
#define kern_amxbf_gemm_q8_0 spm_amxbf_gemm_q8_0
#define kern_amxbf_gemm_q4_0 spm_amxbf_gemm_q4_0
#define kern_amxbf_on spm_amxbf_on
#define kern_amxbf_min_tok spm_amxbf_min_tok
#define kern_amxbf_act_row spm_amxbf_act_row
#define kern_amxbf_b_tile spm_amxbf_b_tile
#define kern_amxbf_enable spm_amxbf_enable
#define kern_amxbf_selftest spm_amxbf_selftest
#define kern_amxbf_scratch spm_amxbf_scratch
#define kern_amxbf_tiles spm_amxbf_tiles
#define kern_amxbf_describe spm_amxbf_describe
#define kern_amxbf_gemm_f16 spm_amxbf_gemm_f16
#define kern_amxbf_gemm_bf16 spm_amxbf_gemm_bf16
#define kern_amxbf_glu spm_amxbf_glu
#define kern_amxbf_glu_ok spm_amxbf_glu_ok
#define kern_amxbf_glu_y spm_amxbf_glu_y
#define kern_amx_prompt_args spm_amx_prompt_args
/* both files' work memory through the model's failing hook */
#define AMX_ALLOC(n) model_alloc(n)
#define AMXBF_ALLOC(n) model_alloc(n)
#include "kernels_amx.c"
#include "kernels_amx_bf16.c"
/* the library's switch (the real tiles' dispatch reads it) */
#undef kern_amxbf_on
extern int kern_amxbf_on;

#include "ember.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"
#include "testutil.h"
#include "amx_acts.h"

/* y's rows [t0, t0 + n) against the same rows of ref (rows n_out
 * floats apart), bit for bit. */
static void spm_same_rows(const float *y, const float *ref, size_t t0, size_t n, size_t n_out,
			  const char *what, uint32_t wt, size_t n_tok, size_t ne)
{
	ck_assert_msg(memcmp(y + t0 * n_out, ref, sizeof(float) * n * n_out) == 0,
		      "%s, %zu tokens, exact %zu: %s", dtype_name(wt), n_tok, ne, what);
}

/* a's tokens [t0, t0 + n) as a call of their own into y (n_exact: all
 * exact, or none: the bf16 GEMM's), run by g. */
static void spm_lone(const struct kern_gemm_args *a, size_t t0, size_t n, float *y, int exact,
		     kern_gemm_fn g, size_t n_out)
{
	struct kern_gemm_args r = *a;

	r.x = (const char *)a->x + t0 * a->x_stride;
	r.xd = a->xd + t0 * a->xd_stride;
	r.xs8 = a->xs8 + t0 * a->xd_stride;
	r.xf = a->xf + t0 * a->xf_stride;
	r.xb = NULL;
	r.lazy = NULL;
	r.y = y;
	r.n_tok = n;
	r.n_exact = exact ? n : 0;
	g(&r, 0, n_out);
}

/*
 * Numbers by token purpose (issue 17): a call's tokens [0, n_exact) are
 * the int8 path's, as a call of those tokens alone gives them (avx512's
 * bits: decode's); tokens [n_exact, n_tok) the bf16 GEMM's, as a call of
 * those tokens alone, and each as the bf16 GEMM on that token alone:
 * whatever shares the call, at any count (one token too). From xf, and
 * from ready tiles xb (which hold the bf16 tokens only). Without float
 * activations, or with the tiles off, every token int8. 40 rows: a
 * 32-row group, no 16 (the int8 tail rows), so that path is in too.
 */
START_TEST(bf16_dispatch_by_token_purpose)
{
	static const size_t cases[][2] = {{1, 0}, {1, 1}, {2, 1}, {5, 0}, {5, 5},
					  {20, 3}, {40, 1}, {70, 16}, {33, 32}, {64, 0}};
	const size_t n_out = 40, n_in = 128;
	uint32_t s = 11;

	if (!test_bf16_tiles_run("amx_split"))
		return;
	for (int ti = 0; ti < 2; ti++)
		for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++)
			for (int mode = 0; mode < 4; mode++) { /* xf, xb, no xf, off */
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t n_tok = cases[ci][0], ne = cases[ci][1], nbf = n_tok - ne;
		const kern_gemm_fn amx = ti ? spm_amx_gemm_q4_0 : spm_amx_gemm_q8_0;
		const kern_gemm_fn bf = ti ? spm_amxbf_gemm_q4_0 : spm_amxbf_gemm_q8_0;
		const kern_gemm_fn i8 = ti ? kern_avx512_gemm_q4_0 : kern_avx512_gemm_q8_0;
		uint8_t *w = amx_test_weights(wt, n_out, n_in, &s);
		float *y = calloc(n_tok * n_out, sizeof(float)), *r = calloc(n_tok * n_out, sizeof(float));
		uint16_t *xb = aligned_alloc(64, sizeof(uint16_t) * (kern_amxbf_tokens(nbf) + 32) * n_in);
		struct kern_gemm_args a = {
			.w = w, .w_stride = (size_t)dtype_row_size(wt, n_in), .y = y, .y_stride = n_out,
		};
		struct amx_acts m;
		const int tiles = mode != 3 && mode != 2 && nbf > 0;

		ck_assert(y && r && xb);
		amx_acts_make(&m, n_tok, n_in, &s, &a);
		a.n_exact = ne;
		if (mode == 1) {
			for (size_t t = 0; t < kern_amxbf_tokens(nbf); t++)
				spm_amxbf_act_row(t < nbf ? m.xf + (ne + t) * n_in : NULL, n_in, t, xb);
			a.xb = xb;
		}
		if (mode == 2)
			a.xf = NULL;
		spm_amxbf_on = mode != 3;
		model_bf16_products = 0;
		amx(&a, 0, n_out);
		ck_assert_msg((model_bf16_products > 0) == tiles, "%s %zu/%zu mode %d: bf16 tiles %s",
			      dtype_name(wt), n_tok, ne, mode, tiles ? "not run" : "ran");
		a.xf = m.xf;
		if (ne > 0) {
			spm_lone(&a, 0, ne, r, 1, i8, n_out);
			spm_same_rows(y, r, 0, ne, n_out, "exact rows not a lone int8 call's", wt, n_tok,
				      ne);
		}
		if (nbf > 0) {
			spm_lone(&a, ne, nbf, r, !tiles, tiles ? bf : i8, n_out);
			spm_same_rows(y, r, ne, nbf, n_out,
				      tiles ? "bf16 rows not a lone bf16 call's" : "rows not int8's", wt,
				      n_tok, ne);
			for (size_t t = ne; tiles && t < n_tok; t++) {
				spm_lone(&a, t, 1, r, 0, bf, n_out);
				spm_same_rows(y, r, t, 1, n_out, "a bf16 row not its own call's", wt,
					      n_tok, ne);
			}
		}
		spm_amxbf_on = 0;
		amx_acts_free(&m);
		free(w);
		free(y);
		free(r);
		free(xb);
	}
	ck_assert(model_ok);
}
END_TEST

/*
 * The bf16 tokens' int8 blocks left unmade (kern_matmul's a->lazy: their
 * tiles are all the bf16 GEMM reads): the paths that read them anyway
 * make them first (kern_act_ensure), so the results are those of the
 * same call with every block made: the int8 tail rows (40 rows), the
 * bf16 GEMM without work memory (its int8 fallback), every allocation
 * failing (avx512), on the file layout and packed rows (48). Where no
 * path needs them (48 rows, memory) they stay unmade.
 */
START_TEST(bf16_lazy_int8_blocks_made_on_demand)
{
	static const int fails[] = {0, 1, 1 << 20};
	const size_t n_in = 320, n_tok = 37, ne = 5, nbf = n_tok - ne;
	uint32_t s = 31;

	if (!test_bf16_tiles_run("amx_split"))
		return;
	for (int ti = 0; ti < 2; ti++)
		for (int packed = 0; packed < 2; packed++)
			for (size_t n_out = 40; n_out <= 48; n_out += 8)
				for (size_t fi = 0; fi < 3; fi++) {
		if (packed && n_out % 16 != 0)
			continue; /* packed rows come in 16s */
		const uint32_t wt = ti ? DTYPE_Q4_0 : DTYPE_Q8_0;
		const size_t nb = n_in / KERN_QK, pad = kern_act_groups_pad(nb);
		uint8_t *w = amx_test_weights(wt, n_out, n_in, &s), *p = NULL;
		float *y1 = calloc(n_tok * n_out, sizeof(float)), *y2 = calloc(n_tok * n_out, sizeof(float));
		uint16_t *xb = aligned_alloc(64, sizeof(uint16_t) * kern_amxbf_tokens(nbf) * n_in);
		struct kern_block_q8a *xq = malloc(sizeof(*xq) * n_tok * nb);
		float *xd = malloc(sizeof(float) * n_tok * pad);
		int32_t *xs8 = malloc(sizeof(int32_t) * n_tok * pad);
		struct kern_gemm_args a = {
			.w = w, .w_stride = (size_t)dtype_row_size(wt, n_in), .y = y1, .y_stride = n_out,
		};
		struct kern_act_lazy l = {.quantize = kern_ops_ref.quantize_act};
		struct amx_acts m;
		kern_gemm_fn g;

		ck_assert(y1 && y2 && xb && xq && xd && xs8);
		if (packed)
			a.w = p = amx_test_packed(wt, w, n_out, n_in);
		g = packed ? (ti ? spm_amx_pgemm_q4_0 : spm_amx_pgemm_q8_0)
			   : (ti ? spm_amx_gemm_q4_0 : spm_amx_gemm_q8_0);
		amx_acts_make(&m, n_tok, n_in, &s, &a);
		for (size_t t = 0; t < kern_amxbf_tokens(nbf); t++)
			spm_amxbf_act_row(t < nbf ? m.xf + (ne + t) * n_in : NULL, n_in, t, xb);
		a.xb = xb;
		a.n_exact = ne;
		spm_amxbf_on = 1;
		/* every block made: the reference */
		model_alloc_fails = fails[fi];
		g(&a, 0, n_out);
		/* the exact tokens' blocks made, the bf16 tokens' garbage */
		memcpy(xq, m.x, sizeof(*xq) * ne * nb);
		memset(xq + ne * nb, 0x5a, sizeof(*xq) * nbf * nb);
		memcpy(xd, m.xd, sizeof(float) * ne * pad);
		memset(xd + ne * pad, 0x7f, sizeof(float) * nbf * pad);
		memcpy(xs8, m.xs8, sizeof(int32_t) * ne * pad);
		memset(xs8 + ne * pad, 0x5a, sizeof(int32_t) * nbf * pad);
		l.xf = m.xf + ne * n_in;
		l.xf_stride = n_in;
		l.n_in = n_in;
		l.x = (char *)(xq + ne * nb);
		l.x_stride = nb * sizeof(*xq);
		l.xd = xd + ne * pad;
		l.xs8 = xs8 + ne * pad;
		l.xd_stride = pad;
		l.n = nbf;
		l.done = 0;
		pthread_mutex_init(&l.lock, NULL);
		a.x = xq;
		a.xd = xd;
		a.xs8 = xs8;
		a.lazy = &l;
		a.y = y2;
		model_alloc_fails = fails[fi];
		g(&a, 0, n_out);
		model_alloc_fails = 0;
		pthread_mutex_destroy(&l.lock);
		spm_amxbf_on = 0;
		ck_assert_msg(memcmp(y1, y2, sizeof(float) * n_tok * n_out) == 0,
			      "%s%s %zu rows, %d allocations failing: lazy blocks change the result",
			      dtype_name(wt), packed ? " packed" : "", n_out, fails[fi]);
		/* needed: a row tail, or a fallback */
		ck_assert_int_eq(l.done, n_out % 16 != 0 || fails[fi] != 0);
		amx_acts_free(&m);
		free(w);
		free(p);
		free(y1);
		free(y2);
		free(xb);
		free(xq);
		free(xd);
		free(xs8);
	}
	model_alloc_fails = 0;
	ck_assert(model_ok);
}
END_TEST

/* ---- the forward pass: sampled rows whatever shares their step ------------------- */

#define SPF_DIR "../shared/golden/quants/"
#define SPF_CTX 96
#define SPF_P 70 /* the prompt's tokens: a chunk past the old 64-token rule */
#define SPF_SEQS 6

static const char *const spf_files[] = {"llama/Q8_0", "llama/Q4_0"};

/* One model and pass, SPF_SEQS caches of SPF_CTX positions, and
 * tokens to feed them. */
struct spf {
	struct model m;
	struct forward_pass *p;
	struct kv_cache kv[SPF_SEQS];
	int32_t tok[SPF_CTX];
	uint32_t nv;
};

static void spf_open(struct spf *f, const char *file)
{
	struct forward_opts o = {.max_batch = SPF_CTX};
	char path[512], err[EMBER_ERR_MAX] = "";

	snprintf(path, sizeof(path), SPF_DIR "%s.gguf", file);
	ck_assert_msg(model_open(&f->m, path, err) == 0, "%s: %s", path, err);
	ck_assert_msg(forward_pass_new(&f->p, &f->m, &o, err) == 0, "%s", err);
	for (int s = 0; s < SPF_SEQS; s++)
		ck_assert_int_eq(kv_cache_init(&f->kv[s], &f->m.hp, SPF_CTX, DTYPE_F16, err), 0);
	f->nv = f->m.hp.n_vocab;
	for (int i = 0; i < SPF_CTX; i++) /* any valid ids: a fixed walk */
		f->tok[i] = (int32_t)((7u + 131u * (uint32_t)i) % f->nv);
}

static void spf_close(struct spf *f)
{
	for (int s = 0; s < SPF_SEQS; s++)
		kv_cache_free(&f->kv[s]);
	forward_pass_free(f->p);
	model_free(&f->m);
}

/* One step over n entries (cache, first token, count, logits, all rows
 * exact). */
struct spf_entry {
	int kv, t0, n;
	enum forward_logits lg;
	bool exact;
};

static void spf_step(struct spf *f, const struct spf_entry *e, uint32_t n, float *logits)
{
	struct forward_seq q[SPF_SEQS];
	char err[EMBER_ERR_MAX] = "";

	for (uint32_t i = 0; i < n; i++)
		q[i] = (struct forward_seq){&f->kv[e[i].kv], f->tok + e[i].t0, (uint32_t)e[i].n, e[i].lg,
					    e[i].exact};
	ck_assert_msg(forward_pass_run(f->p, q, n, logits, err) == 0, "%s", err);
}

/*
 * A sequence's sampled logits do not depend on its step (issue 17): a
 * prompt's last token in its chunk (fresh) = alone after the rest (a
 * prefix-cache hit) = alone in a step with prompt chunks and decodes of
 * others; a decode token alone = in that mixed step; a prompt chunk's
 * last row in it = alone. Bit for bit, with the bf16 tiles on the prompt
 * rows: variant 0 the amx dispatch on the tile model (file layout), any
 * CPU with AVX512-BF16; variant 1 the library as it runs here (real
 * tiles on an AMX machine, packed rows; elsewhere its level, where the
 * same must hold). Where the tiles ran, the prompt rows must have
 * mattered: the int8-only logits differ.
 */
START_TEST(bf16_sampled_logits_do_not_depend_on_the_step)
{
	const char *file = spf_files[_i / 2];
	const int variant = _i % 2;
	kern_gemm_fn old8 = NULL, old4 = NULL;
	struct spf f;
	int tiles;

	if (variant == 0 && !test_bf16_tiles_run("amx_split"))
		return;
	if (variant == 0) {
		setenv("EMBER_PACK", "0", 1); /* file layout: the table's gemm[] runs */
		spm_amxbf_on = 1;
	}
	spf_open(&f, file);
	if (variant == 0) {
		old8 = kern_test_set_gemm(DTYPE_Q8_0, spm_amx_gemm_q8_0);
		old4 = kern_test_set_gemm(DTYPE_Q4_0, spm_amx_gemm_q4_0);
	}
	tiles = variant == 0 || (kern_level() == CPU_LEVEL_AMX && kern_amxbf_on);
	if (!tiles)
		fprintf(stderr, "amx_split: %s: no bf16 tiles at the %s level here; the int8 path's "
			"steps checked\n", file, cpu_level_name(kern_level()));
	const size_t nv = f.nv;
	float *la = malloc(sizeof(float) * nv), *lb = malloc(sizeof(float) * nv);
	float *lx = malloc(sizeof(float) * nv), *lc = malloc(sizeof(float) * nv);
	float *l8 = malloc(sizeof(float) * nv), *mix = malloc(sizeof(float) * 3 * nv);

	ck_assert(la && lb && lx && lc && l8 && mix);
	model_bf16_products = 0;
	/* fresh: the prompt in one chunk (cache 0) */
	spf_step(&f, (struct spf_entry[]){{0, 0, SPF_P, FORWARD_LOGITS_LAST, false}}, 1, la);
	ck_assert(variant == 1 || model_bf16_products > 0);
	/* prefix hit: all but the last as prompt rows, then it alone (1, 2) */
	for (int k = 1; k <= 2; k++)
		spf_step(&f, (struct spf_entry[]){{k, 0, SPF_P - 1, FORWARD_LOGITS_NONE, false}}, 1, NULL);
	spf_step(&f, (struct spf_entry[]){{1, SPF_P - 1, 1, FORWARD_LOGITS_LAST, false}}, 1, lb);
	ck_assert_msg(memcmp(la, lb, sizeof(float) * nv) == 0,
		      "%s: a prompt's last token in its chunk differs from it alone", file);
	/* references: a decode token alone after it (cache 3 as 1), and a
	 * chunk of 4 with logits alone after the fresh prompt (4 as 0) */
	spf_step(&f, (struct spf_entry[]){{3, 0, SPF_P - 1, FORWARD_LOGITS_NONE, false}}, 1, NULL);
	spf_step(&f, (struct spf_entry[]){{3, SPF_P - 1, 1, FORWARD_LOGITS_LAST, false}}, 1, lx);
	spf_step(&f, (struct spf_entry[]){{3, SPF_P, 1, FORWARD_LOGITS_LAST, false}}, 1, lx);
	spf_step(&f, (struct spf_entry[]){{4, 0, SPF_P, FORWARD_LOGITS_LAST, false}}, 1, lc);
	spf_step(&f, (struct spf_entry[]){{4, SPF_P, 4, FORWARD_LOGITS_LAST, false}}, 1, lc);
	/* a decode step is int8 alone */
	ck_assert(variant == 1 || model_bf16_products > 0);
	model_bf16_products = 0;
	spf_step(&f, (struct spf_entry[]){{4, SPF_P + 4, 1, FORWARD_LOGITS_LAST, false}}, 1, l8);
	ck_assert_int_eq(model_bf16_products, 0);
	/* the mixed step: a new prompt's chunk first (5), the decode (1),
	 * the hit's last token (2), the 4-token chunk with logits (0) */
	spf_step(&f,
		 (struct spf_entry[]){{5, 3, 64, FORWARD_LOGITS_NONE, false},
				      {1, SPF_P, 1, FORWARD_LOGITS_LAST, false},
				      {2, SPF_P - 1, 1, FORWARD_LOGITS_LAST, false},
				      {0, SPF_P, 4, FORWARD_LOGITS_LAST, false}},
		 4, mix);
	ck_assert_msg(memcmp(mix, lx, sizeof(float) * nv) == 0,
		      "%s: a decode token's logits in a mixed step differ from it alone", file);
	ck_assert_msg(memcmp(mix + nv, lb, sizeof(float) * nv) == 0,
		      "%s: a prompt's last token in a mixed step differs from it alone", file);
	ck_assert_msg(memcmp(mix + 2 * nv, lc, sizeof(float) * nv) == 0,
		      "%s: a chunk's sampled row in a mixed step differs from it alone", file);
	if (tiles) { /* the prompt rows took the tiles: int8 only differs */
		int *on = variant == 0 ? &spm_amxbf_on : &kern_amxbf_on;
		/* the real switch too: prompt rows' attention takes the bf16
		 * tiles with it (kern_attn_bf16), the model's GEMM or not */
		const int real_on = kern_amxbf_on, attn_on = kern_attn_bf16_on;

		*on = 0;
		kern_amxbf_on = 0;
		kern_attn_bf16_on = 0; /* the avx512 level's (attention_bf16_avx512.c) */
		kv_cache_truncate(&f.kv[5], 0);
		spf_step(&f, (struct spf_entry[]){{5, 0, SPF_P, FORWARD_LOGITS_LAST, false}}, 1, l8);
		kern_amxbf_on = real_on;
		kern_attn_bf16_on = attn_on;
		*on = 1;
		ck_assert_msg(memcmp(la, l8, sizeof(float) * nv) != 0,
			      "%s: the prompt rows did not take the bf16 tiles", file);
		/* a sequence marked exact (the scheduler's short prompts): every
		 * row int8 with the tiles on, in a step beside a prompt chunk
		 * that does take them */
		kv_cache_truncate(&f.kv[5], 0);
		kv_cache_truncate(&f.kv[3], 0);
		model_bf16_products = 0;
		spf_step(&f,
			 (struct spf_entry[]){{3, 0, SPF_CTX - SPF_P, FORWARD_LOGITS_NONE, false},
					      {5, 0, SPF_P, FORWARD_LOGITS_LAST, true}},
			 2, lx);
		ck_assert(variant == 1 || model_bf16_products > 0);
		ck_assert_msg(memcmp(lx, l8, sizeof(float) * nv) == 0,
			      "%s: an exact sequence's rows took the bf16 tiles", file);
	}
	if (variant == 0) {
		kern_test_set_gemm(DTYPE_Q8_0, old8);
		kern_test_set_gemm(DTYPE_Q4_0, old4);
		spm_amxbf_on = 0;
		unsetenv("EMBER_PACK");
	}
	ck_assert(model_ok);
	free(la);
	free(lb);
	free(lx);
	free(lc);
	free(l8);
	free(mix);
	spf_close(&f);
}
END_TEST

Suite *suite_amx_split(void)
{
	Suite *s = suite_create("amx_split");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, bf16_dispatch_by_token_purpose);
	tcase_add_test(tc, bf16_lazy_int8_blocks_made_on_demand);
	tcase_add_loop_test(tc, bf16_sampled_logits_do_not_depend_on_the_step, 0,
			    (int)(2 * sizeof(spf_files) / sizeof(spf_files[0])));
	suite_add_tcase(s, tc);
	return s;
}
#else
/* AArch64: no AMX level to model. */
START_TEST(split_needs_x86_64)
{
	fprintf(stderr, "amx_split: skipping: not an x86-64 build\n");
}
END_TEST

Suite *suite_amx_split(void)
{
	Suite *s = suite_create("amx_split");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, split_needs_x86_64);
	suite_add_tcase(s, tc);
	return s;
}
#endif
