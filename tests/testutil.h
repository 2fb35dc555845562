/*
 * testutil.h - small helpers shared by the Check suites (not a suite).
 */
#ifndef EMBER_TESTUTIL_H
#define EMBER_TESTUTIL_H

#include <stddef.h>

/* The whole file at `path`, NUL-terminated (malloc'd: the caller frees),
 * its length in *len; NULL if it cannot be read. */
char *test_read_file(const char *path, size_t *len);

#endif
