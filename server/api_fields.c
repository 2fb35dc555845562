/* api_fields.c - the OpenAI field audit. See api_fields.h. */
#include "api_fields.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"
#include "ember.h"

static int wrong_type(struct api_error *e, const char *param, const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_type",
		      "Invalid type for '%s': expected %s.", param, what);
	return EMBER_EINVAL;
}

/* A field this server cannot honour: 400 naming it and why. */
static int unsupported(struct api_error *e, const char *param, const char *why)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "unsupported_parameter",
		      "'%s' is not supported: %s", param, why);
	return EMBER_EINVAL;
}

static int read_top(json_t *v, const char *param, int32_t *out, struct api_error *e)
{
	json_int_t x;

	if (!json_is_integer(v))
		return wrong_type(e, param, "an integer");
	x = json_integer_value(v);
	if (x < 0 || x > API_MAX_TOP_LOGPROBS) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_value",
			      "'%s' must be in [0, %d].", param, API_MAX_TOP_LOGPROBS);
		return EMBER_EINVAL;
	}
	*out = (int32_t)x;
	return 0;
}

/* chat: "logprobs": bool, "top_logprobs": 0..20 (needs logprobs true). */
static int read_chat_logprobs(json_t *root, struct gen_request *r, struct api_error *e)
{
	json_t *v = api_openai_field(root, "logprobs"), *t = api_openai_field(root, "top_logprobs");
	int rc;

	if (v != NULL) {
		if (!json_is_boolean(v))
			return wrong_type(e, "logprobs", "a boolean");
		r->logprobs = json_is_true(v);
	}
	if (t == NULL)
		return 0;
	if ((rc = read_top(t, "top_logprobs", &r->top_logprobs, e)) != 0)
		return rc;
	if (!r->logprobs) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "top_logprobs", "invalid_value",
			      "'top_logprobs' needs 'logprobs' set to true.");
		return EMBER_EINVAL;
	}
	return 0;
}

/* completions: "logprobs": 0..20 alternatives, "echo", "suffix", "best_of". */
static int read_completion_fields(json_t *root, struct gen_request *r,
				  struct api_error *e)
{
	json_t *v;
	int rc;

	if ((v = api_openai_field(root, "logprobs")) != NULL) {
		if ((rc = read_top(v, "logprobs", &r->top_logprobs, e)) != 0)
			return rc;
		r->logprobs = true;
	}
	if ((v = api_openai_field(root, "echo")) != NULL) {
		if (!json_is_boolean(v))
			return wrong_type(e, "echo", "a boolean");
		r->echo = json_is_true(v);
	}
	if (r->echo && r->logprobs)
		return unsupported(e, "echo", "with 'logprobs', echo needs the prompt's "
				   "log-probabilities, which this server does not compute; "
				   "use echo or logprobs, not both.");
	if ((v = api_openai_field(root, "suffix")) != NULL) {
		if (!json_is_string(v))
			return wrong_type(e, "suffix", "a string");
		if (r->echo)
			return unsupported(e, "suffix", "not together with 'echo'.");
		if (strlen(json_string_value(v)) != json_string_length(v))
			return unsupported(e, "suffix", "it holds a NUL character.");
		if ((r->suffix = strdup(json_string_value(v))) == NULL) {
			return api_error_oom(e);
		}
	}
	if ((v = api_openai_field(root, "best_of")) != NULL) {
		if (!json_is_integer(v))
			return wrong_type(e, "best_of", "an integer");
		if (json_integer_value(v) != 1)
			return unsupported(e, "best_of", "only best_of = 1 (one candidate "
					   "per choice) is supported.");
	}
	return 0;
}

/* "logit_bias": {"token id": bias in [-100, 100], ...}. Ids beyond the
 * vocabulary are found by the server, which knows its size. */
static int read_logit_bias(json_t *root, struct gen_request *r, struct api_error *e)
{
	json_t *v = api_openai_field(root, "logit_bias"), *b;
	const char *key;
	size_t n = 0;

	if (v == NULL)
		return 0;
	if (!json_is_object(v))
		return wrong_type(e, "logit_bias", "an object");
	if (json_object_size(v) == 0)
		return 0;
	if (json_object_size(v) > SAMPLER_MAX_BIAS) {
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "logit_bias", "invalid_value",
			      "'logit_bias' holds at most %d tokens.", SAMPLER_MAX_BIAS);
		return EMBER_EINVAL;
	}
	r->logit_bias = malloc(json_object_size(v) * sizeof(*r->logit_bias));
	if (r->logit_bias == NULL) {
		return api_error_oom(e);
	}
	json_object_foreach(v, key, b) {
		char *end;
		long id = strtol(key, &end, 10);

		if (*key == '\0' || *end != '\0' || id < 0 || id > INT32_MAX) {
			api_error_set(e, 400, API_ERR_INVALID_REQUEST, "logit_bias", "invalid_value",
				      "'logit_bias' keys are token ids (got '%.32s').", key);
			return EMBER_EINVAL;
		}
		if (!json_is_number(b) || !(json_number_value(b) >= -100 &&
					    json_number_value(b) <= 100)) {
			api_error_set(e, 400, API_ERR_INVALID_REQUEST, "logit_bias", "invalid_value",
				      "'logit_bias' values must be numbers in [-100, 100].");
			return EMBER_EINVAL;
		}
		r->logit_bias[n].id = (int32_t)id;
		r->logit_bias[n].bias = (float)json_number_value(b);
		r->n_logit_bias = ++n;
	}
	return 0;
}

/* A field that must be a string and is only a label here. */
static int label(json_t *root, const char *key, struct api_error *e)
{
	json_t *v = api_openai_field(root, key);

	if (v != NULL && !json_is_string(v))
		return wrong_type(e, key, "a string");
	return 0;
}

/* Chat-only fields: each one honoured, accepted as meaningless here (with
 * the reason in README), or refused. */
static int read_chat_fields(json_t *root, struct api_error *e)
{
	json_t *v, *so;
	size_t i;
	int rc;

	if ((v = api_openai_field(root, "store")) != NULL) {
		if (!json_is_boolean(v))
			return wrong_type(e, "store", "a boolean");
		if (json_is_true(v))
			return unsupported(e, "store", "this server keeps no completions.");
	}
	if ((v = api_openai_field(root, "metadata")) != NULL && !json_is_object(v))
		return wrong_type(e, "metadata", "an object");
	if ((v = api_openai_field(root, "service_tier")) != NULL) {
		if (!json_is_string(v))
			return wrong_type(e, "service_tier", "a string");
		if (strcmp(json_string_value(v), "auto") != 0 &&
		    strcmp(json_string_value(v), "default") != 0)
			return unsupported(e, "service_tier", "this server has one tier "
					   "(auto, default).");
	}
	if ((v = api_openai_field(root, "modalities")) != NULL) {
		if (!json_is_array(v))
			return wrong_type(e, "modalities", "an array of strings");
		json_array_foreach(v, i, so)
			if (!json_is_string(so) || strcmp(json_string_value(so), "text") != 0)
				return unsupported(e, "modalities", "only [\"text\"] is "
						   "supported.");
	}
	if (api_openai_field(root, "audio") != NULL)
		return unsupported(e, "audio", "this server has no audio output.");
	if ((v = api_openai_field(root, "prediction")) != NULL) {
		/* Predicted outputs only speed OpenAI up; the answer is the same
		 * without them, so accepting one changes nothing a client sees. */
		if (!json_is_object(v))
			return wrong_type(e, "prediction", "an object");
	}
	if (api_openai_field(root, "reasoning_effort") != NULL)
		return unsupported(e, "reasoning_effort", "the model has no "
				   "reasoning-effort control.");
	if (api_openai_field(root, "verbosity") != NULL)
		return unsupported(e, "verbosity", "the model has no verbosity control.");
	if (api_openai_field(root, "web_search_options") != NULL)
		return unsupported(e, "web_search_options", "this server does not "
				   "search the web.");
	if ((v = api_openai_field(root, "parallel_tool_calls")) != NULL && !json_is_boolean(v))
		return wrong_type(e, "parallel_tool_calls", "a boolean");
	if ((so = api_openai_field(root, "stream_options")) != NULL && json_is_object(so) &&
	    (v = api_openai_field(so, "include_obfuscation")) != NULL) {
		if (!json_is_boolean(v))
			return wrong_type(e, "stream_options.include_obfuscation", "a boolean");
		if (json_is_true(v))
			return unsupported(e, "stream_options.include_obfuscation",
					   "streams carry no obfuscation padding.");
	}
	if ((rc = label(root, "safety_identifier", e)) != 0 ||
	    (rc = label(root, "prompt_cache_key", e)) != 0)
		return rc;
	return 0;
}

int api_fields_read(json_t *root, struct gen_request *r, struct api_error *e)
{
	int rc;

	if ((rc = label(root, "user", e)) != 0 || (rc = read_logit_bias(root, r, e)) != 0)
		return rc;
	if (r->kind == GEN_CHAT) {
		if ((rc = read_chat_logprobs(root, r, e)) != 0 ||
		    (rc = read_chat_fields(root, e)) != 0)
			return rc;
		return 0;
	}
	return read_completion_fields(root, r, e);
}

int api_fields_check_vocab(struct backend *b, const struct gen_request *r,
			   struct api_error *e)
{
	struct backend_model_info mi;
	size_t i;

	if (r->n_logit_bias == 0 || backend_model_info(b, &mi) != 0)
		return 0;
	for (i = 0; i < r->n_logit_bias; i++) {
		if ((uint32_t)r->logit_bias[i].id < mi.n_vocab)
			continue;
		api_error_set(e, 400, API_ERR_INVALID_REQUEST, "logit_bias", "invalid_value",
			      "'logit_bias': token %d is outside the vocabulary (%u tokens).",
			      (int)r->logit_bias[i].id, mi.n_vocab);
		return EMBER_EINVAL;
	}
	return 0;
}
