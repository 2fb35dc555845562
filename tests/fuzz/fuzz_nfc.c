/*
 * fuzz_nfc.c - NFC (engine/text/unicode_nfc.h) on untrusted bytes: the
 * text of every prompt reaches it when the model's tokenizer normalizes.
 * It must never crash, and must keep its own laws: the output is in NFC
 * (normalizing it again changes nothing), text the quick check passes is
 * returned as is, and ill-formed bytes come out unchanged in number.
 * libFuzzer target (make fuzz); replay.c runs the kept corpus in make test.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_nfc.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes of `s` that start no well-formed sequence (passed through as is). */
static size_t ill_formed(const char *s, size_t n)
{
	size_t i = 0, bad = 0, k;

	while (i < n) {
		k = utf8_seq_len((const unsigned char *)s + i, n - i);
		if (k == 0) {
			bad++;
			k = 1;
		}
		i += k;
	}
	return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size heap copy, so ASan sees any read past the end. */
	char *in = malloc(size ? size : 1), *once = NULL, *twice = NULL;
	size_t n1, n2;

	if (in == NULL)
		return 0;
	memcpy(in, data, size);
	if (unicode_nfc(in, size, &once, &n1) != 0)
		goto out;
	if (once == NULL) { /* the quick check passed: unchanged */
		if (n1 != size || !unicode_nfc_quick(in, size))
			abort();
		goto out;
	}
	if (ill_formed(once, n1) != ill_formed(in, size))
		abort();
	if (unicode_nfc(once, n1, &twice, &n2) != 0)
		goto out;
	if (twice != NULL && (n2 != n1 || memcmp(twice, once, n1) != 0))
		abort(); /* NFC(NFC(x)) != NFC(x) */
out:
	free(twice);
	free(once);
	free(in);
	return 0;
}
