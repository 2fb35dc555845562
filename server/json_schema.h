/*
 * json_schema.h - JSON Schema into GBNF (engine/runtime/grammar.h), so that the
 * engine's constrained decoding produces only documents the schema
 * accepts. Lives in server/ because it reads the schema as a jansson tree
 * (engine/ has no JSON parser); its output is plain GBNF text.
 *
 * Covered: type (one or a list; "null" in the list or OpenAPI's nullable
 * makes a type nullable), object properties / required /
 * additionalProperties (false when absent: the output then lists only
 * named properties, which every such schema accepts), array items /
 * minItems / maxItems, enum, const, anyOf / oneOf (oneOf's exclusivity is
 * not enforced: branches are alternatives), $ref to "#", "#/$defs/..." and
 * "#/definitions/..." (recursion allowed), string minLength / maxLength /
 * pattern (a regex subset: literals, escapes \d \w \s \D \W \S, classes,
 * groups, |, * + ? {m,n}, . and ^ $ at the ends) / format (date, time,
 * date-time, uuid, email, ipv4), integer minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum (exactly, by digit ranges), number
 * bounds where both ends are integers and the lower >= 0. Annotations
 * (title, description, default, examples, $schema, $id, $comment,
 * deprecated, readOnly, writeOnly) are ignored. Every other keyword is an
 * error that names it, never silently dropped.
 *
 * Output whitespace: one optional space after ':' and ',' and inside
 * brackets; no other layout.
 *
 * Threads: pure functions, any thread.
 */
#ifndef EMBER_JSON_SCHEMA_H
#define EMBER_JSON_SCHEMA_H

#include <jansson.h>

#define JSON_SCHEMA_ERR_MAX 256

/* Compiles `schema` (borrowed). Returns 0 and *gbnf (malloc'd,
 * NUL-terminated: the caller frees), or -1 with one line in `err`
 * (JSON_SCHEMA_ERR_MAX bytes) naming the keyword and where it is. */
int json_schema_to_gbnf(json_t *schema, char **gbnf, char *err);

/* The GBNF for any JSON object (OpenAI's json_object mode), malloc'd;
 * NULL when out of memory. */
char *json_schema_any_object(void);

#endif
