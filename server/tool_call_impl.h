/*
 * tool_call_impl.h - tool_call's family table, shared by its output side
 * (tool_call.c) and its request side (tool_call_request.c). Internal to
 * those two files.
 */
#ifndef EMBER_TOOL_CALL_IMPL_H
#define EMBER_TOOL_CALL_IMPL_H

#include "tool_call.h"

/* Parses s[0..len) (from a trigger to the end) into p->calls. Returns 0
 * (every byte accounted for, at least one call), 1 (malformed) or
 * EMBER_ENOMEM. */
typedef int (*tool_parse_fn)(const char *s, size_t len, struct tool_parse *p);

struct tool_family_row {
	const char *name;
	const char *markers[3];  /* template texts that choose the family */
	const char *triggers[3]; /* output texts that start a call, anywhere */
	const char *start;       /* characters that start a call at the output's
				  * start (after whitespace); "" none */
	tool_parse_fn parse;
	/* The grammar's shape (GBNF literals' contents, already escaped):
	 * open call (sep call)* close, each call = call_open fn call_close,
	 * fn = {"name": "N", "<args_key>": ARGS}. */
	const char *args_key;
	const char *g_open, *g_sep, *g_close, *g_call_open, *g_call_close;
	/* "auto": the grammar's first text, which starts it lazily (anywhere,
	 * or only as the output's start) */
	const char *lazy_trigger;
	bool lazy_at_start;
};

const struct tool_family_row *tool_family_row(enum tool_family f);

/* One call from a JSON object {"name": S, "arguments"|"parameters": {...}
 * or a string holding one}. Returns 0, 1 (not a call) or EMBER_ENOMEM. */
int tool_call_add_json(struct tool_parse *p, json_t *obj);

/* Gemma's Python-style calls: `name(k=v, ...)` lines, optionally inside
 * print(...), in s[0..len). Same returns as tool_parse_fn. */
int tool_call_parse_python(const char *s, size_t len, struct tool_parse *p);

#endif
