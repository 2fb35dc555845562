/* ember.c - the error table (see ember.h). */
#include "ember.h"

#include <stdarg.h>
#include <stdio.h>

const char *ember_strerror(int code)
{
	switch (code) {
	case EMBER_OK:
		return "ok";
#define EMBER__ERRNO_CASE(name, value, msg) \
	case EMBER_E##name:                     \
		return msg;
		EMBER_ERRNO_MAP(EMBER__ERRNO_CASE)
#undef EMBER__ERRNO_CASE
	}
	return "unknown error";
}

int ember_seterr(char *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return code;
	va_start(ap, fmt);
	vsnprintf(err, EMBER_ERR_MAX, fmt, ap);
	va_end(ap);
	return code;
}
