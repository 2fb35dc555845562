#version 450
// rope.comp - rotates the first n_rot dims of every head of x[n][heads][hd]
// by the step's cos/sin table [n][n_rot/2][2] (filled on the host in
// double, with the model's scaling, as the CPU does): NORM pairs
// (x[2i], x[2i+1]), NEOX pairs (x[i], x[i + n_rot/2]).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 x;
	F32 table;
	uint n, heads, hd, half_, neox;
} pc;

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
	if (g >= pc.n * pc.heads * pc.half_)
		return;
	uint i = g % pc.half_, th = g / pc.half_, t = th / pc.heads;
	uint base = th * pc.hd;
	uint a = base + (pc.neox != 0u ? i : 2u * i);
	uint b = base + (pc.neox != 0u ? i + pc.half_ : 2u * i + 1u);
	float c = pc.table.v[(t * pc.half_ + i) * 2u], s = pc.table.v[(t * pc.half_ + i) * 2u + 1u];
	float x0 = pc.x.v[a], x1 = pc.x.v[b];
	pc.x.v[a] = x0 * c - x1 * s;
	pc.x.v[b] = x0 * s + x1 * c;
}
