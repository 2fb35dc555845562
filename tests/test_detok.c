/* test_detok.c - streamed text: UTF-8 held until complete, stop strings
 * held until decided and found across token boundaries. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "detok.h"
#include "ember.h"

#define FFFD "\xef\xbf\xbd"

/* Everything a stream has written so far. */
struct text {
	char s[8192];
	size_t len;
};

/* Whether s[0..n) is complete, valid UTF-8 (an independent, simple check). */
static int valid_utf8(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned long cp;
		size_t len, k;

		if (u[i] < 0x80) {
			i++;
			continue;
		}
		len = u[i] >= 0xf0 ? 4 : u[i] >= 0xe0 ? 3 : u[i] >= 0xc0 ? 2 : 0;
		if (len == 0 || i + len > n)
			return 0;
		cp = u[i] & (0x7f >> len);
		for (k = 1; k < len; k++) {
			if ((u[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (u[i + k] & 0x3f);
		}
		if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
		    cp < (len == 2 ? 0x80ul : len == 3 ? 0x800ul : 0x10000ul))
			return 0;
		i += len;
	}
	return 1;
}

/* Pushes one piece; checks that what comes out is whole UTF-8. */
static int push(struct detok *d, const char *piece, size_t n, struct text *t)
{
	char out[DETOK_OUT_MAX(64)];
	size_t len = 12345;
	int rc;

	ck_assert_uint_le(n, 64);
	rc = detok_push(d, piece, n, out, sizeof(out), &len);
	ck_assert_int_ge(rc, 0);
	ck_assert_uint_le(len, sizeof(out));
	ck_assert_msg(valid_utf8(out, len), "push wrote a partial or invalid sequence");
	memcpy(t->s + t->len, out, len);
	t->len += len;
	t->s[t->len] = '\0';
	return rc;
}

static int push_str(struct detok *d, const char *piece, struct text *t)
{
	return push(d, piece, strlen(piece), t);
}

static int flush(struct detok *d, struct text *t)
{
	char out[DETOK_OUT_MAX(0)];
	size_t len = 12345;
	int rc = detok_flush(d, out, sizeof(out), &len);

	ck_assert_int_ge(rc, 0);
	ck_assert_msg(valid_utf8(out, len), "flush wrote invalid UTF-8");
	memcpy(t->s + t->len, out, len);
	t->len += len;
	t->s[t->len] = '\0';
	return rc;
}

static void init(struct detok *d, const char *const *stops, size_t n)
{
	char err[EMBER_ERR_MAX] = "";

	ck_assert_msg(detok_init(d, stops, n, err) == 0, "detok_init: %s", err);
}

START_TEST(multibyte_sequences_split_anywhere_come_out_whole)
{
	static const char text[] = "a\xc3\xa9z\xe2\x82\xac!\xf0\x9f\x98\x80\xc3\xb1\xe4\xb8\xad";
	size_t n = sizeof(text) - 1, i, j;
	struct detok d;

	/* Three pieces, cut at every pair of points. */
	for (i = 0; i <= n; i++) {
		for (j = i; j <= n; j++) {
			struct text t = {.len = 0};

			init(&d, NULL, 0);
			ck_assert_int_eq(push(&d, text, i, &t), DETOK_CONTINUE);
			ck_assert_int_eq(push(&d, text + i, j - i, &t), DETOK_CONTINUE);
			ck_assert_int_eq(push(&d, text + j, n - j, &t), DETOK_CONTINUE);
			ck_assert_int_eq(flush(&d, &t), DETOK_CONTINUE);
			ck_assert_uint_eq(t.len, n);
			ck_assert_int_eq(memcmp(t.s, text, n), 0);
		}
	}
}
END_TEST

START_TEST(incomplete_sequence_is_held_until_complete)
{
	static const char *const seqs[3] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
	struct detok d;
	size_t k, b;

	for (k = 0; k < 3; k++) {
		size_t n = strlen(seqs[k]);
		struct text t = {.len = 0};

		init(&d, NULL, 0);
		for (b = 0; b + 1 < n; b++) {
			push(&d, seqs[k] + b, 1, &t);
			ck_assert_uint_eq(t.len, 0);
		}
		push(&d, seqs[k] + n - 1, 1, &t);
		ck_assert_str_eq(t.s, seqs[k]);
	}
}
END_TEST

START_TEST(invalid_bytes_become_replacement_characters)
{
	static const struct {
		const char *in[3];
		const char *want;
	} cases[] = {
		{{"\xff", NULL}, FFFD},
		{{"a\x80" "b", NULL}, "a" FFFD "b"},
		{{"\xe2\x82", "A", NULL}, FFFD "A"},            /* truncated, then ASCII */
		{{"\xe2", "(", NULL}, FFFD "("},                /* lead, bad continuation */
		{{"\xf0\x9f\x98", "x", NULL}, FFFD "x"},        /* one per maximal subpart */
		{{"\xed\xa0\x80", NULL}, FFFD FFFD FFFD},       /* a surrogate */
		{{"\xc0\xaf", NULL}, FFFD FFFD},                /* overlong */
		{{"\xf4\x90\x80\x80", NULL}, FFFD FFFD FFFD FFFD}, /* past U+10FFFF */
		{{"\xe0\x80", NULL}, FFFD FFFD},                /* overlong 3-byte */
		{{"\xc3", "\xc3\xa9", NULL}, FFFD "\xc3\xa9"},  /* lead interrupted by lead */
		{{"ok\xe2\x82", NULL}, "ok" FFFD},              /* truncated at the end: flush */
	};
	size_t i, p;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct detok d;
		struct text t = {.len = 0};

		init(&d, NULL, 0);
		for (p = 0; p < 3 && cases[i].in[p] != NULL; p++)
			push_str(&d, cases[i].in[p], &t);
		flush(&d, &t);
		ck_assert_msg(strcmp(t.s, cases[i].want) == 0, "case %zu", i);
	}
}
END_TEST

START_TEST(stop_inside_one_piece_ends_the_text_before_it)
{
	static const char *const stops[1] = {"STOP"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "hello", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, " worldSTOPmore", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "hello world");
	ck_assert_int_eq(detok_stop_index(&d), 0);
	/* the stream is over */
	ck_assert_int_eq(push_str(&d, "again", &t), DETOK_STOP);
	ck_assert_int_eq(flush(&d, &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "hello world");
}
END_TEST

START_TEST(stop_across_two_and_three_pieces)
{
	static const char *const stops[1] = {"STOP"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "hello ST", &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "hello "); /* "ST" held */
	ck_assert_int_eq(push_str(&d, "OP more", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "hello ");

	t.len = 0;
	t.s[0] = '\0';
	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "x S", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, "T", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, "OPy", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "x ");
}
END_TEST

START_TEST(partial_match_is_released_once_it_fails)
{
	static const char *const stops[1] = {"STOP"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	push_str(&d, "ST", &t);
	ck_assert_uint_eq(t.len, 0);
	push_str(&d, "O", &t);
	ck_assert_uint_eq(t.len, 0);
	ck_assert_int_eq(push_str(&d, "RY", &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "STORY"); /* released at once, not at flush */
	ck_assert_int_eq(flush(&d, &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "STORY");
}
END_TEST

START_TEST(stop_at_the_very_start)
{
	static const char *const stops[1] = {"<end>"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "<end>", &t), DETOK_STOP);
	ck_assert_uint_eq(t.len, 0);
	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "<e", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, "nd>tail", &t), DETOK_STOP);
	ck_assert_uint_eq(t.len, 0);
}
END_TEST

/* Feeds `text` one byte per piece; returns the final status. */
static int feed_bytes(struct detok *d, const char *text, struct text *t)
{
	int rc = DETOK_CONTINUE;

	for (; *text != '\0' && rc == DETOK_CONTINUE; text++)
		rc = push(d, text, 1, t);
	return rc;
}

START_TEST(overlapping_candidates_are_all_tried)
{
	static const struct {
		const char *stop, *text, *want;
	} cases[] = {
		{"abab", "ababab", ""},
		{"abab", "aababab", "a"},
		{"aab", "aaab", "a"},
		{"abac", "ababac", "ab"},
		{"aaa", "aa-aaa", "aa-"},
		{"abcabd", "abcabcabd", "abc"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *stops[1] = {cases[i].stop};
		struct detok d;
		struct text t = {.len = 0};

		init(&d, stops, 1);
		ck_assert_int_eq(feed_bytes(&d, cases[i].text, &t), DETOK_STOP);
		ck_assert_msg(strcmp(t.s, cases[i].want) == 0, "case %zu: got '%s'", i, t.s);
		/* and as one piece */
		t.len = 0;
		t.s[0] = '\0';
		init(&d, stops, 1);
		ck_assert_int_eq(push_str(&d, cases[i].text, &t), DETOK_STOP);
		ck_assert_msg(strcmp(t.s, cases[i].want) == 0, "case %zu whole: got '%s'", i, t.s);
	}
}
END_TEST

START_TEST(several_stop_strings)
{
	static const char *const chat[3] = {"\n\n", "User:", "###"};
	static const char *const nested[2] = {"abcd", "bc"};
	static const char *const same_end[2] = {"bc", "abc"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, chat, 3);
	ck_assert_int_eq(push_str(&d, "Hi\nUs", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, "er: x", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "Hi\n");
	ck_assert_int_eq(detok_stop_index(&d), 1);
	/* the one completed first wins */
	t.len = 0;
	init(&d, nested, 2);
	ck_assert_int_eq(feed_bytes(&d, "abcd", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "a");
	ck_assert_int_eq(detok_stop_index(&d), 1);
	/* completed together: the one starting first */
	t.len = 0;
	init(&d, same_end, 2);
	ck_assert_int_eq(push_str(&d, "xabc", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "x");
	ck_assert_int_eq(detok_stop_index(&d), 1);
}
END_TEST

START_TEST(flush_releases_a_pending_partial_stop)
{
	static const char *const stops[2] = {"STOP", "\xc3\xa9!"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 2);
	ck_assert_int_eq(push_str(&d, "Hello ST", &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "Hello ");
	ck_assert_int_eq(push_str(&d, "\xc3", &t), DETOK_CONTINUE);  /* "ST" released now */
	ck_assert_str_eq(t.s, "Hello ");                            /* ...only once é is whole */
	ck_assert_int_eq(push_str(&d, "\xa9", &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "Hello ST");
	ck_assert_int_eq(flush(&d, &t), DETOK_CONTINUE);
	ck_assert_str_eq(t.s, "Hello ST\xc3\xa9");
	ck_assert_int_eq(detok_stop_index(&d), -1);
}
END_TEST

START_TEST(multibyte_stop_split_inside_a_character)
{
	static const char *const stops[1] = {"\xc3\xa9!"};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	push_str(&d, "caf", &t);
	push_str(&d, "\xc3", &t);
	ck_assert_int_eq(push_str(&d, "\xa9!", &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "caf");
}
END_TEST

START_TEST(replacement_character_can_complete_a_stop)
{
	static const char *const stops[1] = {"x" FFFD};
	struct detok d;
	struct text t = {.len = 0};

	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "ax\xe2", &t), DETOK_CONTINUE);
	ck_assert_int_eq(push_str(&d, "Ab", &t), DETOK_STOP); /* nothing after the stop */
	ck_assert_str_eq(t.s, "a");
	t.len = 0;
	init(&d, stops, 1);
	ck_assert_int_eq(push_str(&d, "ax\xe2\x82", &t), DETOK_CONTINUE);
	ck_assert_int_eq(flush(&d, &t), DETOK_STOP);
	ck_assert_str_eq(t.s, "a");
}
END_TEST

START_TEST(long_stop_prefix_stays_within_the_fixed_hold)
{
	char stop[DETOK_MAX_STOP_LEN + 1];
	const char *stops[1] = {stop};
	char piece[7];
	struct detok d;
	struct text t = {.len = 0};
	int i;

	memset(stop, 'a', DETOK_MAX_STOP_LEN - 1);
	stop[DETOK_MAX_STOP_LEN - 1] = 'b';
	stop[DETOK_MAX_STOP_LEN] = '\0';
	memset(piece, 'a', sizeof(piece));
	init(&d, stops, 1);
	for (i = 0; i < 140; i++) /* 980 'a' */
		ck_assert_int_eq(push(&d, piece, sizeof(piece), &t), DETOK_CONTINUE);
	ck_assert_uint_eq(t.len, 980 - (DETOK_MAX_STOP_LEN - 1));
	ck_assert_int_eq(push_str(&d, "b", &t), DETOK_STOP);
	ck_assert_uint_eq(t.len, 980 - (DETOK_MAX_STOP_LEN - 1));
}
END_TEST

/* The reference: stop at the earliest end of any occurrence; among equal
 * ends, the earliest start. Returns the length of the text kept. */
static size_t reference_cut(const char *text, size_t n, const char *const *stops, size_t n_stops)
{
	size_t end, k;

	for (end = 1; end <= n; end++) {
		size_t best = n + 1;

		for (k = 0; k < n_stops; k++) {
			size_t len = strlen(stops[k]);

			if (len <= end && memcmp(text + end - len, stops[k], len) == 0 &&
			    end - len < best)
				best = end - len;
		}
		if (best <= n)
			return best;
	}
	return n;
}

START_TEST(random_pieces_agree_with_a_whole_text_search)
{
	uint32_t rng = 12345;
	int trial;

#define NEXT() (rng = rng * 1103515245u + 12345u, (rng >> 16) & 0x7fff)
	for (trial = 0; trial < 3000; trial++) {
		char text[200], stop_buf[4][8];
		const char *stops[4];
		size_t n = NEXT() % 120, n_stops = NEXT() % 5, i, want;
		struct detok d;
		struct text t = {.len = 0};
		int rc = DETOK_CONTINUE;

		for (i = 0; i < n; i++)
			text[i] = "abc"[NEXT() % 3];
		text[n] = '\0';
		for (i = 0; i < n_stops; i++) {
			size_t len = 1 + NEXT() % 6, j;

			for (j = 0; j < len; j++)
				stop_buf[i][j] = "abc"[NEXT() % 3];
			stop_buf[i][len] = '\0';
			stops[i] = stop_buf[i];
		}
		want = reference_cut(text, n, stops, n_stops);
		init(&d, stops, n_stops);
		for (i = 0; i < n && rc == DETOK_CONTINUE;) {
			size_t len = NEXT() % 5;

			if (len > n - i)
				len = n - i;
			rc = push(&d, text + i, len, &t);
			i += len;
		}
		if (rc == DETOK_CONTINUE)
			rc = flush(&d, &t);
		ck_assert_int_eq(rc, want < n ? DETOK_STOP : DETOK_CONTINUE);
		ck_assert_uint_eq(t.len, want);
		ck_assert_int_eq(memcmp(t.s, text, want), 0);
	}
#undef NEXT
}
END_TEST

START_TEST(random_bytes_give_valid_utf8_within_the_bound)
{
	/* Mostly bytes that start, continue or break multi-byte sequences;
	 * the output buffer is exactly DETOK_OUT_MAX(len) on the heap, so an
	 * overrun shows under ASan. */
	static const unsigned char alphabet[] = {'a', 0x80, 0xbf, 0xc3, 0xa9, 0xe2, 0x82, 0xac,
						 0xf0, 0x9f, 0xed, 0xa0, 0xff, 0xc0, 0xf4, 0x90};
	static const char *const stops[2] = {"a\xc3\xa9" "a", FFFD FFFD "a"};
	uint32_t rng = 777;
	int trial;

	for (trial = 0; trial < 2000; trial++) {
		struct detok d;
		int p, rc = DETOK_CONTINUE;

		init(&d, stops, (size_t)(trial % 3));
		for (p = 0; p < 20 && rc == DETOK_CONTINUE; p++) {
			unsigned char piece[16];
			size_t len = (rng = rng * 1103515245u + 12345u) >> 28, i, out_len;
			char *out = malloc(DETOK_OUT_MAX(len));

			ck_assert_ptr_nonnull(out);
			for (i = 0; i < len; i++)
				piece[i] = alphabet[(rng = rng * 1103515245u + 12345u) >> 28];
			rc = detok_push(&d, (const char *)piece, len, out, DETOK_OUT_MAX(len), &out_len);
			ck_assert_int_ge(rc, 0);
			ck_assert(valid_utf8(out, out_len));
			free(out);
		}
		if (rc == DETOK_CONTINUE) {
			char *out = malloc(DETOK_OUT_MAX(0));
			size_t out_len;

			ck_assert_ptr_nonnull(out);
			ck_assert_int_ge(detok_flush(&d, out, DETOK_OUT_MAX(0), &out_len), 0);
			ck_assert(valid_utf8(out, out_len));
			free(out);
		}
	}
}
END_TEST

START_TEST(init_rejects_bad_stop_lists)
{
	char err[EMBER_ERR_MAX];
	char longest[DETOK_MAX_STOP_LEN + 2];
	static const char *const five[5] = {"a", "b", "c", "d", "e"};
	static const char *const empty[1] = {""};
	static const char *const broken[1] = {"ab\xe2\x82"};
	const char *too_long[1] = {longest};
	struct detok d;

	ck_assert_int_eq(detok_init(&d, five, 5, err), EMBER_EINVAL);
	ck_assert_int_eq(detok_init(&d, five, 4, err), 0);
	ck_assert_int_eq(detok_init(&d, empty, 1, err), EMBER_EINVAL);
	ck_assert_int_eq(detok_init(&d, broken, 1, err), EMBER_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "UTF-8"));
	memset(longest, 'x', DETOK_MAX_STOP_LEN + 1);
	longest[DETOK_MAX_STOP_LEN + 1] = '\0';
	ck_assert_int_eq(detok_init(&d, too_long, 1, err), EMBER_EINVAL);
	longest[DETOK_MAX_STOP_LEN] = '\0';
	ck_assert_int_eq(detok_init(&d, too_long, 1, err), 0);
}
END_TEST

START_TEST(small_output_buffer_is_refused_without_consuming)
{
	static const char *const stops[1] = {"zz"};
	struct detok d;
	char out[DETOK_OUT_MAX(3)];
	size_t len;

	init(&d, stops, 1);
	ck_assert_int_eq(detok_push(&d, "abc", 3, out, DETOK_OUT_MAX(3) - 1, &len), EMBER_EINVAL);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(detok_push(&d, "abc", 3, out, sizeof(out), &len), DETOK_CONTINUE);
	ck_assert_uint_eq(len, 3);
	ck_assert_int_eq(memcmp(out, "abc", 3), 0);
	ck_assert_int_eq(detok_flush(&d, out, DETOK_OUT_MAX(0) - 1, &len), EMBER_EINVAL);
}
END_TEST

Suite *suite_detok(void)
{
	Suite *s = suite_create("detok");
	TCase *utf8 = tcase_create("utf8");
	TCase *stop = tcase_create("stop");

	tcase_add_test(utf8, multibyte_sequences_split_anywhere_come_out_whole);
	tcase_add_test(utf8, incomplete_sequence_is_held_until_complete);
	tcase_add_test(utf8, invalid_bytes_become_replacement_characters);
	tcase_add_test(stop, stop_inside_one_piece_ends_the_text_before_it);
	tcase_add_test(stop, stop_across_two_and_three_pieces);
	tcase_add_test(stop, partial_match_is_released_once_it_fails);
	tcase_add_test(stop, stop_at_the_very_start);
	tcase_add_test(stop, overlapping_candidates_are_all_tried);
	tcase_add_test(stop, several_stop_strings);
	tcase_add_test(stop, flush_releases_a_pending_partial_stop);
	tcase_add_test(stop, multibyte_stop_split_inside_a_character);
	tcase_add_test(stop, replacement_character_can_complete_a_stop);
	tcase_add_test(stop, long_stop_prefix_stays_within_the_fixed_hold);
	tcase_add_test(stop, random_pieces_agree_with_a_whole_text_search);
	tcase_add_test(stop, random_bytes_give_valid_utf8_within_the_bound);
	tcase_add_test(stop, init_rejects_bad_stop_lists);
	tcase_add_test(stop, small_output_buffer_is_refused_without_consuming);
	suite_add_tcase(s, utf8);
	suite_add_tcase(s, stop);
	return s;
}
