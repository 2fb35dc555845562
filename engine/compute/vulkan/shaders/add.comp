#version 450
// add.comp - x[i] += y[i] over n elements (residual adds that follow a
// post-norm; the others are folded into matmul's accumulate flag).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 x;
	F32 y;
	uint n;
} pc;

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
	if (g < pc.n)
		pc.x.v[g] += pc.y.v[g];
}
