/* auth.c - Bearer API keys. See auth.h. */
#include "auth.h"

#include "config.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

/* Equal in time that depends only on the lengths, never on the bytes. */
static unsigned ct_differs(const char *a, size_t alen, const char *b,
			   size_t blen)
{
	unsigned diff = alen != blen;
	size_t i;

	for (i = 0; i < blen; i++)
		diff |= (unsigned char)b[i] ^
			(unsigned char)(i < alen ? a[i] : 0);
	return diff;
}

bool auth_check(const char *keys, const char *authorization)
{
	const char *tok, *p, *key;
	size_t toklen, keylen;
	unsigned ok = 0;

	if (keys == NULL || *keys == '\0')
		return true;
	if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7))
		return false;
	tok = authorization + 7;
	while (*tok == ' ')
		tok++;
	toklen = strlen(tok);
	while (toklen > 0 && tok[toklen - 1] == ' ')
		toklen--;
	if (toklen == 0)
		return false;
	/* Every key is compared (no early exit), so timing is the same
	 * whichever key matched. */
	for (p = keys; config_list_next(&p, &key, &keylen);)
		if (keylen > 0)
			ok |= !ct_differs(tok, toklen, key, keylen);
	return ok != 0;
}
