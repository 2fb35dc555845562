/*
 * utf8.h - the project's UTF-8 decoding and encoding.
 *
 * Two decoders on purpose: the strict one (Unicode's well-formed table: no
 * overlong forms, surrogates or code points past U+10FFFF) decides what
 * Ember may send or match (detok, SentencePiece input); the lenient one
 * reproduces what the byte-level BPE reference tokenizers do with bad
 * input (overlongs and surrogates pass, anything else is U+FFFD for one
 * byte), so token ids match theirs.
 * Pure functions: any thread.
 */
#ifndef EMBER_UTF8_H
#define EMBER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Bytes in the sequence lead byte `b` starts: 1 to 4, or 0 if it cannot
 * start a well-formed one (a continuation byte, C0/C1, F5..FF). */
size_t utf8_lead_len(unsigned char b);

/* Whether `b` may follow seq[0..pos) (pos >= 1) in a well-formed sequence:
 * the second byte's range depends on the lead (this excludes overlongs,
 * surrogates and code points past U+10FFFF). */
int utf8_continues(const unsigned char *seq, size_t pos, unsigned char b);

/* Length of the well-formed sequence at s[0..n) (n >= 1), 0 if none. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* 1 if s[0..n) is well-formed UTF-8 throughout, else 0. */
int utf8_valid(const char *s, size_t n);

/* The lenient decoder (see the top): the code point at s[0..n) (n >= 1)
 * and its length in *adv; U+FFFD with *adv = 1 for what it cannot read. */
uint32_t utf8_decode_lenient(const uint8_t *s, size_t n, size_t *adv);

/* Writes code point `cp` (<= U+10FFFF) to out[0..4); returns its length. */
size_t utf8_encode(uint32_t cp, char *out);

#endif
