/*
 * engine.h - the generation engine, Ember's public interface to a model: it
 * owns (engine_open) or borrows (engine_new) the weights, the tokenizer and
 * the chat template, and runs a pool of worker threads that turn prompts or
 * chat messages into streamed completion text, with continuous batching,
 * per-sequence KV caches, prefix reuse and sessions. The server
 * (server/backend.c) and the CLI (`ember run`, bench, eval) code against
 * this header; nothing here knows HTTP, JSON or libuv.
 *
 * Loading. engine_model_open() is the one load sequence of the project
 * (kernel dispatch, the mmapped GGUF, the tokenizer, the chat template);
 * engine_open() loads and starts workers that own what was loaded. Tools
 * that drive the forward pass themselves (bench, eval) use
 * engine_model_open() alone.
 *
 * Requests. engine_submit() copies the request (a prompt or chat messages,
 * stop strings) into a bounded FIFO queue and returns at once; it never
 * renders, tokenizes, computes or waits, so the event loop may call it.
 * The engine's preparation thread then renders chat messages with the
 * chat template (adding the template's end-of-turn stop texts) and
 * tokenizes, outside every worker's decode step, so a long prompt never
 * stalls running streams. A worker takes prepared requests in arrival
 * order and runs each in one of its slots. Results come back through two
 * callbacks, both on a worker thread: on_text() any number of times (UTF-8
 * text, stop strings removed, never a split code point), then on_done()
 * exactly once, last. A request whose prompt does not fit the context, or
 * whose messages the template refuses, is not an on-submit error: it ends
 * with on_done(), finish ENGINE_FINISH_ERROR (code EMBER_ECONTEXT and the
 * numbers in prompt_tokens / n_ctx, or EMBER_EINVAL and a message), before
 * any on_text(), so a server can still answer 400 before it sends headers.
 *
 * Embeddings. A request with on_embed is an embedding job: its tokens
 * run in a slot on a temporary cache, a chunk per worker step beside the
 * batch, and the pooled, normalized final hidden state comes back through
 * on_embed (embed.c).
 *
 * Batching. Each worker step is one forward pass over one decode token of
 * every running sequence plus a chunk of prompt tokens of the oldest
 * sequences still prefilling, so the weights are read once per step for
 * all streams, and a long prompt delays running streams by at most one
 * chunk per step. The chunk shrinks as more streams decode
 * (prefill_chunk / (1 + decoding), at least 16 tokens): scheduler.c says
 * why.
 *
 * Several choices (engine_request.n > 1, OpenAI's `n`): the prompt is
 * prefilled once; its last logits are kept and each further choice gets a
 * copy of the prompt's KV cache and samples its own first token from them
 * (seed + choice index), then decodes on its own.
 *
 * KV caches. A worker holds up to kv_cache_mb of caches, each for n_ctx
 * positions (F16 by default). After a request ends its cache stays, with
 * the tokens it holds, as an idle cache: a later request whose tokens
 * start with them prefills only the rest (cached_tokens). When a new
 * sequence needs a cache and the budget is spent, idle caches are evicted
 * least recently used first (anonymous ones before sessions'); when all
 * are running the request waits in the queue.
 *
 * Sessions (MediaPipe's LlmInferenceSession): a conversation whose tokens
 * and KV cache persist between requests. Generating into a session appends
 * the new text to what it holds and prefills only that. A clone starts
 * with the same tokens (its cache is copied from the parent's when it
 * first runs) and then diverges independently. An evicted session keeps
 * its tokens and recomputes its cache when next used.
 *
 * Threads: every engine_* function may be called from any thread (the
 * server calls them on its loop thread); none blocks on compute, except
 * the loaders (engine_model_open, engine_open), engine_tokenize /
 * engine_detokenize / engine_render, which work on the caller's thread
 * (the server calls them off its loop), and engine_free(), which joins
 * the workers. Callbacks run on worker threads
 * (and, for requests never started, on the thread calling engine_free);
 * they must not call back into the engine except engine_cancel() and
 * engine_stats().
 */
#ifndef EMBER_ENGINE_H
#define EMBER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "detok.h"
#include "ember.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define ENGINE_MAX_STOP DETOK_MAX_STOPS /* stop strings per request */

struct engine_config {
	uint32_t workers;        /* worker threads; 0: 1 */
	uint32_t threads;        /* compute threads per worker; 0: 1 */
	uint32_t slots;          /* sequences a worker runs at once; 0: 4 */
	uint32_t n_ctx;          /* positions per sequence; 0: the model's context_length */
	uint32_t prefill_chunk;  /* prompt tokens per step with nothing decoding
				  * (the step's token budget); 0: 256 */
	uint32_t kv_cache_mb;    /* KV budget per worker in MiB; 0: n_ctx * slots */
	bool kv_f32;             /* F32 caches instead of F16 (exact, twice the size) */
	uint32_t queue_max;      /* requests waiting for a slot; 0: 64 */
	uint32_t max_sessions;   /* live sessions; 0: 64 */
	uint32_t session_idle_s; /* a session unused this long is deleted; 0: 600 */
	const char *chat_template; /* a chat.h family name; NULL or "": auto */
	/* A Jinja chat template that replaces the model's own (the server's
	 * --chat-template-file), or NULL; borrowed for engine_open only. */
	const char *chat_template_src;
	size_t chat_template_len;
};

enum engine_finish {
	ENGINE_FINISH_STOP,      /* an end-of-generation token or a stop string */
	ENGINE_FINISH_LENGTH,    /* max_tokens reached or the context filled */
	ENGINE_FINISH_CANCELLED, /* engine_cancel(), session deleted, or engine_free() */
	ENGINE_FINISH_ERROR,     /* `code` and `message` say why */
};

struct engine_result {
	enum engine_finish finish;
	int code;                  /* 0, or EMBER_E* with ENGINE_FINISH_ERROR:
				    * EMBER_ECONTEXT = the prompt does not fit */
	int64_t prompt_tokens;     /* tokens of this request's prompt (with a
				    * session: the new text only) */
	int64_t cached_tokens;     /* of the sequence's tokens, how many came from a
				    * cache rather than being prefilled */
	int64_t completion_tokens; /* tokens generated */
	uint32_t n_ctx;            /* the context size the prompt was checked against */
	double ttft_ms;            /* submit to first generated token; -1 if none */
	double prefill_tps;        /* prefilled tokens per second; 0 if none */
	double decode_tps;         /* generated tokens per second after the first; 0 if < 2 */
	int stop_index;            /* ENGINE_FINISH_STOP by a stop string: its index
				    * (the caller's first, then the template's);
				    * else -1 */
	char message[EMBER_ERR_MAX]; /* detail for ENGINE_FINISH_ERROR, else "" */
};

/* Worker thread: `len` bytes of new text (not NUL-terminated, valid during
 * the call only) that took `n_tokens` generated tokens. */
typedef void (*engine_text_cb)(void *data, const char *text, size_t len, int n_tokens);
/* Worker thread, exactly once per submitted request, after its last text. */
typedef void (*engine_done_cb)(void *data, const struct engine_result *res);

/* Worker thread, before on_done, for an embedding request: the pooled,
 * L2-normalized vector of n (= n_embd) floats, valid during the call. */
typedef void (*engine_embed_cb)(void *data, const float *vec, size_t n);

/* How an embedding pools the hidden states of its tokens: what the GGUF
 * file declares in <arch>.pooling_type (llama.cpp's numbers: 1 mean,
 * 2 cls, 3 last), mean when it declares none (or 0, "none"). */
enum engine_pooling {
	ENGINE_POOLING_MEAN,
	ENGINE_POOLING_CLS,   /* the first token's */
	ENGINE_POOLING_LAST,  /* the last token's */
	ENGINE_POOLING_UNSUPPORTED, /* another value (rank): embeddings refused */
};

/* The log-probabilities behind one generated token (sampler.h
 * sampler_logprobs: after the grammar mask, the penalties and the
 * temperature, before top_k / top_p / min_p). */
struct engine_logprobs {
	int32_t token;
	float logprob;             /* natural log; -INFINITY if impossible */
	int32_t n_top;             /* entries in top[], <= the request's top_logprobs */
	struct sampler_logprob top[SAMPLER_MAX_TOP_LOGPROBS]; /* best first */
};

/* Worker thread: one generated token's log-probabilities (requests with
 * logprobs), called before the text callback that covers its text, for
 * every generated token except a final end-of-generation token. A text
 * callback's n_tokens counts tokens in this same order, so a caller knows
 * which tokens' text has been delivered; tokens whose text a stop string
 * swallowed get no text callback. */
typedef void (*engine_logprobs_cb)(void *data, const struct engine_logprobs *lp);

/* One chat message; both strings copied on submit. */
struct engine_message {
	const char *role;          /* "system", "user", "assistant" or "tool" */
	const char *content;       /* UTF-8; NULL only for an assistant turn
				    * that only calls tools (JSON null) */
	size_t content_len;        /* its bytes: it may hold NUL ("\u0000");
				    * 0 = strlen(content) */
	const char *tool_calls;    /* NULL or the OpenAI tool_calls array as JSON */
	const char *tool_call_id;  /* NULL or the call a "tool" message answers */
};

struct engine_request {
	const char *prompt;        /* text as given (NULL with messages); copied */
	size_t prompt_len;
	/* Or chat messages, rendered with the engine's chat template and
	 * followed by its generation prompt; the template's end-of-turn texts
	 * join the stop strings after the caller's, as many as fit. */
	const struct engine_message *messages;
	size_t n_messages;
	const char *tools;         /* NULL or an OpenAI tools array as JSON, for
				    * the template (chat.h chat_render); copied */
	bool add_special;          /* BOS/EOS as the model says (tokenizer_encode);
				    * into a session: only if it holds no tokens yet */
	bool parse_special;        /* control-token text becomes those tokens */
	/* Sampling (copied). NULL: the session's defaults, or greedy without
	 * a session. The seed is used as given: the caller draws one when the
	 * client gave none. */
	const struct sampler_config *sampling;
	int32_t max_tokens;        /* >= 0; 0 only prefills (a session's new turn) */
	const char *const *stop;   /* [n_stop] non-empty UTF-8 strings; copied */
	size_t n_stop;             /* <= ENGINE_MAX_STOP */
	uint64_t session;          /* 0: none; else generate into that session */
	/* Constrained decoding: GBNF text (grammar.h; json_schema.h compiles a
	 * schema to it), or NULL. Compiled by engine_submit (a bad grammar is
	 * EMBER_EINVAL with the reason in err); the output then always
	 * matches it, ending when it is complete and the model or the grammar
	 * stops; a dead end finishes with ENGINE_FINISH_ERROR. */
	const char *grammar;
	size_t grammar_len;
	/* Non-NULL: an embedding instead of a generation. The prompt (or
	 * embed_tokens) is evaluated once on a temporary cache (no KV kept,
	 * no prefix reuse, no decode); the final hidden states (after the
	 * output norm) are pooled as engine_pooling() says, L2-normalized and
	 * passed to on_embed, then on_done (finish STOP, prompt_tokens).
	 * messages, sampling, stop, session and grammar must be unset. */
	engine_embed_cb on_embed;
	const int32_t *embed_tokens; /* token ids instead of the prompt, or NULL; copied */
	size_t embed_n_tokens;
	bool embed_truncate;       /* an input longer than the context is cut to
				    * it (else EMBER_ECONTEXT, as a prompt) */
	/* Lazy grammar: with a trigger (NUL-terminated; copied), the output is
	 * free until it contains the trigger's text, and the grammar applies
	 * from there, the trigger being its first bytes (a tool call that
	 * starts in the middle of an answer). With grammar_trigger_at_start,
	 * only an output whose first non-whitespace text is the trigger starts
	 * it. When the bytes after the trigger (in the same token) do not fit
	 * the grammar, it is dropped and the output stays free. */
	const char *grammar_trigger;
	bool grammar_trigger_at_start;
	/* Or a prompt of token ids, used as given (no BOS added; each must be
	 * inside the tokenizer's vocabulary, else EMBER_ERANGE); copied. */
	const int32_t *tokens;
	size_t n_tokens;
	/* Choices: 0 or 1 = one; up to the worker's slots (else EMBER_EINVAL;
	 * not with a session, max_tokens 0 or on_embed). Each choice has the
	 * request's stops, grammar (and trigger), logit biases and logprobs.
	 * Choice i samples with seed +
	 * i and calls the callbacks with choice_data[i] (choice_data NULL:
	 * `data` for every choice). Each choice gets its own on_done, all
	 * with the prompt's prompt_tokens and cached_tokens (count them
	 * once per prompt). */
	uint32_t n;
	void *const *choice_data;
	engine_text_cb on_text;    /* may be NULL */
	engine_done_cb on_done;    /* may be NULL */
	/* Log-probabilities: on_logprobs (NULL: none computed) gets each
	 * generated token with its top_logprobs (0 .. SAMPLER_MAX_TOP_LOGPROBS)
	 * best alternatives. Costs one extra pass over the vocabulary per token. */
	engine_logprobs_cb on_logprobs;
	int32_t top_logprobs;
	/* Logit biases (sampler.h sampler_set_bias), copied; checked against
	 * the vocabulary when the request starts (a bad id ends it with
	 * ENGINE_FINISH_ERROR, EMBER_EINVAL, before any text). */
	const struct sampler_bias *logit_bias;
	size_t n_logit_bias;
	void *data;                /* passed to the callbacks */
};

#define ENGINE_STATS_BATCH 16

struct engine_stats {
	uint32_t queue_depth;      /* requests waiting for a slot */
	uint32_t slots_busy;       /* sequences running, all workers */
	uint32_t slots_total;      /* workers * slots */
	uint64_t kv_bytes;         /* KV cache memory allocated, all workers */
	uint64_t kv_bytes_max;     /* the budget, all workers */
	uint32_t kv_cached;        /* idle caches kept for reuse */
	uint32_t sessions;         /* live sessions */
	uint64_t requests_done;    /* on_done calls so far */
	/* Scheduler counters since engine_new, all workers (each step's
	 * are added before its tokens are delivered): */
	uint64_t steps;            /* forward passes */
	uint64_t prefill_tokens;   /* prompt tokens evaluated (prefilled) */
	uint64_t decode_tokens;    /* generated tokens evaluated (decoded) */
	uint64_t prefill_steps;    /* steps that carried prompt tokens */
	uint32_t max_chunk;        /* most prompt tokens in a step that also decoded */
	/* The per-phase account of the workers' time (seconds, all workers),
	 * to compare a serving run with its ideal (scheduler.c): */
	double prefill_s;          /* passes with prompt tokens only */
	double mixed_s;            /* passes with prompt and decode tokens */
	double decode_s;           /* passes with decode tokens only */
	double emit_s;             /* sampling and delivering the steps' tokens */
	double between_s;          /* from one step's end to the next pass while
				    * sequences were busy: admission, caches,
				    * prefix copies (idle time is not counted) */
	/* Decode-only passes by the sequences in them, [k] for k sequences
	 * (the last entry: ENGINE_STATS_BATCH or more): count and seconds. */
	uint64_t decode_steps[ENGINE_STATS_BATCH + 1];
	double decode_steps_s[ENGINE_STATS_BATCH + 1];
	/* The process's CPU seconds (all threads) during the passes above:
	 * their cost in work, steadier than wall time on a shared machine. */
	double prefill_cpu_s, mixed_cpu_s, decode_cpu_s;
	double decode_steps_cpu_s[ENGINE_STATS_BATCH + 1];
	/* Steps that ran while a busy sequence was not in them (a prompt
	 * waiting for its turn, a cache or its start), and the sum over
	 * steps of such sequences. */
	uint64_t partial_steps, left_out;
};

struct engine_session_opts {
	const char *system;        /* text prefilled at once (may be NULL); copied */
	size_t system_len;
	bool add_special;          /* for the first text of the session */
	bool parse_special;
	const struct sampler_config *sampling; /* defaults; NULL: greedy */
};

struct engine_session_info {
	uint32_t n_tokens;         /* tokens the session holds (prompt + generated) */
	uint32_t n_ctx;
	uint32_t n_left;           /* n_ctx - n_tokens */
	bool busy;                 /* a request runs or waits on it */
	bool cached;               /* its KV cache is resident */
	double idle_s;             /* since it was last used */
};

struct engine;
struct engine_model;

/*
 * The one load sequence: picks the kernels for this CPU, maps the GGUF
 * file at `path`, builds its tokenizer and chooses its chat template
 * (`chat_template` a family name; NULL or "": the file's own). Returns 0,
 * or the loader's error (EMBER_EIO, EMBER_EFORMAT, EMBER_EUNSUPPORTED,
 * EMBER_EINVAL for an unknown template name, EMBER_ENOMEM) with detail.
 */
int engine_model_open(struct engine_model **out, const char *path, const char *chat_template,
		      char *err);

/* Unmaps and frees. NULL-safe. */
void engine_model_free(struct engine_model *em);

/* What was loaded (owned by `em`). */
const struct model *engine_model_weights(const struct engine_model *em);
const struct tokenizer *engine_model_tokenizer(const struct engine_model *em);

/* Whether `name` is a chat template family engine_config accepts (NULL
 * and "" are: they mean auto). */
bool engine_template_known(const char *name);

/*
 * engine_model_open(path, cfg->chat_template) then engine_new() on what
 * it loaded, which the engine owns and frees. Errors of both.
 */
int engine_open(struct engine **out, const char *path, const struct engine_config *cfg,
		char *err);

/*
 * Starts cfg->workers workers on `m` and `tok` (borrowed: both must outlive
 * the engine). `cfg` NULL: all defaults. Allocates per-worker compute
 * scratch now; KV caches are allocated as sequences need them, within the
 * budget. Returns 0, EMBER_EINVAL (a budget too small for one context,
 * a bad value, an unknown chat template; detail in err), EMBER_ENOMEM.
 */
int engine_new(struct engine **out, const struct model *m, const struct tokenizer *tok,
	       const struct engine_config *cfg, char *err);

/* The weights the engine runs (for their hyperparameters). */
const struct model *engine_model(const struct engine *e);

/* The chat template family requests' messages are rendered with ("chatml"). */
const char *engine_chat_template(const struct engine *e);

/*
 * Any thread: encodes text[0..len) (add_special: BOS/EOS as the model
 * says; parse_special: control-token text becomes those tokens) into a
 * malloc'd array *ids of *n ids the caller frees. Returns 0, EMBER_ENOMEM
 * or the tokenizer's error, with detail in err.
 */
int engine_tokenize(const struct engine *e, const char *text, size_t len, bool add_special,
		    bool parse_special, int32_t **ids, size_t *n, char *err);

/*
 * Any thread: decodes ids[0..n) into a malloc'd NUL-terminated UTF-8
 * string (*text, *len bytes) the caller frees; control tokens are written
 * as their text, bytes that are not UTF-8 become U+FFFD. Returns 0,
 * EMBER_ERANGE for an id outside the vocabulary (named in err),
 * EMBER_ENOMEM.
 */
int engine_detokenize(const struct engine *e, const int32_t *ids, size_t n, char **text,
		      size_t *len, char *err);

/*
 * Any thread: renders msgs[0..n) (and `tools_json`, NULL or an OpenAI tools
 * array as JSON) with the engine's chat template and the generation prompt
 * into a malloc'd NUL-terminated *out of *len bytes (the text a request
 * with these messages is tokenized from). Returns 0, EMBER_EINVAL
 * (messages the template cannot express; a template's raise_exception()
 * message as is), EMBER_ENOMEM.
 */
int engine_render(const struct engine *e, const struct engine_message *msgs, size_t n,
		  const char *tools_json, char **out, size_t *len, char *err);

/* Parses a Jinja chat template (len bytes) as engine_open would use it:
 * 0, or EMBER_EINVAL with the parse error in err. Any thread. */
int engine_template_check(const char *src, size_t len, char *err);

/* "" or why the model's own chat template is not used (it failed to parse
 * and the family table renders instead): for the caller to log once. */
const char *engine_template_warning(const struct engine *e);

/* The Jinja chat template requests render with (the model's own or
 * --chat-template-file's; NULL when the family table renders), its length
 * in *len, and in *family the family table's name ("chatml"): for callers
 * that read the template's markers (the tool-call syntax, tool_call.h). */
const char *engine_chat_template_source(const struct engine *e, size_t *len, const char **family);

/*
 * Cancels every request (each still gets on_done, ENGINE_FINISH_CANCELLED,
 * unless it already had it), joins the workers and frees everything,
 * sessions included. NULL-safe. Must not be called from a callback.
 */
void engine_free(struct engine *e);

/*
 * Queues `req` (copied: the caller may free it on return). On success *id
 * (never 0) names it for engine_cancel and the callbacks will be called.
 * Returns 0; EMBER_EFULL when queue_max requests already wait;
 * EMBER_EINVAL for a bad field (message in err); EMBER_ENOTFOUND for an
 * unknown session; EMBER_ENOMEM. Requests into one session run one after
 * another in submission order. On error no callback is called.
 */
int engine_submit(struct engine *e, const struct engine_request *req, uint64_t *id, char *err);

/*
 * Stops request `id`: a queued one never starts, a running one stops
 * before its next step; its slot is freed and on_done reports
 * ENGINE_FINISH_CANCELLED (text already streamed stays streamed). Unknown
 * or finished ids are ignored. Never blocks on compute.
 */
void engine_cancel(struct engine *e, uint64_t id);

/* engine_cancel for every request queued or running (a server whose drain
 * timeout expired: each still gets its on_done, so its client gets a final
 * event instead of a cut connection). */
void engine_cancel_all(struct engine *e);

/* Gauges for metrics, a consistent snapshot. */
void engine_stats(struct engine *e, struct engine_stats *st);

/* How embeddings pool (see enum engine_pooling) and its name ("mean"). */
enum engine_pooling engine_pooling(const struct engine *e);
const char *engine_pooling_name(enum engine_pooling p);
/*
 * Any thread: the bytes of token `id` as generation emits them (no
 * special-token text), into buf[0..cap). Returns the length (more than
 * cap: nothing written, call again with that much room), or EMBER_ERANGE
 * for an id outside the vocabulary.
 */
int engine_token_piece(const struct engine *e, int32_t id, char *buf, size_t cap);

/*
 * Any thread: the prompt text for fill-in-the-middle, in the prefix-suffix-
 * middle order: <FIM prefix token> prefix <FIM suffix token> suffix <FIM
 * middle token>, as a malloc'd *out of *len bytes (NUL-terminated) the
 * caller frees and submits with parse_special. The model's FIM tokens are
 * those its GGUF names (tokenizer.ggml.fim_pre_token_id, fim_suf_token_id,
 * fim_mid_token_id), else control tokens named as Qwen, StarCoder,
 * CodeLlama or DeepSeek name them (found once, when the engine starts). Returns 0, EMBER_EUNSUPPORTED (the model
 * has no FIM tokens; err says so), EMBER_ENOMEM.
 */
int engine_fim_prompt(const struct engine *e, const char *prefix, size_t prefix_len,
		      const char *suffix, size_t suffix_len, char **out, size_t *len, char *err);

/* The context size sequences get. */
uint32_t engine_n_ctx(const struct engine *e);

/*
 * Creates a session. Its system text, if any, is queued for prefill like a
 * request with max_tokens 0 (so it counts against queue_max). Returns 0
 * and *id (never 0); EMBER_EFULL (max_sessions live, or the queue full),
 * EMBER_EINVAL, EMBER_ENOMEM.
 */
int engine_session_new(struct engine *e, const struct engine_session_opts *o, uint64_t *id,
		       char *err);

/*
 * A new session holding the same tokens as `id` (and its sampling
 * defaults); its KV cache is copied from the parent's, when resident, on
 * its first request. Returns 0 and *clone_id; EMBER_ENOTFOUND, EMBER_EBUSY
 * (`id` has a request queued or running: its tokens are not settled),
 * EMBER_EFULL, EMBER_ENOMEM.
 */
int engine_session_clone(struct engine *e, uint64_t id, uint64_t *clone_id, char *err);

/* Fills *info. Returns 0 or EMBER_ENOTFOUND. */
int engine_session_info(struct engine *e, uint64_t id, struct engine_session_info *info);

/*
 * Deletes a session: a request on it is cancelled (its on_done still
 * comes), its cache becomes an anonymous idle cache. Returns 0 or
 * EMBER_ENOTFOUND.
 */
int engine_session_delete(struct engine *e, uint64_t id);

#endif
