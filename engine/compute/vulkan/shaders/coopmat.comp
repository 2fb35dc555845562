#version 450
// coopmat.comp - gemm.comp on tensor cores: the same tiles (64 rows x 32
// tokens, one 32-element block at a time, each row's block dequantized once
// by one thread into shared memory), multiplied by cooperative matrices.
// Opt-in (EMBER_VK_COOPMAT=1) and only where the device has
// VK_NV_cooperative_matrix with 16x16x16 f16 x f16 -> f32 in subgroups of
// 32 (vk_device.c); never measured: no device here runs it (lavapipe has no
// cooperative matrix), so a self-check against gemm.comp on random data
// runs before a model uses it (vk_model.c).
//
// Why NV: Debian 12's glslc (shaderc 2023.2, glslang 11.13) refuses
// GL_KHR_cooperative_matrix ("extension not supported"); GL_NV compiles.
// Operands are rounded to f16 (weights and activations), products summed
// in f32: about 1e-3 relative, not gemm.comp's 1e-6.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#include "common.glsl"

#define BM 64u
#define BN 32u
#define BK 32u
#define LD 40u  // f16 row stride of the tiles: 80 bytes, a multiple of 16
#define LC 36u  // f32 row stride of the result tile
layout(local_size_x = 128) in; // 4 subgroups of 32: 16 rows each

layout(push_constant, scalar) uniform PC {
	U32 w;
	F32 x;
	F32 y;
	F32 bias;
	uint type, n_in, n_out, n_tok, flags;
	float cap;
} pc;

shared float16_t ws[BM * LD]; // [row][k]
shared float16_t xs[BN * LD]; // [token][k]
shared float cs[BM * LC];     // [row][token]

void main()
{
	const uint o0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
	const uint tid = gl_LocalInvocationID.x, sg = tid / 32u;
	const uint nb = (pc.n_in + BK - 1u) / BK, rb = row_bytes(pc.type, pc.n_in);
	fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c0 = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
	fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> c1 = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

	for (uint b = 0u; b < nb; b++) {
		if (tid < BM) { // threads 0..63: row o0 + tid's block b
			float v[32];
			uint o = o0 + tid;
			if (o < pc.n_out) {
				deq_block(pc.w, pc.type, o * rb, b, pc.n_in, v);
			} else {
				for (uint j = 0u; j < 32u; j++)
					v[j] = 0.0;
			}
			for (uint j = 0u; j < BK; j++)
				ws[tid * LD + j] = float16_t(v[j]);
		} else { // threads 64..127: the tokens' activations, 16 each
			for (uint k = 0u; k < BN * BK / 64u; k++) {
				uint e = tid - 64u + 64u * k, t = e / BK, j = e % BK, i = b * BK + j;
				float xv = t0 + t < pc.n_tok && i < pc.n_in
						   ? pc.x.v[(t0 + t) * pc.n_in + i] : 0.0;
				xs[t * LD + j] = float16_t(xv);
			}
		}
		barrier();
		for (uint k = 0u; k < BK; k += 16u) {
			fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> a, x0, x1;
			coopMatLoadNV(a, ws, sg * 16u * LD + k, LD, false);
			// B[k][n] = x[token n][k]: the token-major tile read column-major
			coopMatLoadNV(x0, xs, k, LD, true);
			coopMatLoadNV(x1, xs, 16u * LD + k, LD, true);
			c0 = coopMatMulAddNV(a, x0, c0);
			c1 = coopMatMulAddNV(a, x1, c1);
		}
		barrier();
	}
	coopMatStoreNV(c0, cs, sg * 16u * LC, LC, false);
	coopMatStoreNV(c1, cs, sg * 16u * LC + 16u, LC, false);
	barrier();
	for (uint e = tid; e < BM * BN; e += 128u) {
		uint r = e % BM, t = e / BM, o = o0 + r, tok = t0 + t;
		if (o >= pc.n_out || tok >= pc.n_tok)
			continue;
		float s = cs[r * LC + t];
		uint yo = tok * pc.n_out + o;
		if ((pc.flags & 1u) != 0u)
			s += pc.bias.v[o];
		if ((pc.flags & 4u) != 0u)
			s = pc.cap * tanh(s / pc.cap);
		if ((pc.flags & 2u) != 0u)
			s += pc.y.v[yo];
		pc.y.v[yo] = s;
	}
}
