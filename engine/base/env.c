/*
 * env.c - the EMBER_* knobs parsed one way (see env.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "env.h"

int env_parse_size(const char *name, const char *s, size_t lo, size_t hi, size_t *out,
		   char *err)
{
	unsigned long long v;
	char *end;

	/* strtoull alone would take a sign (and negate), spaces and a tail */
	if (s[0] < '0' || s[0] > '9')
		goto bad;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || errno == ERANGE || v < lo || v > hi)
		goto bad;
	*out = (size_t)v;
	return 0;
bad:
	return ember_seterr(err, EMBER_EINVAL, "%s=%.32s: not a whole number in %zu..%zu", name, s,
			    lo, hi);
}

int env_parse_choice(const char *name, const char *s, const char *const *words, size_t n,
		     size_t *out, char *err)
{
	char list[128] = "";
	size_t len = 0;

	for (size_t i = 0; i < n; i++)
		if (strcmp(s, words[i]) == 0) {
			*out = i;
			return 0;
		}
	for (size_t i = 0; i < n && len + 1 < sizeof(list); i++) {
		int w = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", words[i]);
		len += w > 0 ? (size_t)w : 0;
	}
	return ember_seterr(err, EMBER_EINVAL, "%s=%.32s: want one of %s", name, s, list);
}

/* The variable's value; NULL when unset or empty (the default, silently). */
static const char *env__value(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? s : NULL;
}

int env_size(const char *name, size_t lo, size_t hi, size_t *val)
{
	const char *s = env__value(name);
	char err[EMBER_ERR_MAX];

	if (s && env_parse_size(name, s, lo, hi, val, err) != 0)
		fprintf(stderr, "ember: %s; using %zu\n", err, *val);
	else if (s)
		return 1;
	return 0;
}

int env_choice(const char *name, const char *const *words, size_t n, size_t *val)
{
	const char *s = env__value(name);
	char err[EMBER_ERR_MAX];

	if (s && env_parse_choice(name, s, words, n, val, err) != 0)
		fprintf(stderr, "ember: %s; using %s\n", err, *val < n ? words[*val] : "the default");
	else if (s)
		return 1;
	return 0;
}
