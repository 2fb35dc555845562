/*
 * forward_impl.h - the forward pass's private state, shared by forward.c
 * (running a step), forward_linear.c (its products, norms and MLP) and
 * forward_alloc.c (making and freeing passes and sessions). Not part of
 * the engine's API: include forward.h.
 */
#ifndef EMBER_FORWARD_IMPL_H
#define EMBER_FORWARD_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "threadpool.h"

/* The step being run: its sequences and where their rows start. */
struct step_plan {
	const struct forward_seq *seqs;
	uint32_t n_seq;
	uint32_t *row0;           /* [n_seq] first row of each sequence (scratch) */
	struct attention_tile *tiles; /* [n_tiles] attention query tiles (scratch) */
	uint32_t n_tiles;
};

/* A norm of rows (forward.c's norm tasks): x (+= add first, into res) to
 * out. */
struct norm_job {
	struct kern_norm nm;
	const float *x;
	float *out;
	float *res;       /* x again, writable, when add is set */
	const float *add; /* residual added into x first, or NULL */
	uint32_t n;       /* rows */
};

struct forward_pass {
	const struct model *m; /* borrowed, read-only */
	tpool_t pool;    /* borrowed or owned (owns_pool) */
	int owns_pool;
	uint32_t max_batch;
	struct step_plan plan;
	struct attention attn; /* head shapes and ALiBi slopes (owned) */

	/* Scratch, one arena (arena, owned), sized for max_batch = B tokens. */
	void *arena;
	float *x;      /* [B][n_embd] residual stream */
	float *xn;     /* [B][n_embd] normalised input of the current sub-block */
	float *y_attn; /* [B][n_embd] attention output, projected */
	float *y_mlp;  /* [B][n_embd] MLP output */
	float *q;      /* [B][n_head * head_dim_k] */
	float *k;      /* [B][n_head_kv * head_dim_k] */
	float *v;      /* [B][n_head_kv * head_dim_v] */
	float *qkv;    /* [B][q + k + v widths] fused projection (fused archs only) */
	float *attn_out; /* [B][n_head * head_dim_v] attention output per head */
	float *gate;   /* [B][n_ff] */
	float *up;     /* [B][n_ff] */
	float *rope;   /* [B][n_rot / 2][2] cos, sin of each position's angles */
	float *rope_swa; /* the same for sliding-window layers with their own base, or NULL */
	uint32_t *pos;  /* [B] position of each row in its sequence */
	uint32_t *seq;  /* [B] sequence of each row (index into plan.seqs) */
	uint32_t *row0; /* [B] first row of each sequence of the step */
	/* [B] per sequence: the row of its last token where plan() moved that
	 * token to the exact rows, else FORWARD_NO_ROW */
	uint32_t *lrow;
	/* Rows [0, n_exact) of the step are exact (sampled: int8 on the amx
	 * level), the rest prompt rows (kern_matmul_n_split); mm_exact is the
	 * next product's split, n_moved the sequences with a moved row. */
	uint32_t n_exact, mm_exact, n_moved;
	struct attention_tile *tiles; /* [B] attention query tiles of the step */
	void *mm_scratch; /* kern_matmul scratch for B tokens */
	/* A residual not yet added to x (y_mlp of the last block), or NULL:
	 * the next norm of x adds it row by row in its pool tasks rather
	 * than the calling thread adding it alone while the others wait. */
	const float *pending;
	/* Row work whose output only the next matrix product reads (a norm
	 * into xn, the MLP's activation), not run yet: that product's pool
	 * tasks write and quantize the rows together (kern_matmul_n_pre), a
	 * pool job and join fewer; NULL when none. pre_norm is the norm's. */
	kern_rows_fn pre;
	void *pre_ctx;
	size_t pre_rows;
	/* pre's writer of the product's bf16 A tiles (kernels.h kern_pre),
	 * and pre_redo its floats after all; NULL: the product's only
	 * reader may not skip x's float rows (or there is no such writer) */
	kern_rows_bf16_fn pre_bf16;
	kern_rows_fn pre_redo;
	/* NULL, or where pre_bf16's rows are made already (kern_pre's xb) */
	uint16_t *pre_xb;
	struct norm_job pre_norm;
	/* The down projection's bf16 A tiles of a gated SiLU MLP's prompt
	 * rows, written by the paired gate|up calls (kern_matmul_glu) and
	 * read by the down product in the same forward_mlp() (B + 32 tokens
	 * x n_ff, 64-byte aligned; NULL where the arch has no such MLP): not
	 * the matmul scratch, which the gate|up product reads its own
	 * activations from while it writes these. */
	uint16_t *glu_xb;
};

#define FORWARD_NO_ROW UINT32_MAX

/* x[i] += y[i], i < n: the residual adds (forward.c, forward_linear.c). */
static inline void add_rows(float *restrict x, const float *restrict y, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		x[i] += y[i];
}

/* forward_linear.c: the products, norms and MLP of a step (its comment). */

/* y[n][w->n_out] = x[n][w->n_in] W^T + b */
void forward_linear(struct forward_pass *f, const struct model_weight *w,
		    const struct model_weight *b, const float *x, float *y, uint32_t n);
/* forward_linear() for n (<= KERN_MM_PARTS_MAX) weights over the same x:
 * one pool pass (results as forward_linear()'s). */
void forward_linear_n(struct forward_pass *f, const struct model_weight *const w[],
		      const struct model_weight *const b[], const float *x, float *const y[],
		      size_t n, uint32_t n_tok);
/* out[n][d] = norm(x[n][d]) * w (+ b), in the pool. */
void forward_norm(const struct forward_pass *f, const struct model_weight *w,
		  const struct model_weight *b, const float *x, float *out, uint32_t n);
/* x[n][d] += add[n][d] (add may be NULL), then forward_norm() of x into
 * out, deferred to the next product's tasks: out must be what that
 * product reads, and nothing may read x or out before it. */
void forward_norm_add(struct forward_pass *f, const struct model_weight *w,
		      const struct model_weight *b, float *x, const float *add, float *out,
		      uint32_t n);
/* y_mlp[n][n_embd] = the MLP of layer L over xn[n][n_embd]. */
void forward_mlp(struct forward_pass *f, const struct model_layer *L, uint32_t n);

/* A single session: a pass of its own and a cache. */
struct forward_ctx {
	struct forward_pass *p;
	struct kv_cache kv;
};

#endif
