/* routes.c - the route table and its handlers. See routes.h. */
#include "routes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_embed.h"
#include "api_error.h"
#include "api_fields.h"
#include "api_llamacpp.h"
#include "api_models.h"
#include "api_native.h"
#include "api_ollama.h"
#include "api_openai.h"
#include "generation.h"
#include "server_impl.h"

/* ---- handlers -------------------------------------------------------------- */

static void handle_health(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	const char *msg = NULL;
	enum backend_status st;
	json_t *o;

	(void)m;
	backend_model_changed(srv->backend);
	st = backend_status(srv->backend, &msg);
	switch (st) {
	case BACKEND_READY:
		o = json_pack("{s:s}", "status", "ok");
		break;
	case BACKEND_LOADING:
		o = json_pack("{s:s}", "status", "loading");
		break;
	case BACKEND_NO_MODEL:
		o = json_pack("{s:s}", "status", "no_model");
		break;
	default:
		o = json_pack("{s:s,s:s}", "status", "error", "message", msg);
		break;
	}
	http_respond_json(req, st == BACKEND_READY ? 200 : 503,
			  o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

static void handle_metrics(struct server *srv, struct http_req *req,
			   const struct route_match *m)
{
	size_t len = 0;
	char *text;

	(void)m;
	srv->metrics.in_flight = srv->http.in_flight;
	srv->metrics.connections = srv->http.n_conns;
	srv->metrics.header_timeouts = srv->http.n_header_timeouts;
	srv->metrics.streams_unread = srv->http.n_stream_unread;
	backend_refresh_metrics(srv->backend);
	text = metrics_render(&srv->metrics, &len);
	if (text == NULL) {
		http_respond_json(req, 500, NULL);
		return;
	}
	http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", text,
		     len);
	free(text);
}

static void handle_models(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	(void)m;
	api_models_list(srv->backend, req, srv->started);
}

static void handle_model(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	char id[256];

	if (router_param(m, "id", id, sizeof(id)) < 0)
		id[0] = '\0';
	api_models_get(srv->backend, req, srv->started, id);
}

/* Parses an OpenAI-style body of `kind` and hands it to a generation
 * answering in `fmt`; `session` extends that backend session (0: none). */
static void start_generation(struct server *srv, struct http_req *req,
			     enum gen_kind kind, enum api_format fmt,
			     uint64_t session)
{
	struct api_limits lim = {.max_tokens = (int32_t)srv->cfg->max_tokens};
	struct gen_request gr;
	struct api_error e;
	const char *id;
	int rc;

	if (api_openai_check_content_type(
		    http_req_header(req, "Content-Type"), &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	rc = kind == GEN_CHAT
		? api_openai_parse_chat(req->body, req->body_len, &lim, &gr, &e)
		: api_openai_parse_completion(req->body, req->body_len, &lim,
					      &gr, &e);
	if (rc != 0) {
		http_respond_error(req, &e);
		return;
	}
	/* One model per daemon: naming another is a client mistake worth an
	 * answer (GET /v1/models lists the one we serve), not a silent
	 * substitution. Absent or empty means "the model". */
	id = backend_model_id(srv->backend);
	if (gr.model != NULL && gr.model[0] != '\0' && id != NULL &&
	    strcmp(gr.model, id) != 0) {
		api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "model", "model_not_found",
			      "The model '%.64s' is not served here; this server serves '%s' "
			      "(GET /v1/models).", gr.model, id);
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	if (api_fields_check_vocab(srv->backend, &gr, &e) != 0) {
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	/* suffix: fill in the middle, with the model's FIM tokens */
	if (gr.suffix != NULL &&
	    api_llamacpp_fim(srv->backend, &gr, gr.suffix, NULL, "suffix",
			     &e) != 0) {
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	gr.session = session;
	generation_start(&srv->loop, srv->backend, req, &gr, fmt, id);
}

static void handle_chat(struct server *srv, struct http_req *req,
			const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_CHAT, API_FMT_CHAT, 0);
}

static void handle_completions(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_COMPLETION, API_FMT_COMPLETION, 0);
}

static void handle_generate(struct server *srv, struct http_req *req,
			    const struct route_match *m)
{
	(void)m;
	start_generation(srv, req, GEN_COMPLETION, API_FMT_NATIVE, 0);
}

/* POST /apply-template: {"messages": [...], "tools": [...]} -> {"prompt":
 * "..."}, the text a chat request with those messages would feed the model
 * (as llama-server's endpoint). */
static void handle_apply_template(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	struct api_limits lim = {.max_tokens = (int32_t)srv->cfg->max_tokens,
				 .render_only = true};
	struct gen_request gr;
	struct api_error e;
	char err[EMBER_ERR_MAX] = "", *prompt = NULL;
	size_t len = 0;
	json_t *o;

	(void)m;
	if (api_openai_check_content_type(http_req_header(req, "Content-Type"), &e) != 0 ||
	    api_openai_parse_chat(req->body, req->body_len, &lim, &gr, &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	int rc = backend_apply_template(srv->backend, &gr, &prompt, &len, err);
	gen_request_free(&gr);
	if (rc != 0) {
		if (rc == EMBER_EBUSY)
			api_error_set(&e, 503, API_ERR_SERVER, NULL, "model_not_ready", "%s", err);
		else if (rc == EMBER_EINVAL)
			api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "messages", "invalid_value", "%s", err);
		else
			api_error_set(&e, 500, API_ERR_SERVER, NULL, NULL, "%s", err);
		http_respond_error(req, &e);
		return;
	}
	o = json_pack("{s:s%}", "prompt", prompt, len);
	free(prompt);
	http_respond_json(req, 200, o ? json_dumps(o, JSON_COMPACT) : NULL);
	json_decref(o);
}

/* llama-server's POST /completion (infill false) and POST /infill. */
static void start_llamacpp(struct server *srv, struct http_req *req, bool infill)
{
	struct gen_request gr;
	struct api_error e;
	char *middle = NULL;

	if (api_openai_check_content_type(http_req_header(req, "Content-Type"), &e) != 0 ||
	    api_llamacpp_parse(req->body, req->body_len, (int32_t)srv->cfg->max_tokens,
			       infill, &gr, &middle, &e) != 0) {
		http_respond_error(req, &e);
		return;
	}
	if (infill && api_llamacpp_fim(srv->backend, &gr, gr.suffix, middle,
				       "input_suffix", &e) != 0) {
		free(middle);
		gen_request_free(&gr);
		http_respond_error(req, &e);
		return;
	}
	free(middle);
	free(gr.suffix);
	gr.suffix = NULL;
	generation_start(&srv->loop, srv->backend, req, &gr, API_FMT_LLAMACPP,
			 backend_model_id(srv->backend));
}

static void handle_llama_completion(struct server *srv, struct http_req *req,
				    const struct route_match *m)
{
	(void)m;
	start_llamacpp(srv, req, false);
}

static void handle_infill(struct server *srv, struct http_req *req,
			  const struct route_match *m)
{
	(void)m;
	start_llamacpp(srv, req, true);
}

static void handle_props(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	(void)m;
	api_llamacpp_props(srv->backend, srv->cfg, req);
}

static void handle_slots(struct server *srv, struct http_req *req,
			 const struct route_match *m)
{
	(void)m;
	api_llamacpp_slots(srv->backend, srv->cfg, req);
}

static void handle_slot_action(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_llamacpp_slot_action(srv->cfg, req);
}

static void handle_tokenize(struct server *srv, struct http_req *req,
			    const struct route_match *m)
{
	(void)m;
	api_native_tokenize(&srv->loop, srv->backend, req);
}

static void handle_detokenize(struct server *srv, struct http_req *req,
			      const struct route_match *m)
{
	(void)m;
	api_native_detokenize(&srv->loop, srv->backend, req);
}

/* The {id} of a session route ("" when too long: not found later). */
static void session_param(const struct route_match *m, char *buf, size_t size)
{
	if (router_param(m, "id", buf, size) < 0)
		buf[0] = '\0';
}

static void handle_session_new(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_native_session_new(srv->backend, req);
}

static void handle_session_get(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_get(srv->backend, req, id);
}

static void handle_session_delete(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_delete(srv->backend, req, id);
}

static void handle_session_clone(struct server *srv, struct http_req *req,
				 const struct route_match *m)
{
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	api_native_session_clone(srv->backend, req, id);
}

static void handle_session_generate(struct server *srv, struct http_req *req,
				    const struct route_match *m)
{
	uint64_t sid;
	char id[API_SESSION_ID_MAX];

	session_param(m, id, sizeof(id));
	if (api_native_parse_session_id(id, backend_replica_id(srv->backend),
					&sid) != 0) {
		api_native_respond_session_not_found(srv->backend, req, id);
		return;
	}
	start_generation(srv, req, GEN_COMPLETION, API_FMT_NATIVE, sid);
}

/* ---- embeddings and Ollama's API (api_embed.h, api_ollama.h) ---------- */

static void handle_embeddings(struct server *srv, struct http_req *req,
			      const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req, API_EMBED_OPENAI,
			 backend_model_id(srv->backend));
}

static void handle_embedding_llama(struct server *srv, struct http_req *req,
				   const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req, API_EMBED_LLAMA,
			 backend_model_id(srv->backend));
}

static void handle_ollama_embed(struct server *srv, struct http_req *req,
				const struct route_match *m)
{
	(void)m;
	api_embed_handle(&srv->loop, srv->backend, req,
			 strcmp(req->path, "/api/embed") == 0 ? API_EMBED_OLLAMA
							     : API_EMBED_OLLAMA_LEGACY,
			 backend_model_id(srv->backend));
}

static void handle_ollama_root(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)srv;
	(void)m;
	api_ollama_root(req);
}

static void handle_ollama_version(struct server *srv, struct http_req *req,
				  const struct route_match *m)
{
	(void)srv;
	(void)m;
	api_ollama_version(req);
}

static void handle_ollama_tags(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_ollama_tags(srv->backend, req, strcmp(req->path, "/api/ps") == 0);
}

static void handle_ollama_show(struct server *srv, struct http_req *req,
			       const struct route_match *m)
{
	(void)m;
	api_ollama_show(srv->backend, req);
}

static void handle_ollama_generate(struct server *srv, struct http_req *req,
				   const struct route_match *m)
{
	(void)m;
	api_ollama_generate(&srv->loop, srv->backend, req,
			    strcmp(req->path, "/api/chat") == 0,
			    (int32_t)srv->cfg->max_tokens);
}

static const struct route routes[] = {
	{"GET", "/health", handle_health, "health"},
	{"GET", "/metrics", handle_metrics, "metrics"},
	{"GET", "/v1/models", handle_models, "models"},
	{"GET", "/v1/models/{id}", handle_model, "model"},
	{"GET", "/models", handle_models, "models"},
	{"GET", "/models/{id}", handle_model, "model"},
	{"POST", "/chat/completions", handle_chat, "chat_completions"},
	{"POST", "/completions", handle_completions, "completions"},
	{"POST", "/v1/chat/completions", handle_chat, "chat_completions"},
	{"POST", "/v1/completions", handle_completions, "completions"},
	{"POST", "/v1/generate", handle_generate, "generate"},
	{"POST", "/tokenize", handle_tokenize, "tokenize"},
	{"POST", "/apply-template", handle_apply_template, "apply_template"},
	{"POST", "/completion", handle_llama_completion, "llama_completion"},
	{"POST", "/infill", handle_infill, "infill"},
	{"GET", "/props", handle_props, "props"},
	{"GET", "/slots", handle_slots, "slots"},
	{"POST", "/slots/{id}", handle_slot_action, "slots"},
	{"POST", "/detokenize", handle_detokenize, "detokenize"},
	{"POST", "/v1/sessions", handle_session_new, "sessions"},
	{"GET", "/v1/sessions/{id}", handle_session_get, "session"},
	{"DELETE", "/v1/sessions/{id}", handle_session_delete, "session"},
	{"POST", "/v1/sessions/{id}/generate", handle_session_generate,
	 "session_generate"},
	{"POST", "/v1/sessions/{id}/clone", handle_session_clone,
	 "session_clone"},
	{"POST", "/v1/embeddings", handle_embeddings, "embeddings"},
	{"POST", "/embeddings", handle_embeddings, "embeddings"},
	{"POST", "/embedding", handle_embedding_llama, "embedding"},
	{"GET", "/", handle_ollama_root, "ollama_root"},
	{"GET", "/api/version", handle_ollama_version, "ollama_version"},
	{"GET", "/api/tags", handle_ollama_tags, "ollama_tags"},
	{"GET", "/api/ps", handle_ollama_tags, "ollama_ps"},
	{"POST", "/api/show", handle_ollama_show, "ollama_show"},
	{"POST", "/api/generate", handle_ollama_generate, "ollama_generate"},
	{"POST", "/api/chat", handle_ollama_generate, "ollama_chat"},
	{"POST", "/api/embed", handle_ollama_embed, "ollama_embed"},
	{"POST", "/api/embeddings", handle_ollama_embed, "ollama_embeddings"},
};

const struct route *routes_table(size_t *n)
{
	*n = sizeof(routes) / sizeof(routes[0]);
	return routes;
}

