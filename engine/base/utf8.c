/* utf8.c - UTF-8 decoding and encoding (utf8.h). */
#include "utf8.h"

size_t utf8_lead_len(unsigned char b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xc2 && b <= 0xdf)
		return 2;
	if (b >= 0xe0 && b <= 0xef)
		return 3;
	if (b >= 0xf0 && b <= 0xf4)
		return 4;
	return 0;
}

int utf8_continues(const unsigned char *seq, size_t pos, unsigned char b)
{
	unsigned char lo = 0x80, hi = 0xbf;

	if (pos == 1) {
		switch (seq[0]) {
		case 0xe0: lo = 0xa0; break;
		case 0xed: hi = 0x9f; break;
		case 0xf0: lo = 0x90; break;
		case 0xf4: hi = 0x8f; break;
		default: break;
		}
	}
	return b >= lo && b <= hi;
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	size_t len = utf8_lead_len(s[0]), k;

	if (len == 0 || len > n)
		return 0;
	for (k = 1; k < len; k++)
		if (!utf8_continues(s, k, s[k]))
			return 0;
	return len;
}

int utf8_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, len;

	while (i < n) {
		len = utf8_seq_len(u + i, n - i);
		if (len == 0)
			return 0;
		i += len;
	}
	return 1;
}

uint32_t utf8_decode_lenient(const uint8_t *s, size_t n, size_t *adv)
{
	uint32_t cp;
	size_t len, i;

	if (s[0] < 0x80) {
		*adv = 1;
		return s[0];
	}
	if ((s[0] & 0xE0) == 0xC0) {
		len = 2;
		cp = s[0] & 0x1F;
	} else if ((s[0] & 0xF0) == 0xE0) {
		len = 3;
		cp = s[0] & 0x0F;
	} else if ((s[0] & 0xF8) == 0xF0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		goto bad;
	}
	if (len > n)
		goto bad;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			goto bad;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if (cp > 0x10FFFF)
		goto bad;
	*adv = len;
	return cp;
bad:
	*adv = 1;
	return 0xFFFD;
}

size_t utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}
