/*
 * buf.h - the growth rule of every growable byte buffer in Ember (JSON and
 * SSE writers, request bodies, streamed text, the GGUF writer): capacity
 * doubles from a first size until the request fits, sizes are checked
 * against overflow, and a failed allocation leaves the buffer as it was.
 * The owners keep their own structs (their fields are their API); they
 * grow them through buf_grow().
 * Pure functions over caller storage: any thread, one buffer per thread.
 */
#ifndef EMBER_BUF_H
#define EMBER_BUF_H

#include <stddef.h>

/*
 * `data` is the address of the buffer pointer (a char ** or uint8_t **).
 * Makes the buffer (capacity *cap bytes, may be NULL with 0) hold at least
 * `need` bytes: doubles from max(*cap, first) and, when `limit` is not 0,
 * never past max(need, limit). Contents are kept. Returns 0, or
 * EMBER_ENOMEM (sizes past SIZE_MAX / 2, or realloc failed) with *data and
 * *cap unchanged.
 */
int buf_grow(void *data, size_t *cap, size_t need, size_t first, size_t limit);

#endif
