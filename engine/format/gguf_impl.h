/*
 * gguf_impl.h - what the GGUF reader's two files share: the parser
 * (gguf.c: gguf_open, validation, the tensor name index) and the lookups
 * over a parsed file (gguf_lookup.c). Not a public header.
 *
 * Pure functions over bytes already bounds-checked by the parser: any
 * thread may call them.
 */
#ifndef EMBER_GGUF_IMPL_H
#define EMBER_GGUF_IMPL_H

#include <stdint.h>

/* Explicit little-endian loads: map bytes are unaligned and the format is
 * little-endian whatever the host is. */
static inline uint16_t gguf_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t gguf_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t gguf_le64(const uint8_t *p)
{
	return (uint64_t)gguf_le32(p) | (uint64_t)gguf_le32(p + 4) << 32;
}

/* The tensor name index's hash (FNV-1a): index_build in gguf.c fills the
 * table, gguf_find_tensor in gguf_lookup.c probes it, so both must use
 * this one. */
static inline uint64_t gguf_hash_bytes(const char *p, uint64_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (n--) {
		h ^= (uint8_t)*p++;
		h *= 1099511628211ull;
	}
	return h;
}

#endif
