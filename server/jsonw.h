/*
 * jsonw.h - a JSON text writer into a growable buffer, for the responses
 * the daemon sends once per wake-up of a stream (chunks, bodies). Unlike
 * building a jansson tree and dumping it, it keeps its capacity between
 * uses (jsonw_reset), so a steady stream formats without allocating.
 *
 * The writer does not check structure: callers write keys, commas and
 * brackets themselves through jsonw_raw; jsonw_str escapes a value as a
 * JSON string. Text given to jsonw_str must be UTF-8 (the engine's output
 * always is); control characters, quote and backslash are escaped.
 *
 * Errors are sticky: after a failed allocation every call is a no-op and
 * jsonw_ok() is false, so a sequence of writes needs one check at the end.
 *
 * Ownership: the caller owns the struct; jsonw_free releases the buffer.
 * Threads: one owner at a time (the loop thread in the daemon).
 */
#ifndef EMBER_JSONW_H
#define EMBER_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jsonw {
	char *data;  /* [cap]; data[0..len) written, NUL-terminated when cap > 0 */
	size_t len;
	size_t cap;
	bool oom;
};

/* Sets up an empty writer (allocates nothing). */
void jsonw_init(struct jsonw *w);

/* Releases the buffer (NULL allowed); the writer is empty afterwards. */
void jsonw_free(struct jsonw *w);

/* Empties the text and clears the error, keeping the capacity. */
void jsonw_reset(struct jsonw *w);

/* True when no allocation failed since the last reset. */
bool jsonw_ok(const struct jsonw *w);

/* Appends `s` verbatim (JSON syntax, pre-escaped text). */
void jsonw_raw(struct jsonw *w, const char *s);

/* Appends s[0..len) as a quoted, escaped JSON string. */
void jsonw_strn(struct jsonw *w, const char *s, size_t len);

/* jsonw_strn of a NUL-terminated string; NULL writes null. */
void jsonw_str(struct jsonw *w, const char *s);

/* Appends an integer. */
void jsonw_int(struct jsonw *w, int64_t v);

/* Appends a number with up to 3 decimals; NaN and infinities (not JSON)
 * are written as 0. */
void jsonw_num(struct jsonw *w, double v);

/* Hands the text over: returns the malloc'd NUL-terminated string (the
 * caller frees it) and leaves the writer empty, or NULL after an
 * allocation failure. */
char *jsonw_take(struct jsonw *w);

#endif
