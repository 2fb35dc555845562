/*
 * kernels.h - the compute kernels the forward pass calls: matrix products
 * against weights stored in any supported GGUF type, and the blocks of
 * attention (scores, softmax, weighted values).
 *
 * Decode multiplies one activation row by every weight row (GEMV, memory
 * bound: each weight byte is read once per token). Prefill multiplies many
 * rows (GEMM, compute bound). Both go through kern_matmul(), which picks the
 * path by type, shape and ISA; which path runs where is documented in
 * kernels.c and the README.
 *
 * Each ISA's kernels live in their own file compiled with their own flags
 * (kernels_avx2.c, kernels_avx512.c, ...); the scalar reference
 * (kernels_ref.c) is the specification they are tested against. The level
 * is chosen once, at the first kern_init(), from cpu_detect() and
 * EMBER_CPU (cpu.h).
 *
 * Threads: kern_matmul() splits output rows over `pool` (threadpool.h;
 * NULL runs on the calling thread). Nothing here allocates: callers pass
 * scratch memory sized by kern_matmul_scratch(). All functions may be called
 * from any thread once kern_init() has returned.
 */
#ifndef EMBER_KERNELS_H
#define EMBER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "threadpool.h"

/* Chooses the kernel level. Idempotent and thread-safe; returns it. */
enum cpu_level kern_init(void);

/* Level in use (kern_init() must have run). */
enum cpu_level kern_level(void);

/* Which level's code runs each operation (kern_init() chooses per
 * operation: engine/compute/cpu/kernels/LEVELS.md): lines "op NAME: LEVEL\n" for
 * the matrix products per weight type, activation quantization, the
 * attention blocks and the activation, NUL-terminated, truncated to
 * `len`. Returns `buf`. */
char *kern_describe(char *buf, size_t len);

/* A buffer kern_describe() never fills: every type's GEMV and GEMM, their
 * packed forms and the other operations, ~45 bytes a line. */
#define KERN_DESCRIBE_MAX 8192

/*
 * Packed weight rows (LEVELS.md, "Packed rows"): a weight type id OR-ed
 * with KERN_PACKED means the matrix's rows were interleaved at load by
 * kern_pack_rows() for this process's level: in each group of G rows
 * (G = the level's rows per step for the type), block b of row r (r < G)
 * sits at group_base + (b * G + r) * type_size (Q5_K: 16-byte units,
 * kern_pack_groups16() in kernels_impl.h), where group g covers
 * exactly the bytes of rows [g G, g G + G) in the file. The kernels then
 * read one linear stream instead of G rows side by side; the results are
 * the file layout's bit for bit. A level may give a type its own form
 * in the same bytes of each group (the avx512 level's Q4_0: each block's
 * 16 scales, then its qs in the tile's row lanes; kernels_impl.h
 * kern_avx512_pack_q4_0; its Q4_K and Q6_K: rows in dword lanes,
 * KERN_K4L_*, KERN_Q6L_*). kern_matmul, kern_matmul_n,
 * kern_matmul_n_pre, kern_matmul_scratch and kern_supports accept it.
 */
#define KERN_PACKED 0x100u

/* t | KERN_PACKED when the level in use runs packed t (GEMV and GEMM)
 * for n_out rows of n_in elements (n_out a multiple of its group), else t. */
uint32_t kern_pack_type(uint32_t t, size_t n_out, size_t n_in);

/* Interleaves the n_out rows of n_in elements of type t (no flag) at w in
 * place, in groups of the level's G for t (kern_pack_type() must have
 * said packed). Allocates one group as a temporary. Returns 0, or
 * EMBER_EINVAL / EMBER_ENOMEM with one line in err (EMBER_ERR_MAX). */
int kern_pack_rows(uint32_t t, void *w, size_t n_out, size_t n_in, char *err);

/* The inverse of kern_pack_rows() (tests, a reader that needs file order). */
int kern_unpack_rows(uint32_t t, void *w, size_t n_out, size_t n_in, char *err);

/* 1 if weights of dtype `t` can be multiplied, else 0 (t | KERN_PACKED:
 * if the level in use has the packed form of t). */
int kern_supports(uint32_t t);

/* Bytes of scratch kern_matmul() needs for these shapes (activations
 * converted or quantized once per call, not per row); 0 when none is
 * needed, and scratch may then be NULL. A multiple of 64. */
size_t kern_matmul_scratch(uint32_t wtype, size_t n_in, size_t n_tok);

/*
 * y[t][o] = sum_i x[t][i] * W[o][i]   for t < n_tok, o < n_out
 *
 *   w: n_out rows of n_in elements of type `wtype`, row stride
 *      dtype_row_size(wtype, n_in) (n_in a multiple of the type's block)
 *   x: [n_tok][n_in] floats, y: [n_tok][n_out] floats (no aliasing)
 *   scratch: kern_matmul_scratch(wtype, n_in, n_tok) bytes, 64-byte aligned
 */
void kern_matmul(tpool_t pool, uint32_t wtype, const void *w, size_t n_out, size_t n_in,
		 const float *x, size_t n_tok, float *y, void *scratch);

/* One weight matrix of a kern_matmul_n() call: n_out rows at w, output
 * y[n_tok][n_out]; wtype its type (KERN_PACKED included) where it is not
 * the call's, 0 (left out of an initializer) where it is. A part of
 * another type must share the call's activations (kern_mm_parts_share). */
struct kern_mm_part {
	const void *w;
	size_t n_out;
	float *y;
	uint32_t wtype;
};

#define KERN_MM_PARTS_MAX 4

/*
 * kern_matmul() for each of parts[0..n) (n <= KERN_MM_PARTS_MAX) against
 * the same x, all of type `wtype` (or a part's own wtype where
 * kern_mm_parts_share allows it) and width n_in, in one pass over the
 * pool: x is quantized once and the rows of every part are shared out
 * together, so threads join once instead of once per matrix (TinyLlama's
 * decode runs 111 joins a token, 89 of them products). Each y is bit-identical to kern_matmul()'s.
 * scratch: kern_matmul_scratch(wtype, n_in, n_tok) bytes, 64-byte aligned.
 */
void kern_matmul_n(tpool_t pool, uint32_t wtype, size_t n_in, const struct kern_mm_part *parts,
		   size_t n, const float *x, size_t n_tok, void *scratch);

/* Whether weights of types a and b (KERN_PACKED included; both
 * kern_supports) and width n_in may be parts of one kern_matmul_n()
 * call: the same type, or quantized types whose products read the same
 * activations (the int8 blocks, or the K-quants' Q8_K blocks, and the
 * same bf16 tiles where the amx level's prompt rows take them), so one
 * making of them serves every part: Q4_K_M's q, k (Q4_K) with v (Q6_K).
 * Each part's outputs are then the bits of a call of its own. */
int kern_mm_parts_share(uint32_t a, uint32_t b, size_t n_in);

/* Writes rows [t0, t1) of a kern_matmul_n_pre() call's x (the caller's
 * per-token work that produces the activations: a norm, an activation
 * function). */
typedef void (*kern_rows_fn)(void *ctx, size_t t0, size_t t1);

/*
 * pre(pre_ctx, t0, t1) over the tokens in groups of pre_rows (>= 1), then
 * kern_matmul_n() (nothing at all when n or n_tok is 0): for quantized
 * weights each group's rows are written
 * and quantized by the same pool task, one pool job (and join) fewer than
 * the two calls; other types run pre() as a job of its own first. The
 * results are the two calls' bit for bit.
 */
void kern_matmul_n_pre(tpool_t pool, uint32_t wtype, size_t n_in,
		       const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
		       void *scratch, kern_rows_fn pre, void *pre_ctx, size_t pre_rows);

/*
 * kern_matmul_n_pre() where only tokens [0, n_exact) must be exact: the
 * rest (prompt rows whose logits nobody samples) may take a faster path
 * with other rounding, the AMX level's bf16 tiles (LEVELS.md). Either
 * way a token's result depends only on its own activations and on which
 * side of n_exact it is, never on the other tokens of the call: exact
 * tokens are kern_matmul()'s bits (a decode step's), the others the bf16
 * GEMM's. n_exact >= n_tok is kern_matmul_n_pre().
 */
void kern_matmul_n_split(tpool_t pool, uint32_t wtype, size_t n_in,
			 const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
			 size_t n_exact, void *scratch, kern_rows_fn pre, void *pre_ctx,
			 size_t pre_rows);

/* Where a product's prompt rows go when they take the amx level's plain
 * bf16 A tiles (kern_bf16_plain): token t's (t >= n_exact) elements
 * 32 s .. 32 s + 31 at kern_bf16_row(b, t) + s * KERN_BF16_ROW_STEP. */
struct kern_bf16_rows {
	uint16_t *xb;
	size_t n_in, n_exact;
};
#define KERN_BF16_ROW_STEP 512
uint16_t *kern_bf16_row(const struct kern_bf16_rows *b, size_t t);

/* Whether a product of wtype weights takes its prompt rows as plain bf16
 * A-tile rows (the amx level's Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K tiles,
 * on), the rows a kern_pre's bf16 writer may write: a weight type whose
 * prompt rows take another layout (or none) answers 0 and its products
 * run rows(). */
int kern_bf16_plain(uint32_t wtype);

/* Writes rows [t0, t1) of a product's activations as their bf16 A-tile
 * rows (b) instead of floats: the float rows rows() would write, each
 * rounded to bf16 (nearest even), and nothing else of x. */
typedef void (*kern_rows_bf16_fn)(void *ctx, size_t t0, size_t t1,
				  const struct kern_bf16_rows *b);

/* A product's deferred row work (kern_matmul_n_fused). */
struct kern_pre {
	kern_rows_fn rows; /* x's float rows; NULL: x is ready */
	void *ctx;
	size_t n_rows; /* rows a task (0: 1) */
	/* NULL, or rows() for groups of prompt rows only, written straight
	 * into the product's bf16 tiles where it takes plain ones
	 * (kern_bf16_plain): the float rows are not written then, and redo
	 * (required with bf16) makes them afterwards from what bf16 left, for
	 * a path that reads them after all (kern_act_ensure): rows() less
	 * what it did besides writing x (a residual add). */
	kern_rows_bf16_fn bf16;
	kern_rows_fn redo;
	/* NULL, or where bf16's rows are already made (kern_matmul_glu's
	 * output, kern_amxbf_tiles layout, 64-byte aligned, the caller's and
	 * live until the product returns): the product reads its prompt rows
	 * there and bf16 is not run. Only where kern_bf16_ready() said 1. */
	uint16_t *xb;
};

/* kern_matmul_n_split() with pre's row work (NULL: none). The outputs
 * are the same bits whether pre->bf16 runs or pre->rows. */
void kern_matmul_n_fused(tpool_t pool, uint32_t wtype, size_t n_in,
			 const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
			 size_t n_exact, void *scratch, const struct kern_pre *pre);

/* 1 where a product of wtype over n_tok tokens (n_exact sampled) would
 * take its prompt rows made beforehand (kern_pre's xb): the amx level's
 * plain bf16 tiles with their int8 blocks on demand. */
int kern_bf16_ready(uint32_t wtype, size_t n_in, size_t n_tok, size_t n_exact);

/* kern_matmul_n_fused() of a gated SiLU MLP's parts[0] = up, parts[1] =
 * gate (the same type and rows), which, where the amx level's paired
 * call takes them (kernels_impl.h kern_amxbf_glu), writes the prompt
 * rows' silu(gate) * up as the down product's bf16 tile rows into xb
 * (kern_amxbf_tiles layout for K = the parts' n_out, 64-byte aligned, at
 * least kern_matmul_scratch(DTYPE_Q8_0, n_out, n_tok) bytes) instead of
 * their y: 1 then (y holds the sampled rows only), 0 where it ran the
 * plain product (y holds every row). */
int kern_matmul_glu(tpool_t pool, uint32_t wtype, size_t n_in, const struct kern_mm_part parts[2],
		    const float *x, size_t n_tok, size_t n_exact, void *scratch,
		    const struct kern_pre *pre, uint16_t *xb);

/*
 * Flash-style attention blocks (engine/compute/cpu/attention.c): the scores of a tile
 * of queries against a block of keys, each score row's softmax against a
 * running maximum, and the probability-weighted sum of the block's values.
 * Every row is computed by the same instruction sequence whatever nq is,
 * so one query's result does not depend on the tile it shares.
 */

/* s[i * ld_s + j] = (dot(q_i, k_j) + (bias ? bias[j] : 0)) * scale for
 * i < nq, j < nk, where q_i = q + i * ld_q and k_j = k + j * d (d floats
 * each: key rows are contiguous). ALiBi's bias goes on the raw dot. */
void kern_attn_scores(const float *q, size_t ld_q, const float *k, size_t d, const float *bias,
		      float scale, float *s, size_t ld_s, size_t nq, size_t nk);

/* o_i = o_i * r[i] + sum_j p[i * ld_p + j] * v_j over d floats, for i < nq
 * (o_i = o + i * ld_o; v_j = v + j * d, j < nk): the running output,
 * rescaled once per block when its softmax maximum grew, plus the block. */
void kern_attn_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
		     const float *v, size_t d, size_t nq, size_t nk);

/* 1 if the level reads F16 key / value rows in place (the two below),
 * else 0: the caller then converts the rows (kern_fp16_to_fp32_row) and
 * calls kern_attn_scores() / kern_attn_accum(). */
int kern_attn_f16_rows(void);

/* kern_attn_scores() / kern_attn_accum() with the keys / values given as
 * F16 rows (the F16 KV cache's, in place), converted exactly in
 * registers: the same bits as converting the rows first. Only where
 * kern_attn_f16_rows() is 1. */
void kern_attn_scores_f16(const float *q, size_t ld_q, const uint16_t *k, size_t d,
			  const float *bias, float scale, float *s, size_t ld_s, size_t nq, size_t nk);
void kern_attn_accum_f16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			 const uint16_t *v, size_t d, size_t nq, size_t nk);

/* Prompt-row attention blocks on bf16 tiles (the amx level with its bf16
 * tiles on, attention_amx.c): kern_attn_scores() and kern_attn_accum()
 * with q, k, p and v rounded to bf16 and fp32 sums, for rows whose
 * outputs are never sampled (attention.c's prompt tiles); keys and
 * values as floats, or F16 rows when f16. The queries go in once per
 * tile as A tiles (kern_attn_q_bf16: nq rows of d floats, ld_q apart,
 * into qt, KERN_ATTN_BF16_QT(nq, d) elements, 64-byte aligned; group g
 * of 16 rows at qt + g * d * 16); a scores call takes rows from a group
 * start. At most KERN_ATTN_BF16_KEYS keys a call; d a multiple of 32
 * (queries, keys) / 16 (values) up to KERN_ATTN_BF16_DIM. Each score and
 * output element depends only on its own row and the block, never on
 * the rows computed with it. */
#define KERN_ATTN_BF16_KEYS 64
#define KERN_ATTN_BF16_DIM 256
#define KERN_ATTN_BF16_QT(nq, d) (((nq) + 15) / 16 * 16 * (d))
/* 1 where the three below run (else the caller keeps the float kernels):
 * the amx level's tiles, or the avx512 level's VDPBF16PS form on CPUs
 * with AVX512-BF16 (attention_bf16_avx512.c: the same rounding of q, k,
 * p and v, other sums' order). EMBER_AMX_BF16=0 turns either off. */
int kern_attn_bf16(void);
void kern_attn_q_bf16(const float *q, size_t ld_q, size_t d, size_t nq, uint16_t *qt);
void kern_attn_scores_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
			   const float *bias, float scale, float *s, size_t ld_s, size_t nq,
			   size_t nk);
void kern_attn_accum_bf16(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
			  const void *v, int f16, size_t d, size_t nq, size_t nk);
/* The softmax step of nq prompt rows against one block of nk keys on the
 * bf16 tiles, fused with the weights' rounding (where kern_attn_bf16()):
 * row i's scores s + i * ld_s, of which keys [lo[i], hi[i]) are seen
 * (lo[i] == hi[i]: none, the row keeps its state, r[i] = 1); per row as
 * attention's running softmax with kern_max and kern_exp_sum_prompt (the
 * same bits; the rescale too, exp(m - m1) by kern_exp_sum_prompt's exp
 * since attn17): m[i], l[i] advance, r[i] gets the rescale (s is scratch
 * after), and the weights rounded to bf16 (0 for
 * keys not seen and rows past nq's last group of 16) go to pt as A tiles:
 * KERN_ATTN_BF16_PT(nq, nk) elements, 64-byte aligned. Then
 * kern_attn_accum_bf16_tiles() is kern_attn_accum_bf16() of those
 * weights, bit for bit. */
#define KERN_ATTN_BF16_PT(nq, nk) (((nq) + 15) / 16 * 16 * (((nk) + 31) / 32 * 32))
void kern_attn_softmax_bf16(float *s, size_t ld_s, const uint32_t *lo, const uint32_t *hi,
			    size_t nq, size_t nk, float *m, float *l, float *r, uint16_t *pt);
void kern_attn_accum_bf16_tiles(float *o, size_t ld_o, const float *r, const uint16_t *pt,
				const void *v, int f16, size_t d, size_t nq, size_t nk);
/* kern_attn_scores_bf16() (no bias) and kern_attn_softmax_bf16() in one
 * call, the scores kept in L1 a group of 16 rows at a time and never
 * stored: the same m, l, r and weights' tiles as the two calls (the
 * scores differ at most in a zero's sign, which the softmax does not
 * see). Where kern_attn_bf16() (attn17). */
void kern_attn_scores_softmax_bf16(const uint16_t *qt, const void *k, int f16, size_t d,
				   float scale, const uint32_t *lo, const uint32_t *hi, size_t nq,
				   size_t nk, float *m, float *l, float *r, uint16_t *pt);
/* out row i = o row i * (1.0f / l[i]), i < n, d a multiple of 16: a prompt
 * tile's normalised outputs (one product an element: attention.c's
 * scale_row's bits), where kern_attn_bf16(). */
void kern_attn_out_bf16(const float *o, size_t ld_o, const float *l, float *out, size_t ld_out,
			size_t d, size_t n);

/* dst[i] = the F16 value src[i] as a float, i < n (exact; F16 KV cache
 * rows, converted once per key block). */
void kern_fp16_to_fp32_row(const uint16_t *src, float *dst, size_t n);

/* dst[i] = kern_fp32_to_fp16(src[i]), i < n (round to nearest even; the
 * F16 KV cache's stores): the same bits at every level. */
void kern_fp32_to_fp16_row(const float *src, uint16_t *dst, size_t n);

/* Largest of x[0..n) (-INFINITY for n == 0; NaNs are skipped). */
float kern_max(const float *x, size_t n);

/* x[i] = exp(x[i] - m) in place; returns the sum of the new x[i]. The
 * scalar level is expf(); the SIMD levels use a polynomial with relative
 * error below KERN_EXP_REL_ERR for results of at least FLT_MIN (smaller
 * ones are within FLT_MIN absolute; -inf gives 0, +inf gives +inf, NaN
 * stays NaN). */
float kern_exp_sum(float *x, size_t n, float m);

/* y[i] *= g[i] / (1 + exp(-g[i])) over n floats: the gated SiLU of a
 * llama-style MLP (silu(gate) * up). The SIMD levels use kern_exp_sum()'s
 * exp, so the result is within a few KERN_EXP_REL_ERR of the scalar
 * level's (expf). */
void kern_silu_mul(float *y, const float *g, size_t n);

/* kern_silu_mul(y, g, n) rounded to bf16 (nearest even) into chunks of
 * 32 (n a multiple of 32): elements 32 s .. at dst + s * step; y is left
 * as it was. The amx level only (kern_bf16_plain's rows): its
 * kern_silu_mul's bits. */
void kern_silu_mul_bf16(const float *y, const float *g, size_t n, uint16_t *dst, size_t step);

/* kern_exp_sum() for prompt rows, whose results are never sampled and
 * go on to bf16 tiles (attention's weights P; attention.c uses it only
 * for the tiles that run there): a shorter exp (2^t: VREDUCEPS, a
 * degree-4 polynomial, VSCALEFPS; attn17), each x[i] within KERN_PROMPT_REL_ERR of the
 * exact value (tests/test_kernel_rows.c), where bf16's rounding is 2^-9,
 * the sum within that and the float additions'. Levels without one (all
 * but avx512 and amx) run kern_exp_sum() itself. Row-local like it. */
float kern_exp_sum_prompt(float *x, size_t n, float m);
#define KERN_PROMPT_REL_ERR 1e-5

/* A norm of rows (forward.c's RMSNorm and LayerNorm): gain, optional
 * bias, epsilon, width, and whether the row's mean is subtracted. */
struct kern_norm {
	const float *gain; /* [d] */
	const float *bias; /* [d], or NULL */
	double eps;
	uint32_t d;
	int center; /* 1: LayerNorm (mean subtracted); 0: RMSNorm */
};

/* Rows one kern_norm_rows() call takes at most. */
#define KERN_NORM_ROWS 16

/* For each of rows r < n (n <= KERN_NORM_ROWS; row r at r * d floats
 * from each base): first res_r += add_r when add is not NULL (res is x,
 * writable), then out_r = norm(x_r) * gain (+ bias), where each row's
 * mean and sum of squares are summed in double, element by element in
 * order, then scale = 1 / sqrt(var / d + eps) and
 *   out[i] = (float)((x[i] - mean) * scale) * gain[i] + (bias ? bias[i] : 0)
 * with mean 0 for RMSNorm. out may be x (in place). Every level gives
 * these bits exactly: the SIMD ones keep each row's sums sequential, one
 * row per vector lane. */
void kern_norm_rows(const struct kern_norm *nm, const float *x, float *res, const float *add,
		    float *out, size_t n);

/* kern_norm_rows() with row r's out rounded to bf16 (nearest even) into
 * chunks of 32 (d a multiple of 32): elements 32 s .. at dst[r] + s *
 * step, and no float out. The amx level only (kern_bf16_plain's rows):
 * its kern_norm_rows' bits, rounded. */
void kern_norm_rows_bf16(const struct kern_norm *nm, const float *x, float *res, const float *add,
			 uint16_t *const dst[], size_t step, size_t n);

/* Bound of kern_exp_sum()'s relative error against exp() (the SIMD levels;
 * tests/test_attention.c checks it against expf over the float range). */
#define KERN_EXP_REL_ERR 2e-7

/* Converts one row of `n` elements of type `t` to floats (embedding
 * lookup, tests). Returns 0 or EMBER_EUNSUPPORTED. */
int kern_dequantize_row(uint32_t t, const void *src, float *dst, size_t n);

/* Converts floats to type `t` (convert/quantize, tests): round to nearest
 * with the reference scale rule of each GGUF block format, so output is
 * byte-identical to llama.cpp's. `n` a multiple of the block size. */
int kern_quantize_row(uint32_t t, const float *src, void *dst, size_t n);

/* Scalar conversions shared by every file. */
float kern_fp16_to_fp32(uint16_t h);
uint16_t kern_fp32_to_fp16(float f);
float kern_bf16_to_fp32(uint16_t h);
uint16_t kern_fp32_to_bf16(float f); /* round to nearest even, NaN kept */

#endif
