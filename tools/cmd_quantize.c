/*
 * cmd_quantize.c - `ember quantize IN.gguf OUT.gguf -q RECIPE [--keep
 * PATTERN=TYPE]...`: re-quantizes an F32/F16/BF16 GGUF file (convert.h).
 */
#include <stdio.h>

#include "commands.h"
#include "convert.h"
#include "ember.h"

static const char quantize_usage[] =
	"usage: ember quantize IN.gguf OUT.gguf -q RECIPE [--keep PATTERN=TYPE]...\n"
	"Re-quantizes a GGUF file whose tensors are f32, f16 or bf16; keys are kept.\n"
	"  -q RECIPE            f32, f16 (default), bf16, int8, int4, int4-mixed, or\n"
	"                       llama.cpp's presets q4_k_m q4_k_s q5_k_m q6_k q3_k_m q2_k\n"
	"                       q4_1 q5_0 q5_1 iq4_nl iq4_xs (its per-tensor mix and rounding)\n"
	"  --keep PATTERN=TYPE  tensors whose name matches the glob get TYPE\n";

int cmd_quantize(int argc, char **argv)
{
	char err[EMBER_ERR_MAX] = "";
	struct convert_opts o;
	int rc;

	rc = convert_parse_args(argc, argv, 0, &o, err);
	if (rc == 1) {
		fputs(quantize_usage, stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "ember quantize: %s\n%s", err, quantize_usage);
		return 2;
	}
	rc = convert_quantize(&o, err);
	if (rc < 0) {
		fprintf(stderr, "ember quantize: %s\n", err);
		return 1;
	}
	return 0;
}
