/* test_config.c - the settings table: parsing, precedence, errors, and the
 * shipped example conf. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ember.h"

START_TEST(defaults_come_from_the_table)
{
	struct config c;

	config_init(&c);
	ck_assert_str_eq(c.host, "127.0.0.1");
	ck_assert_int_eq(c.port, 8080);
	ck_assert_int_eq(c.max_body, 1048576);
	ck_assert_int_eq(c.workers, 1);
	ck_assert_int_eq(c.log_level, LOG_INFO);
	ck_assert_ptr_null(c.model);
	ck_assert_ptr_null(c.api_key);
	ck_assert(!c.no_model);
	config_free(&c);
}
END_TEST

/* One row per key form: text in, field out, or an error code. */
static const struct {
	const char *key, *value;
	int rc;
} set_rows[] = {
	{"port", "9000", 0},
	{"port", "0", EMBER_ERANGE},
	{"port", "65536", EMBER_ERANGE},
	{"port", "80x", EMBER_EINVAL},
	{"port", "", EMBER_EINVAL},
	{"port", " 80", EMBER_EINVAL},
	{"port", "99999999999999999999999", EMBER_ERANGE},
	{"max_body", "1023", EMBER_ERANGE},
	{"workers", "-1", EMBER_ERANGE},
	{"log_level", "debug", 0},
	{"log_level", "loud", EMBER_EINVAL},
	{"no_model", "yes", 0},
	{"no_model", "maybe", EMBER_EINVAL},
	{"api_key", "a,b", 0},
	{"colour", "red", EMBER_ENOTFOUND},
};

START_TEST(set_validates_type_and_bounds)
{
	char err[EMBER_ERR_MAX] = "";
	struct config c;
	int rc;

	config_init(&c);
	rc = config_set(&c, set_rows[_i].key, set_rows[_i].value, err);
	ck_assert_msg(rc == set_rows[_i].rc, "%s=%s: got %d want %d (%s)",
		      set_rows[_i].key, set_rows[_i].value, rc,
		      set_rows[_i].rc, err);
	if (rc != 0)
		ck_assert_msg(strstr(err, set_rows[_i].key) != NULL,
			      "error names the key: %s", err);
	config_free(&c);
}
END_TEST

START_TEST(file_text_sets_keys_and_skips_comments)
{
	char err[EMBER_ERR_MAX] = "";
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_parse_text(&c,
					   "# a comment\n\n  port = 9001  \n"
					   "model=/m/x.gguf\r\nlog_level = warn\n"
					   "api_key =\n",
					   "t.conf", err),
			 0);
	ck_assert_int_eq(c.port, 9001);
	ck_assert_str_eq(c.model, "/m/x.gguf");
	ck_assert_int_eq(c.log_level, LOG_WARN);
	ck_assert_ptr_null(c.api_key);
	config_free(&c);
}
END_TEST

START_TEST(file_errors_name_the_line)
{
	char err[EMBER_ERR_MAX] = "";
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_parse_text(&c, "port = 1\njunk\n", "t.conf", err),
			 EMBER_EFORMAT);
	ck_assert_str_eq(err, "t.conf:2: expected 'key = value'");
	ck_assert_int_eq(config_parse_text(&c, "\n\n\nport = -3\n", "t.conf", err),
			 EMBER_ERANGE);
	ck_assert_msg(strncmp(err, "t.conf:4: port", 14) == 0, "%s", err);
	ck_assert_int_eq(config_parse_text(&c, "nope = 3\n", "t.conf", err),
			 EMBER_ENOTFOUND);
	config_free(&c);
}
END_TEST

START_TEST(precedence_is_defaults_file_env_flags)
{
	char path[] = "/tmp/ember_test_conf_XXXXXX", arg[64];
	char err[EMBER_ERR_MAX] = "";
	char *envp[4], envc[96];
	char *argv[4];
	struct config c;
	FILE *f;
	int fd;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	fputs("port = 1111\nworkers = 3\nslots = 5\nno_model = true\n", f);
	fclose(f);
	snprintf(envc, sizeof(envc), "EMBER_CONFIG=%s", path);
	envp[0] = envc;
	envp[1] = "EMBER_WORKERS=7";  /* env beats file */
	envp[2] = "EMBER_SLOTS=9";    /* flag beats env */
	envp[3] = NULL;
	argv[0] = "emberd";
	snprintf(arg, sizeof(arg), "--slots=11");
	argv[1] = arg;
	argv[2] = "--max-tokens=100";  /* dashes spell underscores */
	argv[3] = NULL;
	config_init(&c);
	ck_assert_msg(config_load(&c, 3, argv, envp, err) == 0, "%s", err);
	ck_assert_int_eq(c.port, 1111);
	ck_assert_int_eq(c.workers, 7);
	ck_assert_int_eq(c.slots, 11);
	ck_assert_int_eq(c.max_tokens, 100);
	ck_assert(c.no_model);
	config_free(&c);
	unlink(path);
}
END_TEST

START_TEST(unknown_flags_and_bad_env_are_errors)
{
	char err[EMBER_ERR_MAX] = "";
	char *argv[] = {"emberd", "--prot=80", NULL};
	char *argv2[] = {"emberd", "--port", NULL};
	char *argv3[] = {"emberd", "stray", NULL};
	char *envp[] = {"EMBER_PORT=http", NULL};
	char *envp_other[] = {"EMBER_CPU=scalar", "PATH=/bin", NULL};
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_apply_args(&c, 2, argv, err), EMBER_ENOTFOUND);
	ck_assert_msg(strstr(err, "--prot=80") != NULL, "%s", err);
	ck_assert_int_eq(config_apply_args(&c, 2, argv2, err), EMBER_EINVAL);
	ck_assert_int_eq(config_apply_args(&c, 2, argv3, err), EMBER_EINVAL);
	ck_assert_int_eq(config_apply_env(&c, envp, err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, "EMBER_PORT") != NULL, "%s", err);
	ck_assert_int_eq(config_apply_env(&c, envp_other, err), 0);
	config_free(&c);
}
END_TEST

START_TEST(a_model_is_required_unless_no_model)
{
	char err[EMBER_ERR_MAX] = "";
	char *argv[] = {"emberd", NULL};
	char *argv_nm[] = {"emberd", "--no-model", NULL};
	char *envp[] = {NULL};
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_load(&c, 1, argv, envp, err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, "model") != NULL, "%s", err);
	ck_assert_int_eq(config_load(&c, 2, argv_nm, envp, err), 0);
	config_free(&c);
}
END_TEST

START_TEST(replica_id_is_validated)
{
	char err[EMBER_ERR_MAX] = "";
	char *envp[] = {NULL};
	char *good[] = {"emberd", "--no-model", "--replica_id=r_2", NULL};
	char *dash[] = {"emberd", "--no-model", "--replica_id=r-2", NULL};
	char *slash[] = {"emberd", "--no-model", "--replica_id=a/b", NULL};
	char *lng[] = {"emberd", "--no-model",
		       "--replica_id=abcdefghijklmnopq", NULL};
	struct config c;

	config_init(&c);
	ck_assert_ptr_null(c.replica_id);
	ck_assert_int_eq(config_load(&c, 3, good, envp, err), 0);
	ck_assert_str_eq(c.replica_id, "r_2");
	config_free(&c);
	/* '-' would make "sess-<replica>-N" ambiguous; '/' would break the
	 * balancer's path match; 17 characters do not fit the id buffers. */
	config_init(&c);
	ck_assert_int_eq(config_load(&c, 3, dash, envp, err), EMBER_EINVAL);
	ck_assert_msg(strstr(err, "replica_id") != NULL, "%s", err);
	config_free(&c);
	config_init(&c);
	ck_assert_int_eq(config_load(&c, 3, slash, envp, err), EMBER_EINVAL);
	config_free(&c);
	config_init(&c);
	ck_assert_int_eq(config_load(&c, 3, lng, envp, err), EMBER_EINVAL);
	config_free(&c);
}
END_TEST

START_TEST(full_status_is_429_or_503)
{
	char err[EMBER_ERR_MAX] = "";
	struct config c;

	config_init(&c);
	ck_assert_int_eq(c.full_status, CONFIG_FULL_429);
	ck_assert_int_eq(config_set(&c, "full_status", "503", err), 0);
	ck_assert_int_eq(c.full_status, CONFIG_FULL_503);
	ck_assert_int_eq(config_set(&c, "full_status", "500", err),
			 EMBER_EINVAL);
	ck_assert_int_eq(c.full_status, CONFIG_FULL_503);
	config_free(&c);
}
END_TEST

START_TEST(missing_config_file_is_an_error)
{
	char err[EMBER_ERR_MAX] = "";
	char *argv[] = {"emberd", "--config=/nonexistent/e.conf", "--no-model",
			NULL};
	char *envp[] = {NULL};
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_load(&c, 3, argv, envp, err), EMBER_EIO);
	ck_assert_msg(strstr(err, "/nonexistent/e.conf") != NULL, "%s", err);
	config_free(&c);
}
END_TEST

static char *slurp_stream(void (*write)(FILE *), size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	write(f);
	fclose(f);
	return buf;
}

START_TEST(shipped_conf_equals_generated)
{
	size_t glen, flen;
	char *gen = slurp_stream(config_write_example, &glen), *file;
	FILE *f = fopen("conf/emberd.conf", "rb");

	ck_assert_msg(f != NULL, "conf/emberd.conf missing (run from repo root)");
	file = calloc(1, glen + 2);
	flen = fread(file, 1, glen + 1, f);
	fclose(f);
	ck_assert_msg(flen == glen && memcmp(gen, file, glen) == 0,
		      "conf/emberd.conf is stale: regenerate with "
		      "build/emberd --print-config > conf/emberd.conf");
	free(gen);
	free(file);
}
END_TEST

START_TEST(generated_conf_parses_back_to_defaults)
{
	char err[EMBER_ERR_MAX] = "";
	size_t len;
	char *gen = slurp_stream(config_write_example, &len);
	char *help = slurp_stream(config_write_help, &len);
	struct config c;

	config_init(&c);
	ck_assert_int_eq(config_parse_text(&c, gen, "gen", err), 0);
	ck_assert_int_eq(c.port, 8080);
	/* every visible key is documented in both */
	ck_assert_ptr_nonnull(strstr(gen, "#kv_cache_mb = 0"));
	ck_assert_ptr_nonnull(strstr(help, "--drain_timeout=30"));
	ck_assert_ptr_null(strstr(gen, "no_model"));
	config_free(&c);
	free(gen);
	free(help);
}
END_TEST

Suite *suite_config(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, defaults_come_from_the_table);
	tcase_add_loop_test(tc, set_validates_type_and_bounds, 0,
			    sizeof(set_rows) / sizeof(set_rows[0]));
	tcase_add_test(tc, file_text_sets_keys_and_skips_comments);
	tcase_add_test(tc, file_errors_name_the_line);
	tcase_add_test(tc, precedence_is_defaults_file_env_flags);
	tcase_add_test(tc, unknown_flags_and_bad_env_are_errors);
	tcase_add_test(tc, a_model_is_required_unless_no_model);
	tcase_add_test(tc, replica_id_is_validated);
	tcase_add_test(tc, full_status_is_429_or_503);
	tcase_add_test(tc, missing_config_file_is_an_error);
	tcase_add_test(tc, shipped_conf_equals_generated);
	tcase_add_test(tc, generated_conf_parses_back_to_defaults);
	suite_add_tcase(s, tc);
	return s;
}
