/*
 * ember.h - things every part of libember shares: the version, the error
 * code table and the error-message convention.
 *
 * Errors are values (STYLE.md rule 3): a function returns 0 on success or a
 * negative EMBER_E* code. Where the caller may want to know *what* was wrong,
 * the function also takes `char *err`, a caller-owned buffer of at least
 * EMBER_ERR_MAX bytes (NULL allowed), and writes one line of detail into it.
 * Nothing in libember prints or exits.
 *
 * Thread safety: everything here is pure; call from any thread.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>

#define EMBER_VERSION "0.1.0"
#define EMBER_ERR_MAX 256

/* X(name, value, message): one table yields the enum and ember_strerror(). */
#define EMBER_ERRNO_MAP(X)                                   \
	X(NOMEM, -1, "out of memory")                            \
	X(IO, -2, "i/o error")                                   \
	X(FORMAT, -3, "malformed input")                         \
	X(UNSUPPORTED, -4, "not supported")                      \
	X(INVAL, -5, "invalid argument")                         \
	X(RANGE, -6, "value out of range")                       \
	X(NOTFOUND, -7, "not found")                             \
	X(TYPE, -8, "wrong type")                                \
	X(BUSY, -9, "resource busy")                             \
	X(CANCELED, -10, "canceled")                             \
	X(FULL, -11, "capacity exhausted")                       \
	X(CONTEXT, -12, "context length exceeded")

enum ember_errno {
	EMBER_OK = 0,
#define EMBER__ERRNO_ENUM(name, value, msg) EMBER_E##name = (value),
	EMBER_ERRNO_MAP(EMBER__ERRNO_ENUM)
#undef EMBER__ERRNO_ENUM
};

/* Returns a static string for `code` ("unknown error" for codes not in the
 * table). Never NULL. */
const char *ember_strerror(int code);

/* Formats one line of detail into `err` (EMBER_ERR_MAX bytes; NULL is
 * ignored) and returns `code`, so error paths read
 * `return ember_seterr(err, EMBER_EFORMAT, "tensor %s: ...", name);` */
int ember_seterr(char *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
