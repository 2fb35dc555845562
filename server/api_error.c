/* api_error.c - OpenAI-shaped error bodies. See api_error.h. */
#include "api_error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void api_error_set(struct api_error *e, int status, enum api_error_type type,
		   const char *param, const char *code, const char *fmt, ...)
{
	va_list ap;

	memset(e, 0, sizeof(*e));
	e->status = status;
	e->type = type;
	if (param != NULL)
		snprintf(e->param, sizeof(e->param), "%s", param);
	if (code != NULL)
		snprintf(e->code, sizeof(e->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

const char *api_error_type_name(enum api_error_type type)
{
	switch (type) {
	case API_ERR_INVALID_REQUEST: return "invalid_request_error";
	case API_ERR_AUTHENTICATION: return "authentication_error";
	case API_ERR_NOT_FOUND: return "not_found_error";
	case API_ERR_RATE_LIMIT: return "rate_limit_error";
	case API_ERR_SERVER:
	case API_ERR_NONE: break;
	}
	return "server_error";
}

static json_t *str_or_null(const char *s)
{
	return *s ? json_string(s) : json_null();
}

char *api_error_json(const struct api_error *e)
{
	json_t *root, *msg;
	char *out;

	/* Messages may quote client bytes; json_string rejects invalid UTF-8,
	 * so fall back to a fixed message rather than failing the response. */
	msg = json_string(e->message);
	if (msg == NULL)
		msg = json_string("invalid request");
	root = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", msg,
			 "type", api_error_type_name(e->type),
			 "param", str_or_null(e->param),
			 "code", str_or_null(e->code));
	if (root == NULL)
		return NULL;
	out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return out;
}
