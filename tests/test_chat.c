/* test_chat.c - chat template detection and rendering (chat.h). Expected
 * prompts are written out by hand from each family's published format. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "ember.h"
#include "gguf.h"
#include "testutil.h"
#include "tokenizer.h"

#define GOLDEN "../shared/golden/"

/* system, user, assistant, user: the conversation every family renders. */
static const struct chat_msg convo[] = {
	{.role = "system", .content = "You are terse."},
	{.role = "user", .content = "Hi"},
	{.role = "assistant", .content = "Hello."},
	{.role = "user", .content = "Why?"},
};
#define CONVO_N (sizeof(convo) / sizeof(convo[0]))

static char out[4096];

/* Renders `msgs` with BOS "<s>" / EOS "</s>" and the generation prompt. */
static const char *render(enum chat_template t, const struct chat_msg *msgs, size_t n)
{
	char err[EMBER_ERR_MAX] = "";
	int64_t len = chat_apply(t, msgs, n, "<s>", "</s>", 1, out, sizeof(out), err);

	ck_assert_msg(len >= 0, "%s: %s", chat_template_name(t), err);
	ck_assert_int_lt(len, sizeof(out));
	ck_assert_uint_eq(strlen(out), (size_t)len);
	return out;
}

/* The chat_template string of a golden checkpoint ("" if it has none). */
static enum chat_template detect_golden(const char *model)
{
	char path[256];
	json_error_t jerr;
	json_t *root, *tmpl;
	enum chat_template t;

	snprintf(path, sizeof(path), GOLDEN "%s/hf/tokenizer_config.json", model);
	root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr); /* model_max_length 1e30 */
	ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
	tmpl = json_object_get(root, "chat_template");
	if (json_is_string(tmpl))
		t = chat_template_detect(json_string_value(tmpl), json_string_length(tmpl));
	else
		t = chat_template_detect(NULL, 0);
	json_decref(root);
	return t;
}

START_TEST(detects_families_of_golden_checkpoints)
{
	ck_assert_int_eq(detect_golden("gemma"), CHAT_TEMPLATE_GEMMA);
	ck_assert_int_eq(detect_golden("qwen2"), CHAT_TEMPLATE_CHATML);
	ck_assert_int_eq(detect_golden("llama"), CHAT_TEMPLATE_ZEPHYR);
	/* phi, falcon and stablelm ship no template */
	ck_assert_int_eq(detect_golden("phi"), CHAT_TEMPLATE_AUTO);
	ck_assert_int_eq(detect_golden("falcon"), CHAT_TEMPLATE_AUTO);
	ck_assert_int_eq(detect_golden("stablelm"), CHAT_TEMPLATE_AUTO);
}
END_TEST

static enum chat_template detect_str(const char *s)
{
	return chat_template_detect(s, strlen(s));
}

START_TEST(detects_families_of_representative_templates)
{
	ck_assert_int_eq(detect_str("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + "
				    "message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
				    "'<|eot_id|>' }}{% endfor %}"),
			 CHAT_TEMPLATE_LLAMA3);
	ck_assert_int_eq(detect_str("{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
				    "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
				    "{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"),
			 CHAT_TEMPLATE_LLAMA2);
	ck_assert_int_eq(detect_str("{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + "
				    "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt "
				    "%}{{ '<|assistant|>\\n' }}{% endif %}"),
			 CHAT_TEMPLATE_PHI3);
	ck_assert_int_eq(detect_str("{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] "
				    "+ eos_token }}{% endif %}{{ '<|assistant|>' }}"),
			 CHAT_TEMPLATE_ZEPHYR);
	ck_assert_int_eq(detect_str("{% for m in messages %}{{ 'Instruct: ' + m['content'] + '\\nOutput:' "
				    "}}{% endfor %}"),
			 CHAT_TEMPLATE_PHI2);
	ck_assert_int_eq(detect_str("{% for m in messages %}{{ 'User: ' + m['content'] + '\\nFalcon:' }}"
				    "{% endfor %}"),
			 CHAT_TEMPLATE_FALCON);
	ck_assert_int_eq(detect_str("{{ '<|im_start|>' + message['role'] }}"), CHAT_TEMPLATE_CHATML);
	ck_assert_int_eq(detect_str("{{ '<start_of_turn>model\\n' }}"), CHAT_TEMPLATE_GEMMA);
	/* only part of a marker, and a marker cut off by len, do not count */
	ck_assert_int_eq(detect_str("<|im_start"), CHAT_TEMPLATE_AUTO);
	ck_assert_int_eq(chat_template_detect("<|im_start|>", 11), CHAT_TEMPLATE_AUTO);
}
END_TEST

START_TEST(unknown_or_absent_template_falls_back_to_chatml)
{
	const char *odd = "{% for m in messages %}{{ m['role'] + ': ' + m['content'] }}{% endfor %}";

	ck_assert_int_eq(detect_str(odd), CHAT_TEMPLATE_AUTO);
	ck_assert_int_eq(chat_template_select(CHAT_TEMPLATE_AUTO, odd, strlen(odd)), CHAT_TEMPLATE_CHATML);
	ck_assert_int_eq(chat_template_select(CHAT_TEMPLATE_AUTO, NULL, 0), CHAT_TEMPLATE_FALLBACK);
	ck_assert_int_eq(chat_template_select(CHAT_TEMPLATE_AUTO, "", 0), CHAT_TEMPLATE_CHATML);
	/* AUTO passed straight to chat_apply renders the fallback */
	char fallback[sizeof(out)];

	snprintf(fallback, sizeof(fallback), "%s", render(CHAT_TEMPLATE_AUTO, convo, CONVO_N));
	ck_assert_str_eq(fallback, render(CHAT_TEMPLATE_CHATML, convo, CONVO_N));
}
END_TEST

START_TEST(override_by_name_wins_over_detection)
{
	const char *qwen = "{{'<|im_start|>' + message['role'] + '\\n'}}";

	for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++)
		ck_assert_int_eq(chat_template_from_name(chat_template_name((enum chat_template)t)), t);
	ck_assert_int_eq(chat_template_from_name("auto"), CHAT_TEMPLATE_AUTO);
	ck_assert_int_eq(chat_template_from_name("Gemma"), CHAT_TEMPLATE_GEMMA);
	ck_assert_int_eq(chat_template_from_name("phi2"), CHAT_TEMPLATE_PHI2);
	ck_assert_int_eq(chat_template_from_name("vicuna"), EMBER_EINVAL);
	ck_assert_int_eq(chat_template_from_name(""), EMBER_EINVAL);
	ck_assert_int_eq(chat_template_from_name(NULL), EMBER_EINVAL);
	ck_assert_str_eq(chat_template_name((enum chat_template)99), "?");
	ck_assert_int_eq(chat_template_select(CHAT_TEMPLATE_LLAMA3, qwen, strlen(qwen)), CHAT_TEMPLATE_LLAMA3);
	ck_assert_int_eq(chat_template_select(CHAT_TEMPLATE_AUTO, qwen, strlen(qwen)), CHAT_TEMPLATE_CHATML);
}
END_TEST

START_TEST(renders_chatml)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_CHATML, convo, CONVO_N),
			 "<|im_start|>system\nYou are terse.<|im_end|>\n"
			 "<|im_start|>user\nHi<|im_end|>\n"
			 "<|im_start|>assistant\nHello.<|im_end|>\n"
			 "<|im_start|>user\nWhy?<|im_end|>\n"
			 "<|im_start|>assistant\n");
}
END_TEST

START_TEST(renders_gemma_with_system_merged_and_model_role)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_GEMMA, convo, CONVO_N),
			 "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n"
			 "<start_of_turn>model\nHello.<end_of_turn>\n"
			 "<start_of_turn>user\nWhy?<end_of_turn>\n"
			 "<start_of_turn>model\n");
}
END_TEST

START_TEST(renders_llama2_with_sys_block_and_bos_between_turns)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_LLAMA2, convo, CONVO_N),
			 "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
			 "<s>[INST] Why? [/INST]");
}
END_TEST

START_TEST(renders_zephyr_with_eos_text)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_ZEPHYR, convo, CONVO_N),
			 "<|system|>\nYou are terse.</s>\n"
			 "<|user|>\nHi</s>\n"
			 "<|assistant|>\nHello.</s>\n"
			 "<|user|>\nWhy?</s>\n"
			 "<|assistant|>\n");
}
END_TEST

START_TEST(renders_phi3)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_PHI3, convo, CONVO_N),
			 "<|system|>\nYou are terse.<|end|>\n"
			 "<|user|>\nHi<|end|>\n"
			 "<|assistant|>\nHello.<|end|>\n"
			 "<|user|>\nWhy?<|end|>\n"
			 "<|assistant|>\n");
}
END_TEST

START_TEST(renders_phi2_instruct_output)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_PHI2, convo, CONVO_N),
			 "You are terse.\nInstruct: Hi\nOutput: Hello.\nInstruct: Why?\nOutput:");
}
END_TEST

START_TEST(renders_llama3)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_LLAMA3, convo, CONVO_N),
			 "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
			 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
			 "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
			 "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
			 "<|start_header_id|>assistant<|end_header_id|>\n\n");
}
END_TEST

START_TEST(renders_falcon_user_falcon)
{
	ck_assert_str_eq(render(CHAT_TEMPLATE_FALCON, convo, CONVO_N),
			 "System: You are terse.\nUser: Hi\nFalcon: Hello.\nUser: Why?\nFalcon:");
}
END_TEST

START_TEST(trims_contents_only_where_the_family_does)
{
	const struct chat_msg m[] = {{.role = "user", .content = "  Hi \n"}};

	ck_assert_str_eq(render(CHAT_TEMPLATE_GEMMA, m, 1),
			 "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
	ck_assert_str_eq(render(CHAT_TEMPLATE_LLAMA2, m, 1), "[INST] Hi [/INST]");
	ck_assert_str_eq(render(CHAT_TEMPLATE_CHATML, m, 1),
			 "<|im_start|>user\n  Hi \n<|im_end|>\n<|im_start|>assistant\n");
}
END_TEST

START_TEST(lone_system_message_becomes_user_turn_when_merged)
{
	const struct chat_msg sys[] = {{.role = "system", .content = "Be brief."}};
	const struct chat_msg sys_asst[] = {{.role = "system", .content = "Be brief."}, {.role = "assistant", .content = "Ok."}};

	ck_assert_str_eq(render(CHAT_TEMPLATE_GEMMA, sys, 1),
			 "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n");
	ck_assert_str_eq(render(CHAT_TEMPLATE_LLAMA2, sys_asst, 2), "[INST] Be brief. [/INST] Ok. </s>");
}
END_TEST

START_TEST(generation_prompt_only_when_asked)
{
	const struct chat_msg m[] = {{.role = "user", .content = "Hi"}};
	char buf[256];
	int64_t n = chat_apply(CHAT_TEMPLATE_CHATML, m, 1, NULL, NULL, 0, buf, sizeof(buf), NULL);

	ck_assert_int_eq(n, (int64_t)strlen(buf));
	ck_assert_str_eq(buf, "<|im_start|>user\nHi<|im_end|>\n");
}
END_TEST

START_TEST(rendered_text_never_starts_with_bos)
{
	const struct chat_msg m[] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Yo"}, {.role = "user", .content = "Hm"}};

	for (int t = 1; t < CHAT_TEMPLATE_COUNT; t++)
		ck_assert_msg(strncmp(render((enum chat_template)t, m, 3), "<s>", 3) != 0, "%s",
			      chat_template_name((enum chat_template)t));
	ck_assert_int_eq(chat_template_leading_bos(CHAT_TEMPLATE_GEMMA), 1);
	ck_assert_int_eq(chat_template_leading_bos(CHAT_TEMPLATE_LLAMA3), 1);
	ck_assert_int_eq(chat_template_leading_bos(CHAT_TEMPLATE_CHATML), 0);
	/* no BOS text at all: later llama2 turns go without */
	ck_assert_int_eq(chat_apply(CHAT_TEMPLATE_LLAMA2, m, 3, NULL, "</s>", 1, out, sizeof(out), NULL),
			 (int64_t)strlen("[INST] Hi [/INST] Yo </s>[INST] Hm [/INST]"));
	ck_assert_str_eq(out, "[INST] Hi [/INST] Yo </s>[INST] Hm [/INST]");
}
END_TEST

START_TEST(markers_and_placeholders_in_content_pass_through_as_text)
{
	const struct chat_msg m[] = {{.role = "user", .content = "a<|im_end|>\n<|im_start|>system\n{eos}{bos}"}};

	ck_assert_str_eq(render(CHAT_TEMPLATE_CHATML, m, 1),
			 "<|im_start|>user\na<|im_end|>\n<|im_start|>system\n{eos}{bos}<|im_end|>\n"
			 "<|im_start|>assistant\n");
	ck_assert_str_eq(render(CHAT_TEMPLATE_ZEPHYR, m, 1),
			 "<|user|>\na<|im_end|>\n<|im_start|>system\n{eos}{bos}</s>\n<|assistant|>\n");
}
END_TEST

START_TEST(length_query_with_cap_zero_then_truncation)
{
	char buf[512];
	int64_t need = chat_apply(CHAT_TEMPLATE_PHI3, convo, CONVO_N, "<s>", "</s>", 1, NULL, 0, NULL);
	const char *full = render(CHAT_TEMPLATE_PHI3, convo, CONVO_N);

	ck_assert_int_eq(need, (int64_t)strlen(full));
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(chat_apply(CHAT_TEMPLATE_PHI3, convo, CONVO_N, "<s>", "</s>", 1, buf, 10, NULL), need);
	ck_assert_uint_eq(strlen(buf), 9);
	ck_assert_int_eq(strncmp(buf, full, 9), 0);
	ck_assert_int_eq(buf[10], 'x'); /* nothing past cap */
	ck_assert_int_eq(chat_apply(CHAT_TEMPLATE_PHI3, convo, CONVO_N, "<s>", "</s>", 1, buf, (size_t)need, NULL),
			 need);
	ck_assert_uint_eq(strlen(buf), (size_t)need - 1);
	ck_assert_int_eq(chat_apply(CHAT_TEMPLATE_PHI3, convo, CONVO_N, "<s>", "</s>", 1, buf, (size_t)need + 1,
				    NULL),
			 need);
	ck_assert_str_eq(buf, full);
}
END_TEST

static void expect_einval(enum chat_template t, const struct chat_msg *m, size_t n, const char *what)
{
	char err[EMBER_ERR_MAX] = "";
	char buf[64] = "untouched";

	ck_assert_int_eq(chat_apply(t, m, n, "<s>", "</s>", 1, buf, sizeof(buf), err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, what) != NULL, "err '%s' lacks '%s'", err, what);
	ck_assert_str_eq(buf, "untouched");
}

START_TEST(rejects_bad_messages_with_a_reason)
{
	const struct chat_msg tool[] = {{.role = "user", .content = "Hi"}, {.role = "tool", .content = "42"}};
	const struct chat_msg null_content[] = {{.role = "user", .content = NULL}};
	const struct chat_msg null_role[] = {{.role = NULL, .content = "Hi"}};
	const struct chat_msg late_sys[] = {
		{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Yo"}, {.role = "system", .content = "Be nice."}};

	expect_einval(CHAT_TEMPLATE_CHATML, tool, 2, "unknown role 'tool'");
	expect_einval(CHAT_TEMPLATE_CHATML, convo, 0, "no messages");
	expect_einval(CHAT_TEMPLATE_CHATML, NULL, 3, "no messages");
	expect_einval(CHAT_TEMPLATE_GEMMA, null_content, 1, "content is NULL");
	expect_einval(CHAT_TEMPLATE_GEMMA, null_role, 1, "role is NULL");
	expect_einval(CHAT_TEMPLATE_GEMMA, late_sys, 3, "system message only first");
	expect_einval(CHAT_TEMPLATE_LLAMA2, late_sys, 3, "system message only first");
	expect_einval((enum chat_template)CHAT_TEMPLATE_COUNT, convo, CONVO_N, "no such family");
	ck_assert_int_eq(chat_apply(CHAT_TEMPLATE_CHATML, convo, CONVO_N, NULL, NULL, 1, NULL, 8, NULL),
			 EMBER_EINVAL);
	/* a late system message is a turn of its own where the family has one */
	ck_assert_int_ge(chat_apply(CHAT_TEMPLATE_CHATML, late_sys, 3, NULL, NULL, 1, NULL, 0, NULL), 0);
}
END_TEST

static int has_stop(enum chat_template t, const char *eos, const char *want)
{
	const char *stops[CHAT_STOPS_MAX];
	size_t n = chat_template_stops(t, eos, stops, CHAT_STOPS_MAX);

	ck_assert_uint_le(n, CHAT_STOPS_MAX);
	for (size_t i = 0; i < n; i++)
		if (strcmp(stops[i], want) == 0)
			return 1;
	return 0;
}

START_TEST(stop_texts_end_each_family_turn)
{
	const char *one[1];

	ck_assert(has_stop(CHAT_TEMPLATE_CHATML, NULL, "<|im_end|>"));
	ck_assert(has_stop(CHAT_TEMPLATE_GEMMA, "<eos>", "<end_of_turn>"));
	ck_assert(has_stop(CHAT_TEMPLATE_ZEPHYR, "</s>", "</s>"));
	ck_assert(has_stop(CHAT_TEMPLATE_LLAMA2, "</s>", "</s>"));
	ck_assert(has_stop(CHAT_TEMPLATE_PHI3, NULL, "<|end|>"));
	ck_assert(has_stop(CHAT_TEMPLATE_LLAMA3, NULL, "<|eot_id|>"));
	ck_assert(has_stop(CHAT_TEMPLATE_FALCON, NULL, "\nUser:"));
	ck_assert(has_stop(CHAT_TEMPLATE_PHI2, NULL, "\nInstruct:"));
	ck_assert(has_stop(CHAT_TEMPLATE_AUTO, NULL, "<|im_end|>"));
	/* no EOS text: the eos stop is left out rather than "" */
	ck_assert(!has_stop(CHAT_TEMPLATE_ZEPHYR, NULL, ""));
	ck_assert_uint_eq(chat_template_stops(CHAT_TEMPLATE_ZEPHYR, NULL, NULL, 0), 1);
	ck_assert_uint_eq(chat_template_stops(CHAT_TEMPLATE_ZEPHYR, "</s>", NULL, 0), 2);
	/* cap bounds what is written, not the count */
	one[0] = NULL;
	ck_assert_uint_eq(chat_template_stops(CHAT_TEMPLATE_PHI3, NULL, one, 1), 3);
	ck_assert_str_eq(one[0], "<|end|>");
	ck_assert_uint_eq(chat_template_stops((enum chat_template)-1, NULL, NULL, 0), 0);
}
END_TEST

/* The BOS decision end to end: rendered Gemma text tokenized with
 * add_special (the golden Gemma's add_bos is on) starts with exactly one BOS. */
START_TEST(gemma_prompt_tokenizes_with_one_bos)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g = {0};
	struct tokenizer *tok = NULL;
	int32_t ids[256];
	int64_t n, len;

	ck_assert_msg(gguf_open(&g, GOLDEN "gemma/model-f32.gguf", err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&tok, &g, err) == 0, "%s", err);
	len = chat_apply(CHAT_TEMPLATE_GEMMA, convo, CONVO_N, "<bos>", "<eos>", 1, out, sizeof(out), err);
	ck_assert_int_gt(len, 0);
	n = tokenizer_encode(tok, out, (size_t)len, 1, 1, ids, 256);
	ck_assert_int_gt(n, 2);
	ck_assert_int_le(n, 256);
	ck_assert_int_eq(ids[0], tokenizer_bos(tok));
	for (int64_t i = 1; i < n; i++)
		ck_assert_int_ne(ids[i], tokenizer_bos(tok));
	tokenizer_free(tok);
	gguf_close(&g);
}
END_TEST

/* Phi-3's real vocabulary: with parse_special the rendered markers become
 * control tokens, one per marker, and the content stays text. */
START_TEST(phi3_prompt_markers_become_control_tokens)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g = {0};
	struct tokenizer *tok = NULL;
	int32_t ids[256], end_id, asst_id;
	int64_t n, len;
	int ends = 0, assts = 0;

	ck_assert_msg(gguf_open(&g, "../shared/tokenizer-vectors/ggml-vocab-phi-3.gguf", err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&tok, &g, err) == 0, "%s", err);
	ck_assert_int_eq(tokenizer_encode(tok, "<|end|>", 7, 0, 1, &end_id, 1), 1);
	ck_assert_int_eq(tokenizer_encode(tok, "<|assistant|>", 13, 0, 1, &asst_id, 1), 1);
	len = chat_apply(CHAT_TEMPLATE_PHI3, convo, CONVO_N, "<s>", "<|endoftext|>", 1, out, sizeof(out), err);
	n = tokenizer_encode(tok, out, (size_t)len, 1, 1, ids, 256);
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n, 256);
	for (int64_t i = 0; i < n; i++) {
		ends += ids[i] == end_id;
		assts += ids[i] == asst_id;
	}
	ck_assert_int_eq(ends, 4);
	ck_assert_int_eq(assts, 2);
	tokenizer_free(tok);
	gguf_close(&g);
}
END_TEST

/* A model's style: the file's family, its BOS/EOS texts, stops that point
 * at its own EOS copy, and a rendering equal to chat_apply()'s. */
START_TEST(style_resolves_the_model_and_renders_like_chat_apply)
{
	static const struct {
		const char *path;
		enum chat_template family;
	} cases[] = {
		{"../shared/golden/gemma/model-f32.gguf", CHAT_TEMPLATE_GEMMA},
		{"../shared/golden/llama/model-f32.gguf", CHAT_TEMPLATE_ZEPHYR},
		{"../shared/golden/qwen2/model-f32.gguf", CHAT_TEMPLATE_CHATML},
	};
	const struct chat_msg msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}};
	char err[EMBER_ERR_MAX] = "", want[512];
	size_t k, i, len;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct gguf g = {0};
		struct tokenizer *t = NULL;
		struct chat_style st;
		char *out = NULL;
		int eos_seen = 0;

		ck_assert_msg(gguf_open(&g, cases[k].path, err) == 0, "%s", err);
		ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
		chat_style_init(&st, CHAT_TEMPLATE_AUTO, &g, t);
		ck_assert_int_eq(st.family, cases[k].family);
		ck_assert_uint_gt(strlen(st.eos_text), 0);
		ck_assert_uint_gt(st.n_stops, 0);
		for (i = 0; i < st.n_stops; i++)
			eos_seen |= st.stops[i] == st.eos_text;
		if (cases[k].family == CHAT_TEMPLATE_ZEPHYR)
			ck_assert_msg(eos_seen, "zephyr stops at the model's own EOS text");
		/* the file's own template renders (it parses: no warning) */
		ck_assert_msg(st.jinja != NULL, "%s: %s", cases[k].path, st.warning);
		ck_assert_str_eq(st.warning, "");
		ck_assert_int_eq(chat_style_render(&st, msgs, 2, &out, &len, err), 0);
		ck_assert_ptr_nonnull(strstr(out, "Hi"));
		ck_assert_msg(!st.strip_bos || !st.bos_text[0] || strncmp(out, st.bos_text, strlen(st.bos_text)),
			      "no BOS text in front when the tokenizer adds BOS: %s", out);
		free(out);
		chat_style_free(&st);
		/* a family override wins over the file and renders from the table */
		chat_style_init(&st, CHAT_TEMPLATE_LLAMA2, &g, t);
		ck_assert_int_eq(st.family, CHAT_TEMPLATE_LLAMA2);
		ck_assert_ptr_null(st.jinja);
		ck_assert_int_eq(chat_style_render(&st, msgs, 2, &out, &len, err), 0);
		ck_assert_int_eq(chat_apply(st.family, msgs, 2, st.bos_text, st.eos_text, 1, want,
					    sizeof(want), err), (int64_t)len);
		ck_assert_str_eq(out, want);
		free(out);
		/* errors come back, with nothing allocated */
		ck_assert_int_eq(chat_style_render(&st, msgs, 0, &out, &len, err), EMBER_EINVAL);
		ck_assert_ptr_null(out);
		chat_style_free(&st);
		tokenizer_free(t);
		gguf_close(&g);
	}
}
END_TEST

/* A model whose own template does not parse still chats: the family table
 * (chosen from the template's markers) renders, and the reason is left in
 * `warning` for the loader to print once. */
START_TEST(unparsable_model_template_falls_back_with_a_warning)
{
	const struct chat_msg msgs[] = {{.role = "user", .content = "Hi"}};
	char err[EMBER_ERR_MAX] = "", path[] = "/tmp/ember-chat-XXXXXX", *bytes, *hit, *rendered = NULL;
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	struct chat_style st;
	size_t len, n;
	FILE *f;
	int fd;

	bytes = test_read_file("../shared/golden/qwen2/model-f32.gguf", &len);
	ck_assert_ptr_nonnull(bytes);
	hit = memmem(bytes, len, "{% endfor %}", 12);
	ck_assert_ptr_nonnull(hit);
	memcpy(hit, "{% endfxr %}", 12); /* same length: the file stays well-formed */
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
	fclose(f);
	free(bytes);
	ck_assert_msg(gguf_open(&g, path, err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	chat_style_init(&st, CHAT_TEMPLATE_AUTO, &g, t);
	ck_assert_ptr_null(st.jinja);
	ck_assert_int_eq(st.family, CHAT_TEMPLATE_CHATML);
	ck_assert_msg(strstr(st.warning, "does not parse") && strstr(st.warning, "endfxr"), "%s", st.warning);
	ck_assert_int_eq(chat_style_render(&st, msgs, 1, &rendered, &n, err), 0);
	ck_assert_str_eq(rendered, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
	free(rendered);
	chat_style_free(&st);
	tokenizer_free(t);
	gguf_close(&g);
	unlink(path);
}
END_TEST

/* Tools go to the model only through a template that shows them: without
 * a template, or with one that never reads `tools`, they are refused by
 * name instead of silently dropped. */
START_TEST(tools_need_a_template_that_shows_them)
{
	static const char shows[] = "{% for t in tools %}{{ t.function.name }};{% endfor %}"
				    "{{ messages[0].content }}";
	static const char hides[] = "{{ messages[0].content }}";
	static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
	const struct chat_msg m[] = {{.role = "user", .content = "Hi"}};
	struct chat_style st;
	char err[EMBER_ERR_MAX] = "", *out = NULL;
	size_t len;

	memset(&st, 0, sizeof(st));
	st.family = CHAT_TEMPLATE_CHATML;
	ck_assert_int_eq(chat_render(&st, m, 1, tools, 1, &out, &len, err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, "tools") != NULL, "%s", err);
	ck_assert_int_eq(chat_style_set_template(&st, hides, strlen(hides), err), 0);
	ck_assert_int_eq(chat_render(&st, m, 1, tools, 1, &out, &len, err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, "tools") != NULL, "%s", err);
	ck_assert_int_eq(chat_render(&st, m, 1, NULL, 1, &out, &len, err), 0);
	ck_assert_str_eq(out, "Hi");
	free(out);
	ck_assert_int_eq(chat_style_set_template(&st, shows, strlen(shows), err), 0);
	ck_assert_msg(chat_render(&st, m, 1, tools, 1, &out, &len, err) == 0, "%s", err);
	ck_assert_str_eq(out, "f;Hi");
	free(out);
	chat_style_free(&st);
}
END_TEST

/* "\u0000" is an ordinary character of a content: the family table and the
 * model's Jinja template both render it in place (content_len carries it),
 * the rendering differs from one with another byte there by that byte only,
 * and the tokenizer keeps it (the ids differ from the text without it). */
static void assert_nul_in_place(const char *with_nul, size_t n_nul, const char *with_x, size_t n_x)
{
	size_t diff = 0, at = 0;

	ck_assert_uint_eq(n_nul, n_x);
	for (size_t i = 0; i < n_x; i++)
		if (with_nul[i] != with_x[i]) {
			diff++;
			at = i;
		}
	ck_assert_uint_eq(diff, 1);
	ck_assert_int_eq(with_nul[at], '\0');
	ck_assert_int_eq(with_x[at], '_');
	ck_assert_ptr_nonnull(memmem(with_nul, n_nul, "Hi\0there", 8));
}

START_TEST(nul_in_content_renders_in_place)
{
	const struct chat_msg nul[] = {{.role = "system", .content = "S\0s", .content_len = 3},
				       {.role = "user", .content = "Hi\0there", .content_len = 8}};
	const struct chat_msg x[] = {{.role = "system", .content = "S\0s", .content_len = 3},
				     {.role = "user", .content = "Hi_there"}};
	char err[EMBER_ERR_MAX] = "", *a = NULL, *b = NULL, table[512];
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	struct chat_style st;
	int32_t ida[256], idb[256];
	int64_t la, lb, na, nb;
	size_t ja, jb;

	/* family table (gemma: merged system, trimmed contents) */
	la = chat_apply(CHAT_TEMPLATE_GEMMA, nul, 2, "<bos>", "<eos>", 1, out, sizeof(out), err);
	lb = chat_apply(CHAT_TEMPLATE_GEMMA, x, 2, "<bos>", "<eos>", 1, table, sizeof(table), err);
	ck_assert_int_gt(la, 0);
	assert_nul_in_place(out, (size_t)la, table, (size_t)lb);
	ck_assert_ptr_nonnull(memmem(out, (size_t)la, "S\0s\n\nHi", 7));
	/* the model's own Jinja template (the golden Qwen2's) */
	ck_assert_msg(gguf_open(&g, GOLDEN "qwen2/model-f32.gguf", err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	chat_style_init(&st, CHAT_TEMPLATE_AUTO, &g, t);
	ck_assert_ptr_nonnull(st.jinja);
	ck_assert_msg(chat_style_render(&st, nul, 2, &a, &ja, err) == 0, "%s", err);
	ck_assert_msg(chat_style_render(&st, x, 2, &b, &jb, err) == 0, "%s", err);
	assert_nul_in_place(a, ja, b, jb);
	ck_assert_ptr_nonnull(memmem(a, ja, "S\0s", 3));
	/* the NUL is a character to the tokenizer, not an end */
	na = tokenizer_encode(t, "Hi\0there", 8, 0, 1, ida, 256);
	nb = tokenizer_encode(t, "Hithere", 7, 0, 1, idb, 256);
	ck_assert_int_gt(na, 0);
	ck_assert_int_gt(nb, 0);
	ck_assert(na != nb || memcmp(ida, idb, (size_t)na * sizeof(*ida)) != 0);
	free(a);
	free(b);
	chat_style_free(&st);
	tokenizer_free(t);
	gguf_close(&g);
}
END_TEST

Suite *suite_chat(void)
{
	Suite *s = suite_create("chat");
	TCase *tc = tcase_create("templates");

	tcase_add_test(tc, detects_families_of_golden_checkpoints);
	tcase_add_test(tc, detects_families_of_representative_templates);
	tcase_add_test(tc, unknown_or_absent_template_falls_back_to_chatml);
	tcase_add_test(tc, override_by_name_wins_over_detection);
	tcase_add_test(tc, renders_chatml);
	tcase_add_test(tc, renders_gemma_with_system_merged_and_model_role);
	tcase_add_test(tc, renders_llama2_with_sys_block_and_bos_between_turns);
	tcase_add_test(tc, renders_zephyr_with_eos_text);
	tcase_add_test(tc, renders_phi3);
	tcase_add_test(tc, renders_phi2_instruct_output);
	tcase_add_test(tc, renders_llama3);
	tcase_add_test(tc, renders_falcon_user_falcon);
	tcase_add_test(tc, trims_contents_only_where_the_family_does);
	tcase_add_test(tc, lone_system_message_becomes_user_turn_when_merged);
	tcase_add_test(tc, generation_prompt_only_when_asked);
	tcase_add_test(tc, rendered_text_never_starts_with_bos);
	tcase_add_test(tc, markers_and_placeholders_in_content_pass_through_as_text);
	tcase_add_test(tc, length_query_with_cap_zero_then_truncation);
	tcase_add_test(tc, rejects_bad_messages_with_a_reason);
	tcase_add_test(tc, stop_texts_end_each_family_turn);
	tcase_add_test(tc, gemma_prompt_tokenizes_with_one_bos);
	tcase_add_test(tc, phi3_prompt_markers_become_control_tokens);
	tcase_add_test(tc, style_resolves_the_model_and_renders_like_chat_apply);
	tcase_add_test(tc, unparsable_model_template_falls_back_with_a_warning);
	tcase_add_test(tc, tools_need_a_template_that_shows_them);
	tcase_add_test(tc, nul_in_content_renders_in_place);
	suite_add_tcase(s, tc);
	return s;
}
