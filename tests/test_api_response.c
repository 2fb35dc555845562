/* test_api_response.c - the exact shapes of OpenAI and native responses:
 * every key a client reads, in non-streamed bodies and streamed chunks. */
#include <check.h>
#include <jansson.h>
#include <string.h>

#include "api_response.h"

static const struct engine_result result = {
	.finish = ENGINE_FINISH_LENGTH,
	.prompt_tokens = 7,
	.completion_tokens = 5,
	.ttft_ms = 12.25,
	.prefill_tps = 100,
	.decode_tps = 50,
};

static json_t *parse(const struct jsonw *w)
{
	json_error_t err;
	json_t *v = json_loads(w->data, JSON_REJECT_DUPLICATES, &err);

	ck_assert_msg(v != NULL, "%s: %s", err.text, w->data);
	return v;
}

static void check_usage(json_t *u)
{
	ck_assert_int_eq(json_integer_value(json_object_get(u, "prompt_tokens")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(u, "completion_tokens")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(u, "total_tokens")), 12);
	ck_assert(json_is_integer(json_object_get(
		json_object_get(u, "prompt_tokens_details"), "cached_tokens")));
}

START_TEST(chat_body_has_the_chat_completion_shape)
{
	struct api_meta m;
	struct jsonw w;
	json_t *v, *c, *msg;

	api_meta_init(&m, API_FMT_CHAT, "demo", false);
	ck_assert(strncmp(m.id, "chatcmpl-", 9) == 0 && strlen(m.id) == 9 + 24);
	jsonw_init(&w);
	api_response_body(&w, &m, "hi \"you\"", 8, &result);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "id")), m.id);
	ck_assert_str_eq(json_string_value(json_object_get(v, "object")), "chat.completion");
	ck_assert(json_is_integer(json_object_get(v, "created")));
	ck_assert_str_eq(json_string_value(json_object_get(v, "model")), "demo");
	ck_assert_uint_eq(json_array_size(json_object_get(v, "choices")), 1);
	c = json_array_get(json_object_get(v, "choices"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "index")), 0);
	msg = json_object_get(c, "message");
	ck_assert_str_eq(json_string_value(json_object_get(msg, "role")), "assistant");
	ck_assert_str_eq(json_string_value(json_object_get(msg, "content")), "hi \"you\"");
	ck_assert(json_is_null(json_object_get(c, "logprobs")));
	ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
	check_usage(json_object_get(v, "usage"));
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

START_TEST(chat_chunks_come_role_text_finish_usage)
{
	struct engine_result r = result;
	struct api_meta m;
	struct jsonw w;
	json_t *v, *c, *d;

	r.finish = ENGINE_FINISH_STOP;
	api_meta_init(&m, API_FMT_CHAT, "demo", true);
	jsonw_init(&w);
	ck_assert(api_response_chunk_start(&w, &m));
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "object")), "chat.completion.chunk");
	ck_assert(json_is_null(json_object_get(v, "usage")));
	c = json_array_get(json_object_get(v, "choices"), 0);
	d = json_object_get(c, "delta");
	ck_assert_str_eq(json_string_value(json_object_get(d, "role")), "assistant");
	ck_assert_str_eq(json_string_value(json_object_get(d, "content")), "");
	ck_assert(json_is_null(json_object_get(c, "finish_reason")));
	json_decref(v);

	api_response_chunk_text(&w, &m, "a\nb", 3);
	v = parse(&w);
	c = json_array_get(json_object_get(v, "choices"), 0);
	d = json_object_get(c, "delta");
	ck_assert_uint_eq(json_object_size(d), 1);
	ck_assert_str_eq(json_string_value(json_object_get(d, "content")), "a\nb");
	json_decref(v);

	api_response_chunk_finish(&w, &m, &r);
	v = parse(&w);
	c = json_array_get(json_object_get(v, "choices"), 0);
	ck_assert_uint_eq(json_object_size(json_object_get(c, "delta")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "stop");
	json_decref(v);

	ck_assert(api_response_chunk_usage(&w, &m, &r));
	v = parse(&w);
	ck_assert_uint_eq(json_array_size(json_object_get(v, "choices")), 0);
	check_usage(json_object_get(v, "usage"));
	json_decref(v);

	m.include_usage = false;
	ck_assert(!api_response_chunk_usage(&w, &m, &r));
	api_response_chunk_text(&w, &m, "x", 1);
	v = parse(&w);
	ck_assert_ptr_null(json_object_get(v, "usage"));
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

START_TEST(completion_has_the_text_completion_shape)
{
	struct api_meta m;
	struct jsonw w;
	json_t *v, *c;

	api_meta_init(&m, API_FMT_COMPLETION, "demo", false);
	ck_assert(strncmp(m.id, "cmpl-", 5) == 0);
	jsonw_init(&w);
	api_response_body(&w, &m, "once", 4, &result);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "object")), "text_completion");
	c = json_array_get(json_object_get(v, "choices"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(c, "text")), "once");
	ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
	check_usage(json_object_get(v, "usage"));
	json_decref(v);
	ck_assert(!api_response_chunk_start(&w, &m));
	api_response_chunk_finish(&w, &m, &result);
	v = parse(&w);
	c = json_array_get(json_object_get(v, "choices"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(c, "text")), "");
	ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

START_TEST(native_body_has_text_usage_and_timings)
{
	struct api_meta m;
	struct jsonw w;
	json_t *v, *t;

	api_meta_init(&m, API_FMT_NATIVE, "demo", false);
	jsonw_init(&w);
	api_response_body(&w, &m, "abc", 3, &result);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "text")), "abc");
	ck_assert_str_eq(json_string_value(json_object_get(v, "finish_reason")), "length");
	check_usage(json_object_get(v, "usage"));
	t = json_object_get(v, "timings");
	ck_assert(json_number_value(json_object_get(t, "ttft_ms")) == 12.25);
	ck_assert(json_number_value(json_object_get(t, "prefill_tokens_per_s")) == 100);
	ck_assert(json_number_value(json_object_get(t, "decode_tokens_per_s")) == 50);
	json_decref(v);
	api_response_chunk_text(&w, &m, "d", 1);
	v = parse(&w);
	ck_assert_uint_eq(json_object_size(v), 1);
	ck_assert_str_eq(json_string_value(json_object_get(v, "text")), "d");
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

/* llama-server's /completion: a piece, then the final object with its
 * stop_type and stopping word; logprobs ride as completion_probabilities. */
START_TEST(llamacpp_has_llama_servers_shape)
{
	struct engine_result r = result;
	struct api_meta m;
	struct jsonw w;
	json_t *v;

	api_meta_init(&m, API_FMT_LLAMACPP, "demo", true);
	jsonw_init(&w);
	m.logprobs = "[{\"id\":1}]";
	api_response_chunk_text(&w, &m, "ab", 2);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "content")), "ab");
	ck_assert(json_is_false(json_object_get(v, "stop")));
	ck_assert_uint_eq(json_array_size(json_object_get(v, "completion_probabilities")), 1);
	json_decref(v);
	m.logprobs = NULL;
	ck_assert(!api_response_chunk_usage(&w, &m, &r)); /* no usage event */
	api_response_chunk_finish(&w, &m, &r);
	v = parse(&w);
	ck_assert(json_is_true(json_object_get(v, "stop")));
	ck_assert_str_eq(json_string_value(json_object_get(v, "stop_type")), "limit");
	ck_assert_int_eq(json_integer_value(json_object_get(v, "tokens_predicted")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(v, "tokens_evaluated")), 7);
	ck_assert_ptr_null(json_object_get(v, "completion_probabilities"));
	ck_assert(json_is_object(json_object_get(v, "timings")));
	json_decref(v);
	r.finish = ENGINE_FINISH_STOP;
	m.stopping_word = "END";
	api_response_body(&w, &m, "x", 1, &r);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "stop_type")), "word");
	ck_assert_str_eq(json_string_value(json_object_get(v, "stopping_word")), "END");
	json_decref(v);
	m.stopping_word = NULL;
	api_response_body(&w, &m, "x", 1, &r);
	v = parse(&w);
	ck_assert_str_eq(json_string_value(json_object_get(v, "stop_type")), "eos");
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

/* m.logprobs becomes the choice's "logprobs" (null without). */
START_TEST(logprobs_json_lands_in_the_choice)
{
	struct api_meta m;
	struct jsonw w;
	json_t *v, *c;

	api_meta_init(&m, API_FMT_COMPLETION, "demo", false);
	jsonw_init(&w);
	m.logprobs = "{\"tokens\":[\"a\"]}";
	api_response_body(&w, &m, "a", 1, &result);
	v = parse(&w);
	c = json_array_get(json_object_get(v, "choices"), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(c, "logprobs"),
							  "tokens")), 1);
	json_decref(v);
	api_meta_init(&m, API_FMT_NATIVE, "demo", false);
	m.logprobs = "{\"content\":[]}";
	api_response_chunk_text(&w, &m, "a", 1);
	v = parse(&w);
	ck_assert(json_is_object(json_object_get(v, "logprobs")));
	json_decref(v);
	jsonw_free(&w);
}
END_TEST

Suite *suite_api_response(void)
{
	Suite *s = suite_create("api_response");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, chat_body_has_the_chat_completion_shape);
	tcase_add_test(tc, chat_chunks_come_role_text_finish_usage);
	tcase_add_test(tc, completion_has_the_text_completion_shape);
	tcase_add_test(tc, native_body_has_text_usage_and_timings);
	tcase_add_test(tc, llamacpp_has_llama_servers_shape);
	tcase_add_test(tc, logprobs_json_lands_in_the_choice);
	suite_add_tcase(s, tc);
	return s;
}
