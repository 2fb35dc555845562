#version 450
// act.comp - the MLP's activation over n elements: up = act(gate) * up
// (gated) or up = act(up). act: 0 SiLU, 1 GELU (tanh), 2 GELU (erf).
#include "common.glsl"

layout(local_size_x = 64) in;

layout(push_constant, scalar) uniform PC {
	F32 gate;
	F32 up;
	uint n, act, gated;
} pc;

// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit).
float erf_(float x)
{
	float z = abs(x), t = 1.0 / (1.0 + 0.5 * z);
	float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 +
		  t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 +
		  t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
	return x >= 0.0 ? 1.0 - r : r - 1.0;
}

float act(float x)
{
	if (pc.act == 0u)
		return x / (1.0 + exp(-x));
	if (pc.act == 1u) {
		float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
		// tanh without overflow for large |u|
		float e = exp(-2.0 * abs(u)), th = (1.0 - e) / (1.0 + e);
		return 0.5 * x * (1.0 + (u < 0.0 ? -th : th));
	}
	return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476));
}

void main()
{
	uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * 65536u;
	if (g >= pc.n)
		return;
	if (pc.gated != 0u)
		pc.up.v[g] = act(pc.gate.v[g]) * pc.up.v[g];
	else
		pc.up.v[g] = act(pc.up.v[g]);
}
