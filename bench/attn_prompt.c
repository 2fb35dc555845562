/*
 * attn_prompt.c - times attention_run() of one prompt on one layer, the
 * shape of a TinyLlama prefill (32 query heads, 4 kv heads, 64 wide, F16
 * cache), one thread (no pool), in thread CPU time: the prompt-row
 * attention's cost apart from the GEMMs around it (LEVELS.md, attn16).
 *
 *   build/attn_prompt [N_TOK REPS PROMPT]   (512 20 1; PROMPT 0: sampled
 *   rows, the float kernels)
 *
 * Keys, values and queries are random; prints the best and median ms per
 * call (one layer) and a checksum of the outputs' bits, so two builds'
 * results can be compared. Not a test: timings.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "attention.h"
#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kv_cache.h"

static uint32_t rng = 12345;

static float uniform(float a)
{
	rng = rng * 1664525u + 1013904223u;
	return a * ((float)(rng >> 8) / 8388608.0f - 1.0f);
}

int main(int argc, char **argv)
{
	const uint32_t n_tok = argc > 1 ? (uint32_t)atoi(argv[1]) : 512;
	const int reps = argc > 2 ? atoi(argv[2]) : 20;
	const int prompt = argc > 3 ? atoi(argv[3]) : 1;
	struct model_hparams hp = {0};
	struct attention a;
	struct kv_cache kv = {0};
	struct attention_tile tiles[64];
	char err[EMBER_ERR_MAX] = "";
	uint32_t n_tiles, t, g;
	uint64_t sum = 0;
	double *ms;

	if (n_tok < 2 || n_tok > 64 * ATTENTION_TILE || reps < 1)
		return fprintf(stderr, "usage: attn_prompt [N_TOK<=4096 REPS PROMPT]\n"), 2;
	kern_init();
	hp.n_layer = 1;
	hp.n_head = 32;
	hp.n_head_kv = 4;
	hp.head_dim_k = hp.head_dim_v = 64;
	if (attention_init(&a, &hp, ARCH_ALIBI_NONE, err) != 0 ||
	    kv_cache_init(&kv, &hp, n_tok, DTYPE_F16, err) != 0)
		return fprintf(stderr, "attn_prompt: %s\n", err), 1;
	for (g = 0; g < hp.n_head_kv; g++)
		for (size_t i = 0; i < (size_t)n_tok * 64; i++) {
			((uint16_t *)kv_cache_k_at(&kv, 0, g, (uint32_t)(i / 64)))[i % 64] =
				kern_fp32_to_fp16(uniform(1.5f));
			((uint16_t *)kv_cache_v_at(&kv, 0, g, (uint32_t)(i / 64)))[i % 64] =
				kern_fp32_to_fp16(uniform(2.0f));
		}
	n_tiles = attention_plan(tiles, &kv, 0, 0, n_tok);
	for (t = 0; t < n_tiles; t++)
		tiles[t].prompt = prompt && tiles[t].n > 1;
	float *q = malloc((size_t)n_tok * 32 * 64 * sizeof(float));
	float *out = malloc((size_t)n_tok * 32 * 64 * sizeof(float));

	ms = malloc((size_t)reps * sizeof(double));
	if (!q || !out || !ms)
		return 1;
	for (size_t i = 0; i < (size_t)n_tok * 32 * 64; i++)
		q[i] = uniform(1.0f);
	attention_run(&a, NULL, 0, tiles, n_tiles, q, out); /* warm-up */
	for (int r = 0; r < reps; r++) {
		const double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);

		attention_run(&a, NULL, 0, tiles, n_tiles, q, out);
		ms[r] = (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0) * 1e3;
	}
	for (size_t i = 0; i < (size_t)n_tok * 32 * 64; i++) {
		uint32_t b;

		memcpy(&b, &out[i], 4);
		sum = sum * 1000003u + b;
	}
	bench_sort(ms, (size_t)reps);
	printf("attn_prompt n_tok %u prompt %d level %s: best %.3f ms median %.3f ms  sum %016llx\n",
	       n_tok, prompt, cpu_level_name(kern_level()), ms[0], ms[reps / 2], (unsigned long long)sum);
	free(q);
	free(out);
	free(ms);
	kv_cache_free(&kv);
	attention_free(&a);
	return 0;
}
