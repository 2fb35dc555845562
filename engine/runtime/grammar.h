/*
 * grammar.h - constrained decoding: a context-free grammar that decides,
 * before each sampling step, which vocabulary entries may come next.
 *
 * Three objects:
 *   struct grammar          a compiled grammar, immutable once built: from
 *                           llama.cpp's GBNF text (grammar_parse_gbnf), or
 *                           from a JSON Schema through json_schema.h, which
 *                           emits GBNF. Shareable between threads.
 *   struct grammar_vocab    the vocabulary as a byte trie (each token's
 *                           bytes as it decodes), plus which tokens end
 *                           generation. Built once per tokenizer; read only
 *                           afterwards, so every worker may share it.
 *   struct grammar_matcher  one generation's parse state over a grammar
 *                           and a vocabulary. One thread at a time.
 *
 * GBNF: `name ::= alternatives`, alternatives split by `|`, sequences of
 * "literals" (escapes \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH), [classes]
 * ([^...] negated, a-z ranges), `.` (any code point), rule names,
 * ( groups ), postfix * + ? {m} {m,} {m,n}; `#` comments. The start rule
 * is `root`. A rule ends where the next `name ::=` begins.
 *
 * Parsing is by pushdown stacks as in llama.cpp (the grammar is matched over
 * Unicode code points; a token's bytes may split a code point, which is kept
 * pending until its last byte, with only stacks whose class can still hold
 * the finished code point kept). Stacks are hash-consed, so a set of them
 * is a small array of ids.
 *
 * The mask. For each parse stack, its top few frames (GRAMMAR_KEY_DEPTH)
 * with an unknown context below them are walked once over the vocabulary
 * trie; that splits the vocabulary into tokens accepted whatever the
 * context is, tokens rejected whatever it is, and a usually small list
 * whose fate depends on the context (they run past the frames). The first
 * two are cached per key for the matcher's life, so a later step with the
 * same key costs one OR of a cached set plus a full check of the few
 * context-dependent tokens. Inside a JSON string every step has the same
 * key, whatever the string's place in the document.
 *
 * Ends. End-of-generation tokens are allowed only when the grammar accepts
 * (the whole root rule is matched); grammar_matcher_done() says when the
 * grammar cannot continue at all, so the caller stops without waiting for
 * the model. A state where no token is allowed is an error (EMBER_ERANGE
 * with a message), never an empty mask handed to the sampler.
 */
#ifndef EMBER_GRAMMAR_H
#define EMBER_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tokenizer;
struct grammar;
struct grammar_vocab;
struct grammar_matcher;

#define GRAMMAR_KEY_DEPTH 4  /* stack frames a cached mask is keyed on */
#define GRAMMAR_MAX_RULES 16384 /* bounds the checks' recursion depth too */
#define GRAMMAR_MAX_NEST 128    /* ( groups ) inside one another */
#define GRAMMAR_MAX_TEXT (4u << 20) /* bytes of GBNF accepted */

/* Compiles GBNF `text` (`len` bytes). Returns 0 and *out (free with
 * grammar_free), EMBER_EINVAL with the line and reason in `err`, or
 * EMBER_ENOMEM. */
int grammar_parse_gbnf(struct grammar **out, const char *text, size_t len, char *err);
void grammar_free(struct grammar *g);
uint32_t grammar_n_rules(const struct grammar *g);

/*
 * Builds a vocabulary of `n_vocab` tokens: token i decodes to pieces[i]
 * (lens[i] bytes; 0 = a token never allowed under a grammar, such as a
 * control token) and ends generation if eog[i] is nonzero. Copies what it
 * needs. Returns 0 and *out, EMBER_EINVAL or EMBER_ENOMEM.
 */
int grammar_vocab_new(struct grammar_vocab **out, int32_t n_vocab, const char *const *pieces,
		      const uint32_t *lens, const uint8_t *eog, char *err);
/* The same from a tokenizer (tokenizer_piece without specials, and
 * tokenizer_is_eog). */
int grammar_vocab_from_tokenizer(struct grammar_vocab **out, const struct tokenizer *tok,
				 char *err);
void grammar_vocab_free(struct grammar_vocab *v);
int32_t grammar_vocab_n(const struct grammar_vocab *v);

/* A matcher at the start of `g` over `v` (both borrowed: they must outlive
 * it). Returns 0, EMBER_EINVAL (the grammar cannot start: err says why),
 * EMBER_ENOMEM. */
int grammar_matcher_new(struct grammar_matcher **out, const struct grammar *g,
			const struct grammar_vocab *v, char *err);
void grammar_matcher_free(struct grammar_matcher *m);

/*
 * Writes the allowed tokens as a bit set: bit (i & 31) of mask[i >> 5] is
 * token i ((n_vocab + 31) / 32 words, all written). Returns how many are
 * allowed (> 0), or EMBER_ERANGE (a dead end: nothing can follow) or
 * EMBER_ENOMEM, with a message in `err`.
 */
int64_t grammar_matcher_fill_mask(struct grammar_matcher *m, uint32_t *mask, char *err);

/* Advances over `token`. Returns 0, or EMBER_EINVAL (the grammar does not
 * allow it; the state is unchanged), EMBER_ENOMEM, with `err`. */
int grammar_matcher_accept(struct grammar_matcher *m, int32_t token, char *err);

/* Advances over raw UTF-8 text (tests, validation). Same returns. */
int grammar_matcher_accept_bytes(struct grammar_matcher *m, const char *s, size_t len, char *err);

/* True when the text so far is a complete sentence of the grammar. */
bool grammar_matcher_accepting(const struct grammar_matcher *m);
/* True when it is complete and nothing more may follow. */
bool grammar_matcher_done(const struct grammar_matcher *m);

/* True if `text` is a complete sentence of `g` (a one-shot matcher). */
bool grammar_matches(const struct grammar *g, const char *text, size_t len);

#endif
