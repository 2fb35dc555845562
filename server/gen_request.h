/*
 * gen_request.h - one generation request as plain C data: what the API
 * layer (api_openai.c, later api_native.c) parses and validates from JSON,
 * and what the engine receives through backend.h. No jansson, libuv or
 * libmicrohttpd types appear here, so engine code can consume it.
 *
 * Every field is validated before the engine sees it: ranges hold as
 * documented below, strings are valid UTF-8 without NUL bytes (but the prompt
 * and message contents, which carry their lengths), n_stop <= 4.
 *
 * Ownership: the struct owns every string and the messages array;
 * gen_request_free() releases them. Threads: built on the loop thread;
 * once submitted it is read-only until the engine reports completion, so a
 * worker may read it without locks.
 */
#ifndef EMBER_GEN_REQUEST_H
#define EMBER_GEN_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define GEN_MAX_STOP ENGINE_MAX_STOP /* the engine's, which is detok's */

enum gen_kind {
	GEN_CHAT,        /* messages[] -> chat template -> prompt */
	GEN_COMPLETION,  /* prompt as given */
};

/* What the model may do with `tools` (tool_call.h). */
enum gen_tool_mode {
	GEN_TOOLS_OFF,       /* no tools, or tool_choice "none": plain text */
	GEN_TOOLS_AUTO,      /* free text; calls parsed when the model writes one */
	GEN_TOOLS_REQUIRED,  /* a grammar forces a call of some tool */
	GEN_TOOLS_NAMED,     /* a grammar forces a call of tool_name */
};

enum gen_role {
	GEN_ROLE_SYSTEM,     /* also OpenAI's "developer" */
	GEN_ROLE_USER,
	GEN_ROLE_ASSISTANT,
	GEN_ROLE_TOOL,       /* a tool's result (needs the model's own template) */
};

struct gen_message {
	enum gen_role role;
	char *content;      /* text parts joined with "\n"; may be ""; NULL only
	                     * for an assistant turn with tool_calls */
	size_t content_len; /* its bytes: it may hold NUL ("\u0000") */
	char *tool_calls;   /* NULL, or the assistant's tool_calls array as JSON text */
	char *tool_call_id; /* NULL, or the call a tool message answers */
};

/* One prompt of OpenAI's array forms: text, or token ids when `ids`. */
struct gen_prompt {
	char *text;                   /* NULL with ids */
	size_t len;
	int32_t *ids;                 /* [n_ids] each in [0, INT32_MAX]; the
				       * engine checks the vocabulary */
	size_t n_ids;
};

struct gen_request {
	enum gen_kind kind;
	char *model;                  /* as the client named it; NULL = default */

	struct gen_message *messages; /* GEN_CHAT: [n_messages], n_messages >= 1 */
	size_t n_messages;
	char *prompt;                 /* GEN_COMPLETION: non-NULL, may be "" */
	size_t prompt_len;            /* its bytes: it may hold NUL ("\u0000") */
	/* GEN_COMPLETION whose prompt is token ids or several prompts: [n_prompts]
	 * (>= 1) and `prompt` is "" and unused; else NULL and 0. */
	struct gen_prompt *prompts;
	size_t n_prompts;
	uint32_t n;                   /* choices per prompt, >= 1 (default 1) */
	char *tools;                  /* GEN_CHAT: NULL, or the tools array as JSON text */
	enum gen_tool_mode tool_mode; /* GEN_TOOLS_OFF unless tools were given */
	char *tool_name;              /* GEN_TOOLS_NAMED: the function; else NULL */
	bool parallel_tool_calls;     /* several calls allowed (default true) */

	int32_t max_tokens;           /* 1 .. config max_tokens (default: that) */
	float temperature;            /* [0, 2], default 1; 0 = greedy */
	float top_p;                  /* (0, 1], default 1 = off */
	int32_t top_k;                /* >= 0, default 0 = off */
	float min_p;                  /* [0, 1], default 0 = off */
	float presence_penalty;       /* [-2, 2], default 0 */
	float frequency_penalty;      /* [-2, 2], default 0 */
	float repeat_penalty;         /* > 0, default 1 = off (Ollama's and llama.cpp's) */
	int32_t repeat_last_n;        /* penalty window, default 64 (Ollama's) */
	bool has_seed;
	uint64_t seed;                /* when has_seed (a JSON int64, cast) */
	char *stop[GEN_MAX_STOP];     /* [n_stop] non-empty strings */
	size_t n_stop;

	uint64_t session;             /* 0, or the backend session to extend */
	char *grammar;                /* GBNF the output must match (from
				       * response_format, json_schema or
				       * grammar; checked to compile); NULL:
				       * free text */

	struct sampler_bias *logit_bias; /* [n_logit_bias] OpenAI's logit_bias
					  * (ids >= 0, biases in [-100, 100]) */
	size_t n_logit_bias;

	bool logprobs;                /* report each token's log-probability */
	int32_t top_logprobs;         /* [0, 20] alternatives with each (logprobs) */
	bool echo;                    /* GEN_COMPLETION: the prompt leads the text */
	char *suffix;                 /* GEN_COMPLETION: fill in the middle before
				       * this text (FIM tokens), or NULL */

	bool stream;                  /* answer as SSE */
	bool include_usage;           /* stream_options.include_usage */
};

/* Sets the defaults above (no allocation); `max_tokens` is the server's
 * default limit. */
void gen_request_init(struct gen_request *r, enum gen_kind kind,
		      int32_t max_tokens);

/* Releases everything `r` owns (NULL allowed) and leaves it re-init-able. */
void gen_request_free(struct gen_request *r);

/* Prompts the request holds: n_prompts, or 1. */
size_t gen_request_n_prompts(const struct gen_request *r);

/* The OpenAI name of a role ("system"). */
const char *gen_role_name(enum gen_role role);

#endif
