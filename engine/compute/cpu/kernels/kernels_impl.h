/*
 * kernels_impl.h - what the kernel files share with each other and with the
 * tests, and nobody else: the GGUF block layouts, the quantized activation
 * block, and the table of functions one ISA level provides.
 *
 * kern_matmul() (kernels.c) prepares activations once per call, then hands
 * ranges of output rows to the level's gemm function for the weight type,
 * one range per pool item. Every level computes the same thing as
 * the scalar reference (kernels_ref.c); only the order of float additions
 * differs. Within one level, each (row, token) result is computed by the
 * same instruction sequence whatever the tiling, so results do not depend
 * on the thread count or on how many tokens share the call.
 *
 * Thread safety: the tables are constant; the functions are pure.
 */
#ifndef EMBER_KERNELS_IMPL_H
#define EMBER_KERNELS_IMPL_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "dtype.h"

#define KERN_QK 32 /* elements per Q8_0 / Q4_0 block */

struct kern_norm; /* kernels.h */

/* GGUF Q8_0: value j = qs[j] * d. */
struct kern_block_q8_0 {
	uint16_t d; /* fp16 scale */
	int8_t qs[KERN_QK];
};
static_assert(sizeof(struct kern_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* GGUF Q4_0: value j = ((qs[j] & 15) - 8) * d for j < 16,
 *            value j+16 = ((qs[j] >> 4) - 8) * d. */
struct kern_block_q4_0 {
	uint16_t d; /* fp16 scale */
	uint8_t qs[KERN_QK / 2];
};
static_assert(sizeof(struct kern_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/* An activation block: Q8_0's rule, but the scale kept in fp32 (no point
 * losing precision on data that lives only for one call). */
struct kern_block_q8a {
	float d;
	int8_t qs[KERN_QK];
};
static_assert(sizeof(struct kern_block_q8a) == 36, "activation block is 36 bytes");

/* One gemm call: y[t * y_stride + o] = dot(W row o, activation row t) for
 * o in [o0, o1) and t < n_tok. `x` holds float rows (F32/F16/BF16 weights)
 * or kern_block_q8a rows (Q8_0/Q4_0 weights), `x_stride` bytes apart. */
struct kern_gemm_args {
	const void *w;
	size_t w_stride; /* bytes between weight rows */
	size_t n_in;
	const void *x;
	size_t x_stride; /* bytes between activation rows */
	size_t n_tok;
	float *y;
	size_t y_stride; /* floats between output rows (n_out) */
	/* Quantized weights only, filled by kern_act_summarize(): per token
	 * row, each activation block's scale and 8 x the sum of its qs (the
	 * offset term of Q4_0's unsigned nibbles), contiguous so a SIMD level
	 * loads 8 blocks' worth at once. Rows are xd_stride entries (the
	 * block count rounded up to KERN_GROUP), zero past the last block.
	 * Levels that read scales from the blocks ignore them. */
	const float *xd;
	const int32_t *xs8;
	size_t xd_stride;
	/* Every token's activations per 256-element super-block (quants.h,
	 * kern_block_q8_k; token t at xk + t * n_in / 256), for the K-quant
	 * GEMVs and GEMMs of levels that have a Q8_K GEMV (kquants_gemv.h);
	 * NULL where the caller did not make them (the GEMVs then run the
	 * level's gemm, the x86 K-quant gemms the scalar reference). */
	const struct kern_block_q8_k *xk;
	/* Quantized weights: the same activations as floats (token t at
	 * xf + t * xf_stride), set by kern_matmul, for the AMX level's bf16
	 * prefill (kernels_amx_bf16.c); NULL where the caller has none. */
	const float *xf;
	size_t xf_stride; /* floats between token rows */
	/* The same activations as bf16 tiles (kern_amxbf_act_row), made once
	 * per kern_matmul where that path runs; NULL: it converts xf. Tile
	 * token j is token n_exact + j: the tiles hold the bf16 tokens only. */
	const uint16_t *xb;
	/* Tokens [0, n_exact) take the level's exact path (the int8 blocks:
	 * decode's bits whatever the batch); [n_exact, n_tok) may take the
	 * AMX bf16 tiles where they are on (prompt rows, kern_matmul_n_split).
	 * Every level but amx runs all n_tok exactly. */
	size_t n_exact;
	/* Set by kern_matmul_n_split when the bf16 tokens' int8 blocks and
	 * summaries were left unmade (their tiles are all the bf16 GEMM
	 * reads); a path that still reads them for those tokens (rows past
	 * the last 16, the fallback without work memory) calls
	 * kern_act_ensure() first. NULL: x, xd, xs8 are made for every token. */
	struct kern_act_lazy *lazy;
};

/* The int8 blocks and summaries of a matmul's n bf16 tokens (the first
 * at xf, x, xd, xs8; the strides of kern_gemm_args), made on first
 * demand from the float rows by kern_act_ensure(): one caller quantizes
 * under the lock, any other waits for it. */
struct kern_act_lazy {
	pthread_mutex_t lock;
	int done;
	void (*quantize)(const float *x, struct kern_block_q8a *out, size_t n);
	const float *xf;
	size_t xf_stride, n_in;
	char *x;
	size_t x_stride;
	float *xd;
	int32_t *xs8;
	size_t xd_stride, n;
	/* K-quants (args' xk not NULL): their Q8_K blocks instead, the first
	 * token's at xk (the int8 blocks are never made for them) */
	void (*quantize_k)(const float *x, struct kern_block_q8_k *out, size_t n);
	struct kern_block_q8_k *xk;
	/* Where the float rows of tokens [redo_t0, redo_t1) of the call were
	 * not written (kernels.h kern_pre's bf16 took them): redo(redo_ctx,
	 * redo_t0, redo_t1) makes them first; NULL: all there. */
	void (*redo)(void *ctx, size_t t0, size_t t1);
	void *redo_ctx;
	size_t redo_t0, redo_t1;
};

/* Tests: 1 makes kern_matmul_n_fused() run kern_pre's rows() for every
 * group (the unfused path), to compare the two (test_fuse_bf16.c). */
extern int kern_bf16_fuse_off;
/* Tests: 1 makes kern_matmul_glu() run the plain product (0 returned). */
extern int kern_glu_off;

/* Tests: 1 makes kern_mm_parts_share() refuse parts of differing types
 * (the callers' separate products), to compare the two (test_mm_mixed.c). */
extern int kern_mm_mixed_off;

/* a's int8 blocks and summaries, made if a->lazy says they were left
 * unmade (thread-safe; a no-op for a->lazy NULL or done). */
void kern_act_ensure(const struct kern_gemm_args *a);

/* Blocks per group of the summarized activation rows. */
#define KERN_GROUP 8

static inline size_t kern_act_groups_pad(size_t nb)
{
	return (nb + KERN_GROUP - 1) / KERN_GROUP * KERN_GROUP;
}

/* Fills one token's xd and xs8 rows (kern_act_groups_pad(nb) entries)
 * from its nb quantized activation blocks. */
void kern_act_summarize(const struct kern_block_q8a *x, size_t nb, float *xd, int32_t *xs8);

typedef void (*kern_gemm_fn)(const struct kern_gemm_args *a, size_t o0, size_t o1);

/*
 * The functions one level provides. A NULL entry means "not faster here":
 * kern_resolve() fills it from the next lower level of the architecture's
 * list (cpu_levels()), down to the scalar reference, which fills every
 * entry. So each operation runs the best implementation the CPU can run,
 * and a level that would lose an operation to a lower one leaves it NULL.
 * Other helpers add weight types as new gemm[]/gemv[] rows; keep field
 * names stable and add fields at the end.
 */
/* A type's packed-row rule (struct kern_ops pack_fn): the arguments of
 * kern_pack_groups(). */
typedef void (*kern_pack_fn)(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			     void *tmp);

struct kern_ops {
	const char *name;
	/* Quantizes `n` floats (a multiple of KERN_QK) into activation
	 * blocks; byte-identical at every level. */
	void (*quantize_act)(const float *x, struct kern_block_q8a *dst, size_t n);
	/* Any n_tok (prefill); also decode unless gemv[] says otherwise.
	 * The reference's NULL entries are the types nobody supports. */
	kern_gemm_fn gemm[DTYPE_COUNT];
	/* The attention blocks of kernels.h (kern_attn_scores, ...). */
	void (*attn_scores)(const float *q, size_t ld_q, const float *k, size_t d,
			    const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			    size_t nk);
	void (*attn_accum)(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			   const float *v, size_t d, size_t nq, size_t nk);
	void (*fp16_row)(const uint16_t *src, float *dst, size_t n);
	float (*max)(const float *x, size_t n);
	float (*exp_sum)(float *x, size_t n, float m);
	void (*silu_mul)(float *y, const float *g, size_t n);
	/* kern_exp_sum_prompt(): prompt rows only (never sampled), within
	 * its bound of kernels.h; NULL: exp_sum does them. */
	float (*exp_sum_prompt)(float *x, size_t n, float m);
	/* n_tok == 1 (decode, memory bound), NULL: gemm[t] does it. Taken
	 * with gemm[t] from the same level, never alone: each (row, token)
	 * result must be the same instruction sequence whatever the batch
	 * (see the top comment), so a GEMV here computes exactly what the
	 * level's gemm[t] computes for one token. Q4_K/Q5_K/Q6_K's
	 * (kquants_gemv.h) read args.xk, the token quantized per
	 * super-block; the same level's gemm reads every token so and
	 * repeats the GEMV's operations (LEVELS.md). */
	kern_gemm_fn gemv[DTYPE_COUNT];
	/* One token's activations per 256-element super-block for the
	 * K-quant GEMVs (quants.h kern_quantize_act_q8k(); byte-identical at
	 * every level). */
	void (*quantize_act_q8k)(const float *x, struct kern_block_q8_k *dst, size_t n);
	/* kern_norm_rows(); bit-identical at every level. */
	void (*norm_rows)(const struct kern_norm *nm, const float *x, float *res, const float *add,
			  float *out, size_t n);
	/* kern_fp32_to_fp16_row(); bit-identical at every level. */
	void (*fp16_from_row)(const float *src, uint16_t *dst, size_t n);
	/* kern_attn_scores_f16() / kern_attn_accum_f16(): attn_scores and
	 * attn_accum with the keys / values given as F16 rows, converted in
	 * registers, the same bits as converting them first. NULL (scalar,
	 * AArch64): the caller converts the rows (kern_attn_f16_rows()). */
	void (*attn_scores_f16)(const float *q, size_t ld_q, const uint16_t *k, size_t d,
				const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				size_t nk);
	void (*attn_accum_f16)(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			       const uint16_t *v, size_t d, size_t nq, size_t nk);
	/* Packed weight rows (kernels.h KERN_PACKED): pack_rows[t] the rows
	 * per group G (0: no packed form of t at this level), pgemm[t] and
	 * pgemv[t] (NULL: pgemm[t]) the products on such a matrix, rows
	 * [o0, o1) always whole groups. kern_resolve() takes all three for t
	 * from the level that supplies gemm[t], so a level without them
	 * (pack_rows 0) never packs; their results are that level's gemm[t] /
	 * gemv[t]'s bit for bit. */
	kern_gemm_fn pgemm[DTYPE_COUNT], pgemv[DTYPE_COUNT];
	uint8_t pack_rows[DTYPE_COUNT];
	/* pack_fn[t]: t's own packed form (kern_pack_rows / kern_unpack_rows
	 * call it with kern_pack_groups()'s arguments); NULL: the generic
	 * interleave, kern_pack_groups(). Taken with pgemm[t]. */
	kern_pack_fn pack_fn[DTYPE_COUNT];
	/* kern_attn_scores_bf16() / kern_attn_accum_bf16(): prompt-row
	 * attention on bf16 (the amx level's tiles; the avx512 level's VDPBF16PS
	 * blocks, set by kern_resolve where the CPU has AVX512-BF16). */
	void (*attn_q_bf16)(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt);
	void (*attn_scores_bf16)(const uint16_t *qt, const void *k, int f16, size_t d,
				 const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				 size_t nk);
	void (*attn_accum_bf16)(float *o, size_t ld_o, const float *r, const float *p,
				size_t ld_p, const void *v, int f16, size_t d, size_t nq,
				size_t nk);
	/* kern_attn_scores_softmax_bf16() / kern_attn_accum_bf16_tiles(): the
	 * fused forms of the two above, from the same level. */
	void (*attn_scores_softmax_bf16)(const uint16_t *qt, const void *k, int f16, size_t d,
					 float scale, const uint32_t *lo, const uint32_t *hi,
					 size_t nq, size_t nk, float *m, float *l, float *r,
					 uint16_t *pt);
	void (*attn_accum_bf16_tiles)(float *o, size_t ld_o, const float *r, const uint16_t *pt,
				      const void *v, int f16, size_t d, size_t nq, size_t nk);
};

/* Tests only: the active table's gemm[t] (batches of 2+ tokens, file
 * layout) becomes f; returns the one it replaced. Not thread safe: call
 * between matmuls. */
kern_gemm_fn kern_test_set_gemm(uint32_t t, kern_gemm_fn f);

/* Which level supplied each entry of a resolved table (kern_resolve()). */
struct kern_origin {
	enum cpu_level quantize_act, attn_scores, attn_accum, fp16_row, max, exp_sum, silu_mul;
	enum cpu_level exp_sum_prompt;
	enum cpu_level gemm[DTYPE_COUNT], gemv[DTYPE_COUNT];
	enum cpu_level quantize_act_q8k;
	enum cpu_level norm_rows, fp16_from_row;
	enum cpu_level attn_scores_f16, attn_accum_f16;
	enum cpu_level attn_q_bf16, attn_scores_bf16, attn_accum_bf16;
	enum cpu_level attn_scores_softmax_bf16, attn_accum_bf16_tiles;
};

/* Moves n_out rows (nb blocks of bs bytes each, rows contiguous) between
 * the file layout and the packed one of kernels.h (groups of g rows;
 * n_out a multiple of g), in place through tmp (g * nb * bs bytes):
 * unpack = 0 packs, 1 restores the file order. The three interleaves are
 * plain byte moves, in kernels_ref.c. */
void kern_pack_groups(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
		      void *tmp);

/* kern_pack_groups() in units of u bytes (u divides bs): byte k of block
 * b of row r at group_base + b g bs + (g (k / u) + r) u + k % u; u = bs
 * is kern_pack_groups(). */
void kern_pack_groups_u(void *w, size_t n_out, size_t nb, size_t bs, size_t g, size_t u,
			int unpack, void *tmp);

/* kern_pack_groups_u() in 16-byte units, as a kern_pack_fn: the avx512
 * level's Q5_K, so a ZMM load holds the same 16 bytes of the group's
 * four rows (kquants_gemv_avx512.c kp_k4). */
void kern_pack_groups16(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			void *tmp);

/* Builds the table for the best level `f` can run, capped at `cap` (its
 * position in cpu_levels(); a level with no table built is skipped):
 * each entry from the highest such level that has one. Returns the level
 * (the highest one taken part). `org` may be NULL. Pure: tests call it
 * with made-up feature sets. */
enum cpu_level kern_resolve(const struct cpu_features *f, enum cpu_level cap,
			    struct kern_ops *out, struct kern_origin *org);

#if defined(__x86_64__)
/* The AVX2 vector helpers, shared by the AVX-512 table (head-sized
 * vectors gain nothing from ZMM). attention_avx2.c: */
void kern_avx2_attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			   const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			   size_t nk);
void kern_avx2_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			  const float *v, size_t d, size_t nq, size_t nk);
/* attention_avx512.c: the same scores on 4 x 4 tiles (32 YMM registers). */
void kern_avx512_attn_scores(const float *q, size_t ld_q, const float *k, size_t d,
			     const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			     size_t nk);
/* The same value sums on ZMM (4 queries x 64 columns), bit-identical. */
void kern_avx512_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			    const float *v, size_t d, size_t nq, size_t nk);
void kern_avx2_fp16_row(const uint16_t *src, float *dst, size_t n);
/* The same scores and sums with F16 key / value rows read in place (the
 * F16 cache's; converted exactly in registers): bit-identical to the
 * above on converted rows (attention.c's decode groups). */
void kern_avx2_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
			       const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			       size_t nk);
void kern_avx512_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
				 const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				 size_t nk);
void kern_avx2_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			      const uint16_t *v, size_t d, size_t nq, size_t nk);
void kern_avx512_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p,
				size_t ld_p, const uint16_t *v, size_t d, size_t nq, size_t nk);
/* kern_avx2_exp_sum on ZMM, the same bits; kern_avx2_max on ZMM, the
 * same value but for a zero's sign (attention.c's softmax). */
float kern_avx512_exp_sum(float *x, size_t n, float m);
float kern_avx512_max(const float *x, size_t n);
/* The prompt rows' exp-sum (kernels.h kern_exp_sum_prompt), avx512. */
float kern_avx512_exp_sum_prompt(float *x, size_t n, float m);

/* attention_bf16_avx512.c: the prompt-row attention blocks (kernels.h
 * kern_attn_*_bf16) on VDPBF16PS, for CPUs with AVX512-BF16 (taken by
 * kern_resolve at the avx512 level only where the CPU has it). */
void kern_avx512_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt);
void kern_avx512_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				  const float *bias, float scale, float *s, size_t ld_s, size_t nq,
				  size_t nk);
void kern_avx512_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p,
				 size_t ld_p, const void *v, int f16, size_t d, size_t nq, size_t nk);
/* ... and the fused calls (kernels.h kern_attn_scores_softmax_bf16,
 * kern_attn_accum_bf16_tiles) at that level. */
void kern_avx512_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
					  float scale, const uint32_t *lo, const uint32_t *hi,
					  size_t nq, size_t nk, float *m, float *l, float *r,
					  uint16_t *pt);
void kern_avx512_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r,
				       const uint16_t *pt, const void *v, int f16, size_t d,
				       size_t nq, size_t nk);
void kern_avx2_fp16_from_row(const float *src, uint16_t *dst, size_t n);
float kern_avx2_max(const float *x, size_t n);
float kern_avx2_exp_sum(float *x, size_t n, float m);
/* act_avx2.c */
void kern_avx2_silu_mul(float *y, const float *g, size_t n);
/* act_avx512.c: the same on 16 lanes, bit-identical. */
void kern_avx512_silu_mul(float *y, const float *g, size_t n);
void kern_avx2_norm_rows(const struct kern_norm *nm, const float *x, float *res, const float *add,
			 float *out, size_t n);
void kern_avx512_norm_rows(const struct kern_norm *nm, const float *x, float *res,
			   const float *add, float *out, size_t n);
/* act_avx512.c: the two above with their results rounded to bf16 A-tile
 * rows (kernels.h kern_silu_mul_bf16, kern_norm_rows_bf16). */
void kern_avx512_silu_mul_bf16(const float *y, const float *g, size_t n, uint16_t *dst,
			       size_t step);
void kern_avx512_norm_rows_bf16(const struct kern_norm *nm, const float *x, float *res,
				const float *add, uint16_t *const dst[], size_t step, size_t n);
/* The row norms' residual add (kern_norm_rows with `add`), written once
 * for act_avx2.c and act_avx512.c: res[r][i] += add[r][i] for n rows of
 * d, W lanes a step through the level's LOADU / ADD / STOREU intrinsics,
 * the tail one element at a time. One float addition an element either
 * way: every level gives the reference's bits. */
#define KERN_NORM_ADD_ROWS(res, add, n, d, W, LOADU, ADD, STOREU)                  \
	do {                                                                       \
		size_t r_, i_;                                                     \
                                                                                   \
		for (r_ = 0; r_ < (n); r_++) {                                     \
			float *xr_ = (res) + r_ * (d);                             \
			const float *ar_ = (add) + r_ * (d);                       \
                                                                                   \
			for (i_ = 0; i_ + (W) <= (d); i_ += (W))                   \
				STOREU(xr_ + i_, ADD(LOADU(xr_ + i_), LOADU(ar_ + i_))); \
			for (; i_ < (d); i_++)                                     \
				xr_[i_] += ar_[i_];                                \
		}                                                                  \
	} while (0)
/* The AVX2 quantized prefill GEMM (kernels_qgemm_avx2.c), n_tok >= 2. */
void kern_avx2_qgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_qgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same on packed rows (kernels.h KERN_PACKED; kernels_qgemm_avx2.c):
 * groups of 16 rows tiled block by block (the 16 fp16 scales, then the
 * qs in row lanes: row r's byte j at 32 + 64 (j / 4) + 4 r + j % 4, the
 * avx512 level's layout without its + 128), bit for bit the file-layout
 * kernels' results; the GEMV for one token (more: the GEMM). */
void kern_avx2_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pgemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pgemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx2_pack_q8_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp);
void kern_avx2_pack_q4_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			 void *tmp);
/* The AVX-512 VNNI quantized GEMV / small-batch GEMM
 * (kernels_qvnni_avx512.c): bit-identical to the AVX2 level's. */
void kern_avx512_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The AVX-512 one-token Q4_0 GEMV, rows in order, four blocks per ZMM
 * (kernels_qgemv_avx512.c): bit-identical to the above. */
void kern_avx512_gemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same four on packed rows (kernels.h KERN_PACKED, 16-row groups). */
void kern_avx512_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemv_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_pgemv_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* Packed Q4_0 at the avx512 level (kernels_qgemv_avx512.c, "tiled"): per
 * 16-row group and block b, 288 bytes at group_base + 288 b: the 16 rows'
 * fp16 scales (row r at 2 r), then 4 x 64 bytes, chunk c holding qs bytes
 * 4c..4c+3 of row r at 32 + 64 c + 4 r (the VNNI tile's row lanes). */
void kern_avx512_pack_q4_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp);
/* Packed Q6_K at the avx512 level (kquants_gemv_avx512.c): rows in
 * dword lanes, groups of KERN_Q6L_ROWS = 16 rows, a group's super-block s
 * KERN_Q6L_SB = 16 x 210 bytes at group_base + KERN_Q6L_SB s (the 16 file
 * blocks' bits permuted), in the order the tiles read it, so one linear
 * stream: first the rows' int8 scales, sub-block j of row r at
 * KERN_Q6L_SC + 16 j + r (one VPMOVSXBD a sub-block), their fp16 d, row
 * r at KERN_Q6L_D + 2 r (with the scales at the end, 3 KiB past the
 * values being read, the one-token GEMV streamed a TinyLlama Q6_K step at
 * 31 cpu ms against 28: lead, twenty-second session); then, with q(r, e)
 * the value 0..63 (unbiased) of element e of row r, per sub-block j (16
 * elements) three 64-byte vectors at KERN_Q6L_V(j, 0..2), X, Y, Z, byte
 * 4 r + k of each
 *   X: q(r, 16 j + k)     | (q(r, 16 j + 12 + k) & 3)  << 6
 *   Y: q(r, 16 j + 4 + k) | (q(r, 16 j + 12 + k) & 12) << 4
 *   Z: q(r, 16 j + 8 + k) | (q(r, 16 j + 12 + k) & 48) << 2
 * so dword lane r of each (after one mask; the fourth by shifts and
 * selects) holds 4 consecutive elements of row r: VPDPBUSD against a
 * token's activation dword broadcast ({1to16}) sums 16 rows at once with
 * no horizontal reduction (LEVELS.md "Q6_K rows in dword lanes", the q6l21
 * study, and the twenty-second session's sections). Readers: the
 * 1..8-token tile and the one-token GEMV (kquants_q6p_avx512.c); 9..32
 * tokens unpacked where the rows lie (kquants_vnni_avx512.c kv__l6k_),
 * more through the panels, and the AMX tiles (kquants_vnni_avx512.h
 * kv__q6u_sb()); every one makes the values by kv__q6l_sub(). */
#define KERN_Q6L_ROWS 16
#define KERN_Q6L_SB (16 * 210)
#define KERN_Q6L_V(j, i) (288 + 192 * (j) + 64 * (i))
#define KERN_Q6L_SC 0
#define KERN_Q6L_D 256
void kern_avx512_pack_q6_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp);
/* The same bytes one byte and dword at a time (the first version; the
 * packer above unpacks through it, tests compare the two). */
void kern_avx512_pack_q6_k_scalar(void *w, size_t n_out, size_t nb, size_t bs, size_t g,
				  int unpack, void *tmp);
/* Packed Q6_K times 1..8 tokens (kquants_q6p_avx512.c; args.xk needed),
 * rows [o0, o1) whole groups: 1 when done, 0 when not its case (more
 * tokens, no args.xk). Bit-identical to the VNNI tile and the GEMV. */
int kern_avx512_q6p_small(const struct kern_gemm_args *a, size_t o0, size_t o1);

/* Packed Q4_K at the avx512 and amx levels (kquants_gemv_avx512.c): groups
 * of KERN_K4L_ROWS = 16 rows, a group's super-block s KERN_K4L_SB = 16 x
 * 144 bytes at group_base + KERN_K4L_SB s (the 16 file blocks' bytes
 * permuted a dword at a time): byte k of row r's block s at
 * KERN_K4L_AT(s, r, k), i.e. per 16-byte unit u = k / 16 of the block
 * (0: d, dmin and the 12 scale bytes; 1..8: qs) four 64-byte vectors,
 * vector c holding the unit's dword c of row r in dword lane r: what
 * the VNNI tiles' loads (kquants_vnni_avx512.h kv__rows16()) made by 4
 * loads, 12 inserts and a 4 x 4 transpose from the file layout, now one
 * load, the header first in the stream. Matrices whose rows are not a
 * multiple of 16 stay in the file layout. Readers: the 1..16-token tile
 * (also the one-token GEMV), the panels and the AMX tiles, all through
 * kv__rows16() (LEVELS.md, twenty-third session, branch k4r23). */
#define KERN_K4L_ROWS 16
#define KERN_K4L_SB (16 * 144)
#define KERN_K4L_AT(s, r, k)                                                                   \
	(KERN_K4L_SB * (s) + 256 * ((k) / 16) + 64 * ((k) % 16 / 4) + 4 * (r) + (k) % 4)
void kern_avx512_pack_q4_k(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp);

/* Packed Q8_0, tiled the same way: 544 bytes a block, the 16 scales,
 * then 8 x 64 bytes, chunk c holding qs bytes 4c..4c+3 of row r at
 * 32 + 64 c + 4 r, each XOR 0x80 (stored + 128: VPDPBUSD's unsigned
 * operand as loaded). */
void kern_avx512_pack_q8_0(void *w, size_t n_out, size_t nb, size_t bs, size_t g, int unpack,
			   void *tmp);
/* The AMX int8 prefill GEMM (kernels_amx.c; 16+ tokens, the rest from
 * the two above): bit-identical to them. Only where kern_amx_enable()
 * succeeded. */
void kern_amx_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same int8 GEMMs without the bf16 dispatch (kern_amx_gemm_* run the
 * bf16 GEMM below on tokens [n_exact, n_tok) where it is on and the call
 * has float activations, these on the rest). */
void kern_amx_i8_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_i8_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The bf16 prefill GEMM (kernels_amx_bf16.c): weights and activations
 * rounded to bf16, fp32 sums in AMX tiles (TDPBF16PS); rows past the last
 * 32-row group by the int8 GEMMs above. Needs a->xb or a->xf. */
void kern_amxbf_gemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same on tiled packed rows (kern_avx512_pack_q4_0 / _q8_0), bit for
 * bit the file layout's results; kern_amx_pgemm_* (the amx level's
 * pgemm[]) run them where the bf16 GEMM takes the call, else the avx512
 * level's packed GEMM. */
void kern_amxbf_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* F16 / BF16 weights on the bf16 tiles as split products (amx_bf16_fx.h:
 * within 2^-16 of each product, fp32 sums; needs a->xb made by
 * amxfx_act_row, or a->xf); rows past the last 16 and the fallback by the
 * avx512 level's float GEMM, kern_avx512_gemm_f16 / _bf16. */
void kern_amxbf_gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_f16(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_avx512_gemm_bf16(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* kern_describe()'s line for them. */
const char *kern_amxbf_fx_describe(void);
/* Token t's n_in floats x (NULL: zeros) into the tiles xb of a wtype
 * product (kern_amxbf_act_row for Q8_0 / Q4_0; F16 / BF16: the split's
 * rows, amx_bf16_fx.h), xb holding K of n_in * kern_amxbf_widen(wtype). */
void kern_amxbf_act_row_fx(uint32_t wtype, const float *x, size_t n_in, size_t t, uint16_t *xb);
size_t kern_amxbf_widen(uint32_t wtype);
void kern_amx_pgemm_q8_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_pgemm_q4_0(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* The same for Q4_K, Q5_K and Q6_K (amx_bf16_kq.h's B tiles): the bf16
 * tiles on prompt rows, the avx512 level's VNNI GEMMs (kern_avx512_vnni_*,
 * the GEMV's bits) on sampled rows; file layout, or packed (_pgemm_). */
void kern_amxbf_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amxbf_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_gemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_gemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_gemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_pgemm_q4_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_pgemm_q5_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
void kern_amx_pgemm_q6_k(const struct kern_gemm_args *a, size_t o0, size_t o1);
/* Token t's n_in floats x (NULL: zeros, the padding tokens) into the bf16
 * activation tiles xb (64-byte aligned, kern_amxbf_tokens(n_tok) x n_in
 * elements): token group g = t / 16, K step s at xb + (g * n_in / 32 + s)
 * * 512 + (t % 16) * 32, rounded to nearest even (AVX512-BF16 only). */
void kern_amxbf_act_row(const float *x, size_t n_in, size_t t, uint16_t *xb);
/* That layout's token t, K step 0 (kernels.h kern_bf16_row: step s is
 * s * KERN_BF16_ROW_STEP elements on), for writers that make the rows
 * themselves (kernels.h kern_pre's bf16); test_fuse_bf16.c checks it
 * against kern_amxbf_act_row. */
static inline uint16_t *kern_amxbf_row(uint16_t *xb, size_t n_in, size_t t)
{
	return xb + (t / 16) * (n_in / 32) * 512 + (t % 16) * 32;
}
/* Block b of 16 weight rows (w, st bytes apart) as one bf16 B tile at bt
 * (1 KiB, 64-byte aligned): row r = elements 2r, 2r+1 of the 16 rows,
 * weight row n's pair at elements 2n, 2n+1. wt | KERN_PACKED: w is a
 * tiled packed 16-row group (st unused), the same tile bit for bit. */
void kern_amxbf_b_tile(uint32_t wt, const char *w, size_t st, size_t b, uint16_t *bt);
/* The MLP's gate and up products of prompt rows as one call (issue 17,
 * kernels_amx_bf16.c): rows [o0, o1) of up and gate (the same type wt,
 * activations and row count; tokens all prompt rows, n_exact 0, as
 * kern_amx_prompt_args makes them) share each K chunk's A tiles, and
 * instead of y their silu(gate) * up goes, rounded to bf16, straight into
 * the down product's A tiles xb (K n_in = up's n_out, token t's row
 * kern_amxbf_row(xb, n_out, t)): the bits kern_silu_mul_bf16 makes of
 * the two products' y. -1: nothing done (work memory, a row tail), then
 * the caller runs both products and kern_amxbf_glu_y. */
int kern_amxbf_glu(uint32_t wt, const struct kern_gemm_args *up, const struct kern_gemm_args *gate,
		   size_t o0, size_t o1, uint16_t *xb);
/* 1 where kern_amxbf_glu takes wt's weights (Q8_0, Q4_0, Q4/5/6_K, packed or not). */
int kern_amxbf_glu_ok(uint32_t wt);
/* kern_amxbf_glu's epilogue from float rows (up, gate: n_tok rows of
 * stride floats, rows [o0, o1), on 16s), the same bits. */
void kern_amxbf_glu_y(const float *up, const float *gate, size_t stride, size_t n_tok,
		      size_t o0, size_t o1, uint16_t *xb);
/* a's prompt rows [n_exact, n_tok) as a call of their own (n_exact 0):
 * what the amx level's products hand the bf16 tiles (kernels_amx.c). */
void kern_amx_prompt_args(const struct kern_gemm_args *a, struct kern_gemm_args *r);
/* 1 while the bf16 GEMM is on (kern_amxbf_enable). */
extern int kern_amxbf_on;
/* 1 while the avx512 level's prompt-row attention takes its VDPBF16PS
 * blocks (kern_attn_bf16; EMBER_AMX_BF16, read once at kern_init; tests
 * turn it off with kern_amxbf_on to run every row on the float path). */
extern int kern_attn_bf16_on;
/* The amx level's prompt-row attention blocks (attention_amx.c). */
void kern_amx_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt);
void kern_amx_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
			       const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			       size_t nk);
void kern_amx_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p,
			      size_t ld_p, const void *v, int f16, size_t d, size_t nq, size_t nk);
void kern_amx_attn_softmax_bf16(float *s, size_t ld_s, const uint32_t *lo, const uint32_t *hi,
				size_t nq, size_t nk, float *m, float *l, float *r, uint16_t *pt);
void kern_amx_attn_out_bf16(const float *o, size_t ld_o, const float *l, float *out,
			    size_t ld_out, size_t d, size_t n);
void kern_amx_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				       float scale, const uint32_t *lo, const uint32_t *hi,
				       size_t nq, size_t nk, float *m, float *l, float *r,
				       uint16_t *pt);
void kern_amx_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r, const uint16_t *pt,
				    const void *v, int f16, size_t d, size_t nq, size_t nk);
/* LDTILECFG, palette 1, all 8 tiles 16 rows x 64 bytes (the bf16 tiles'
 * shape). Tile configuration is per thread: each call that uses the
 * tiles loads it on the thread it runs on. A constant table, never
 * stores into a local: GCC 12 does not see _tile_loadconfig read its
 * operand and dropped such stores once the caller was not inlined (the
 * tiles unconfigured, the self-test's SIGSEGV: amxg12, LEVELS.md). */
static const uint8_t kern_amx_cfg_bf16[64] = {
	[0] = 1,
	[16] = 64, [18] = 64, [20] = 64, [22] = 64, [24] = 64, [26] = 64, [28] = 64, [30] = 64,
	[48] = 16, [49] = 16, [50] = 16, [51] = 16, [52] = 16, [53] = 16, [54] = 16, [55] = 16,
};

#if defined(__AMX_TILE__)
#include <immintrin.h>
static inline void kern_amx_config_bf16(void)
{
	_tile_loadconfig(kern_amx_cfg_bf16);
}
#endif
/* Tokens the activation tiles hold: n_tok rounded up to 32. */
static inline size_t kern_amxbf_tokens(size_t n_tok)
{
	return (n_tok + 31) / 32 * 32;
}
/* kern_matmul's share: scratch bytes for the activation tiles of up to
 * n_tok tokens (0: the bf16 GEMM is off or not for wtype), and the tiles
 * of n_tok tokens at the first 64-byte boundary from `at` with the
 * padding tokens zeroed. */
size_t kern_amxbf_scratch(uint32_t wtype, size_t n_in, size_t n_tok);
const uint16_t *kern_amxbf_tiles(const void *at, size_t n_in, size_t n_tok);
/* ember --version's line for the amx level's prefill GEMMs. */
const char *kern_amxbf_describe(void);
/* Turns the bf16 GEMM on unless EMBER_AMX_BF16=0 (on by default: only
 * prompt rows take it, kern_matmul_n_split, LEVELS.md) when its self-test
 * (kern_amxbf_selftest: bf16 bounds against float64 and avx512) passes;
 * 0 when on, 1 when EMBER_AMX_BF16=0 asked it off, -1 when its self-test
 * failed; `why` says which. Tiles already permitted. */
int kern_amxbf_enable(char *why, size_t len);
int kern_amxbf_selftest(void);
/* Asks the kernel for the AMX tile state (arch_prctl) and self-tests the
 * AMX GEMMs against the AVX-512 level's: 0, or -1 with the reason in
 * `why`. Only on a CPU whose features allow the amx level. */
int kern_amx_enable(char *why, size_t len);
#endif

#if defined(__aarch64__)
/* The quantized GEMV/GEMM of the NEON levels (quants_neon.h's body, built
 * once per level: kquants_neon.c, kernels_dotprod_neon.c), bit-exact with
 * the scalar reference. */
#define KERN_NEON_DECL(level, type)                                                \
	void kern_##level##_gemm_##type(const struct kern_gemm_args *a, size_t o0, size_t o1);
#define KERN_NEON_DECL_ALL(level)                                                  \
	KERN_NEON_DECL(level, q8_0) KERN_NEON_DECL(level, q4_0)                    \
	KERN_NEON_DECL(level, q4_1) KERN_NEON_DECL(level, q5_0)                    \
	KERN_NEON_DECL(level, q5_1) KERN_NEON_DECL(level, iq4_nl)                  \
	KERN_NEON_DECL(level, q2_k) KERN_NEON_DECL(level, q3_k)                    \
	KERN_NEON_DECL(level, q4_k) KERN_NEON_DECL(level, q5_k)                    \
	KERN_NEON_DECL(level, q6_k) KERN_NEON_DECL(level, iq4_xs)
KERN_NEON_DECL_ALL(neon)
KERN_NEON_DECL_ALL(dotprod)
#endif

extern const struct kern_ops kern_ops_ref;

/* Rows ahead the avx512 level's packed one-token GEMVs prefetch into L2,
 * set once by kern_init() to kern_pack_ahead_choose(); 0 before (results
 * never depend on it). */
extern size_t kern_pack_ahead;
#define KERN_PACK_AHEAD_MAX 64
/* The CPU vendor's default distance: 8 rows on Intel (CPUID vendor
 * GenuineIntel), 0 elsewhere. CPUID is a VM exit: not per call. */
size_t kern_pack_ahead_vendor(void);
/* EMBER_PACK_AHEAD's rows where it is set and valid (0..
 * KERN_PACK_AHEAD_MAX), else kern_pack_ahead_vendor(): a refused value
 * keeps the vendor's default (env.h says so on stderr). */
size_t kern_pack_ahead_choose(void);
#if defined(__x86_64__)
/* kern_pack_ahead, for the avx512 kernels; any thread. */
size_t kern_avx512_pack_ahead(void);
#endif
/* The chosen table and the streaming and prefill splits
 * (EMBER_GEMV_SPLIT, EMBER_GEMM_SPLIT): written once by kern_init()
 * (kernels_select.c), read by kernels.c's driver. */
extern const struct kern_ops *kern__ops;
extern int kern__regions;
extern int kern__runs;
#if defined(__x86_64__)
extern const struct kern_ops kern_ops_avx2;
extern const struct kern_ops kern_ops_avx512;
extern const struct kern_ops kern_ops_amx;
#endif
#if defined(__aarch64__)
extern const struct kern_ops kern_ops_neon;    /* kernels_neon.c */
extern const struct kern_ops kern_ops_dotprod; /* kernels_dotprod_neon.c */
extern const struct kern_ops kern_ops_i8mm;    /* kernels_i8mm_neon.c */
#endif

/* The table `level` itself provides (NULL entries included), whether or
 * not this CPU can run it; NULL if not built for this target. */
const struct kern_ops *kern_ops_own(enum cpu_level level);

/* `level`'s table resolved (kern_resolve(), every entry filled) as if the
 * CPU had every feature, whether or not this one can run it (tests pick
 * levels with kern_level_runs()); NULL if not built for this target. */
const struct kern_ops *kern_ops_for(enum cpu_level level);

/* 1 if this CPU can execute `level`'s kernels (EMBER_CPU ignored). */
int kern_level_runs(enum cpu_level level);

/* The table in use (kern_init() must have run) and where its entries came
 * from. */
const struct kern_ops *kern_ops_active(void);
const struct kern_origin *kern_origin_active(void);

/* Activation rows need this weight type to be quantized first. */
static inline int kern_wtype_quantized(uint32_t t)
{
	switch (t) {
	case DTYPE_Q8_0: case DTYPE_Q4_0: case DTYPE_Q4_1: case DTYPE_Q5_0: case DTYPE_Q5_1:
	case DTYPE_IQ4_NL: case DTYPE_Q2_K: case DTYPE_Q3_K: case DTYPE_Q4_K: case DTYPE_Q5_K:
	case DTYPE_Q6_K: case DTYPE_IQ4_XS:
		return 1;
	default:
		return 0;
	}
}

/* The reference scalar rounding of x * (1/d) to a Q8 value: round half
 * away from zero, clamped to [-127, 127], NaN to 0 (no undefined
 * float-to-int conversion on hostile input). */
static inline int8_t kern_round_q8(float v)
{
	if (v != v)
		return 0;
	if (v > 127.0f)
		v = 127.0f;
	if (v < -127.0f)
		v = -127.0f;
	/* roundf without libm: trunc, then step away on |fraction| >= 0.5. */
	int r = (int)v;
	float f = v - (float)r;
	if (f >= 0.5f)
		r++;
	else if (f <= -0.5f)
		r--;
	return (int8_t)r;
}

#endif
