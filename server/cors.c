/* cors.c - the CORS allow list. See cors.h. */
#include "cors.h"

#include "config.h"

#include <stddef.h>
#include <string.h>

const char *cors_allow_origin(const char *origins, const char *origin)
{
	size_t olen, len;
	const char *p, *s;

	if (origins == NULL || origin == NULL || *origin == '\0')
		return NULL;
	olen = strlen(origin);
	for (p = origins; config_list_next(&p, &s, &len);) {
		if (len == 1 && *s == '*')
			return "*";
		if (len == olen && memcmp(s, origin, olen) == 0)
			return origin;
	}
	return NULL;
}

/* RFC 9110 token characters, the only ones a header name has. */
static int header_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

const char *cors_allow_headers(const char *allowed, const char *requested,
			       char *buf, size_t size)
{
	size_t i, n;

	if (allowed != NULL && *allowed != '\0')
		return allowed;
	if (requested == NULL || (n = strlen(requested)) == 0 || n >= size)
		return CORS_ALLOW_HEADERS;
	/* Untrusted text goes back out as a header: only names and lists. */
	for (i = 0; i < n; i++)
		if (!header_char(requested[i]) && requested[i] != ',' && requested[i] != ' ')
			return CORS_ALLOW_HEADERS;
	memcpy(buf, requested, n + 1);
	return buf;
}
