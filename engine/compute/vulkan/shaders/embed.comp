#version 450
// embed.comp - x[t][i] = token_embd[tokens[t]][i] * scale, dequantized
// from the weight's own type (Gemma scales by sqrt(n_embd)). One invocation
// per element; compiled per block type (QTYPE, common.glsl), one per 32
// elements (the dispatch is n * dim / 32 then).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	U32 w;
	F32 x;
	U32 tokens;
	uint type, dim, n;
	float scale;
} pc;

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
#ifdef QTYPE
	uint nb = pc.dim / 32u;
	if (g >= pc.n * nb)
		return;
	uint t = g / nb, b = g % nb;
	float v[32];
	deq_q(pc.w, pc.tokens.v[t] * row_bytes(QTYPE, pc.dim), b, v);
	for (uint j = 0u; j < 32u; j++)
		pc.x.v[t * pc.dim + b * 32u + j] = v[j] * pc.scale;
#else
	if (g >= pc.n * pc.dim)
		return;
	uint t = g / pc.dim, i = g % pc.dim;
	uint row = pc.tokens.v[t] * row_bytes(pc.type, pc.dim);
	pc.x.v[g] = deq_elem(pc.w, pc.type, row, i) * pc.scale;
#endif
}
