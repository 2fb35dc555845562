/*
 * hf_normalizer.c - tokenizer.json normalizers: which ones Ember applies,
 * which it refuses (see hf_normalizer.h).
 */
#include "hf_normalizer.h"

#include <string.h>

#include "ember.h"

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 "▁" */

/* Sequences inside sequences: deeper than this is not a real file. */
#define MAX_DEPTH 8

/* 1 if `n` is Replace(String " " -> "▁"), the SentencePiece space rule. */
static int is_space_replace(json_t *n)
{
	const char *pat = json_string_value(json_object_get(json_object_get(n, "pattern"), "String"));
	const char *content = json_string_value(json_object_get(n, "content"));

	return pat && content && strcmp(pat, " ") == 0 && strcmp(content, SPACE_MARK) == 0;
}

static int check(json_t *n, int spm_style, int *nfc, int depth, char *err)
{
	const char *type = json_string_value(json_object_get(n, "type"));
	json_t *list, *v;
	size_t i;
	int rc;

	if (json_is_null(n))
		return 0;
	if (type == NULL)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.json: normalizer without a type");
	if (strcmp(type, "Sequence") == 0) {
		list = json_object_get(n, "normalizers");
		if (!json_is_array(list) || depth >= MAX_DEPTH)
			return ember_seterr(err, EMBER_EFORMAT, "tokenizer.json: malformed Sequence normalizer");
		json_array_foreach(list, i, v) {
			if ((rc = check(v, spm_style, nfc, depth + 1, err)) != 0)
				return rc;
		}
		return 0;
	}
	if (strcmp(type, "NFC") == 0) {
		*nfc = 1;
		return 0;
	}
	if (spm_style && strcmp(type, "Prepend") == 0 &&
	    json_is_string(json_object_get(n, "prepend")) &&
	    strcmp(json_string_value(json_object_get(n, "prepend")), SPACE_MARK) == 0)
		return 0;
	if (spm_style && strcmp(type, "Replace") == 0 && is_space_replace(n))
		return 0;
	if (strcmp(type, "Prepend") == 0 || strcmp(type, "Replace") == 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "tokenizer.json: normalizer %s is supported only as the SentencePiece "
				    "space rule (\"\xe2\x96\x81\" with byte fallback), not as written here",
				    type);
	return ember_seterr(err, EMBER_EUNSUPPORTED,
			    "tokenizer.json: normalizer %.64s is not supported (Ember applies NFC, and "
			    "the SentencePiece space rule)",
			    type);
}

int hf_normalizer_check(json_t *normalizer, int spm_style, int *nfc, char *err)
{
	*nfc = 0;
	if (normalizer == NULL)
		return 0;
	return check(normalizer, spm_style, nfc, 0, err);
}
