#version 450
// norm.comp - out[r] = norm(x[src(r)]) * gain (+ bias): RMSNorm, or
// LayerNorm when flags & 1. One workgroup per row; src(r) = map[r] when
// flags & 4 (the head's rows that want logits), else r. Rows past
// 32768 come in the y dimension (workgroup counts are limited). Strides in floats
// let it normalise heads in place (Qwen3's q/k norms).
#include "common.glsl"

#define WG 128u
layout(local_size_x = 128) in;

layout(push_constant, scalar) uniform PC {
	F32 x;
	F32 out_;
	F32 gain;
	F32 bias;
	U32 map;
	uint dim, stride_in, stride_out, flags;
	float eps;
	uint rows;
} pc;

shared float red[WG];

float sum_all(float v)
{
	uint tid = gl_LocalInvocationID.x;
	red[tid] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (tid < s)
			red[tid] += red[tid + s];
		barrier();
	}
	float r = red[0];
	barrier();
	return r;
}

void main()
{
	uint r = gl_WorkGroupID.x + gl_WorkGroupID.y * 32768u, tid = gl_LocalInvocationID.x;
	if (r >= pc.rows)
		return; /* the whole workgroup: no barrier is left waiting */
	uint src = (pc.flags & 4u) != 0u ? pc.map.v[r] : r;
	uint xi = src * pc.stride_in, oi = r * pc.stride_out;
	float mean = 0.0;
	if ((pc.flags & 1u) != 0u) {
		float s = 0.0;
		for (uint i = tid; i < pc.dim; i += WG)
			s += pc.x.v[xi + i];
		mean = sum_all(s) / float(pc.dim);
	}
	float s = 0.0;
	for (uint i = tid; i < pc.dim; i += WG) {
		float d = pc.x.v[xi + i] - mean;
		s += d * d;
	}
	float scale = inversesqrt(sum_all(s) / float(pc.dim) + pc.eps);
	for (uint i = tid; i < pc.dim; i += WG) {
		float y = (pc.x.v[xi + i] - mean) * scale * pc.gain.v[i];
		if ((pc.flags & 2u) != 0u)
			y += pc.bias.v[i];
		pc.out_.v[oi + i] = y;
	}
}
