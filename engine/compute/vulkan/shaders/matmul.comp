#version 450
// matmul.comp - y[t][o] = sum_i W[o][i] x[t][i] (+ b[o]) for up to TN
// tokens per workgroup: one workgroup per output row and token tile, each
// thread dequantizing its share of the row's blocks once and using them
// for every token of the tile (decode: a GEMV; prefill: W read n/TN times).
// flags: 1 bias, 2 accumulate into y (residual add), 4 soft-cap c tanh(y/c).
#include "common.glsl"

#define WG 64u
#define TN 8u
layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	U32 w;
	F32 x;
	F32 y;
	F32 bias;
	uint type, n_in, n_out, n_tok, flags;
	float cap;
} pc;

shared float red[TN * WG];

void main()
{
	uint o = gl_WorkGroupID.x + gl_WorkGroupID.z * 32768u;
	uint t0 = gl_WorkGroupID.y * TN, tid = gl_LocalInvocationID.x;
	if (o >= pc.n_out)
		return;
	uint nt = min(TN, pc.n_tok - t0);
	uint row = o * row_bytes(pc.type, pc.n_in);
	uint nb = (pc.n_in + 31u) / 32u;
	float acc[TN];
	for (uint t = 0u; t < TN; t++)
		acc[t] = 0.0;
	for (uint b = tid; b < nb; b += WG) {
		float v[32];
		deq_block(pc.w, pc.type, row, b, pc.n_in, v);
		uint n = min(32u, pc.n_in - b * 32u);
		for (uint t = 0u; t < nt; t++) {
			uint xo = (t0 + t) * pc.n_in + b * 32u;
			float s = 0.0;
			for (uint j = 0u; j < n; j++)
				s += v[j] * pc.x.v[xo + j];
			acc[t] += s;
		}
	}
	for (uint t = 0u; t < TN; t++)
		red[t * WG + tid] = acc[t];
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			for (uint t = 0u; t < TN; t++)
				red[t * WG + tid] += red[t * WG + tid + s];
		barrier();
	}
	if (tid < nt) {
		float r = red[tid * WG];
		uint yo = (t0 + tid) * pc.n_out + o;
		if ((pc.flags & 1u) != 0u)
			r += pc.bias.v[o];
		if ((pc.flags & 4u) != 0u)
			r = pc.cap * tanh(r / pc.cap);
		if ((pc.flags & 2u) != 0u)
			r += pc.y.v[yo];
		pc.y.v[yo] = r;
	}
}
