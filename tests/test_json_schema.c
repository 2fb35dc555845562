/* test_json_schema.c - JSON Schema to GBNF: every keyword with documents
 * it must accept and documents it must reject, the errors for what is not
 * supported, and the compile time of a 50-property schema. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "grammar.h"
#include "json_schema.h"

static struct grammar *compile_schema(const char *schema_text)
{
	json_error_t jerr;
	json_t *s = json_loads(schema_text, JSON_DECODE_ANY, &jerr);
	char err[JSON_SCHEMA_ERR_MAX], gerr[EMBER_ERR_MAX] = "";
	struct grammar *g = NULL;
	char *gbnf = NULL;

	ck_assert_msg(s != NULL, "bad test schema %s: %s", schema_text, jerr.text);
	ck_assert_msg(json_schema_to_gbnf(s, &gbnf, err) == 0, "%s: %s", schema_text, err);
	ck_assert_msg(grammar_parse_gbnf(&g, gbnf, strlen(gbnf), gerr) == 0, "%s: %s\n%s", schema_text,
		      gerr, gbnf);
	free(gbnf);
	json_decref(s);
	return g;
}

struct kcase {
	const char *schema;
	const char *yes[4];
	const char *no[4];
};

static const struct kcase CASES[] = {
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
	 "\"required\":[\"a\"]}",
	 {"{\"a\":1}", "{\"a\": -2, \"b\": \"x\"}", "{ \"a\":0 }"},
	 {"{}", "{\"b\":\"x\"}", "{\"a\":1,\"c\":2}", "{\"a\":\"1\"}"}},
	{"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},"
	 "\"additionalProperties\":{\"type\":\"integer\"}}",
	 {"{\"a\":true,\"x\":3}", "{\"x\":3,\"y\":4}", "{}"},
	 {"{\"x\":\"s\"}", "{\"a\":1}"}},
	{"{\"type\":\"object\",\"additionalProperties\":true}",
	 {"{\"x\":[1,{\"y\":null}]}", "{}"}, {"[]", "{\"x\"}"}},
	{"{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
	 {"[1]", "[1.5, -2e3, 0]"}, {"[]", "[1,2,3,4]", "[\"a\"]", "[01]"}},
	{"{\"type\":\"array\",\"maxItems\":0}", {"[]"}, {"[1]"}},
	{"{\"enum\":[\"red\",42,null,{\"k\":[1]}]}", {"\"red\"", "42", "null", "{\"k\":[1]}"},
	 {"\"blue\"", "43", "\"Red\""}},
	{"{\"const\":\"fixed\"}", {"\"fixed\""}, {"\"fixe\"", "\"fixedd\""}},
	{"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]}",
	 {"7", "\"ab\""}, {"\"abc\"", "1.5", "true"}},
	{"{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"null\"}]}", {"true", "null"}, {"0"}},
	{"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/node\"}}}},"
	 "\"$ref\":\"#/$defs/node\"}",
	 {"{}", "{\"next\":{\"next\":{}}}"}, {"{\"next\":1}"}},
	{"{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", {"\"AB-123\""},
	 {"\"AB-12\"", "\"ab-123\"", "\"xAB-123\""}},
	{"{\"type\":\"string\",\"pattern\":\"cat|dog\"}", {"\"a cat!\"", "\"dog\""}, {"\"cow\""}},
	{"{\"type\":\"string\",\"pattern\":\"^(ab)+\\\\.(x|y)?$\"}", {"\"abab.\"", "\"ab.y\""},
	 {"\"ab\"", "\"aba.\""}},
	{"{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\""}, {"\"2024-13-01\"", "\"24-01-01\""}},
	{"{\"type\":\"string\",\"format\":\"time\"}", {"\"23:59:60Z\"", "\"01:02:03.5+02:00\""},
	 {"\"24:00:00Z\"", "\"01:02:03\""}},
	{"{\"type\":\"string\",\"format\":\"date-time\"}", {"\"2024-01-02T03:04:05Z\""},
	 {"\"2024-01-02 03:04:05Z\""}},
	{"{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""},
	 {"\"123e4567e89b12d3a456426614174000\""}},
	{"{\"type\":\"string\",\"format\":\"email\"}", {"\"a.b@example.com\""}, {"\"a@b\"", "\"@x.com\""}},
	{"{\"type\":\"string\",\"format\":\"ipv4\"}", {"\"192.168.0.255\""}, {"\"256.1.1.1\"", "\"1.2.3\""}},
	{"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"a\\\"c\"", "\"\xc3\xa9\xc3\xa9\""},
	 {"\"a\"", "\"abcd\""}},
	{"{\"type\":\"integer\",\"minimum\":-15,\"maximum\":120}",
	 {"-15", "0", "120", "99"}, {"-16", "121", "1000", "-0"}},
	{"{\"type\":\"integer\",\"exclusiveMinimum\":9,\"exclusiveMaximum\":100}", {"10", "99"},
	 {"9", "100", "5"}},
	{"{\"type\":\"integer\",\"minimum\":37}", {"37", "40", "100", "123456"}, {"36", "9", "-40"}},
	{"{\"type\":\"integer\",\"maximum\":-3}", {"-3", "-40"}, {"-2", "0", "3"}},
	{"{\"type\":\"number\",\"minimum\":0,\"maximum\":10}", {"0", "9.99", "10", "10.00"},
	 {"-1", "10.5", "11"}},
	{"{\"type\":[\"string\",\"null\"]}", {"\"x\"", "null"}, {"1"}},
	{"{\"type\":\"integer\",\"nullable\":true}", {"5", "null"}, {"\"5\""}},
	{"{\"title\":\"T\",\"description\":\"d\",\"type\":\"boolean\"}", {"false"}, {"0"}},
	{"true", {"{\"a\":[1,2.5,\"x\",null,true]}", "\"s\""}, {"{a}"}},
};

START_TEST(each_keyword_accepts_and_rejects)
{
	const struct kcase *k = &CASES[_i];
	struct grammar *g = compile_schema(k->schema);
	int i;

	for (i = 0; i < 4 && k->yes[i]; i++)
		ck_assert_msg(grammar_matches(g, k->yes[i], strlen(k->yes[i])), "%s should accept %s",
			      k->schema, k->yes[i]);
	for (i = 0; i < 4 && k->no[i]; i++)
		ck_assert_msg(!grammar_matches(g, k->no[i], strlen(k->no[i])), "%s should reject %s",
			      k->schema, k->no[i]);
	grammar_free(g);
}
END_TEST

START_TEST(unsupported_keywords_are_errors_naming_them)
{
	static const struct {
		const char *schema, *named;
	} bad[] = {
		{"{\"type\":\"object\",\"patternProperties\":{}}", "patternProperties"},
		{"{\"allOf\":[{\"type\":\"string\"}]}", "allOf"},
		{"{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems"},
		{"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}", "not"},
		{"{\"type\":\"string\",\"format\":\"uri\"}", "uri"},
		{"{\"type\":\"string\",\"pattern\":\"(?=x)\"}", "lookaround"},
		{"{\"type\":\"number\",\"minimum\":-1.5}", "number bounds"},
		{"{\"$ref\":\"http://x/y\"}", "$ref"},
		{"{\"$ref\":\"#/$defs/missing\"}", "missing"},
		{"{\"type\":\"object\",\"required\":[\"a\"]}", "required"},
		{"{\"type\":\"strin\"}", "strin"},
		{"false", "false"},
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *s = json_loads(bad[i].schema, JSON_DECODE_ANY, NULL);
		char err[JSON_SCHEMA_ERR_MAX] = "", *gbnf = NULL;

		ck_assert(s != NULL);
		ck_assert_msg(json_schema_to_gbnf(s, &gbnf, err) == -1, "accepted %s", bad[i].schema);
		ck_assert(gbnf == NULL);
		ck_assert_msg(strstr(err, bad[i].named) != NULL, "%s: '%s' does not name %s",
			      bad[i].schema, err, bad[i].named);
		json_decref(s);
	}
}
END_TEST

START_TEST(a_fifty_property_schema_compiles_in_well_under_50_ms)
{
	char buf[16384];
	size_t n = 0;
	struct timespec t0, t1;
	double ms;
	int i;

	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{\"type\":\"object\",\"properties\":{");
	for (i = 0; i < 50; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      "%s\"p%d\":{\"type\":\"%s\",\"%s\":%d}", i ? "," : "", i,
				      i % 2 ? "integer" : "string", i % 2 ? "maximum" : "maxLength",
				      10 + i);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "},\"required\":[\"p0\",\"p7\",\"p49\"]}");
	/* Thread CPU time: the machine may be shared. */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	grammar_free(compile_schema(buf));
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	printf("json_schema: 50-property schema to a compiled grammar in %.2f ms CPU\n", ms);
	/* The target is 50 ms; the bound here is loose for a loaded machine. */
	ck_assert_msg(ms < 500.0, "took %.1f ms", ms);
}
END_TEST

Suite *suite_json_schema(void)
{
	Suite *s = suite_create("json_schema");
	TCase *tc = tcase_create("json_schema");

	tcase_add_loop_test(tc, each_keyword_accepts_and_rejects, 0,
			    (int)(sizeof(CASES) / sizeof(CASES[0])));
	tcase_add_test(tc, unsupported_keywords_are_errors_naming_them);
	tcase_add_test(tc, a_fifty_property_schema_compiles_in_well_under_50_ms);
	suite_add_tcase(s, tc);
	return s;
}
