/* main.c - emberd's entry point. */
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "ember.h"

static void print_version(void)
{
	struct cpu_features f;
	char buf[128];

	cpu_detect(&f);
	printf("emberd %s\n", EMBER_VERSION);
	printf("cpu: %s\n", cpu_describe(&f, buf, sizeof(buf)));
	printf("kernels: %s\n", cpu_level_name(cpu_select_level(&f)));
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		print_version();
		return 0;
	}
	fprintf(stderr, "usage: emberd --version\n");
	return 2;
}
