/*
 * tokenizer_impl.h - what tokenizer.c (the front) shares with its backends
 * (tokenizer_spm.c: SentencePiece; tokenizer_bpe.c: byte-level BPE). Not a
 * public header: only engine/tokenizer*.c include it.
 *
 * The front owns `struct tokenizer`: it reads the vocabulary arrays and the
 * special-token keys, splits text at special tokens (llama.cpp's
 * partitioning), adds BOS/EOS, renders control/user-defined/unknown pieces,
 * decodes sequences and knows the end-of-generation set. A backend only turns
 * plain text (never containing special-token text) into ids, and renders the
 * pieces of its NORMAL and BYTE tokens.
 *
 * ---- Backend contract --------------------------------------------------
 * tokenizer_new() calls `<backend>_init(t, g, err)` with `t` filled as:
 *   n_vocab, text[], score[], type[]   from tokenizer.ggml.tokens / scores /
 *       token_type (scores default 0, types default TOK_NORMAL); texts point
 *       into the gguf map (valid until the gguf is closed).
 *   bos, eos, eot, eom, pad, unk       the tokenizer.ggml.*_token_id keys
 *       (-1 when out of range), or TOK_UNSET when the key is absent.
 *   add_bos, add_eos, add_space_prefix the tokenizer.ggml.* bool keys, or -1
 *       when absent.
 * The init must:
 *   - replace each TOK_UNSET id / -1 flag it has a default for with that
 *     default (SPM: unk 0, bos 1, eos 2, add_bos 1, add_eos 0,
 *     add_space_prefix 1; BPE as llama.cpp: add_bos/add_eos/add_space_prefix
 *     0 unless the keys say otherwise); whatever stays unset becomes -1 / 0.
 *     add_space_prefix also tells tokenizer_decode() to drop the first
 *     output space, so a backend that adds no such space must leave it 0;
 *   - set t->ops (a static const table) and t->state (owned by the backend,
 *     released by ops->free, which must accept NULL);
 *   - return 0, or a negative EMBER_E* with a message in `err`; on failure
 *     it frees what it allocated and leaves t->state NULL.
 * After the init the front turns what is still unset into -1 / 0, then
 * builds the special-token list and the end-of-generation set. The backend
 * must not keep pointers to `g` beyond what the map itself provides.
 *
 * ops->encode(t, text, len, out): `text` is one fragment of the input between
 *   special tokens (len > 0, arbitrary bytes, not NUL-terminated). Append ids
 *   with tok_out_push() (which counts past out->cap, so the caller learns the
 *   size needed). Return 0 or a negative EMBER_E*. BOS/EOS are the front's.
 *   May allocate per call (scratch), never per token; must be thread-safe
 *   (t is shared, read-only).
 * ops->piece(t, id, buf, cap): called only for ids of type TOK_NORMAL,
 *   TOK_BYTE or TOK_UNDEFINED. Write up to `cap` bytes of what the token stands
 *   for in the output text (SPM: "▁" -> ' ', <0xAB> -> byte 0xAB; BPE: the
 *   byte-to-unicode map undone), return the full length or a negative error.
 *   `buf` may be NULL when `cap` is 0 (a length query).
 * ops->free(state): releases the backend state.
 * The front renders the other types itself: CONTROL and UNKNOWN give "" (or
 * their text when `special`), USER_DEFINED its text, UNUSED "".
 * ------------------------------------------------------------------------
 *
 * Threads: built by one thread in tokenizer_new(); read-only afterwards.
 */
#ifndef EMBER_TOKENIZER_IMPL_H
#define EMBER_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

/* tokenizer.ggml.token_type values (llama.cpp / SentencePiece numbering). */
enum tok_type {
	TOK_UNDEFINED = 0,
	TOK_NORMAL = 1,
	TOK_UNKNOWN = 2,
	TOK_CONTROL = 3,
	TOK_USER_DEFINED = 4,
	TOK_UNUSED = 5,
	TOK_BYTE = 6,
};

/* An id key that was absent from the file (before backend defaults). */
#define TOK_UNSET INT32_MIN

/*
 * Optional key with the original SentencePiece model (tokenizer.model bytes)
 * as an array of uint8 or int8. When present, the SPM backend loads it as is
 * instead of building a model from the vocabulary arrays; its pieces must
 * equal tokenizer.ggml.tokens (count and text), or loading fails.
 */
#define TOK_KEY_SPM_MODEL "ember.tokenizer.spm_model"

/*
 * Optional key naming the normalizer the original tokenizer applies to text
 * before tokenizing it (`ember convert` writes it from tokenizer.json). The
 * only value is "nfc" (unicode_nfc.h): the front normalizes each raw text
 * fragment, never special-token text. Any other value is refused at load.
 */
#define TOK_KEY_NORMALIZER "ember.tokenizer.normalizer"

/* Where encoded ids go: writes while n < cap, counts always. */
struct tok_out {
	int32_t *ids;
	size_t cap;
	size_t n;
};

static inline void tok_out_push(struct tok_out *o, int32_t id)
{
	if (o->n < o->cap)
		o->ids[o->n] = id;
	o->n++;
}

/* A special token the front cuts out of text before the backend sees it. */
struct tok_special {
	int32_t id;
	uint8_t lstrip; /* eat whitespace before the token (llama.cpp attribute) */
	uint8_t rstrip; /* eat whitespace after it */
};

struct tokenizer;

struct tokenizer_ops {
	const char *name;
	int (*encode)(const struct tokenizer *t, const char *text, size_t len, struct tok_out *out);
	int (*piece)(const struct tokenizer *t, int32_t id, char *buf, size_t cap);
	void (*free)(void *state);
};

struct tokenizer {
	int32_t n_vocab;
	struct gguf_str *text; /* [n_vocab], owned array; bytes in the gguf map */
	float *score;          /* [n_vocab], owned */
	uint8_t *type;         /* [n_vocab] enum tok_type, owned */

	int32_t bos, eos, eot, eom, pad, unk; /* -1 if none (after init) */
	int add_bos, add_eos;                  /* add_special adds these */
	int add_space_prefix;                  /* SPM: " " before each text fragment */
	int nfc;                               /* TOK_KEY_NORMALIZER "nfc": fragments to NFC */

	/* CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first (ties:
	 * lower id first), as llama.cpp partitions text. Owned. */
	struct tok_special *special;
	size_t n_special;
	uint8_t *eog; /* [n_vocab / 8 + 1] bit set of end-of-generation ids, owned */

	const struct tokenizer_ops *ops;
	void *state; /* the backend's, freed by ops->free */
};

int tokenizer_spm_init(struct tokenizer *t, const struct gguf *g, char *err);

/* Byte-level BPE ("gpt2" vocabularies), in tokenizer_bpe.c. */
int tokenizer_bpe_init(struct tokenizer *t, const struct gguf *g, char *err);

/* "<0xAB>" -> 0xAB; -1 if `s` is not exactly of that form. */
int tok_parse_byte_piece(struct gguf_str s);

#endif
