#version 450
// attention.comp - causal attention of one sequence's query rows against
// its cache layer, the CPU's blockwise online softmax (attention.c): one
// workgroup per (query head, query row); keys go by blocks of 64, one
// score per thread, then per block m' = max(m, max S), r = exp(m - m'),
// P = exp(S - m'), l = l r + sum P, out = out r + P V; at the end out / l.
// Query at position p sees keys lo .. p (lo = p + 1 - window for sliding
// layers, else 0). Scores: (q.k + ALiBi bias) * scale, then c tanh(s / c)
// when capped; the bias is slope_h * j (alibi 1) or, as HF Falcon rounds
// it, bf16(bf16(slope_h) * bf16(j)) (alibi 2; the slope comes rounded).
#include "common.glsl"

#define WG 64u
#define MAXD 512u
layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 q;
	F32 out_;
	U32 kc;
	U32 vc;
	F32 slopes;
	uint row0, pos0, heads, heads_kv, dk, dv, n_ctx, f16, window, alibi;
	float scale, cap;
	uint ring; // keys and values of position j in row j % n_ctx (a sliding-window ring)
} pc;

shared float qs[MAXD];
shared float p[WG];

float kv_at(U32 c, uint idx)
{
	if (pc.f16 != 0u) {
		vec2 two = unpackHalf2x16(c.v[idx >> 1]);
		return (idx & 1u) != 0u ? two.y : two.x;
	}
	return uintBitsToFloat(c.v[idx]);
}

// The cache row of position j (n_ctx is the rows per head).
uint row_of(uint j)
{
	return pc.ring != 0u ? j % pc.n_ctx : j;
}

// Round to bfloat16, nearest even (as kern_fp32_to_bf16).
float bf16r(float x)
{
	uint u = floatBitsToUint(x);
	u += 0x7fffu + ((u >> 16) & 1u);
	return uintBitsToFloat(u & 0xffff0000u);
}

void main()
{
	uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
	uint g = h / (pc.heads / pc.heads_kv);
	uint pos = pc.pos0 + t, end = pos + 1u;
	uint lo = pc.window != 0u && end > pc.window ? end - pc.window : 0u;
	uint qo = ((pc.row0 + t) * pc.heads + h) * pc.dk;
	uint kbase = g * pc.n_ctx * pc.dk, vbase = g * pc.n_ctx * pc.dv;
	float o[MAXD / WG];
	float m = -1.0 / 0.0, l = 0.0;

	for (uint i = tid; i < pc.dk; i += WG)
		qs[i] = pc.q.v[qo + i];
	for (uint c = 0u; c < MAXD / WG; c++)
		o[c] = 0.0;
	barrier();
	for (uint j0 = lo; j0 < end; j0 += WG) {
		uint nb = min(WG, end - j0);
		float s = -1.0 / 0.0;
		if (tid < nb) {
			uint ko = kbase + row_of(j0 + tid) * pc.dk;
			float d = 0.0;
			for (uint i = 0u; i < pc.dk; i++)
				d += qs[i] * kv_at(pc.kc, ko + i);
			float j = float(j0 + tid);
			if (pc.alibi == 1u)
				d += pc.slopes.v[h] * j;
			else if (pc.alibi == 2u)
				d += bf16r(pc.slopes.v[h] * bf16r(j));
			s = d * pc.scale;
			if (pc.cap > 0.0)
				s = pc.cap * tanh(s / pc.cap);
		}
		p[tid] = s;
		barrier();
		float mx = m;
		for (uint j = 0u; j < nb; j++)
			mx = max(mx, p[j]);
		float r = mx == m ? 1.0 : exp(m - mx);
		float sum = 0.0;
		for (uint j = 0u; j < nb; j++)
			sum += exp(p[j] - mx);
		l = l * r + sum;
		m = mx;
		for (uint c = 0u; c < MAXD / WG; c++) {
			uint col = tid + c * WG;
			if (col >= pc.dv)
				break;
			float acc = o[c] * r;
			for (uint j = 0u; j < nb; j++)
				acc += exp(p[j] - mx) * kv_at(pc.vc, vbase + row_of(j0 + j) * pc.dv + col);
			o[c] = acc;
		}
		barrier();
	}
	uint oo = ((pc.row0 + t) * pc.heads + h) * pc.dv;
	for (uint c = 0u; c < MAXD / WG; c++) {
		uint col = tid + c * WG;
		if (col < pc.dv)
			pc.out_.v[oo + col] = o[c] / l;
	}
}
