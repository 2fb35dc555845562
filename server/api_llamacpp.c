/* api_llamacpp.c - llama-server's native endpoints. See api_llamacpp.h. */
#include "api_llamacpp.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"
#include "ember.h"

/* llama-server's names for what OpenAI calls otherwise: the body is
 * translated, validated by the OpenAI parser, and errors name the
 * llama.cpp field again. */
static const char *const renames[][2] = {
	{"n_predict", "max_tokens"},
	{"n_probs", "logprobs"},
};

/* llama-server's defaults where they differ from OpenAI's. */
static const struct {
	const char *key;
	double value;
} defaults[] = {
	{"temperature", 0.8}, {"top_k", 40}, {"top_p", 0.95}, {"min_p", 0.05},
};

/* Knobs Ember's sampler lacks: accepted only at their neutral value. */
static const struct {
	const char *key;
	double neutral;
} neutral[] = {
	{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}, {"dynatemp_range", 0},
	{"xtc_probability", 0}, {"dry_multiplier", 0}, {"n_indent", 0},
	{"t_max_predict_ms", 0}, {"n_discard", 0},
};

/* Flags that change the output or its shape when true. */
static const char *const refused_true[] = {
	"ignore_eos", "return_tokens", "post_sampling_probs", "timings_per_token",
	"return_progress",
};

/* Fields that must be absent or empty. */
static const char *const refused_nonempty[] = {
	"logit_bias", "samplers", "lora", "image_data", "multimodal_data",
	"response_fields", "input_extra",
};

static int unsupported(struct api_error *e, const char *param, const char *why)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "unsupported_parameter",
		      "'%s' is not supported: %s", param, why);
	return EMBER_EINVAL;
}

static int wrong_type(struct api_error *e, const char *param, const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_type",
		      "Invalid type for '%s': expected %s.", param, what);
	return EMBER_EINVAL;
}

static bool empty(json_t *v)
{
	return v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	       (json_is_object(v) && json_object_size(v) == 0) ||
	       (json_is_string(v) && json_string_length(v) == 0);
}

static int check_unsupported(json_t *root, bool infill, struct api_error *e)
{
	size_t i;
	json_t *v;

	for (i = 0; i < sizeof(neutral) / sizeof(neutral[0]); i++) {
		v = json_object_get(root, neutral[i].key);
		if (v != NULL && !json_is_null(v) &&
		    (!json_is_number(v) || json_number_value(v) != neutral[i].neutral))
			return unsupported(e, neutral[i].key, "Ember's sampler has no such "
					   "step (only its neutral value is accepted).");
	}
	for (i = 0; i < sizeof(refused_true) / sizeof(refused_true[0]); i++)
		if (json_is_true(json_object_get(root, refused_true[i])))
			return unsupported(e, refused_true[i], "not implemented.");
	for (i = 0; i < sizeof(refused_nonempty) / sizeof(refused_nonempty[0]); i++) {
		if (!infill && !strcmp(refused_nonempty[i], "input_extra"))
			continue;
		if (!empty(json_object_get(root, refused_nonempty[i])))
			return unsupported(e, refused_nonempty[i], "not implemented.");
	}
	return 0;
}

/* repeat_penalty and repeat_last_n, which OpenAI has not. */
static int read_repeat(json_t *root, struct gen_request *gr, struct api_error *e)
{
	json_t *v;

	if ((v = json_object_get(root, "repeat_penalty")) != NULL && !json_is_null(v)) {
		if (!json_is_number(v))
			return wrong_type(e, "repeat_penalty", "a number");
		if (!(json_number_value(v) > 0 && json_number_value(v) <= 10))
			return unsupported(e, "repeat_penalty", "it must be in (0, 10].");
		gr->repeat_penalty = (float)json_number_value(v);
	}
	if ((v = json_object_get(root, "repeat_last_n")) != NULL && !json_is_null(v)) {
		json_int_t n;

		if (!json_is_integer(v))
			return wrong_type(e, "repeat_last_n", "an integer");
		n = json_integer_value(v);
		if (n < -1 || n > 65536)
			return unsupported(e, "repeat_last_n", "it must be in [-1, 65536].");
		/* -1 is "the whole context" in llama.cpp: the largest window here */
		gr->repeat_last_n = n < 0 ? 65536 : (int32_t)n;
	}
	return 0;
}

/* Renames llama.cpp's fields in a copy of the body and fills its defaults. */
static int translate(json_t *root, struct api_error *e)
{
	size_t i;
	json_t *v;

	for (i = 0; i < sizeof(renames) / sizeof(renames[0]); i++) {
		if ((v = json_object_get(root, renames[i][0])) == NULL)
			continue;
		json_incref(v);
		json_object_del(root, renames[i][0]);
		json_object_del(root, renames[i][1]);
		/* n_predict -1 (or n_probs 0) mean "none": the default */
		if ((json_is_integer(v) && json_integer_value(v) == -1 &&
		     !strcmp(renames[i][0], "n_predict")) ||
		    (json_is_integer(v) && json_integer_value(v) == 0 &&
		     !strcmp(renames[i][0], "n_probs")))
			json_decref(v);
		else
			json_object_set_new(root, renames[i][1], v);
	}
	v = json_object_get(root, "seed");
	if (json_is_integer(v) && json_integer_value(v) == -1)
		json_object_del(root, "seed");
	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (json_object_get(root, defaults[i].key) == NULL &&
		    json_object_set_new(root, defaults[i].key,
					!strcmp(defaults[i].key, "top_k")
						? json_integer((json_int_t)defaults[i].value)
						: json_real(defaults[i].value)) != 0)
			goto oom;
	return 0;
oom:
	return api_error_oom(e);
}

/* An error the OpenAI parser raised names the llama.cpp field again. */
static void rename_back(struct api_error *e)
{
	size_t i;

	for (i = 0; i < sizeof(renames) / sizeof(renames[0]); i++) {
		char *at;

		if (strcmp(e->param, renames[i][1]) != 0)
			continue;
		snprintf(e->param, sizeof(e->param), "%s", renames[i][0]);
		at = strstr(e->message, renames[i][1]);
		if (at != NULL) {
			char rest[sizeof(e->message)];

			snprintf(rest, sizeof(rest), "%s", at + strlen(renames[i][1]));
			snprintf(at, sizeof(e->message) - (size_t)(at - e->message), "%s%s",
				 renames[i][0], rest);
		}
	}
}

/* /infill's input_prefix / input_suffix / prompt: the prefix goes where
 * the OpenAI parser reads "prompt". */
static int infill_fields(json_t *root, char **suffix, char **middle, struct api_error *e)
{
	json_t *pre = json_object_get(root, "input_prefix");
	json_t *suf = json_object_get(root, "input_suffix");
	json_t *mid = json_object_get(root, "prompt");

	if (pre == NULL || json_is_null(pre))
		pre = json_string("");
	else if (!json_is_string(pre))
		return wrong_type(e, "input_prefix", "a string");
	else
		json_incref(pre);
	if (suf != NULL && !json_is_null(suf) && !json_is_string(suf)) {
		json_decref(pre);
		return wrong_type(e, "input_suffix", "a string");
	}
	if (mid != NULL && !json_is_null(mid) && !json_is_string(mid)) {
		json_decref(pre);
		return wrong_type(e, "prompt", "a string");
	}
	if ((json_is_string(suf) && strlen(json_string_value(suf)) != json_string_length(suf)) ||
	    (json_is_string(mid) && strlen(json_string_value(mid)) != json_string_length(mid))) {
		json_decref(pre);
		return unsupported(e, json_is_string(suf) && strlen(json_string_value(suf)) !=
				   json_string_length(suf) ? "input_suffix" : "prompt",
				   "a NUL character (\\u0000) is supported in input_prefix only.");
	}
	*suffix = strdup(json_is_string(suf) ? json_string_value(suf) : "");
	*middle = strdup(json_is_string(mid) ? json_string_value(mid) : "");
	if (pre == NULL || *suffix == NULL || *middle == NULL ||
	    json_object_set_new(root, "prompt", pre) != 0) {
		return api_error_oom(e);
	}
	return 0;
}

int api_llamacpp_parse(const char *body, size_t len, int32_t max_tokens, bool infill,
		       struct gen_request *gr, char **middle, struct api_error *e)
{
	struct api_limits lim = {.max_tokens = max_tokens};
	char *suffix = NULL;
	json_t *root, *p;
	int rc;

	*middle = NULL;
	gen_request_init(gr, GEN_COMPLETION, max_tokens);
	memset(e, 0, sizeof(*e));
	root = api_openai_decode_object(body, len, e);
	if (root == NULL)
		return EMBER_EINVAL;
	/* OpenAI-only fields keep their llama.cpp meaning (none) */
	json_object_del(root, "logprobs");
	json_object_del(root, "echo");
	json_object_del(root, "suffix");
	if ((rc = check_unsupported(root, infill, e)) != 0)
		goto out;
	if (infill) {
		if ((rc = infill_fields(root, &suffix, middle, e)) != 0)
			goto out;
	} else if ((p = json_object_get(root, "prompt")) != NULL && !json_is_string(p) &&
		   !(json_is_array(p) && json_array_size(p) == 1 &&
		     json_is_string(json_array_get(p, 0)))) {
		rc = wrong_type(e, "prompt", "a string (token prompts are not supported "
				"on /completion)");
		goto out;
	}
	if ((rc = translate(root, e)) != 0)
		goto out;
	if ((rc = api_openai_parse_root(root, &lim, GEN_COMPLETION, gr, e)) != 0) {
		rename_back(e);
		goto out;
	}
	if ((rc = read_repeat(root, gr, e)) != 0)
		goto out;
	if (gr->n > 1) { /* llama-server's answer has one completion */
		rc = unsupported(e, "n", "only one completion per request (n = 1) on "
				 "/completion and /infill.");
		goto out;
	}
	gr->suffix = suffix;
	suffix = NULL;
out:
	json_decref(root);
	free(suffix);
	if (rc != 0) {
		gen_request_free(gr);
		free(*middle);
		*middle = NULL;
	}
	return rc;
}

int api_llamacpp_fim(struct backend *b, struct gen_request *gr, const char *suffix,
		     const char *middle, const char *param, struct api_error *e)
{
	char err[EMBER_ERR_MAX] = "", *out = NULL;
	size_t len = 0, mlen = middle ? strlen(middle) : 0;
	int rc;

	rc = backend_fim_prompt(b, gr->prompt, gr->prompt_len, suffix, strlen(suffix),
				&out, &len, err);
	if (rc == EMBER_EBUSY) {
		api_error_not_loaded(e, backend_status(b, NULL) == BACKEND_LOADING);
		return rc;
	}
	if (rc == EMBER_EUNSUPPORTED)
		return unsupported(e, param, "this model has no fill-in-the-middle tokens "
				   "(tokenizer.ggml.fim_pre/suf/mid_token_id).");
	if (rc == 0 && mlen > 0) {
		char *p = realloc(out, len + mlen + 1);

		if (p == NULL)
			rc = EMBER_ENOMEM;
		else {
			memcpy(p + len, middle, mlen + 1);
			out = p;
			len += mlen;
		}
	}
	if (rc != 0) {
		free(out);
		api_error_set(e, 500, API_ERR_SERVER, NULL, NULL, "%s", err);
		return rc;
	}
	free(gr->prompt);
	gr->prompt = out;
	gr->prompt_len = len;
	return 0;
}

static void respond(struct http_req *req, json_t *o)
{
	/* 0.8, not 0.80000000000000004 */
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(7))
				      : NULL);
	json_decref(o);
}

static void not_loaded(struct backend *b, struct http_req *req)
{
	struct api_error e;

	api_error_not_loaded(&e, backend_status(b, NULL) == BACKEND_LOADING);
	http_respond_error(req, &e);
}

void api_llamacpp_props(struct backend *b, const struct config *cfg,
			struct http_req *req)
{
	struct backend_model_info mi;
	json_t *params;

	if (backend_model_info(b, &mi) != 0) {
		not_loaded(b, req);
		return;
	}
	params = json_pack("{s:f,s:i,s:f,s:f,s:I,s:i,s:f,s:i,s:f,s:f}",
			   "temperature", 0.8, "top_k", 40, "top_p", 0.95, "min_p", 0.05,
			   "n_predict", (json_int_t)cfg->max_tokens, "seed", -1,
			   "repeat_penalty", 1.0, "repeat_last_n", 64,
			   "presence_penalty", 0.0, "frequency_penalty", 0.0);
	respond(req, json_pack("{s:{s:I,s:o},s:I,s:s,s:s,s:s,s:{s:b,s:b},s:s}",
			       "default_generation_settings", "n_ctx", (json_int_t)mi.n_ctx,
			       "params", params,
			       "total_slots", (json_int_t)mi.slots_total,
			       "model_path", cfg->model ? cfg->model : "",
			       "model_alias", backend_model_id(b) ? backend_model_id(b) : "",
			       "chat_template", backend_chat_template(b),
			       "modalities", "vision", 0, "audio", 0,
			       "build_info", "ember " EMBER_VERSION));
}

void api_llamacpp_slots(struct backend *b, const struct config *cfg,
			struct http_req *req)
{
	struct backend_model_info mi;
	json_t *a;
	uint32_t i;

	(void)cfg;
	if (backend_model_info(b, &mi) != 0) {
		not_loaded(b, req);
		return;
	}
	a = json_array();
	/* The engine counts busy slots; it does not say which, so the first
	 * ones are marked (documented in the header and README). */
	for (i = 0; a != NULL && i < mi.slots_total; i++)
		json_array_append_new(a, json_pack("{s:I,s:I,s:I,s:b}", "id", (json_int_t)i,
						   "id_task", (json_int_t)-1, "n_ctx",
						   (json_int_t)mi.n_ctx, "is_processing",
						   i < mi.slots_busy));
	respond(req, a);
}

void api_llamacpp_slot_action(const struct config *cfg, struct http_req *req)
{
	struct api_error e;

	if (cfg->api_key == NULL || cfg->api_key[0] == '\0')
		api_error_set(&e, 403, API_ERR_INVALID_REQUEST, NULL, "forbidden",
			      "Slot actions need an API key (config api_key); the slots "
			      "are read-only (GET /slots).");
	else
		api_error_set(&e, 501, API_ERR_SERVER, NULL, "not_implemented",
			      "Slot actions (save, restore, erase) are not implemented.");
	http_respond_error(req, &e);
}
