/*
 * tokenizer.h - text to token ids and back, for the vocabularies GGUF files
 * carry: SentencePiece (`tokenizer.ggml.model` = "llama", through
 * libsentencepiece) and byte-level BPE ("gpt2", implemented here). Text is
 * normalized to NFC first when the file says the original tokenizer does
 * (`ember.tokenizer.normalizer`, tokenizer_impl.h).
 *
 * Ownership: a tokenizer borrows the gguf it was built from (piece strings
 * point into the map): close the gguf only after tokenizer_free().
 * Thread safety: immutable after tokenizer_new(); encode/decode from any
 * thread at once.
 */
#ifndef EMBER_TOKENIZER_H
#define EMBER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct tokenizer;

/* Builds the tokenizer described by `g`'s tokenizer.ggml.* keys. */
int tokenizer_new(struct tokenizer **out, const struct gguf *g, char *err);
void tokenizer_free(struct tokenizer *t);

/*
 * Encodes `len` bytes of `text` (need not be NUL-terminated).
 *   add_special:   add BOS/EOS as the model's add_bos/add_eos keys say
 *   parse_special: text of control/user-defined tokens (e.g. "<|im_end|>")
 *                  becomes those tokens; otherwise it is plain text
 * Writes up to `cap` ids and returns how many the text needs (so a result
 * > cap means: call again with a bigger buffer), or a negative error.
 */
int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int add_special,
			 int parse_special, int32_t *ids, size_t cap);

/*
 * The bytes token `id` stands for when it follows other text, as the
 * reference detokenizer produces them (SentencePiece "▁" becomes a space,
 * byte tokens <0xAB> one byte, BPE's byte-to-unicode mapping undone; control
 * tokens give "" unless `special`). Bytes may be part of a UTF-8 sequence.
 * Writes up to `cap` bytes, returns the length needed or a negative error.
 */
int tokenizer_piece(const struct tokenizer *t, int32_t id, int special, char *buf, size_t cap);

/* Decodes a whole sequence as the reference does (including removing the
 * space SentencePiece adds in front of the first word). Returns the length
 * needed (writes up to `cap` bytes) or a negative error. */
int64_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int special,
			 char *buf, size_t cap);

int32_t tokenizer_n_vocab(const struct tokenizer *t);
int32_t tokenizer_bos(const struct tokenizer *t); /* -1 if none */
int32_t tokenizer_eos(const struct tokenizer *t); /* -1 if none */
/* 1 if generating `id` ends the output (EOS, EOT, <|im_end|>, ...). */
int tokenizer_is_eog(const struct tokenizer *t, int32_t id);
/* Text of token `id` as stored in the vocabulary, NOT NUL-terminated: its
 * length goes to *len (NULL if `id` is out of range). */
const char *tokenizer_token_text(const struct tokenizer *t, int32_t id, size_t *len);

#endif
