/*
 * forward_linear.c - the row-wise work of a step (forward_impl.h): the
 * matrix products (forward_linear(), forward_linear_n() of weights over
 * one input), the norms, and the MLP. A norm or activation whose output only the next
 * product reads is deferred into that product's pool tasks (f->pre), and
 * where the product takes plain bf16 tiles its prompt rows are written
 * straight into them (f->pre_bf16, kernels.h kern_pre; LEVELS.md pre15).
 *
 * Ownership: everything is the pass's scratch (forward_impl.h); the
 * calls run on the pass's worker thread, spreading rows over its pool.
 */
#include <math.h>
#include <string.h>

#include "forward_impl.h"

/* ---- matrix products ------------------------------------------------------ */

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
	const struct kern_pre pre = {f->pre,	   f->pre_ctx,	f->pre_rows,
				     f->pre_bf16, f->pre_redo, f->pre_xb};

	f->pre = NULL;
	f->pre_bf16 = NULL;
	f->pre_xb = NULL;
	kern_matmul_n_fused(f->pool, type, n_in, parts, np, x, n, f->mm_exact, f->mm_scratch,
			    &pre);
}

/* y[n][w->n_out] = x[n][w->n_in] W^T + b */
void forward_linear(struct forward_pass *f, const struct model_weight *w,
		    const struct model_weight *b, const float *x, float *y, uint32_t n)
{
	const struct kern_mm_part part = {w->data, w->n_out, y, 0};

	matmul_n(f, w->type | w->packed, w->n_in, &part, 1, x, n);
	if (b)
		add_bias(y, b, n);
}

/* forward_linear() for n (<= KERN_MM_PARTS_MAX) weights over the same x:
 * one pool pass when their widths agree and their types share the
 * activations (kern_mm_parts_share: Q4_K_M's q, k Q4_K and v Q6_K too),
 * with the deferred norm's bf16 writer (results as forward_linear()'s). */
void forward_linear_n(struct forward_pass *f, const struct model_weight *const w[],
		      const struct model_weight *const b[], const float *x, float *const y[],
		      size_t n, uint32_t n_tok)
{
	const uint32_t t0 = w[0]->type | w[0]->packed;
	struct kern_mm_part parts[KERN_MM_PARTS_MAX];
	size_t i;

	for (i = 1; i < n; i++)
		if (w[i]->n_in != w[0]->n_in ||
		    !kern_mm_parts_share(t0, w[i]->type | w[i]->packed, w[0]->n_in))
			break;
	if (i < n) {
		f->pre_bf16 = NULL; /* the later products read x's floats */
		for (i = 0; i < n; i++)
			forward_linear(f, w[i], b[i], x, y[i], n_tok);
		return;
	}
	for (i = 0; i < n; i++)
		parts[i] = (struct kern_mm_part){w[i]->data, w[i]->n_out, y[i],
						 w[i]->type | w[i]->packed};
	matmul_n(f, t0, w[0]->n_in, parts, n, x, n_tok);
	for (i = 0; i < n; i++)
		if (b[i])
			add_bias(y[i], b[i], n_tok);
}

/* ---- norm ----------------------------------------------------------------- */

/* Exactly rows [t0, t1), KERN_NORM_ROWS a kernel call (kern_rows_fn: a
 * deferred norm, run by the next product's tasks, whose groups may be
 * smaller than KERN_NORM_ROWS: norm_pre_rows()). A row's bits do not
 * depend on the rows beside it in a call (kern_norm_rows). */
static void norm_pre_cb(void *data, size_t t0, size_t t1)
{
	const struct norm_job *job = data;
	const size_t d = job->nm.d;

	for (size_t r0 = t0; r0 < t1; r0 += KERN_NORM_ROWS)
		kern_norm_rows(&job->nm, job->x + r0 * d, job->res ? job->res + r0 * d : NULL,
			       job->add ? job->add + r0 * d : NULL, job->out + r0 * d,
			       t1 - r0 < KERN_NORM_ROWS ? t1 - r0 : KERN_NORM_ROWS);
}

/* Rows [t * KERN_NORM_ROWS, +KERN_NORM_ROWS) (a pool task): prompts
 * normalise hundreds of rows per layer, twice, which left the other
 * threads spinning when it ran on one. A task takes several rows because
 * the kernel sums them side by side (kernels.h kern_norm_rows: a row's
 * sum is a chain of dependent additions). */
static void norm_rows_cb(void *data, size_t t)
{
	const struct norm_job *job = data;
	const size_t t0 = t * KERN_NORM_ROWS;

	norm_pre_cb(data, t0, job->n - t0 < KERN_NORM_ROWS ? job->n : t0 + KERN_NORM_ROWS);
}

/* Rows a task of a deferred norm over n rows: KERN_NORM_ROWS, or for a
 * batch too small to give each thread such a group, one group a thread.
 * A 16-sequence decode step's norm (and its rows' quantization) was one
 * task: one thread worked ~25 us per q|k|v and gate|up product while the
 * others waited (LEVELS.md, step18). Not two groups a thread (step18's
 * first cut): a group's sums are one latency-bound chain whatever its
 * rows (kern_norm_rows of 2048-wide rows, Zen 4: 1 row 2.8 us, 2 rows
 * 3.2, 4 rows 3.9), so an 8-sequence step's two 2-row tasks a thread
 * took ~2.4 us longer than one of 4 rows, twice a layer (LEVELS.md,
 * join19). */
static size_t norm_pre_rows(const struct forward_pass *f, uint32_t n)
{
	const size_t parts = tpool_threads(f->pool);

	if ((n + KERN_NORM_ROWS - 1) / KERN_NORM_ROWS >= parts)
		return KERN_NORM_ROWS;
	return (n + parts - 1) / parts;
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
void forward_norm(const struct forward_pass *f, const struct model_weight *w,
		  const struct model_weight *b, const float *x, float *out, uint32_t n)
{
	norm_job_run(f, w, b, x, NULL, NULL, out, n);
}

/* norm_pre_cb()'s rows as the next product's bf16 tile rows, not into
 * job->out (kernels.h kern_rows_bf16_fn): groups of prompt rows, t0 a
 * multiple of the task's rows (kern_matmul_n_fused, norm_pre_rows). */
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

/* x[n][d] += add[n][d] (a residual), then forward_norm() of x into out:
 * the same operations as add_rows() followed by forward_norm(), deferred to the next
 * matrix product, whose pool tasks run them (matmul_n()); out must be
 * what that product reads, and nothing may read x or out before it. */
void forward_norm_add(struct forward_pass *f, const struct model_weight *w,
		      const struct model_weight *b, float *x, const float *add, float *out,
		      uint32_t n)
{
	f->pre_norm = (struct norm_job){
		{w->data, b ? b->data : NULL, f->m->hp.norm_eps, f->m->hp.n_embd,
		 f->m->arch->norm == ARCH_NORM_LAYER},
		x, out, add ? x : NULL, add, n};
	f->pre = norm_pre_cb;
	f->pre_ctx = &f->pre_norm;
	f->pre_rows = norm_pre_rows(f, n);
	f->pre_bf16 = norm_bf16_cb;
	f->pre_redo = norm_redo_cb;
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

/* act_rows_pre()'s redo where the paired gate|up calls wrote the down
 * product's bf16 rows and no float gate or up of those rows exists
 * (forward_mlp_glu): up's rows [t0, t1) become the bf16 values widened
 * (exact), for a path that reads floats after all (kern_act_ensure: the
 * int8 blocks of rows past the last 16, or without the GEMM's work
 * memory); the unfused path's floats are these before their rounding. */
static void act_glu_redo(void *data, size_t t0, size_t t1)
{
	const struct forward_pass *f = data;
	const size_t ff = f->m->hp.n_ff;
	const struct kern_bf16_rows b = {f->glu_xb, ff, f->mm_exact};

	for (size_t t = t0; t < t1; t++) {
		const uint16_t *row = kern_bf16_row(&b, t);

		for (size_t k = 0; k < ff; k++) {
			const uint32_t u = (uint32_t)row[(k / 32) * KERN_BF16_ROW_STEP + k % 32] << 16;

			memcpy(f->up + t * ff + k, &u, sizeof(float));
		}
	}
}

/* Gate and up of a gated SiLU MLP without biases as paired calls whose
 * prompt rows go straight into the down product's bf16 tiles (f->glu_xb,
 * kernels.h kern_matmul_glu), where the down product takes them
 * (kern_bf16_ready). Returns 0: nothing run (the caller runs gate and up);
 * 1: the plain product ran (gate and up hold every row); 2: the paired
 * calls ran (gate and up hold the sampled rows, f->glu_xb the prompt
 * rows' tiles). The same bits as the unfused path's either way. */
static int forward_mlp_glu(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	const struct model_weight *up = &L->w[ARCH_T_FFN_UP], *gate = &L->w[ARCH_T_FFN_GATE],
				  *down = &L->w[ARCH_T_FFN_DOWN];
	const struct kern_mm_part parts[2] = {{up->data, up->n_out, f->up, up->type | up->packed},
					      {gate->data, gate->n_out, f->gate,
					       gate->type | gate->packed}};
	const struct kern_pre pre = {f->pre,	   f->pre_ctx,	f->pre_rows,
				     f->pre_bf16, f->pre_redo, f->pre_xb};

	if (!f->glu_xb || L->w[ARCH_T_FFN_UP_B].data || L->w[ARCH_T_FFN_GATE_B].data ||
	    up->n_in != gate->n_in || (up->type | up->packed) != (gate->type | gate->packed) ||
	    !kern_bf16_ready(down->type | down->packed, down->n_in, n, f->mm_exact))
		return 0;
	f->pre = NULL;
	f->pre_bf16 = NULL;
	f->pre_xb = NULL;
	return 1 + kern_matmul_glu(f->pool, up->type | up->packed, up->n_in, parts, f->xn, n,
				   f->mm_exact, f->mm_scratch, &pre, f->glu_xb);
}

/* Phi-3: ffn_up is [gate | up] (2 n_ff outputs), computed into gate's
 * double-width scratch, then each row's halves go to gate and up (the
 * gate half moves down in place: row t's destination ends before any
 * later row's source starts). */
static void split_gate_up(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	const size_t ff = f->m->hp.n_ff;
	uint32_t t;

	forward_linear(f, &L->w[ARCH_T_FFN_UP], NULL, f->xn, f->gate, n);
	for (t = 0; t < n; t++) {
		memcpy(f->up + t * ff, f->gate + 2 * t * ff + ff, ff * sizeof(float));
		memmove(f->gate + t * ff, f->gate + 2 * t * ff, ff * sizeof(float));
	}
}

/* y_mlp[n][n_embd] = down(act(gate(xn)) * up(xn))   (gated)
 *                  = down(act(up(xn)))             (non-gated) */
void forward_mlp(struct forward_pass *f, const struct model_layer *L, uint32_t n)
{
	int glu = 0; /* forward_mlp_glu's answer */

	if (f->m->arch->ffn_gate_up_fused) {
		split_gate_up(f, L, n);
	} else if (f->m->arch->mlp_gated) {
		const struct model_weight *const w[] = { &L->w[ARCH_T_FFN_UP], &L->w[ARCH_T_FFN_GATE] };
		const struct model_weight *const b[] = { &L->w[ARCH_T_FFN_UP_B],
							 &L->w[ARCH_T_FFN_GATE_B] };
		float *const y[] = { f->up, f->gate };

		glu = forward_mlp_glu(f, L, n);
		if (glu == 0)
			forward_linear_n(f, w, b, f->xn, y, 2, n);
	} else {
		forward_linear(f, &L->w[ARCH_T_FFN_UP], &L->w[ARCH_T_FFN_UP_B], f->xn, f->up, n);
	}
	f->pre = act_rows_pre; /* run by the down projection's tasks */
	f->pre_ctx = f;
	f->pre_rows = 1;
	if (f->m->arch->mlp_gated && f->m->arch->act == ARCH_ACT_SILU) {
		f->pre_bf16 = act_bf16_cb;
		f->pre_redo = act_rows_pre;
	}
	if (glu == 2) { /* the prompt rows' tiles are made; no float rows */
		f->pre_redo = act_glu_redo;
		f->pre_xb = f->glu_xb;
	}
	forward_linear(f, &L->w[ARCH_T_FFN_DOWN], &L->w[ARCH_T_FFN_DOWN_B], f->up, f->y_mlp, n);
}
