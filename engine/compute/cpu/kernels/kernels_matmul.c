/*
 * kernels_matmul.c - the threaded matmul driver (kernels.h kern_matmul_n_fused,
 * kern_matmul_scratch): the scratch layout of the activations, the job
 * of one call cut into chunks and regions for the pool, and the tasks
 * that make the activations (quantized blocks, bf16 tiles, deferred row
 * work) before the products. Which kernel a level runs is kernels.c's
 * table (LEVELS.md); this file only schedules them.
 *
 * Threads: output rows are cut into chunks (a multiple of 16 rows, about
 * sixteen per thread, for balance at the joins), one pool item
 * each; activation quantization is spread over tokens the same way.
 * Decode and small batches (<= 16 tokens) cut the chunks into one
 * contiguous region per thread (about equal rows: kern__cut_regions),
 * each streamed in order by its thread,
 * the last chunks balanced by stealing (kern__region_cb; 2..16 tokens:
 * one-tile chunks in shrinking runs, kern__small_runs).
 *
 * Row work before a product (kern_matmul_n_fused's kern_pre: forward.c's
 * deferred norms and activations) runs in the quantizing tasks, a group
 * of rows a task; where the product takes plain bf16 A tiles
 * (kern_bf16_plain) a group of prompt rows may be written straight into
 * them by the caller's bf16 writer, no float rows between (LEVELS.md
 * pre15), the int8 (Q8_K) blocks then made from its redo if a path asks.
 *
 * Ownership: the caller owns x, the outputs and the scratch; a job lives
 * on the calling thread's stack for the call. Threads: the pool's tasks
 * run the job's callbacks; the caller blocks until each pool pass ends.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels.h"
#include "kernels_impl.h"
#include "quants.h"

/* Rows per chunk are a multiple of this (the tallest tile, AVX2's
 * quantized prefill), so no chunk ends in a partly empty tile. */
#define KERN_ROW_ALIGN 16
/* Packed groups (kernels.h KERN_PACKED) are 4 rows (K-quants) or 16
 * (Q4_0/Q8_0): chunk boundaries must fall on them. */
static_assert(KERN_ROW_ALIGN % 16 == 0, "chunks end on packed row groups");
/* Below this many rows a chunk is not worth a task hand-off. */
#define KERN_MIN_CHUNK_ROWS 16
/* Prefill chunks (more than KERN_SMALL_BATCH tokens) have at least this
 * many rows where every thread still gets a chunk: each call reads all
 * the tokens' activations (2 MiB of bf16 tiles at 512 x 2048, from L3),
 * and TinyLlama's k and v (256 rows) in 16-row chunks ran the AMX bf16
 * GEMM at ~60% of its 64-row rate (one thread, 512 tokens, LEVELS.md
 * amxg12 and amxg13). */
#define KERN_MIN_CHUNK_ROWS_PREFILL 64
/* Prefill: a join waits for the last chunk in flight while the other
 * threads idle, about half a chunk each time; at 4 chunks a thread that
 * was ~1/9 of a GEMM's time on 2 threads. At 16 it is ~1/33, and a chunk
 * (64 rows of a 2048-row matrix x 512 tokens: ~0.5 ms) still dwarfs its
 * claim and its first, unprefetched tile. */
#define KERN_CHUNKS_PER_THREAD 16
/* Decode chunks are finer: a join waits for the last chunk in flight, and
 * a GEMV chunk is pure streaming, so smaller ones cost nothing but
 * shorten that wait (TinyLlama: 111 joins a token, 89 products and 22
 * attention jobs, counted in LEVELS.md's dec12 section). */
#define KERN_CHUNKS_PER_THREAD_GEMV 16
/* Up to this many tokens (a batched decode step: weights streamed once
 * for all of them) chunks are cut as finely as for one token. */
#define KERN_SMALL_BATCH 16
/* 1: the bf16 tokens' int8 blocks are made on demand only (a->lazy);
 * 0 (-D, for measuring what that saves): with their tiles, eagerly. */
#ifndef KERN_ACT_LAZY
#define KERN_ACT_LAZY 1
#endif

int kern_bf16_fuse_off;
int kern_glu_off;

static size_t kern__act_row_bytes(size_t n_in)
{
	return n_in / KERN_QK * sizeof(struct kern_block_q8a);
}

/* Bytes of one token's xd + xs8 summary rows. */
static size_t kern__sum_row_bytes(size_t n_in)
{
	return kern_act_groups_pad(n_in / KERN_QK) * (sizeof(float) + sizeof(int32_t));
}

/* Q2_K .. Q6_K: every token as kern_block_q8_k where the level has its
 * own Q8_K GEMV (kquants_gemv.h); its GEMM then reads the same blocks, so
 * a token's result does not depend on its batch. */
static int kern__wants_q8k(uint32_t wtype)
{
	return wtype == DTYPE_Q4_K || wtype == DTYPE_Q5_K || wtype == DTYPE_Q6_K ||
	       wtype == DTYPE_Q2_K || wtype == DTYPE_Q3_K;
}

/* The AMX bf16 prefill's activation tiles after the rest of the scratch
 * (kernels_amx_bf16.c): bytes, 0 where that path does not run. */
static size_t kern__bf16_bytes(uint32_t wtype, size_t n_in, size_t n_tok)
{
#if defined(__x86_64__)
	if (kern_init() == CPU_LEVEL_AMX)
		return kern_amxbf_scratch(wtype, n_in, n_tok);
#endif
	return (void)wtype, (void)n_in, (void)n_tok, 0;
}

/* Whether a product of wtype (KERN_PACKED included) reads every token's
 * Q8_K blocks (a->xk) rather than the int8 blocks: kern_matmul_n_fused's
 * rule for the K-quants. */
static int kern__reads_q8k(uint32_t wtype)
{
	const uint32_t t = wtype & ~KERN_PACKED;

	return kern__wants_q8k(t) &&
	       ((wtype & KERN_PACKED) || kern__ops->gemv[t] != kern__ops->gemm[t]);
}

int kern_mm_mixed_off;

int kern_mm_parts_share(uint32_t a, uint32_t b, size_t n_in)
{
	const uint32_t ta = a & ~KERN_PACKED, tb = b & ~KERN_PACKED;

	if (a == b)
		return 1;
	kern_init();
	if (kern_mm_mixed_off || !kern_supports(a) || !kern_supports(b) ||
	    !kern_wtype_quantized(ta) || !kern_wtype_quantized(tb) ||
	    n_in % dtype_block(ta) != 0 || n_in % dtype_block(tb) != 0)
		return 0;
	/* the same scratch layout (kern_matmul_scratch), the same blocks
	 * made, the same bf16 tiles (their bytes: 0 where none) and writer */
	return kern__wants_q8k(ta) == kern__wants_q8k(tb) &&
	       kern__reads_q8k(a) == kern__reads_q8k(b) &&
	       kern__bf16_bytes(ta, n_in, 64) == kern__bf16_bytes(tb, n_in, 64) &&
	       kern_bf16_plain(ta) == kern_bf16_plain(tb);
}

/* The product function of a part of wtype (KERN_PACKED included): one
 * bf16 token is the GEMM's (its dispatch), not the GEMV's. */
static kern_gemm_fn kern__gemm_of(uint32_t wtype, size_t n_tok, int bf)
{
	const uint32_t t = wtype & ~KERN_PACKED;

	if (wtype & KERN_PACKED) /* rows in groups (kernels.h): chunks end on them */
		return n_tok == 1 && !bf ? kern__ops->pgemv[t] : kern__ops->pgemm[t];
	return n_tok == 1 && !bf ? kern__ops->gemv[t] : kern__ops->gemm[t];
}

size_t kern_matmul_scratch(uint32_t wtype, size_t n_in, size_t n_tok)
{
	wtype &= ~KERN_PACKED; /* the same activations either way */
	size_t q8k = kern__wants_q8k(wtype) ? n_in / KERN_QKK * sizeof(struct kern_block_q8_k) : 0;

	if (!kern_wtype_quantized(wtype)) /* F16, BF16: the split's tiles alone */
		return kern__bf16_bytes(wtype, n_in, n_tok);
	return (((kern__act_row_bytes(n_in) + kern__sum_row_bytes(n_in) + q8k) * n_tok + 63) &
		~(size_t)63) +
	       kern__bf16_bytes(wtype, n_in, n_tok);
}

/* Most regions a streaming job is cut into (one per thread, more threads
 * share them). */
#define KERN_REGIONS_MAX 64

struct kern__job {
	const struct kern_ops *ops;
	kern_gemm_fn gemm[KERN_MM_PARTS_MAX]; /* one per part: types may differ */
	struct kern_gemm_args args[KERN_MM_PARTS_MAX]; /* one per part; x shared */
	size_t chunk[KERN_MM_PARTS_MAX];               /* output rows per task */
	size_t first[KERN_MM_PARTS_MAX + 1];           /* first task of each part */
	size_t n_part;
	const float *x; /* float activations, for quantization */
	/* Jobs on 2+ threads: the chunks [0, first[n_part]) are cut into
	 * n_region contiguous regions, one pool item each; region r's chunks
	 * [rbeg[r], rend[r]) are claimed in order through rnext[r], by its
	 * own item first, then by items whose region is done: one at a time
	 * when streaming (<= KERN_SMALL_BATCH tokens, kern__region_cb), in
	 * shrinking runs in prefill (kern__runs_cb). */
	size_t n_region;
	size_t rbeg[KERN_REGIONS_MAX], rend[KERN_REGIONS_MAX];
	atomic_size_t rnext[KERN_REGIONS_MAX];
	/* kern_matmul_n_pre(): x's rows are written by pre, pre_rows a task,
	 * before that task quantizes them; NULL: x is ready */
	kern_rows_fn pre;
	void *pre_ctx;
	size_t pre_rows;
	/* kern_pre's bf16 writer where it takes the call's prompt rows (its
	 * groups from bf16_t0: wholly prompt rows), else NULL */
	kern_rows_bf16_fn pre_bf16;
	size_t bf16_t0;
	struct kern_bf16_rows bf16_rows;
	struct kern_act_lazy lazy; /* args' lazy, where the bf16 tokens' int8 waits */
	uint32_t wtype;            /* the weights' type (F16 / BF16 tiles: kern__fx_cb) */
	/* kern_matmul_glu(): args[0] up, args[1] gate, scheduled as one
	 * part (up's chunks), each run one paired call (kern__glu_run) of
	 * type glu_wt writing the down product's tiles at glu; else NULL */
	uint16_t *glu;
	uint32_t glu_wt;
};

#if defined(__x86_64__)
/* F16 / BF16 weights on the AMX bf16 tiles: prompt token n_exact + t's
 * rows of the split products (kernels_amx_bf16.c), once per matmul. */
static void kern__fx_cb(void *data, size_t t)
{
	const struct kern__job *job = data;
	const struct kern_gemm_args *a = &job->args[0];

	kern_amxbf_act_row_fx(job->wtype, job->x + (a->n_exact + t) * a->n_in, a->n_in, t,
			      (uint16_t *)a->xb);
}
#endif

static void kern__quantize_cb(void *data, size_t t)
{
	const struct kern__job *job = data;
	const struct kern_gemm_args *a = &job->args[0];
	struct kern_block_q8a *dst = (struct kern_block_q8a *)((char *)a->x + t * a->x_stride);

#if defined(__x86_64__)
	/* A bf16 token (the AMX bf16 prefill's, kern_matmul_n_split): its
	 * tiles, once per matmul; its int8 or Q8_K blocks only on demand
	 * (a->lazy: 14-16% of the bf16 GEMM's time at 2048 x 2048 x 512 for
	 * Q4_0, LEVELS.md; Q4_K's too, kq15b). */
	if (a->xb != NULL && t >= a->n_exact) {
		kern_amxbf_act_row(job->x + t * a->n_in, a->n_in, t - a->n_exact, (uint16_t *)a->xb);
		if (a->lazy != NULL)
			return;
	}
#endif
	if (a->xk != NULL) { /* the K-quant kernels read only these */
		job->ops->quantize_act_q8k(job->x + t * a->n_in,
					   (struct kern_block_q8_k *)a->xk + t * (a->n_in / KERN_QKK),
					   a->n_in);
		return;
	}
	job->ops->quantize_act(job->x + t * a->n_in, dst, a->n_in);
	kern_act_summarize(dst, a->n_in / KERN_QK, (float *)a->xd + t * a->xd_stride,
			   (int32_t *)a->xs8 + t * a->xd_stride);
}

void kern_act_ensure(const struct kern_gemm_args *a)
{
	struct kern_act_lazy *l = a->lazy;

	if (l == NULL)
		return;
	pthread_mutex_lock(&l->lock);
	if (!l->done && l->redo != NULL)
		l->redo(l->redo_ctx, l->redo_t0, l->redo_t1);
	for (size_t t = 0; !l->done && t < l->n; t++) {
		struct kern_block_q8a *dst = (struct kern_block_q8a *)(l->x + t * l->x_stride);

		if (l->xk != NULL) { /* K-quants: kern__quantize_cb's Q8_K blocks */
			l->quantize_k(l->xf + t * l->xf_stride, l->xk + t * (l->n_in / KERN_QKK),
				      l->n_in);
			continue;
		}
		l->quantize(l->xf + t * l->xf_stride, dst, l->n_in);
		kern_act_summarize(dst, l->n_in / KERN_QK, l->xd + t * l->xd_stride,
				   l->xs8 + t * l->xd_stride);
	}
	l->done = 1;
	pthread_mutex_unlock(&l->lock);
}

/* Token group i of kern_matmul_n_pre(): its rows written, then quantized;
 * or, a group of prompt rows with a bf16 writer (kern_matmul_n_fused),
 * written as their tiles, their int8 blocks left to kern_act_ensure as
 * kern__quantize_cb leaves them. */
static void kern__pre_quantize_cb(void *data, size_t i)
{
	const struct kern__job *job = data;
	const size_t t0 = i * job->pre_rows, n_tok = job->args[0].n_tok;
	const size_t t1 = n_tok - t0 < job->pre_rows ? n_tok : t0 + job->pre_rows;

	if (job->pre_bf16 != NULL && t0 >= job->bf16_t0) {
		job->pre_bf16(job->pre_ctx, t0, t1, &job->bf16_rows);
		return;
	}
	job->pre(job->pre_ctx, t0, t1);
	for (size_t t = t0; t < t1; t++)
		kern__quantize_cb(data, t);
}

/* pre over every group, as a job of its own (weights read as floats). */
static void kern__pre_cb(void *data, size_t i)
{
	const struct kern__job *job = data;
	const size_t t0 = i * job->pre_rows, n_tok = job->args[0].n_tok;

	job->pre(job->pre_ctx, t0, n_tok - t0 < job->pre_rows ? n_tok : t0 + job->pre_rows);
}

#if defined(__x86_64__)
/* Rows [o0, o1) of kern_matmul_glu's up and gate: the sampled rows' y as
 * the amx level's product makes them (kernels_amx.c amx__split's exact
 * call), the prompt rows as one paired call into job->glu; where that
 * call cannot run, both products and the same epilogue from their y. */
static void kern__glu_run(const struct kern__job *job, size_t o0, size_t o1)
{
	struct kern_gemm_args r[2];

	for (size_t p = 0; p < 2 && job->args[0].n_exact > 0; p++) {
		r[p] = job->args[p];
		r[p].n_tok = r[p].n_exact;
		r[p].lazy = NULL; /* sampled rows' blocks are always made */
		job->gemm[p](&r[p], o0, o1);
	}
	kern_amx_prompt_args(&job->args[0], &r[0]);
	kern_amx_prompt_args(&job->args[1], &r[1]);
	if (kern_amxbf_glu(job->glu_wt, &r[0], &r[1], o0, o1, job->glu) == 0)
		return;
	job->gemm[0](&r[0], o0, o1);
	job->gemm[1](&r[1], o0, o1);
	kern_amxbf_glu_y(r[0].y, r[1].y, r[0].y_stride, r[0].n_tok, o0, o1, job->glu);
}

/* A prompt-row writer that has nothing to write: kern_pre's xb holds the
 * rows already (kern_matmul_glu made them). */
static void kern__bf16_made(void *ctx, size_t t0, size_t t1, const struct kern_bf16_rows *b)
{
	(void)ctx, (void)t0, (void)t1, (void)b;
}
#endif

/* Chunks [i, j) of the job in one product call, as far as chunk i's
 * part reaches (a call has one weight matrix); returns the first chunk
 * not run. */
static size_t kern__run_chunks(const struct kern__job *job, size_t i, size_t j)
{
	size_t p = 0;

	while (i >= job->first[p + 1])
		p++;
	if (j > job->first[p + 1])
		j = job->first[p + 1];
	const size_t n_out = job->args[p].y_stride;
	const size_t o0 = (i - job->first[p]) * job->chunk[p];
	const size_t o1 = (j - job->first[p]) * job->chunk[p];

#if defined(__x86_64__)
	if (job->glu) {
		kern__glu_run(job, o0, o1 < n_out ? o1 : n_out);
		return j;
	}
#endif
	job->gemm[p](&job->args[p], o0, o1 < n_out ? o1 : n_out);
	return j;
}

static void kern__rows_cb(void *data, size_t i)
{
	kern__run_chunks(data, i, i + 1);
}

/*
 * A streaming job's item: its own region's chunks in order, then the
 * unclaimed chunks of the other regions. Why regions rather than one
 * chunk per claim: with claims from one counter the two threads of a
 * decode step took alternate chunks, so each chunk's last tile
 * prefetched the next chunk's rows into its own core's L2 while the other
 * core read them (DRAM reads or cross-core transfers wasted: up to a
 * quarter of the traffic for 4-tile chunks, q and o of TinyLlama at 2
 * threads), and each chunk's first tile started cold. In a region,
 * a chunk follows the one its thread just streamed (its prefetch is
 * used); only the tail of the step is balanced chunk by chunk.
 */
static void kern__region_cb(void *data, size_t r)
{
	struct kern__job *job = data;

	for (size_t k = 0; k < job->n_region; k++) {
		size_t q = (r + k) % job->n_region;
		for (;;) {
			size_t i = atomic_fetch_add_explicit(&job->rnext[q], 1, memory_order_relaxed);
			if (i >= job->rend[q])
				break;
			kern__rows_cb(job, i);
		}
	}
}

/*
 * A prefill job's item (more than KERN_SMALL_BATCH tokens): the chunks of
 * its own region, then of the others', claimed in runs of half what is
 * left (down to one chunk) and each run multiplied in one call. Why runs:
 * a call reads every token's activations once per row block, and at 512
 * tokens they outgrow L2 (bf16 at K 2048: 2 MiB, at 5632: 5.6 MiB), so
 * chunk-sized calls (64 rows of q, o, down, k, v; 176 of gate, up at
 * two threads) fetched them from L3 again and again: amxg12 measured
 * the model's call sizes 13% slower than whole-matrix calls, one thread
 * (LEVELS.md). The last claims are single chunks, so a thread slowed by
 * a co-located process still leaves its region's tail to the others.
 * Outputs are the same whatever the runs: each row's sums run in the
 * same order in any call.
 */
static void kern__runs_cb(void *data, size_t r)
{
	struct kern__job *job = data;

	for (size_t k = 0; k < job->n_region; k++) {
		const size_t q = (r + k) % job->n_region, end = job->rend[q];
		size_t i = atomic_load_explicit(&job->rnext[q], memory_order_relaxed);

		while (i < end) {
			size_t n = (end - i) / 2 ? (end - i) / 2 : 1;

			if (!atomic_compare_exchange_weak_explicit(&job->rnext[q], &i, i + n,
								   memory_order_relaxed,
								   memory_order_relaxed))
				continue; /* i is the counter's value now */
			for (size_t c = i; c < i + n;)
				c = kern__run_chunks(job, c, i + n);
			i = atomic_load_explicit(&job->rnext[q], memory_order_relaxed);
		}
	}
}

/* Cuts chunks [0, nc) into nr regions of about equal rows (bytes: the
 * parts of one job share the row size) rather than equal chunk counts.
 * Parts have their own chunk heights (TinyLlama's q, k, v at two threads:
 * 64, 16, 16 rows), so by count the first thread got all of q's 2048 rows
 * and the second k's and v's 512, then took q's chunks in turn with the
 * first, each chunk starting cold (LEVELS.md, eighth session: the q|k|v
 * job 10-15% slower than the others per byte). A region may be empty
 * (its thread only steals); chunks and their rows are the same either
 * way, so every output is. */
static void kern__cut_regions(struct kern__job *job, size_t nc, size_t nr)
{
	size_t total = 0, done = 0, r = 1, c = 0;

	for (size_t p = 0; p < job->n_part; p++)
		total += job->args[p].y_stride;
	job->rbeg[0] = 0;
	for (size_t p = 0; p < job->n_part; p++) {
		const size_t n_out = job->args[p].y_stride;
		for (size_t o = 0; o < n_out; o += job->chunk[p], c++) {
			/* region r starts at the first chunk at or past its share */
			while (r < nr && done * nr >= total * r)
				job->rbeg[r++] = c;
			done += n_out - o < job->chunk[p] ? n_out - o : job->chunk[p];
		}
	}
	while (r < nr)
		job->rbeg[r++] = nc;
	for (r = 0; r < nr; r++) {
		job->rend[r] = r + 1 < nr ? job->rbeg[r + 1] : nc;
		atomic_init(&job->rnext[r], job->rbeg[r]);
	}
}

/*
 * Small batches (2..KERN_SMALL_BATCH tokens: a decode step of several
 * sequences) on 2+ threads: one-tile chunks (KERN_MIN_CHUNK_ROWS), each
 * region claimed in shrinking runs (kern__runs_cb), one call a run. A
 * 16-token step is bound by the multiply pipes, not memory: its chunks
 * of 1/16 of a thread's rows (q and o of TinyLlama: 64 rows, 12 us at 16
 * tokens; gate, up, down: 32 us; output: 180 us) left the other thread
 * spinning for half a chunk at each of a step's ~90 joins, and each
 * chunk's call copied its tokens' terms again (qv__xsum: 2.5% of the
 * tiles' time at two threads). Runs start at half a region, so a thread
 * makes ~log2 of its chunks' calls, in order (its next-tile prefetch
 * still used), and the tail is one 16-row tile. One token keeps its
 * chunks and chunk-by-chunk claims (streaming: a chunk is a few us).
 */
static int kern__small_runs(tpool_t pool, size_t n_tok)
{
	return pool != NULL && tpool_threads(pool) > 1 && n_tok > 1 && n_tok <= KERN_SMALL_BATCH &&
	       kern__regions && kern__runs;
}

static size_t kern__chunk_rows(tpool_t pool, size_t n_out, size_t n_tok)
{
	size_t threads = pool ? tpool_threads(pool) : 1;
	size_t chunk;

	if (threads <= 1)
		return n_out;
	if (kern__small_runs(pool, n_tok))
		return KERN_MIN_CHUNK_ROWS;
	chunk = n_out / (threads * (n_tok <= KERN_SMALL_BATCH ? KERN_CHUNKS_PER_THREAD_GEMV
					       : KERN_CHUNKS_PER_THREAD));
	if (chunk < KERN_MIN_CHUNK_ROWS)
		chunk = KERN_MIN_CHUNK_ROWS;
	if (n_tok > KERN_SMALL_BATCH && chunk < KERN_MIN_CHUNK_ROWS_PREFILL) {
		const size_t each = (n_out + threads - 1) / threads;

		chunk = each < KERN_MIN_CHUNK_ROWS_PREFILL ? (each > chunk ? each : chunk)
							   : KERN_MIN_CHUNK_ROWS_PREFILL;
	}
	return (chunk + KERN_ROW_ALIGN - 1) / KERN_ROW_ALIGN * KERN_ROW_ALIGN;
}

int kern_bf16_ready(uint32_t wtype, size_t n_in, size_t n_tok, size_t n_exact)
{
	wtype &= ~KERN_PACKED;
	kern_init();
	/* kern_matmul_n_fused's conditions for its bf16 writer, below */
	return n_exact < n_tok && kern_wtype_quantized(wtype) && n_in % 32 == 0 &&
	       kern__bf16_bytes(wtype, n_in, n_tok) != 0 && KERN_ACT_LAZY &&
	       !kern_bf16_fuse_off && kern_bf16_plain(wtype);
}

/* kern_matmul_n_fused(), and with glu (kern_matmul_glu) the paired
 * gate|up calls where they run: 1 then. */
static int kern__matmul(tpool_t pool, uint32_t wtype, size_t n_in, const struct kern_mm_part *parts,
			size_t n, const float *x, size_t n_tok, size_t n_exact, void *scratch,
			const struct kern_pre *pp, uint16_t *glu)
{
	const kern_rows_fn pre = pp ? pp->rows : NULL;
	void *const pre_ctx = pp ? pp->ctx : NULL;
	const size_t pre_rows = pp ? pp->n_rows : 1;
	struct kern__job job = {0};
	struct kern_gemm_args a = {0};
	const int packed = (wtype & KERN_PACKED) != 0;
	const uint32_t wcall = wtype; /* the parts' type where theirs is 0 */
	kern_gemm_fn fn[KERN_MM_PARTS_MAX]; /* each part's product */
	int bf = 0; /* tokens [n_exact, n_tok) take the AMX bf16 tiles */

	kern_init();
	assert(kern_supports(wtype));
	wtype &= ~KERN_PACKED;
	assert(n_in % dtype_block(wtype) == 0);
	assert(n <= KERN_MM_PARTS_MAX);
	if (n_tok == 0 || n == 0 || n > KERN_MM_PARTS_MAX)
		return 0;
	if (n_exact > n_tok)
		n_exact = n_tok;
#if defined(__x86_64__)
	bf = n_exact < n_tok && kern__bf16_bytes(wtype, n_in, n_tok) != 0;
#endif
	job.ops = kern__ops;
	for (size_t p = 0; p < n; p++) {
		const uint32_t pt = parts[p].wtype ? parts[p].wtype : wcall;

		/* another type only where it reads the activations made below */
		assert(kern_mm_parts_share(wcall, pt, n_in));
		fn[p] = kern__gemm_of(pt, n_tok, bf);
		if (fn[p] == NULL) /* refused at load (kern_supports); never here */
			return 0;
	}
	job.x = x;
	a.w_stride = (size_t)dtype_row_size(wtype, n_in);
	a.n_in = n_in;
	a.n_tok = n_tok;
	if (kern_wtype_quantized(wtype)) {
		/* [n_tok] block rows, then [n_tok] xd rows, then [n_tok] xs8 rows:
		 * all 4-byte aligned, as block rows are 36-byte multiples. */
		a.x = scratch;
		a.x_stride = kern__act_row_bytes(n_in);
		a.xd_stride = kern_act_groups_pad(n_in / KERN_QK);
		a.xd = (const float *)((char *)scratch + a.x_stride * n_tok);
		a.xs8 = (const int32_t *)(a.xd + a.xd_stride * n_tok);
		/* a level with its own K-quant GEMV reads every token per
		 * super-block (kquants_gemv.h), its GEMM too: one rounding of
		 * the activations whatever the batch */
		if (kern__wants_q8k(wtype) &&
		    (packed || kern__ops->gemv[wtype] != kern__ops->gemm[wtype]))
			a.xk = (const struct kern_block_q8_k *)(a.xs8 + a.xd_stride * n_tok);
		a.xf = x;
		a.xf_stride = n_in;
		a.n_exact = n_exact;
#if defined(__x86_64__)
		/* the bf16 tokens' tiles, filled by the quantizing tasks
		 * (kern__quantize_cb), which leave their int8 blocks to
		 * kern_act_ensure() */
		if (bf) {
			/* after the Q8_K blocks where there are some */
			a.xb = kern_amxbf_tiles(a.xk ? (const void *)(a.xk + n_in / KERN_QKK * n_tok)
						     : (const void *)(a.xs8 + a.xd_stride * n_tok),
						n_in, n_tok - n_exact);
			job.lazy = (struct kern_act_lazy){
				.quantize = kern__ops->quantize_act,
				.xf = x + n_exact * n_in,
				.xf_stride = n_in,
				.n_in = n_in,
				.x = (char *)scratch + n_exact * a.x_stride,
				.x_stride = a.x_stride,
				.xd = (float *)a.xd + n_exact * a.xd_stride,
				.xs8 = (int32_t *)a.xs8 + n_exact * a.xd_stride,
				.xd_stride = a.xd_stride,
				.n = n_tok - n_exact,
				.quantize_k = kern__ops->quantize_act_q8k,
				.xk = a.xk ? (struct kern_block_q8_k *)a.xk + n_exact * (n_in / KERN_QKK)
					   : NULL,
			};
			pthread_mutex_init(&job.lazy.lock, NULL);
			a.lazy = KERN_ACT_LAZY ? &job.lazy : NULL;
			/* the writer's groups of prompt rows only, and only where
			 * the int8 blocks wait for demand (they would read the
			 * float rows it does not write) */
			if (pre && pp->bf16 && a.lazy && !kern_bf16_fuse_off &&
			    kern_bf16_plain(wtype)) {
				const size_t g = pre_rows ? pre_rows : 1;

				assert(pp->redo != NULL && n_in % 32 == 0);
				job.pre_bf16 = pp->bf16;
				job.bf16_t0 = (n_exact + g - 1) / g * g;
				job.bf16_rows = (struct kern_bf16_rows){(uint16_t *)a.xb, n_in, n_exact};
				job.lazy.redo = pp->redo;
				job.lazy.redo_ctx = pre_ctx;
				job.lazy.redo_t0 = job.bf16_t0 < n_tok ? job.bf16_t0 : n_tok;
				job.lazy.redo_t1 = n_tok;
				/* rows made by the caller (kern_matmul_glu): read
				 * there, written by no task here; pad rows zeroed */
				if (pp->xb) {
					a.xb = kern_amxbf_tiles(pp->xb, n_in, n_tok - n_exact);
					job.bf16_rows.xb = (uint16_t *)a.xb;
					job.pre_bf16 = kern__bf16_made;
				}
			}
			/* the caller asked kern_bf16_ready() first */
			assert(!pp || !pp->xb || job.pre_bf16 == kern__bf16_made);
		}
#endif
	} else {
		a.x = x;
		a.x_stride = n_in * sizeof(float);
#if defined(__x86_64__)
		/* F16 / BF16 prompt rows on the AMX bf16 tiles: their split
		 * rows in the scratch, made below (without scratch the GEMM
		 * makes them from xf, per call) */
		if (bf) {
			a.xf = x;
			a.xf_stride = n_in;
			a.n_exact = n_exact;
			if (scratch != NULL)
				a.xb = kern_amxbf_tiles(scratch, n_in * kern_amxbf_widen(wtype),
							n_tok - n_exact);
		}
#endif
	}
	/* Parts with no rows get no tasks; each part keeps the chunking a
	 * kern_matmul() of its own would use. */
	for (size_t p = 0; p < n; p++) {
		const uint32_t pt = parts[p].wtype ? parts[p].wtype : wcall, pb = pt & ~KERN_PACKED;
		size_t k = job.n_part;
		if (parts[p].n_out == 0)
			continue;
		job.args[k] = a;
		job.gemm[k] = fn[p];
		job.args[k].w = parts[p].w;
		job.args[k].w_stride = (size_t)dtype_row_size(pb, n_in);
		job.args[k].y = parts[p].y;
		job.args[k].y_stride = parts[p].n_out;
		job.chunk[k] = kern__chunk_rows(pool, parts[p].n_out, n_tok);
		/* packed: every chunk whole groups (n_out is a multiple of G,
		 * and KERN_ROW_ALIGN of every level's G) */
		assert(!(pt & KERN_PACKED) || (parts[p].n_out % kern__ops->pack_rows[pb] == 0 &&
					       job.chunk[k] % kern__ops->pack_rows[pb] == 0));
		job.first[k + 1] = job.first[k] + (parts[p].n_out + job.chunk[k] - 1) / job.chunk[k];
		job.n_part++;
	}
	job.pre = pre;
	job.pre_ctx = pre_ctx;
	job.pre_rows = pre_rows ? pre_rows : 1;
	if (pre && job.n_part == 0) { /* nothing to multiply: the rows still */
		job.args[0].n_tok = n_tok;
		tpool_run_1d(pool, kern__pre_cb, &job, (n_tok + job.pre_rows - 1) / job.pre_rows);
	}
	if (job.n_part == 0) {
		if (bf && kern_wtype_quantized(wtype))
			pthread_mutex_destroy(&job.lazy.lock);
		return 0;
	}
#if defined(__x86_64__)
	/* the paired gate|up calls: up's chunks, each taking gate's same rows
	 * (run at the same chunk height: one matrix's n_out) */
	if (glu && bf && !kern_glu_off && kern_wtype_quantized(wtype) && job.n_part == 2 &&
	    parts[0].n_out == parts[1].n_out && parts[0].n_out % 16 == 0 &&
	    (parts[0].wtype ? parts[0].wtype : wcall) == (parts[1].wtype ? parts[1].wtype : wcall) &&
	    kern_amxbf_glu_ok(parts[0].wtype ? parts[0].wtype : wcall)) {
		job.glu = glu;
		job.glu_wt = parts[0].wtype ? parts[0].wtype : wcall;
		job.n_part = 1;
	}
#else
	(void)glu; /* no bf16 tiles: kern_bf16_ready() said no */
#endif
	if (kern_wtype_quantized(wtype) && pre)
		tpool_run_1d(pool, kern__pre_quantize_cb, &job,
			     (n_tok + job.pre_rows - 1) / job.pre_rows);
	else if (kern_wtype_quantized(wtype))
		tpool_run_1d(pool, kern__quantize_cb, &job, n_tok);
	else if (pre)
		tpool_run_1d(pool, kern__pre_cb, &job, (n_tok + job.pre_rows - 1) / job.pre_rows);
#if defined(__x86_64__)
	job.wtype = wtype;
	if (!kern_wtype_quantized(wtype) && job.args[0].xb != NULL)
		tpool_run_1d(pool, kern__fx_cb, &job, n_tok - n_exact);
#endif
	if (pool != NULL && tpool_threads(pool) > 1 &&
	    (n_tok <= KERN_SMALL_BATCH ? kern__regions : kern__runs)) {
		size_t nc = job.first[job.n_part], nr = tpool_threads(pool);
		if (nr > KERN_REGIONS_MAX)
			nr = KERN_REGIONS_MAX;
		if (nr > nc)
			nr = nc;
		job.n_region = nr;
		kern__cut_regions(&job, nc, nr);
		tpool_run_1d(pool,
			     n_tok <= KERN_SMALL_BATCH && !kern__small_runs(pool, n_tok)
				     ? kern__region_cb
				     : kern__runs_cb,
			     &job, nr);
	} else {
		tpool_run_1d(pool, kern__rows_cb, &job, job.first[job.n_part]);
	}
	if (bf && kern_wtype_quantized(wtype))
		pthread_mutex_destroy(&job.lazy.lock);
	return job.glu != NULL;
}

void kern_matmul_n_fused(tpool_t pool, uint32_t wtype, size_t n_in,
			 const struct kern_mm_part *parts, size_t n, const float *x, size_t n_tok,
			 size_t n_exact, void *scratch, const struct kern_pre *pp)
{
	kern__matmul(pool, wtype, n_in, parts, n, x, n_tok, n_exact, scratch, pp, NULL);
}

int kern_matmul_glu(tpool_t pool, uint32_t wtype, size_t n_in, const struct kern_mm_part parts[2],
		    const float *x, size_t n_tok, size_t n_exact, void *scratch,
		    const struct kern_pre *pre, uint16_t *xb)
{
	return kern__matmul(pool, wtype, n_in, parts, 2, x, n_tok, n_exact, scratch, pre, xb);
}
