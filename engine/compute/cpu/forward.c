/*
 * forward.c - the forward pass (forward.h).
 *
 * Read top to bottom: forward_pass_run() lays the tokens of every sequence
 * of a step out as rows of one batch; step() embeds them, runs every block,
 * and applies the output head to the rows that want logits. block() is the
 * one decoder block of arch.h, made of norm(), attention() and mlp(); the
 * architecture's flags choose among their variants. Everything but
 * attention is row-wise, so sequences share each weight read; attention
 * (attention.h) runs per sequence against its own cache. Shapes use n = rows in this
 * step (<= max_batch). forward_eval() is a one-sequence pass over a cache
 * of its own, in steps of at most max_batch.
 */
#include "forward.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "compute.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "rope.h"

#include "forward_impl.h"

/* ---- small vector helpers ------------------------------------------------ */

static void add_rows(float *restrict x, const float *restrict y, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		x[i] += y[i];
}

static void add_bias(float *y, const struct model_weight *b, uint32_t n_tok)
{
	const float *bias = b->data;
	uint32_t t;

	if (!bias)
		return;
	for (t = 0; t < n_tok; t++)
		add_rows(y + (size_t)t * b->n_in, bias, b->n_in);
}

/* kern_matmul_n() of parts over x, after the deferred row work that
 * writes x (f->pre) if any, in the same pool tasks; its prompt rows
 * straight into the product's bf16 tiles where it has such a writer
 * (f->pre_bf16) and the product takes plain ones (kernels.h kern_pre). */
static void matmul_n(struct forward_pass *f, uint32_t type, size_t n_in,
		     const struct kern_mm_part *parts, size_t np, const float *x, uint32_t n)
{
	const struct kern_pre pre = {f->pre, f->pre_ctx, f->pre_rows, f->pre_bf16, f->pre_redo};

	f->pre = NULL;
	f->pre_bf16 = NULL;
	kern_matmul_n_fused(f->pool, type, n_in, parts, np, x, n, f->mm_exact, f->mm_scratch,
			    &pre);
}

/* y[n][w->n_out] = x[n][w->n_in] W^T + b */
static void linear(struct forward_pass *f, const struct model_weight *w, const struct model_weight *b,
		   const float *x, float *y, uint32_t n)
{
	const struct kern_mm_part part = {w->data, w->n_out, y};

	matmul_n(f, w->type | w->packed, w->n_in, &part, 1, x, n);
	if (b)
		add_bias(y, b, n);
}

/* linear() for n (<= KERN_MM_PARTS_MAX) weights over the same x: one pool
 * pass when their types and widths agree (results as linear()'s). */
static void linear_n(struct forward_pass *f, const struct model_weight *const w[],
		     const struct model_weight *const b[], const float *x, float *const y[], size_t n,
		     uint32_t n_tok)
{
	struct kern_mm_part parts[KERN_MM_PARTS_MAX];
	size_t i;

	for (i = 1; i < n; i++)
		if ((w[i]->type | w[i]->packed) != (w[0]->type | w[0]->packed) || w[i]->n_in != w[0]->n_in)
			break;
	if (i < n) {
		f->pre_bf16 = NULL; /* the later products read x's floats */
		for (i = 0; i < n; i++)
			linear(f, w[i], b[i], x, y[i], n_tok);
		return;
	}
	for (i = 0; i < n; i++)
		parts[i] = (struct kern_mm_part){ w[i]->data, w[i]->n_out, y[i] };
	matmul_n(f, w[0]->type | w[0]->packed, w[0]->n_in, parts, n, x, n_tok);
	for (i = 0; i < n; i++)
		if (b[i])
			add_bias(y[i], b[i], n_tok);
}

/* ---- norm ----------------------------------------------------------------- */

/* Rows [t * KERN_NORM_ROWS, +KERN_NORM_ROWS) (a pool task): prompts
 * normalise hundreds of rows per layer, twice, which left the other
 * threads spinning when it ran on one. A task takes several rows because
 * the kernel sums them side by side (kernels.h kern_norm_rows: a row's
 * sum is a chain of dependent additions). */
static void norm_rows_cb(void *data, size_t t)
{
	const struct norm_job *job = data;
	const size_t r0 = t * KERN_NORM_ROWS, d = job->nm.d;
	const size_t nr = job->n - r0 < KERN_NORM_ROWS ? job->n - r0 : KERN_NORM_ROWS;

	kern_norm_rows(&job->nm, job->x + r0 * d, job->res ? job->res + r0 * d : NULL,
		       job->add ? job->add + r0 * d : NULL, job->out + r0 * d, nr);
}

/* norm_rows_cb() for the row groups of rows [t0, t1) (kern_rows_fn: a
 * deferred norm, run by the next product's tasks). */
static void norm_pre_cb(void *data, size_t t0, size_t t1)
{
	for (size_t t = t0 / KERN_NORM_ROWS; t * KERN_NORM_ROWS < t1; t++)
		norm_rows_cb(data, t);
}

/* x[n][d] += add[n][d] (a residual) when add is set (x is then res),
 * then out[n][d] = norm(x[n][d]) * w (+ b), by the architecture's norm
 * kind, in the pool. Sums in double (kern_norm_rows): cheap next to the
 * matrix products and keeps wide rows close to the float64 reference. */
static void norm_job_run(const struct forward_pass *f, const struct model_weight *w,
			 const struct model_weight *b, const float *x, float *res, const float *add,
			 float *out, uint32_t n)
{
	struct norm_job job = {
		{w->data, b ? b->data : NULL, f->m->hp.norm_eps, f->m->hp.n_embd,
		 f->m->arch->norm == ARCH_NORM_LAYER},
		x, out, res, add, n};

	tpool_run_1d(f->pool, norm_rows_cb, &job, (n + KERN_NORM_ROWS - 1) / KERN_NORM_ROWS);
}

/* out[n][d] = norm(x[n][d]) * w (+ b). */
static void norm(const struct forward_pass *f, const struct model_weight *w,
		 const struct model_weight *b, const float *x, float *out, uint32_t n)
{
	norm_job_run(f, w, b, x, NULL, NULL, out, n);
}

/* norm_pre_cb()'s rows as the next product's bf16 tile rows, not into
 * job->out (kernels.h kern_rows_bf16_fn): groups of prompt rows, t0 a
 * multiple of KERN_NORM_ROWS (kern_matmul_n_fused). */
static void norm_bf16_cb(void *data, size_t t0, size_t t1, const struct kern_bf16_rows *b)
{
	const struct norm_job *job = data;
	const size_t d = job->nm.d;

	for (size_t r0 = t0; r0 < t1; r0 += KERN_NORM_ROWS) {
		const size_t nr = t1 - r0 < KERN_NORM_ROWS ? t1 - r0 : KERN_NORM_ROWS;
		uint16_t *dst[KERN_NORM_ROWS];

		for (size_t r = 0; r < nr; r++)
			dst[r] = kern_bf16_row(b, r0 + r);
		kern_norm_rows_bf16(&job->nm, job->x + r0 * d, job->res ? job->res + r0 * d : NULL,
				    job->add ? job->add + r0 * d : NULL, dst, KERN_BF16_ROW_STEP, nr);
	}
}

/* job->out's rows [t0, t1) after norm_bf16_cb() (the residual added):
 * norm_pre_cb() less the add, so the same floats. */
static void norm_redo_cb(void *data, size_t t0, size_t t1)
{
	const struct norm_job *job = data;
	const size_t d = job->nm.d;

	for (size_t r0 = t0; r0 < t1; r0 += KERN_NORM_ROWS)
		kern_norm_rows(&job->nm, job->x + r0 * d, NULL, NULL, job->out + r0 * d,
			       t1 - r0 < KERN_NORM_ROWS ? t1 - r0 : KERN_NORM_ROWS);
}

/* x[n][d] += add[n][d] (a residual), then norm() of x into out: the
 * same operations as add_rows() followed by norm(), deferred to the next
 * matrix product, whose pool tasks run them (matmul_n()); out must be
 * what that product reads, and nothing may read x or out before it. */
static void norm_add(struct forward_pass *f, const struct model_weight *w,
		     const struct model_weight *b, float *x, const float *add, float *out, uint32_t n)
{
	f->pre_norm = (struct norm_job){
		{w->data, b ? b->data : NULL, f->m->hp.norm_eps, f->m->hp.n_embd,
		 f->m->arch->norm == ARCH_NORM_LAYER},
		x, out, add ? x : NULL, add, n};
	f->pre = norm_pre_cb;
	f->pre_ctx = &f->pre_norm;
	f->pre_rows = KERN_NORM_ROWS;
	f->pre_bf16 = norm_bf16_cb;
	f->pre_redo = norm_redo_cb;
}

/* ---- attention ------------------------------------------------------------ */

/* Fills the rotary tables of the step's rows: the model's rope (with its
 * scaling), and for Gemma 3's sliding layers their own base, unscaled. */
static void rope_table(struct forward_pass *f, uint32_t n)
{
	const struct model_hparams *hp = &f->m->hp;
	uint32_t s;

	(void)n;
	if (f->m->arch->rope == ARCH_ROPE_NONE)
		return;
	for (s = 0; s < f->plan.n_seq; s++) {
		const struct forward_seq *sq = &f->plan.seqs[s];
		const uint32_t moved = f->lrow[s] != FORWARD_NO_ROW;

		for (uint32_t k = 0; k < 1 + moved; k++) {
			const uint32_t r0 = k ? f->lrow[s] : f->plan.row0[s];
			const uint32_t nr = k ? 1 : sq->n_tok - moved;

			rope_fill(hp, f->pos, f->rope, r0, nr, hp->rope_base, hp->rope_freq_scale,
				  rope_divisors(f->m, sq->kv->n_ctx), hp->rope_attn_factor);
			if (f->rope_swa)
				rope_fill(hp, f->pos, f->rope_swa, r0, nr, hp->rope_base_swa, 1.0, NULL,
					  1.0);
		}
	}
}

/* RMSNorm of every head of x[n][n_heads][head_dim_k] with weight w
 * (Qwen3, Gemma 3: before RoPE); sums in double like norm(). */
static void head_norm(const struct forward_pass *f, const struct model_weight *w, float *x,
		      uint32_t n, uint32_t n_heads)
{
	const uint32_t hd = f->m->hp.head_dim_k;
	const float *gain = w->data;
	size_t r, i;

	if (!gain)
		return;
	for (r = 0; r < (size_t)n * n_heads; r++) {
		float *xh = x + r * hd;
		double ss = 0.0, scale;

		for (i = 0; i < hd; i++)
			ss += (double)xh[i] * xh[i];
		scale = 1.0 / sqrt(ss / hd + f->m->hp.norm_eps);
		for (i = 0; i < hd; i++)
			xh[i] = (float)(xh[i] * scale) * gain[i];
	}
}

/* q[n][q_dim], k[n][kv_k], v[n][kv_v] from xn, with biases; a fused
 * projection is computed into qkv[n][q | k | v] and split. */
static void project_qkv(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	const struct model_hparams *hp = &f->m->hp;
	const size_t dq = (size_t)hp->n_head * hp->head_dim_k;
	const size_t dk = (size_t)hp->n_head_kv * hp->head_dim_k;
	const size_t dv = (size_t)hp->n_head_kv * hp->head_dim_v;
	uint32_t t;

	if (!L->w[ARCH_T_ATTN_QKV].data) {
		const struct model_weight *const w[] = { &L->w[ARCH_T_ATTN_Q], &L->w[ARCH_T_ATTN_K],
							 &L->w[ARCH_T_ATTN_V] };
		const struct model_weight *const b[] = { &L->w[ARCH_T_ATTN_Q_B],
							 &L->w[ARCH_T_ATTN_K_B],
							 &L->w[ARCH_T_ATTN_V_B] };
		float *const y[] = { f->q, f->k, f->v };

		linear_n(f, w, b, f->xn, y, 3, n);
		return;
	}
	linear(f, &L->w[ARCH_T_ATTN_QKV], &L->w[ARCH_T_ATTN_QKV_B], f->xn, f->qkv, n);
	for (t = 0; t < n; t++) {
		const float *row = f->qkv + t * (dq + dk + dv);

		memcpy(f->q + t * dq, row, dq * sizeof(float));
		memcpy(f->k + t * dk, row + dq, dk * sizeof(float));
		memcpy(f->v + t * dv, row + dq + dk, dv * sizeof(float));
	}
}

/* Copies head h of row r of k[][n_head_kv][hd_k], v[][n_head_kv][hd_v]
 * into position pos of layer il of `kv`, converting to its type. */
static void store_kv_head(const struct forward_pass *f, struct kv_cache *kv, uint32_t il,
			  uint32_t r, uint32_t pos, uint32_t h)
{
	const struct model_hparams *hp = &f->m->hp;
	const uint32_t dk = hp->head_dim_k, dv = hp->head_dim_v;
	/* Sliding-window layers may keep a ring (kv_cache.h). */
	const size_t row = kv_cache_row(kv, il, pos);
	const float *ks = f->k + ((size_t)r * hp->n_head_kv + h) * dk;
	const float *vs = f->v + ((size_t)r * hp->n_head_kv + h) * dv;
	char *kc = (char *)kv_cache_k(kv, il, h) + row * dk * kv->elt;
	char *vc = (char *)kv_cache_v(kv, il, h) + row * dv * kv->elt;

	if (kv->type == DTYPE_F32) {
		memcpy(kc, ks, dk * sizeof(float));
		memcpy(vc, vs, dv * sizeof(float));
		return;
	}
	kern_fp32_to_fp16_row(ks, (uint16_t *)kc, dk);
	kern_fp32_to_fp16_row(vs, (uint16_t *)vc, dv);
}

struct qk_job {
	struct forward_pass *f;
	const struct model_layer *L;
	uint32_t il;
	const float *table;
};

/* Row t of a layer's q and k (a pool task): the heads' norms, RoPE, and
 * the row's key and value into its sequence's cache. Row by row the same
 * operations as on the whole batch at once; spread over the pool because
 * on the calling thread alone they left the others spinning (a 16-row
 * decode step: ~4% of its time on 2 threads, Zen 4). */
static void qk_row_cb(void *data, size_t t)
{
	const struct qk_job *job = data;
	struct forward_pass *f = job->f;
	const struct model_hparams *hp = &f->m->hp;
	const size_t dq = (size_t)hp->n_head * hp->head_dim_k;
	const size_t dk = (size_t)hp->n_head_kv * hp->head_dim_k;
	const size_t half = hp->n_rot / 2;
	float *q = f->q + t * dq, *k = f->k + t * dk;
	const float *cs = job->table ? job->table + t * half * 2 : NULL; /* NULL: no RoPE */

	head_norm(f, &job->L->w[ARCH_T_ATTN_Q_NORM], q, 1, hp->n_head);
	head_norm(f, &job->L->w[ARCH_T_ATTN_K_NORM], k, 1, hp->n_head_kv);
	rope_apply(f->m, cs, q, 1, hp->n_head);
	rope_apply(f->m, cs, k, 1, hp->n_head_kv);
	for (uint32_t h = 0; h < hp->n_head_kv; h++)
		store_kv_head(f, f->plan.seqs[f->seq[t]].kv, job->il, (uint32_t)t, f->pos[t], h);
}

/* qk_row_cb()'s work for the heads of kv head g only (query heads
 * g * group .. and key head g): run by g's attention task of a decode
 * step (attention_run_pre). Per head the same operations as qk_row_cb's,
 * so the same bits. */
static void qk_head_pre(void *data, uint32_t t, uint32_t g)
{
	const struct qk_job *job = data;
	struct forward_pass *f = job->f;
	const struct model_hparams *hp = &f->m->hp;
	const uint32_t hd = hp->head_dim_k, group = hp->n_head / hp->n_head_kv;
	const size_t half = hp->n_rot / 2;
	float *q = f->q + ((size_t)t * hp->n_head + (size_t)g * group) * hd;
	float *k = f->k + ((size_t)t * hp->n_head_kv + g) * hd;
	const float *cs = job->table ? job->table + t * half * 2 : NULL; /* NULL: no RoPE */

	head_norm(f, &job->L->w[ARCH_T_ATTN_Q_NORM], q, 1, group);
	head_norm(f, &job->L->w[ARCH_T_ATTN_K_NORM], k, 1, 1);
	rope_apply(f->m, cs, q, 1, group);
	rope_apply(f->m, cs, k, 1, 1);
	store_kv_head(f, f->plan.seqs[f->seq[t]].kv, job->il, t, f->pos[t], g);
}

/* y_attn[n][n_embd] = attention of layer il over xn[n][n_embd], each
 * sequence's rows against its own cache. */
static void attention(struct forward_pass *f, uint32_t il, uint32_t n)
{
	const struct model_layer *L = &f->m->layers[il];
	const float *table = f->rope_swa && arch_layer_is_swa(f->m->arch, il) ? f->rope_swa : f->rope;
	struct qk_job job = {f, L, il, table};

	project_qkv(f, L, n);
	/* Decode: each (row, kv head) is one attention task's, which does its
	 * part of qk_row_cb() first: one pool job and join a layer fewer. Not
	 * with a moved last row (plan()): its tile reads keys its sequence's
	 * other rows store in this step. */
	if (f->n_moved == 0 && attention_can_pre(&f->attn, f->plan.tiles, f->plan.n_tiles)) {
		attention_run_pre(&f->attn, f->pool, il, f->plan.tiles, f->plan.n_tiles, f->q,
				  f->attn_out, qk_head_pre, &job);
	} else {
		tpool_run_1d(f->pool, qk_row_cb, &job, n);
		attention_run(&f->attn, f->pool, il, f->plan.tiles, f->plan.n_tiles, f->q,
			      f->attn_out);
	}
	linear(f, &L->w[ARCH_T_ATTN_OUT], &L->w[ARCH_T_ATTN_OUT_B], f->attn_out, f->y_attn, n);
}

/* ---- MLP ------------------------------------------------------------------ */

static float activate(enum arch_act act, float x)
{
	switch (act) {
	case ARCH_ACT_SILU:
		return x / (1.0f + expf(-x));
	case ARCH_ACT_GELU_TANH:
		return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
	case ARCH_ACT_GELU_ERF:
		return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
	}
	return x;
}

/* up = act(gate) * up (gated) or act(up), rows [t0, t1) (kern_rows_fn):
 * the activation is a transcendental per element (2.9 M a layer for a
 * 512-token TinyLlama prompt), so it is shared out, one row a task of
 * the down projection's (matmul_n()), rather than left to the calling
 * thread while the others wait. Element-wise: the same values whatever
 * the rows a call takes. */
static void act_rows_pre(void *data, size_t t0, size_t t1)
{
	const struct forward_pass *f = data;
	const enum arch_act act = f->m->arch->act;
	size_t i = t0 * f->m->hp.n_ff, end = t1 * f->m->hp.n_ff;

	if (f->m->arch->mlp_gated && act == ARCH_ACT_SILU)
		kern_silu_mul(f->up + i, f->gate + i, end - i);
	else if (f->m->arch->mlp_gated)
		for (; i < end; i++)
			f->up[i] *= activate(act, f->gate[i]);
	else
		for (; i < end; i++)
			f->up[i] = activate(act, f->up[i]);
}

/* act_rows_pre()'s gated SiLU as the down projection's bf16 tile rows,
 * up left as it was (kernels.h kern_rows_bf16_fn; act_rows_pre() is its
 * redo): gate and up are read once, and the product is not stored as
 * floats to be read back for its tiles. */
static void act_bf16_cb(void *data, size_t t0, size_t t1, const struct kern_bf16_rows *b)
{
	const struct forward_pass *f = data;
	const size_t ff = f->m->hp.n_ff;

	for (size_t t = t0; t < t1; t++)
		kern_silu_mul_bf16(f->up + t * ff, f->gate + t * ff, ff, kern_bf16_row(b, t),
				   KERN_BF16_ROW_STEP);
}

/* Phi-3: ffn_up is [gate | up] (2 n_ff outputs), computed into gate's
 * double-width scratch, then each row's halves go to gate and up (the
 * gate half moves down in place: row t's destination ends before any
 * later row's source starts). */
static void split_gate_up(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	const size_t ff = f->m->hp.n_ff;
	uint32_t t;

	linear(f, &L->w[ARCH_T_FFN_UP], NULL, f->xn, f->gate, n);
	for (t = 0; t < n; t++) {
		memcpy(f->up + t * ff, f->gate + 2 * t * ff + ff, ff * sizeof(float));
		memmove(f->gate + t * ff, f->gate + 2 * t * ff, ff * sizeof(float));
	}
}

/* y_mlp[n][n_embd] = down(act(gate(xn)) * up(xn))   (gated)
 *                  = down(act(up(xn)))             (non-gated) */
static void mlp(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	if (f->m->arch->ffn_gate_up_fused) {
		split_gate_up(f, L, n);
	} else if (f->m->arch->mlp_gated) {
		const struct model_weight *const w[] = { &L->w[ARCH_T_FFN_UP], &L->w[ARCH_T_FFN_GATE] };
		const struct model_weight *const b[] = { &L->w[ARCH_T_FFN_UP_B],
							 &L->w[ARCH_T_FFN_GATE_B] };
		float *const y[] = { f->up, f->gate };

		linear_n(f, w, b, f->xn, y, 2, n);
	} else {
		linear(f, &L->w[ARCH_T_FFN_UP], &L->w[ARCH_T_FFN_UP_B], f->xn, f->up, n);
	}
	f->pre = act_rows_pre; /* run by the down projection's tasks */
	f->pre_ctx = f;
	f->pre_rows = 1;
	if (f->m->arch->mlp_gated && f->m->arch->act == ARCH_ACT_SILU) {
		f->pre_bf16 = act_bf16_cb;
		f->pre_redo = act_rows_pre;
	}
	linear(f, &L->w[ARCH_T_FFN_DOWN], &L->w[ARCH_T_FFN_DOWN_B], f->up, f->y_mlp, n);
}

/* ---- the block -------------------------------------------------------------- */

static void block(struct forward_pass *f, uint32_t il, uint32_t n)
{
	const struct model_layer *L = &f->m->layers[il];
	const struct model_weight *ffn_norm = &L->w[ARCH_T_FFN_NORM];
	const size_t len = (size_t)n * f->m->hp.n_embd;

	norm_add(f, &L->w[ARCH_T_ATTN_NORM], &L->w[ARCH_T_ATTN_NORM_B], f->x, f->pending, f->xn, n);
	if (f->m->arch->residual == ARCH_RESIDUAL_PARALLEL && !ffn_norm->data)
		f->pre_bf16 = NULL; /* the MLP reads this xn too */
	f->pending = NULL;
	attention(f, il, n);
	if (f->m->arch->residual == ARCH_RESIDUAL_PARALLEL) {
		/* The MLP reads the same x as attention: its own norm of x when
		 * the architecture has one, else attention's normalised input. */
		if (ffn_norm->data)
			norm(f, ffn_norm, &L->w[ARCH_T_FFN_NORM_B], f->x, f->xn, n);
		mlp(f, L, n);
		add_rows(f->x, f->y_attn, len);
		add_rows(f->x, f->y_mlp, len);
		return;
	}
	if (L->w[ARCH_T_ATTN_POST_NORM].data) /* Gemma 2 and 3, in place */
		norm(f, &L->w[ARCH_T_ATTN_POST_NORM], NULL, f->y_attn, f->y_attn, n);
	norm_add(f, ffn_norm, &L->w[ARCH_T_FFN_NORM_B], f->x, f->y_attn, f->xn, n);
	mlp(f, L, n);
	if (L->w[ARCH_T_FFN_POST_NORM].data)
		norm(f, &L->w[ARCH_T_FFN_POST_NORM], NULL, f->y_mlp, f->y_mlp, n);
	f->pending = f->y_mlp; /* added by the next norm of x (or step()) */
}

/* ---- embedding and head ----------------------------------------------------- */

/* The row of token t of sequence s (plan()). */
static uint32_t row_of(const struct forward_pass *f, uint32_t s, uint32_t t)
{
	if (f->lrow[s] != FORWARD_NO_ROW && t == f->plan.seqs[s].n_tok - 1)
		return f->lrow[s];
	return f->plan.row0[s] + t;
}

/* x[r][n_embd] = token_embd[token of row r] (* sqrt(n_embd) for Gemma),
 * and the row's position. Ids are checked by forward_pass_run(). */
static void embed(struct forward_pass *f)
{
	const struct model_weight *e = &f->m->w[ARCH_T_TOKEN_EMBD];
	const uint32_t d = f->m->hp.n_embd;
	const size_t row = dtype_row_size(e->type, d);
	const float scale = (float)sqrt((double)d);
	uint32_t s, t, i;

	for (s = 0; s < f->plan.n_seq; s++) {
		const struct forward_seq *sq = &f->plan.seqs[s];

		for (t = 0; t < sq->n_tok; t++) {
			uint32_t r = row_of(f, s, t);
			float *x = f->x + (size_t)r * d;

			f->pos[r] = sq->kv->n_pos + t;
			f->seq[r] = s;
			kern_dequantize_row(e->type,
					    (const uint8_t *)e->data + (size_t)sq->tokens[t] * row, x, d);
			if (f->m->arch->embd_scale_sqrt)
				for (i = 0; i < d; i++)
					x[i] *= scale;
		}
	}
}

/* x = c tanh(x / c) (Gemma 2's final soft-capping). */
static void softcap_rows(float *x, size_t len, float c)
{
	size_t i;

	for (i = 0; i < len; i++)
		x[i] = (float)(c * tanh((double)x[i] / c));
}

/* logits = output(output_norm(x)) for the rows that want them, in
 * sequence order: every row of an all_positions sequence, the last row of
 * a last_logits one. They are gathered into y_attn first (free by now). */
static void head(struct forward_pass *f, float *logits)
{
	const struct model *m = f->m;
	const size_t d = m->hp.n_embd;
	uint32_t s, rows = 0;

	for (s = 0; s < f->plan.n_seq; s++) {
		const struct forward_seq *sq = &f->plan.seqs[s];
		const float *x = f->x + (size_t)f->plan.row0[s] * d;

		if (sq->logits == FORWARD_LOGITS_ALL || sq->logits == FORWARD_HIDDEN_ALL) {
			memcpy(f->y_attn + rows * d, x, sq->n_tok * d * sizeof(float));
			rows += sq->n_tok;
		} else if (sq->logits == FORWARD_LOGITS_LAST) {
			memcpy(f->y_attn + rows * d, f->x + (size_t)row_of(f, s, sq->n_tok - 1) * d,
			       d * sizeof(float));
			rows++;
		}
	}
	if (rows == 0)
		return;
	norm(f, &m->w[ARCH_T_OUTPUT_NORM], &m->w[ARCH_T_OUTPUT_NORM_B], f->y_attn, f->xn, rows);
	if (f->plan.seqs[0].logits == FORWARD_HIDDEN_ALL) { /* the whole step is (checked) */
		memcpy(logits, f->xn, (size_t)rows * d * sizeof(float));
		return;
	}
	f->mm_exact = rows; /* sampled rows, all of them */
	linear(f, &m->w[ARCH_T_OUTPUT], &m->w[ARCH_T_OUTPUT_B], f->xn, logits, rows);
	if (m->hp.final_softcap > 0.0f)
		softcap_rows(logits, (size_t)rows * m->hp.n_vocab, m->hp.final_softcap);
}

/* Whether prompt rows' attention may round to bf16 (attention_tile.prompt):
 * only where every q, k and v projection is Q8_0, Q4_0, Q4_K, Q5_K or
 * Q6_K, the types whose prompt rows the amx level's bf16 GEMM takes
 * (the K-quants since kq15, amx_bf16_kq.h), so attention adds that
 * rounding to rows that have it already; an F32, F16 or other quant
 * (Q2_K, Q3_K, Q4_1, ...) model's prompt rows stay float (its embeddings
 * match the exact logits). */
static int prompt_qkv_bf16(const struct model *m)
{
	static const enum arch_tensor qkv[] = {ARCH_T_ATTN_Q, ARCH_T_ATTN_K, ARCH_T_ATTN_V,
					       ARCH_T_ATTN_QKV};

	for (uint32_t il = 0; il < m->hp.n_layer; il++)
		for (size_t i = 0; i < sizeof(qkv) / sizeof(qkv[0]); i++) {
			const struct model_weight *w = &m->layers[il].w[qkv[i]];

			if (w->data && w->type != DTYPE_Q8_0 && w->type != DTYPE_Q4_0 &&
			    w->type != DTYPE_Q4_K && w->type != DTYPE_Q5_K && w->type != DTYPE_Q6_K)
				return 0;
		}
	return 1;
}

/*
 * Lays the sequences out as rows and attention tiles; returns the rows.
 * Numbers by purpose (kern_matmul_n_split): the rows whose logits are
 * sampled come first, [0, n_exact), and take the exact path (on the amx
 * level the int8 tiles, a decode step's bits); the prompt rows after
 * them may take the bf16 tiles. So a sampled token never depends on what
 * shares its step, nor on whether its prompt's prefix came from the
 * cache (a prompt's last token is sampled: computed alone after a cache
 * hit, or here moved out of its chunk to a row and tile of its own, the
 * same numbers). A prompt row's numbers depend on nothing but its own
 * activations either, so its cached keys and values are the same
 * whichever step made them. Exact: every row of a LOGITS_ALL sequence
 * (its logits are all read: evaluation, verification), the last row of
 * a LOGITS_LAST one, every row of a sequence marked exact (a short
 * prompt: the scheduler's rule, scheduler.c); prompt rows: the others,
 * and every row of a LOGITS_NONE or HIDDEN_ALL one (embeddings: the same
 * numbers however the text is cut into steps).
 */
static uint32_t plan(struct forward_pass *f, const struct forward_seq *seqs, uint32_t n_seq)
{
	uint32_t s, n = 0, bf;

	f->plan.seqs = seqs;
	f->plan.n_seq = n_seq;
	f->plan.row0 = f->row0;
	f->plan.tiles = f->tiles;
	f->plan.n_tiles = 0;
	f->n_moved = 0;
	for (s = 0; s < n_seq; s++) { /* the exact rows */
		f->lrow[s] = FORWARD_NO_ROW;
		if (seqs[s].exact || seqs[s].logits == FORWARD_LOGITS_ALL ||
		    (seqs[s].logits == FORWARD_LOGITS_LAST && seqs[s].n_tok == 1)) {
			f->row0[s] = n;
			n += seqs[s].n_tok;
		} else if (seqs[s].logits == FORWARD_LOGITS_LAST) {
			f->lrow[s] = n++;
			f->n_moved++;
		}
	}
	f->n_exact = n;
	for (s = 0; s < n_seq; s++) { /* the prompt rows */
		const struct kv_cache *kv = seqs[s].kv;
		const uint32_t moved = f->lrow[s] != FORWARD_NO_ROW;

		if (moved || (!seqs[s].exact && seqs[s].logits != FORWARD_LOGITS_ALL &&
			      seqs[s].logits != FORWARD_LOGITS_LAST)) {
			f->row0[s] = n;
			n += seqs[s].n_tok - moved;
		}
		f->plan.n_tiles += attention_plan(f->tiles + f->plan.n_tiles, kv, f->row0[s],
						  kv->n_pos, seqs[s].n_tok - moved);
		if (moved)
			f->plan.n_tiles += attention_plan(f->tiles + f->plan.n_tiles, kv, f->lrow[s],
							  kv->n_pos + seqs[s].n_tok - 1, 1);
	}
	bf = prompt_qkv_bf16(f->m);
	for (s = 0; s < f->plan.n_tiles; s++) /* attention's bf16 tiles: prompt rows only */
		f->tiles[s].prompt = bf && f->tiles[s].row >= f->n_exact;
	return n;
}

/* One step: every sequence's tokens at its cache's next positions. */
static void step(struct forward_pass *f, const struct forward_seq *seqs, uint32_t n_seq,
		 float *logits)
{
	const uint32_t n = plan(f, seqs, n_seq);
	uint32_t il, s;

	f->mm_exact = f->n_exact;
	embed(f);
	rope_table(f, n);
	f->pending = NULL;
	for (il = 0; il < f->m->hp.n_layer; il++)
		block(f, il, n);
	assert(f->pre == NULL); /* every deferred norm or activation was run */
	if (f->pending && logits) /* else x is not read again this step */
		add_rows(f->x, f->pending, (size_t)n * f->m->hp.n_embd);
	f->pending = NULL;
	if (logits)
		head(f, logits);
	for (s = 0; s < n_seq; s++) {
		struct kv_cache *kv = seqs[s].kv;

		kv->n_pos += seqs[s].n_tok;
		if (kv->n_pos > kv->n_hi)
			kv->n_hi = kv->n_pos;
	}
}

/* A ring cache (kv_cache.h) takes steps of at most its max_step tokens,
 * and none once a rewind lost the keys its window needs. */
static int check_ring(const struct kv_cache *kv, uint32_t n_tok, char *err)
{
	if (kv->lost)
		return ember_seterr(err, EMBER_EINVAL, "forward: the sliding-window cache no longer "
				    "holds the keys before position %u (rewound past its ring)",
				    kv->n_pos);
	if (kv->ring_rows && n_tok > kv->max_step)
		return ember_seterr(err, EMBER_EINVAL, "forward: %u tokens in one step exceed the "
				    "sliding-window cache's %u", n_tok, kv->max_step);
	return 0;
}

int forward_pass_run(struct forward_pass *f, const struct forward_seq *seqs, uint32_t n_seq,
		     float *logits, char *err)
{
	const uint32_t n_vocab = f->m->hp.n_vocab;
	uint64_t total = 0;
	uint32_t s, t, o;
	int rc;

	if (n_seq == 0)
		return ember_seterr(err, EMBER_EINVAL, "forward: no sequences");
	for (s = 0; s < n_seq; s++) {
		const struct forward_seq *sq = &seqs[s];

		if ((sq->logits == FORWARD_HIDDEN_ALL) != (seqs[0].logits == FORWARD_HIDDEN_ALL))
			return ember_seterr(err, EMBER_EINVAL, "forward: hidden states and logits "
					    "in one step");

		if (sq->n_tok == 0)
			return ember_seterr(err, EMBER_EINVAL, "forward: sequence %u has no tokens", s);
		if (sq->n_tok > sq->kv->n_ctx - sq->kv->n_pos)
			return ember_seterr(err, EMBER_ECONTEXT, "forward: %u tokens after %u exceed "
					    "the context of %u", sq->n_tok, sq->kv->n_pos,
					    sq->kv->n_ctx);
		if ((rc = check_ring(sq->kv, sq->n_tok, err)) < 0)
			return rc;
		for (t = 0; t < sq->n_tok; t++)
			if (sq->tokens[t] < 0 || (uint32_t)sq->tokens[t] >= n_vocab)
				return ember_seterr(err, EMBER_ERANGE, "forward: token id %d at %u is "
						    "outside the vocabulary of %u", sq->tokens[t],
						    t, n_vocab);
		for (o = 0; o < s; o++)
			if (seqs[o].kv == sq->kv)
				return ember_seterr(err, EMBER_EINVAL, "forward: sequences %u and %u "
						    "share a cache", o, s);
		total += sq->n_tok;
	}
	if (total > f->max_batch)
		return ember_seterr(err, EMBER_EINVAL, "forward: %llu tokens exceed the batch of %u",
				    (unsigned long long)total, f->max_batch);
	step(f, seqs, n_seq, logits);
	return 0;
}

int forward_eval(struct forward_ctx *c, const int32_t *tokens, size_t n_tok, float *logits,
		 int all_positions, char *err)
{
	struct forward_pass *f = c->p;
	const uint32_t n_vocab = f->m->hp.n_vocab;
	size_t done, i;

	if (n_tok == 0)
		return ember_seterr(err, EMBER_EINVAL, "forward: no tokens");
	if (n_tok > c->kv.n_ctx - c->kv.n_pos)
		return ember_seterr(err, EMBER_ECONTEXT, "forward: %zu tokens after %u exceed the "
				    "context of %u", n_tok, c->kv.n_pos, c->kv.n_ctx);
	for (i = 0; i < n_tok; i++)
		if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
			return ember_seterr(err, EMBER_ERANGE, "forward: token id %d at %zu is "
					    "outside the vocabulary of %u", tokens[i], i, n_vocab);
	/* Steps are cut at max_batch, which a ring of this pass covers. */
	if (check_ring(&c->kv, n_tok < f->max_batch ? (uint32_t)n_tok : f->max_batch, err) < 0)
		return EMBER_EINVAL;
	for (done = 0; done < n_tok;) {
		uint32_t n = (uint32_t)(n_tok - done < f->max_batch ? n_tok - done : f->max_batch);
		int last = done + n == n_tok;
		struct forward_seq sq = {&c->kv, tokens + done, n, FORWARD_LOGITS_NONE, false};
		float *out = NULL;

		/* Only the last step's final row matters unless all are asked. */
		if (logits && all_positions) {
			sq.logits = FORWARD_LOGITS_ALL;
			out = logits + done * n_vocab;
		} else if (logits && last) {
			sq.logits = FORWARD_LOGITS_LAST;
			out = logits;
		}
		step(f, &sq, 1, out);
		done += n;
	}
	return 0;
}
