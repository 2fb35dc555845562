/* test_model_watch.c - the served model file changing on disk
 * (model_watch.h): size, mtime and path checks against the file as
 * opened. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember.h"
#include "model_watch.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/* A fresh file in a private directory; `dir` gets the directory. */
static void make_file(char *dir, char *path, size_t size)
{
	strcpy(dir, "/tmp/ember-mwXXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, size, "%s/m.gguf", dir);
	write_file(path, "0123456789abcdef");
}

static void remove_all(const char *dir, const char *path)
{
	char other[300];

	snprintf(other, sizeof(other), "%s.new", path);
	unlink(path);
	unlink(other);
	rmdir(dir);
}

START_TEST(unchanged_file_passes)
{
	char dir[64], path[256], err[EMBER_ERR_MAX] = "";
	struct model_watch w;

	make_file(dir, path, sizeof(path));
	ck_assert_int_eq(model_watch_open(&w, path, err), 0);
	ck_assert_int_eq(model_watch_check(&w, true, err), 0);
	ck_assert_int_eq(model_watch_check(&w, false, err), 0);
	model_watch_close(&w);
	model_watch_close(&w);
	/* closed: nothing to watch */
	ck_assert_int_eq(model_watch_check(&w, true, err), 0);
	remove_all(dir, path);
}
END_TEST

START_TEST(truncation_in_place_is_named)
{
	char dir[64], path[256], err[EMBER_ERR_MAX] = "";
	struct model_watch w;

	make_file(dir, path, sizeof(path));
	ck_assert_int_eq(model_watch_open(&w, path, err), 0);
	ck_assert_int_eq(truncate(path, 4), 0);
	ck_assert_int_eq(model_watch_check(&w, false, err), EMBER_EIO);
	ck_assert_msg(strstr(err, path) && strstr(err, "16 -> 4 bytes"), "%s", err);
	model_watch_close(&w);
	remove_all(dir, path);
}
END_TEST

START_TEST(same_size_rewrite_is_named)
{
	char dir[64], path[256], err[EMBER_ERR_MAX] = "";
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000, 0}};
	struct model_watch w;

	make_file(dir, path, sizeof(path));
	ck_assert_int_eq(model_watch_open(&w, path, err), 0);
	/* what `cp` over the file leaves: the same size, a new mtime */
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	ck_assert_int_eq(model_watch_check(&w, false, err), EMBER_EIO);
	ck_assert_msg(strstr(err, "modified in place"), "%s", err);
	model_watch_close(&w);
	remove_all(dir, path);
}
END_TEST

START_TEST(rename_over_is_harmless_after_load)
{
	char dir[64], path[256], other[300], err[EMBER_ERR_MAX] = "";
	struct model_watch w;

	make_file(dir, path, sizeof(path));
	snprintf(other, sizeof(other), "%s.new", path);
	ck_assert_int_eq(model_watch_open(&w, path, err), 0);
	write_file(other, "another model, another size");
	ck_assert_int_eq(rename(other, path), 0);
	/* The mapping keeps the old inode: serving on is right ... */
	ck_assert_int_eq(model_watch_check(&w, false, err), 0);
	/* ... but not while loading, when the engine may have opened the
	 * new one. */
	ck_assert_int_eq(model_watch_check(&w, true, err), EMBER_EIO);
	ck_assert_msg(strstr(err, "replaced"), "%s", err);
	model_watch_close(&w);
	remove_all(dir, path);
}
END_TEST

START_TEST(missing_file_is_an_error)
{
	char err[EMBER_ERR_MAX] = "";
	struct model_watch w;

	ck_assert_int_eq(model_watch_open(&w, "/nonexistent/m.gguf", err), EMBER_EIO);
	ck_assert_int_eq(w.fd, -1);
	ck_assert_msg(strstr(err, "/nonexistent/m.gguf"), "%s", err);
}
END_TEST

Suite *suite_model_watch(void)
{
	Suite *s = suite_create("model_watch");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, unchanged_file_passes);
	tcase_add_test(tc, truncation_in_place_is_named);
	tcase_add_test(tc, same_size_rewrite_is_named);
	tcase_add_test(tc, rename_over_is_harmless_after_load);
	tcase_add_test(tc, missing_file_is_an_error);
	suite_add_tcase(s, tc);
	return s;
}
