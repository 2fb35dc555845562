/*
 * detok.h - the streamed text of one generation: token pieces in, text a
 * client may be sent out.
 *
 * The tokenizer gives each generated token as bytes (tokenizer_piece); a
 * piece may end inside a UTF-8 sequence (byte tokens) and the text may be
 * heading into a stop string. detok holds back
 *   - an incomplete UTF-8 sequence until it completes; bytes that cannot be
 *     UTF-8 become U+FFFD (one per maximal invalid subpart, as Unicode and
 *     WHATWG decoders do), so the output is always valid UTF-8 and never
 *     ends inside a character;
 *   - text that may be the start of a stop string, until it is decided.
 * When a stop string completes, the output ends just before it and
 * detok_push() returns DETOK_STOP. Stops are matched in the decoded text, so
 * they are found across any token boundaries. When several stop strings
 * complete at the same character, the one starting first wins; a stop
 * string that completes earlier wins over one still incomplete (the stream
 * ends as soon as any stop string appears).
 *
 * Memory: a struct detok lives in caller storage, has fixed-size buffers
 * (stop strings are copied in; the held text is at most the longest stop
 * string + 4 bytes) and allocates nothing.
 * Thread safety: one detok per generation, used by one thread at a time.
 */
#ifndef EMBER_DETOK_H
#define EMBER_DETOK_H

#include <stddef.h>

#define DETOK_MAX_STOPS 4       /* OpenAI's limit for `stop` */
#define DETOK_MAX_STOP_LEN 128  /* bytes of one stop string */
#define DETOK_HOLD_MAX (DETOK_MAX_STOP_LEN + 4)

/* An output buffer of DETOK_OUT_MAX(len) bytes is always large enough for
 * detok_push() of `len` bytes (DETOK_OUT_MAX(0) for detok_flush()): held
 * text, plus at most 3 bytes (U+FFFD) per input byte, plus a replaced
 * incomplete sequence. */
#define DETOK_OUT_MAX(len) (DETOK_HOLD_MAX + 3 * (size_t)(len) + 3)

enum detok_status {
	DETOK_CONTINUE = 0, /* keep generating */
	DETOK_STOP = 1,     /* a stop string was found: finish_reason "stop" */
};

struct detok {
	char stop[DETOK_MAX_STOPS][DETOK_MAX_STOP_LEN]; /* copies, not terminated */
	size_t stop_len[DETOK_MAX_STOPS];
	size_t n_stops;
	char hold[DETOK_HOLD_MAX]; /* decoded text not yet released */
	size_t hold_len;
	unsigned char utf8[4];     /* an incomplete UTF-8 sequence */
	size_t utf8_len;           /* bytes in utf8[] */
	size_t utf8_need;          /* bytes the sequence will have */
	int stopped;               /* a stop string was found */
	int stop_index;            /* which one, or -1 */
};

/*
 * Prepares `d` for one generation with `n_stops` stop strings (NUL-
 * terminated, copied; the caller keeps ownership). Returns 0, or
 * EMBER_EINVAL with detail in `err` when there are more than
 * DETOK_MAX_STOPS, or one is empty, longer than DETOK_MAX_STOP_LEN or not
 * valid UTF-8 (a stop string could then never match whole characters).
 */
int detok_init(struct detok *d, const char *const *stops, size_t n_stops, char *err);

/*
 * Feeds the `len` bytes of one token's piece. Writes the text that is now
 * decided into `out` (`cap` bytes; not NUL-terminated) and its length into
 * `*out_len`. Returns DETOK_CONTINUE, DETOK_STOP (the output written ends
 * before the stop string; this and every later push returns DETOK_STOP with
 * nothing more), or EMBER_EINVAL without consuming anything if `cap` <
 * DETOK_OUT_MAX(len).
 */
int detok_push(struct detok *d, const char *bytes, size_t len, char *out, size_t cap,
	       size_t *out_len);

/*
 * Ends the stream for another reason (length, EOS, cancel): writes all held
 * text, a trailing incomplete UTF-8 sequence as U+FFFD, and empties `d`
 * (detok_init() starts a new generation). Nothing is written after a stop.
 * Returns DETOK_STOP if the stream ended at a stop string (earlier, or just
 * now because the U+FFFD completed one), else DETOK_CONTINUE; or
 * EMBER_EINVAL if `cap` < DETOK_OUT_MAX(0).
 */
int detok_flush(struct detok *d, char *out, size_t cap, size_t *out_len);

/* Index of the stop string that ended the stream, or -1. */
int detok_stop_index(const struct detok *d);

#endif
