/*
 * attention.h - causal multi-head attention of a step's query rows against
 * each sequence's kv_cache: softmax(q k^T / sqrt(d_k) + ALiBi) v.
 *
 * The forward pass projects q, k and v, stores this step's keys and values
 * in the caches, then calls attention_run() with the step cut into tiles
 * of at most ATTENTION_TILE queries of one sequence. Each task (one query
 * head, one tile; for a decode-sized tile, up to 8 query heads of one kv
 * head, the rows of one score and one value call) streams its kv head's
 * keys and values once, in blocks,
 * flash-attention style: per block, the scores of the whole tile against
 * the block (SIMD dot products), each row's maximum, one rescale of the
 * running output when it grew, exp() of the block vectorised, and the
 * block's values added with those weights (kernels.h, kern_attn_*; at
 * the avx2 and avx512 levels the F16 cache's rows are read in place and
 * converted in registers: the same floats as a converted copy). No
 * score matrix beyond one tile x one block exists; that, the F16
 * conversion buffers (scalar level; blocks that wrap a ring layer) and
 * contiguous copies of the tile's query and output
 * rows, and a prompt tile's queries as bf16 tiles, live on the task's
 * stack (about 150 KB, a prompt tile's run of heads on bf16 tiles about
 * 620 KB; pool threads have the default 8 MB): nothing is
 * allocated while running.
 *
 * Prompt tiles (attention_tile.prompt: rows whose outputs are never
 * sampled, of a model whose q, k, v projections are Q8_0 / Q4_0 or the
 * K-quants, forward.c plan()) take their score and value products in
 * bf16 where kern_attn_bf16() says so (EMBER_AMX_BF16): on the amx
 * level's tiles (the bf16 prefill's switch), or on the avx512 level's
 * VDPBF16PS blocks where the CPU has AVX512-BF16 (Zen 4; there the
 * prompt rows' products stay int8, whose activations are coarser than
 * bf16 already): q, k, softmax weights and v rounded to bf16, fp32 sums;
 * their softmax's exp is the shorter kern_exp_sum_prompt (within 1e-5).
 * Still a row's result depends on nothing but its own query and the
 * cache, so prompt rows are the same bits in any chunking; sampled
 * rows (prompt = 0) never take them.
 *
 * Semantics: query i of a tile (position pos + i) attends to the keys at
 * positions 0 .. pos + i of its sequence (causal); query head h reads kv
 * head h / (n_head / n_head_kv) (GQA, MQA); the ALiBi bias, when the
 * architecture has one, is added to the raw dot product before the
 * 1/sqrt(d_k) scaling (see arch_alibi); Gemma's scale, soft-capping and
 * sliding window (struct attention) change the score and the causal range
 * as stated there. Each query's result is computed by
 * the same operations whatever its tile, thread or batch (key blocks start
 * at fixed positions), so attention adds no difference between prefill in
 * one call, in chunks, or token by token; except on sliding-window layers,
 * whose blocks start at the tile's first visible key (float rounding).
 *
 * Ownership: struct attention is caller storage owning its slope table;
 * tiles, q, out and the caches are borrowed for one call.
 * Threads: attention_run() spreads tasks over `pool` (NULL: the calling
 * thread) and returns when all are done; a struct attention is read-only
 * once initialised and may serve any number of passes.
 */
#ifndef EMBER_ATTENTION_H
#define EMBER_ATTENTION_H

#include <stdint.h>

#include "arch.h"
#include "kv_cache.h"
#include "model.h"
#include "threadpool.h"

/* Queries per tile: the keys of one kv head are streamed once per tile. */
#define ATTENTION_TILE 64

/* Widest head (head_dim_k, head_dim_v) attention_init() accepts: the
 * F16 conversion buffers hold at least one key block of this width. */
#define ATTENTION_MAX_HEAD_DIM 4096

struct attention {
	uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
	enum arch_alibi alibi;
	float *slopes; /* [n_head] ALiBi slope per head (bf16-rounded for BF16), or NULL; owned */
	float scale;   /* multiplies q.k: hp->attn_scale, or 1/sqrt(head_dim_k) when 0 */
	float softcap; /* scores s -> c tanh(s / c) before the softmax; 0: none */
	/* Sliding-window layers (arch_layer_is_swa of swa_arch, borrowed): query
	 * at position p sees keys p - n_swa < j <= p. NULL: every layer causal. */
	const struct arch_desc *swa_arch;
	uint32_t n_swa;
};

/* n queries of one sequence: rows row .. row+n-1 of q and out, at
 * positions pos .. pos+n-1, whose keys and values (and all before them)
 * are stored in kv. */
struct attention_tile {
	const struct kv_cache *kv; /* borrowed */
	uint32_t row;
	uint32_t pos;
	uint32_t n; /* 1 .. ATTENTION_TILE */
	/* 1: prompt rows, whose outputs are never sampled (forward.c plan()):
	 * where kern_attn_bf16() says so their products run in bf16 (amx
	 * tiles, avx512 VDPBF16PS), other bits than the float kernels'. 0 (attention_plan's): the
	 * float kernels, the same bits whatever the tile or batch. */
	uint32_t prompt;
};

/* Sets up `a` for heads of shape `hp` and ALiBi kind `alibi` (slopes from
 * hp->alibi_max_bias). Returns 0, EMBER_EUNSUPPORTED (a head wider than
 * ATTENTION_MAX_HEAD_DIM, n_head not a multiple of n_head_kv) or
 * EMBER_ENOMEM, with a line in err. */
int attention_init(struct attention *a, const struct model_hparams *hp, enum arch_alibi alibi,
		   char *err);

/* Makes the layers `arch` marks sliding attend to their last n_swa keys
 * (n_swa = 0 or arch->swa = ARCH_SWA_NONE: none). */
void attention_set_window(struct attention *a, const struct arch_desc *arch, uint32_t n_swa);

/* The window of layer il: n_swa for a sliding layer, 0 (all keys) else. */
uint32_t attention_window(const struct attention *a, uint32_t il);

/* Frees the slope table. Safe on a zeroed struct. */
void attention_free(struct attention *a);

/* Cuts n_tok rows of one sequence (first row `row`, first position
 * `pos`) into tiles written to tiles[0..] (prompt = 0); returns how
 * many, ceil(n_tok / ATTENTION_TILE). */
uint32_t attention_plan(struct attention_tile *tiles, const struct kv_cache *kv, uint32_t row,
			uint32_t pos, uint32_t n_tok);

/*
 * out[r][h][:] = attention of q[r][h][:] for every row r of the tiles and
 * every query head h, against layer il of the tiles' caches.
 *   q:   [rows][n_head][head_dim_k] floats (rotary embedding applied)
 *   out: [rows][n_head][head_dim_v] floats, written (rows of the tiles only)
 */
void attention_run(const struct attention *a, tpool_t pool, uint32_t il,
		   const struct attention_tile *tiles, uint32_t n_tiles, const float *q, float *out);

/* Completes row `row`'s part of kv head g before attention reads it: the
 * queries of g's heads in q (RoPE, norms) and the row's key and value of
 * head g in the cache (attention_run_pre). */
typedef void (*attention_pre_fn)(void *ctx, uint32_t row, uint32_t g);

/* Whether attention_run_pre() can take the step's tiles: all of one
 * query (decode) and a kv group no wider than one task's run, so that
 * each (row, kv head) belongs to exactly one task. */
int attention_can_pre(const struct attention *a, const struct attention_tile *tiles,
		      uint32_t n_tiles);

/* attention_run() where each task first calls pre(ctx, row, g) for its
 * tile's row and kv head: a decode step's per-row work before attention
 * done in attention's own tasks, one pool job (and join) a layer fewer.
 * Only where attention_can_pre() says so. */
void attention_run_pre(const struct attention *a, tpool_t pool, uint32_t il,
		       const struct attention_tile *tiles, uint32_t n_tiles, const float *q,
		       float *out, attention_pre_fn pre, void *pre_ctx);

#endif
