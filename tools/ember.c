/* ember.c - the `ember` tool: one binary, a table of sub-commands. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "compute.h"
#include "cpu.h"
#include "kernels.h"
#include "ember.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{"version", cmd_version, "print the version and the CPU features detected"},
	{"run", cmd_run, "prompt in, streamed text out, timings at the end"},
	{"eval", cmd_eval, "logits for given token ids (numerical check of a model)"},
	{"inspect", cmd_inspect, "print a GGUF file's header, keys and tensors"},
	{"convert", cmd_convert, "convert a Hugging Face checkpoint to GGUF (-q recipe)"},
	{"quantize", cmd_quantize, "re-quantize an f32/f16/bf16 GGUF file (-q recipe)"},
	{"bench", cmd_bench, "prefill and decode speed of a model (tokens/s, like llama-bench)"},
	{"template", cmd_template, "render a Jinja chat template with a JSON context"},
	{"synth", cmd_synth, "write a model with seeded random weights (tests, benchmarks, demo)"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: ember COMMAND [ARGS]   (ember COMMAND --help for its options)\n\n");
	for (i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int cmd_version(int argc, char **argv)
{
	struct cpu_features f;
	char buf[128], ops[KERN_DESCRIBE_MAX];

	(void)argc;
	(void)argv;
	cpu_detect(&f);
	printf("ember %s\n", EMBER_VERSION);
	printf("cpu: %s\n", cpu_describe(&f, buf, sizeof(buf)));
	printf("kernels: %s\n", cpu_level_name(kern_init()));
	fputs(kern_describe(ops, sizeof(ops)), stdout);
	fputs(compute_devices_describe(ops, sizeof(ops)), stdout);
	return 0;
}

int main(int argc, char **argv)
{
	size_t i;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(argc - 1, argv + 1);
	for (i = 0; i < N_COMMANDS; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "ember: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
