/*
 * convert.h - Hugging Face checkpoint directory -> one GGUF v3 file
 * (`ember convert`), and GGUF -> GGUF re-quantization (`ember quantize`).
 *
 * The output has the keys and tensor names llama.cpp's converter writes
 * (convert_arch.h holds the per-architecture tables, hf_tokenizer.h the
 * vocabulary), plus our own:
 *   ember.recipe                   str       the recipe, as given (recipe.h)
 *   ember.tokenizer.spm_model      arr[u8]   SentencePiece: the original
 *                                            tokenizer.model bytes
 *   ember.tokenizer.eos_token_ids  arr[u32]  when generation_config.json
 *                                            lists several eos ids
 *   ember.tokenizer.normalizer     str       "nfc" when tokenizer.json's
 *                                            normalizer is NFC
 * Falcon-RW's form is described in convert_arch.c.
 *
 * Memory: tensors are streamed one at a time, row by row, and each one's
 * source pages are dropped once written, so peak resident memory is about
 * the largest tensor's source bytes, not the model's size. The output goes
 * to "<out>.tmp", renamed only when complete; on any error nothing is left.
 *
 * One thread; everything allocated is freed before returning.
 */
#ifndef EMBER_CONVERT_H
#define EMBER_CONVERT_H

#include "recipe.h"

struct convert_opts {
	const char *in;   /* checkpoint directory (convert) or GGUF file (quantize) */
	const char *out;  /* GGUF file to write */
	struct recipe recipe;
	const char *name; /* general.name; NULL: from the directory's name */
	int progress;     /* 1: progress line on stderr */
};

/* Converts o->in (a checkpoint directory) to o->out. 0, or a negative code
 * with the reason in `err` (EMBER_ERR_MAX bytes). */
int convert_run(const struct convert_opts *o, char *err);

/* Re-quantizes o->in (a GGUF file with F32/F16/BF16 tensors; tensors
 * already in the target type are copied) to o->out with o->recipe, keeping
 * every key and the tensor order; general.file_type and ember.recipe are
 * updated. 0 or a negative code with the reason in `err`. */
int convert_quantize(const struct convert_opts *o, char *err);

/* Parses "IN OUT [-q RECIPE] [--keep PATTERN=TYPE]... [--name NAME]"
 * (argv[0] is the command; --name only if `with_name`) into `o`, default
 * recipe f16, progress on when stderr is a terminal. Returns 0, 1 when
 * --help was asked for, or EMBER_EINVAL with the reason in `err`. */
int convert_parse_args(int argc, char **argv, int with_name, struct convert_opts *o, char *err);

/* llama.cpp's general.size_label for a parameter count ("625K", "1.1B"),
 * into buf. */
void convert_size_label(uint64_t n_params, char *buf, size_t size);

#endif
