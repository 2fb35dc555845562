/*
 * forward.c - the forward pass (forward.h).
 *
 * Read top to bottom: forward_pass_run() lays the tokens of every sequence
 * of a step out as rows of one batch; step() embeds them, runs every block,
 * and applies the output head to the rows that want logits. block() is the
 * one decoder block of arch.h, made of forward_norm(), attention() and
 * forward_mlp() (forward_linear.c: the products, norms and MLP); the
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
 * (Qwen3, Gemma 3: before RoPE); sums in double like forward_norm(). */
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

		forward_linear_n(f, w, b, f->xn, y, 3, n);
		return;
	}
	forward_linear(f, &L->w[ARCH_T_ATTN_QKV], &L->w[ARCH_T_ATTN_QKV_B], f->xn, f->qkv, n);
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
	const float *ks = f->k + ((size_t)r * hp->n_head_kv + h) * dk;
	const float *vs = f->v + ((size_t)r * hp->n_head_kv + h) * dv;
	/* (a ring layer's row for pos: kv_cache.h) */
	char *kc = kv_cache_k_at(kv, il, h, pos);
	char *vc = kv_cache_v_at(kv, il, h, pos);

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
	forward_linear(f, &L->w[ARCH_T_ATTN_OUT], &L->w[ARCH_T_ATTN_OUT_B], f->attn_out, f->y_attn,
		       n);
}

/* ---- the block -------------------------------------------------------------- */

static void block(struct forward_pass *f, uint32_t il, uint32_t n)
{
	const struct model_layer *L = &f->m->layers[il];
	const struct model_weight *ffn_norm = &L->w[ARCH_T_FFN_NORM];
	const size_t len = (size_t)n * f->m->hp.n_embd;

	forward_norm_add(f, &L->w[ARCH_T_ATTN_NORM], &L->w[ARCH_T_ATTN_NORM_B], f->x, f->pending,
			 f->xn, n);
	if (f->m->arch->residual == ARCH_RESIDUAL_PARALLEL && !ffn_norm->data)
		f->pre_bf16 = NULL; /* the MLP reads this xn too */
	f->pending = NULL;
	attention(f, il, n);
	if (f->m->arch->residual == ARCH_RESIDUAL_PARALLEL) {
		/* The MLP reads the same x as attention: its own norm of x when
		 * the architecture has one, else attention's normalised input. */
		if (ffn_norm->data)
			forward_norm(f, ffn_norm, &L->w[ARCH_T_FFN_NORM_B], f->x, f->xn, n);
		forward_mlp(f, L, n);
		add_rows(f->x, f->y_attn, len);
		add_rows(f->x, f->y_mlp, len);
		return;
	}
	if (L->w[ARCH_T_ATTN_POST_NORM].data) /* Gemma 2 and 3, in place */
		forward_norm(f, &L->w[ARCH_T_ATTN_POST_NORM], NULL, f->y_attn, f->y_attn, n);
	forward_norm_add(f, ffn_norm, &L->w[ARCH_T_FFN_NORM_B], f->x, f->y_attn, f->xn, n);
	forward_mlp(f, L, n);
	if (L->w[ARCH_T_FFN_POST_NORM].data)
		forward_norm(f, &L->w[ARCH_T_FFN_POST_NORM], NULL, f->y_mlp, f->y_mlp, n);
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
	forward_norm(f, &m->w[ARCH_T_OUTPUT_NORM], &m->w[ARCH_T_OUTPUT_NORM_B], f->y_attn, f->xn,
		     rows);
	if (f->plan.seqs[0].logits == FORWARD_HIDDEN_ALL) { /* the whole step is (checked) */
		memcpy(logits, f->xn, (size_t)rows * d * sizeof(float));
		return;
	}
	f->mm_exact = rows; /* sampled rows, all of them */
	forward_linear(f, &m->w[ARCH_T_OUTPUT], &m->w[ARCH_T_OUTPUT_B], f->xn, logits, rows);
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
