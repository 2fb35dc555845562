/* cors.c - the CORS allow list. See cors.h. */
#include "cors.h"

#include <stddef.h>
#include <string.h>

const char *cors_allow_origin(const char *origins, const char *origin)
{
	size_t olen;
	const char *p;

	if (origins == NULL || origin == NULL || *origin == '\0')
		return NULL;
	olen = strlen(origin);
	for (p = origins; *p != '\0';) {
		const char *end = strchr(p, ','), *s = p, *e;

		if (end == NULL)
			end = p + strlen(p);
		e = end;
		while (s < e && *s == ' ')
			s++;
		while (e > s && e[-1] == ' ')
			e--;
		if (e - s == 1 && *s == '*')
			return "*";
		if ((size_t)(e - s) == olen && memcmp(s, origin, olen) == 0)
			return origin;
		p = *end ? end + 1 : end;
	}
	return NULL;
}
