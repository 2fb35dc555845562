#version 450
// gemm.comp - the prefill GEMM: y[t][o] = sum_i W[o][i] x[t][i] (+ b[o]),
// the same push constants and flags as matmul.comp (1 bias, 2 accumulate,
// 4 soft-cap), for sequences of many tokens (vk_pass.c picks it).
//
// One workgroup computes a tile of BM rows x BN tokens. The reduction runs
// one 32-element block at a time: each thread dequantizes one row's block
// (deq_block: the shared types, or this copy's QTYPE) into shared memory,
// the threads load the tile's activations for that block beside it, and
// every thread then updates its 4 rows x 8 tokens from shared memory. So a
// weight is dequantized once per BN tokens (matmul.comp: once per 8) and
// an activation read once per BM rows.
//
// Why the arithmetic is fixed per output: each y[t][o] is summed block by
// block (each block's 32 products apart), in the same order whatever tile or neighbours
// it has, so a token's result does not depend on the step's other tokens
// (vk_pass.c relies on it: a sequence gives the same logits batched or
// alone).
#include "common.glsl"

#define BM 64u
#define BN 32u
#define BK 32u
layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	U32 w;
	F32 x;
	F32 y;
	F32 bias;
	uint type, n_in, n_out, n_tok, flags;
	float cap;
} pc;

// +1: rows of the tiles fall in different banks
shared float ws[BM][BK + 1u];
shared float xs[BN][BK + 1u];

void main()
{
	const uint o0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
	const uint tid = gl_LocalInvocationID.x, tr = tid % 16u, tc = tid / 16u;
	const uint nb = (pc.n_in + BK - 1u) / BK;
	const uint mine = o0 + tid, rb = row_bytes(pc.type, pc.n_in);
	float acc[4][8];

	for (uint i = 0u; i < 4u; i++)
		for (uint j = 0u; j < 8u; j++)
			acc[i][j] = 0.0;
	for (uint b = 0u; b < nb; b++) {
		// the prologue: row o0 + tid's block b, dequantized once
		float v[32];
		if (mine < pc.n_out) {
			deq_block(pc.w, pc.type, mine * rb, b, pc.n_in, v);
		} else {
			for (uint j = 0u; j < 32u; j++)
				v[j] = 0.0;
		}
		for (uint j = 0u; j < BK; j++)
			ws[tid][j] = v[j];
		// the activations: BN tokens x BK elements, 16 per thread
		for (uint k = 0u; k < BN * BK / 64u; k++) {
			uint e = tid + 64u * k, t = e / BK, j = e % BK, i = b * BK + j;
			xs[t][j] = t0 + t < pc.n_tok && i < pc.n_in ? pc.x.v[(t0 + t) * pc.n_in + i]
								    : 0.0;
		}
		barrier();
		// the block's products summed apart, then added: rounding grows
		// with 32 + n_in / 32 terms, not n_in (as matmul.comp does)
		float part[4][8];
		for (uint i = 0u; i < 4u; i++)
			for (uint k = 0u; k < 8u; k++)
				part[i][k] = 0.0;
		for (uint j = 0u; j < BK; j++) {
			float a[4];
			for (uint i = 0u; i < 4u; i++)
				a[i] = ws[tr + 16u * i][j];
			for (uint k = 0u; k < 8u; k++) {
				float xv = xs[tc + 4u * k][j];
				for (uint i = 0u; i < 4u; i++)
					part[i][k] += a[i] * xv;
			}
		}
		for (uint i = 0u; i < 4u; i++)
			for (uint k = 0u; k < 8u; k++)
				acc[i][k] += part[i][k];
		barrier();
	}
	for (uint i = 0u; i < 4u; i++) {
		uint o = o0 + tr + 16u * i;
		if (o >= pc.n_out)
			continue;
		for (uint k = 0u; k < 8u; k++) {
			uint t = t0 + tc + 4u * k;
			if (t >= pc.n_tok)
				continue;
			float r = acc[i][k];
			uint yo = t * pc.n_out + o;
			if ((pc.flags & 1u) != 0u)
				r += pc.bias.v[o];
			if ((pc.flags & 4u) != 0u)
				r = pc.cap * tanh(r / pc.cap);
			if ((pc.flags & 2u) != 0u)
				r += pc.y.v[yo];
			pc.y.v[yo] = r;
		}
	}
}
