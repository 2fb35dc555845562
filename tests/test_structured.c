/*
 * test_structured.c - constrained generation end to end: a JSON Schema
 * compiled to a grammar drives the engine on the golden llama model (a
 * random model with a real 32k SentencePiece vocabulary), sampled with
 * many seeds at temperature 1; every output must parse and satisfy the
 * schema. Also: a grammar that can only end finishes on its own, and a bad
 * grammar is refused at submit.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "engine.h"
#include "grammar.h"
#include "json_schema.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"
#include "testutil.h"

#define N_SEEDS 300

static const char SCHEMA[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"name\":{\"type\":\"string\",\"maxLength\":12},"
	"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},\"maxItems\":3},"
	"\"ok\":{\"type\":\"boolean\"},"
	"\"kind\":{\"anyOf\":[{\"const\":\"x\"},{\"type\":\"null\"}]},"
	"\"when\":{\"type\":\"string\",\"format\":\"date\"}},"
	"\"required\":[\"name\",\"age\",\"tags\",\"when\"]}";

/* The schema's rules, checked on the parsed document. */
static void check_document(const char *text)
{
	json_error_t jerr;
	json_t *d = json_loads(text, 0, &jerr), *v, *x;
	const char *key;
	size_t i;

	ck_assert_msg(d != NULL, "does not parse: %s (%s)", text, jerr.text);
	ck_assert(json_is_object(d));
	json_object_foreach(d, key, v) {
		if (!strcmp(key, "name")) {
			ck_assert(json_is_string(v));
			ck_assert_msg(json_string_length(v) <= 12 ||
					      /* maxLength counts code points */
					      strlen(json_string_value(v)) <= 48,
				      "%s", text);
		} else if (!strcmp(key, "age")) {
			ck_assert_msg(json_is_integer(v) && json_integer_value(v) >= 0 &&
					      json_integer_value(v) <= 150, "%s", text);
		} else if (!strcmp(key, "tags")) {
			ck_assert_msg(json_is_array(v) && json_array_size(v) <= 3, "%s", text);
			json_array_foreach(v, i, x)
				ck_assert_msg(json_is_string(x) && strlen(json_string_value(x)) == 1 &&
						      strchr("abc", json_string_value(x)[0]), "%s", text);
		} else if (!strcmp(key, "ok")) {
			ck_assert(json_is_boolean(v));
		} else if (!strcmp(key, "kind")) {
			ck_assert(json_is_null(v) || (json_is_string(v) && !strcmp(json_string_value(v), "x")));
		} else if (!strcmp(key, "when")) {
			const char *s = json_string_value(v);

			ck_assert_msg(s && strlen(s) == 10 && s[4] == '-' && s[7] == '-', "%s", text);
		} else {
			ck_abort_msg("extra key %s in %s", key, text);
		}
	}
	ck_assert_msg(json_object_get(d, "name") && json_object_get(d, "age") &&
			      json_object_get(d, "tags") && json_object_get(d, "when"),
		      "a required key is missing: %s", text);
	json_decref(d);
}

START_TEST(every_sampled_output_parses_and_fits_the_schema)
{
	struct model m;
	struct tokenizer *tok = NULL;
	struct engine *e = NULL;
	struct engine_config cfg = {.slots = 8, .n_ctx = 512, .kv_f32 = true, .queue_max = N_SEEDS};
	struct sampler_config sc;
	struct grammar *g = NULL;
	json_t *schema = json_loads(SCHEMA, 0, NULL);
	char err[EMBER_ERR_MAX] = "", serr[JSON_SCHEMA_ERR_MAX], *gbnf = NULL;
	struct test_out *o = calloc(N_SEEDS, sizeof(*o));
	int i, stopped = 0;

	test_llama_open(&m, &tok);
	ck_assert_msg(engine_new(&e, &m, tok, &cfg, err) == 0, "%s", err);
	ck_assert_msg(json_schema_to_gbnf(schema, &gbnf, serr) == 0, "%s", serr);
	ck_assert_int_eq(grammar_parse_gbnf(&g, gbnf, strlen(gbnf), err), 0);
	sampler_config_default(&sc);
	for (i = 0; i < N_SEEDS; i++) {
		struct engine_request r = {.prompt = "Describe a person as JSON:",
					   .prompt_len = 26, .add_special = true,
					   .max_tokens = 400, .sampling = &sc,
					   .grammar = gbnf, .grammar_len = strlen(gbnf),
					   .on_text = test_out_on_text, .on_done = test_out_on_done,
					   .data = &o[i]};
		uint64_t id;

		sc.seed = (uint64_t)i * 7919u + 1;
		ck_assert_msg(engine_submit(e, &r, &id, err) == 0, "%s", err);
	}
	test_outs_wait(o, N_SEEDS, "generation");
	for (i = 0; i < N_SEEDS; i++) {
		o[i].text[o[i].len] = '\0';
		ck_assert_msg(o[i].res.finish == ENGINE_FINISH_STOP, "seed %d: finish %d (%s) after '%s'",
			      i, (int)o[i].res.finish, o[i].res.message, o[i].text);
		ck_assert_msg(grammar_matches(g, o[i].text, o[i].len), "seed %d: '%s'", i, o[i].text);
		check_document(o[i].text);
		stopped++;
	}
	ck_assert_int_eq(stopped, N_SEEDS);
	engine_free(e);
	grammar_free(g);
	free(gbnf);
	free(o);
	json_decref(schema);
	test_llama_close(&m, tok);
}
END_TEST

START_TEST(a_finished_grammar_stops_the_output_and_a_bad_one_is_refused)
{
	struct model m;
	struct tokenizer *tok = NULL;
	struct engine *e = NULL;
	struct engine_config cfg = {.slots = 1, .n_ctx = 256, .kv_f32 = true};
	const char *gbnf = "root ::= \"yes\" | \"no\"";
	struct test_out o = {0};
	char err[EMBER_ERR_MAX] = "";
	uint64_t id;

	test_llama_open(&m, &tok);
	ck_assert_msg(engine_new(&e, &m, tok, &cfg, err) == 0, "%s", err);
	{
		struct engine_request r = {.prompt = "Answer:", .prompt_len = 7, .add_special = true,
					   .max_tokens = 50, .grammar = gbnf,
					   .grammar_len = strlen(gbnf), .on_text = test_out_on_text,
					   .on_done = test_out_on_done, .data = &o};

		ck_assert_msg(engine_submit(e, &r, &id, err) == 0, "%s", err);
		test_outs_wait(&o, 1, "generation");
		o.text[o.len] = '\0';
		ck_assert_int_eq(o.res.finish, ENGINE_FINISH_STOP);
		ck_assert_msg(!strcmp(o.text, "yes") || !strcmp(o.text, "no"), "'%s'", o.text);
		r.grammar = "root ::= undefined";
		r.grammar_len = strlen(r.grammar);
		ck_assert_int_eq(engine_submit(e, &r, &id, err), EMBER_EINVAL);
		ck_assert(strstr(err, "undefined") != NULL);
	}
	engine_free(e);
	test_llama_close(&m, tok);
}
END_TEST

Suite *suite_structured(void)
{
	Suite *s = suite_create("structured");
	TCase *tc = tcase_create("structured");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, every_sampled_output_parses_and_fits_the_schema);
	tcase_add_test(tc, a_finished_grammar_stops_the_output_and_a_bad_one_is_refused);
	suite_add_tcase(s, tc);
	return s;
}
