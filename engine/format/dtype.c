/* dtype.c - the element type table (see dtype.h). */
#include "dtype.h"

#include <strings.h>

struct dtype_info {
	const char *name;
	uint32_t block;
	uint32_t type_size;
};

/* Sizes from the GGUF/ggml block definitions: e.g. Q8_0 is one f16 scale
 * plus 32 int8 (34 bytes), Q4_0 one f16 scale plus 16 bytes of nibbles. */
static const struct dtype_info dtype__table[DTYPE_COUNT] = {
	[DTYPE_F32] = {"f32", 1, 4},
	[DTYPE_F16] = {"f16", 1, 2},
	[DTYPE_Q4_0] = {"q4_0", 32, 18},
	[DTYPE_Q4_1] = {"q4_1", 32, 20},
	[DTYPE_Q5_0] = {"q5_0", 32, 22},
	[DTYPE_Q5_1] = {"q5_1", 32, 24},
	[DTYPE_Q8_0] = {"q8_0", 32, 34},
	[DTYPE_Q8_1] = {"q8_1", 32, 36},
	[DTYPE_Q2_K] = {"q2_k", 256, 84},
	[DTYPE_Q3_K] = {"q3_k", 256, 110},
	[DTYPE_Q4_K] = {"q4_k", 256, 144},
	[DTYPE_Q5_K] = {"q5_k", 256, 176},
	[DTYPE_Q6_K] = {"q6_k", 256, 210},
	[DTYPE_Q8_K] = {"q8_k", 256, 292},
	[DTYPE_IQ4_NL] = {"iq4_nl", 32, 18},
	[DTYPE_IQ4_XS] = {"iq4_xs", 256, 136},
	[DTYPE_I8] = {"i8", 1, 1},
	[DTYPE_I16] = {"i16", 1, 2},
	[DTYPE_I32] = {"i32", 1, 4},
	[DTYPE_I64] = {"i64", 1, 8},
	[DTYPE_F64] = {"f64", 1, 8},
	[DTYPE_BF16] = {"bf16", 1, 2},
};

int dtype_valid(uint32_t t)
{
	return t < DTYPE_COUNT && dtype__table[t].block != 0;
}

uint32_t dtype_block(uint32_t t)
{
	return dtype_valid(t) ? dtype__table[t].block : 0;
}

uint32_t dtype_type_size(uint32_t t)
{
	return dtype_valid(t) ? dtype__table[t].type_size : 0;
}

const char *dtype_name(uint32_t t)
{
	return dtype_valid(t) ? dtype__table[t].name : "?";
}

int dtype_from_name(const char *name)
{
	int t;

	for (t = 0; t < DTYPE_COUNT; t++)
		if (dtype__table[t].name && strcasecmp(name, dtype__table[t].name) == 0)
			return t;
	return -1;
}

uint64_t dtype_row_size(uint32_t t, uint64_t n)
{
	if (!dtype_valid(t) || n % dtype__table[t].block != 0)
		return 0;
	return n / dtype__table[t].block * dtype__table[t].type_size;
}
