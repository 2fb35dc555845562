/*
 * main.c - emberd's entry point: the informational flags (--version,
 * --help, --print-config), the configuration (config.h: defaults < file <
 * environment < flags) and then the server loop (server.h). Only main()
 * exits; everything below returns errors.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "compute.h"
#include "cpu.h"
#include "kernels.h"
#include "ember.h"
#include "log.h"
#include "server.h"

extern char **environ;

static void print_version(void)
{
	struct cpu_features f;
	char buf[128], ops[KERN_DESCRIBE_MAX];

	cpu_detect(&f);
	printf("emberd %s\n", EMBER_VERSION);
	printf("cpu: %s\n", cpu_describe(&f, buf, sizeof(buf)));
	printf("kernels: %s\n", cpu_level_name(kern_init()));
	fputs(kern_describe(ops, sizeof(ops)), stdout);
	fputs(compute_devices_describe(ops, sizeof(ops)), stdout);
}

/* Informational flags win over everything else on the line. */
static int info_flag(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			print_version();
			return 1;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			config_write_help(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--print-config") == 0) {
			config_write_example(stdout);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	char err[EMBER_ERR_MAX];
	struct config cfg;
	struct logger log;
	int rc;

	if (info_flag(argc, argv))
		return 0;
	config_init(&cfg);
	if (config_load(&cfg, argc, argv, environ, err) != 0) {
		fprintf(stderr, "emberd: %s\n", err);
		config_free(&cfg);
		return 2;
	}
	/* The device is chosen before the model loads (compute.h, devices). */
	if (compute_device_select(cfg.device, err) != 0) {
		fprintf(stderr, "emberd: %s\n", err);
		config_free(&cfg);
		return 2;
	}
	/* A client that disconnects mid-write must cost an EPIPE, not us. */
	signal(SIGPIPE, SIG_IGN);
	log_init(&log, (int)cfg.log_level, stderr);
	setvbuf(stderr, NULL, _IOLBF, 0);
	rc = server_run(&cfg, &log);
	config_free(&cfg);
	return rc;
}
