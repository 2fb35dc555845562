/*
 * json_schema_impl.h - what json_schema.c (documents, objects, arrays,
 * $ref) and json_schema_scalar.c (strings, numbers) share. Not public.
 */
#ifndef EMBER_JSON_SCHEMA_IMPL_H
#define EMBER_JSON_SCHEMA_IMPL_H

#include <jansson.h>

#include "json_schema.h"
#include "jsonw.h"

/* One compilation: the rules made so far and where errors go. */
struct ctx {
	struct jsonw out; /* the rules made so far */
	json_t *root;
	json_t *refs;     /* ref string -> rule number */
	int n_rules;
	int depth;
	char *err;
};

/* Sets the error "<message> (at <where>)"; returns -1. */
int js_fail(struct ctx *c, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* printf into the writer (one piece, under 256 bytes). */
void js_putf(struct jsonw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bytes as one GBNF string literal. */
void js_put_literal(struct jsonw *w, const char *s, size_t n);
/* An optional count keyword in [0, 1000]: 1 and *out, 0 if absent, -1. */
int js_get_count(struct ctx *c, json_t *s, const char *key, long long *out, const char *where);

/* The body of a rule for an integer / number / string schema, appended to
 * w; 0 or -1 (json_schema_scalar.c). */
int js_gen_integer(struct ctx *c, json_t *s, struct jsonw *w, const char *where);
int js_gen_number(struct ctx *c, json_t *s, struct jsonw *w, const char *where);
int js_gen_string(struct ctx *c, json_t *s, struct jsonw *w, const char *where);

#endif
