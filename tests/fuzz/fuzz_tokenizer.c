/*
 * fuzz_tokenizer.c - untrusted text (a request's prompt, a chat message)
 * through every kind of vocabulary Ember loads: SentencePiece (llama-spm,
 * phi-3, gemma-4) and byte-level BPE with each pre-tokenizer (gpt-2,
 * llama-bpe, qwen2, falcon). Encode must stay within `cap` and give valid
 * ids, decode of those ids (and of arbitrary ids) must not overrun, and
 * nothing may crash whatever the bytes (invalid UTF-8, NULs, special-token
 * text).
 *
 * Input: byte 0 picks the vocabulary, byte 1 the flags (bit 0 add_special,
 * bit 1 parse_special, bit 2 decode with special tokens, bit 3: the rest is
 * little-endian int32 ids to decode instead of text to encode), then the
 * payload. The vocabularies are the shared test vectors, read relative to
 * the repository root (where make fuzz and make test run).
 * libFuzzer target (make fuzz); replay.c runs the kept corpus in make test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const vocab_files[] = {
	"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-gemma-4.gguf",
	"ggml-vocab-gpt-2.gguf",     "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf",
	"ggml-vocab-falcon.gguf",
};
#define N_VOCAB (sizeof(vocab_files) / sizeof(vocab_files[0]))

static struct gguf files[N_VOCAB];
static struct tokenizer *toks[N_VOCAB];

/* Loads every vocabulary once; a missing one is a broken set-up, not an
 * input to skip: the run would silently cover less than it says. */
static void fuzz_load_vocabs(void)
{
	static int loaded;
	char err[EMBER_ERR_MAX], path[512];
	size_t i;

	if (loaded)
		return;
	for (i = 0; i < N_VOCAB; i++) {
		snprintf(path, sizeof(path), "../shared/tokenizer-vectors/%s", vocab_files[i]);
		if (gguf_open(&files[i], path, err) != 0 || tokenizer_new(&toks[i], &files[i], err) != 0) {
			fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
			abort();
		}
	}
	loaded = 1;
}

static void fuzz_check_ids(const struct tokenizer *t, const int32_t *ids, int64_t n)
{
	int32_t nv = tokenizer_n_vocab(t);
	int64_t i;

	for (i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= nv)
			abort(); /* encode produced an id outside the vocabulary */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct tokenizer *t;
	int32_t ids[512];
	char out[2048];
	unsigned flags;
	size_t len;
	char *text;
	int64_t n;

	if (size < 2)
		return 0;
	fuzz_load_vocabs();
	t = toks[data[0] % N_VOCAB];
	flags = data[1];
	len = size - 2;
	if (flags & 8) {
		/* Arbitrary ids, out-of-range ones included: decode refuses or
		 * skips them, never reads past the vocabulary. */
		size_t k = len / 4 < 512 ? len / 4 : 512;
		memcpy(ids, data + 2, k * 4);
		tokenizer_decode(t, ids, k, (flags & 4) != 0, out, sizeof(out));
		if (k > 0)
			tokenizer_piece(t, ids[0], (flags & 4) != 0, out, sizeof(out));
		return 0;
	}
	/* An exact-size heap copy, so ASan sees any read past the end. */
	text = malloc(len ? len : 1);
	if (text == NULL)
		return 0;
	memcpy(text, data + 2, len);
	n = tokenizer_encode(t, text, len, flags & 1, (flags & 2) != 0, ids, 512);
	if (n >= 0) {
		fuzz_check_ids(t, ids, n < 512 ? n : 512);
		n = tokenizer_decode(t, ids, (size_t)(n < 512 ? n : 512), (flags & 4) != 0, out,
				     sizeof(out));
		(void)n;
	}
	free(text);
	return 0;
}
