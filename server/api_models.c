/* api_models.c - the model list and model objects. See api_models.h. */
#include "api_models.h"

#include <jansson.h>
#include <string.h>

#include "api_error.h"

int api_models_vocab_type(const char *model)
{
	static const char *const names[] = {"llama", "gpt2", "bert", "t5", "rwkv"};
	size_t i;

	for (i = 0; model != NULL && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(model, names[i]) == 0)
			return (int)i + 1;
	return 0;
}

/* One model object; NULL when out of memory. */
static json_t *model_object(struct backend *b, const char *id, time_t started)
{
	struct backend_model_info mi;
	json_t *o = json_pack("{s:s,s:s,s:I,s:s}", "id", id, "object", "model",
			      "created", (json_int_t)started, "owned_by", "ember");

	if (o == NULL || backend_model_info(b, &mi) != 0)
		return o;
	json_object_set_new(o, "meta",
			    json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s}",
				      "vocab_type", api_models_vocab_type(mi.vocab_type),
				      "n_vocab", (json_int_t)mi.n_vocab,
				      "n_ctx_train", (json_int_t)mi.n_ctx_train,
				      "n_embd", (json_int_t)mi.n_embd,
				      "n_params", (json_int_t)mi.n_params,
				      "size", (json_int_t)mi.file_size,
				      "n_ctx", (json_int_t)mi.n_ctx,
				      "n_layer", (json_int_t)mi.n_layer,
				      "arch", mi.arch));
	return o;
}

static void respond(struct http_req *req, json_t *o)
{
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

void api_models_list(struct backend *b, struct http_req *req, time_t started)
{
	const char *id = backend_model_id(b);
	json_t *data = json_array();

	if (data != NULL && id != NULL)
		json_array_append_new(data, model_object(b, id, started));
	respond(req, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

void api_models_get(struct backend *b, struct http_req *req, time_t started,
		    const char *id)
{
	const char *served = backend_model_id(b);
	struct api_error e;

	if (served == NULL || strcmp(id, served) != 0) {
		api_error_set(&e, 404, API_ERR_INVALID_REQUEST, "model", "model_not_found",
			      "The model '%.64s' does not exist (this server serves %s).",
			      id, served ? served : "no model");
		http_respond_error(req, &e);
		return;
	}
	respond(req, model_object(b, id, started));
}
