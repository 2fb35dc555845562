/*
 * unicode_nfc_impl.h - the Unicode Character Database tables NFC reads
 * (unicode_nfc.c), defined in unicode_nfc_data.c, which
 * tools/gen_unicode_nfc.py generates from Debian's unicode-data (Unicode
 * 15.0). Not a public header: only unicode_nfc*.c include it.
 *
 * Every table is sorted by its first field(s) and searched by binary
 * search; Hangul syllables are algorithmic and in none of them.
 * Read-only data: any thread.
 */
#ifndef EMBER_UNICODE_NFC_IMPL_H
#define EMBER_UNICODE_NFC_IMPL_H

#include <stddef.h>
#include <stdint.h>

/* Code points lo..hi all have canonical combining class `ccc` (> 0);
 * code points in no range have class 0 (starters). */
struct unicode_nfc_ccc {
	uint32_t lo, hi;
	uint8_t ccc;
};

/* The one-step canonical decomposition of `cp`: `first`, then `second`
 * (0 for a singleton). Full decomposition applies it recursively. */
struct unicode_nfc_decomp {
	uint32_t cp, first, second;
};

/* Canonical composition: `first` + `second` -> primary composite `cp`
 * (the two-code-point decompositions minus Full_Composition_Exclusion).
 * Sorted by (first, second). */
struct unicode_nfc_comp {
	uint32_t first, second, cp;
};

/* Code points lo..hi whose NFC_Quick_Check is No or Maybe. */
struct unicode_nfc_range {
	uint32_t lo, hi;
};

/* Bit (cp >> 8) set: the block of 256 code points holding `cp` has one of
 * non-zero class or NFC_QC not Yes; clear: every code point there is a
 * starter NFC keeps as is (unless a later one composes with it). */
#define UNICODE_NFC_BUSY(cp) ((unicode_nfc_busy[(cp) >> 11] >> (((cp) >> 8) & 7)) & 1)

extern const uint8_t unicode_nfc_busy[0x110000 / 256 / 8];
extern const struct unicode_nfc_ccc unicode_nfc_ccc[];
extern const size_t unicode_nfc_n_ccc;
extern const struct unicode_nfc_decomp unicode_nfc_decomp[];
extern const size_t unicode_nfc_n_decomp;
extern const struct unicode_nfc_comp unicode_nfc_comp[];
extern const size_t unicode_nfc_n_comp;
extern const struct unicode_nfc_range unicode_nfc_qc[];
extern const size_t unicode_nfc_n_qc;

#endif
