#version 450
// kv_store.comp - copies one sequence's new keys and values (rows r0 ..
// r0+n-1 of k[rows][heads][dk] and v[rows][heads][dv]) into its cache
// layer at positions pos0 .. pos0+n-1. Cache layout per layer:
// [head][n_ctx][d], F32, or F16 packed two to a word (d is even).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 k;
	F32 v;
	U32 kc;
	U32 vc;
	uint r0, pos0, n, heads, dk, dv, n_ctx, f16;
	uint ring; // position p in row p % n_ctx (a sliding-window ring)
} pc;

void put(U32 c, F32 src, uint d, uint g)
{
	// g: (t, h, pair) with pair < d/2 (F16) or element < d (F32)
	uint per = pc.f16 != 0u ? d / 2u : d;
	uint e = g % per, th = g / per, h = th % pc.heads, t = th / pc.heads;
	uint s = ((pc.r0 + t) * pc.heads + h) * d;
	uint row = pc.ring != 0u ? (pc.pos0 + t) % pc.n_ctx : pc.pos0 + t;
	uint dst = (h * pc.n_ctx + row) * d;
	if (pc.f16 != 0u)
		c.v[dst / 2u + e] = packHalf2x16(vec2(src.v[s + 2u * e], src.v[s + 2u * e + 1u]));
	else
		c.v[dst + e] = floatBitsToUint(src.v[s + e]);
}

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
	uint div = pc.f16 != 0u ? 2u : 1u;
	uint nk = pc.n * pc.heads * pc.dk / div, nv = pc.n * pc.heads * pc.dv / div;
	if (g < nk)
		put(pc.kc, pc.k, pc.dk, g);
	else if (g < nk + nv)
		put(pc.vc, pc.v, pc.dv, g - nk);
}
