/* test_metrics.c - Prometheus text of counters, histograms and gauges. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

START_TEST(counters_histograms_and_gauges_render)
{
	struct metrics m;
	size_t len;
	char *t;

	metrics_init(&m);
	metrics_count_request(&m, "health", 200, 0.001);
	metrics_count_request(&m, "health", 200, 0.002);
	metrics_count_request(&m, "chat_completions", 400, 0.2);
	metrics_count_generation(&m, 12, 40, 0.03);
	metrics_set_queue_depth(&m, 3);
	metrics_set_kv_cache_bytes(&m, 1 << 20);
	t = metrics_render(&m, &len);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(strlen(t), len);
	ck_assert_ptr_nonnull(strstr(t, "ember_requests_total{endpoint=\"health\",status=\"200\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_requests_total{endpoint=\"chat_completions\",status=\"400\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_prompt_tokens_total 12\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_generated_tokens_total 40\n"));
	/* cumulative buckets: 0.001 and 0.002 fall under 0.005 */
	ck_assert_ptr_nonnull(strstr(t, "ember_request_duration_seconds_bucket{le=\"0.005\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_request_duration_seconds_bucket{le=\"0.25\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_request_duration_seconds_bucket{le=\"+Inf\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_request_duration_seconds_count 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_queue_depth 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_kv_cache_bytes 1048576\n"));
	ck_assert_ptr_nonnull(strstr(t, "# TYPE ember_slots_busy gauge\n"));
	free(t);
}
END_TEST

START_TEST(the_step_account_renders)
{
	struct engine_stats st = {0};
	struct metrics m;
	char *t;

	metrics_init(&m);
	st.prefill_s = 0.5;
	st.decode_s = 2.25;
	st.between_s = 0.125;
	st.decode_steps[8] = 57;
	st.decode_steps_s[8] = 2.0;
	st.decode_steps_cpu_s[8] = 4.0;
	st.mixed_cpu_s = 1.5;
	st.decode_steps[ENGINE_STATS_BATCH] = 3;
	st.partial_steps = 4;
	st.left_out = 10;
	st.prefill_steps = 7;
	metrics_set_engine_account(&m, &st);
	t = metrics_render(&m, NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_step_seconds_total{phase=\"prefill\"} 0.500000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_step_seconds_total{phase=\"decode\"} 2.250000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_step_seconds_total{phase=\"between\"} 0.125000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_decode_steps_total{batch=\"8\"} 57\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_decode_step_seconds_total{batch=\"8\"} 2.000000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_decode_steps_total{batch=\"16\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_decode_step_cpu_seconds_total{batch=\"8\"} 4.000000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_step_cpu_seconds_total{phase=\"mixed\"} 1.500000\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_partial_steps_total 4\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_left_out_total 10\n"));
	ck_assert_ptr_nonnull(strstr(t, "ember_engine_prefill_steps_total 7\n"));
	free(t);
}
END_TEST

START_TEST(series_are_bounded)
{
	static const char *names[] = {"a", "b", "c", "d"};
	struct metrics m;
	int i;

	metrics_init(&m);
	for (i = 0; i < 1000; i++)
		metrics_count_request(&m, names[i % 4], 100 + i, 0.01);
	ck_assert_uint_eq(m.n_series, METRICS_MAX_SERIES);
	ck_assert_str_eq(m.series[METRICS_MAX_SERIES - 1].endpoint, "other");
}
END_TEST

Suite *suite_metrics(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, counters_histograms_and_gauges_render);
	tcase_add_test(tc, series_are_bounded);
	tcase_add_test(tc, the_step_account_renders);
	suite_add_tcase(s, tc);
	return s;
}
