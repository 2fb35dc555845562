/* test_api_error.c - the one table from engine error codes to HTTP
 * answers (api_error_from_code) and the not-loaded answer. */
#include <check.h>
#include <string.h>

#include "api_error.h"
#include "ember.h"

START_TEST(each_code_gets_its_status_type_and_param_rule)
{
	static const struct {
		int code, status;
		enum api_error_type type;
		const char *name;
		int retry;
		bool keeps_param;
	} want[] = {
		{EMBER_EINVAL, 400, API_ERR_INVALID_REQUEST, "invalid_value", 0, true},
		{EMBER_ERANGE, 400, API_ERR_INVALID_REQUEST, "invalid_value", 0, true},
		{EMBER_ECONTEXT, 400, API_ERR_INVALID_REQUEST, "context_length_exceeded", 0, true},
		{EMBER_ENOTFOUND, 404, API_ERR_NOT_FOUND, "not_found", 0, true},
		{EMBER_EBUSY, 409, API_ERR_INVALID_REQUEST, "busy", 0, false},
		{EMBER_EFULL, 429, API_ERR_RATE_LIMIT, "queue_full", 1, false},
		{EMBER_ECANCELED, 503, API_ERR_SERVER, "cancelled", 0, false},
		{EMBER_ENOMEM, 500, API_ERR_SERVER, "", 0, false},
		{EMBER_EIO, 500, API_ERR_SERVER, "", 0, false},
	};
	struct api_error e;
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		api_error_from_code(&e, want[i].code, "p", "detail %d", want[i].code);
		ck_assert_int_eq(e.status, want[i].status);
		ck_assert_int_eq(e.type, want[i].type);
		ck_assert_str_eq(e.code, want[i].name);
		ck_assert_int_eq(e.retry_after, want[i].retry);
		ck_assert_str_eq(e.param, want[i].keeps_param ? "p" : "");
		ck_assert_ptr_nonnull(strstr(e.message, "detail"));
	}
}
END_TEST

START_TEST(oom_is_a_500_server_error_and_returns_enomem)
{
	struct api_error e, want;

	memset(&e, 0x5a, sizeof(e));
	ck_assert_int_eq(api_error_oom(&e), EMBER_ENOMEM);
	ck_assert_int_eq(e.status, 500);
	ck_assert_int_eq(e.type, API_ERR_SERVER);
	ck_assert_str_eq(e.message, "out of memory");
	ck_assert_str_eq(e.param, "");
	ck_assert_int_eq(e.retry_after, 0);
	/* the same answer the code table gives an EMBER_ENOMEM from the engine */
	api_error_from_code(&want, EMBER_ENOMEM, "p", "x");
	ck_assert_int_eq(e.status, want.status);
	ck_assert_int_eq(e.type, want.type);
	ck_assert_str_eq(e.code, want.code);
}
END_TEST

START_TEST(not_loaded_is_503_with_retry_only_while_loading)
{
	struct api_error e;

	api_error_not_loaded(&e, true);
	ck_assert_int_eq(e.status, 503);
	ck_assert_str_eq(e.code, "model_not_loaded");
	ck_assert_int_eq(e.retry_after, 5);
	api_error_not_loaded(&e, false);
	ck_assert_int_eq(e.retry_after, 0);
}
END_TEST

Suite *suite_api_error(void)
{
	Suite *s = suite_create("api_error");
	TCase *tc = tcase_create("api_error");

	tcase_add_test(tc, each_code_gets_its_status_type_and_param_rule);
	tcase_add_test(tc, not_loaded_is_503_with_retry_only_while_loading);
	tcase_add_test(tc, oom_is_a_500_server_error_and_returns_enomem);
	suite_add_tcase(s, tc);
	return s;
}
