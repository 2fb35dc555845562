/*
 * jinja.h - a small Jinja interpreter for chat templates.
 *
 * A model's `tokenizer.chat_template` is a Jinja program that turns the
 * messages into the prompt text it was trained on. This module runs that
 * program the way Hugging Face's renderers do (`@huggingface/jinja`, the
 * reference our tests compare with byte for byte): trim_blocks and
 * lstrip_blocks on, one trailing newline of the template dropped.
 *
 * Covered: text, {{ }}, {# #}, whitespace control (`{%-`, `-%}`), if/elif/
 * else, for (with else, an `if` filter, loop.index/index0/revindex/first/
 * last/length, two targets), set (also `set ns.x` and block set), macro,
 * break/continue, filter blocks; literals, lists, dicts, attribute and item
 * access, slicing, calls with keyword arguments, the usual operators
 * (`~`, `in`, `not in`, `if`-expressions); tests (defined, undefined, none,
 * string, number, integer, float, boolean, mapping, iterable, sequence,
 * callable, true, false, odd, even, equalto/eq/==, in); filters and string,
 * list and dict methods that chat templates use; namespace(), range(),
 * raise_exception(msg) and strftime_now(fmt).
 *
 * Untrusted templates: every render runs under limits (memory, steps,
 * recursion depth); a template that exceeds one, or that is malformed, gets
 * an error, never a crash.
 *
 * Ownership: a jinja_template owns its parse tree; jinja_render's output is
 * malloc'd and the caller's. Threads: a parsed template is read-only while it
 * renders, so any number of threads may render it at once.
 */
#ifndef EMBER_JINJA_H
#define EMBER_JINJA_H

#include <stddef.h>

struct jinja_template;

/* Limits on one render. */
#define JINJA_MEM_MAX (64u << 20)    /* bytes the render may allocate */
#define JINJA_STEPS_MAX 2000000u     /* statements, expressions, iterations (a real template: ~10^4) */
#define JINJA_DEPTH_MAX 200          /* nested calls and expressions */

/* Parses `src` (len bytes). Returns the template, or NULL with a message
 * ("line N: ...") in err (EMBER_ERR_MAX bytes). */
struct jinja_template *jinja_parse(const char *src, size_t len, char *err);

void jinja_free(struct jinja_template *t);

/*
 * Renders `t`. `context_json` is a JSON object whose members become the
 * template's variables (messages, add_generation_prompt, bos_token, tools,
 * ...). Returns 0 and a malloc'd NUL-terminated *out of *len bytes, or a
 * negative EMBER_E* code with a message in err: EMBER_EINVAL for
 * raise_exception() (err is its message, nothing added), EMBER_EFORMAT for
 * a bad context, EMBER_ERANGE for a limit, EMBER_ETYPE for any other
 * runtime error (unknown filter, bad operands).
 */
int jinja_render(const struct jinja_template *t, const char *context_json, size_t context_len,
		 char **out, size_t *len, char *err);

#endif
