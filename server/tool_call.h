/*
 * tool_call.h - OpenAI tool calling over a model's own call syntax: the
 * request side (`tools`, `tool_choice`, `parallel_tool_calls` read and
 * checked; for `required` or a named function, the GBNF that forces a call
 * whose arguments follow the function's JSON Schema), and the output side
 * (the generated text parsed into OpenAI `tool_calls`, whole or streamed).
 *
 * Families. Each model family writes calls its own way; one table row per
 * family (tool_call.c) holds what the template says, the triggers that
 * start a call in the output, the parser and the grammar's shape:
 *
 *   family   chosen when the template has      a call in the output
 *   llama3   <|python_tag|>, <|start_header_id|> {"name": N, "parameters": {...}} (after
 *                                              <|python_tag|>, or the output's start; ';'
 *                                              between several)
 *   hermes   <tool_call>                       <tool_call>{"name": N, "arguments": {...}}</tool_call>
 *                                              (Hermes 2/3, Qwen 2.5/3, SmolLM3)
 *   mistral  [TOOL_CALLS]                      [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
 *   phi      <|tool_call|>, functools          <|tool_call|>[{...}]<|/tool_call|>, functools[{...}]
 *   gemma    tool_code                         ```tool_code\nname(k=v, ...)\n``` (Python call
 *                                              syntax), or a JSON call as llama3 at the start
 *
 * A template with none of these markers falls back on its chat family
 * (chatml -> hermes, llama3, gemma, phi3 -> phi), else llama3's bare JSON.
 * Control-token markers ([TOOL_CALLS], <|python_tag|>, <|tool_call|>) are
 * not in the output text the detokenizer gives, so each parser also takes
 * the call without its marker at the start of the output ('{' or '[').
 *
 * Parsing. The text before the first trigger is content; from the trigger
 * on, the text must be one or more complete calls (whitespace around them
 * allowed), each with a string name and object arguments (or a string
 * holding a JSON object). Anything else - malformed JSON, a missing name,
 * text after the calls, a call cut off by max_tokens - makes the whole
 * output plain content: a wrong call is never invented, and nothing is
 * dropped.
 *
 * Streaming (tool_stream): content streams as it comes, except whitespace
 * at the very start and any tail that may be the start of a trigger; from
 * a trigger on the text is held and parsed when the generation ends, so
 * the streamed content and calls always reassemble to exactly what the
 * non-streamed parse gives (the calls arrive as deltas at the end, not
 * token by token).
 *
 * Grammars. "required" and a named function force a call from the first
 * token (tool_call_grammar: the family's call syntax around each
 * function's parameters schema, compiled by json_schema.h; the control-token
 * markers are left out, as the grammar's vocabulary has no control tokens).
 * "auto" uses the same grammar lazily (tool_call_trigger): free text until
 * the call's first text, then held to the schema.
 *
 * Threads: pure functions; a tool_stream has one owner (the loop thread).
 */
#ifndef EMBER_TOOL_CALL_H
#define EMBER_TOOL_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "api_error.h"
#include "gen_request.h"

enum tool_family {
	TOOL_FAMILY_LLAMA3,
	TOOL_FAMILY_HERMES,
	TOOL_FAMILY_MISTRAL,
	TOOL_FAMILY_PHI,
	TOOL_FAMILY_GEMMA,
	TOOL_FAMILY_COUNT
};

/* The family for a Jinja template `tmpl` (len bytes; NULL = none) and the
 * chat family name (chat.h's, e.g. "chatml"; NULL allowed). */
enum tool_family tool_family_detect(const char *tmpl, size_t len, const char *chat_family);
/* "llama3", "hermes", ...; "?" out of range. */
const char *tool_family_name(enum tool_family f);

/* ---- request ------------------------------------------------------------ */

/*
 * Reads `tools`, `tool_choice`, `parallel_tool_calls` of a chat request
 * (r->tools already holds the tools array as JSON text) into r->tool_mode,
 * r->tool_name, r->parallel_tool_calls. Checks every tool definition
 * (type "function", a name of [A-Za-z0-9_-]{1,64}, object parameters) and,
 * for `required` or a named function, that the schemas compile. Refuses
 * the legacy `functions` / `function_call`, a tool_choice naming no given
 * tool, and tools with a response_format / json_schema / grammar. Returns 0
 * or EMBER_EINVAL / EMBER_ENOMEM with `e` (400 naming the field).
 */
int tool_call_read_request(json_t *root, struct gen_request *r, struct api_error *e);

/*
 * The GBNF for a request whose tool_mode is GEN_TOOLS_REQUIRED or
 * GEN_TOOLS_NAMED: the output is one call (several when `parallel`) in
 * family `f`'s syntax, of `name` (NULL: any of the tools), with arguments
 * valid under the function's parameters schema. Returns 0 and *gbnf
 * (malloc'd), or EMBER_EINVAL / EMBER_ENOMEM with `err` (EMBER_ERR_MAX).
 */
int tool_call_grammar(enum tool_family f, const char *tools_json, const char *name, bool parallel,
		      char **gbnf, char *err);

/* The text that starts a call in family f's grammar above: with "auto",
 * the grammar is lazy (engine.h grammar_trigger), so the model writes
 * freely until it begins a call, whose arguments the schema then holds.
 * *at_start: only as the output's first text. */
const char *tool_call_trigger(enum tool_family f, bool *at_start);

/* ---- output ------------------------------------------------------------- */

struct tool_call {
	char id[32];      /* "call_" + 24 hex digits */
	char *name;
	char *arguments;  /* a JSON object as compact text */
};

struct tool_parse {
	size_t content_len;     /* content = text[0..content_len) */
	bool has_content;       /* false: OpenAI's content null (calls, and only
				 * whitespace before them) */
	struct tool_call *calls;
	size_t n_calls;         /* 0: the whole text is content */
};

/* Parses `text` (len bytes) as family `f` writes it. Returns 0, or
 * EMBER_ENOMEM (p then empty). Release with tool_parse_free. */
int tool_call_parse(enum tool_family f, const char *text, size_t len, struct tool_parse *p);
void tool_parse_free(struct tool_parse *p);

/* Streaming: feed the text as it comes; each call says how much content
 * may go out now. */
struct tool_stream {
	enum tool_family family;
	char *buf;          /* all the text so far */
	size_t len, cap;
	size_t sent;        /* content bytes handed out */
	bool triggered;     /* a trigger was seen: the rest is held */
	bool oom;
};

void tool_stream_init(struct tool_stream *s, enum tool_family f);
void tool_stream_free(struct tool_stream *s);

/* Appends text[0..len); *out and *out_len: content to send now (points into
 * the stream's buffer, valid until the next call; may be empty). Returns 0
 * or EMBER_ENOMEM. */
int tool_stream_feed(struct tool_stream *s, const char *text, size_t len, const char **out,
		     size_t *out_len);

/* The generation ended: parses everything; *out and *out_len are the content
 * still to send, and p the calls (p->n_calls 0: none). Returns 0 or
 * EMBER_ENOMEM. */
int tool_stream_finish(struct tool_stream *s, const char **out, size_t *out_len, struct tool_parse *p);

#endif
