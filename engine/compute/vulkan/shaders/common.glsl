// common.glsl - what every Ember compute shader shares: buffers reached by
// device address (VK_KHR_buffer_device_address, core in Vulkan 1.2), so no
// descriptor sets exist and every argument is a push constant; and the
// weight formats read in place, as GGUF stores them (dtype.h numbering).
// Quantized blocks start at 2-byte offsets (Q8_0 is 34 bytes, Q4_0 18), so
// weights are read as 32-bit words and 16-bit halves are picked out.
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
	if (t == T_F32)
		return n * 4u;
	if (t == T_F16 || t == T_BF16)
		return n * 2u;
	if (t == T_Q8_0)
		return n / 32u * 34u;
	return n / 32u * 18u; // Q4_0
}

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
}
