/*
 * attention.c - blockwise causal attention with a running softmax
 * (attention.h).
 *
 * One task is (query head h, tile), or a run of one kv head's query heads
 * (decode tiles; prompt tiles on bf16 tiles). Its state is, per query and
 * head, the running maximum m and sum l of the softmax, and the output
 * row itself as the running numerator. Keys go by blocks of kb rows
 * (ATTN_KEYS, fewer for wide heads); for each block:
 *   S = (Q K^T + bias) * scale          the tile's queries that see the block
 *   per row: m' = max(m, max S), r = exp(m - m'), P = exp(S - m'),
 *            l = l r + sum P, masked keys (j > query position) P = 0
 *   out = out * r + P V                 one pass, the rescale folded in
 * and at the end out /= l. Only rows whose causal range reaches the block
 * are computed, and the diagonal block's masked scores are set to 0 after
 * the exponential rather than skipped, so the kernels see whole blocks.
 */
#include "attention.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "attention_kv.h"
#include "kernels.h"

/* Keys per block: a tile's scores for one block are ATTENTION_TILE x
 * ATTN_KEYS floats (16 KB), and with 64-wide heads the K and V blocks are
 * 16 KB each, so a block's working set stays in L1/L2. */
#define ATTN_KEYS 64

/* Floats of each F16 -> F32 conversion buffer (one block of keys, one of
 * values): bounds kb for wide heads. */
#define ATTN_KV_FLOATS 4096

/* Widest head whose queries and outputs a task copies to rows of its own.
 * In q and out a head's rows are n_head * d floats apart (8 KB for 32
 * heads of 64), so a tile's 64 rows fall in the same few L1 sets and evict
 * each other on every key block; contiguous copies do not. */
#define ATTN_LOCAL_DIM 128

/* Most regions a decode step's attention tasks are cut into (one per
 * thread; more threads share them). */
#define ATTN_REGIONS_MAX 64

static float bf16_round(float x)
{
	return kern_bf16_to_fp32(kern_fp32_to_bf16(x));
}

int attention_init(struct attention *a, const struct model_hparams *hp, enum arch_alibi alibi,
		   char *err)
{
	uint32_t h;

	memset(a, 0, sizeof(*a));
	if (hp->head_dim_k > ATTENTION_MAX_HEAD_DIM || hp->head_dim_v > ATTENTION_MAX_HEAD_DIM)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "attention: head width %u / %u above %d",
				    hp->head_dim_k, hp->head_dim_v, ATTENTION_MAX_HEAD_DIM);
	if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "attention: %u heads over %u kv heads",
				    hp->n_head, hp->n_head_kv);
	a->n_head = hp->n_head;
	a->n_head_kv = hp->n_head_kv;
	a->head_dim_k = hp->head_dim_k;
	a->head_dim_v = hp->head_dim_v;
	a->alibi = alibi;
	a->scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim_k);
	a->softcap = hp->attn_softcap;
	if (alibi == ARCH_ALIBI_NONE)
		return 0;
	a->slopes = malloc((size_t)hp->n_head * sizeof(float));
	if (!a->slopes)
		return ember_seterr(err, EMBER_ENOMEM, "attention: %u slopes", hp->n_head);
	for (h = 0; h < hp->n_head; h++) {
		a->slopes[h] = (float)arch_alibi_slope(h, hp->n_head, hp->alibi_max_bias);
		if (alibi == ARCH_ALIBI_BF16)
			a->slopes[h] = bf16_round(a->slopes[h]);
	}
	return 0;
}

void attention_set_window(struct attention *a, const struct arch_desc *arch, uint32_t n_swa)
{
	a->swa_arch = arch && arch->swa != ARCH_SWA_NONE && n_swa > 0 ? arch : NULL;
	a->n_swa = n_swa;
}

uint32_t attention_window(const struct attention *a, uint32_t il)
{
	return a->swa_arch && arch_layer_is_swa(a->swa_arch, il) ? a->n_swa : 0;
}

void attention_free(struct attention *a)
{
	free(a->slopes);
	a->slopes = NULL;
}

uint32_t attention_plan(struct attention_tile *tiles, const struct kv_cache *kv, uint32_t row,
			uint32_t pos, uint32_t n_tok)
{
	uint32_t t, n = 0;

	for (t = 0; t < n_tok; t += ATTENTION_TILE) {
		tiles[n].kv = kv;
		tiles[n].row = row + t;
		tiles[n].pos = pos + t;
		tiles[n].n = n_tok - t < ATTENTION_TILE ? n_tok - t : ATTENTION_TILE;
		tiles[n].prompt = 0;
		n++;
	}
	return n;
}

/* kern_attn_scores() of a key block given as floats (kf) or, when kh is
 * set, as F16 rows in place (levels where kern_attn_f16_rows(): the
 * decode step's conversion of every key and value block, a store and a
 * reload of each row, took ~40% of its attention time, 8 TinyLlama
 * sequences, Zen 4; the F16 forms give the converted rows' bits). */
static void blk_scores(const float *q, size_t ld_q, const float *kf, const uint16_t *kh, size_t d,
		       const float *bias, float scale, float *s, size_t ld_s, size_t nq, size_t nk)
{
	if (kh)
		kern_attn_scores_f16(q, ld_q, kh, d, bias, scale, s, ld_s, nq, nk);
	else
		kern_attn_scores(q, ld_q, kf, d, bias, scale, s, ld_s, nq, nk);
}

/* kern_attn_accum() of a value block given as floats (vf) or F16 rows in
 * place (vh), as blk_scores(). */
static void blk_accum(float *o, size_t ld_o, const float *r, const float *p, size_t ld_p,
		      const float *vf, const uint16_t *vh, size_t d, size_t nq, size_t nk)
{
	if (vh)
		kern_attn_accum_f16(o, ld_o, r, p, ld_p, vh, d, nq, nk);
	else
		kern_attn_accum(o, ld_o, r, p, ld_p, vf, d, nq, nk);
}

/* ALiBi bias of key positions j0 .. j0+n-1 for a head of slope m (see
 * arch_alibi; for ARCH_ALIBI_BF16 m is already rounded). */
static void alibi_biases(enum arch_alibi kind, float m, uint32_t j0, uint32_t n, float *bias)
{
	uint32_t j;

	for (j = 0; j < n; j++)
		bias[j] = kind == ARCH_ALIBI_BF16 ? bf16_round(m * bf16_round((float)(j0 + j)))
						  : m * (float)(j0 + j);
}

struct attn_job {
	const struct attention *a;
	uint32_t il;
	const struct attention_tile *tiles;
	uint32_t n_tiles;
	const float *q;
	float *out;
	attention_pre_fn pre; /* or NULL (attention_run_pre) */
	void *pre_ctx;
	uint32_t prompt_heads; /* a prompt run's most heads (ATTN_PROMPT_HEADS or _FEW) */
	/* Decode steps on 2+ threads (attention_run_pre): the tasks (tile,
	 * kv head) cut into n_region contiguous regions, one pool item each,
	 * claimed in order through next[r] by their own item first, then by
	 * items whose region is done (attend_region_cb). */
	uint32_t n_region, beg[ATTN_REGIONS_MAX + 1];
	atomic_uint next[ATTN_REGIONS_MAX];
};

/* The softmax step of rows [first, n) of a tile for one block of nb keys
 * from position j0: S rows (stride ld_s) become P, m and l advance, r
 * gets each row's rescale factor. Query i is at position pos + i * dp
 * (dp 1: a tile's queries; 0: a decode group's heads, one query) and
 * sees keys up to there, and with a window w > 0 only those after it
 * less w; a row that sees none of the block keeps its state (r = 1,
 * P = 0). `bf`: a prompt tile on bf16 tiles, whose P is rounded to bf16
 * next: the prompt rows' shorter exp (kern_exp_sum_prompt; P and l from
 * the same values, and r). */
static void softmax_block(float *S, size_t ld_s, uint32_t first, uint32_t n,
			  uint32_t pos, uint32_t dp, uint32_t j0, uint32_t nb, uint32_t w, float *m,
			  float *l, float *r, int bf)
{
	float m1[ATTENTION_TILE];
	uint32_t i, a[ATTENTION_TILE], nv[ATTENTION_TILE];

	/* Two passes: every row's maximum, then every row's exponentials. A
	 * row's exp_sum is a chain of ~100 cycles of latency for ~36 of
	 * issue (64 keys on ZMM); with the maximum and the scalar steps
	 * between them the core overlapped little of one row with the next
	 * (~40% of exp_sum's samples waited on its last sum, Emerald Rapids),
	 * back to back it overlaps them. The same operations on each row. */
	for (i = first; i < n; i++) {
		float *s = S + (size_t)(i - first) * ld_s;
		const uint32_t at = pos + i * dp;
		const uint32_t seen = at + 1 - j0;
		const uint32_t lo = w && at + 1 > w ? at + 1 - w : 0;

		nv[i] = seen < nb ? seen : nb;
		a[i] = lo > j0 ? (lo - j0 < nv[i] ? lo - j0 : nv[i]) : 0;
		if (a[i] == nv[i])
			continue;
		const float mx = kern_max(s + a[i], nv[i] - a[i]);
		m1[i] = mx > m[i] ? mx : m[i];
	}
	for (i = first; i < n; i++) {
		float *s = S + (size_t)(i - first) * ld_s;

		if (a[i] == nv[i]) {
			r[i] = 1.0f;
			memset(s, 0, nb * sizeof(float));
			continue;
		}
		/* m1 == m[i] covers both "no growth" (r = 1 exactly) and a row
		 * of -inf scores, where exp(-inf - -inf) would be NaN. */
		if (m1[i] == m[i]) {
			r[i] = 1.0f;
		} else if (bf) { /* the same exp (kern_attn_softmax_bf16's r, attn17) */
			r[i] = m[i];
			kern_exp_sum_prompt(&r[i], 1, m1[i]);
		} else {
			r[i] = expf(m[i] - m1[i]);
		}
		l[i] = l[i] * r[i] + (bf ? kern_exp_sum_prompt(s + a[i], nv[i] - a[i], m1[i])
					 : kern_exp_sum(s + a[i], nv[i] - a[i], m1[i]));
		m[i] = m1[i];
		memset(s, 0, a[i] * sizeof(float));
		memset(s + nv[i], 0, (nb - nv[i]) * sizeof(float));
	}
}

/* Soft-capping of rows [0, n) of S (nb scores each, stride ld_s). */
static void softcap_block(float *S, size_t ld_s, uint32_t n, uint32_t nb, float c)
{
	uint32_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < nb; j++)
			S[i * ld_s + j] = (float)(c * tanh((double)S[i * ld_s + j] / c));
}

/* The diagonal block of a prompt: query i sees keys up to pos + i, so
 * rows go by strips of ATTN_STRIP, each computing the keys its last row
 * sees rather than the whole block (half the diagonal block's products
 * were for masked keys). The keys a strip skips are masked for all its
 * rows: their scores were never read (softmax_block) and their P was 0,
 * so every computed value is as before (attention_avx2.c: a score or an
 * output element does not depend on the rows computed with it). */
#define ATTN_STRIP 8

/* Keys [0, n) of the block (from position j0, nb keys) that rows before
 * i1 see. */
static uint32_t strip_keys(uint32_t pos, uint32_t j0, uint32_t nb, uint32_t i1)
{
	const uint32_t seen = pos + i1 - j0;

	return seen < nb ? seen : nb;
}

/* End of the strip that starts at row i0 (rows before n): the rest of
 * the rows once row i0 sees the whole block. */
static uint32_t strip_end(uint32_t pos, uint32_t j0, uint32_t nb, uint32_t i0, uint32_t n)
{
	if (pos + i0 + 1 - j0 >= nb || n - i0 <= ATTN_STRIP)
		return n;
	return i0 + ATTN_STRIP;
}

/* Query heads of one kv head that a decode-sized tile's task takes
 * together (heads x queries <= ATTENTION_TILE): the key and value blocks
 * are converted from F16 once for all of them instead of once per head
 * (TinyLlama: 8 query heads per kv head, so decode did 8 conversions of
 * every block, as much work as the dot products). */
#define ATTN_SHARE_HEADS 8

/* dst[c] = src[c] * s, c < n, where dst and src are the same row or do
 * not overlap, 4 floats a step (GCC vector extension: SSE on x86-64,
 * NEON on AArch64): the plain loop stayed scalar (the rows may overlap
 * for all the compiler knows), ~10% of a prompt's attention time. A
 * product per element either way, so the same values. */
typedef float attn_v4 __attribute__((vector_size(16)));

static void scale_row(float *dst, const float *src, uint32_t n, float s)
{
	uint32_t c = 0;

	for (; c + 4 <= n; c += 4) {
		attn_v4 v;

		memcpy(&v, src + c, sizeof(v));
		v *= s;
		memcpy(dst + c, &v, sizeof(v));
	}
	for (; c < n; c++)
		dst[c] = src[c] * s;
}

/* Query heads of one kv head that a prompt tile's task takes together on
 * bf16 tiles (prompt_shared()): their queries are stacked as the rows of
 * one score call and one value call per key block, so the block's keys
 * are converted and transposed, and its values converted and
 * interleaved, once for all of them (attention_amx.c does that once a
 * call) rather than once per head. 8 (TinyLlama's whole group) where 4
 * were: half the conversions, ~5% of a 512-token prompt's attention
 * (LEVELS.md, attn16); but 4 (_FEW) when a step's tiles would then give
 * fewer than 4 tasks a thread (short prompts on many threads: TinyLlama
 * has 4 kv heads, so 8-head runs make only 4 tasks a 64-row tile). */
#define ATTN_PROMPT_HEADS 8
#define ATTN_PROMPT_HEADS_FEW 4

/* Whether tile tl's task takes a run of heads on the bf16 tiles: a
 * prompt tile of several rows, heads the tiles take, no larger than the
 * task's stacked buffers (ATTN_LOCAL_DIM), no ALiBi (its bias differs by
 * head; the stacked score call takes one). */
static int prompt_shared(const struct attention *a, const struct attention_tile *tl)
{
	const uint32_t dk = a->head_dim_k, dv = a->head_dim_v;

	return tl->prompt && tl->n > 1 && dk % 32 == 0 && dv % 16 == 0 && dk <= ATTN_LOCAL_DIM &&
	       dv <= ATTN_LOCAL_DIM && dk <= KERN_ATTN_BF16_DIM && dv <= KERN_ATTN_BF16_DIM &&
	       !a->alibi && a->n_head / a->n_head_kv > 1 && kern_attn_bf16();
}

/* Keys [lo[i], hi[i]) of a block (nb keys from position j0) that row i
 * of a prompt tile sees, i < n16, as softmax_block's range; rows before
 * `first` and past n see none (lo = hi). */
static void prompt_ranges(uint32_t first, uint32_t n, uint32_t n16, uint32_t pos, uint32_t j0,
			  uint32_t nb, uint32_t w, uint32_t *lo, uint32_t *hi)
{
	for (uint32_t i = 0; i < n16; i++) {
		const uint32_t seen = pos + i + 1 - j0;
		const uint32_t lw = w && pos + i + 1 > w ? pos + i + 1 - w : 0;

		if (i < first || i >= n) {
			lo[i] = hi[i] = 0;
			continue;
		}
		hi[i] = seen < nb ? seen : nb;
		lo[i] = lw > j0 ? (lw - j0 < hi[i] ? lw - j0 : hi[i]) : 0;
	}
}

/* Heads [h0, h0 + nh) of one kv head for a prompt tile (prompt_shared()):
 * head e's rows are e * n16 .. e * n16 + n - 1 of the stacked queries,
 * scores, state and outputs (n16: n rounded up to a tile's 16 rows).
 * Per row the same operations as attend_heads()' bf16 path for the head
 * alone (a score or output element depends only on its own row: the
 * stacked calls change no result; the softmax step is
 * kern_attn_softmax_bf16, softmax_block's row operations fused with the
 * weights' rounding to bf16, the same bits); rows a block does not reach
 * (before `first`) and the padding rows get P = 0 and r = 1, so the
 * value call leaves their outputs as they were (o * 1 + 0). Its buffers
 * are ~620 KB of stack (8 heads of 64 rows up to 128 wide: S 128 KB,
 * outputs 256 KB, queries 128 KB, weights 64 KB, the F16 buffers 32 KB),
 * so it is called beside attend_heads(), never inside its frame; pool
 * threads have the default 8 MB. Prompt tiles are never decode's (no
 * job->pre: attention_can_pre()). */
static __attribute__((noinline)) void
attend_prompt_heads(const struct attn_job *job, const struct attention_tile *tl, uint32_t h0,
		    uint32_t nh)
{
	const struct attention *a = job->a;
	const struct kv_cache *kv = tl->kv;
	const uint32_t dk = a->head_dim_k, dv = a->head_dim_v;
	const uint32_t g = h0 / (a->n_head / a->n_head_kv);
	const uint32_t wide = dk > dv ? dk : dv;
	const uint32_t kb = ATTN_KV_FLOATS / wide < ATTN_KEYS ? ATTN_KV_FLOATS / wide : ATTN_KEYS;
	const uint32_t n = tl->n, n16 = (n + 15) / 16 * 16, pos = tl->pos, end = tl->pos + tl->n;
	const size_t ld_qs = (size_t)a->n_head * dk, ld_os = (size_t)a->n_head * dv;
	const uint32_t w = attention_window(a, job->il);
	const int f16k = kern_attn_f16_rows();
	float kbuf[ATTN_KV_FLOATS], vbuf[ATTN_KV_FLOATS];
	_Alignas(64) float S[ATTN_PROMPT_HEADS * ATTENTION_TILE * ATTN_KEYS];
	_Alignas(64) float obuf[ATTN_PROMPT_HEADS * ATTENTION_TILE * ATTN_LOCAL_DIM];
	_Alignas(64) uint16_t qt[ATTN_PROMPT_HEADS * KERN_ATTN_BF16_QT(ATTENTION_TILE,
								       ATTN_LOCAL_DIM)];
	/* the block's weights as bf16 A tiles (kern_attn_softmax_bf16) */
	_Alignas(64) uint16_t pt[KERN_ATTN_BF16_PT(ATTN_PROMPT_HEADS * ATTENTION_TILE, ATTN_KEYS)];
	float m[ATTN_PROMPT_HEADS * ATTENTION_TILE], l[ATTN_PROMPT_HEADS * ATTENTION_TILE];
	float r[ATTN_PROMPT_HEADS * ATTENTION_TILE];
	uint32_t lo[ATTN_PROMPT_HEADS * ATTENTION_TILE], hi[ATTN_PROMPT_HEADS * ATTENTION_TILE];
	uint32_t i, j0, e;

	for (e = 0; e < nh; e++) {
		kern_attn_q_bf16(job->q + tl->row * ld_qs + (size_t)(h0 + e) * dk, ld_qs, dk, n,
				 qt + (size_t)e * n16 * dk);
		for (i = 0; i < n16; i++) {
			m[e * n16 + i] = -INFINITY;
			l[e * n16 + i] = 0.0f;
		}
	}
	memset(obuf, 0, (size_t)nh * n16 * dv * sizeof(float));
	/* keys from the window's start, as attend_heads() */
	for (j0 = w && pos + 1 > w ? pos + 1 - w : 0; j0 < end; j0 += kb) {
		const uint32_t nb = end - j0 < kb ? end - j0 : kb;
		const uint32_t first = j0 > pos ? j0 - pos : 0;
		const uint16_t *kh = f16k ? attn_kv_rows_f16(kv, job->il, g, 0, j0, nb) : NULL;
		const uint16_t *vh = kh ? attn_kv_rows_f16(kv, job->il, g, 1, j0, nb) : NULL;
		const float *kblk = kh && vh ? NULL : attn_kv_rows(kv, job->il, g, 0, j0, nb, kbuf);
		const float *vblk = kh && vh ? NULL : attn_kv_rows(kv, job->il, g, 1, j0, nb, vbuf);
		const int f16 = kh && vh;

		for (e = 0; e < nh; e++)
			prompt_ranges(first, n, n16, pos, j0, nb, w, lo + e * n16, hi + e * n16);
		if (a->softcap > 0.0f) {
			kern_attn_scores_bf16(qt, f16 ? (const void *)kh : kblk, f16, dk, NULL,
					      a->scale, S, ATTN_KEYS, (size_t)nh * n16, nb);
			for (e = 0; e < nh; e++)
				softcap_block(S + ((size_t)e * n16 + first) * ATTN_KEYS, ATTN_KEYS,
					      n - first, nb, a->softcap);
			kern_attn_softmax_bf16(S, ATTN_KEYS, lo, hi, (size_t)nh * n16, nb, m, l, r,
					       pt);
		} else { /* the scores kept in L1 (attn17) */
			kern_attn_scores_softmax_bf16(qt, f16 ? (const void *)kh : kblk, f16, dk,
						      a->scale, lo, hi, (size_t)nh * n16, nb, m, l,
						      r, pt);
		}
		kern_attn_accum_bf16_tiles(obuf, dv, r, pt, f16 ? (const void *)vh : vblk, f16, dv,
					   (size_t)nh * n16, nb);
	}
	for (e = 0; e < nh; e++)
		kern_attn_out_bf16(obuf + (size_t)e * n16 * dv, dv, l + e * n16,
				   job->out + tl->row * ld_os + (size_t)(h0 + e) * dv, ld_os, dv, n);
}

/* Keys a block of attend_heads() holds: ATTN_KEYS, fewer for wide heads
 * (its conversion buffers). */
static uint32_t attend_block_keys(const struct attention *a)
{
	const uint32_t wide = a->head_dim_k > a->head_dim_v ? a->head_dim_k : a->head_dim_v;

	return ATTN_KV_FLOATS / wide < ATTN_KEYS ? ATTN_KV_FLOATS / wide : ATTN_KEYS;
}

/* Asks for up to two blocks of keys and values of kv head g from
 * position j0 (at most n of them) of tile tl's cache, layer il. */
static void attend_prefetch(const struct attention *a, const struct attention_tile *tl,
			    uint32_t il, uint32_t g, uint32_t j0, uint32_t n)
{
	const uint32_t most = 2 * attend_block_keys(a);

	if (n > most)
		n = most;
	attn_kv_prefetch(tl->kv, il, g, 0, j0, n);
	attn_kv_prefetch(tl->kv, il, g, 1, j0, n);
}

/* Heads [h0, h0 + nh) of one kv head, the queries of one tile. Per head,
 * the same operations on the same values as a task of its own: the
 * sharing changes no result. */
static __attribute__((noinline)) void
attend_heads(const struct attn_job *job, const struct attention_tile *tl, uint32_t h0,
	     uint32_t nh, struct attn_pf *pf)
{
	const struct attention *a = job->a;
	const struct kv_cache *kv = tl->kv;
	const uint32_t dk = a->head_dim_k, dv = a->head_dim_v;
	const uint32_t g = h0 / (a->n_head / a->n_head_kv);
	const uint32_t kb = attend_block_keys(a);
	const uint32_t n = tl->n, pos = tl->pos, end = tl->pos + tl->n; /* keys [0, end) */
	const size_t ld_qs = (size_t)a->n_head * dk, ld_os = (size_t)a->n_head * dv;
	const int local = dk <= ATTN_LOCAL_DIM && dv <= ATTN_LOCAL_DIM;
	const size_t ld_q = local ? dk : ld_qs, ld_o = local ? dv : ld_os;
	const float scale = a->scale;
	const uint32_t w = attention_window(a, job->il);
	const int f16k = kern_attn_f16_rows();
	/* A prompt tile's products on bf16 tiles (kern_attn_bf16): the whole
	 * block for its rows at once, the diagonal's masked scores computed
	 * and then set to 0 by softmax_block (no strips: a tile product costs
	 * the same for 8 rows as for 16). A one-row prompt tile too: a chunk
	 * of 64 k + 1 prompt rows ends with one, and in another chunking
	 * the same row sits in a taller tile, so on the float kernels its
	 * keys and values (forward.c plan()) depended on the chunking. */
	const int bf = tl->prompt && dk % 32 == 0 && dv % 16 == 0 &&
		       dk <= KERN_ATTN_BF16_DIM && dv <= KERN_ATTN_BF16_DIM && kern_attn_bf16();
	float kbuf[ATTN_KV_FLOATS], vbuf[ATTN_KV_FLOATS];
	float qbuf[ATTENTION_TILE * ATTN_LOCAL_DIM], obuf[ATTENTION_TILE * ATTN_LOCAL_DIM];
	/* rows of S 64-byte aligned: a ZMM load across two lines costs two */
	_Alignas(64) float S[ATTENTION_TILE * ATTN_KEYS];
	float bias[ATTN_KEYS];
	/* a head's queries as bf16 A tiles (prompt tiles, bf): once per task
	 * for one head, per block and head for a run of heads */
	_Alignas(64) uint16_t qt[KERN_ATTN_BF16_QT(ATTENTION_TILE, KERN_ATTN_BF16_DIM)];
	float m[ATTENTION_TILE], l[ATTENTION_TILE], r[ATTENTION_TILE];
	uint32_t i, j0, e;

	/* a decode group: its heads as the rows of one score and one value
	 * call a block (below) */
	const int group = n == 1 && local && !a->alibi && !bf;

	if (!group) /* no points between calls: the successor's rows now */
		attn_pf_step(pf, SIZE_MAX);
	if (job->pre) /* one task per (row, kv head): attention_can_pre() */
		job->pre(job->pre_ctx, tl->row, g);
	/* head e's rows are e * n .. e * n + n - 1 of the state and buffers */
	for (e = 0; e < nh; e++) {
		const float *qs = job->q + tl->row * ld_qs + (size_t)(h0 + e) * dk;
		float *os = job->out + tl->row * ld_os + (size_t)(h0 + e) * dv;
		float *out = local ? obuf + (size_t)e * n * ld_o : os;

		for (i = 0; i < n; i++) {
			m[e * n + i] = -INFINITY;
			l[e * n + i] = 0.0f;
			if (local && !(bf && nh == 1))
				memcpy(qbuf + (e * n + i) * ld_q, qs + i * ld_qs, dk * sizeof(float));
			memset(out + i * ld_o, 0, dv * sizeof(float));
		}
	}
	if (bf && nh == 1)
		kern_attn_q_bf16(job->q + tl->row * ld_qs + (size_t)h0 * dk, ld_qs, dk, n, qt);
	/* A window starts at the first key the tile's first query sees: no
	 * more than n_swa - 1 + n keys are read, all of which a ring layer
	 * (kv_cache.h) still holds. (Key blocks then start where the tile
	 * does, so prefill and decode of such layers round differently.) */
	for (j0 = w && pos + 1 > w ? pos + 1 - w : 0; j0 < end; j0 += kb) {
		const uint32_t nb = end - j0 < kb ? end - j0 : kb;
		/* Queries before `first` end before this block. */
		const uint32_t first = j0 > pos ? j0 - pos : 0;
		const uint16_t *kh = f16k ? attn_kv_rows_f16(kv, job->il, g, 0, j0, nb) : NULL;
		const uint16_t *vh = kh ? attn_kv_rows_f16(kv, job->il, g, 1, j0, nb) : NULL;
		/* converted only where not read in place */
		const float *kblk = kh && vh ? NULL : attn_kv_rows(kv, job->il, g, 0, j0, nb, kbuf);
		const float *vblk = kh && vh ? NULL : attn_kv_rows(kv, job->il, g, 1, j0, nb, vbuf);

		if (!vh)
			kh = NULL;
		if (n == 1 && j0 + 2 * kb < end) /* a long context's block after next */
			attend_prefetch(a, tl, job->il, g, j0 + 2 * kb, end - j0 - 2 * kb);
		if (group) {
			/* Decode: the group's heads are the rows of one score
			 * call and one value call (tiles of 4 queries share each
			 * key and value load) rather than a lone-query call per
			 * head. With one query, first = 0 and the block's nb keys
			 * are all seen (j0 + nb <= pos + 1); head e's query, state
			 * and output are rows e of qbuf, m, l, r, obuf, and each
			 * score and output element sees the same operations in
			 * either form (attention_avx2.c), so no result changes. */
			/* ATTN_PF_KEYS keys a call while the successor has
			 * lines to ask for, those lines between (one call
			 * once it has none: a long context's later blocks);
			 * a score does not depend on the keys computed beside
			 * it (strip_keys() relies on it too) */
			const uint32_t ck = attn_pf_pending(pf) ? ATTN_PF_KEYS : nb;

			for (uint32_t c = 0; c < nb; c += ck) {
				attn_pf_step(pf, ATTN_PF_LINES);
				blk_scores(qbuf, ld_q, kblk ? kblk + (size_t)c * dk : NULL,
					   kh ? kh + (size_t)c * dk : NULL, dk, NULL, scale, S + c,
					   ATTN_KEYS, nh, nb - c < ck ? nb - c : ck);
			}
			if (a->softcap > 0.0f)
				softcap_block(S, ATTN_KEYS, nh, nb, a->softcap);
			/* the heads as the rows of one call, each at pos: their
			 * maxima, then their exponentials, back to back (a call a
			 * head left each row's exp_sum chain to wait on its own
			 * maximum) */
			softmax_block(S, ATTN_KEYS, 0, nh, pos, 0, j0, nb, w, m, l, r, 0);
			attn_pf_step(pf, ATTN_PF_LINES);
			blk_accum(obuf, ld_o, r, S, ATTN_KEYS, vblk, vh, dv, nh, nb);
			attn_pf_step(pf, ATTN_PF_LINES);
			continue;
		}
		for (e = 0; e < nh; e++) {
			const float *q = local ? qbuf + (size_t)e * n * ld_q
					       : job->q + tl->row * ld_qs + (size_t)(h0 + e) * dk;
			float *out = local ? obuf + (size_t)e * n * ld_o
					   : job->out + tl->row * ld_os + (size_t)(h0 + e) * dv;

			if (a->alibi)
				alibi_biases(a->alibi, a->slopes[h0 + e], j0, nb, bias);
			if (bf) {
				const void *kr = kh ? (const void *)kh : kblk;
				const void *vr = kh ? (const void *)vh : vblk;

				/* S row i is query i here; scores from the 16-row
				 * group holding `first` (rows before it unread) */
				const uint32_t g0 = first / 16 * 16;
				float *Sf = S + (size_t)first * ATTN_KEYS;

				if (nh > 1)
					kern_attn_q_bf16(q, ld_q, dk, n, qt);
				kern_attn_scores_bf16(qt + (size_t)g0 * dk, kr, kh != NULL, dk,
						      a->alibi ? bias : NULL, scale,
						      S + (size_t)g0 * ATTN_KEYS, ATTN_KEYS, n - g0,
						      nb);
				if (a->softcap > 0.0f)
					softcap_block(Sf, ATTN_KEYS, n - first, nb, a->softcap);
				softmax_block(Sf, ATTN_KEYS, first, n, pos, 1, j0, nb, w, m + e * n,
					      l + e * n, r + e * n, 1);
				kern_attn_accum_bf16(out + first * ld_o, ld_o, r + e * n + first, Sf,
						     ATTN_KEYS, vr, kh != NULL, dv, n - first, nb);
				continue;
			}
			for (i = first; i < n; i = strip_end(pos, j0, nb, i, n)) {
				const uint32_t i1 = strip_end(pos, j0, nb, i, n);
				float *Si = S + (size_t)(i - first) * ATTN_KEYS;
				blk_scores(q + i * ld_q, ld_q, kblk, kh, dk,
					   a->alibi ? bias : NULL, scale, Si, ATTN_KEYS, i1 - i,
					   strip_keys(pos, j0, nb, i1));
				if (a->softcap > 0.0f)
					softcap_block(Si, ATTN_KEYS, i1 - i, strip_keys(pos, j0, nb, i1),
						      a->softcap);
			}
			softmax_block(S, ATTN_KEYS, first, n, pos, 1, j0, nb, w, m + e * n,
				      l + e * n, r + e * n, 0);
			for (i = first; i < n; i = strip_end(pos, j0, nb, i, n))
				blk_accum(out + i * ld_o, ld_o, r + e * n + i,
					  S + (size_t)(i - first) * ATTN_KEYS, ATTN_KEYS, vblk, vh, dv,
					  strip_end(pos, j0, nb, i, n) - i,
					  strip_keys(pos, j0, nb, strip_end(pos, j0, nb, i, n)));
		}
	}
	attn_pf_step(pf, SIZE_MAX); /* what the points left */
	for (e = 0; e < nh; e++) {
		float *os = job->out + tl->row * ld_os + (size_t)(h0 + e) * dv;
		const float *out = local ? obuf + (size_t)e * n * ld_o : os;

		for (i = 0; i < n; i++)
			scale_row(os + i * ld_os, out + i * ld_o, dv, 1.0f / l[e * n + i]);
	}
}

/* Heads a task of tile `tl` takes together: the query heads of a kv group
 * in runs of up to ATTN_SHARE_HEADS while run x queries fits a tile; a
 * prefill tile takes one head a task, but for a prompt tile on bf16
 * tiles: runs of up to ATTN_PROMPT_HEADS (attend_prompt_heads()). */
static uint32_t attend_run(const struct attention *a, const struct attention_tile *tl,
			   uint32_t prompt_heads)
{
	const uint32_t group = a->n_head / a->n_head_kv;
	const uint32_t run = group < ATTN_SHARE_HEADS ? group : ATTN_SHARE_HEADS;

	if (run * tl->n > ATTENTION_TILE && prompt_shared(a, tl))
		return group < prompt_heads ? group : prompt_heads;
	return run * tl->n > ATTENTION_TILE ? 1 : run;
}

/* Tasks of tile `tl`: per kv head, its group cut into runs (a shorter
 * last run when the group is not a multiple). */
static uint32_t attend_tasks(const struct attention *a, const struct attention_tile *tl,
			     uint32_t prompt_heads)
{
	const uint32_t group = a->n_head / a->n_head_kv, run = attend_run(a, tl, prompt_heads);

	return a->n_head_kv * ((group + run - 1) / run);
}

/* Task (tile counted from the last, task j of the tile): run j % per of
 * kv head j / per. Tiles with fewer tasks than the step's most return at
 * once for the rest. */
static void attend_task(const struct attn_job *job, size_t rtile, size_t j, struct attn_pf *pf)
{
	const struct attention *a = job->a;
	const struct attention_tile *tl = &job->tiles[job->n_tiles - 1 - rtile];
	const uint32_t group = a->n_head / a->n_head_kv, run = attend_run(a, tl, job->prompt_heads);
	const uint32_t per = (group + run - 1) / run;
	uint32_t h0, nh;

	if (j >= (size_t)a->n_head_kv * per) {
		attn_pf_step(pf, SIZE_MAX);
		return;
	}
	h0 = (uint32_t)(j / per) * group + (uint32_t)(j % per) * run;
	nh = h0 % group + run > group ? group - h0 % group : run;
	if (nh > 1 && prompt_shared(a, tl)) {
		attn_pf_step(pf, SIZE_MAX);
		attend_prompt_heads(job, tl, h0, nh);
	} else {
		attend_heads(job, tl, h0, nh, pf);
	}
}

/* Task (tile counted from the last, task j of the tile), no successor's
 * rows to ask for (a pool item). */
static void attend_tile_cb(void *data, size_t rtile, size_t j)
{
	attend_task(data, rtile, j, NULL);
}

/* pf = decode task i's (tile i / n_head_kv, kv head i % n_head_kv)
 * first keys and values, up to two blocks (as attend_prefetch()). */
static void attend_pf_task(const struct attn_job *job, size_t i, struct attn_pf *pf)
{
	const struct attention *a = job->a;
	const struct attention_tile *tl = &job->tiles[job->n_tiles - 1 - i / a->n_head_kv];
	const uint32_t g = (uint32_t)(i % a->n_head_kv), w = attention_window(a, job->il);
	const uint32_t end = tl->pos + 1, j0 = w && end > w ? end - w : 0;
	const uint32_t most = 2 * attend_block_keys(a), n = end - j0 < most ? end - j0 : most;

	attn_pf_set(pf, 0, tl->kv, job->il, g, 0, j0, n);
	attn_pf_set(pf, 1, tl->kv, job->il, g, 1, j0, n);
}

/*
 * A decode step's item on 2+ threads: the tasks of its own region in
 * order, then the unclaimed tasks of the others'. Each task asks for
 * the cache rows of the task after it in the region, which its thread
 * most likely runs next, a few lines between its own kernel calls
 * (attention_kv.h struct attn_pf): a decode task's keys and values are
 * cold (the step's weight stream evicted them since the last step), and
 * their misses were most of its time (8 TinyLlama sequences, 100
 * positions, Zen 4: ~9 us a task, ~3 us with the rows in cache). One
 * pool item per thread, as the products' regions (kernels_matmul.c):
 * with claims from one counter the next task a thread got was unknown.
 */
static void attend_region_cb(void *data, size_t r)
{
	struct attn_job *job = data;
	const struct attention *a = job->a;

	for (uint32_t k = 0; k < job->n_region; k++) {
		const uint32_t q = (uint32_t)(r + k) % job->n_region;

		for (;;) {
			const uint32_t i = atomic_fetch_add_explicit(&job->next[q], 1,
								     memory_order_relaxed);
			if (i >= job->beg[q + 1])
				break;
			struct attn_pf pf = {0};

			if (i + 1 < job->beg[q + 1])
				attend_pf_task(job, i + 1, &pf);
			attend_task(job, i / a->n_head_kv, i % a->n_head_kv, &pf);
		}
	}
}

int attention_can_pre(const struct attention *a, const struct attention_tile *tiles,
		      uint32_t n_tiles)
{
	uint32_t t;

	for (t = 0; t < n_tiles; t++)
		if (tiles[t].n != 1 ||
		    attend_run(a, &tiles[t], ATTN_PROMPT_HEADS) != a->n_head / a->n_head_kv)
			return 0;
	return 1;
}

void attention_run(const struct attention *a, tpool_t pool, uint32_t il,
		   const struct attention_tile *tiles, uint32_t n_tiles, const float *q, float *out)
{
	attention_run_pre(a, pool, il, tiles, n_tiles, q, out, NULL, NULL);
}

void attention_run_pre(const struct attention *a, tpool_t pool, uint32_t il,
		       const struct attention_tile *tiles, uint32_t n_tiles, const float *q,
		       float *out, attention_pre_fn pre, void *pre_ctx)
{
	struct attn_job job = {.a = a, .il = il, .tiles = tiles, .n_tiles = n_tiles, .q = q,
			       .out = out, .pre = pre, .pre_ctx = pre_ctx,
			       .prompt_heads = ATTN_PROMPT_HEADS};
	uint32_t t, most = 0;

	/* Tasks go by query head (or run of heads), not kv head, so decode
	 * with few kv heads (MQA) still spreads over the threads. Only real
	 * tasks are pool items: a decode step of 8 TinyLlama sequences has 32,
	 * where one item per query head gave 256, 224 of them claims (a
	 * contended atomic each on 2 threads) that returned at once. The last
	 * tile of a prompt (the most keys) goes first for every head, the
	 * first tile last: the pool hands items out in order, so the join
	 * waits on a short task rather than on a head's last tile (prefill:
	 * 8x a first tile's cost). */
	if ((size_t)n_tiles * a->n_head_kv < 4 * tpool_threads(pool))
		job.prompt_heads = ATTN_PROMPT_HEADS_FEW;
	for (t = 0; t < n_tiles; t++)
		if (attend_tasks(a, &tiles[t], job.prompt_heads) > most)
			most = attend_tasks(a, &tiles[t], job.prompt_heads);
	if (tpool_threads(pool) > 1 && attention_can_pre(a, tiles, n_tiles)) {
		/* decode: one task per (tile, kv head), most = n_head_kv */
		const size_t nt = (size_t)n_tiles * most;
		size_t nr = tpool_threads(pool);

		nr = nr < ATTN_REGIONS_MAX ? nr : ATTN_REGIONS_MAX;
		nr = nr < nt ? nr : nt;
		job.n_region = (uint32_t)nr;
		for (size_t r = 0; r <= nr; r++)
			job.beg[r] = (uint32_t)(r * nt / nr);
		for (size_t r = 0; r < nr; r++)
			atomic_init(&job.next[r], job.beg[r]);
		tpool_run_1d(pool, attend_region_cb, &job, nr);
		return;
	}
	tpool_run_2d(pool, attend_tile_cb, &job, n_tiles, most);
}
