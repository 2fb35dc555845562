#version 450
// copy.comp - dst[r][i] = src[r][off + i] for n rows of `width` floats:
// splits a fused projection's rows ([q | k | v], Phi-3's [gate | up]).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 src;
	F32 dst;
	uint n, width, src_stride, off;
} pc;

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
	if (g >= pc.n * pc.width)
		return;
	uint r = g / pc.width, i = g % pc.width;
	pc.dst.v[g] = pc.src.v[r * pc.src_stride + pc.off + i];
}
