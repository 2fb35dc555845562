/* test_router.c - route table matching. */
#include <check.h>
#include <string.h>

#include "router.h"

static const struct route table[] = {
	{"GET", "/health", NULL, "health"},
	{"POST", "/v1/chat/completions", NULL, "chat"},
	{"POST", "/v1/sessions", NULL, "sessions_new"},
	{"GET", "/v1/sessions/{id}", NULL, "session_get"},
	{"DELETE", "/v1/sessions/{id}", NULL, "session_delete"},
	{"POST", "/v1/sessions/{id}/generate", NULL, "session_generate"},
};

#define N (sizeof(table) / sizeof(table[0]))

static const struct {
	const char *method, *path;
	int status;
	const char *name;   /* matched route, or NULL */
	const char *allow;  /* expected Allow list */
} rows[] = {
	{"GET", "/health", 0, "health", "GET"},
	{"HEAD", "/health", 0, "health", "GET"},
	{"POST", "/health", 405, NULL, "GET"},
	{"GET", "/v1/chat/completions", 405, NULL, "POST"},
	{"GET", "/v1/sessions/abc", 0, "session_get", "GET, DELETE"},
	{"DELETE", "/v1/sessions/abc", 0, "session_delete", "GET, DELETE"},
	{"PUT", "/v1/sessions/abc", 405, NULL, "GET, DELETE"},
	{"POST", "/v1/sessions/abc/generate", 0, "session_generate", "POST"},
	{"GET", "/v1/sessions/", 404, NULL, ""},
	{"GET", "/v1/sessions/a/b", 404, NULL, ""},
	{"GET", "/health/", 404, NULL, ""},
	{"GET", "/Health", 404, NULL, ""},
	{"GET", "/", 404, NULL, ""},
	{"GET", "", 404, NULL, ""},
};

START_TEST(table_rows_match_as_documented)
{
	struct route_match m;
	int rc = router_match(table, N, rows[_i].method, rows[_i].path, &m);

	ck_assert_msg(rc == rows[_i].status, "%s %s: %d", rows[_i].method,
		      rows[_i].path, rc);
	ck_assert_int_eq(m.status, rc);
	if (rows[_i].name)
		ck_assert_str_eq(m.route->name, rows[_i].name);
	else
		ck_assert_ptr_null(m.route);
	ck_assert_str_eq(m.allow, rows[_i].allow);
}
END_TEST

START_TEST(params_are_captured)
{
	struct route_match m;
	char buf[16];

	ck_assert_int_eq(router_match(table, N, "POST",
				      "/v1/sessions/s-42/generate", &m), 0);
	ck_assert_uint_eq(m.n_params, 1);
	ck_assert_int_eq(router_param(&m, "id", buf, sizeof(buf)), 4);
	ck_assert_str_eq(buf, "s-42");
	ck_assert_int_eq(router_param(&m, "nope", buf, sizeof(buf)), -1);
	ck_assert_int_eq(router_param(&m, "id", buf, 4), -1); /* no room */
}
END_TEST

Suite *suite_router(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, table_rows_match_as_documented, 0,
			    sizeof(rows) / sizeof(rows[0]));
	tcase_add_test(tc, params_are_captured);
	suite_add_tcase(s, tc);
	return s;
}
