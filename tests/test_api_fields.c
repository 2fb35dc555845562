/* test_api_fields.c - the OpenAI field audit: every documented field is
 * honoured (read into the request) or refused with a 400 naming it;
 * unknown fields stay ignored. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "api_fields.h"
#include "api_openai.h"

static const struct api_limits lim = {.max_tokens = 4096};

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define PR "\"prompt\":\"hi\""

static const struct {
	int chat;
	const char *body;
	const char *param; /* the field the 400 names */
} refused[] = {
	{1, "{" MSG ",\"logprobs\":1}", "logprobs"},
	{1, "{" MSG ",\"top_logprobs\":3}", "top_logprobs"},
	{1, "{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
	{1, "{" MSG ",\"logprobs\":true,\"top_logprobs\":-1}", "top_logprobs"},
	{1, "{" MSG ",\"logit_bias\":{\"5\":101}}", "logit_bias"},
	{1, "{" MSG ",\"logit_bias\":{\"x\":1}}", "logit_bias"},
	{1, "{" MSG ",\"logit_bias\":{\"-1\":1}}", "logit_bias"},
	{1, "{" MSG ",\"logit_bias\":{\"5\":\"a\"}}", "logit_bias"},
	{1, "{" MSG ",\"logit_bias\":[1]}", "logit_bias"},
	{1, "{" MSG ",\"store\":true}", "store"},
	{1, "{" MSG ",\"metadata\":\"x\"}", "metadata"},
	{1, "{" MSG ",\"service_tier\":\"flex\"}", "service_tier"},
	{1, "{" MSG ",\"modalities\":[\"text\",\"audio\"]}", "modalities"},
	{1, "{" MSG ",\"audio\":{\"voice\":\"alloy\",\"format\":\"wav\"}}", "audio"},
	{1, "{" MSG ",\"prediction\":\"x\"}", "prediction"},
	{1, "{" MSG ",\"reasoning_effort\":\"low\"}", "reasoning_effort"},
	{1, "{" MSG ",\"verbosity\":\"low\"}", "verbosity"},
	{1, "{" MSG ",\"web_search_options\":{}}", "web_search_options"},
	{1, "{" MSG ",\"parallel_tool_calls\":\"no\"}", "parallel_tool_calls"},
	{1, "{" MSG ",\"user\":5}", "user"},
	{1, "{" MSG ",\"safety_identifier\":5}", "safety_identifier"},
	{1, "{" MSG ",\"stream\":true,\"stream_options\":{\"include_obfuscation\":true}}",
	 "stream_options.include_obfuscation"},
	{0, "{" PR ",\"logprobs\":true}", "logprobs"},
	{0, "{" PR ",\"logprobs\":21}", "logprobs"},
	{0, "{" PR ",\"echo\":1}", "echo"},
	{0, "{" PR ",\"echo\":true,\"logprobs\":2}", "echo"},
	{0, "{" PR ",\"suffix\":3}", "suffix"},
	{0, "{" PR ",\"suffix\":\"x\",\"echo\":true}", "suffix"},
	{0, "{" PR ",\"best_of\":2}", "best_of"},
	{0, "{" PR ",\"logit_bias\":{\"1\":-100.5}}", "logit_bias"},
};

START_TEST(each_unsupported_field_is_refused_by_name)
{
	struct gen_request r;
	struct api_error e;
	const char *body = refused[_i].body;
	int rc;

	rc = refused[_i].chat ? api_openai_parse_chat(body, strlen(body), &lim, &r, &e)
			      : api_openai_parse_completion(body, strlen(body), &lim, &r, &e);
	ck_assert_msg(rc == EMBER_EINVAL, "row %d accepted: %s", _i, body);
	ck_assert_int_eq(e.status, 400);
	ck_assert_msg(strcmp(e.param, refused[_i].param) == 0, "row %d: param '%s' (%s)",
		      _i, e.param, e.message);
	ck_assert_ptr_nonnull(strstr(e.message, refused[_i].param));
}
END_TEST

static const char *const accepted[] = {
	"{" MSG ",\"logit_bias\":{},\"user\":\"u\",\"store\":false,\"metadata\":{\"a\":\"b\"},"
	"\"service_tier\":\"auto\",\"modalities\":[\"text\"],\"prediction\":{\"type\":"
	"\"content\",\"content\":\"x\"},\"parallel_tool_calls\":true,\"safety_identifier\":"
	"\"s\",\"prompt_cache_key\":\"k\",\"some_unknown_field\":{\"x\":1},\"audio\":null}",
	"{" MSG ",\"stream\":true,\"stream_options\":{\"include_usage\":true,"
	"\"include_obfuscation\":false}}",
};

START_TEST(honoured_and_meaningless_fields_are_accepted)
{
	struct gen_request r;
	struct api_error e;
	const char *body = accepted[_i];

	ck_assert_msg(api_openai_parse_chat(body, strlen(body), &lim, &r, &e) == 0,
		      "row %d: %s", _i, e.message);
	gen_request_free(&r);
}
END_TEST

START_TEST(logprobs_echo_and_suffix_reach_the_request)
{
	struct gen_request r;
	struct api_error e;
	const char *c1 = "{" MSG ",\"logprobs\":true,\"top_logprobs\":5}";
	const char *c2 = "{" MSG ",\"logprobs\":false}";
	const char *p1 = "{" PR ",\"logprobs\":0,\"suffix\":\"tail\"}";
	const char *p2 = "{" PR ",\"echo\":true,\"logprobs\":null,"
			 "\"logit_bias\":{\"7\":-100,\"42\":2.5}}";

	ck_assert_int_eq(api_openai_parse_chat(c1, strlen(c1), &lim, &r, &e), 0);
	ck_assert(r.logprobs);
	ck_assert_int_eq(r.top_logprobs, 5);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_chat(c2, strlen(c2), &lim, &r, &e), 0);
	ck_assert(!r.logprobs);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_completion(p1, strlen(p1), &lim, &r, &e), 0);
	ck_assert(r.logprobs);
	ck_assert_int_eq(r.top_logprobs, 0);
	ck_assert_str_eq(r.suffix, "tail");
	ck_assert(!r.echo);
	gen_request_free(&r);
	ck_assert_int_eq(api_openai_parse_completion(p2, strlen(p2), &lim, &r, &e), 0);
	ck_assert(r.echo);
	ck_assert(!r.logprobs);
	ck_assert_uint_eq(r.n_logit_bias, 2);
	ck_assert_int_eq(r.logit_bias[0].id, 7);
	ck_assert(r.logit_bias[0].bias == -100.0f);
	ck_assert_int_eq(r.logit_bias[1].id, 42);
	ck_assert(r.logit_bias[1].bias == 2.5f);
	ck_assert_ptr_null(r.suffix);
	gen_request_free(&r);
}
END_TEST

Suite *suite_api_fields(void)
{
	Suite *s = suite_create("api_fields");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, each_unsupported_field_is_refused_by_name, 0,
			    sizeof(refused) / sizeof(refused[0]));
	tcase_add_loop_test(tc, honoured_and_meaningless_fields_are_accepted, 0,
			    sizeof(accepted) / sizeof(accepted[0]));
	tcase_add_test(tc, logprobs_echo_and_suffix_reach_the_request);
	suite_add_tcase(s, tc);
	return s;
}
