/*
 * hf_normalizer.h - what a Hugging Face tokenizer.json "normalizer" does to
 * text before tokenization, checked against what Ember implements.
 *
 * Accepted (alone or inside a "Sequence", nested or not):
 *   NFC      the engine applies it: the converter records
 *            ember.tokenizer.normalizer = "nfc" (engine/text/tokenizer.c)
 *   Prepend  "▁", and Replace " " -> "▁": the SentencePiece space
 *            convention, which a SentencePiece-style vocabulary (byte
 *            fallback, spaces as U+2581) carries in its tokenizer anyway
 * Anything else (NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
 * BertNormalizer, Precompiled, Nmt, another Replace...) is refused naming
 * it: converting it would tokenize differently from the original without a
 * word.
 *
 * Pure function over borrowed JSON; one thread.
 */
#ifndef EMBER_HF_NORMALIZER_H
#define EMBER_HF_NORMALIZER_H

#include <jansson.h>

/*
 * Checks tokenizer.json's `normalizer` value (NULL or JSON null: none).
 * `spm_style`: the vocabulary is SentencePiece-style, so Prepend/Replace of
 * "▁" are its space handling. Sets *nfc to 1 when NFC is applied, else 0.
 * Returns 0, or EMBER_EUNSUPPORTED / EMBER_EFORMAT with the normalizer's
 * name in `err`.
 */
int hf_normalizer_check(json_t *normalizer, int spm_style, int *nfc, char *err);

#endif
