/*
 * tokenizer_spm_shim.h - the C face of libsentencepiece (a C++ library),
 * implemented in tokenizer_spm_shim.cc, used only by tokenizer_spm.c.
 *
 * Ownership: spm_new() returns a processor the caller frees with spm_free().
 * Threads: a built processor is read-only; spm_encode from any thread.
 * Nothing here throws: C++ exceptions are turned into EMBER_E* codes.
 */
#ifndef EMBER_TOKENIZER_SPM_SHIM_H
#define EMBER_TOKENIZER_SPM_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct spm;

/* Parses a serialized sentencepiece ModelProto (`len` bytes, copied). */
int spm_new(struct spm **out, const void *proto, size_t len, char *err);
void spm_free(struct spm *s);

/* Encodes `len` bytes of UTF-8 text, preceded by one space when
 * `space_prefix`; writes up to `cap` ids, returns how many there are or a
 * negative EMBER_E*. */
int64_t spm_encode(const struct spm *s, const char *text, size_t len, int space_prefix, int32_t *ids,
		   size_t cap);

int32_t spm_n_pieces(const struct spm *s);
/* The piece of `id` (valid while `s` lives); -1 if out of range. */
int spm_piece(const struct spm *s, int32_t id, const char **ptr, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
