/*
 * cmd_convert.c - `ember convert HF_DIR OUT.gguf [-q RECIPE] [--keep
 * PATTERN=TYPE]... [--name NAME]`: a Hugging Face checkpoint directory to one
 * GGUF file (convert.h does the work).
 */
#include <stdio.h>

#include "commands.h"
#include "convert.h"
#include "ember.h"

static const char convert_usage[] =
	"usage: ember convert HF_DIR OUT.gguf [-q RECIPE] [--keep PATTERN=TYPE]... [--name NAME]\n"
	"Converts a Hugging Face checkpoint (config.json, *.safetensors, tokenizer) to GGUF.\n"
	"  -q RECIPE            f32, f16 (default), bf16, int8 (Q8_0), int4 (Q4_0),\n"
	"                       int4-mixed (Q4_0 attention/MLP, Q8_0 embeddings and head),\n"
	"                       llama.cpp's presets q4_k_m q4_k_s q5_k_m q6_k q3_k_m q2_k\n"
	"                       q4_1 q5_0 q5_1 iq4_nl iq4_xs;\n"
	"                       norms and biases stay f32\n"
	"  --keep PATTERN=TYPE  tensors whose GGUF name matches the glob get TYPE\n"
	"                       (f32, f16, bf16, q8_0, q4_0); the last match wins\n"
	"  --name NAME          general.name (default: the directory's name)\n"
	"Architectures: LLaMA, Gemma, Phi-2, Falcon (7B layout and RW/ALiBi), StableLM, Qwen2.\n";

int cmd_convert(int argc, char **argv)
{
	char err[EMBER_ERR_MAX] = "";
	struct convert_opts o;
	int rc;

	rc = convert_parse_args(argc, argv, 1, &o, err);
	if (rc == 1) {
		fputs(convert_usage, stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "ember convert: %s\n%s", err, convert_usage);
		return 2;
	}
	rc = convert_run(&o, err);
	if (rc < 0) {
		fprintf(stderr, "ember convert: %s\n", err);
		return 1;
	}
	return 0;
}
