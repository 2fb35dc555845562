/* test_sse.c - SSE framing and the byte queue. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "sse.h"

static char *drain(struct sse_buf *b, char *out, size_t size)
{
	size_t n = sse_buf_read(b, out, size - 1);

	out[n] = '\0';
	return out;
}

START_TEST(event_is_data_line_and_blank_line)
{
	struct sse_buf b;
	char out[128];

	sse_buf_init(&b);
	ck_assert_int_eq(sse_buf_push_event(&b, "{\"a\":1}", 7), 0);
	ck_assert_int_eq(sse_buf_push_done(&b), 0);
	ck_assert_str_eq(drain(&b, out, sizeof(out)),
			 "data: {\"a\":1}\n\ndata: [DONE]\n\n");
	ck_assert_uint_eq(sse_buf_pending(&b), 0);
	sse_buf_free(&b);
}
END_TEST

START_TEST(line_breaks_become_separate_data_lines)
{
	struct sse_buf b;
	char out[128];

	sse_buf_init(&b);
	sse_buf_push_event(&b, "a\nb\r\nc", 6);
	ck_assert_str_eq(drain(&b, out, sizeof(out)),
			 "data: a\ndata: b\ndata: c\n\n");
	sse_buf_push_event(&b, "", 0);
	ck_assert_str_eq(drain(&b, out, sizeof(out)), "data: \n\n");
	sse_buf_push_comment(&b, "ping");
	ck_assert_str_eq(drain(&b, out, sizeof(out)), ": ping\n\n");
	sse_buf_free(&b);
}
END_TEST

START_TEST(partial_reads_keep_order_across_growth)
{
	char payload[1000], expect[64], got[8];
	struct sse_buf b;
	size_t i, n, total = 0;
	int ev = 0;

	memset(payload, 'x', sizeof(payload));
	sse_buf_init(&b);
	/* Interleave writes and small reads so the buffer both slides and
	 * grows; every byte must come out in order. */
	for (i = 0; i < 50; i++) {
		snprintf(expect, sizeof(expect), "%zu", i);
		sse_buf_push_event(&b, expect, strlen(expect));
		n = sse_buf_read(&b, got, 3);
		total += n;
	}
	sse_buf_push_event(&b, payload, sizeof(payload));
	while ((n = sse_buf_read(&b, got, sizeof(got))) > 0) {
		total += n;
		ev++;
	}
	/* 10 one-digit + 40 two-digit events, 8 framing bytes each */
	ck_assert_uint_eq(total, 10 * 9 + 40 * 10 + 1000 + 8);
	ck_assert_int_gt(ev, 0);
	ck_assert_uint_eq(sse_buf_pending(&b), 0);
	sse_buf_free(&b);
	sse_buf_free(NULL);
}
END_TEST

Suite *suite_sse(void)
{
	Suite *s = suite_create("sse");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, event_is_data_line_and_blank_line);
	tcase_add_test(tc, line_breaks_become_separate_data_lines);
	tcase_add_test(tc, partial_reads_keep_order_across_growth);
	suite_add_tcase(s, tc);
	return s;
}
