/* test_api_ollama.c - Ollama's request bodies (api_ollama.c) and the
 * embedding bodies (api_embed.c): what becomes the gen_request, and the
 * 400s that name the field or option for everything else. */
#include <check.h>
#include <string.h>

#include "api_embed.h"
#include "api_ollama.h"
#include "ember.h"
#include "grammar.h"

static const struct api_ollama_limits lim = {.max_tokens = 64, .n_ctx = 2048};

static int parse(const char *body, bool chat, struct gen_request *r, struct api_ollama_extra *x,
		 struct api_error *e)
{
	x->chat = chat;
	return api_ollama_parse(body, strlen(body), &lim, r, x, e);
}

/* The body must be refused with a message that contains `want`. */
static void refused(const char *body, bool chat, const char *want)
{
	struct api_ollama_extra x;
	struct gen_request r;
	struct api_error e;

	ck_assert_msg(parse(body, chat, &r, &x, &e) == EMBER_EINVAL, "accepted: %s", body);
	ck_assert_int_eq(e.status, 400);
	ck_assert_msg(strstr(e.message, want) != NULL, "%s: message '%s' lacks '%s'", body,
		      e.message, want);
}

START_TEST(model_names_as_ollama_clients_send_them)
{
	ck_assert(api_ollama_model_ok("tiny-q8_0", "tiny-q8_0"));
	ck_assert(api_ollama_model_ok("tiny-q8_0:latest", "tiny-q8_0"));
	ck_assert(!api_ollama_model_ok("tiny-q8_0:7b", "tiny-q8_0"));
	ck_assert(!api_ollama_model_ok("tiny", "tiny-q8_0"));
	ck_assert(!api_ollama_model_ok("tiny-q8_0x", "tiny-q8_0"));
	ck_assert(!api_ollama_model_ok(NULL, "tiny-q8_0"));
}
END_TEST

START_TEST(generate_becomes_a_templated_user_turn_or_a_raw_prompt)
{
	struct api_ollama_extra x;
	struct gen_request r;
	struct api_error e;

	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"Hi\",\"system\":\"Be brief\"}", false,
			       &r, &x, &e), 0);
	ck_assert(r.stream); /* Ollama's default */
	ck_assert(!x.load_only);
	ck_assert_int_eq(r.kind, GEN_CHAT);
	ck_assert_uint_eq(r.n_messages, 2);
	ck_assert_int_eq(r.messages[0].role, GEN_ROLE_SYSTEM);
	ck_assert_str_eq(r.messages[0].content, "Be brief");
	ck_assert_int_eq(r.messages[1].role, GEN_ROLE_USER);
	ck_assert_str_eq(r.messages[1].content, "Hi");
	ck_assert_str_eq(r.model, "m");
	ck_assert_int_eq(r.max_tokens, 64);
	gen_request_free(&r);

	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"<s>x\",\"raw\":true,\"stream\":false}",
			       false, &r, &x, &e), 0);
	ck_assert_int_eq(r.kind, GEN_COMPLETION);
	ck_assert_str_eq(r.prompt, "<s>x");
	ck_assert(!r.stream);
	gen_request_free(&r);

	ck_assert_int_eq(parse("{\"model\":\"m\"}", false, &r, &x, &e), 0);
	ck_assert(x.load_only);
	gen_request_free(&r);
	ck_assert_int_eq(parse("{\"model\":\"m\",\"messages\":[]}", true, &r, &x, &e), 0);
	ck_assert(x.load_only);
	gen_request_free(&r);
}
END_TEST

START_TEST(chat_messages_and_keep_alive)
{
	struct api_ollama_extra x;
	struct gen_request r;
	struct api_error e;

	ck_assert_int_eq(parse("{\"model\":\"m\",\"keep_alive\":\"5m\",\"messages\":["
			       "{\"role\":\"system\",\"content\":\"s\"},"
			       "{\"role\":\"user\",\"content\":\"u\",\"images\":[]},"
			       "{\"role\":\"assistant\",\"content\":\"a\"},"
			       "{\"role\":\"user\",\"content\":\"v\"}]}", true, &r, &x, &e), 0);
	ck_assert_uint_eq(r.n_messages, 4);
	ck_assert_int_eq(r.messages[2].role, GEN_ROLE_ASSISTANT);
	ck_assert_str_eq(r.messages[3].content, "v");
	gen_request_free(&r);
	ck_assert_int_eq(parse("{\"model\":\"m\",\"keep_alive\":0,\"messages\":[{\"role\":\"user\","
			       "\"content\":\"u\"}]}", true, &r, &x, &e), 0);
	gen_request_free(&r);
}
END_TEST

START_TEST(options_map_to_the_sampler)
{
	struct api_ollama_extra x;
	struct gen_request r;
	struct api_error e;

	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":0.5,"
			       "\"top_k\":7,\"top_p\":0.9,\"min_p\":0.05,\"seed\":42,"
			       "\"num_predict\":10,\"stop\":[\"a\",\"b\"],\"repeat_penalty\":1.2,"
			       "\"repeat_last_n\":32,\"presence_penalty\":0.5,"
			       "\"frequency_penalty\":-0.5,\"num_ctx\":1024,\"num_thread\":8,"
			       "\"num_gpu\":0,\"mirostat\":0,\"mirostat_tau\":5,\"tfs_z\":1,"
			       "\"typical_p\":1}}", false, &r, &x, &e), 0);
	ck_assert_float_eq(r.temperature, 0.5f);
	ck_assert_int_eq(r.top_k, 7);
	ck_assert_float_eq_tol(r.top_p, 0.9f, 1e-6);
	ck_assert_float_eq_tol(r.min_p, 0.05f, 1e-6);
	ck_assert(r.has_seed);
	ck_assert_uint_eq(r.seed, 42);
	ck_assert_int_eq(r.max_tokens, 10);
	ck_assert_uint_eq(r.n_stop, 2);
	ck_assert_str_eq(r.stop[1], "b");
	ck_assert_float_eq_tol(r.repeat_penalty, 1.2f, 1e-6);
	ck_assert_int_eq(r.repeat_last_n, 32);
	ck_assert_float_eq(r.presence_penalty, 0.5f);
	ck_assert_float_eq(r.frequency_penalty, -0.5f);
	gen_request_free(&r);

	/* -1 and values above the server's cap mean the cap */
	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":-1}}",
			       false, &r, &x, &e), 0);
	ck_assert_int_eq(r.max_tokens, 64);
	gen_request_free(&r);
	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":999}}",
			       false, &r, &x, &e), 0);
	ck_assert_int_eq(r.max_tokens, 64);
	gen_request_free(&r);
}
END_TEST

START_TEST(unsupported_fields_and_options_are_refused_by_name)
{
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"mirostat\":2}}", false, "mirostat");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"tfs_z\":0.5}}", false, "tfs_z");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"typical_p\":0.5}}", false,
		"typical_p");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"bogus\":1}}", false, "bogus");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_ctx\":4096}}", false, "num_ctx");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":\"hot\"}}", false,
		"temperature");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"a\",\"b\",\"c\",\"d\","
		"\"e\"]}}", false, "stop");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"images\":[\"aGk=\"]}", false, "images");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"template\":\"{{ .Prompt }}\"}", false, "template");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"suffix\":\"end\"}", false, "suffix");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"context\":[1,2]}", false, "context");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"think\":true}", false, "think");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"raw\":true,\"system\":\"s\"}", false, "raw");
	refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"u\","
		"\"images\":[\"aGk=\"]}]}", true, "images");
	refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"u\"}],"
		"\"tools\":[{\"type\":\"function\"}]}", true, "tools");
	refused("{\"model\":\"m\",\"messages\":[{\"role\":\"robot\",\"content\":\"u\"}]}", true,
		"role");
	refused("{\"prompt\":\"p\"}", false, "model is required");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"yaml\"}", false, "format");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"format\":{\"allOf\":[]}}", false, "format");
	refused("{\"model\":\"m\",\"prompt\":\"p\",\"stream\":\"yes\"}", false, "stream");
	refused("[1]", false, "object");
}
END_TEST

START_TEST(format_becomes_a_grammar)
{
	struct api_ollama_extra x;
	struct gen_request r;
	struct api_error e;
	struct grammar *g = NULL;

	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"json\"}", false, &r,
			       &x, &e), 0);
	ck_assert_ptr_nonnull(r.grammar);
	gen_request_free(&r);
	ck_assert_int_eq(parse("{\"model\":\"m\",\"prompt\":\"p\",\"format\":{\"type\":\"integer\","
			       "\"maximum\":5}}", false, &r, &x, &e), 0);
	ck_assert_int_eq(grammar_parse_gbnf(&g, r.grammar, strlen(r.grammar), NULL), 0);
	ck_assert(grammar_matches(g, "5", 1) && !grammar_matches(g, "6", 1));
	grammar_free(g);
	gen_request_free(&r);
}
END_TEST

static int embed_parse(const char *body, enum api_embed_kind kind, struct api_embed_request *r,
		       struct api_error *e)
{
	return api_embed_parse(body, strlen(body), kind, r, e);
}

START_TEST(embedding_inputs_in_every_shape)
{
	struct api_embed_request r;
	struct api_error e;

	ck_assert_int_eq(embed_parse("{\"input\":\"hello\"}", API_EMBED_OPENAI, &r, &e), 0);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_str_eq(r.in[0].text, "hello");
	ck_assert(!r.base64);
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"input\":[\"a\",\"b\"],\"encoding_format\":\"base64\"}",
				     API_EMBED_OPENAI, &r, &e), 0);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_str_eq(r.in[1].text, "b");
	ck_assert(r.base64);
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"input\":[1,2,3]}", API_EMBED_OPENAI, &r, &e), 0);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.in[0].n_ids, 3);
	ck_assert_int_eq(r.in[0].ids[2], 3);
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"input\":[[1,2],[3]],\"dimensions\":8}", API_EMBED_OPENAI,
				     &r, &e), 0);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_uint_eq(r.in[1].n_ids, 1);
	ck_assert_int_eq(r.dimensions, 8);
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"content\":\"x\"}", API_EMBED_LLAMA, &r, &e), 0);
	ck_assert_str_eq(r.in[0].text, "x");
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"model\":\"m\",\"input\":[\"a\"],\"truncate\":false,"
				     "\"keep_alive\":\"1m\",\"options\":{\"num_thread\":2}}",
				     API_EMBED_OLLAMA, &r, &e), 0);
	ck_assert(!r.truncate);
	ck_assert_str_eq(r.model, "m");
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"model\":\"m\",\"input\":\"a\"}", API_EMBED_OLLAMA, &r, &e),
			 0);
	ck_assert(r.truncate); /* Ollama's default */
	api_embed_request_free(&r);
	ck_assert_int_eq(embed_parse("{\"model\":\"m\",\"prompt\":\"a\"}", API_EMBED_OLLAMA_LEGACY,
				     &r, &e), 0);
	ck_assert_str_eq(r.in[0].text, "a");
	api_embed_request_free(&r);
}
END_TEST

static void embed_refused(const char *body, enum api_embed_kind kind, const char *param)
{
	struct api_embed_request r;
	struct api_error e;

	ck_assert_msg(embed_parse(body, kind, &r, &e) == EMBER_EINVAL, "accepted: %s", body);
	ck_assert_int_eq(e.status, 400);
	ck_assert_msg(strcmp(e.param, param) == 0, "%s: param '%s', not '%s' (%s)", body, e.param,
		      param, e.message);
}

START_TEST(bad_embedding_bodies_name_the_field)
{
	embed_refused("{}", API_EMBED_OPENAI, "input");
	embed_refused("{\"input\":\"\"}", API_EMBED_OPENAI, "input");
	embed_refused("{\"input\":[]}", API_EMBED_OPENAI, "input");
	embed_refused("{\"input\":[\"a\",3]}", API_EMBED_OPENAI, "input[1]");
	embed_refused("{\"input\":[1,-2]}", API_EMBED_OPENAI, "input");
	embed_refused("{\"input\":[[1],[]]}", API_EMBED_OPENAI, "input[1]");
	embed_refused("{\"input\":\"a\",\"encoding_format\":\"int8\"}", API_EMBED_OPENAI,
		      "encoding_format");
	embed_refused("{\"input\":\"a\",\"dimensions\":0}", API_EMBED_OPENAI, "dimensions");
	embed_refused("{\"model\":\"m\",\"input\":[1,2]}", API_EMBED_OLLAMA, "input[0]");
	embed_refused("{\"model\":\"m\",\"input\":\"a\",\"options\":{\"temperature\":1}}",
		      API_EMBED_OLLAMA, "options");
	embed_refused("{\"model\":\"m\",\"input\":\"a\",\"truncate\":1}", API_EMBED_OLLAMA,
		      "truncate");
	embed_refused("{\"model\":\"m\",\"prompt\":[\"a\"]}", API_EMBED_OLLAMA_LEGACY, "prompt");
}
END_TEST

START_TEST(base64_matches_the_rfc_vectors)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					  "Zm9vYmFy"};
	char buf[16];
	size_t i;

	for (i = 0; i < 7; i++) {
		api_embed_base64((const unsigned char *)in[i], strlen(in[i]), buf);
		ck_assert_str_eq(buf, out[i]);
	}
}
END_TEST

Suite *suite_api_ollama(void)
{
	Suite *s = suite_create("api_ollama");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, model_names_as_ollama_clients_send_them);
	tcase_add_test(tc, generate_becomes_a_templated_user_turn_or_a_raw_prompt);
	tcase_add_test(tc, chat_messages_and_keep_alive);
	tcase_add_test(tc, options_map_to_the_sampler);
	tcase_add_test(tc, unsupported_fields_and_options_are_refused_by_name);
	tcase_add_test(tc, format_becomes_a_grammar);
	tcase_add_test(tc, embedding_inputs_in_every_shape);
	tcase_add_test(tc, bad_embedding_bodies_name_the_field);
	tcase_add_test(tc, base64_matches_the_rfc_vectors);
	suite_add_tcase(s, tc);
	return s;
}
