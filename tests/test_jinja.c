/* test_jinja.c - the Jinja interpreter (jinja.h): constructs chat templates
 * use, whitespace control, errors, and the limits that keep a hostile
 * template from crashing or hanging the daemon. Byte-for-byte agreement
 * with the reference renderer on real templates is checked by
 * tests/integration/test_chat_templates.sh. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "jinja.h"

static char err[EMBER_ERR_MAX];

/* Renders `src` with `ctx`; returns the rc, the text in *out (freed by the
 * caller, NULL on error). */
static int render(const char *src, const char *ctx, char **out)
{
	size_t len = 0;
	struct jinja_template *t;
	int rc;

	err[0] = '\0';
	*out = NULL;
	t = jinja_parse(src, strlen(src), err);
	if (!t)
		return EMBER_EFORMAT;
	rc = jinja_render(t, ctx, strlen(ctx), out, &len, err);
	if (rc == 0)
		ck_assert_uint_eq(strlen(*out), len);
	jinja_free(t);
	return rc;
}

static void expect(const char *src, const char *ctx, const char *want)
{
	char *out;
	int rc = render(src, ctx, &out);

	ck_assert_msg(rc == 0, "%s: rc %d: %s", src, rc, err);
	ck_assert_msg(strcmp(out, want) == 0, "%s: got \"%s\", want \"%s\"", src, out, want);
	free(out);
}

static void expect_fail(const char *src, const char *ctx, int want_rc, const char *msg_part)
{
	char *out;
	int rc = render(src, ctx, &out);

	ck_assert_msg(rc == want_rc, "%s: rc %d, want %d (%s)", src, rc, want_rc, err);
	ck_assert_ptr_null(out);
	ck_assert_msg(strstr(err, msg_part), "%s: message \"%s\" lacks \"%s\"", src, err, msg_part);
}

START_TEST(renders_loops_with_loop_variables)
{
	expect("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}",
	       "{\"xs\":[\"a\",\"b\",\"c\"]}", "1a,2b,3c");
	expect("{% for x in xs %}{{ loop.index0 }}/{{ loop.length }}{{ loop.first }} {% endfor %}",
	       "{\"xs\":[5,6]}", "0/2true 1/2false ");
	expect("{% for x in xs if x > 1 %}{{ x }}{% else %}none{% endfor %}", "{\"xs\":[1,2,3]}", "23");
	expect("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", "{\"xs\":[]}", "empty");
	expect("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\":{\"a\":1,\"b\":2}}", "a=1;b=2;");
	expect("{% for x in xs %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{\"xs\":[1,2,3]}", "1");
}
END_TEST

START_TEST(set_in_a_loop_stays_in_the_loop_but_namespace_escapes)
{
	expect("{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{% endfor %}{{ a }}", "{}", "1");
	expect("{% set ns = namespace(a=1) %}{% for x in [1] %}{% set ns.a = 2 %}{% endfor %}{{ ns.a }}", "{}", "2");
	expect("{% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}]", "{}", "[  block 2 ]");
}
END_TEST

START_TEST(strings_slices_filters_and_tests)
{
	expect("{{ '  a b  '.strip() }}|{{ 'xxabxx'.lstrip('x') }}|{{ 'a,b'.split(',')[1] }}", "{}", "a b|abxx|b");
	expect("{{ s[::-1] }}{{ s[1:] }}{{ xs[-1] }}{{ xs[:2] | join('+') }}", "{\"s\":\"abc\",\"xs\":[1,2,3]}",
	       "cbabc31+2");
	expect("{{ 'Hi' ~ 1 ~ none is none }}{{ 'x' in 'xyz' }}{{ 'k' in d }}{{ 3 not in [1] }}",
	       "{\"d\":{\"k\":0}}", "Hi1truetruetruetrue");
	expect("{{ d | tojson }}", "{\"d\":{\"a\":[1,\"x\\n\\\"\"],\"b\":null}}", "{\"a\": [1, \"x\\n\\\"\"], \"b\": null}");
	expect("{{ xs | selectattr('r', 'equalto', 'u') | map(attribute='c') | join(',') }}",
	       "{\"xs\":[{\"r\":\"u\",\"c\":\"A\"},{\"r\":\"s\",\"c\":\"B\"},{\"r\":\"u\",\"c\":\"C\"}]}", "A,C");
	expect("{{ missing | default('d') }}{{ missing is defined }}{{ xs | length - 1 }}{{ 'ab'.upper().title() }}",
	       "{\"xs\":[1,2]}", "dfalse1Ab");
	expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 2 ** 3 }}", "{}", "3 -4 1 0.5 8");
	expect("{{ 'a' if x else 'b' }}{{ 'c' if not x }}", "{\"x\":false}", "bc");
}
END_TEST

START_TEST(whitespace_control_matches_hugging_face)
{
	/* trim_blocks: the newline after a block tag goes; lstrip_blocks: the
	 * indentation before one goes; "-" eats all whitespace on its side. */
	expect("{% if true %}\n  x\n{% endif %}\n", "{}", "  x\n");
	expect("a  \n  {%- if true -%}  \n b {{- ' c ' -}} \n{% endif %}", "{}", "ab c ");
	expect("  {# comment #}\nz", "{}", "z");
}
END_TEST

START_TEST(macros_take_positional_keyword_and_default_arguments)
{
	expect("{% macro m(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}{{ m(4, 5) }}", "{}",
	       "<1B><23><45>");
}
END_TEST

START_TEST(raise_exception_is_an_error_carrying_its_message)
{
	expect_fail("{{ raise_exception('Roles must alternate') }}", "{}", EMBER_EINVAL, "Roles must alternate");
	ck_assert_str_eq(err, "Roles must alternate");
}
END_TEST

START_TEST(malformed_templates_are_refused_with_a_line)
{
	static const char *const bad[] = {
		"{% if x %}never closed", "{{ x ", "{% for %}", "{% endif %}", "{{ 'unterminated }}",
		"{% unknowntag %}", "{{ (((((( }}", "{# open comment", "{{ x | }}", "{% set %}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct jinja_template *t = jinja_parse(bad[i], strlen(bad[i]), err);
		ck_assert_msg(t == NULL, "accepted: %s", bad[i]);
		ck_assert_msg(strncmp(err, "line ", 5) == 0, "%s: %s", bad[i], err);
	}
}
END_TEST

START_TEST(runtime_errors_name_what_is_wrong)
{
	expect_fail("{{ x | nosuchfilter }}", "{}", EMBER_EUNSUPPORTED, "nosuchfilter");
	expect_fail("{{ x is nosuchtest }}", "{}", EMBER_EUNSUPPORTED, "nosuchtest");
	expect_fail("{{ 1 + none }}", "{}", EMBER_ETYPE, "unsupported operands");
	expect_fail("{{ 1 // 0 }}", "{}", EMBER_ETYPE, "division by zero");
	expect_fail("x", "[1]", EMBER_EFORMAT, "not an object");
	expect_fail("x", "{\"a\":", EMBER_EFORMAT, "context JSON");
}
END_TEST

/* Found by fuzz_jinja: a namespace (or list) that holds itself sent
 * tojson and printing into unbounded recursion (a stack overflow). */
START_TEST(values_that_hold_themselves_fail_instead_of_recursing)
{
	expect_fail("{% set ns = namespace(x=0) %}{% set ns.x = ns %}{{ ns | tojson }}", "{}",
		    EMBER_ERANGE, "nested more than");
	expect_fail("{% set ns = namespace(x=0) %}{% set ns.x = ns %}{{ ns }}", "{}", EMBER_ERANGE,
		    "contains itself");
	expect("{% set ns = namespace(x=[1, [2]]) %}{{ ns.x | tojson }}", "{}", "[1, [2]]");
	/* an empty string concatenated (UBSan: memcpy from NULL) */
	expect("{{ '' ~ '' }}|{{ '' + 'a' }}", "{}", "|a");
}
END_TEST

START_TEST(hostile_templates_hit_limits_not_the_stack_or_the_heap)
{
	char *deep = malloc(100016);
	size_t n = 0;

	/* Steps: a loop of 10^12 iterations stops at the step budget. */
	expect_fail("{% set xs = range(5000) %}{% for i in xs %}{% for j in xs %}{% endfor %}{% endfor %}", "{}",
		    EMBER_ERANGE, "steps");
	/* Recursion: a macro that calls itself forever. */
	expect_fail("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{}", EMBER_ERANGE, "recursion");
	/* Memory: a string doubling past the render's budget. */
	expect_fail("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}"
		    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
		    "{}", EMBER_ERANGE, "MiB");
	/* Parser nesting: 50000 parentheses and 10000 nested ifs. */
	n += (size_t)sprintf(deep, "{{ ");
	for (int i = 0; i < 50000; i++)
		deep[n++] = '(';
	n += (size_t)sprintf(deep + n, " }}");
	ck_assert_ptr_null(jinja_parse(deep, n, err));
	ck_assert_ptr_nonnull(strstr(err, "deeply"));
	n = 0;
	for (int i = 0; i < 10000; i++)
		n += (size_t)sprintf(deep + n, "{%%if 1%%}");
	ck_assert_ptr_null(jinja_parse(deep, n, err));
	/* Context nesting. */
	n = 0;
	for (int i = 0; i < 50000; i++)
		deep[n++] = '[';
	deep[n] = '\0';
	expect_fail("x", deep, EMBER_EFORMAT, "deeply");
	free(deep);
}
END_TEST

START_TEST(context_strings_keep_nul_and_unicode_escapes)
{
	char *out;
	size_t len;
	const char *ctx = "{\"s\":\"a\\u0000b\\u00e9\\ud83d\\ude80\"}";
	struct jinja_template *t = jinja_parse("{{ s }}|{{ s | length }}", 24, err);

	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(jinja_render(t, ctx, strlen(ctx), &out, &len, err), 0);
	ck_assert_uint_eq(len, 3 + 2 + 4 + 1 + 1);
	ck_assert_int_eq(memcmp(out, "a\0b\xc3\xa9\xf0\x9f\x9a\x80|9", len), 0);
	free(out);
	jinja_free(t);
}
END_TEST

/* strftime_now is defined, as Hugging Face and llama.cpp define it (Llama
 * 3.x templates test for it, then print today's date): local time. */
static void today(char *buf, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(buf, cap, "%d %b %Y", &tm);
}

START_TEST(strftime_now_gives_the_local_date)
{
	char before[32], after[32], *out;

	expect("{% if strftime_now is defined %}yes{% endif %}", "{}", "yes");
	today(before, sizeof(before));
	ck_assert_int_eq(render("{{ strftime_now('%d %b %Y') }}", "{}", &out), 0);
	today(after, sizeof(after));
	ck_assert_msg(strcmp(out, before) == 0 || strcmp(out, after) == 0, "got \"%s\", want \"%s\"", out,
		      after);
	free(out);
}
END_TEST

Suite *suite_jinja(void)
{
	Suite *s = suite_create("jinja");
	TCase *tc = tcase_create("jinja");

	tcase_add_test(tc, renders_loops_with_loop_variables);
	tcase_add_test(tc, set_in_a_loop_stays_in_the_loop_but_namespace_escapes);
	tcase_add_test(tc, strings_slices_filters_and_tests);
	tcase_add_test(tc, whitespace_control_matches_hugging_face);
	tcase_add_test(tc, macros_take_positional_keyword_and_default_arguments);
	tcase_add_test(tc, raise_exception_is_an_error_carrying_its_message);
	tcase_add_test(tc, malformed_templates_are_refused_with_a_line);
	tcase_add_test(tc, runtime_errors_name_what_is_wrong);
	tcase_add_test(tc, hostile_templates_hit_limits_not_the_stack_or_the_heap);
	tcase_add_test(tc, values_that_hold_themselves_fail_instead_of_recursing);
	tcase_add_test(tc, context_strings_keep_nul_and_unicode_escapes);
	tcase_add_test(tc, strftime_now_gives_the_local_date);
	suite_add_tcase(s, tc);
	return s;
}
