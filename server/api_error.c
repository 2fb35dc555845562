/* api_error.c - OpenAI-shaped error bodies. See api_error.h. */
#include "api_error.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ember.h"

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

int api_error_oom(struct api_error *e)
{
	api_error_set(e, 500, API_ERR_SERVER, NULL, NULL, "out of memory");
	return EMBER_ENOMEM;
}

/* The one table from the engine's error codes to HTTP answers; codes not
 * here are 500. `param`: whether the caller's param names the culprit. */
static const struct {
	int code;
	int status;
	enum api_error_type type;
	const char *name;
	int retry_after;
	bool param;
} by_code[] = {
	{EMBER_EINVAL, 400, API_ERR_INVALID_REQUEST, "invalid_value", 0, true},
	{EMBER_ERANGE, 400, API_ERR_INVALID_REQUEST, "invalid_value", 0, true},
	{EMBER_ECONTEXT, 400, API_ERR_INVALID_REQUEST, "context_length_exceeded", 0, true},
	{EMBER_ENOTFOUND, 404, API_ERR_NOT_FOUND, "not_found", 0, true},
	{EMBER_EBUSY, 409, API_ERR_INVALID_REQUEST, "busy", 0, false},
	{EMBER_EFULL, 429, API_ERR_RATE_LIMIT, "queue_full", 1, false},
	{EMBER_ECANCELED, 503, API_ERR_SERVER, "cancelled", 0, false},
};

void api_error_from_code(struct api_error *e, int code, const char *param,
			 const char *fmt, ...)
{
	size_t i;
	va_list ap;

	for (i = 0; i < sizeof(by_code) / sizeof(by_code[0]); i++)
		if (by_code[i].code == code)
			break;
	if (i < sizeof(by_code) / sizeof(by_code[0])) {
		api_error_set(e, by_code[i].status, by_code[i].type,
			      by_code[i].param ? param : NULL, by_code[i].name, "%s", "");
		e->retry_after = by_code[i].retry_after;
	} else {
		api_error_set(e, 500, API_ERR_SERVER, NULL, NULL, "%s", "");
	}
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

void api_error_model_failed(struct api_error *e, const char *why)
{
	api_error_set(e, 503, API_ERR_SERVER, NULL, "model_not_loaded",
		      "Model not loaded: %s.", why);
}

void api_error_not_loaded(struct api_error *e, bool loading)
{
	api_error_set(e, 503, API_ERR_SERVER, NULL, "model_not_loaded",
		      "Model not loaded%s.", loading ? " yet" : "");
	if (loading)
		e->retry_after = 5;
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
