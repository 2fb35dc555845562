/* detok.c - UTF-8 completion and stop-string hold-back (see detok.h). */
#include "detok.h"

#include <string.h>

#include "ember.h"
#include "utf8.h"

static const char replacement[3] = {'\xef', '\xbf', '\xbd'}; /* U+FFFD */

static void reset_stream(struct detok *d)
{
	d->hold_len = 0;
	d->utf8_len = 0;
	d->utf8_need = 0;
	d->stopped = 0;
	d->stop_index = -1;
}

int detok_init(struct detok *d, const char *const *stops, size_t n_stops, char *err)
{
	size_t i;

	memset(d, 0, sizeof(*d));
	reset_stream(d);
	if (n_stops > DETOK_MAX_STOPS)
		return ember_seterr(err, EMBER_EINVAL, "at most %d stop strings (got %zu)",
				    DETOK_MAX_STOPS, n_stops);
	for (i = 0; i < n_stops; i++) {
		size_t n = strlen(stops[i]);

		if (n == 0)
			return ember_seterr(err, EMBER_EINVAL, "stop string %zu is empty", i);
		if (n > DETOK_MAX_STOP_LEN)
			return ember_seterr(err, EMBER_EINVAL, "stop string %zu is longer than %d bytes",
					    i, DETOK_MAX_STOP_LEN);
		if (!utf8_valid(stops[i], n))
			return ember_seterr(err, EMBER_EINVAL, "stop string %zu is not valid UTF-8", i);
		memcpy(d->stop[i], stops[i], n);
		d->stop_len[i] = n;
	}
	d->n_stops = n_stops;
	return 0;
}

/* Where output goes during one call; its capacity was checked up front. */
struct sink {
	char *p;
	size_t len;
};

static void sink_put(struct sink *o, const char *s, size_t n)
{
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

/* A stop string ending exactly at the end of the held text: its start in
 * hold[], the earliest if several, with its index in *which; or -1. Only the
 * end needs checking: the text is examined after every character, and
 * whole-character stop strings end on a character boundary. */
static long stop_ending_here(const struct detok *d, int *which)
{
	long best = -1;
	size_t k;

	for (k = 0; k < d->n_stops; k++) {
		size_t n = d->stop_len[k];
		long at = (long)d->hold_len - (long)n;

		if (at < 0 || (best >= 0 && at >= best))
			continue;
		if (memcmp(d->hold + at, d->stop[k], n) == 0) {
			best = at;
			*which = (int)k;
		}
	}
	return best;
}

/* The start of the longest held suffix that some stop string begins with
 * (hold_len if none): everything before it can no longer be part of a
 * stop, since a stop ending later would have to start at or after it. */
static size_t undecided_from(const struct detok *d)
{
	size_t i, k;

	for (i = 0; i < d->hold_len; i++) {
		size_t tail = d->hold_len - i;

		for (k = 0; k < d->n_stops; k++)
			if (tail < d->stop_len[k] && memcmp(d->hold + i, d->stop[k], tail) == 0)
				return i;
	}
	return d->hold_len;
}

/* One whole character (or U+FFFD) of decoded text enters the stop matcher. */
static void put_char(struct detok *d, struct sink *o, const char *c, size_t n)
{
	size_t keep;
	long at;
	int which = -1;

	if (d->n_stops == 0) {
		sink_put(o, c, n);
		return;
	}
	/* Room is certain: undecided_from() left fewer than the longest stop's
	 * bytes, and a character adds at most 4. */
	memcpy(d->hold + d->hold_len, c, n);
	d->hold_len += n;
	at = stop_ending_here(d, &which);
	if (at >= 0) {
		sink_put(o, d->hold, (size_t)at);
		d->hold_len = 0;
		d->stopped = 1;
		d->stop_index = which;
		return;
	}
	keep = undecided_from(d);
	sink_put(o, d->hold, keep);
	memmove(d->hold, d->hold + keep, d->hold_len - keep);
	d->hold_len -= keep;
}

/* Decodes one input byte, completing or abandoning a pending sequence. */
static void put_byte(struct detok *d, struct sink *o, unsigned char b)
{
	size_t need;

	if (d->utf8_len > 0) {
		if (utf8_continues(d->utf8, d->utf8_len, b)) {
			d->utf8[d->utf8_len++] = b;
			if (d->utf8_len == d->utf8_need) {
				d->utf8_len = 0;
				put_char(d, o, (const char *)d->utf8, d->utf8_need);
			}
			return;
		}
		/* The sequence so far is one maximal invalid subpart; `b` starts
		 * afresh. */
		d->utf8_len = 0;
		put_char(d, o, replacement, sizeof(replacement));
		if (d->stopped)
			return;
	}
	need = utf8_lead_len(b);
	if (need == 1) {
		put_char(d, o, (const char *)&b, 1);
	} else if (need == 0) {
		put_char(d, o, replacement, sizeof(replacement));
	} else {
		d->utf8[0] = b;
		d->utf8_len = 1;
		d->utf8_need = need;
	}
}

int detok_push(struct detok *d, const char *bytes, size_t len, char *out, size_t cap,
	       size_t *out_len)
{
	struct sink o = {out, 0};
	size_t i;

	*out_len = 0;
	if (d->stopped)
		return DETOK_STOP;
	if (cap < DETOK_OUT_MAX(len))
		return EMBER_EINVAL;
	for (i = 0; i < len && !d->stopped; i++)
		put_byte(d, &o, (unsigned char)bytes[i]);
	*out_len = o.len;
	return d->stopped ? DETOK_STOP : DETOK_CONTINUE;
}

int detok_flush(struct detok *d, char *out, size_t cap, size_t *out_len)
{
	struct sink o = {out, 0};

	*out_len = 0;
	if (cap < DETOK_OUT_MAX(0))
		return EMBER_EINVAL;
	if (!d->stopped && d->utf8_len > 0) {
		d->utf8_len = 0;
		put_char(d, &o, replacement, sizeof(replacement));
	}
	/* The replacement may itself have completed a stop string. */
	if (!d->stopped)
		sink_put(&o, d->hold, d->hold_len);
	*out_len = o.len;
	d->hold_len = 0;
	return d->stopped ? DETOK_STOP : DETOK_CONTINUE;
}

int detok_stop_index(const struct detok *d)
{
	return d->stop_index;
}
