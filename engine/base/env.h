/*
 * env.h - the engine's EMBER_* environment knobs (kernel levels and
 * experiments, packing, thread-pool spin: not the daemon's configuration,
 * which server/config.c reads from its table). Each is read once where it
 * is used, through these functions, so every knob is parsed the same way:
 * a whole number within stated bounds, or one word of a stated list. A
 * malformed or out-of-range value is never taken in part (atoi("12x"),
 * a negative number wrapped to a size): it is refused with one line
 * naming the variable, and the default stands.
 *
 * An unset or empty variable means the default, silently.
 * Thread safety: getenv() only; call from any thread while no thread
 * changes the environment (the engine reads its knobs at start-up).
 */
#ifndef EMBER_ENV_H
#define EMBER_ENV_H

#include <stddef.h>

/* s (the value of variable `name`) as a decimal whole number in
 * [lo, hi]: 0 and *out set, or EMBER_EINVAL with "NAME=VALUE: ..." in err
 * (EMBER_ERR_MAX bytes, NULL allowed) and *out untouched. No sign, no
 * spaces, nothing after the digits. */
int env_parse_size(const char *name, const char *s, size_t lo, size_t hi, size_t *out,
		   char *err);

/* s as one of the n words of `words` (exact, case-sensitive): 0 and *out
 * its index, or EMBER_EINVAL with "NAME=VALUE: ..." (listing the words)
 * in err and *out untouched. */
int env_parse_choice(const char *name, const char *s, const char *const *words, size_t n,
		     size_t *out, char *err);

/* getenv(name) through env_parse_size(): 1 when set and valid (*val is
 * it); 0 when unset or empty, or when refused, *val then untouched (the
 * caller's default) and the refusal written to stderr as
 * "ember: NAME=VALUE: ...; using DEFAULT". */
int env_size(const char *name, size_t lo, size_t hi, size_t *val);

/* getenv(name) through env_parse_choice(), the same way: 1 and *val the
 * word's index, or 0 with *val untouched (a refusal said on stderr,
 * naming the default words[*val]). */
int env_choice(const char *name, const char *const *words, size_t n, size_t *val);

#endif
