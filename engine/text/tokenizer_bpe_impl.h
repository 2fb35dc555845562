/*
 * tokenizer_bpe_impl.h - what tokenizer_bpe.c (tables, loading, the
 * tokenizer.c backend) and tokenizer_bpe_encode.c (UTF-8 clean-up,
 * pre-tokenizing, merging, pieces) share: the tokenizer's struct and its
 * hash lookups. Internal to the BPE tokenizer; see tokenizer_bpe.h for the
 * role, ownership and threads.
 */
#ifndef EMBER_TOKENIZER_BPE_IMPL_H
#define EMBER_TOKENIZER_BPE_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stddef.h>
#include <stdint.h>

#include "tokenizer_bpe.h"

#define BPE_MAX_REGEX 4
#define BPE_MAX_PATTERN 1024
#define BPE_N_MAPPED 324 /* bytes-to-unicode uses code points 0..323 */

struct bpe_pre {
	const char *name;  /* value of tokenizer.ggml.pre */
	int ignore_merges; /* a word that is a whole token skips merging */
	int clean_spaces;  /* detokenizer hint, see bpe_clean_spaces() */
	const char *regex[BPE_MAX_REGEX];
};

struct bpe_span {
	const char *ptr;
	uint32_t len;
	uint32_t split; /* merges: "left right" has left = ptr[0, split) */
};

struct bpe {
	const struct bpe_pre *pre;
	int spm;                 /* "gemma4": SentencePiece-style, see bpe_pre_spm */
	int32_t byte_tok[256];   /* spm: the <0xAB> token of each byte, -1 = none */
	int32_t n_vocab;
	struct bpe_span *toks;   /* (n_vocab) text as stored, in the map */
	uint32_t *tok_index;     /* (tok_mask + 1) open addressing: id + 1, 0 = empty */
	uint64_t tok_mask;
	uint32_t n_merges;
	struct bpe_span *merges; /* (n_merges) rank = index */
	uint32_t max_merge_len;  /* longest "left right" string */
	uint32_t *merge_index;   /* (merge_mask + 1) rank + 1, 0 = empty */
	uint64_t merge_mask;
	int n_regex;
	pcre2_code *regex[BPE_MAX_REGEX];
	uint8_t byte_utf8[256][2]; /* byte -> UTF-8 of its mapped code point */
	uint8_t byte_utf8_len[256];
	int16_t cp_byte[BPE_N_MAPPED]; /* mapped code point -> byte, -1 = none */
};

/* Rank of merging `l` and `r`, -1 if no merge joins them. */
int32_t bpe_find_rank(const struct bpe *b, const char *l, size_t ln, const char *r, size_t rn);

#endif
