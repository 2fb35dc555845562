/*
 * check_main.c - runs every Check suite.
 *
 * Each tests/test_<name>.c defines `Suite *suite_<name>(void)`; the Makefile
 * generates suites.h (one SUITE(name) line per file). Usage:
 *   check_unit [SUITE...]   run all suites, or only the ones named
 * Check's own summary line ends the output; the exit status is 0 only if
 * every test passed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE(name) Suite *suite_##name(void);
#include "suites.h"
#undef SUITE

struct suite_entry {
	const char *name;
	Suite *(*make)(void);
};

static const struct suite_entry suites[] = {
#define SUITE(name) {#name, suite_##name},
#include "suites.h"
#undef SUITE
};

static int wanted(const char *name, int argc, char **argv)
{
	int i;

	if (argc < 2)
		return 1;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	SRunner *sr = NULL;
	size_t i;
	int failed;

	for (i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		if (!wanted(suites[i].name, argc, argv))
			continue;
		if (sr == NULL)
			sr = srunner_create(suites[i].make());
		else
			srunner_add_suite(sr, suites[i].make());
	}
	if (sr == NULL) {
		fprintf(stderr, "check_unit: no such suite\n");
		return 2;
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
