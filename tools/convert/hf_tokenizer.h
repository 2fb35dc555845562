/*
 * hf_tokenizer.h - a Hugging Face checkpoint's tokenizer, read into the
 * GGUF vocabulary arrays llama.cpp's converter writes.
 *
 * Sources, in a checkpoint directory:
 *   tokenizer.model        SentencePiece ModelProto (protobuf): pieces,
 *                          scores, types -> tokenizer.ggml.model "llama";
 *                          the file's bytes are also kept, unparsed, for
 *                          `ember.tokenizer.spm_model` (u8 array) so the
 *                          engine can load the exact original model
 *   tokenizer.json         else: byte-level BPE (model.vocab, model.merges,
 *                          added_tokens, pre_tokenizer) -> "gpt2"; its
 *                          normalizer: NFC -> ember.tokenizer.normalizer
 *                          "nfc", others refused (hf_normalizer.h)
 *   tokenizer_config.json  chat_template, add_bos_token/add_eos_token,
 *                          <typ>_token (resolved through tokenizer.json's
 *                          added_tokens), added_tokens_decoder (types)
 *   config.json            <typ>_token_id, taken where the above left a gap
 *   generation_config.json eos_token_id: the eos if still unknown; a list of
 *                          several becomes `ember.tokenizer.eos_token_ids`
 *
 * Special ids follow llama.cpp's converter (gguf-py SpecialVocab): types
 * bos, eos, unk, sep, pad, cls, mask; the first source to name one wins;
 * keys are written in the order they were found.
 *
 * Token types (GGUF): 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte. SentencePiece user-defined pieces are written as normal
 * and padding up to vocab_size as "[PAD<i>]", as llama.cpp does.
 *
 * Ownership: struct hf_tokenizer is caller storage owning all its arrays
 * until hf_tokenizer_free(). One thread.
 */
#ifndef EMBER_HF_TOKENIZER_H
#define EMBER_HF_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define HF_TOK_MAX_SPECIAL 8
#define HF_TOK_MAX_EOS 16

struct hf_tokenizer {
	int is_spm;       /* 1: tokenizer.model or SentencePiece-style tokenizer.json, 0: BPE */
	int no_space_prefix; /* 1: write add_space_prefix = false (a tokenizer.json without Prepend) */
	int nfc;          /* 1: tokenizer.json normalizes to NFC (hf_normalizer.h) */
	char pre[32];     /* tokenizer.ggml.pre */
	uint32_t n_vocab; /* entries in tokens/lens/types (= config vocab_size) */
	char **tokens;    /* [n_vocab] owned, NUL-terminated, lens[i] bytes */
	size_t *lens;
	float *scores; /* [n_vocab] SentencePiece only, else NULL */
	int32_t *types;
	char **merges; /* [n_merges] owned ("a b") */
	uint64_t n_merges;
	uint8_t *spm_bytes; /* tokenizer.model as read (SentencePiece only) */
	size_t spm_len;
	struct {
		const char *key; /* tokenizer.ggml.<x>_token_id (static string) */
		uint32_t id;
	} special[HF_TOK_MAX_SPECIAL];
	size_t n_special;
	struct {
		const char *key; /* tokenizer.ggml.add_<x>_token */
		int value;
	} add[2];
	size_t n_add;
	char *chat_template; /* owned, NULL if none */
	uint32_t eos_ids[HF_TOK_MAX_EOS]; /* generation_config list, when > 1 */
	size_t n_eos_ids;
};

/*
 * Reads the tokenizer of checkpoint `dir` for a model of `n_vocab` tokens.
 * `bpe_pre` names the pre-tokenizer of a tokenizer.json whose
 * pre-tokenizer is plain ByteLevel (the architecture's usual one); a Split
 * regex we recognise names its own. Returns 0, or a negative code with the
 * reason in `err` (no tokenizer, a malformed file, ids past n_vocab).
 */
int hf_tokenizer_load(struct hf_tokenizer *tk, const char *dir, uint32_t n_vocab,
		      const char *bpe_pre, char *err);

/* Id of the token whose text is `text`, or -1. */
int64_t hf_tokenizer_find(const struct hf_tokenizer *tk, const char *text);

/* Writes the tokenizer.* keys llama.cpp writes to `w`, in its order.
 * Returns 0 or a writer error. */
int hf_tokenizer_write(const struct hf_tokenizer *tk, struct gguf_writer *w);

/* Writes our own ember.tokenizer.* keys (kept after all the standard
 * ones, so the rest of the file lines up with llama.cpp's). */
int hf_tokenizer_write_ember(const struct hf_tokenizer *tk, struct gguf_writer *w);

void hf_tokenizer_free(struct hf_tokenizer *tk);

#endif
