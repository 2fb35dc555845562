/*
 * unicode_nfc.c - NFC (see unicode_nfc.h): quick check, then on the slow
 * path decompose into code points, order the combining marks, compose,
 * and encode back to UTF-8.
 */
#include "unicode_nfc.h"

#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "unicode_nfc_impl.h"
#include "utf8.h"

/* Hangul syllables (Unicode 15.0 section 3.12): composed and decomposed by
 * arithmetic, not by table. */
#define S_BASE 0xAC00u
#define L_BASE 0x1100u
#define V_BASE 0x1161u
#define T_BASE 0x11A7u
#define L_COUNT 19u
#define V_COUNT 21u
#define T_COUNT 28u
#define N_COUNT (V_COUNT * T_COUNT)
#define S_COUNT (L_COUNT * N_COUNT)

/* No table lists a code point below the first combining mark. */
#define FIRST_NON_TRIVIAL 0x0300u

/* An ill-formed byte b travels through the slow path as RAW_BYTE + b: past
 * U+10FFFF, so no table knows it (class 0, never composes). */
#define RAW_BYTE 0x110000u

/* Runs of combining marks up to this long are ordered by insertion sort;
 * longer ones (only hostile text has them) by a counting sort, so the cost
 * stays linear. */
#define SHORT_RUN 32

uint8_t unicode_nfc_class(uint32_t cp)
{
	size_t lo = 0, hi = unicode_nfc_n_ccc;

	if (cp < FIRST_NON_TRIVIAL || cp >= RAW_BYTE || !UNICODE_NFC_BUSY(cp))
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < unicode_nfc_ccc[mid].lo)
			hi = mid;
		else if (cp > unicode_nfc_ccc[mid].hi)
			lo = mid + 1;
		else
			return unicode_nfc_ccc[mid].ccc;
	}
	return 0;
}

/* 1 if NFC_Quick_Check(cp) is No or Maybe. */
static int qc_not_yes(uint32_t cp)
{
	size_t lo = 0, hi = unicode_nfc_n_qc;

	if (cp < FIRST_NON_TRIVIAL || cp >= RAW_BYTE || !UNICODE_NFC_BUSY(cp))
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < unicode_nfc_qc[mid].lo)
			hi = mid;
		else if (cp > unicode_nfc_qc[mid].hi)
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

static const struct unicode_nfc_decomp *find_decomp(uint32_t cp)
{
	size_t lo = 0, hi = unicode_nfc_n_decomp;

	if (cp < 0xC0) /* the first decomposable code point is U+00C0 */
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < unicode_nfc_decomp[mid].cp)
			hi = mid;
		else if (cp > unicode_nfc_decomp[mid].cp)
			lo = mid + 1;
		else
			return &unicode_nfc_decomp[mid];
	}
	return NULL;
}

/* The primary composite of a + b, or 0 if there is none. */
static uint32_t compose_pair(uint32_t a, uint32_t b)
{
	size_t lo = 0, hi = unicode_nfc_n_comp;

	if (a - L_BASE < L_COUNT && b - V_BASE < V_COUNT)
		return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
	if (a - S_BASE < S_COUNT && (a - S_BASE) % T_COUNT == 0 && b - T_BASE - 1 < T_COUNT - 1)
		return a + (b - T_BASE);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct unicode_nfc_comp *c = &unicode_nfc_comp[mid];
		if (a < c->first || (a == c->first && b < c->second))
			hi = mid;
		else if (a > c->first || b > c->second)
			lo = mid + 1;
		else
			return c->cp;
	}
	return 0;
}

/* The code point of the well-formed n-byte sequence at p (utf8_seq_len
 * said so): inline, since every non-ASCII character of a prompt passes. */
static inline uint32_t decode_valid(const unsigned char *p, size_t n)
{
	switch (n) {
	case 1:
		return p[0];
	case 2:
		return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
	case 3:
		return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
	default:
		return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
		       (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
	}
}

int unicode_nfc_quick(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;
	uint8_t last = 0, cc;
	uint32_t cp;

	while (i < len) {
		if (p[i] < 0x80) {
			uint64_t w;

			/* The usual text: 8 ASCII bytes at a time. */
			while (i + 8 <= len && (memcpy(&w, p + i, 8), (w & 0x8080808080808080ull) == 0))
				i += 8;
			while (i < len && p[i] < 0x80)
				i++;
			last = 0;
			continue;
		}
		/* Three-byte characters (CJK, Hangul syllables, most scripts)
		 * in a block NFC leaves alone: only the form to check (E0 and
		 * ED restrict their second byte: left to utf8_seq_len). */
		if (i + 3 <= len && p[i] >= 0xE1 && p[i] <= 0xEF && p[i] != 0xED &&
		    (p[i + 1] & 0xC0) == 0x80 && (p[i + 2] & 0xC0) == 0x80 &&
		    !UNICODE_NFC_BUSY((uint32_t)(p[i] & 0x0F) << 12 | (uint32_t)(p[i + 1] & 0x3F) << 6)) {
			last = 0;
			i += 3;
			continue;
		}
		n = utf8_seq_len(p + i, len - i);
		if (n == 0) { /* an ill-formed byte: a boundary, left as is */
			last = 0;
			i++;
			continue;
		}
		cp = decode_valid(p + i, n);
		i += n;
		cc = unicode_nfc_class(cp);
		if ((cc != 0 && last > cc) || qc_not_yes(cp))
			return 0;
		last = cc;
	}
	return 1;
}

/* ---- the slow path -------------------------------------------------------- */

/* A growing array of code points. */
struct cps {
	uint32_t *v;
	size_t n, cap;
};

static int cps_push(struct cps *c, uint32_t cp)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		uint32_t *v = realloc(c->v, cap * sizeof(*v));
		if (v == NULL)
			return EMBER_ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = cp;
	return 0;
}

/* Appends the full canonical decomposition of `cp`. The data nests at
 * most a few levels, so the recursion is shallow. */
static int decompose(struct cps *c, uint32_t cp)
{
	const struct unicode_nfc_decomp *d;
	uint32_t si;
	int rc;

	if (cp - S_BASE < S_COUNT) {
		si = cp - S_BASE;
		rc = cps_push(c, L_BASE + si / N_COUNT);
		if (rc == 0)
			rc = cps_push(c, V_BASE + si % N_COUNT / T_COUNT);
		if (rc == 0 && si % T_COUNT != 0)
			rc = cps_push(c, T_BASE + si % T_COUNT);
		return rc;
	}
	d = find_decomp(cp);
	if (d == NULL)
		return cps_push(c, cp);
	rc = decompose(c, d->first);
	if (rc == 0 && d->second != 0)
		rc = decompose(c, d->second);
	return rc;
}

/* Stable sort of v[0..n) (all non-starters) by combining class. */
static int order_run(uint32_t *v, size_t n)
{
	size_t count[256] = {0}, i, k;
	uint32_t *tmp, x;

	if (n <= SHORT_RUN) {
		for (i = 1; i < n; i++) {
			x = v[i];
			for (k = i; k > 0 && unicode_nfc_class(v[k - 1]) > unicode_nfc_class(x); k--)
				v[k] = v[k - 1];
			v[k] = x;
		}
		return 0;
	}
	tmp = malloc(n * sizeof(*tmp));
	if (tmp == NULL)
		return EMBER_ENOMEM;
	for (i = 0; i < n; i++)
		count[unicode_nfc_class(v[i])]++;
	for (i = 0, k = 0; i < 256; i++) { /* counts -> start offsets */
		size_t c = count[i];
		count[i] = k;
		k += c;
	}
	for (i = 0; i < n; i++)
		tmp[count[unicode_nfc_class(v[i])]++] = v[i];
	memcpy(v, tmp, n * sizeof(*v));
	free(tmp);
	return 0;
}

/* Canonical ordering: every maximal run of non-starters sorted by class. */
static int order_marks(struct cps *c)
{
	size_t i = 0, start;
	int rc;

	while (i < c->n) {
		if (unicode_nfc_class(c->v[i]) == 0) {
			i++;
			continue;
		}
		for (start = i; i < c->n && unicode_nfc_class(c->v[i]) != 0; i++)
			;
		if (i - start > 1 && (rc = order_run(c->v + start, i - start)) != 0)
			return rc;
	}
	return 0;
}

/*
 * Canonical composition (UAX #15, section 1.3): each character composes
 * with the last starter before it when a primary composite exists and no
 * character between them blocks it (one of class 0, or of a class >= its
 * own). Composites replace the starter in place; the rest shifts left.
 */
static void compose(struct cps *c)
{
	size_t starter = 0, w = 1, i;
	int have_starter, last;
	uint32_t comp;
	uint8_t cc;

	if (c->n == 0)
		return;
	last = unicode_nfc_class(c->v[0]);
	have_starter = last == 0;
	if (!have_starter)
		last = 256; /* a leading mark blocks everything until a starter */
	for (i = 1; i < c->n; i++) {
		cc = unicode_nfc_class(c->v[i]);
		if (have_starter && (last < cc || last == 0) &&
		    (comp = compose_pair(c->v[starter], c->v[i])) != 0) {
			c->v[starter] = comp;
			continue;
		}
		if (cc == 0) {
			starter = w;
			have_starter = 1;
		}
		last = cc;
		c->v[w++] = c->v[i];
	}
	c->n = w;
}

static int encode(const struct cps *c, char **out, size_t *out_len)
{
	size_t i, n = 0;
	char *buf;

	buf = malloc(c->n * 4 + 1); /* at most 4 bytes each */
	if (buf == NULL)
		return EMBER_ENOMEM;
	for (i = 0; i < c->n; i++) {
		if (c->v[i] >= RAW_BYTE)
			buf[n++] = (char)(c->v[i] - RAW_BYTE);
		else
			n += utf8_encode(c->v[i], buf + n);
	}
	*out = buf;
	*out_len = n;
	return 0;
}

int unicode_nfc(const char *s, size_t len, char **out, size_t *out_len)
{
	const unsigned char *p = (const unsigned char *)s;
	struct cps c = {0};
	size_t i = 0, n;
	uint32_t cp;
	int rc = 0;

	*out = NULL;
	*out_len = len;
	if (unicode_nfc_quick(s, len))
		return 0;
	while (rc == 0 && i < len) {
		n = p[i] < 0x80 ? 1 : utf8_seq_len(p + i, len - i);
		if (n == 0) {
			rc = cps_push(&c, RAW_BYTE + p[i]);
			i++;
			continue;
		}
		cp = decode_valid(p + i, n);
		i += n;
		rc = decompose(&c, cp);
	}
	if (rc == 0)
		rc = order_marks(&c);
	if (rc == 0) {
		compose(&c);
		rc = encode(&c, out, out_len);
	}
	free(c.v);
	if (rc != 0)
		*out_len = 0;
	return rc;
}
