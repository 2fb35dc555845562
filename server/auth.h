/*
 * auth.h - API keys: `Authorization: Bearer <key>` checked against the
 * configured comma-separated list (config api_key). The comparison takes
 * the same time whatever the bytes of the keys, so response timing does
 * not reveal how much of a guess was right. Pure: any thread.
 */
#ifndef EMBER_AUTH_H
#define EMBER_AUTH_H

#include <stdbool.h>

/* Returns true if auth is off (`keys` NULL or "") or if `authorization`
 * (the header value, NULL if absent) is "Bearer <k>" for a k in `keys`.
 * Spaces around keys in the list are ignored; the scheme is matched
 * case-insensitively, the key exactly. */
bool auth_check(const char *keys, const char *authorization);

#endif
