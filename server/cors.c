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
