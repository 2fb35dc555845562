/* api_response.c - OpenAI and native response shapes. See api_response.h. */
#include "api_response.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static const char *const id_prefix[] = {
	[API_FMT_CHAT] = "chatcmpl-",
	[API_FMT_COMPLETION] = "cmpl-",
	[API_FMT_NATIVE] = "gen-",
	[API_FMT_LLAMACPP] = "cmpl-",
};

void api_meta_init(struct api_meta *m, enum api_format fmt, const char *model,
		   bool include_usage)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[12];
	struct timespec ts;
	size_t i, n;

	memset(m, 0, sizeof(*m));
	m->fmt = fmt;
	m->model = model;
	m->include_usage = include_usage;
	m->created = (int64_t)time(NULL);
	/* Ids only need to be unique, not secret: fall back to the clock. */
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) ^
				 (unsigned char)((uint64_t)ts.tv_sec >> (i % 4 * 8));
	}
	n = (size_t)snprintf(m->id, sizeof(m->id), "%s", id_prefix[fmt]);
	for (i = 0; i < sizeof(rnd) && n + 2 < sizeof(m->id); i++) {
		m->id[n++] = hex[rnd[i] >> 4];
		m->id[n++] = hex[rnd[i] & 15];
	}
	m->id[n] = '\0';
}

const char *api_finish_reason(enum engine_finish f)
{
	return f == ENGINE_FINISH_LENGTH ? "length" : "stop";
}

static void usage(struct jsonw *w, const struct engine_result *r)
{
	jsonw_raw(w, "{\"prompt_tokens\":");
	jsonw_int(w, r->prompt_tokens);
	jsonw_raw(w, ",\"completion_tokens\":");
	jsonw_int(w, r->completion_tokens);
	jsonw_raw(w, ",\"total_tokens\":");
	jsonw_int(w, r->prompt_tokens + r->completion_tokens);
	jsonw_raw(w, ",\"prompt_tokens_details\":{\"cached_tokens\":");
	jsonw_int(w, r->cached_tokens);
	jsonw_raw(w, "}}");
}

static void timings(struct jsonw *w, const struct engine_result *r)
{
	jsonw_raw(w, "{\"ttft_ms\":");
	jsonw_num(w, r->ttft_ms);
	jsonw_raw(w, ",\"prefill_tokens_per_s\":");
	jsonw_num(w, r->prefill_tps);
	jsonw_raw(w, ",\"decode_tokens_per_s\":");
	jsonw_num(w, r->decode_tps);
	jsonw_raw(w, "}");
}

/* {"id":...,"object":OBJ,"created":T,"model":M, */
static void head(struct jsonw *w, const struct api_meta *m, const char *object)
{
	jsonw_reset(w);
	jsonw_raw(w, "{\"id\":");
	jsonw_str(w, m->id);
	jsonw_raw(w, ",\"object\":\"");
	jsonw_raw(w, object);
	jsonw_raw(w, "\",\"created\":");
	jsonw_int(w, m->created);
	jsonw_raw(w, ",\"model\":");
	jsonw_str(w, m->model ? m->model : "");
	jsonw_raw(w, ",");
}

/* Streamed chunks before the usage chunk carry "usage":null when the
 * client asked for usage. */
static void chunk_tail(struct jsonw *w, const struct api_meta *m)
{
	jsonw_raw(w, m->include_usage ? "],\"usage\":null}" : "]}");
}

static void finish_field(struct jsonw *w, const char *logprobs, const char *reason)
{
	jsonw_raw(w, ",\"logprobs\":");
	jsonw_raw(w, logprobs ? logprobs : "null");
	jsonw_raw(w, ",\"finish_reason\":");
	if (reason == NULL)
		jsonw_raw(w, "null");
	else
		jsonw_str(w, reason);
	jsonw_raw(w, "}");
}

/* Native bodies carry "logprobs" (chat's shape) only when asked for. */
static void native_logprobs(struct jsonw *w, const struct api_meta *m)
{
	if (m->logprobs == NULL)
		return;
	jsonw_raw(w, ",\"logprobs\":");
	jsonw_raw(w, m->logprobs);
}

/* llama-server's timings, from the engine's rates. */
static void llama_timings(struct jsonw *w, const struct engine_result *r)
{
	int64_t p = r->prompt_tokens - r->cached_tokens;
	double pms = r->prefill_tps > 0 ? (double)p / r->prefill_tps * 1e3 : 0;
	double dms = r->decode_tps > 0 ? (double)(r->completion_tokens - 1) /
					 r->decode_tps * 1e3 : 0;

	jsonw_raw(w, "{\"prompt_n\":");
	jsonw_int(w, p);
	jsonw_raw(w, ",\"prompt_ms\":");
	jsonw_num(w, pms);
	jsonw_raw(w, ",\"prompt_per_second\":");
	jsonw_num(w, r->prefill_tps);
	jsonw_raw(w, ",\"predicted_n\":");
	jsonw_int(w, r->completion_tokens);
	jsonw_raw(w, ",\"predicted_ms\":");
	jsonw_num(w, dms);
	jsonw_raw(w, ",\"predicted_per_second\":");
	jsonw_num(w, r->decode_tps);
	jsonw_raw(w, "}");
}

/* llama-server's /completion object; `r` NULL: a streamed piece. */
static void llama_body(struct jsonw *w, const struct api_meta *m,
		       const char *text, size_t len, const struct engine_result *r)
{
	jsonw_reset(w);
	jsonw_raw(w, "{\"index\":0,\"content\":");
	jsonw_strn(w, text, len);
	jsonw_raw(w, ",\"tokens\":[],\"stop\":");
	jsonw_raw(w, r ? "true" : "false");
	if (m->logprobs) {
		jsonw_raw(w, ",\"completion_probabilities\":");
		jsonw_raw(w, m->logprobs);
	}
	if (r == NULL) {
		jsonw_raw(w, "}");
		return;
	}
	jsonw_raw(w, ",\"id_slot\":0,\"model\":");
	jsonw_str(w, m->model ? m->model : "");
	jsonw_raw(w, ",\"tokens_predicted\":");
	jsonw_int(w, r->completion_tokens);
	jsonw_raw(w, ",\"tokens_evaluated\":");
	jsonw_int(w, r->prompt_tokens);
	jsonw_raw(w, ",\"tokens_cached\":");
	jsonw_int(w, r->cached_tokens);
	jsonw_raw(w, ",\"truncated\":false,\"stop_type\":");
	jsonw_str(w, r->finish == ENGINE_FINISH_LENGTH ? "limit"
		     : m->stopping_word ? "word" : "eos");
	jsonw_raw(w, ",\"stopping_word\":");
	jsonw_str(w, m->stopping_word ? m->stopping_word : "");
	jsonw_raw(w, ",\"timings\":");
	llama_timings(w, r);
	jsonw_raw(w, "}");
}

/* "choices":[{"index":I, */
static void choice_open(struct jsonw *w, uint32_t index)
{
	jsonw_raw(w, "\"choices\":[{\"index\":");
	jsonw_int(w, index);
	jsonw_raw(w, ",");
}

/* ,"index":I (a text completion's choice names its index after the text) */
static void choice_index(struct jsonw *w, uint32_t index)
{
	jsonw_raw(w, ",\"index\":");
	jsonw_int(w, index);
}

void api_response_body(struct jsonw *w, const struct api_meta *m,
		       const char *text, size_t len, const struct engine_result *r)
{
	struct api_choice c = {.text = text, .len = len, .finish = r->finish,
			       .logprobs = m->logprobs};

	api_response_body_choices(w, m, &c, 1, r);
}

void api_response_body_choices(struct jsonw *w, const struct api_meta *m,
			       const struct api_choice *ch, size_t n,
			       const struct engine_result *r)
{
	const char *reason = api_finish_reason(ch[0].finish);
	const char *text = ch[0].text;
	size_t i, len = ch[0].len;

	if (m->fmt == API_FMT_LLAMACPP) {
		llama_body(w, m, text, len, r);
		return;
	}
	if (m->fmt == API_FMT_NATIVE) {
		jsonw_reset(w);
		jsonw_raw(w, "{\"text\":");
		jsonw_strn(w, text, len);
		native_logprobs(w, m);
		jsonw_raw(w, ",\"finish_reason\":");
		jsonw_str(w, reason);
		jsonw_raw(w, ",\"usage\":");
		usage(w, r);
		jsonw_raw(w, ",\"timings\":");
		timings(w, r);
		jsonw_raw(w, "}");
		return;
	}
	head(w, m, m->fmt == API_FMT_CHAT ? "chat.completion" : "text_completion");
	jsonw_raw(w, "\"choices\":[");
	for (i = 0; i < n; i++) {
		if (i > 0)
			jsonw_raw(w, ",");
		if (m->fmt == API_FMT_CHAT) {
			jsonw_raw(w, "{\"index\":");
			jsonw_int(w, (int64_t)i);
			jsonw_raw(w, ",\"message\":{\"role\":\"assistant\",\"content\":");
			jsonw_strn(w, ch[i].text, ch[i].len);
			jsonw_raw(w, "}");
		} else {
			jsonw_raw(w, "{\"text\":");
			jsonw_strn(w, ch[i].text, ch[i].len);
			choice_index(w, (uint32_t)i);
		}
		finish_field(w, ch[i].logprobs, api_finish_reason(ch[i].finish));
	}
	jsonw_raw(w, "],\"usage\":");
	usage(w, r);
	jsonw_raw(w, "}");
}

bool api_response_chunk_start(struct jsonw *w, const struct api_meta *m)
{
	if (m->fmt != API_FMT_CHAT)
		return false;
	head(w, m, "chat.completion.chunk");
	choice_open(w, m->index);
	jsonw_raw(w, "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
	finish_field(w, m->logprobs, NULL);
	chunk_tail(w, m);
	return true;
}

void api_response_chunk_text(struct jsonw *w, const struct api_meta *m,
			     const char *text, size_t len)
{
	switch (m->fmt) {
	case API_FMT_CHAT:
		head(w, m, "chat.completion.chunk");
		choice_open(w, m->index);
		jsonw_raw(w, "\"delta\":{\"content\":");
		jsonw_strn(w, text, len);
		jsonw_raw(w, "}");
		finish_field(w, m->logprobs, NULL);
		chunk_tail(w, m);
		break;
	case API_FMT_COMPLETION:
		head(w, m, "text_completion");
		jsonw_raw(w, "\"choices\":[{\"text\":");
		jsonw_strn(w, text, len);
		choice_index(w, m->index);
		finish_field(w, m->logprobs, NULL);
		chunk_tail(w, m);
		break;
	case API_FMT_NATIVE:
		jsonw_reset(w);
		jsonw_raw(w, "{\"text\":");
		jsonw_strn(w, text, len);
		native_logprobs(w, m);
		jsonw_raw(w, "}");
		break;
	case API_FMT_LLAMACPP:
		llama_body(w, m, text, len, NULL);
		break;
	}
}

void api_response_chunk_finish(struct jsonw *w, const struct api_meta *m,
			       const struct engine_result *r)
{
	const char *reason = api_finish_reason(r->finish);

	switch (m->fmt) {
	case API_FMT_CHAT:
		head(w, m, "chat.completion.chunk");
		choice_open(w, m->index);
		jsonw_raw(w, "\"delta\":{}");
		finish_field(w, m->logprobs, reason);
		chunk_tail(w, m);
		break;
	case API_FMT_COMPLETION:
		head(w, m, "text_completion");
		jsonw_raw(w, "\"choices\":[{\"text\":\"\"");
		choice_index(w, m->index);
		finish_field(w, m->logprobs, reason);
		chunk_tail(w, m);
		break;
	case API_FMT_NATIVE:
	case API_FMT_LLAMACPP:
		api_response_body(w, m, "", 0, r);
		break;
	}
}

bool api_response_chunk_usage(struct jsonw *w, const struct api_meta *m,
			      const struct engine_result *r)
{
	if (m->fmt == API_FMT_NATIVE || m->fmt == API_FMT_LLAMACPP || !m->include_usage)
		return false;
	head(w, m, m->fmt == API_FMT_CHAT ? "chat.completion.chunk"
					  : "text_completion");
	jsonw_raw(w, "\"choices\":[],\"usage\":");
	usage(w, r);
	jsonw_raw(w, "}");
	return true;
}

/* ---- tool calls (tool_call.h) ------------------------------------------- */

static void tool_call_head(struct jsonw *w, size_t index, const struct tool_call *c)
{
	jsonw_raw(w, "{\"index\":");
	jsonw_int(w, (int64_t)index);
	jsonw_raw(w, ",\"id\":");
	jsonw_str(w, c->id);
	jsonw_raw(w, ",\"type\":\"function\",\"function\":{\"name\":");
	jsonw_str(w, c->name);
	jsonw_raw(w, ",\"arguments\":");
}

void api_response_body_tools(struct jsonw *w, const struct api_meta *m, const char *text,
			     const struct tool_parse *p, const struct engine_result *r)
{
	head(w, m, "chat.completion");
	jsonw_raw(w, "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
	if (p->has_content)
		jsonw_strn(w, text, p->content_len);
	else
		jsonw_raw(w, "null");
	jsonw_raw(w, ",\"tool_calls\":[");
	for (size_t i = 0; i < p->n_calls; i++) {
		jsonw_raw(w, i ? ",{\"id\":" : "{\"id\":");
		jsonw_str(w, p->calls[i].id);
		jsonw_raw(w, ",\"type\":\"function\",\"function\":{\"name\":");
		jsonw_str(w, p->calls[i].name);
		jsonw_raw(w, ",\"arguments\":");
		jsonw_str(w, p->calls[i].arguments);
		jsonw_raw(w, "}}");
	}
	jsonw_raw(w, "]}");
	finish_field(w, m->logprobs, "tool_calls");
	jsonw_raw(w, "],\"usage\":");
	usage(w, r);
	jsonw_raw(w, "}");
}

void api_response_chunk_tool_call(struct jsonw *w, const struct api_meta *m, size_t index,
				  const struct tool_call *c, bool first)
{
	head(w, m, "chat.completion.chunk");
	jsonw_raw(w, "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[");
	if (first) {
		tool_call_head(w, index, c);
		jsonw_raw(w, "\"\"}}");
	} else {
		jsonw_raw(w, "{\"index\":");
		jsonw_int(w, (int64_t)index);
		jsonw_raw(w, ",\"function\":{\"arguments\":");
		jsonw_str(w, c->arguments);
		jsonw_raw(w, "}}");
	}
	jsonw_raw(w, "]}");
	finish_field(w, m->logprobs, NULL);
	chunk_tail(w, m);
}

void api_response_chunk_finish_tools(struct jsonw *w, const struct api_meta *m)
{
	head(w, m, "chat.completion.chunk");
	jsonw_raw(w, "\"choices\":[{\"index\":0,\"delta\":{}");
	finish_field(w, m->logprobs, "tool_calls");
	chunk_tail(w, m);
}
