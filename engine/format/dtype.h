/*
 * dtype.h - tensor element types, numbered as in GGUF files (ggml's ids).
 *
 * A type stores `block` elements in `type_size` bytes; a row of n elements
 * (n a multiple of `block`) takes n / block * type_size bytes. The table
 * knows the sizes of every type a community GGUF file commonly holds, so the
 * reader can bounds-check any file; which types have kernels is the
 * kernels' business (kernels.h).
 *
 * Thread safety: pure functions over a constant table.
 */
#ifndef EMBER_DTYPE_H
#define EMBER_DTYPE_H

#include <stdint.h>

enum dtype {
	DTYPE_F32 = 0,
	DTYPE_F16 = 1,
	DTYPE_Q4_0 = 2,
	DTYPE_Q4_1 = 3,
	DTYPE_Q5_0 = 6,
	DTYPE_Q5_1 = 7,
	DTYPE_Q8_0 = 8,
	DTYPE_Q8_1 = 9,
	DTYPE_Q2_K = 10,
	DTYPE_Q3_K = 11,
	DTYPE_Q4_K = 12,
	DTYPE_Q5_K = 13,
	DTYPE_Q6_K = 14,
	DTYPE_Q8_K = 15,
	DTYPE_IQ4_NL = 20,
	DTYPE_IQ4_XS = 23,
	DTYPE_I8 = 24,
	DTYPE_I16 = 25,
	DTYPE_I32 = 26,
	DTYPE_I64 = 27,
	DTYPE_F64 = 28,
	DTYPE_BF16 = 30,
	DTYPE_COUNT = 31, /* ids are < DTYPE_COUNT */
};

/* Returns 1 if `t` is a type id with a known layout, else 0. */
int dtype_valid(uint32_t t);

/* Elements per block (1 for plain types); 0 for an unknown id. */
uint32_t dtype_block(uint32_t t);

/* Bytes per block; 0 for an unknown id. */
uint32_t dtype_type_size(uint32_t t);

/* Short name as llama.cpp prints it ("f32", "q4_0", "bf16"); "?" if unknown. */
const char *dtype_name(uint32_t t);

/* Parses a name as dtype_name() prints it (case-insensitive). Returns the
 * id, or -1. */
int dtype_from_name(const char *name);

/* Bytes of a row of `n` elements, or 0 if `t` is unknown or `n` is not a
 * multiple of the block size. */
uint64_t dtype_row_size(uint32_t t, uint64_t n);

#endif
