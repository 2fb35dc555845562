// common.glsl - what every Ember compute shader shares: buffers reached by
// device address (VK_KHR_buffer_device_address, core in Vulkan 1.2), so no
// descriptor sets exist and every argument is a push constant; and the
// weight formats read in place, as GGUF stores them (dtype.h numbering).
// Quantized blocks start at 2-byte offsets (Q8_0 is 34 bytes, Q4_0 18), so
// weights are read as 32-bit words and 16-bit halves are picked out.
//
// F32/F16/BF16/Q8_0/Q4_0 are read by one shader that switches on the type
// at run time. Every other type (QTYPE, its dtype.h number) is compiled
// into its own copy of the shader (glslc -DQTYPE=n, Makefile): one shader
// holding all of them takes llvmpipe minutes to compile, and a model needs
// only its own types' pipelines (created on first use, vk_device.c).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_scalar_block_layout : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v[]; };

// dtype.h values (GGUF's ggml_type numbering).
#define T_F32 0u
#define T_F16 1u
#define T_Q4_0 2u
#define T_Q8_0 8u
#define T_BF16 30u
#define T_Q4_1 3u
#define T_Q5_0 6u
#define T_Q5_1 7u
#define T_Q2_K 10u
#define T_Q3_K 11u
#define T_Q4_K 12u
#define T_Q5_K 13u
#define T_Q6_K 14u
#define T_IQ4_NL 20u
#define T_IQ4_XS 23u

uint rd16(U32 b, uint off)
{
	uint w = b.v[off >> 2];
	return (off & 2u) != 0u ? w >> 16 : w & 0xffffu;
}

uint rd8(U32 b, uint off)
{
	return (b.v[off >> 2] >> ((off & 3u) * 8u)) & 0xffu;
}

float f16(uint h)
{
	return unpackHalf2x16(h).x;
}

int s8(uint b)
{
	return int(b << 24) >> 24;
}

// Bytes of one row of n elements of type t.
uint row_bytes(uint t, uint n)
{
	switch (t) {
	case T_F32: return n * 4u;
	case T_F16: case T_BF16: return n * 2u;
	case T_Q4_0: case T_IQ4_NL: return n / 32u * 18u;
	case T_Q4_1: return n / 32u * 20u;
	case T_Q5_0: return n / 32u * 22u;
	case T_Q5_1: return n / 32u * 24u;
	case T_Q8_0: return n / 32u * 34u;
	case T_Q2_K: return n / 256u * 84u;
	case T_Q3_K: return n / 256u * 110u;
	case T_Q4_K: return n / 256u * 144u;
	case T_Q5_K: return n / 256u * 176u;
	case T_Q6_K: return n / 256u * 210u;
	default: return n / 256u * 136u; // IQ4_XS
	}
}

#ifdef QTYPE
#if QTYPE == 20 || QTYPE == 23
// The 16 IQ4_NL / IQ4_XS levels (the format's definition).
const float iq4nl[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
				  1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
#endif

// Elements 32b .. 32b+31 of the row starting at byte `row`, with the CPU
// reference's arithmetic per element (quants_ref.c, ggml's order); the
// block layouts are quants.h's. 256-element types: block b is sub-block
// b % 8 of super-block b / 8.
void deq_q(U32 w, uint row, uint b, out float v[32])
{
#if QTYPE == 3 // Q4_1: d, m, 16 bytes of nibbles
	uint o = row + b * 20u;
	float d = f16(rd16(w, o)), m = f16(rd16(w, o + 2u));
	for (uint j = 0u; j < 16u; j++) {
		uint q = rd8(w, o + 4u + j);
		v[j] = float(q & 15u) * d + m;
		v[j + 16u] = float(q >> 4) * d + m;
	}
#elif QTYPE == 6 || QTYPE == 7 // Q5_0: d, qh[4], qs; Q5_1: d, m, qh[4], qs
	uint o = row + b * (QTYPE == 6 ? 22u : 24u);
	uint hq = QTYPE == 6 ? o + 2u : o + 4u;
	float d = f16(rd16(w, o)), m = QTYPE == 7 ? f16(rd16(w, o + 2u)) : 0.0;
	uint qh = rd16(w, hq) | (rd16(w, hq + 2u) << 16);
	for (uint j = 0u; j < 16u; j++) {
		uint q = rd8(w, hq + 4u + j);
		uint a = (q & 15u) | (((qh >> j) & 1u) << 4);
		uint c = (q >> 4) | (((qh >> (j + 16u)) & 1u) << 4);
#if QTYPE == 6
		v[j] = float(int(a) - 16) * d;
		v[j + 16u] = float(int(c) - 16) * d;
#else
		v[j] = float(a) * d + m;
		v[j + 16u] = float(c) * d + m;
#endif
	}
#elif QTYPE == 20 // IQ4_NL: Q4_0's layout, nibbles index the levels
	uint o = row + b * 18u;
	float d = f16(rd16(w, o));
	for (uint j = 0u; j < 16u; j++) {
		uint q = rd8(w, o + 2u + j);
		v[j] = d * iq4nl[q & 15u];
		v[j + 16u] = d * iq4nl[q >> 4];
	}
#elif QTYPE == 10 || QTYPE == 11 // Q2_K: scales[16] qs[64] d dmin; Q3_K: hmask[32] qs[64] scales[12] d
	uint o = row + (b / 8u) * (QTYPE == 10 ? 84u : 110u);
	float d = f16(rd16(w, o + (QTYPE == 10 ? 80u : 108u)));
	uint qs = o + (QTYPE == 10 ? 16u : 32u);
	// 2-bit field of element e: byte 32(e / 128) + 16((e % 32) / 16) + e % 16,
	// bits 2((e % 128) / 32); sub-blocks of 16, two per 32-block.
	for (uint h = 0u; h < 2u; h++) {
		uint e0 = (b % 8u) * 32u + 16u * h, j = e0 / 16u;
		uint at = qs + 32u * (e0 / 128u) + 16u * ((e0 % 32u) / 16u);
		uint sh = 2u * ((e0 % 128u) / 32u);
#if QTYPE == 10
		uint sc = rd8(w, o + j);
		float dl = d * float(sc & 15u), ml = f16(rd16(w, o + 82u)) * float(sc >> 4);
		for (uint l = 0u; l < 16u; l++)
			v[16u * h + l] = dl * float((rd8(w, at + l) >> sh) & 3u) - ml;
#else
		uint s = o + 96u;
		uint lo = j < 8u ? rd8(w, s + j) & 15u : rd8(w, s + j - 8u) >> 4;
		uint hi = (rd8(w, s + 8u + (j & 3u)) >> (2u * (j >> 2))) & 3u;
		float dl = d * float(int(lo | (hi << 4)) - 32);
		uint hb = e0 / 32u, hm = (e0 % 32u);
		for (uint l = 0u; l < 16u; l++) {
			uint q = (rd8(w, at + l) >> sh) & 3u;
			uint hbit = (rd8(w, o + hm + l) >> hb) & 1u;
			v[16u * h + l] = dl * float(int(q) - (hbit != 0u ? 0 : 4));
		}
#endif
	}
#elif QTYPE == 12 || QTYPE == 13 // Q4_K: d dmin scales[12] qs[128]; Q5_K: + qh[32] before qs
	uint o = row + (b / 8u) * (QTYPE == 12 ? 144u : 176u), j8 = b % 8u;
	uint qs = o + (QTYPE == 12 ? 16u : 48u) + 32u * (j8 / 2u), s = o + 4u;
	float sc, m;
	if (j8 < 4u) {
		sc = float(rd8(w, s + j8) & 63u);
		m = float(rd8(w, s + j8 + 4u) & 63u);
	} else {
		sc = float((rd8(w, s + j8 + 4u) & 15u) | ((rd8(w, s + j8 - 4u) >> 6) << 4));
		m = float((rd8(w, s + j8 + 4u) >> 4) | ((rd8(w, s + j8) >> 6) << 4));
	}
	float d1 = f16(rd16(w, o)) * sc, m1 = f16(rd16(w, o + 2u)) * m;
	uint sh = 4u * (j8 % 2u);
	for (uint l = 0u; l < 32u; l++) {
		uint q = (rd8(w, qs + l) >> sh) & 15u;
#if QTYPE == 13
		q += ((rd8(w, o + 16u + l) >> j8) & 1u) * 16u;
#endif
		v[l] = d1 * float(q) - m1;
	}
#elif QTYPE == 14 // Q6_K: ql[128] qh[64] scales[16] (int8) d
	uint o = row + (b / 8u) * 210u, e0 = (b % 8u) * 32u;
	uint n = e0 / 128u, k = (e0 % 128u) / 32u;
	uint ql = o + 64u * n + 32u * (k & 1u), qh = o + 128u + 32u * n;
	uint lsh = k < 2u ? 0u : 4u, hsh = 2u * k;
	float d = f16(rd16(w, o + 208u));
	for (uint h = 0u; h < 2u; h++) {
		float dl = d * float(s8(rd8(w, o + 192u + e0 / 16u + h)));
		for (uint l = 16u * h; l < 16u * h + 16u; l++) {
			uint q = ((rd8(w, ql + l) >> lsh) & 15u) | (((rd8(w, qh + l) >> hsh) & 3u) << 4);
			v[l] = dl * float(int(q) - 32);
		}
	}
#elif QTYPE == 23 // IQ4_XS: d scales_h scales_l[4] qs[128]
	uint o = row + (b / 8u) * 136u, j8 = b % 8u;
	uint lo = (rd8(w, o + 4u + j8 / 2u) >> (4u * (j8 % 2u))) & 15u;
	uint hi = (rd16(w, o + 2u) >> (2u * j8)) & 3u;
	float dl = f16(rd16(w, o)) * float(int(lo | (hi << 4)) - 32);
	for (uint j = 0u; j < 16u; j++) {
		uint q = rd8(w, o + 8u + 16u * j8 + j);
		v[j] = dl * iq4nl[q & 15u];
		v[j + 16u] = dl * iq4nl[q >> 4];
	}
#else
#error "QTYPE: no dequantization for this type"
#endif
}
#endif

// Element i of the row starting at byte `row`.
float deq_elem(U32 w, uint t, uint row, uint i)
{
	if (t == T_F32)
		return uintBitsToFloat(w.v[(row >> 2) + i]);
	if (t == T_F16)
		return f16(rd16(w, row + 2u * i));
	if (t == T_BF16)
		return uintBitsToFloat(rd16(w, row + 2u * i) << 16);
	uint b = i / 32u, j = i % 32u;
	if (t == T_Q8_0) {
		uint o = row + b * 34u;
		return f16(rd16(w, o)) * float(s8(rd8(w, o + 2u + j)));
	}
	uint o = row + b * 18u;
	uint q = rd8(w, o + 2u + (j & 15u));
	return f16(rd16(w, o)) * float(int(j < 16u ? q & 15u : q >> 4) - 8);
}

// Elements 32b .. 32b+31 of a row into v (past n: 0; only float types
// have rows that are not whole blocks).
void deq_block(U32 w, uint t, uint row, uint b, uint n, out float v[32])
{
#ifdef QTYPE
	deq_q(w, row, b, v);
#else
	if (t == T_Q8_0) {
		uint o = row + b * 34u;
		float d = f16(rd16(w, o));
		for (uint j = 0u; j < 16u; j++) {
			uint u = rd16(w, o + 2u + 2u * j);
			v[2u * j] = d * float(s8(u & 0xffu));
			v[2u * j + 1u] = d * float(s8(u >> 8));
		}
		return;
	}
	if (t == T_Q4_0) {
		uint o = row + b * 18u;
		float d = f16(rd16(w, o));
		for (uint j = 0u; j < 8u; j++) {
			uint u = rd16(w, o + 2u + 2u * j);
			v[2u * j] = d * float(int(u & 15u) - 8);
			v[2u * j + 16u] = d * float(int((u >> 4) & 15u) - 8);
			v[2u * j + 1u] = d * float(int((u >> 8) & 15u) - 8);
			v[2u * j + 17u] = d * float(int(u >> 12) - 8);
		}
		return;
	}
	for (uint j = 0u; j < 32u; j++) {
		uint i = b * 32u + j;
		v[j] = i < n ? deq_elem(w, t, row, i) : 0.0;
	}
#endif
}
