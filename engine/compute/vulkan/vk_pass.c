/*
 * vk_pass.c - the forward pass on the Vulkan device (vk.h): forward.c's
 * step, recorded as one command buffer per step and waited for.
 *
 * Per step the host writes only the inputs (token ids, the rows that want
 * logits, the rotary cos/sin table computed in double as the CPU does)
 * into host-visible memory; everything else stays on the device (residual
 * stream, projections, K/V caches, weights), and only the logits rows come
 * back. Rows of all sequences form one batch, so each weight is read once
 * per 8 tokens (matmul.comp); keys/values are stored and attention runs per
 * sequence against its own cache. Each dispatch is followed by a memory
 * barrier: the step is a chain of dependent kernels.
 *
 * Prefill GEMM (gemm.comp, tiles of 64 rows x 32 tokens through shared
 * memory): the rows of a sequence with at least gemm_min tokens in the
 * step (EMBER_VK_GEMM, default 16; 0: never) go through it, the others
 * through matmul.comp; adjacent sequences of one kind share a dispatch.
 * The choice is per sequence, not per step, and each shader sums a
 * token's products in an order that does not depend on its neighbours, so
 * a sequence's logits are the same batched or alone, bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "vk_kv.h"
#include "vk_pc.h"

#define MM_BIAS 1u
#define MM_ACC 2u
#define MM_CAP 4u
#define NORM_LAYER 1u
#define NORM_BIAS 2u
#define NORM_MAP 4u
#define GEMM_MIN 16u /* tokens of a sequence from which it takes gemm.comp */

/* Consecutive rows of the step that take one shader: [row0, row0 + n). */
struct runs {
	uint32_t n;
	struct run {
		uint32_t row0, n, gemm;
	} *r; /* [B] */
};

struct vk_pass {
	const struct model *m;
	struct vk_weights *w;
	uint32_t B;
	struct vk_buf scratch, in, out;
	uint64_t out_floats; /* logits (or hidden-state) floats `out` holds */
	VkDeviceAddress x, xn, y, q, k, v, att, gate, up;
	VkDeviceAddress wide; /* a fused projection's rows before the split */
	uint32_t *tokens, *map; /* in: [B] each */
	float *rope, *rope_swa; /* in: [B][n_rot/2][2] */
	VkDeviceAddress a_tokens, a_map, a_rope, a_rope_swa, a_slopes;
	uint32_t *row0;         /* [B] first row of each sequence */
	uint32_t gemm_min;      /* 0: matmul.comp only */
	struct runs body, head; /* the step's rows; the rows wanting logits */
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkFence fence;
	float scale;            /* attention */
};

static uint64_t round256(uint64_t n)
{
	return (n + 255) & ~(uint64_t)255;
}

/* EMBER_VK_GEMM: the fewest tokens of a sequence that take the GEMM
 * (0: never); unset: GEMM_MIN. Anything but a number is refused. */
static int gemm_min(uint32_t *out, char *err)
{
	const char *e = getenv("EMBER_VK_GEMM");
	char *end;
	unsigned long v;

	*out = GEMM_MIN;
	if (!e || !*e)
		return 0;
	v = strtoul(e, &end, 10);
	if (*end || e[0] == '-' || e[0] == '+' || v > 1u << 20)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: EMBER_VK_GEMM=%.32s: not a token "
				    "count (0 turns the prefill GEMM off)", e);
	*out = (uint32_t)v;
	return 0;
}

int vk_pass_new(struct vk_pass **out, const struct model *m, uint32_t max_batch, char *err)
{
	const struct model_hparams *hp = &m->hp;
	const uint64_t B = max_batch ? max_batch : 64, half = hp->n_rot / 2;
	const uint64_t lens[] = {B * hp->n_embd, B * hp->n_embd, B * hp->n_embd,
				 B * hp->n_head * hp->head_dim_k, B * hp->n_head_kv * hp->head_dim_k,
				 B * hp->n_head_kv * hp->head_dim_v, B * hp->n_head * hp->head_dim_v,
				 B * hp->n_ff, B * hp->n_ff,
				 B * (hp->n_head + 2 * hp->n_head_kv) * (hp->head_dim_k > hp->head_dim_v
									   ? hp->head_dim_k
									   : hp->head_dim_v) +
					 B * 2 * hp->n_ff};
	VkDeviceAddress *addrs[] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	struct vk_pass *p;
	uint64_t total = 0, off = 0, rope_bytes = round256(B * half * 2 * 4);
	size_t i;
	int rc;

	*out = NULL;
	if ((rc = vk_check_model(m, err)) < 0)
		return rc;
	if (!(p = calloc(1, sizeof(*p))) || !(p->row0 = calloc(B, sizeof(*p->row0))) ||
	    !(p->body.r = calloc(B, sizeof(*p->body.r))) ||
	    !(p->head.r = calloc(B, sizeof(*p->head.r)))) {
		if (p)
			free(p->row0), free(p->body.r);
		free(p);
		return ember_seterr(err, EMBER_ENOMEM, "vulkan: pass");
	}
	if ((rc = gemm_min(&p->gemm_min, err)) < 0)
		goto fail;
	p->m = m;
	p->B = (uint32_t)B;
	p->scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim_k);
	addrs[0] = &p->x, addrs[1] = &p->xn, addrs[2] = &p->y, addrs[3] = &p->q;
	addrs[4] = &p->k, addrs[5] = &p->v, addrs[6] = &p->att, addrs[7] = &p->gate;
	addrs[8] = &p->up, addrs[9] = &p->wide;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		total += round256(lens[i] * 4);
	if ((rc = vk_weights_get(&p->w, m, err)) < 0 ||
	    (rc = vk_buf_new(&p->scratch, total, VK_MEM_DEVICE, err)) < 0 ||
	    (rc = vk_buf_new(&p->in, round256(B * 4) * 2 + rope_bytes * 2 + hp->n_head * 4,
			     VK_MEM_HOST, err)) < 0)
		goto fail;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		*addrs[i] = p->scratch.addr + off;
		off += round256(lens[i] * 4);
	}
	p->tokens = p->in.map;
	p->a_tokens = p->in.addr;
	p->map = (uint32_t *)((char *)p->in.map + round256(B * 4));
	p->a_map = p->in.addr + round256(B * 4);
	p->rope = (float *)((char *)p->in.map + round256(B * 4) * 2);
	p->a_rope = p->in.addr + round256(B * 4) * 2;
	p->rope_swa = (float *)((char *)p->rope + rope_bytes);
	p->a_rope_swa = p->a_rope + rope_bytes;
	p->a_slopes = p->a_rope_swa + rope_bytes;
	/* ALiBi slopes as attention_init() makes them (bf16-rounded for BF16). */
	for (i = 0; m->arch->alibi && i < hp->n_head; i++) {
		float sl = (float)arch_alibi_slope((uint32_t)i, hp->n_head, hp->alibi_max_bias);
		uint32_t u;

		if (m->arch->alibi == ARCH_ALIBI_BF16) {
			memcpy(&u, &sl, 4);
			u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000u;
			memcpy(&sl, &u, 4);
		}
		((float *)((char *)p->rope_swa + rope_bytes))[i] = sl;
	}
	if (vk_cmd_new(&p->pool, &p->cb, &p->fence, 1) < 0) {
		rc = ember_seterr(err, EMBER_ENOMEM, "vulkan: command buffer");
		goto fail;
	}
	*out = p;
	return 0;
fail:
	vk_pass_free(p);
	return rc;
}

void vk_pass_free(struct vk_pass *p)
{
	if (!p)
		return;
	vk_cmd_free(p->pool, p->fence);
	vk_buf_free(&p->scratch);
	vk_buf_free(&p->in);
	vk_buf_free(&p->out);
	vk_weights_put(p->w);
	free(p->row0);
	free(p->body.r);
	free(p->head.r);
	free(p);
}

/* ---- recording helpers (each ends with a barrier) ------------------------- */

static VkDeviceAddress W(const struct vk_pass *p, int role, uint32_t il)
{
	return vk_weights_addr(p->w, role, il);
}

/* y = W x (+ bias, flags) over the rows of `runs`, each run through
 * gemm.comp or matmul.comp. */
static void mm(struct vk_pass *p, int role, int bias_role, uint32_t il, VkDeviceAddress x,
	       VkDeviceAddress y, const struct runs *runs, uint32_t flags, float cap)
{
	const struct model_weight *w = role < ARCH_T_FIRST_LAYER ? &p->m->w[role]
								 : &p->m->layers[il].w[role];
	VkDeviceAddress b = bias_role >= 0 ? W(p, bias_role, il) : 0;
	uint32_t gx = w->n_out < 32768 ? w->n_out : 32768, i;

	for (i = 0; i < runs->n; i++) {
		const struct run *r = &runs->r[i];
		struct pc_matmul pc = {W(p, role, il), x + (uint64_t)r->row0 * w->n_in * 4,
				       y + (uint64_t)r->row0 * w->n_out * 4, b, w->type, w->n_in,
				       w->n_out, r->n, flags | (b ? MM_BIAS : 0), cap};

		if (r->gemm) /* the same tiles on cooperative matrices where checked */
			vk_dispatch(p->cb,
				    (enum vk_shader)(vk_weights_coopmat(p->w)
							     ? vk_shader_coopmat(w->type)
							     : vk_shader_gemm(w->type)),
				    &pc, sizeof(pc), (w->n_out + 63) / 64, (r->n + 31) / 32, 1);
		else
			vk_dispatch(p->cb, (enum vk_shader)vk_shader_matmul(w->type), &pc,
				    sizeof(pc), gx, (r->n + 7) / 8, (w->n_out + 32767) / 32768);
	}
	vk_barrier(p->cb);
}

/* Appends rows [row0, row0 + n) to runs: to the last run when it takes
 * the same shader. */
static void runs_add(struct runs *runs, uint32_t row0, uint32_t n, uint32_t gemm)
{
	struct run *last = runs->n ? &runs->r[runs->n - 1] : NULL;

	if (n == 0)
		return;
	if (last && last->gemm == gemm && last->row0 + last->n == row0)
		last->n += n;
	else
		runs->r[runs->n++] = (struct run){row0, n, gemm};
}

static void nrm(struct vk_pass *p, VkDeviceAddress gain, VkDeviceAddress bias, VkDeviceAddress x,
		VkDeviceAddress out, uint32_t rows, uint32_t dim, uint32_t flags)
{
	struct pc_norm pc = {x, out, gain, bias, p->a_map, dim, dim, dim,
			     flags | (bias ? NORM_BIAS : 0), p->m->hp.norm_eps, rows};

	vk_dispatch(p->cb, VK_SH_NORM, &pc, sizeof(pc), rows < 32768 ? rows : 32768,
		    (rows + 32767) / 32768, 1);
	vk_barrier(p->cb);
}

static void add(struct vk_pass *p, VkDeviceAddress x, VkDeviceAddress y, uint64_t n)
{
	struct pc_add pc = {x, y, (uint32_t)n};

	vk_dispatch_n(p->cb, VK_SH_ADD, &pc, sizeof(pc), n);
	vk_barrier(p->cb);
}

/* dst[r][0..width) = src[r][off..off+width) for n rows of src_stride. */
static void split(struct vk_pass *p, VkDeviceAddress src, VkDeviceAddress dst, uint32_t n,
		  uint32_t width, uint32_t src_stride, uint32_t off)
{
	struct pc_copy pc = {src, dst, n, width, src_stride, off};

	vk_dispatch_n(p->cb, VK_SH_COPY, &pc, sizeof(pc), (uint64_t)n * width);
}

static void rope(struct vk_pass *p, VkDeviceAddress x, VkDeviceAddress table, uint32_t n,
		 uint32_t heads)
{
	const struct model_hparams *hp = &p->m->hp;
	struct pc_rope pc = {x, table, n, heads, hp->head_dim_k, hp->n_rot / 2,
			     p->m->arch->rope == ARCH_ROPE_NEOX};

	vk_dispatch_n(p->cb, VK_SH_ROPE, &pc, sizeof(pc), (uint64_t)n * heads * (hp->n_rot / 2));
	vk_barrier(p->cb);
}

/* ---- the step --------------------------------------------------------------- */

/* forward.c's attention(): projections, q/k norms, RoPE, the new keys and
 * values into each cache, attention per sequence into att. */
static void attention(struct vk_pass *p, const struct compute_seq *seqs,
		      struct vk_kv *const *kvs, uint32_t n_seq, uint32_t il, uint32_t n)
{
	const struct model *m = p->m;
	const struct model_hparams *hp = &m->hp;
	const int swa = m->arch->swa != ARCH_SWA_NONE && arch_layer_is_swa(m->arch, il);
	uint32_t s;

	if (W(p, ARCH_T_ATTN_QKV, il)) {
		const uint32_t dq = hp->n_head * hp->head_dim_k, dk = hp->n_head_kv * hp->head_dim_k;
		const uint32_t dv = hp->n_head_kv * hp->head_dim_v;

		mm(p, ARCH_T_ATTN_QKV, ARCH_T_ATTN_QKV_B, il, p->xn, p->wide, &p->body, 0, 0);
		split(p, p->wide, p->q, n, dq, dq + dk + dv, 0);
		split(p, p->wide, p->k, n, dk, dq + dk + dv, dq);
		split(p, p->wide, p->v, n, dv, dq + dk + dv, dq + dk);
		vk_barrier(p->cb);
	} else {
		mm(p, ARCH_T_ATTN_Q, ARCH_T_ATTN_Q_B, il, p->xn, p->q, &p->body, 0, 0);
		mm(p, ARCH_T_ATTN_K, ARCH_T_ATTN_K_B, il, p->xn, p->k, &p->body, 0, 0);
		mm(p, ARCH_T_ATTN_V, ARCH_T_ATTN_V_B, il, p->xn, p->v, &p->body, 0, 0);
	}
	if (W(p, ARCH_T_ATTN_Q_NORM, il))
		nrm(p, W(p, ARCH_T_ATTN_Q_NORM, il), 0, p->q, p->q, n * hp->n_head, hp->head_dim_k, 0);
	if (W(p, ARCH_T_ATTN_K_NORM, il))
		nrm(p, W(p, ARCH_T_ATTN_K_NORM, il), 0, p->k, p->k, n * hp->n_head_kv,
		    hp->head_dim_k, 0);
	if (m->arch->rope != ARCH_ROPE_NONE) {
		VkDeviceAddress t = hp->has_rope_base_swa && swa ? p->a_rope_swa : p->a_rope;

		rope(p, p->q, t, n, hp->n_head);
		rope(p, p->k, t, n, hp->n_head_kv);
	}
	for (s = 0; s < n_seq; s++) {
		const struct vk_kv *kv = kvs[s];
		struct pc_kv_store pc = {p->k, p->v, vk_kv_k(kv, il), vk_kv_v(kv, il), p->row0[s],
					 kv->n_pos, seqs[s].n_tok, hp->n_head_kv, hp->head_dim_k,
					 hp->head_dim_v, kv->rows[il], (uint32_t)kv->f16,
					 (uint32_t)vk_kv_is_ring(kv, il)};

		vk_dispatch_n(p->cb, VK_SH_KV_STORE, &pc, sizeof(pc),
			      (uint64_t)seqs[s].n_tok * hp->n_head_kv *
				      (hp->head_dim_k + hp->head_dim_v) / (kv->f16 ? 2 : 1));
	}
	vk_barrier(p->cb);
	for (s = 0; s < n_seq; s++) {
		const struct vk_kv *kv = kvs[s];
		struct pc_attention pc = {p->q, p->att, vk_kv_k(kv, il), vk_kv_v(kv, il),
					  p->a_slopes, p->row0[s], kv->n_pos, hp->n_head,
					  hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, kv->rows[il],
					  (uint32_t)kv->f16, swa ? hp->n_swa : 0,
					  (uint32_t)m->arch->alibi, p->scale, hp->attn_softcap,
					  (uint32_t)vk_kv_is_ring(kv, il)};

		vk_dispatch(p->cb, VK_SH_ATTENTION, &pc, sizeof(pc), hp->n_head, seqs[s].n_tok, 1);
	}
	vk_barrier(p->cb);
}

/* up = act(gate) * up or act(up), then down into `dst` (accumulating when
 * acc: the residual add). */
static void mlp(struct vk_pass *p, uint32_t il, uint32_t n, VkDeviceAddress dst, uint32_t acc)
{
	const struct model *m = p->m;
	struct pc_act pc = {p->gate, p->up, n * m->hp.n_ff, (uint32_t)m->arch->act,
			    (uint32_t)(m->arch->mlp_gated != 0)};

	if (m->arch->ffn_gate_up_fused) { /* Phi-3: ffn_up is [gate | up] */
		mm(p, ARCH_T_FFN_UP, -1, il, p->xn, p->wide, &p->body, 0, 0);
		split(p, p->wide, p->gate, n, m->hp.n_ff, 2 * m->hp.n_ff, 0);
		split(p, p->wide, p->up, n, m->hp.n_ff, 2 * m->hp.n_ff, m->hp.n_ff);
		vk_barrier(p->cb);
	} else {
		mm(p, ARCH_T_FFN_UP, ARCH_T_FFN_UP_B, il, p->xn, p->up, &p->body, 0, 0);
	}
	if (m->arch->mlp_gated && !m->arch->ffn_gate_up_fused)
		mm(p, ARCH_T_FFN_GATE, ARCH_T_FFN_GATE_B, il, p->xn, p->gate, &p->body, 0, 0);
	vk_dispatch_n(p->cb, VK_SH_ACT, &pc, sizeof(pc), (uint64_t)n * m->hp.n_ff);
	vk_barrier(p->cb);
	mm(p, ARCH_T_FFN_DOWN, ARCH_T_FFN_DOWN_B, il, p->up, dst, &p->body, acc, 0);
}

static void block(struct vk_pass *p, const struct compute_seq *seqs, struct vk_kv *const *kvs,
		  uint32_t n_seq, uint32_t il, uint32_t n)
{
	const struct model *m = p->m;
	const uint32_t d = m->hp.n_embd, layer = m->arch->norm == ARCH_NORM_LAYER ? NORM_LAYER : 0;

	nrm(p, W(p, ARCH_T_ATTN_NORM, il), W(p, ARCH_T_ATTN_NORM_B, il), p->x, p->xn, n, d, layer);
	attention(p, seqs, kvs, n_seq, il, n);
	if (m->arch->residual == ARCH_RESIDUAL_PARALLEL) {
		mm(p, ARCH_T_ATTN_OUT, ARCH_T_ATTN_OUT_B, il, p->att, p->y, &p->body, 0, 0);
		if (W(p, ARCH_T_FFN_NORM, il))
			nrm(p, W(p, ARCH_T_FFN_NORM, il), W(p, ARCH_T_FFN_NORM_B, il), p->x, p->xn, n,
			    d, layer);
		mlp(p, il, n, p->x, MM_ACC);
		add(p, p->x, p->y, (uint64_t)n * d);
		return;
	}
	if (W(p, ARCH_T_ATTN_POST_NORM, il)) {
		mm(p, ARCH_T_ATTN_OUT, ARCH_T_ATTN_OUT_B, il, p->att, p->y, &p->body, 0, 0);
		nrm(p, W(p, ARCH_T_ATTN_POST_NORM, il), 0, p->y, p->y, n, d, layer);
		add(p, p->x, p->y, (uint64_t)n * d);
	} else {
		mm(p, ARCH_T_ATTN_OUT, ARCH_T_ATTN_OUT_B, il, p->att, p->x, &p->body, MM_ACC, 0);
	}
	nrm(p, W(p, ARCH_T_FFN_NORM, il), W(p, ARCH_T_FFN_NORM_B, il), p->x, p->xn, n, d, layer);
	if (W(p, ARCH_T_FFN_POST_NORM, il)) {
		mlp(p, il, n, p->y, 0);
		nrm(p, W(p, ARCH_T_FFN_POST_NORM, il), 0, p->y, p->y, n, d, layer);
		add(p, p->x, p->y, (uint64_t)n * d);
	} else {
		mlp(p, il, n, p->x, MM_ACC);
	}
}

/* rope.c's rope_divisors(): rope_freqs, Phi-3's long/short factors. */
static const float *divisors(const struct model *m, uint32_t n_ctx)
{
	if (m->w[ARCH_T_ROPE_FREQS].data)
		return m->w[ARCH_T_ROPE_FREQS].data;
	if (m->w[ARCH_T_ROPE_LONG].data)
		return n_ctx > m->hp.rope_orig_ctx ? m->w[ARCH_T_ROPE_LONG].data
						   : m->w[ARCH_T_ROPE_SHORT].data;
	return NULL;
}

/* rope.c's rope_fill(), in double: rows r0 .. r0+n-1 at positions pos0... */
static void fill_rope(const struct model_hparams *hp, float *table, uint32_t r0, uint32_t pos0,
		      uint32_t n, double base, double scale, const float *div, double mscale)
{
	const uint32_t half = hp->n_rot / 2;
	uint32_t t, i;

	for (t = 0; t < n; t++)
		for (i = 0; i < half; i++) {
			double freq = pow(base, -2.0 * i / hp->n_rot) * scale / (div ? div[i] : 1.0);
			double theta = (double)(pos0 + t) * freq;
			float *cs = table + ((size_t)(r0 + t) * half + i) * 2;

			cs[0] = (float)(cos(theta) * mscale);
			cs[1] = (float)(sin(theta) * mscale);
		}
}

/* Host inputs of the step; returns the rows that want logits (or hidden
 * states). */
static uint32_t inputs(struct vk_pass *p, const struct compute_seq *seqs,
		       struct vk_kv *const *kvs, uint32_t n_seq)
{
	const struct model_hparams *hp = &p->m->hp;
	uint32_t s, t, n = 0, rows = 0;

	p->body.n = p->head.n = 0;
	for (s = 0; s < n_seq; s++) {
		const struct compute_seq *sq = &seqs[s];
		const uint32_t r0 = rows, g = p->gemm_min;

		p->row0[s] = n;
		runs_add(&p->body, n, sq->n_tok, g && sq->n_tok >= g);
		for (t = 0; t < sq->n_tok; t++)
			p->tokens[n + t] = (uint32_t)sq->tokens[t];
		if (p->m->arch->rope != ARCH_ROPE_NONE) {
			fill_rope(hp, p->rope, n, kvs[s]->n_pos, sq->n_tok, hp->rope_base,
				  hp->rope_freq_scale, divisors(p->m, kvs[s]->n_ctx),
				  hp->rope_attn_factor);
			if (hp->has_rope_base_swa)
				fill_rope(hp, p->rope_swa, n, kvs[s]->n_pos, sq->n_tok,
					  hp->rope_base_swa, 1.0, NULL, 1.0);
		}
		if (sq->logits == COMPUTE_LOGITS_ALL || sq->logits == COMPUTE_HIDDEN_ALL)
			for (t = 0; t < sq->n_tok; t++)
				p->map[rows++] = n + t;
		else if (sq->logits == COMPUTE_LOGITS_LAST)
			p->map[rows++] = n + sq->n_tok - 1;
		runs_add(&p->head, r0, rows - r0, g && rows - r0 >= g);
		n += sq->n_tok;
	}
	return rows;
}

static int check(const struct vk_pass *p, const struct compute_seq *seqs,
		 struct vk_kv *const *kvs, uint32_t n_seq, char *err)
{
	uint64_t total = 0;
	uint32_t s, t, o;

	if (n_seq == 0)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: no sequences");
	for (s = 0; s < n_seq; s++) {
		const struct compute_seq *sq = &seqs[s];

		if (sq->n_tok == 0)
			return ember_seterr(err, EMBER_EINVAL, "vulkan: sequence %u has no tokens", s);
		if (kvs[s]->lost)
			return ember_seterr(err, EMBER_EINVAL, "vulkan: the sliding-window cache no "
					    "longer holds the keys before position %u (rewound past "
					    "its ring)", kvs[s]->n_pos);
		if (kvs[s]->ring_rows && sq->n_tok > kvs[s]->max_step)
			return ember_seterr(err, EMBER_EINVAL, "vulkan: %u tokens in one step exceed "
					    "the sliding-window cache's %u", sq->n_tok,
					    kvs[s]->max_step);
		if ((sq->logits == COMPUTE_HIDDEN_ALL) != (seqs[0].logits == COMPUTE_HIDDEN_ALL))
			return ember_seterr(err, EMBER_EINVAL, "vulkan: hidden states and logits in "
					    "one step");
		if (sq->n_tok > kvs[s]->n_ctx - kvs[s]->n_pos)
			return ember_seterr(err, EMBER_ECONTEXT, "vulkan: %u tokens after %u exceed "
					    "the context of %u", sq->n_tok, kvs[s]->n_pos,
					    kvs[s]->n_ctx);
		for (t = 0; t < sq->n_tok; t++)
			if (sq->tokens[t] < 0 || (uint32_t)sq->tokens[t] >= p->m->hp.n_vocab)
				return ember_seterr(err, EMBER_ERANGE, "vulkan: token id %d at %u is "
						    "outside the vocabulary of %u", sq->tokens[t], t,
						    p->m->hp.n_vocab);
		for (o = 0; o < s; o++)
			if (kvs[o] == kvs[s])
				return ember_seterr(err, EMBER_EINVAL, "vulkan: sequences %u and %u "
						    "share a cache", o, s);
		total += sq->n_tok;
	}
	if (total > p->B)
		return ember_seterr(err, EMBER_EINVAL, "vulkan: %llu tokens exceed the batch of %u",
				    (unsigned long long)total, p->B);
	return 0;
}

int vk_pass_run(struct vk_pass *p, const struct compute_seq *seqs, struct vk_kv *const *kvs,
		uint32_t n_seq, float *logits, char *err)
{
	struct vk_ctx *c = &vk__ctx;
	const struct model *m = p->m;
	const struct model_hparams *hp = &m->hp;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	uint32_t n = 0, rows, s, il, width, hidden;
	int rc;

	if ((rc = check(p, seqs, kvs, n_seq, err)) < 0)
		return rc;
	/* Embeddings: the output-normed rows are the answer (no head). */
	hidden = seqs[0].logits == COMPUTE_HIDDEN_ALL;
	width = hidden ? hp->n_embd : hp->n_vocab;
	rows = logits ? inputs(p, seqs, kvs, n_seq) : (inputs(p, seqs, kvs, n_seq), 0);
	for (s = 0; s < n_seq; s++)
		n += seqs[s].n_tok;
	if ((uint64_t)rows * width > p->out_floats) {
		vk_buf_free(&p->out);
		p->out_floats = 0;
		if ((rc = vk_buf_new(&p->out, (uint64_t)rows * width * 4, VK_MEM_HOST, err)) < 0)
			return rc;
		p->out_floats = (uint64_t)rows * width;
	}
	c->f.ResetCommandBuffer(p->cb, 0);
	c->f.BeginCommandBuffer(p->cb, &bi);
	{
		struct pc_embed pc = {W(p, ARCH_T_TOKEN_EMBD, 0), p->x, p->a_tokens,
				      m->w[ARCH_T_TOKEN_EMBD].type, hp->n_embd, n,
				      m->arch->embd_scale_sqrt ? (float)sqrt((double)hp->n_embd)
							       : 1.0f};

		int sh = vk_shader_embed(pc.type);

		/* the per-type embeds write a 32-element block per invocation */
		vk_dispatch_n(p->cb, (enum vk_shader)sh, &pc, sizeof(pc),
			      (uint64_t)n * hp->n_embd / (sh == VK_SH_EMBED ? 1 : 32));
		vk_barrier(p->cb);
	}
	for (il = 0; il < hp->n_layer; il++)
		block(p, seqs, kvs, n_seq, il, n);
	if (rows) {
		nrm(p, W(p, ARCH_T_OUTPUT_NORM, 0), W(p, ARCH_T_OUTPUT_NORM_B, 0), p->x,
		    hidden ? p->out.addr : p->xn, rows, hp->n_embd,
		    NORM_MAP | (m->arch->norm == ARCH_NORM_LAYER ? NORM_LAYER : 0));
	}
	if (rows && !hidden) {
		mm(p, ARCH_T_OUTPUT, ARCH_T_OUTPUT_B, 0, p->xn, p->out.addr, &p->head,
		   hp->final_softcap > 0.0f ? MM_CAP : 0, hp->final_softcap);
	}
	c->f.EndCommandBuffer(p->cb);
	if ((rc = vk_submit_wait(p->cb, p->fence, err)) < 0)
		return rc;
	if (rows)
		memcpy(logits, p->out.map, (size_t)rows * width * sizeof(float));
	for (s = 0; s < n_seq; s++)
		vk_kv_advance(kvs[s], seqs[s].n_tok);
	return 0;
}
