/*
 * grammar_mask.c - the cost of the constrained-decoding mask per token
 * (engine/runtime/grammar.h) for a nested JSON Schema, on real vocabularies.
 *
 *   build/grammar_mask [VOCAB.gguf ...]   (default: the Llama 3 128k BPE
 *                                          and the Llama 2 32k SPM vocabularies
 *                                          in ../shared/tokenizer-vectors/)
 *
 * For each vocabulary: builds the vocabulary trie once (timed), compiles
 * the schema (timed), then runs DOCS documents, each with a fresh matcher
 * as a request would have: at every step the mask is filled (timed, thread
 * CPU time, so other processes on the machine weigh less) and a token
 * drawn uniformly from the allowed ones is accepted, until the grammar is
 * done or MAX_STEPS. Prints mean, median, p99 and max microseconds per
 * token over all steps, first-use cache misses included. Not a test.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "ember.h"
#include "gguf.h"
#include "grammar.h"
#include "json_schema.h"
#include "tokenizer.h"

#define DOCS 40
#define MAX_STEPS 400

static const char SCHEMA[] =
	"{\"type\":\"object\",\"properties\":{"
	" \"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
	" \"name\":{\"type\":\"string\",\"maxLength\":40},"
	" \"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":130},"
	" \"email\":{\"type\":\"string\",\"format\":\"email\"},"
	" \"address\":{\"type\":\"object\",\"properties\":{"
	"   \"street\":{\"type\":\"string\",\"maxLength\":60},"
	"   \"city\":{\"type\":\"string\",\"maxLength\":30},"
	"   \"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"},"
	"   \"geo\":{\"type\":\"object\",\"properties\":{\"lat\":{\"type\":\"number\"},"
	"     \"lon\":{\"type\":\"number\"}},\"required\":[\"lat\",\"lon\"]}},"
	"  \"required\":[\"city\"]},"
	" \"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":12},\"maxItems\":5},"
	" \"orders\":{\"type\":\"array\",\"maxItems\":3,\"items\":{\"type\":\"object\",\"properties\":{"
	"   \"sku\":{\"type\":\"string\",\"maxLength\":16},"
	"   \"qty\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":99},"
	"   \"status\":{\"enum\":[\"new\",\"paid\",\"shipped\"]},"
	"   \"note\":{\"type\":[\"string\",\"null\"],\"maxLength\":40}},"
	"  \"required\":[\"sku\",\"qty\",\"status\"]}},"
	" \"active\":{\"type\":\"boolean\"},"
	" \"since\":{\"type\":\"string\",\"format\":\"date\"}},"
	"\"required\":[\"id\",\"name\",\"address\",\"orders\",\"active\"]}";

static int bench_vocab(const char *path, struct grammar *g)
{
	struct gguf gf;
	struct tokenizer *tok = NULL;
	struct grammar_vocab *v = NULL;
	char err[EMBER_ERR_MAX];
	double t0, *times = malloc(DOCS * MAX_STEPS * sizeof(double)), sum = 0;
	uint32_t *mask = NULL, x = 12345;
	int n_times = 0, d, done_docs = 0, rc = 1;
	int32_t n;

	if (gguf_open(&gf, path, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		free(times);
		return 1;
	}
	if (tokenizer_new(&tok, &gf, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		goto out;
	}
	t0 = 1e6 * bench_clock_s(CLOCK_MONOTONIC);
	if (grammar_vocab_from_tokenizer(&v, tok, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		goto out;
	}
	n = grammar_vocab_n(v);
	printf("%s: %d tokens, vocabulary trie built in %.1f ms\n", path, (int)n,
	       (1e6 * bench_clock_s(CLOCK_MONOTONIC) - t0) / 1e3);
	mask = malloc(((size_t)n + 31) / 32 * sizeof(uint32_t));
	for (d = 0; d < DOCS; d++) {
		struct grammar_matcher *m = NULL;
		int step;

		if (grammar_matcher_new(&m, g, v, err) != 0) {
			fprintf(stderr, "%s\n", err);
			goto out;
		}
		for (step = 0; step < MAX_STEPS && !grammar_matcher_done(m); step++) {
			double t = 1e6 * bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
			int64_t allowed = grammar_matcher_fill_mask(m, mask, err);
			int64_t pick, k;
			int32_t tkn;

			times[n_times] = 1e6 * bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t;
			sum += times[n_times++];
			if (allowed <= 0) {
				fprintf(stderr, "dead end: %s\n", err);
				grammar_matcher_free(m);
				goto out;
			}
			x = x * 1664525u + 1013904223u;
			pick = (int64_t)((x >> 8) % (uint64_t)allowed);
			for (tkn = 0, k = -1; tkn < n; tkn++)
				if ((mask[tkn >> 5] >> (tkn & 31)) & 1 && ++k == pick)
					break;
			if (grammar_matcher_accept(m, tkn, err) != 0) {
				fprintf(stderr, "accept: %s\n", err);
				grammar_matcher_free(m);
				goto out;
			}
			if (grammar_matcher_accepting(m) && tokenizer_is_eog(tok, tkn) == 1)
				break;
		}
		done_docs += grammar_matcher_done(m);
		grammar_matcher_free(m);
	}
	bench_sort(times, (size_t)n_times);
	printf("  mask per token over %d steps (%d documents, %d complete): mean %.1f us, "
	       "median %.1f us, p99 %.1f us, max %.1f us\n",
	       n_times, DOCS, done_docs, sum / n_times, times[n_times / 2],
	       times[(int)(n_times * 0.99)], times[n_times - 1]);
	rc = 0;
out:
	free(mask);
	free(times);
	grammar_vocab_free(v);
	tokenizer_free(tok);
	gguf_close(&gf);
	return rc;
}

int main(int argc, char **argv)
{
	static const char *const defaults[] = {
		"../shared/tokenizer-vectors/ggml-vocab-llama-bpe.gguf",
		"../shared/tokenizer-vectors/ggml-vocab-llama-spm.gguf",
	};
	const char *const *paths = argc > 1 ? (const char *const *)argv + 1 : defaults;
	int n_paths = argc > 1 ? argc - 1 : 2, i, rc = 0;
	char err[JSON_SCHEMA_ERR_MAX], gerr[EMBER_ERR_MAX], *gbnf = NULL;
	json_t *schema = json_loads(SCHEMA, 0, NULL);
	struct grammar *g = NULL;
	double t0 = 1e6 * bench_clock_s(CLOCK_MONOTONIC);

	if (schema == NULL || json_schema_to_gbnf(schema, &gbnf, err) != 0) {
		fprintf(stderr, "schema: %s\n", schema ? err : "bad JSON");
		return 1;
	}
	if (grammar_parse_gbnf(&g, gbnf, strlen(gbnf), gerr) != 0) {
		fprintf(stderr, "grammar: %s\n", gerr);
		return 1;
	}
	printf("nested schema (%zu bytes of GBNF, %u rules) compiled in %.2f ms\n", strlen(gbnf),
	       grammar_n_rules(g), (1e6 * bench_clock_s(CLOCK_MONOTONIC) - t0) / 1e3);
	for (i = 0; i < n_paths; i++)
		rc |= bench_vocab(paths[i], g);
	grammar_free(g);
	free(gbnf);
	json_decref(schema);
	return rc;
}
