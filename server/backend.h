/*
 * backend.h - the one place where the server meets the engine.
 *
 * The server hands over a validated struct gen_request (gen_request.h:
 * plain C, no JSON) together with a struct gen_sink, and gets generated
 * text back through the sink's callbacks, with the engine's own result
 * type (engine.h). backend.c translates requests into engine requests and
 * runs the loader thread; the engine does the rest.
 *
 * What the engine provides (contract):
 *   - backend_new/free: load the model named by the config (may finish
 *     loading in the background: backend_status says LOADING until then).
 *   - backend_submit: queue a request; return at once (never block the
 *     loop). EMBER_EFULL when the queue (config `queue`) is full -> 429;
 *     EMBER_EBUSY while not READY -> 503. The engine renders the chat
 *     messages and tokenizes off the loop, so a prompt that cannot fit the
 *     context is reported later: done_cb with ENGINE_FINISH_ERROR, code
 *     EMBER_ECONTEXT and the numbers in prompt_tokens / n_ctx -> 400.
 *   - then, on a worker thread, any number of sink->text_cb calls (UTF-8
 *     text, stop strings already removed, never a split code point) and
 *     exactly one sink->done_cb, the last call for that request. The
 *     request and sink stay valid (owned by the server) until done_cb.
 *   - backend_cancel: the client went away; the worker stops at its next
 *     step and still calls done_cb (finish ENGINE_FINISH_CANCELLED).
 *   - gauges: metrics_set_queue_depth / slots_busy / kv_cache_bytes on the
 *     struct metrics passed to backend_new, from any thread.
 * The callbacks run on worker threads: they must only copy into a locked
 * queue and uv_async_send (server side, stream.c), never touch HTTP.
 *
 * Threads: backend_* functions are called on the loop thread only, except
 * backend_tokenize / backend_detokenize, which any thread may call (the
 * server runs them on libuv's thread pool: tokenizing a long text must not
 * stall the loop).
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ember.h"
#include "engine.h"
#include "gen_request.h"
#include "metrics.h"
#include "tool_call.h"

enum backend_status {
	BACKEND_LOADING,   /* health 503 {"status":"loading"} */
	BACKEND_READY,     /* health 200 {"status":"ok"} */
	BACKEND_NO_MODEL,  /* --no-model test mode: health 503 */
	BACKEND_FAILED,    /* load failed: health 503 with the message */
};

struct gen_sink {
	/* Worker thread: `len` bytes of new text (not NUL-terminated) that
	 * took `n_tokens` tokens. The bytes are only valid during the call. */
	engine_text_cb text_cb;
	/* Worker thread, exactly once, after the last text_cb. */
	engine_done_cb done_cb;
	/* Worker thread: one token's log-probabilities (engine.h), for
	 * requests with logprobs; may be NULL when none are asked for. */
	engine_logprobs_cb logprobs_cb;
	void *data;
};

/* What GET /v1/models and /props say about the model (llama.cpp's `meta`). */

struct backend;

/* Creates the engine for `cfg` (borrowed; must outlive the backend) and
 * starts loading the model. `metrics` receives the engine gauges. Returns
 * 0 or a negative EMBER_E* code with detail in `err`. */
int backend_new(const struct config *cfg, struct metrics *metrics,
		struct backend **out, char *err);

/* Stops the workers (requests still running get done_cb with
 * ENGINE_FINISH_CANCELLED first) and frees everything. NULL allowed. */
void backend_free(struct backend *b);

/* Loop thread: whether the model file changed on disk since it was
 * loaded (model_watch.h). The first time it has, the backend turns FAILED
 * with a message naming the change (logged), so every later request gets
 * 503 and /health says why. */
bool backend_model_changed(struct backend *b);

/* Where loading stands; `msg` (may be NULL) gets a line for FAILED. */
enum backend_status backend_status(const struct backend *b, const char **msg);

/* The model's id for /v1/models and responses ("tinyllama-q8_0"), or NULL
 * when none is configured. Valid as long as the backend. */
const char *backend_model_id(const struct backend *b);

/* The config's replica_id (session ids name it), or NULL when unset. */
const char *backend_replica_id(const struct backend *b);

/* The status a full queue or session table answers (config full_status). */
int backend_full_status(const struct backend *b);

/* Queues `req` for generation; on success *id names it for cancel. `req`
 * and `sink` are borrowed until sink->done_cb. Errors above. */
int backend_submit(struct backend *b, const struct gen_request *req,
		   const struct gen_sink *sink, uint64_t *id, char *err);

/* Queues prompt `p` (< gen_request_n_prompts(req)) of `req` with req->n
 * choices that share its prefill: choice j reports to sinks[j] (all with
 * the same callbacks), samples with the request's seed (or a drawn
 * one) + p * n + j, and ends with its own done_cb; *id cancels them all.
 * backend_submit is this for prompt 0 and one choice. */
int backend_submit_prompt(struct backend *b, const struct gen_request *req, size_t p,
			  const struct gen_sink *sinks, uint64_t *id, char *err);

/* Asks the engine to stop request `id` (unknown ids are ignored). */
void backend_cancel(struct backend *b, uint64_t id);

/* Cancels every generation queued or running; each ends through its
 * done_cb (ENGINE_FINISH_CANCELLED). Used when the drain timeout expires. */
void backend_cancel_all(struct backend *b);


/* Any thread, once READY: the fill-in-the-middle prompt for `prefix` and
 * `suffix` (engine_fim_prompt), malloc'd into *out (*len bytes). Returns 0,
 * EMBER_EBUSY, EMBER_EUNSUPPORTED (no FIM tokens), EMBER_ENOMEM. */
int backend_fim_prompt(struct backend *b, const char *prefix, size_t prefix_len,
		       const char *suffix, size_t suffix_len, char **out,
		       size_t *len, char *err);

/* Any thread, once READY: the bytes token `id` generates, as
 * engine_token_piece (the length; more than cap: call again). EMBER_EBUSY,
 * EMBER_ERANGE. */
int backend_token_piece(struct backend *b, int32_t id, char *buf, size_t cap);

/* The chat template family requests are rendered with ("" until READY). */
const char *backend_chat_template(const struct backend *b);

/* Context length of one sequence in tokens (0 until READY). */
int64_t backend_context(const struct backend *b);

/* Sets the engine gauges of the struct metrics given to backend_new from
 * the engine's current stats (queue depth, busy slots, KV bytes). */
void backend_refresh_metrics(struct backend *b);

/* What /api/tags, /api/show and /api/ps tell about the served model.
 * Strings are borrowed from the backend (valid while it lives). */
struct backend_model_info {
	char arch[64];             /* general.architecture ("llama") */
	const char *weight_type;   /* the type most weight tensors have ("q8_0") */
	const char *pooling;       /* how embeddings pool ("mean") */
	const char *chat_template; /* the file's tokenizer.chat_template, or "" */
	size_t chat_template_len;
	uint64_t n_params;         /* elements of every tensor */
	uint64_t file_size;        /* bytes */
	int64_t mtime;             /* the file's, seconds since the epoch */
	const char *vocab_type;    /* tokenizer.ggml.model: "llama", "gpt2", ... */
	uint32_t n_ctx_train, n_ctx, n_embd, n_layer, n_head, n_vocab;
	uint32_t slots_total, slots_busy;
};

/* Fills *info once READY: 0, or EMBER_EBUSY. */
int backend_model_info(struct backend *b, struct backend_model_info *info);

/* Queues an embedding (engine.h on_embed) of text[0..len) (tokenized with
 * BOS/EOS as the model says) or of ids[0..n_ids) when ids is non-NULL;
 * `truncate` cuts an input longer than the context instead of failing it
 * (EMBER_ECONTEXT). on_embed then on_done come on a worker thread; `data`
 * is passed to both. Errors as backend_submit's. */
int backend_embed(struct backend *b, const char *text, size_t len, const int32_t *ids,
		  size_t n_ids, bool truncate, engine_embed_cb on_embed, engine_done_cb on_done,
		  void *data, uint64_t *id, char *err);

/* ---- sessions: a conversation whose KV cache persists between requests.
 * Generate into one with gen_request.session = its id. All return 0 or
 * EMBER_EBUSY (not READY / the session has a request running),
 * EMBER_ENOTFOUND (no such session), EMBER_EFULL (too many), EMBER_ENOMEM,
 * with detail in `err` where there is one. */

/* A new session; `system` (may be NULL; `system_len` bytes, which may
 * hold NUL) is prefilled at once. */
int backend_session_new(struct backend *b, const char *system, size_t system_len,
			uint64_t *id, char *err);

/* A copy of session `id` that continues independently. */
int backend_session_clone(struct backend *b, uint64_t id, uint64_t *clone_id,
			  char *err);

int backend_session_info(struct backend *b, uint64_t id,
			 struct engine_session_info *info);

/* Deletes a session (a request on it is cancelled). */
int backend_session_delete(struct backend *b, uint64_t id);

/* The tool-call syntax of the served model's chat template (tool_call.h);
 * llama3's bare JSON until a model is loaded. */
enum tool_family backend_tool_family(const struct backend *b);
/* Whether that template shows `tools` to the model (false before loading:
 * a request then gets 503 anyway). */
bool backend_renders_tools(const struct backend *b);

/* Any thread, once READY: the prompt text chat request `req` renders to
 * (the model's own Jinja template, --chat-template-file, or the family
 * table), as a malloc'd *out of *len bytes the caller frees. Returns 0,
 * EMBER_EBUSY when not READY, EMBER_EINVAL when the messages do not fit the
 * template (a raise_exception() message as is), EMBER_ENOMEM. */
int backend_apply_template(const struct backend *b, const struct gen_request *req,
			   char **out, size_t *len, char *err);

/* Any thread, once READY: encodes text[0..len) with the model's tokenizer
 * (add_special: BOS/EOS as the model says; parse_special: control-token
 * text becomes those tokens). On success *ids is a malloc'd array of *n
 * ids the caller frees. Returns 0, EMBER_EBUSY when not READY,
 * EMBER_ENOMEM, or the tokenizer's error, with detail in `err`. */
int backend_tokenize(struct backend *b, const char *text, size_t len,
		     bool add_special, bool parse_special, int32_t **ids,
		     size_t *n, char *err);

/* Any thread, once READY: decodes ids[0..n) into a malloc'd NUL-terminated
 * UTF-8 string (*text, length *len) the caller frees; control tokens are
 * written out as their text. Returns 0, EMBER_EBUSY, EMBER_ERANGE for an id
 * outside the vocabulary (named in `err`) or EMBER_ENOMEM. */
int backend_detokenize(struct backend *b, const int32_t *ids, size_t n,
		       char **text, size_t *len, char *err);

#endif
