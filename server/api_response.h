/*
 * api_response.h - the JSON a generation answers with, in the exact shapes
 * clients parse. Three formats:
 *
 * API_FMT_CHAT (POST /v1/chat/completions), OpenAI's chat.completion:
 *   {"id":"chatcmpl-...","object":"chat.completion","created":T,"model":M,
 *    "choices":[{"index":0,"message":{"role":"assistant","content":TEXT},
 *                "logprobs":null,"finish_reason":"stop"|"length"}],
 *    "usage":USAGE}
 *   streamed as chat.completion.chunk events, in this order:
 *     {"id",...,"object":"chat.completion.chunk",...,"choices":[{"index":0,
 *      "delta":{"role":"assistant","content":""},"logprobs":null,
 *      "finish_reason":null}]}                       (first, once)
 *     ... "delta":{"content":PIECE} ...               (one per wake-up)
 *     ... "delta":{} ... "finish_reason":"stop"|"length"
 *     ... "choices":[],"usage":USAGE                  (include_usage only)
 *     [DONE]
 *   With include_usage every chunk before the usage chunk has "usage":null,
 *   as OpenAI sends it.
 *
 * API_FMT_COMPLETION (POST /v1/completions), OpenAI's text_completion:
 *   {"id":"cmpl-...","object":"text_completion","created","model",
 *    "choices":[{"text":TEXT,"index":0,"logprobs":null,
 *                "finish_reason":...}],"usage":USAGE}
 *   streamed as the same object per piece ("finish_reason":null), a final
 *   one with "text":"" and the finish_reason, the usage chunk, [DONE].
 *
 * API_FMT_NATIVE (POST /v1/generate), MediaPipe-style:
 *   {"text":TEXT,"finish_reason":...,"usage":USAGE,
 *    "timings":{"ttft_ms":X,"prefill_tokens_per_s":X,"decode_tokens_per_s":X}}
 *   (with logprobs: "logprobs" after "text", in the chat shape)
 *   streamed as {"text":PIECE} events, then one final event with
 *   "text":"" and finish_reason, usage and timings, then [DONE].
 *
 * API_FMT_LLAMACPP (POST /completion, /infill), llama-server's shape:
 *   {"index":0,"content":TEXT,"tokens":[],"id_slot":0,"stop":true,
 *    "model":M,"tokens_predicted":C,"tokens_evaluated":P,"tokens_cached":K,
 *    "truncated":false,"stop_type":"eos"|"limit"|"word","stopping_word":W,
 *    "timings":{"prompt_n","prompt_ms","prompt_per_second","predicted_n",
 *               "predicted_ms","predicted_per_second"}
 *    [,"completion_probabilities":LOGPROBS]}
 *   streamed as {"index":0,"content":PIECE,"tokens":[],"stop":false
 *   [,"completion_probabilities":...]} events, then the whole object above
 *   with "content":"" as the last event; no [DONE] (llama-server sends none).
 *
 * Logprobs: m->logprobs, when not NULL, is the JSON (api_logprobs.h) the
 * next body or text chunk carries as the choice's "logprobs"
 * (completion_probabilities for llama.cpp); NULL writes null (omitted for
 * llama.cpp).
 *
 * Several choices (n > 1, several prompts): the bodies list them in index
 * order; streamed, each choice's chunks (role chunk first, finish last)
 * name its index (api_meta.index), interleaved as they come, and one usage
 * chunk follows the last finish. A body takes each choice's logprobs from
 * api_choice.logprobs (api_response_body: m->logprobs).
 *
 * USAGE = {"prompt_tokens":P,"completion_tokens":C,"total_tokens":P+C,
 *          "prompt_tokens_details":{"cached_tokens":K}}
 *
 * Every function writes one JSON text into `w` (jsonw_reset first), so a
 * stream reuses one buffer. Threads: the loop thread; pure otherwise.
 */
#ifndef EMBER_API_RESPONSE_H
#define EMBER_API_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "jsonw.h"
#include "tool_call.h"

enum api_format {
	API_FMT_CHAT,
	API_FMT_COMPLETION,
	API_FMT_NATIVE,
	API_FMT_LLAMACPP,
};

/* What every object of one response repeats. */
struct api_meta {
	enum api_format fmt;
	char id[40];          /* "chatcmpl-<24 hex>", "cmpl-...", "gen-..." */
	const char *model;    /* borrowed; NULL writes "" */
	int64_t created;      /* Unix seconds */
	bool include_usage;   /* stream_options.include_usage */
	const char *logprobs; /* borrowed JSON for the next write, or NULL */
	const char *stopping_word; /* llama.cpp: the stop string that ended it */
	uint32_t index;       /* the choice streamed chunks name (n > 1 or
			       * several prompts: prompt * n + choice); 0 */
};

/* One choice of a body. */
struct api_choice {
	const char *text;
	size_t len;
	enum engine_finish finish;
	const char *logprobs; /* borrowed JSON of the choice's "logprobs", or NULL */
};

/* Fills `m` for a new response: a fresh random id with the format's prefix
 * and the current time. `model` is borrowed. */
void api_meta_init(struct api_meta *m, enum api_format fmt, const char *model,
		   bool include_usage);

/* "stop" or "length" (anything else, e.g. cancelled, reads "stop"). */
const char *api_finish_reason(enum engine_finish f);

/* The non-streamed body: `text[0..len)` is the whole generated text. */
void api_response_body(struct jsonw *w, const struct api_meta *m,
		       const char *text, size_t len, const struct engine_result *r);

/* The body of several choices, indexes 0 .. n-1 in order (native: the
 * first only); `r` gives the usage (summed by the caller). */
void api_response_body_choices(struct jsonw *w, const struct api_meta *m,
			       const struct api_choice *ch, size_t n,
			       const struct engine_result *r);

/* The first streamed event: chat's role chunk. Returns false (nothing
 * written) for formats without one. */
bool api_response_chunk_start(struct jsonw *w, const struct api_meta *m);

/* A streamed event carrying `text[0..len)`. */
void api_response_chunk_text(struct jsonw *w, const struct api_meta *m,
			     const char *text, size_t len);

/* The event with the finish reason (native: also usage and timings). */
void api_response_chunk_finish(struct jsonw *w, const struct api_meta *m,
			       const struct engine_result *r);

/* The usage event (`"choices":[]`). Returns false (nothing written) unless
 * the format has one and m->include_usage. */
bool api_response_chunk_usage(struct jsonw *w, const struct api_meta *m,
			      const struct engine_result *r);

/* Tool calls (chat only; tool_call.h). The body: message.content is
 * text[0..p->content_len) or null, message.tool_calls p's calls,
 * finish_reason "tool_calls". */
void api_response_body_tools(struct jsonw *w, const struct api_meta *m, const char *text,
			     const struct tool_parse *p, const struct engine_result *r);

/* A streamed delta of call `index`: with `first` its id, type, name and
 * "arguments":"", else {"index","function":{"arguments":...}}. */
void api_response_chunk_tool_call(struct jsonw *w, const struct api_meta *m, size_t index,
				  const struct tool_call *c, bool first);

/* The finish chunk after streamed calls: finish_reason "tool_calls". */
void api_response_chunk_finish_tools(struct jsonw *w, const struct api_meta *m);

#endif
