/* buf.c - the growth rule for byte buffers (buf.h). */
#include "buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

int buf_grow(void *data, size_t *cap, size_t need, size_t first, size_t limit)
{
	char *p, *old;
	size_t c;

	if (need <= *cap)
		return 0;
	if (need > SIZE_MAX / 2)
		return EMBER_ENOMEM;
	c = *cap > first ? *cap : first;
	if (c == 0)
		c = 1;
	while (c < need)
		c *= 2;
	if (limit && c > limit)
		c = need > limit ? need : limit;
	memcpy(&old, data, sizeof(old));
	p = realloc(old, c);
	if (p == NULL)
		return EMBER_ENOMEM;
	memcpy(data, &p, sizeof(p));
	*cap = c;
	return 0;
}
