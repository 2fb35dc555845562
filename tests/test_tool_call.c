/* test_tool_call.c - tool calls: each family's parser on outputs written
 * the way those models write them, malformed calls (plain content, never a
 * crash), streamed content and calls reassembling to the non-streamed
 * parse, family detection from the shared templates, and the grammar that
 * forces a call accepting exactly calls of the right shape. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar.h"
#include "testutil.h"
#include "tool_call.h"

struct pcase {
	enum tool_family f;
	const char *text;
	const char *content; /* NULL: content null (calls only) */
	int n_calls;         /* 0: all of the text is content */
	const char *name[2];
	const char *args[2]; /* compact JSON */
};

#define W "get_weather"
static const struct pcase CASES[] = {
	/* llama3: bare JSON, after <|python_tag|> when it is visible, ';' between */
	{TOOL_FAMILY_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}",
	 NULL, 1, {W}, {"{\"city\":\"Paris\",\"days\":3}"}},
	{TOOL_FAMILY_LLAMA3, "\n\n<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
	 NULL, 1, {W}, {"{\"city\":\"Oslo\"}"}},
	{TOOL_FAMILY_LLAMA3,
	 "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}", NULL, 2,
	 {"a", "b"}, {"{}", "{\"x\":[1,2]}"}},
	{TOOL_FAMILY_LLAMA3, "It is sunny in Paris.", "It is sunny in Paris.", 0, {0}, {0}},
	{TOOL_FAMILY_LLAMA3, "The set {1, 2} has two elements.", "The set {1, 2} has two elements.", 0, {0}, {0}},
	{TOOL_FAMILY_LLAMA3, "{\"name\": \"x\", \"parameters\": [1]}", "{\"name\": \"x\", \"parameters\": [1]}", 0,
	 {0}, {0}},
	{TOOL_FAMILY_LLAMA3, "<|python_tag|>brave_search.call(query=\"x\")", "<|python_tag|>brave_search.call(query=\"x\")",
	 0, {0}, {0}},
	/* hermes / Qwen */
	{TOOL_FAMILY_HERMES,
	 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>",
	 NULL, 1, {W}, {"{\"city\":\"Paris\",\"days\":3}"}},
	{TOOL_FAMILY_HERMES,
	 "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
	 "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>",
	 "Let me check both.\n", 2, {W, "get_time"}, {"{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"}},
	{TOOL_FAMILY_HERMES, "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}</tool_call>", NULL, 1, {"f"},
	 {"{\"a\":1}"}},
	{TOOL_FAMILY_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", NULL, 1, {"f"}, {"{}"}},
	{TOOL_FAMILY_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
	 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", 0, {0}, {0}},
	{TOOL_FAMILY_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
	 0, {0}, {0}},
	{TOOL_FAMILY_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> and then",
	 "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call> and then", 0, {0}, {0}},
	{TOOL_FAMILY_HERMES, "I use <tool_call tags.", "I use <tool_call tags.", 0, {0}, {0}},
	{TOOL_FAMILY_HERMES, "  \n", "  \n", 0, {0}, {0}},
	/* mistral: the marker is a control token, often missing from the text */
	{TOOL_FAMILY_MISTRAL,
	 "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"a1b2c3d4e\"}]",
	 NULL, 1, {W}, {"{\"city\":\"Paris\"}"}},
	{TOOL_FAMILY_MISTRAL, "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"n\": 1}}]", NULL,
	 2, {"a", "b"}, {"{}", "{\"n\":1}"}},
	{TOOL_FAMILY_MISTRAL, "Sure. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", "Sure. ", 1, {"a"}, {"{}"}},
	{TOOL_FAMILY_MISTRAL, "[TOOL_CALLS]garbage", "[TOOL_CALLS]garbage", 0, {0}, {0}},
	{TOOL_FAMILY_MISTRAL, "[1] Paris is the capital.", "[1] Paris is the capital.", 0, {0}, {0}},
	/* phi */
	{TOOL_FAMILY_PHI,
	 "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]<|/tool_call|>", NULL, 1,
	 {W}, {"{\"city\":\"Paris\"}"}},
	{TOOL_FAMILY_PHI, "functools[{\"name\": \"a\", \"arguments\": {\"q\": \"x\"}}]", NULL, 1, {"a"},
	 {"{\"q\":\"x\"}"}},
	{TOOL_FAMILY_PHI, "[{\"name\": \"a\", \"arguments\": {}}]", NULL, 1, {"a"}, {"{}"}},
	{TOOL_FAMILY_PHI, "<|tool_call|>[]<|/tool_call|>", "<|tool_call|>[]<|/tool_call|>", 0, {0}, {0}},
	/* gemma: Python call syntax in a tool_code block, or JSON */
	{TOOL_FAMILY_GEMMA, "```tool_code\nget_weather(city=\"Paris\", days=3)\n```", NULL, 1, {W},
	 {"{\"city\":\"Paris\",\"days\":3}"}},
	{TOOL_FAMILY_GEMMA,
	 "Sure.\n```tool_code\nprint(search(q='it\\'s', n=-2.5, on=True, x=None, tags=['a', \"b\"], "
	 "o={'k': (1, 2)}))\n```\n",
	 "Sure.\n", 1, {"search"},
	 {"{\"q\":\"it's\",\"n\":-2.5,\"on\":true,\"x\":null,\"tags\":[\"a\",\"b\"],\"o\":{\"k\":[1,2]}}"}},
	{TOOL_FAMILY_GEMMA, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", NULL, 1, {W},
	 {"{\"city\":\"Rome\"}"}},
	{TOOL_FAMILY_GEMMA, "```tool_code\nget_weather(\"Paris\")\n```", "```tool_code\nget_weather(\"Paris\")\n```", 0,
	 {0}, {0}},
	{TOOL_FAMILY_GEMMA, "```tool_code\nf(a=1)", "```tool_code\nf(a=1)", 0, {0}, {0}},
	{TOOL_FAMILY_GEMMA, "```tool_code\nf(a=x + 1)\n```", "```tool_code\nf(a=x + 1)\n```", 0, {0}, {0}},
};
#define N_CASES (int)(sizeof(CASES) / sizeof(CASES[0]))

static void check_parse(const struct pcase *c, const char *content, size_t content_len, bool has_content,
			const struct tool_parse *p)
{
	ck_assert_msg((int)p->n_calls == c->n_calls, "%s: %zu calls, want %d", c->text, p->n_calls, c->n_calls);
	if (c->content == NULL) {
		ck_assert_msg(!has_content, "%s: content should be null", c->text);
	} else {
		ck_assert_msg(has_content, "%s: content missing", c->text);
		ck_assert_msg(content_len == strlen(c->content) && memcmp(content, c->content, content_len) == 0,
			      "%s: content '%.*s'", c->text, (int)content_len, content);
	}
	for (int i = 0; i < c->n_calls; i++) {
		ck_assert_str_eq(p->calls[i].name, c->name[i]);
		ck_assert_str_eq(p->calls[i].arguments, c->args[i]);
		ck_assert_msg(strncmp(p->calls[i].id, "call_", 5) == 0 && strlen(p->calls[i].id) == 29, "%s",
			      p->calls[i].id);
	}
}

START_TEST(each_family_parses_its_recorded_outputs)
{
	const struct pcase *c = &CASES[_i];
	struct tool_parse p;

	ck_assert_int_eq(tool_call_parse(c->f, c->text, strlen(c->text), &p), 0);
	check_parse(c, c->text, p.content_len, p.has_content, &p);
	tool_parse_free(&p);
}
END_TEST

/* Fed in pieces of every size from 1 to 7 bytes (and whole), the stream's
 * content and calls are exactly the non-streamed parse's. */
START_TEST(streamed_content_and_calls_reassemble_to_the_parse)
{
	const struct pcase *c = &CASES[_i];
	size_t len = strlen(c->text);

	for (size_t step = 1; step <= 8; step++) {
		struct tool_stream s;
		struct tool_parse p;
		char got[1024];
		size_t n = 0, k = step == 8 ? len : step;
		const char *out;
		size_t out_len;

		tool_stream_init(&s, c->f);
		for (size_t i = 0; i < len; i += k) {
			size_t m = len - i < k ? len - i : k;

			ck_assert_int_eq(tool_stream_feed(&s, c->text + i, m, &out, &out_len), 0);
			ck_assert(n + out_len < sizeof(got));
			memcpy(got + n, out, out_len);
			n += out_len;
			/* never content past a trigger that is complete */
			if (c->content != NULL && c->n_calls > 0)
				ck_assert_msg(n <= strlen(c->content), "%s: step %zu sent '%.*s'", c->text, step,
					      (int)n, got);
		}
		ck_assert_int_eq(tool_stream_finish(&s, &out, &out_len, &p), 0);
		memcpy(got + n, out, out_len);
		n += out_len;
		check_parse(c, got, n, n > 0 || c->content != NULL, &p);
		tool_parse_free(&p);
		tool_stream_free(&s);
	}
}
END_TEST

/* Every prefix and every one-byte change of every case: no crash, and the
 * result is calls or all of the text as content. */
START_TEST(malformed_and_truncated_outputs_are_content_never_a_crash)
{
	static const char junk[] = {'{', '}', '[', ']', '"', '\\', '\0', (char)0xff, ',', ':', '`', 'x'};

	for (int ci = 0; ci < N_CASES; ci++) {
		const struct pcase *c = &CASES[ci];
		size_t len = strlen(c->text);
		char *buf = malloc(len + 1);

		for (size_t cut = 0; cut <= len; cut++) {
			for (size_t j = 0; j <= sizeof(junk); j++) {
				struct tool_parse p;

				memcpy(buf, c->text, len);
				if (j < sizeof(junk) && cut < len)
					buf[cut] = junk[j];
				ck_assert_int_eq(tool_call_parse(c->f, buf, j < sizeof(junk) ? len : cut, &p), 0);
				if (p.n_calls == 0)
					ck_assert(p.has_content && p.content_len == (j < sizeof(junk) ? len : cut));
				for (size_t i = 0; i < p.n_calls; i++) {
					json_t *a = json_loads(p.calls[i].arguments, JSON_ALLOW_NUL, NULL);

					ck_assert_msg(json_is_object(a), "case %d cut %zu junk %zu: %s", ci, cut, j,
						      p.calls[i].arguments);
					json_decref(a);
				}
				tool_parse_free(&p);
			}
		}
		free(buf);
	}
}
END_TEST

START_TEST(the_family_comes_from_the_template)
{
	static const struct {
		const char *file;
		enum tool_family f;
	} t[] = {
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", TOOL_FAMILY_LLAMA3},
		{"meta-llama-Llama-3.2-3B-Instruct.jinja", TOOL_FAMILY_LLAMA3},
		{"Qwen-Qwen2.5-7B-Instruct.jinja", TOOL_FAMILY_HERMES},
		{"Qwen-Qwen3-0.6B.jinja", TOOL_FAMILY_HERMES},
		{"google-gemma-2-2b-it.jinja", TOOL_FAMILY_GEMMA},
		{"microsoft-Phi-3.5-mini-instruct.jinja", TOOL_FAMILY_PHI},
	};
	static const char *chat[] = {"gemma", "phi3"};
	char path[256];

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t len;
		char *src;

		snprintf(path, sizeof(path), "../shared/chat-templates/%s", t[i].file);
		src = test_read_file(path, &len);
		ck_assert_msg(src != NULL, "%s", path);
		/* Gemma 2 and Phi-3.5 templates show no tools: their chat family decides */
		ck_assert_msg(tool_family_detect(src, len, i >= 4 ? chat[i - 4] : NULL) == t[i].f, "%s: %s",
			      t[i].file, tool_family_name(tool_family_detect(src, len, NULL)));
		free(src);
	}
	ck_assert_int_eq(tool_family_detect("{{ '[TOOL_CALLS]' }}", 19, NULL), TOOL_FAMILY_MISTRAL);
	ck_assert_int_eq(tool_family_detect("<|tool_call|>", 13, NULL), TOOL_FAMILY_PHI);
	ck_assert_int_eq(tool_family_detect("```tool_code", 12, NULL), TOOL_FAMILY_GEMMA);
	ck_assert_int_eq(tool_family_detect(NULL, 0, "chatml"), TOOL_FAMILY_HERMES);
	ck_assert_int_eq(tool_family_detect(NULL, 0, "falcon"), TOOL_FAMILY_LLAMA3);
	ck_assert_str_eq(tool_family_name(TOOL_FAMILY_MISTRAL), "mistral");
}
END_TEST

static const char TOOLS[] =
	"[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\","
	"\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":8},\"days\":{\"type\":\"integer\","
	"\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

/* A call of get_weather as family f writes it under the grammar. */
static const char *const GOOD[TOOL_FAMILY_COUNT] = {
	[TOOL_FAMILY_LLAMA3] = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 2}}",
	[TOOL_FAMILY_HERMES] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
			       "\"days\": 2}}\n</tool_call>",
	[TOOL_FAMILY_MISTRAL] = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}]",
	[TOOL_FAMILY_PHI] = "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}]",
	[TOOL_FAMILY_GEMMA] = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 2}}",
};

static struct grammar *tool_grammar(enum tool_family f, const char *name, bool parallel)
{
	char err[EMBER_ERR_MAX] = "", *gbnf = NULL;
	struct grammar *g = NULL;

	ck_assert_msg(tool_call_grammar(f, TOOLS, name, parallel, &gbnf, err) == 0, "%s", err);
	ck_assert_msg(grammar_parse_gbnf(&g, gbnf, strlen(gbnf), err) == 0, "%s\n%s", err, gbnf);
	free(gbnf);
	return g;
}

START_TEST(the_forcing_grammar_accepts_exactly_valid_calls)
{
	enum tool_family f = (enum tool_family)_i;
	struct grammar *any = tool_grammar(f, NULL, false), *named = tool_grammar(f, "now", false);
	struct grammar *par = tool_grammar(f, NULL, true);
	const char *good = GOOD[f];
	char bad[512], two[1024];
	struct tool_parse p;

	ck_assert_msg(grammar_matches(any, good, strlen(good)), "%s", good);
	{
		/* "auto" starts the same grammar lazily at this text: its first bytes */
		bool at_start;
		const char *trig = tool_call_trigger(f, &at_start);

		ck_assert_msg(strncmp(good, trig, strlen(trig)) == 0, "%s does not start %s", trig, good);
		ck_assert(at_start == (f != TOOL_FAMILY_HERMES));
	}
	ck_assert(!grammar_matches(named, good, strlen(good)));
	/* the call the grammar writes is the call the parser reads */
	ck_assert_int_eq(tool_call_parse(f, good, strlen(good), &p), 0);
	ck_assert_int_eq((int)p.n_calls, 1);
	ck_assert_str_eq(p.calls[0].arguments, "{\"city\":\"Oslo\",\"days\":2}");
	tool_parse_free(&p);
	/* out of the schema: days 9, a long city, a missing required key */
	snprintf(bad, sizeof(bad), "%s", good);
	memcpy(strstr(bad, "2}"), "9}", 2);
	ck_assert(!grammar_matches(any, bad, strlen(bad)));
	{
		char *q = strstr(bad, "Oslo");
		char longer[512];

		snprintf(longer, sizeof(longer), "%.*sOsloOsloOslo%s", (int)(q - bad), bad, q + 4);
		ck_assert(!grammar_matches(any, longer, strlen(longer)));
	}
	/* a function without parameters takes {} */
	snprintf(bad, sizeof(bad), "%s", f == TOOL_FAMILY_HERMES ? "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"
					 : f == TOOL_FAMILY_MISTRAL || f == TOOL_FAMILY_PHI ? "[{\"name\": \"now\", \"arguments\": {}}]"
					 : "{\"name\": \"now\", \"parameters\": {}}");
	ck_assert_msg(grammar_matches(named, bad, strlen(bad)), "%s", bad);
	ck_assert(grammar_matches(any, bad, strlen(bad)));
	/* parallel: two calls in the family's list syntax */
	if (f == TOOL_FAMILY_HERMES)
		snprintf(two, sizeof(two), "%s\n%s", good, bad);
	else if (f == TOOL_FAMILY_MISTRAL || f == TOOL_FAMILY_PHI)
		snprintf(two, sizeof(two), "[%.*s, %s", (int)strlen(good) - 2, good + 1, bad + 1);
	else
		snprintf(two, sizeof(two), "%s%s%s", good, f == TOOL_FAMILY_LLAMA3 ? "; " : "\n", bad);
	ck_assert_msg(grammar_matches(par, two, strlen(two)), "%s", two);
	ck_assert(!grammar_matches(any, two, strlen(two)));
	ck_assert_int_eq(tool_call_parse(f, two, strlen(two), &p), 0);
	ck_assert_int_eq((int)p.n_calls, 2);
	tool_parse_free(&p);
	grammar_free(any);
	grammar_free(named);
	grammar_free(par);
}
END_TEST

Suite *suite_tool_call(void)
{
	Suite *s = suite_create("tool_call");
	TCase *tc = tcase_create("tool_call");

	tcase_add_loop_test(tc, each_family_parses_its_recorded_outputs, 0, N_CASES);
	tcase_add_loop_test(tc, streamed_content_and_calls_reassemble_to_the_parse, 0, N_CASES);
	tcase_add_test(tc, malformed_and_truncated_outputs_are_content_never_a_crash);
	tcase_add_test(tc, the_family_comes_from_the_template);
	tcase_add_loop_test(tc, the_forcing_grammar_accepts_exactly_valid_calls, 0, TOOL_FAMILY_COUNT);
	suite_add_tcase(s, tc);
	return s;
}
