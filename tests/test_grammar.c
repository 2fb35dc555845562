/* test_grammar.c - GBNF compilation, matching and the token mask. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar.h"

static struct grammar *compile(const char *text)
{
	struct grammar *g = NULL;
	char err[EMBER_ERR_MAX] = "";
	int rc = grammar_parse_gbnf(&g, text, strlen(text), err);

	ck_assert_msg(rc == 0, "%s: %s", text, err);
	return g;
}

static int matches(const char *gbnf, const char *s)
{
	struct grammar *g = compile(gbnf);
	int ok = grammar_matches(g, s, strlen(s));

	grammar_free(g);
	return ok;
}

START_TEST(gbnf_accepts_and_rejects_by_the_rules)
{
	const char *ab = "root ::= \"a\" b* | [x-z]+ \"!\"\nb ::= \"b\" | \"c\"";

	ck_assert(matches(ab, "a"));
	ck_assert(matches(ab, "abcbb"));
	ck_assert(matches(ab, "xyzzy!"));
	ck_assert(!matches(ab, "ab!"));
	ck_assert(!matches(ab, "!"));
	ck_assert(!matches(ab, "xa!"));
	ck_assert(matches("root ::= [^a-c]{2,3}", "zz"));
	ck_assert(matches("root ::= [^a-c]{2,3}", "zzz"));
	ck_assert(!matches("root ::= [^a-c]{2,3}", "zzzz"));
	ck_assert(!matches("root ::= [^a-c]{2,3}", "za"));
	ck_assert(matches("root ::= (\"ab\" | \"c\")? \"d\" # comment\n", "abd"));
	ck_assert(matches("root ::= (\"ab\" | \"c\")? \"d\"", "d"));
	ck_assert(!matches("root ::= (\"ab\" | \"c\")? \"d\"", "abcd"));
	ck_assert(matches("root ::= \"\\u00e9\\x41\\n\" .", "\xc3\xa9" "A\n\xe2\x82\xac"));
	ck_assert(matches("root ::= [\\u0100-\\uffff]", "\xe2\x82\xac"));
	ck_assert(!matches("root ::= [\\u0100-\\uffff]", "A"));
}
END_TEST

START_TEST(gbnf_errors_name_the_problem)
{
	static const char *bad[] = {
		"root ::= undefined-rule",
		"root ::= \"unterminated",
		"root ::= [a-",
		"root ::= (\"a\"",
		"root ::= \"a\"{3,1}",
		"notroot ::= \"a\"",
		"root ::= root \"a\" | \"b\"",
		"root ::= x\nx ::= \"a\"\nx ::= \"b\"",
		"root ::= \"\\q\"",
		"::= \"a\"",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct grammar *g = NULL;
		char err[EMBER_ERR_MAX] = "";

		ck_assert_msg(grammar_parse_gbnf(&g, bad[i], strlen(bad[i]), err) == EMBER_EINVAL,
			      "accepted: %s", bad[i]);
		ck_assert(g == NULL);
		ck_assert_msg(strlen(err) > 8, "no message for %s", bad[i]);
	}
}
END_TEST

/* Untrusted GBNF must not exhaust the stack: deep groups are refused and
 * a long chain of rules fails with a message when opened. */
START_TEST(deep_nesting_is_an_error_not_a_crash)
{
	size_t n = 100000, i, len = 0;
	char *text = malloc(2 * n + 64), err[EMBER_ERR_MAX] = "";
	struct grammar *g = NULL;
	struct grammar_matcher *m = NULL;

	len += (size_t)sprintf(text, "root ::= ");
	for (i = 0; i < n; i++)
		text[len++] = '(';
	text[len++] = '"';
	text[len++] = 'a';
	text[len++] = '"';
	for (i = 0; i < n; i++)
		text[len++] = ')';
	ck_assert_int_eq(grammar_parse_gbnf(&g, text, len, err), EMBER_EINVAL);
	ck_assert(strstr(err, "nested") != NULL);
	/* r0 ::= r1 "x" | "y", r1 ::= r2 "x" | "y", ...: opening r0 recurses
	 * through every rule. */
	free(text);
	text = malloc(16384 * 48);
	len = (size_t)sprintf(text, "root ::= r0\n");
	for (i = 0; i + 1 < 16000; i++)
		len += (size_t)sprintf(text + len, "r%zu ::= r%zu \"x\" | \"y\"\n", i, i + 1);
	len += (size_t)sprintf(text + len, "r%zu ::= \"z\"\n", i);
	ck_assert_msg(grammar_parse_gbnf(&g, text, len, err) == 0, "%s", err);
	ck_assert_int_eq(grammar_matcher_new(&m, g, NULL, err), EMBER_ERANGE);
	ck_assert(m == NULL);
	grammar_free(g);
	free(text);
}
END_TEST

/* A small vocabulary with multi-symbol tokens, split UTF-8 and an EOG. */
static const char *const pieces[] = {
	"{", "}", "\"", "a", "ab", "\"a", "\":", "{\"", "1", "12", ", ", " ",
	"\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac\"", "", "b\"}", "x",
	"\xed\xa0", "\xc1", "\xe0\x80", "\xf4\x90",
};
#define NV ((int32_t)(sizeof(pieces) / sizeof(pieces[0])))
#define EOG 17

static struct grammar_vocab *small_vocab(void)
{
	uint32_t lens[NV];
	uint8_t eog[NV] = {0};
	struct grammar_vocab *v = NULL;
	int32_t i;

	for (i = 0; i < NV; i++)
		lens[i] = (uint32_t)strlen(pieces[i]);
	eog[EOG] = 1;
	ck_assert_int_eq(grammar_vocab_new(&v, NV, pieces, lens, eog, NULL), 0);
	return v;
}

/* The matcher tests' fixture: grammar `gbnf` compiled, small_vocab() and a
 * fresh matcher over both; matcher_fx_close() releases all three. */
struct matcher_fx {
	struct grammar *g;
	struct grammar_vocab *v;
	struct grammar_matcher *m;
};

static void matcher_fx_open(struct matcher_fx *f, const char *gbnf)
{
	f->g = compile(gbnf);
	f->v = small_vocab();
	ck_assert_int_eq(grammar_matcher_new(&f->m, f->g, f->v, NULL), 0);
}

static void matcher_fx_close(struct matcher_fx *f)
{
	grammar_matcher_free(f->m);
	grammar_vocab_free(f->v);
	grammar_free(f->g);
}

/* Brute force: may token t follow `prefix`? */
static int allowed(const struct grammar *g, const struct grammar_vocab *v, const char *prefix,
		   int32_t t)
{
	struct grammar_matcher *m;
	int ok;

	ck_assert_int_eq(grammar_matcher_new(&m, g, v, NULL), 0);
	ck_assert_int_eq(grammar_matcher_accept_bytes(m, prefix, strlen(prefix), NULL), 0);
	ok = grammar_matcher_accept(m, t, NULL) == 0;
	grammar_matcher_free(m);
	return ok;
}

static const char *const MASK_GRAMMARS[] = {
	"root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\n"
	"pair ::= str \":\" ws val ws\n"
	"val ::= str | [0-9]+\n"
	"str ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"n])* \"\\\"\"\n"
	"ws ::= \" \"?",
	/* Bounded strings: every position is its own state. */
	"root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\n"
	"pair ::= str \":\" ws val ws\n"
	"val ::= str | [0-9]{1,2}\n"
	"str ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"n]){0,3} \"\\\"\"\n"
	"ws ::= \" \"?",
	/* A negated class next to classes overlapping it (not uniform). */
	"root ::= \"{\" ([^}] | [a-c] \"}\")* \"}\"",
};

START_TEST(mask_equals_a_token_by_token_check)
{
	const char *gbnf = MASK_GRAMMARS[_i];
	static const char *prefixes[] = {"", "{", "{\"", "{\"a", "{\"\xc3", "{\"\xe2\x82",
					 "{\"ab\":", "{\"ab\": 1", "{\"ab\": \"x\"", "{\"a\":1}"};
	struct grammar *g = compile(gbnf);
	struct grammar_vocab *v = small_vocab();
	uint32_t mask[(NV + 31) / 32];
	size_t p;
	int32_t t;

	for (p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
		struct grammar_matcher *m;
		char err[EMBER_ERR_MAX];
		int64_t n;
		int count = 0;

		ck_assert_int_eq(grammar_matcher_new(&m, g, v, NULL), 0);
		ck_assert_int_eq(grammar_matcher_accept_bytes(m, prefixes[p], strlen(prefixes[p]), NULL), 0);
		/* Twice: the second answer comes from the cache. */
		for (int rep = 0; rep < 2; rep++) {
			n = grammar_matcher_fill_mask(m, mask, err);
			ck_assert_msg(n > 0, "%s: %s", prefixes[p], err);
			for (t = 0, count = 0; t < NV; t++) {
				int bit = (mask[t >> 5] >> (t & 31)) & 1;

				count += bit;
				ck_assert_msg(bit == allowed(g, v, prefixes[p], t),
					      "prefix '%s' token %d ('%s'): mask %d", prefixes[p], t,
					      pieces[t], bit);
			}
			ck_assert_int_eq(n, count);
		}
		grammar_matcher_free(m);
	}
	grammar_vocab_free(v);
	grammar_free(g);
}
END_TEST

START_TEST(end_of_generation_only_when_complete_and_done_when_nothing_follows)
{
	struct matcher_fx f;
	uint32_t mask[1];

	matcher_fx_open(&f, "root ::= \"{\" \"a\"* \"}\"");
	ck_assert(!grammar_matcher_accepting(f.m));
	ck_assert_int_eq(grammar_matcher_accept(f.m, EOG, NULL), EMBER_EINVAL);
	ck_assert_int_eq(grammar_matcher_accept(f.m, 0, NULL), 0);
	ck_assert_int_eq(grammar_matcher_accept(f.m, 4, NULL), EMBER_EINVAL); /* "ab" */
	ck_assert_int_eq(grammar_matcher_accept(f.m, 3, NULL), 0);
	ck_assert(!grammar_matcher_done(f.m));
	ck_assert_int_eq(grammar_matcher_accept(f.m, 1, NULL), 0);
	ck_assert(grammar_matcher_accepting(f.m));
	ck_assert(grammar_matcher_done(f.m));
	ck_assert_int_eq(grammar_matcher_fill_mask(f.m, mask, NULL), 1);
	ck_assert_uint_eq(mask[0], 1u << EOG);
	ck_assert_int_eq(grammar_matcher_accept(f.m, EOG, NULL), 0);
	matcher_fx_close(&f);
}
END_TEST

START_TEST(a_dead_end_is_an_error_with_a_message)
{
	/* No token of the vocabulary starts with 'q'. */
	struct matcher_fx f;
	uint32_t mask[1];
	char err[EMBER_ERR_MAX] = "";

	matcher_fx_open(&f, "root ::= \"q\"");
	ck_assert_int_eq(grammar_matcher_fill_mask(f.m, mask, err), EMBER_ERANGE);
	ck_assert(strstr(err, "dead end") != NULL);
	matcher_fx_close(&f);
}
END_TEST


START_TEST(prefixes_of_invalid_utf8_are_never_allowed)
{
	/* Surrogate (ED A0), overlong (C1, E0 80) and beyond-U+10FFFF (F4 90)
	 * prefixes cannot complete to a valid code point: a mask allowing them
	 * would lead to a dead end. */
	struct matcher_fx f;
	uint32_t mask[(NV + 31) / 32];
	int32_t t;

	matcher_fx_open(&f, "root ::= \"\\\"\" [^\"]* \"\\\"\"");
	ck_assert_int_eq(grammar_matcher_accept(f.m, 2, NULL), 0);
	ck_assert(grammar_matcher_fill_mask(f.m, mask, NULL) > 0);
	for (t = 20; t < 24; t++) {
		ck_assert_msg(!((mask[t >> 5] >> (t & 31)) & 1), "token %d allowed", t);
		ck_assert_int_eq(grammar_matcher_accept(f.m, t, NULL), EMBER_EINVAL);
	}
	ck_assert_int_eq(grammar_matcher_accept(f.m, 14, NULL), 0); /* a whole e-acute */
	matcher_fx_close(&f);
}
END_TEST

START_TEST(a_long_bounded_repetition_outlives_the_cache)
{
	/* Every position of X{0,700} is its own cache key: more than the
	 * matcher keeps, so the cache is emptied on the way. */
	struct matcher_fx f;
	uint32_t mask[(NV + 31) / 32];
	int i;

	matcher_fx_open(&f, "root ::= [^\"]{0,700} \"\\\"\"");
	for (i = 0; i < 700; i++) {
		ck_assert(grammar_matcher_fill_mask(f.m, mask, NULL) > 0);
		ck_assert(mask[0] >> 3 & 1);      /* "a" */
		ck_assert(mask[0] >> 2 & 1);      /* the closing quote */
		ck_assert_int_eq(grammar_matcher_accept(f.m, 3, NULL), 0);
	}
	ck_assert(grammar_matcher_fill_mask(f.m, mask, NULL) > 0);
	ck_assert(!(mask[0] >> 3 & 1));           /* the 701st "a" */
	ck_assert_int_eq(grammar_matcher_accept(f.m, 2, NULL), 0);
	ck_assert(grammar_matcher_done(f.m));
	matcher_fx_close(&f);
}
END_TEST

Suite *suite_grammar(void)
{
	Suite *s = suite_create("grammar");
	TCase *tc = tcase_create("grammar");

	tcase_add_test(tc, gbnf_accepts_and_rejects_by_the_rules);
	tcase_add_test(tc, gbnf_errors_name_the_problem);
	tcase_add_test(tc, deep_nesting_is_an_error_not_a_crash);
	tcase_add_test(tc, a_long_bounded_repetition_outlives_the_cache);
	tcase_add_loop_test(tc, mask_equals_a_token_by_token_check, 0,
			    (int)(sizeof(MASK_GRAMMARS) / sizeof(MASK_GRAMMARS[0])));
	tcase_add_test(tc, end_of_generation_only_when_complete_and_done_when_nothing_follows);
	tcase_add_test(tc, a_dead_end_is_an_error_with_a_message);
	tcase_add_test(tc, prefixes_of_invalid_utf8_are_never_allowed);
	suite_add_tcase(s, tc);
	return s;
}
