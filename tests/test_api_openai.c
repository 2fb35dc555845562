/* test_api_openai.c - OpenAI request bodies: what is accepted, and for each
 * bad body the status, error type and param a client sees. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_openai.h"

static const struct api_limits lim = {.max_tokens = 4096};

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

static const struct {
	int chat;             /* 1 chat, 0 completions */
	const char *body;
	int status;
	const char *type;
	const char *param;    /* NULL = JSON null */
} bad_rows[] = {
	{1, "", 400, "invalid_request_error", NULL},
	{1, "{", 400, "invalid_request_error", NULL},
	{1, "[]", 400, "invalid_request_error", NULL},
	{1, "{} x", 400, "invalid_request_error", NULL},
	{1, "{\"a\":1,\"a\":2," MSG "}", 400, "invalid_request_error", NULL},
	{1, "{" MSG ",\"x\":\"\xff\"}", 400, "invalid_request_error", NULL},
	{1, "{" MSG ",\"stop\":\"a\\u0000\"}", 400, "invalid_request_error", "stop"},
	{1, "{\"messages\":[{\"role\":\"user\\u0000x\",\"content\":\"a\"}]}", 400, "invalid_request_error",
	 "messages[0].role"},
	{1, "{" MSG ",\"max_tokens\":99999999999999999999999}", 400,
	 "invalid_request_error", NULL},
	{1, "{}", 400, "invalid_request_error", "messages"},
	{1, "{\"messages\":{}}", 400, "invalid_request_error", "messages"},
	{1, "{\"messages\":[]}", 400, "invalid_request_error", "messages"},
	{1, "{\"messages\":[1]}", 400, "invalid_request_error", "messages[0]"},
	{1, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
	    "{\"role\":\"robot\",\"content\":\"b\"}]}",
	 400, "invalid_request_error", "messages[1].role"},
	{1, "{\"messages\":[{\"role\":\"user\",\"content\":\"b\",\"tool_calls\":[]}]}", 400,
	 "invalid_request_error", "messages[0].tool_calls"},
	{1, "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":{}}]}", 400,
	 "invalid_request_error", "messages[0].tool_calls"},
	{1, "{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}],\"tools\":{}}", 400,
	 "invalid_request_error", "tools"},
	{1, "{\"messages\":[{\"content\":\"b\"}]}", 400, "invalid_request_error",
	 "messages[0].role"},
	{1, "{\"messages\":[{\"role\":\"user\"}]}", 400, "invalid_request_error",
	 "messages[0].content"},
	{1, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400,
	 "invalid_request_error", "messages[0].content"},
	{1, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
	    "\"image_url\":{\"url\":\"x\"}}]}]}",
	 400, "invalid_request_error", "messages[0].content"},
	{1, "{" MSG ",\"model\":3}", 400, "invalid_request_error", "model"},
	{1, "{" MSG ",\"max_tokens\":-1}", 400, "invalid_request_error",
	 "max_tokens"},
	{1, "{" MSG ",\"max_tokens\":0}", 400, "invalid_request_error",
	 "max_tokens"},
	{1, "{" MSG ",\"max_tokens\":\"10\"}", 400, "invalid_request_error",
	 "max_tokens"},
	{1, "{" MSG ",\"max_tokens\":10.5}", 400, "invalid_request_error",
	 "max_tokens"},
	{1, "{" MSG ",\"max_completion_tokens\":-5}", 400,
	 "invalid_request_error", "max_completion_tokens"},
	{1, "{" MSG ",\"temperature\":-0.1}", 400, "invalid_request_error",
	 "temperature"},
	{1, "{" MSG ",\"temperature\":2.01}", 400, "invalid_request_error",
	 "temperature"},
	{1, "{" MSG ",\"temperature\":1e308}", 400, "invalid_request_error",
	 "temperature"},
	{1, "{" MSG ",\"temperature\":\"hot\"}", 400, "invalid_request_error",
	 "temperature"},
	{1, "{" MSG ",\"top_p\":0}", 400, "invalid_request_error", "top_p"},
	{1, "{" MSG ",\"top_p\":1.5}", 400, "invalid_request_error", "top_p"},
	{1, "{" MSG ",\"top_k\":-1}", 400, "invalid_request_error", "top_k"},
	{1, "{" MSG ",\"min_p\":2}", 400, "invalid_request_error", "min_p"},
	{1, "{" MSG ",\"presence_penalty\":3}", 400, "invalid_request_error",
	 "presence_penalty"},
	{1, "{" MSG ",\"frequency_penalty\":-2.5}", 400,
	 "invalid_request_error", "frequency_penalty"},
	{1, "{" MSG ",\"seed\":1.5}", 400, "invalid_request_error", "seed"},
	{1, "{" MSG ",\"n\":0}", 400, "invalid_request_error", "n"},
	{1, "{" MSG ",\"n\":129}", 400, "invalid_request_error", "n"},
	{1, "{" MSG ",\"stop\":5}", 400, "invalid_request_error", "stop"},
	{1, "{" MSG ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400,
	 "invalid_request_error", "stop"},
	{1, "{" MSG ",\"stop\":[\"a\",1]}", 400, "invalid_request_error", "stop"},
	{1, "{" MSG ",\"stop\":\"\"}", 400, "invalid_request_error", "stop"},
	{1, "{" MSG ",\"stream\":\"yes\"}", 400, "invalid_request_error",
	 "stream"},
	{1, "{" MSG ",\"stream_options\":{\"include_usage\":true}}", 400,
	 "invalid_request_error", "stream_options"},
	{1, "{" MSG ",\"stream\":true,\"stream_options\":{\"include_usage\":1}}",
	 400, "invalid_request_error", "stream_options.include_usage"},
	{0, "{}", 400, "invalid_request_error", "prompt"},
	{0, "{\"prompt\":[]}", 400, "invalid_request_error", "prompt"},
	{0, "{\"prompt\":[1,\"a\"]}", 400, "invalid_request_error", "prompt"},
	{0, "{\"prompt\":[1,-2]}", 400, "invalid_request_error", "prompt"},
	{0, "{\"prompt\":[\"a\",[]]}", 400, "invalid_request_error", "prompt[1]"},
	{0, "{\"prompt\":[[1],[2.5]]}", 400, "invalid_request_error", "prompt[1]"},
	{0, "{\"prompt\":7}", 400, "invalid_request_error", "prompt"},
	{0, "{\"prompt\":\"x\",\"temperature\":3}", 400, "invalid_request_error",
	 "temperature"},
};

START_TEST(bad_bodies_get_status_type_and_param)
{
	struct gen_request r;
	struct api_error e;
	const char *body = bad_rows[_i].body;
	int rc;

	rc = bad_rows[_i].chat
		? api_openai_parse_chat(body, strlen(body), &lim, &r, &e)
		: api_openai_parse_completion(body, strlen(body), &lim, &r, &e);
	ck_assert_msg(rc == EMBER_EINVAL, "row %d accepted: %s", _i, body);
	ck_assert_int_eq(e.status, bad_rows[_i].status);
	ck_assert_str_eq(api_error_type_name(e.type), bad_rows[_i].type);
	ck_assert_msg(strcmp(e.param, bad_rows[_i].param ? bad_rows[_i].param
							  : "") == 0,
		      "row %d: param '%s' (%s)", _i, e.param, e.message);
	ck_assert_msg(e.message[0] != '\0', "row %d has a message", _i);
	/* a failed parse leaves nothing to free */
	ck_assert_ptr_null(r.messages);
	ck_assert_ptr_null(r.prompt);
}
END_TEST

START_TEST(deep_nesting_is_rejected_before_parsing)
{
	char body[4096];
	struct gen_request r;
	struct api_error e;
	int i, n = 0;

	n += sprintf(body + n, "{" MSG ",\"x\":");
	for (i = 0; i < 1000; i++)
		body[n++] = '[';
	for (i = 0; i < 1000; i++)
		body[n++] = ']';
	body[n++] = '}';
	body[n] = '\0';
	ck_assert_int_eq(api_openai_parse_chat(body, (size_t)n, &lim, &r, &e), EMBER_EINVAL);
	ck_assert_int_eq(e.status, 400);
	ck_assert_ptr_nonnull(strstr(e.message, "deeper"));
	/* brackets inside strings do not count */
	ck_assert_int_eq(api_openai_check_depth("{\"a\":\"[[[[[[\"}", 13, 2), 0);
	ck_assert_int_eq(api_openai_check_depth("[[[", 3, 2), EMBER_EINVAL);
	ck_assert_int_eq(api_openai_check_depth("{\"a\\\"[[[\":1}", 13, 1), 0);
}
END_TEST

START_TEST(chat_body_fills_every_field)
{
	static const char body[] =
		"{\"model\":\"m1\",\"messages\":["
		"{\"role\":\"developer\",\"content\":\"be brief\"},"
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
		"{\"type\":\"text\",\"text\":\"b\"}]},"
		"{\"role\":\"assistant\",\"content\":\"\"}],"
		"\"max_tokens\":10,\"max_completion_tokens\":20,"
		"\"temperature\":0,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,"
		"\"seed\":-1,\"stop\":[\"\\n\\n\",\"END\"],"
		"\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,"
		"\"stream\":true,\"stream_options\":{\"include_usage\":true},"
		"\"n\":1,\"user\":\"ignored\",\"logit_bias\":null}";
	struct gen_request r;
	struct api_error e;

	ck_assert_msg(api_openai_parse_chat(body, strlen(body), &lim, &r, &e) == 0,
		      "%s", e.message);
	ck_assert_int_eq(r.kind, GEN_CHAT);
	ck_assert_str_eq(r.model, "m1");
	ck_assert_uint_eq(r.n_messages, 3);
	ck_assert_int_eq(r.messages[0].role, GEN_ROLE_SYSTEM);
	ck_assert_str_eq(r.messages[1].content, "a\nb");
	ck_assert_str_eq(r.messages[2].content, "");
	ck_assert_int_eq(r.max_tokens, 20);
	ck_assert(r.temperature == 0.0f);
	ck_assert(r.top_p == 0.9f);
	ck_assert_int_eq(r.top_k, 40);
	ck_assert(r.has_seed);
	ck_assert(r.seed == UINT64_MAX);
	ck_assert_uint_eq(r.n_stop, 2);
	ck_assert_str_eq(r.stop[0], "\n\n");
	ck_assert(r.frequency_penalty == -0.5f);
	ck_assert(r.stream && r.include_usage);
	gen_request_free(&r);
	gen_request_free(NULL);
}
END_TEST

START_TEST(defaults_and_nulls_leave_defaults)
{
	static const char body[] =
		"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
		"\"temperature\":null,\"stop\":null,\"model\":null}";
	struct gen_request r;
	struct api_error e;

	ck_assert_int_eq(api_openai_parse_chat(body, strlen(body), &lim, &r, &e), 0);
	ck_assert_int_eq(r.max_tokens, 4096);
	ck_assert(r.temperature == 1.0f && r.top_p == 1.0f);
	ck_assert_int_eq(r.top_k, 0);
	ck_assert(!r.has_seed && !r.stream);
	ck_assert_uint_eq(r.n_stop, 0);
	ck_assert_ptr_null(r.model);
	gen_request_free(&r);
}
END_TEST

START_TEST(max_tokens_above_the_cap_is_clamped)
{
	static const char *const bodies[] = {
		"{" MSG ",\"max_tokens\":4097}",
		"{" MSG ",\"max_completion_tokens\":1000000000000}",
	};
	struct gen_request r;
	struct api_error e;
	size_t i;

	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(api_openai_parse_chat(bodies[i], strlen(bodies[i]),
						       &lim, &r, &e), 0);
		ck_assert_int_eq(r.max_tokens, 4096);
		gen_request_free(&r);
	}
}
END_TEST

START_TEST(completion_prompt_is_string_or_one_string_array)
{
	struct gen_request r;
	struct api_error e;
	const char *b1 = "{\"prompt\":\"once upon\",\"stop\":\"\\n\"}";
	const char *b2 = "{\"prompt\":[\"a time\"]}";

	ck_assert_int_eq(api_openai_parse_completion(b1, strlen(b1), &lim, &r, &e), 0);
	ck_assert_int_eq(r.kind, GEN_COMPLETION);
	ck_assert_str_eq(r.prompt, "once upon");
	ck_assert_str_eq(r.stop[0], "\n");
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_completion(b2, strlen(b2), &lim, &r, &e), 0);
	ck_assert_str_eq(r.prompt, "a time");
	gen_request_free(&r);
}
END_TEST

/* OpenAI's array prompts: token ids (one prompt), strings and token-id
 * arrays (one prompt each); n choices per prompt. */
START_TEST(completion_prompt_arrays_and_n)
{
	struct gen_request r;
	struct api_error e;
	const char *b1 = "{\"prompt\":[1,2,3],\"n\":3}";
	const char *b2 = "{\"prompt\":[\"a\",[5,6],\"b c\"]}";

	ck_assert_int_eq(api_openai_parse_completion(b1, strlen(b1), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_uint_eq(gen_request_n_prompts(&r), 1);
	ck_assert_ptr_null(r.prompts[0].text);
	ck_assert_uint_eq(r.prompts[0].n_ids, 3);
	ck_assert_int_eq(r.prompts[0].ids[2], 3);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_completion(b2, strlen(b2), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(gen_request_n_prompts(&r), 3);
	ck_assert_str_eq(r.prompts[0].text, "a");
	ck_assert_uint_eq(r.prompts[1].n_ids, 2);
	ck_assert_int_eq(r.prompts[1].ids[0], 5);
	ck_assert_str_eq(r.prompts[2].text, "b c");
	ck_assert_uint_eq(r.prompts[2].len, 3);
	gen_request_free(&r);
}
END_TEST

/* Combinations with several choices or array prompts that have no
 * faithful answer are refused by name (never a wrong answer). */
START_TEST(choices_refuse_tools_echo_suffix)
{
	struct gen_request r;
	struct api_error e;
	const char *tools = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2,"
			    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
			    "\"parameters\":{\"type\":\"object\"}}}]}";
	const char *echo = "{\"prompt\":[\"a\",\"b\"],\"echo\":true}";
	const char *echo_ids = "{\"prompt\":[1,2],\"echo\":true}";
	const char *suffix = "{\"prompt\":[\"a\",\"b\"],\"suffix\":\"x\"}";
	const char *ok = "{\"prompt\":\"a\",\"echo\":true,\"n\":2,\"logprobs\":0}";

	ck_assert_int_ne(api_openai_parse_chat(tools, strlen(tools), &lim, &r, &e), 0);
	ck_assert_int_eq(e.status, 400);
	ck_assert_str_eq(e.param, "n");
	ck_assert_int_ne(api_openai_parse_completion(echo, strlen(echo), &lim, &r, &e), 0);
	ck_assert_str_eq(e.param, "echo");
	ck_assert_int_ne(api_openai_parse_completion(echo_ids, strlen(echo_ids), &lim, &r, &e), 0);
	ck_assert_str_eq(e.param, "echo");
	ck_assert_int_ne(api_openai_parse_completion(suffix, strlen(suffix), &lim, &r, &e), 0);
	ck_assert_str_eq(e.param, "suffix");
	/* echo with n choices of one string prompt is answered per choice;
	 * (echo with logprobs stays refused on its own) */
	ck_assert_int_ne(api_openai_parse_completion(ok, strlen(ok), &lim, &r, &e), 0);
	ck_assert_str_eq(e.param, "echo");
	ok = "{\"prompt\":\"a\",\"echo\":true,\"n\":2}";
	ck_assert_int_eq(api_openai_parse_completion(ok, strlen(ok), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.n, 2);
	gen_request_free(&r);
	ok = "{\"prompt\":[\"a\",\"b\"],\"n\":2,\"logprobs\":1}";
	ck_assert_int_eq(api_openai_parse_completion(ok, strlen(ok), &lim, &r, &e), 0);
	ck_assert(r.logprobs);
	gen_request_free(&r);
}
END_TEST

/* "\u0000" is valid JSON and an ordinary character of a prompt and of a
 * message's content (it was refused as invalid JSON); where a string cannot
 * carry it (stop), it is refused by name, never cut short. */
START_TEST(nul_escape_is_a_character_of_the_prompt)
{
	struct gen_request r;
	struct api_error e;
	const char *b1 = "{\"prompt\":\"a\\u0000b\"}";
	const char *b2 = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]}";
	const char *b3 = "{\"messages\":[{\"role\":\"user\",\"content\":"
			 "[{\"type\":\"text\",\"text\":\"a\\u0000b\"},{\"type\":\"text\",\"text\":\"\\u0000\"}]}]}";
	const char *b4 = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stop\":[\"x\\u0000\"]}";

	ck_assert_int_eq(api_openai_parse_completion(b1, strlen(b1), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.prompt_len, 3);
	ck_assert_int_eq(memcmp(r.prompt, "a\0b", 4), 0);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_chat(b2, strlen(b2), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.messages[0].content_len, 3);
	ck_assert_int_eq(memcmp(r.messages[0].content, "a\0b", 4), 0);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_chat(b3, strlen(b3), &lim, &r, &e), 0);
	ck_assert_uint_eq(r.messages[0].content_len, 5);
	ck_assert_int_eq(memcmp(r.messages[0].content, "a\0b\n\0", 6), 0);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_chat(b4, strlen(b4), &lim, &r, &e), EMBER_EINVAL);
	ck_assert_int_eq(e.status, 400);
	ck_assert_str_eq(e.param, "stop");
	ck_assert_ptr_nonnull(strstr(e.message, "NUL"));
}
END_TEST

START_TEST(content_type_must_be_json)
{
	struct api_error e;

	ck_assert_int_eq(api_openai_check_content_type(NULL, &e), 0);
	ck_assert_int_eq(api_openai_check_content_type("application/json", &e), 0);
	ck_assert_int_eq(api_openai_check_content_type(
				 "Application/JSON; charset=utf-8", &e), 0);
	ck_assert_int_eq(api_openai_check_content_type("text/plain", &e), EMBER_EINVAL);
	ck_assert_int_eq(e.status, 415);
	ck_assert_int_eq(api_openai_check_content_type("application/jsonx", &e), EMBER_EINVAL);
	/* curl -d without -H: the body is JSON all the same */
	ck_assert_int_eq(api_openai_check_content_type(
				 "application/x-www-form-urlencoded", &e), 0);
	ck_assert_int_eq(api_openai_check_content_type(
				 "multipart/form-data; boundary=x", &e), EMBER_EINVAL);
}
END_TEST

START_TEST(error_json_has_the_openai_shape)
{
	struct api_error e;
	char *s;

	api_error_set(&e, 400, API_ERR_INVALID_REQUEST, "top_p", NULL, "bad %d", 1);
	s = api_error_json(&e);
	ck_assert_str_eq(s, "{\"error\":{\"message\":\"bad 1\",\"type\":"
			    "\"invalid_request_error\",\"param\":\"top_p\","
			    "\"code\":null}}");
	free(s);
	api_error_set(&e, 429, API_ERR_RATE_LIMIT, NULL, "queue_full", "\xff");
	s = api_error_json(&e);
	ck_assert_ptr_nonnull(strstr(s, "\"rate_limit_error\""));
	ck_assert_ptr_nonnull(strstr(s, "\"code\":\"queue_full\""));
	free(s);
}
END_TEST

/* api_openai_field(): the one lookup every API reader uses; JSON null is
 * absent, and a missing or non-object container gives NULL, not a crash. */
START_TEST(field_lookup_treats_null_as_absent)
{
	json_t *o = json_pack("{s:n, s:i, s:b}", "a", "b", 7, "c", 0);

	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_null(api_openai_field(o, "a"));
	ck_assert_ptr_null(api_openai_field(o, "missing"));
	ck_assert_int_eq(json_integer_value(api_openai_field(o, "b")), 7);
	ck_assert(json_is_false(api_openai_field(o, "c")));
	ck_assert_ptr_null(api_openai_field(NULL, "b"));
	{
		json_t *arr = json_pack("[i]", 1);

		ck_assert_ptr_null(api_openai_field(arr, "b"));
		json_decref(arr);
	}
	json_decref(o);
}
END_TEST

Suite *suite_api_openai(void)
{
	Suite *s = suite_create("api_openai");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, bad_bodies_get_status_type_and_param, 0,
			    sizeof(bad_rows) / sizeof(bad_rows[0]));
	tcase_add_test(tc, deep_nesting_is_rejected_before_parsing);
	tcase_add_test(tc, chat_body_fills_every_field);
	tcase_add_test(tc, defaults_and_nulls_leave_defaults);
	tcase_add_test(tc, max_tokens_above_the_cap_is_clamped);
	tcase_add_test(tc, completion_prompt_is_string_or_one_string_array);
	tcase_add_test(tc, nul_escape_is_a_character_of_the_prompt);
	tcase_add_test(tc, completion_prompt_arrays_and_n);
	tcase_add_test(tc, choices_refuse_tools_echo_suffix);
	tcase_add_test(tc, content_type_must_be_json);
	tcase_add_test(tc, error_json_has_the_openai_shape);
	tcase_add_test(tc, field_lookup_treats_null_as_absent);
	suite_add_tcase(s, tc);
	return s;
}
