/*
 * chat.h - chat messages to the prompt text a model was trained on.
 *
 * A GGUF file carries its chat format as a Jinja program
 * (`tokenizer.chat_template`). We do not run Jinja: we recognize the known
 * template families by distinctive substrings and render them from a table,
 * one row per family (role prefixes and suffixes, where the system message
 * goes, the generation prompt, the end-of-turn stop texts).
 *
 *   family   detected by                        one turn / generation prompt
 *   chatml   "<|im_start|>"                     <|im_start|>user\nU<|im_end|>\n / <|im_start|>assistant\n
 *   llama3   "<|start_header_id|>"              <|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>
 *   gemma    "<start_of_turn>"                  <start_of_turn>user\nU<end_of_turn>\n / <start_of_turn>model\n
 *   phi3     "<|end|>" and "<|assistant|>"      <|user|>\nU<|end|>\n / <|assistant|>\n
 *   zephyr   "<|assistant|>" (no "<|end|>")     <|user|>\nU</s>\n / <|assistant|>\n    (</s> = eos text)
 *   llama2   "[INST]"                           <s>[INST] U [/INST] A </s>              (<<SYS>> block)
 *   phi2     "Instruct:" and "Output:"          Instruct: U\nOutput: A\n / Output:
 *   falcon   "Falcon:"                          User: U\nFalcon: A\n / Falcon:
 *
 * Phi-2 and Falcon-instruct checkpoints ship no template: those families are
 * chosen by name. A template that matches no family (and a model without
 * one) gets CHAT_TEMPLATE_FALLBACK = ChatML: it is the most widely trained
 * format, and its markers are plain text to a model that does not know them,
 * so the worst case is a prompt the model reads as a transcript.
 *
 * System messages: chatml, llama3, phi3, zephyr, phi2 (a plain first line)
 * and falcon ("System: ...") give them their own turn. gemma has no system
 * role: its content is merged into the first user turn ("S\n\nU"), as Gemma 3's
 * own template does. llama2 puts it in a <<SYS>> block inside the first
 * [INST]. For the two merging families a system message is allowed only
 * first; one not followed by a user message becomes a user turn of its own.
 * gemma, llama2 and llama3 strip surrounding whitespace from contents, as
 * their templates do (`| trim`, `.strip()`); the others copy contents as is.
 *
 * BOS: the rendered text never STARTS with BOS text. The engine tokenizes the
 * prompt with add_special = 1, so the tokenizer adds the BOS id exactly when
 * the model's add_bos flag says so; writing "<bos>" too would give two. BOS
 * text in the middle of a conversation (llama2 opens every later [INST] with
 * "<s>") is written from `bos_text`. chat_template_leading_bos() says which
 * families' templates begin with bos_token, for a model whose add_bos flag is
 * off but whose template wants one.
 *
 * Special tokens: the engine tokenizes the whole rendered text with
 * parse_special = 1. That is what Hugging Face's apply_chat_template followed
 * by tokenization and llama.cpp's server do, so token ids match the
 * references; tokenizing contents separately would not (SentencePiece adds
 * a prefix space at the start of every encode call). The price: marker text
 * inside a user's content (e.g. "<|im_end|>") becomes a control token, as it
 * does in those references. chat_apply() itself copies contents verbatim.
 *
 * Jinja: a model's own template is run by the Jinja interpreter (jinja.h,
 * engine/text/chat_jinja.c) when it parses; the family table above is then only
 * the source of stop texts, and the renderer for files without a template
 * or with one that does not parse.
 *
 * Ownership: chat_apply() allocates nothing; a chat_style owns its parsed
 * template (chat_style_free). Threads: rendering reads only; call from any
 * thread.
 */
#ifndef EMBER_CHAT_H
#define EMBER_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "ember.h"
#include "gguf.h"
#include "tokenizer.h"

enum chat_template {
	CHAT_TEMPLATE_AUTO = 0, /* "auto": decide from the model (see chat_template_select) */
	CHAT_TEMPLATE_CHATML,
	CHAT_TEMPLATE_LLAMA3,
	CHAT_TEMPLATE_GEMMA,
	CHAT_TEMPLATE_PHI3,
	CHAT_TEMPLATE_ZEPHYR,
	CHAT_TEMPLATE_LLAMA2,
	CHAT_TEMPLATE_PHI2,
	CHAT_TEMPLATE_FALCON,
	CHAT_TEMPLATE_COUNT
};

#define CHAT_TEMPLATE_FALLBACK CHAT_TEMPLATE_CHATML
/* Most stop texts any family returns from chat_template_stops(). */
#define CHAT_STOPS_MAX 4

/* One message. role: "system", "user" or "assistant" ("tool" too with a
 * Jinja template); content: UTF-8 text, not NULL (may be empty) except in
 * chat_render(), where NULL is JSON null (an assistant turn that only calls
 * tools). content_len: its bytes, for a content that holds NUL (JSON
 * "\u0000" is an ordinary character, rendered in place); 0 means
 * strlen(content), so a zero-initialized length reads a C string.
 * tool_calls: NULL, or the OpenAI tool_calls array as JSON text;
 * tool_call_id: NULL or the id a tool message answers. All borrowed for the
 * duration of the call. */
struct chat_msg {
	const char *role;
	const char *content;
	size_t content_len;
	const char *tool_calls;
	const char *tool_call_id;
};

/* The family whose markers `jinja` (len bytes, need not be NUL-terminated)
 * contains, or CHAT_TEMPLATE_AUTO when none matches or jinja is NULL. */
enum chat_template chat_template_detect(const char *jinja, size_t len);

/* The family named `name` (the names chat_template_name() gives: "auto",
 * "chatml", "llama3", "gemma", "phi3", "zephyr", "llama2", "phi2",
 * "falcon"; case-insensitive), or EMBER_EINVAL for NULL or an unknown name. */
int chat_template_from_name(const char *name);

/* Static name of `t` ("auto" for CHAT_TEMPLATE_AUTO); "?" if out of range. */
const char *chat_template_name(enum chat_template t);

/* The family to render with: `choice` if it names one, otherwise the one
 * detected in the model's template, otherwise CHAT_TEMPLATE_FALLBACK. Never
 * returns CHAT_TEMPLATE_AUTO. */
enum chat_template chat_template_select(enum chat_template choice, const char *jinja, size_t len);

/* 1 if the family's own template begins with bos_token (gemma, llama2,
 * llama3), else 0. See BOS above. */
int chat_template_leading_bos(enum chat_template t);

/*
 * Renders `n` messages in family `t` (CHAT_TEMPLATE_AUTO renders the
 * fallback), followed by the generation prompt (the assistant's opening) when
 * `add_generation_prompt` is set. bos_text and eos_text are the vocabulary's
 * BOS and EOS token texts (e.g. "<s>", "</s>"); NULL means "". Output is
 * snprintf-like: at most cap - 1 bytes go to `buf` followed by a NUL (nothing
 * is written when cap is 0, and buf may then be NULL). Returns the full
 * length without the NUL, so a result >= cap means: call again with a bigger
 * buffer. Errors (negative, detail in `err`, EMBER_ERR_MAX bytes or NULL):
 * EMBER_EINVAL for no messages, a NULL role or content, a role other than
 * system/user/assistant, a system message after the first in gemma or
 * llama2, or an unknown family.
 */
int64_t chat_apply(enum chat_template t, const struct chat_msg *msgs, size_t n, const char *bos_text,
		   const char *eos_text, int add_generation_prompt, char *buf, size_t cap, char *err);

/*
 * Texts that end an assistant turn in family `t` (e.g. "<|im_end|>",
 * "<end_of_turn>", "\nUser:"), for a generation that must stop at end of turn
 * even when the model emits the marker as plain text rather than an
 * end-of-generation token. Families that end turns with EOS list `eos_text`
 * (skipped when NULL or ""). Writes up to `cap` borrowed pointers to `out`
 * (static strings or eos_text) and returns how many there are
 * (<= CHAT_STOPS_MAX).
 */
size_t chat_template_stops(enum chat_template t, const char *eos_text, const char **out, size_t cap);

/*
 * A model's chat setup, resolved once at load: the family (override or the
 * file's tokenizer.chat_template), the vocabulary's BOS/EOS texts and the
 * family's end-of-turn stop texts. `stops` may point into `eos_text`: do
 * not copy a chat_style by value after chat_style_init().
 */
struct jinja_template;

struct chat_style {
	enum chat_template family;   /* the table row: fallback renderer, stop texts */
	struct jinja_template *jinja; /* owned; NULL: render with `family` */
	char *jinja_src;             /* owned copy of its source (NULL with no jinja):
				      * what it renders, e.g. whether it shows tools */
	size_t jinja_len;
	int strip_bos;               /* the tokenizer adds BOS itself: drop a leading bos_text */
	char warning[EMBER_ERR_MAX]; /* "" or why the model's template is not used */
	char bos_text[64]; /* "" when the vocabulary has none (or it is longer) */
	char eos_text[64];
	const char *stops[CHAT_STOPS_MAX];
	size_t n_stops;
};

/* Fills `s` for the model file `g` and its tokenizer; `choice` is an
 * override (CHAT_TEMPLATE_AUTO: the file's own, else the fallback). With
 * CHAT_TEMPLATE_AUTO the file's tokenizer.chat_template is parsed as Jinja
 * and renders from then on; one that fails to parse leaves the family table
 * in charge and says why in s->warning (for the caller to log once).
 * Release with chat_style_free(). */
void chat_style_init(struct chat_style *s, enum chat_template choice, const struct gguf *g,
		     const struct tokenizer *t);

/* Renders with the Jinja template `src` (len bytes; e.g. the file given by
 * --chat-template-file) from now on instead of the model's own. Returns 0,
 * or EMBER_EFORMAT with the parse error in err (s unchanged). */
int chat_style_set_template(struct chat_style *s, const char *src, size_t len, char *err);

/* Releases what chat_style_init() and chat_style_set_template() took; NULL
 * allowed. */
void chat_style_free(struct chat_style *s);

/*
 * The one rendering entry point: `n` messages (n >= 1) and the tools
 * (`tools_json`: NULL or an OpenAI tools array as JSON text) to the prompt
 * text, with the assistant's opening when add_generation_prompt is set. With
 * a Jinja template the context is messages, tools, add_generation_prompt,
 * bos_token and eos_token; without one the family table renders (tools, tool
 * messages and tool calls are then refused). A Jinja template that never
 * mentions `tools` refuses them too, rather than dropping them silently. A leading BOS text is dropped
 * when the tokenizer adds BOS itself (see BOS above). Output: a malloc'd,
 * NUL-terminated *out of *len bytes (the caller frees it). Errors:
 * EMBER_EINVAL with the template's raise_exception() message as is, or
 * "chat template: ..." for any other way the messages do not fit it;
 * EMBER_ENOMEM. Threads: any; `s` is read-only.
 */
int chat_render(const struct chat_style *s, const struct chat_msg *msgs, size_t n, const char *tools_json,
		int add_generation_prompt, char **out, size_t *len, char *err);

/* chat_render() without tools, with the generation prompt. */
int chat_style_render(const struct chat_style *s, const struct chat_msg *msgs, size_t n,
		      char **out, size_t *len, char *err);

#endif
