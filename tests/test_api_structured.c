/* test_api_structured.c - the structured-output request fields of the
 * OpenAI bodies (api_openai.c): what becomes a grammar, and the 400s that
 * name the field for everything else. */
#include <check.h>
#include <string.h>

#include "api_openai.h"
#include "ember.h"
#include "grammar.h"

static const struct api_limits lim = {.max_tokens = 64};

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOL "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]"

/* Parses a chat body that must succeed; returns its grammar (owned by
 * the request, which the caller frees). */
static void parse_ok(const char *body, struct gen_request *r)
{
	struct api_error e;

	ck_assert_msg(api_openai_parse_chat(body, strlen(body), &lim, r, &e) == 0, "%s: %s", body,
		      e.message);
}

static int matches(const char *gbnf, const char *text)
{
	struct grammar *g = NULL;
	int ok;

	ck_assert_int_eq(grammar_parse_gbnf(&g, gbnf, strlen(gbnf), NULL), 0);
	ok = grammar_matches(g, text, strlen(text));
	grammar_free(g);
	return ok;
}

START_TEST(each_field_becomes_the_right_grammar)
{
	struct gen_request r;

	parse_ok("{" MSG "}", &r);
	ck_assert(r.grammar == NULL);
	gen_request_free(&r);
	parse_ok("{" MSG ",\"response_format\":{\"type\":\"text\"}}", &r);
	ck_assert(r.grammar == NULL);
	gen_request_free(&r);
	parse_ok("{" MSG ",\"response_format\":{\"type\":\"json_object\"}}", &r);
	ck_assert(matches(r.grammar, "{\"a\": [1, {\"b\": null}]}"));
	ck_assert(!matches(r.grammar, "[1]"));
	gen_request_free(&r);
	parse_ok("{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\","
		 "\"strict\":true,\"schema\":{\"type\":\"integer\",\"maximum\":5}}}}", &r);
	ck_assert(matches(r.grammar, "5") && !matches(r.grammar, "6"));
	gen_request_free(&r);
	parse_ok("{" MSG ",\"json_schema\":{\"enum\":[\"a\"]}}", &r);
	ck_assert(matches(r.grammar, "\"a\"") && !matches(r.grammar, "\"b\""));
	gen_request_free(&r);
	parse_ok("{" MSG ",\"grammar\":\"root ::= [0-9]+\"}", &r);
	ck_assert(matches(r.grammar, "42") && !matches(r.grammar, "x"));
	gen_request_free(&r);
	parse_ok("{" MSG ",\"grammar\":\"\",\"tool_choice\":\"none\",\"parallel_tool_calls\":true}", &r);
	ck_assert(r.grammar == NULL);
	gen_request_free(&r);
}
END_TEST

START_TEST(refusals_name_the_field)
{
	static const struct {
		const char *extra, *param, *word;
	} rows[] = {
		{"\"response_format\":{\"type\":\"xml\"}", "response_format.type", "xml"},
		{"\"response_format\":\"json\"", "response_format", "object"},
		{"\"response_format\":{\"type\":\"json_schema\"}", "response_format.json_schema", "object"},
		{"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\"}}",
		 "response_format.json_schema.schema", "Missing"},
		{"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":"
		 "{\"not\":{}}}}", "response_format.json_schema.schema", "'not'"},
		{"\"json_schema\":{\"type\":\"object\",\"minProperties\":1}", "json_schema",
		 "minProperties"},
		{"\"grammar\":\"root ::= (\"", "grammar", "grammar"},
		{"\"grammar\":5", "grammar", "string"},
		{"\"grammar\":\"root ::= \\\"a\\\"\",\"response_format\":{\"type\":\"json_object\"}",
		 "grammar", "together"},
		{"\"tools\":[]", "tools", "non-empty"},
		{"\"functions\":[]", "functions", "deprecated"},
		{"\"tool_choice\":\"auto\"", "tool_choice", "only allowed"},
		{TOOL ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}",
		 "tool_choice.function.name", "not in"},
		{TOOL ",\"tool_choice\":\"required\",\"grammar\":\"root ::= \\\"a\\\"\"", "tools",
		 "combined"},
		{"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
		 "{\"allOf\":[]}}}],\"tool_choice\":\"required\"", "tools[0].function.parameters", "allOf"},
		{"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":5}}]",
		 "tools[0].function.parameters", "Schema"},
		{TOOL ",\"parallel_tool_calls\":1", "parallel_tool_calls", "boolean"},
	};
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char body[512];
		struct gen_request r;
		struct api_error e;

		snprintf(body, sizeof(body), "{" MSG ",%s}", rows[i].extra);
		ck_assert_msg(api_openai_parse_chat(body, strlen(body), &lim, &r, &e) != 0, "accepted %s",
			      body);
		ck_assert_int_eq(e.status, 400);
		ck_assert_msg(!strcmp(e.param, rows[i].param), "%s: param '%s'", body, e.param);
		ck_assert_msg(strstr(e.message, rows[i].word) != NULL, "%s: message '%s'", body,
			      e.message);
	}
}
END_TEST

/* tools, tool_choice and parallel_tool_calls into the request's mode. */
START_TEST(tool_fields_set_the_mode)
{
	struct gen_request r;

	parse_ok("{" MSG "," TOOL "}", &r);
	ck_assert(r.tool_mode == GEN_TOOLS_AUTO && r.parallel_tool_calls && r.tools != NULL);
	gen_request_free(&r);
	parse_ok("{" MSG "," TOOL ",\"tool_choice\":\"none\"}", &r);
	ck_assert(r.tool_mode == GEN_TOOLS_OFF && r.tools != NULL);
	gen_request_free(&r);
	parse_ok("{" MSG "," TOOL ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", &r);
	ck_assert(r.tool_mode == GEN_TOOLS_REQUIRED && !r.parallel_tool_calls && r.grammar == NULL);
	gen_request_free(&r);
	parse_ok("{" MSG "," TOOL ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}}",
		 &r);
	ck_assert(r.tool_mode == GEN_TOOLS_NAMED && !strcmp(r.tool_name, "f"));
	gen_request_free(&r);
}
END_TEST

Suite *suite_api_structured(void)
{
	Suite *s = suite_create("api_structured");
	TCase *tc = tcase_create("api_structured");

	tcase_add_test(tc, each_field_becomes_the_right_grammar);
	tcase_add_test(tc, refusals_name_the_field);
	tcase_add_test(tc, tool_fields_set_the_mode);
	suite_add_tcase(s, tc);
	return s;
}
