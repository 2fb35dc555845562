/* api_native.c - tokenize, detokenize and session endpoints. See
 * api_native.h. */
#include "api_native.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"
#include "jsonw.h"

/* ---- bodies ----------------------------------------------------------- */

/* An empty body is {} where the endpoint has only optional fields. */
static json_t *decode(const char *body, size_t len, bool empty_ok,
		      struct api_error *e)
{
	if (empty_ok && len == 0)
		return json_object();
	return api_openai_decode_object(body, len, e);
}

static int wrong_type(struct api_error *e, const char *param, const char *what)
{
	api_error_set(e, 400, API_ERR_INVALID_REQUEST, param, "invalid_type",
		      "Invalid type for '%s': expected %s.", param, what);
	return EMBER_EINVAL;
}

static int read_flag(json_t *root, const char *key, bool *out,
		     struct api_error *e)
{
	json_t *v = json_object_get(root, key);

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return wrong_type(e, key, "a boolean");
	*out = json_is_true(v);
	return 0;
}

int api_native_parse_tokenize(const char *body, size_t len, char **content,
			      size_t *content_len, bool *add_special,
			      bool *parse_special, struct api_error *e)
{
	json_t *root = decode(body, len, false, e), *v;
	int rc = EMBER_EINVAL;

	*content = NULL;
	*add_special = true;
	*parse_special = false;
	if (root == NULL)
		return EMBER_EINVAL;
	v = json_object_get(root, "content");
	if (!json_is_string(v)) {
		wrong_type(e, "content", "a string");
		goto out;
	}
	if (read_flag(root, "add_special", add_special, e) != 0 ||
	    read_flag(root, "parse_special", parse_special, e) != 0)
		goto out;
	*content_len = json_string_length(v);
	*content = malloc(*content_len + 1);
	if (*content == NULL) {
		rc = api_error_oom(e);
		goto out;
	}
	memcpy(*content, json_string_value(v), *content_len + 1);
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int api_native_parse_detokenize(const char *body, size_t len, int32_t **ids,
				size_t *n, struct api_error *e)
{
	json_t *root = decode(body, len, false, e), *v, *t;
	size_t i;
	int rc = EMBER_EINVAL;

	*ids = NULL;
	*n = 0;
	if (root == NULL)
		return EMBER_EINVAL;
	v = json_object_get(root, "tokens");
	if (!json_is_array(v)) {
		wrong_type(e, "tokens", "an array of integers");
		goto out;
	}
	*ids = malloc((json_array_size(v) + 1) * sizeof(**ids));
	if (*ids == NULL) {
		rc = api_error_oom(e);
		goto out;
	}
	json_array_foreach(v, i, t) {
		if (!json_is_integer(t) || json_integer_value(t) < INT32_MIN ||
		    json_integer_value(t) > INT32_MAX) {
			wrong_type(e, "tokens", "an array of integers");
			goto out;
		}
		(*ids)[i] = (int32_t)json_integer_value(t);
	}
	*n = json_array_size(v);
	rc = 0;
out:
	if (rc != 0) {
		free(*ids);
		*ids = NULL;
	}
	json_decref(root);
	return rc;
}

/* The replica part of a well-formed "sess-<replica>-N": *name and *len,
 * or false for "sess-N" and anything malformed. */
static bool session_replica(const char *s, const char **name, size_t *len)
{
	const char *dash;

	if (strncmp(s, "sess-", 5) != 0)
		return false;
	dash = strrchr(s + 5, '-');
	if (dash == NULL || dash == s + 5 ||
	    (size_t)(dash - (s + 5)) > CONFIG_REPLICA_ID_MAX)
		return false;
	*name = s + 5;
	*len = (size_t)(dash - (s + 5));
	return true;
}

int api_native_parse_session_id(const char *s, const char *replica,
				uint64_t *id)
{
	unsigned long long v;
	const char *num, *name;
	size_t len, rlen = replica ? strlen(replica) : 0;
	char *end;

	if (strncmp(s, "sess-", 5) != 0)
		return EMBER_EINVAL;
	num = s + 5;
	if (rlen > 0) {
		if (!session_replica(s, &name, &len) || len != rlen ||
		    memcmp(name, replica, len) != 0)
			return EMBER_EINVAL;
		num = name + len + 1;
	}
	if (*num < '0' || *num > '9')
		return EMBER_EINVAL;
	errno = 0;
	v = strtoull(num, &end, 10);
	if (*end != '\0' || v == 0 || errno == ERANGE)
		return EMBER_EINVAL;
	*id = (uint64_t)v;
	return 0;
}

void api_native_session_name(const char *replica, uint64_t id, char *buf)
{
	if (replica != NULL && replica[0] != '\0')
		snprintf(buf, API_SESSION_ID_MAX, "sess-%s-%" PRIu64, replica,
			 id);
	else
		snprintf(buf, API_SESSION_ID_MAX, "sess-%" PRIu64, id);
}

void api_native_respond_session_not_found(struct backend *b,
					  struct http_req *req, const char *s)
{
	const char *mine = backend_replica_id(b), *name;
	struct api_error e;
	size_t len;

	if (session_replica(s, &name, &len) &&
	    (mine == NULL || strlen(mine) != len ||
	     memcmp(mine, name, len) != 0))
		api_error_set(&e, 404, API_ERR_NOT_FOUND, "session",
			      "session_not_found",
			      "Session %s was made by replica '%.*s', not this "
			      "one (%s%s%s): that replica is gone (its sessions "
			      "with it) or the request was misrouted.",
			      s, (int)len, name, mine ? "'" : "",
			      mine ? mine : "which has no replica_id",
			      mine ? "'" : "");
	else
		api_error_set(&e, 404, API_ERR_NOT_FOUND, "session",
			      "session_not_found", "No such session.");
	http_respond_error(req, &e);
}

/* ---- tokenizer work on the thread pool --------------------------------- */

struct tok_work {
	uv_work_t work;
	struct http_req *req;  /* NULL once the exchange ended */
	struct backend *b;
	bool detok;
	bool done;             /* after_work ran */
	bool add_special, parse_special;
	char *text;            /* tokenize: input; detokenize: output */
	size_t len;
	int32_t *ids;          /* tokenize: output; detokenize: input */
	size_t n;
	int rc;
	char err[EMBER_ERR_MAX];
};

static void tok_work_free(struct tok_work *w)
{
	free(w->text);
	free(w->ids);
	free(w);
}

/* http.c's user_free. The pool still owns a queued or running work item:
 * after_work frees it then. */
static void tok_exchange_end(void *user)
{
	struct tok_work *w = user;

	w->req = NULL;
	if (w->done)
		tok_work_free(w);
}

static void tok_work_cb(uv_work_t *work)
{
	struct tok_work *w = work->data;
	int32_t *ids = NULL;
	char *text = NULL;
	size_t n = 0;

	if (w->detok) {
		w->rc = backend_detokenize(w->b, w->ids, w->n, &text, &n, w->err);
		w->text = text;
		w->len = n;
	} else {
		w->rc = backend_tokenize(w->b, w->text, w->len, w->add_special,
					 w->parse_special, &ids, &n, w->err);
		w->ids = ids;
		w->n = n;
	}
}

static void respond_backend_error(struct backend *b, struct http_req *req,
				  int rc, const char *detail, const char *param)
{
	enum backend_status st = backend_status(b, NULL);
	struct api_error e;

	if (rc == EMBER_EBUSY && st != BACKEND_READY)
		api_error_not_loaded(&e, st == BACKEND_LOADING);
	else if (rc == EMBER_ENOTFOUND)
		api_error_from_code(&e, rc, param, "No such %s.",
				    param ? param : "object");
	else
		api_error_from_code(&e, rc, param, "%s", detail);
	if (rc == EMBER_EFULL) /* full_status: HAProxy retries a 503 elsewhere */
		e.status = backend_full_status(b);
	if (rc == EMBER_ENOTFOUND && param != NULL && !strcmp(param, "session"))
		snprintf(e.code, sizeof(e.code), "session_not_found");
	http_respond_error(req, &e);
}

static void tok_after_cb(uv_work_t *work, int status)
{
	struct tok_work *w = work->data;
	struct jsonw jw;
	size_t i;

	w->done = true;
	if (w->req == NULL) {
		tok_work_free(w);
		return;
	}
	if (status != 0 || w->rc != 0) {
		respond_backend_error(w->b, w->req, status ? EMBER_EIO : w->rc,
				      w->err, w->detok ? "tokens" : "content");
		return;
	}
	jsonw_init(&jw);
	if (w->detok) {
		jsonw_raw(&jw, "{\"content\":");
		jsonw_strn(&jw, w->text, w->len);
	} else {
		jsonw_raw(&jw, "{\"tokens\":[");
		for (i = 0; i < w->n; i++) {
			if (i > 0)
				jsonw_raw(&jw, ",");
			jsonw_int(&jw, w->ids[i]);
		}
		jsonw_raw(&jw, "]");
	}
	jsonw_raw(&jw, "}");
	http_respond_json(w->req, 200, jsonw_take(&jw));
}

static void tok_start(uv_loop_t *loop, struct tok_work *w)
{
	w->work.data = w;
	if (uv_queue_work(loop, &w->work, tok_work_cb, tok_after_cb) != 0) {
		http_respond_json(w->req, 500, NULL);
		tok_work_free(w);
		return;
	}
	w->req->user = w;
	w->req->user_free = tok_exchange_end;
}

static struct tok_work *tok_new(struct backend *b, struct http_req *req,
				bool detok)
{
	struct tok_work *w;

	if (backend_status(b, NULL) != BACKEND_READY) {
		respond_backend_error(b, req, EMBER_EBUSY, "", NULL);
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		http_respond_json(req, 500, NULL);
		return NULL;
	}
	w->req = req;
	w->b = b;
	w->detok = detok;
	return w;
}

void api_native_tokenize(uv_loop_t *loop, struct backend *b,
			 struct http_req *req)
{
	struct tok_work *w;
	struct api_error e;

	w = tok_new(b, req, false);
	if (w == NULL)
		return;
	if (api_native_parse_tokenize(req->body, req->body_len, &w->text,
				      &w->len, &w->add_special,
				      &w->parse_special, &e) != 0) {
		tok_work_free(w);
		http_respond_error(req, &e);
		return;
	}
	tok_start(loop, w);
}

void api_native_detokenize(uv_loop_t *loop, struct backend *b,
			   struct http_req *req)
{
	struct tok_work *w;
	struct api_error e;

	w = tok_new(b, req, true);
	if (w == NULL)
		return;
	if (api_native_parse_detokenize(req->body, req->body_len, &w->ids,
					&w->n, &e) != 0) {
		tok_work_free(w);
		http_respond_error(req, &e);
		return;
	}
	tok_start(loop, w);
}

/* ---- sessions ----------------------------------------------------------- */

static void respond_session(struct backend *b, struct http_req *req,
			    uint64_t id, int status)
{
	struct engine_session_info info;
	struct jsonw jw;
	char name[API_SESSION_ID_MAX];
	int rc;

	rc = backend_session_info(b, id, &info);
	if (rc != 0) {
		respond_backend_error(b, req, rc, "", "session");
		return;
	}
	api_native_session_name(backend_replica_id(b), id, name);
	jsonw_init(&jw);
	jsonw_raw(&jw, "{\"id\":");
	jsonw_str(&jw, name);
	jsonw_raw(&jw, ",\"object\":\"session\",\"n_tokens\":");
	jsonw_int(&jw, info.n_tokens);
	jsonw_raw(&jw, ",\"n_ctx\":");
	jsonw_int(&jw, info.n_ctx);
	jsonw_raw(&jw, ",\"n_left\":");
	jsonw_int(&jw, info.n_left);
	jsonw_raw(&jw, info.busy ? ",\"busy\":true" : ",\"busy\":false");
	jsonw_raw(&jw, info.cached ? ",\"cached\":true" : ",\"cached\":false");
	jsonw_raw(&jw, ",\"idle_s\":");
	jsonw_num(&jw, info.idle_s);
	jsonw_raw(&jw, "}");
	http_respond_json(req, status, jsonw_take(&jw));
}

static int session_id(struct backend *b, struct http_req *req, const char *s,
		      uint64_t *id)
{
	if (api_native_parse_session_id(s, backend_replica_id(b), id) == 0)
		return 0;
	api_native_respond_session_not_found(b, req, s);
	return EMBER_EINVAL;
}

void api_native_session_new(struct backend *b, struct http_req *req)
{
	char err[EMBER_ERR_MAX] = "";
	struct api_error e;
	json_t *root, *v;
	uint64_t id;
	int rc;

	root = decode(req->body, req->body_len, true, &e);
	if (root == NULL) {
		http_respond_error(req, &e);
		return;
	}
	v = json_object_get(root, "system");
	if (v != NULL && !json_is_null(v) && !json_is_string(v)) {
		wrong_type(&e, "system", "a string");
		json_decref(root);
		http_respond_error(req, &e);
		return;
	}
	/* by length: "\u0000" is an ordinary character of the text */
	rc = backend_session_new(b, json_is_string(v) ? json_string_value(v) : NULL,
				 json_is_string(v) ? json_string_length(v) : 0, &id, err);
	json_decref(root);
	if (rc != 0) {
		respond_backend_error(b, req, rc, err, NULL);
		return;
	}
	respond_session(b, req, id, 201);
}

void api_native_session_get(struct backend *b, struct http_req *req,
			    const char *s)
{
	uint64_t id;

	if (session_id(b, req, s, &id) == 0)
		respond_session(b, req, id, 200);
}

void api_native_session_clone(struct backend *b, struct http_req *req,
			      const char *s)
{
	char err[EMBER_ERR_MAX] = "";
	uint64_t id, clone;
	int rc;

	if (session_id(b, req, s, &id) != 0)
		return;
	rc = backend_session_clone(b, id, &clone, err);
	if (rc != 0) {
		respond_backend_error(b, req, rc, err, "session");
		return;
	}
	respond_session(b, req, clone, 201);
}

void api_native_session_delete(struct backend *b, struct http_req *req,
			       const char *s)
{
	struct jsonw jw;
	uint64_t id;
	int rc;

	if (session_id(b, req, s, &id) != 0)
		return;
	rc = backend_session_delete(b, id);
	if (rc != 0) {
		respond_backend_error(b, req, rc, "", "session");
		return;
	}
	jsonw_init(&jw);
	jsonw_raw(&jw, "{\"id\":");
	jsonw_str(&jw, s);
	jsonw_raw(&jw, ",\"object\":\"session.deleted\",\"deleted\":true}");
	http_respond_json(req, 200, jsonw_take(&jw));
}
