/*
 * tokenizer_bpe.h - byte-level BPE (GPT-2 style, `tokenizer.ggml.model` =
 * "gpt2"): the backend tokenizer.c uses for Phi-2, Falcon, StableLM, Qwen2,
 * Llama 3 and GPT-NeoX vocabularies. Internal to libember.
 *
 * Encoding, as the reference (llama.cpp) does it:
 *   1. the text is read as UTF-8 leniently: a byte that starts no sequence
 *      becomes U+FFFD, sequences are re-encoded canonically;
 *   2. the pre-tokenizer of the vocabulary type (`tokenizer.ggml.pre`)
 *      splits it into words: a list of regexes (PCRE2, Unicode classes)
 *      applied in turn, each splitting every piece of the previous one into
 *      its matches and the gaps between them;
 *   3. each word's bytes go through GPT-2's bytes-to-unicode mapping and
 *      are merged pairwise, lowest merge rank first (leftmost on ties);
 *   4. each resulting symbol is looked up in the vocabulary; one that is
 *      missing falls back to its single bytes that are tokens.
 * A "gemma4" vocabulary is SentencePiece-style BPE instead: spaces become
 * U+2581 before step 2, whose only split is into lines and runs of
 * newlines; step 3 merges raw UTF-8 characters (no byte mapping; a word of
 * newlines that is a token stays whole); step 4 falls back to <0xAB> tokens.
 * No special-token text is recognised and no BOS/EOS is added: that is the
 * front's job (tokenizer.c).
 *
 * Ownership: a bpe borrows the gguf it was built from (token and merge
 * strings point into the map): close the gguf only after bpe_free().
 * Thread safety: immutable after bpe_new(); bpe_encode and bpe_piece may be
 * called from any number of threads at once.
 */
#ifndef EMBER_TOKENIZER_BPE_H
#define EMBER_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct bpe;

/*
 * Builds the tokenizer from `g`'s tokenizer.ggml.{model,pre,tokens,merges}.
 * Returns 0 and sets *out, or a negative code with a message in `err`:
 * EMBER_EFORMAT for missing or malformed keys (a merge that is not "a b"),
 * EMBER_EUNSUPPORTED for a model other than "gpt2" or an unknown
 * pre-tokenizer type, EMBER_ENOMEM.
 */
int bpe_new(struct bpe **out, const struct gguf *g, char *err);
void bpe_free(struct bpe *b);

/*
 * Encodes `len` bytes of `text` (need not be NUL-terminated, may hold any
 * bytes). Writes up to `cap` ids to `ids` and returns how many the text
 * needs (a result > cap means: call again with a bigger buffer), or a
 * negative error (EMBER_ENOMEM, EMBER_ERANGE if the regex engine gives up).
 */
int64_t bpe_encode(const struct bpe *b, const char *text, size_t len, int32_t *ids, size_t cap);

/*
 * The bytes token `id` stands for: its text with the bytes-to-unicode
 * mapping undone (characters outside the mapping, as in added tokens like
 * "<|endoftext|>", are copied as they are). Writes up to `cap` bytes and
 * returns the length needed, or EMBER_ERANGE for an id out of range.
 */
int bpe_piece(const struct bpe *b, int32_t id, char *buf, size_t cap);

/* The id whose text is exactly these `len` bytes (as stored in the
 * vocabulary, i.e. byte-mapped), or -1. */
int32_t bpe_find_token(const struct bpe *b, const char *text, size_t len);

int32_t bpe_n_vocab(const struct bpe *b);

/* 1 if the reference detokenizer cleans up spaces for this vocabulary type
 * (" ." -> "." and the like; off for qwen2, command-r, smollm). */
int bpe_clean_spaces(const struct bpe *b);

/* The pre-tokenizer type in use ("default" when the file names none). */
const char *bpe_pre_name(const struct bpe *b);

#endif
