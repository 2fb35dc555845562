/*
 * testutil.h - small helpers shared by the Check suites (not a suite).
 */
#ifndef EMBER_TESTUTIL_H
#define EMBER_TESTUTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* One folder of ../shared/golden (see its README): 24 input ids, the
 * 16-token greedy continuation and the exact logits of every position. */
#define TEST_GOLDEN_DIR "../shared/golden/"
#define TEST_GOLDEN_N_IN 24
#define TEST_GOLDEN_N_GREEDY 16

struct test_golden {
	int32_t input[TEST_GOLDEN_N_IN];
	int32_t greedy[TEST_GOLDEN_N_GREEDY];
	float *exact; /* [TEST_GOLDEN_N_IN][n_vocab], owned */
	uint32_t n_vocab;
};

/* Reads TEST_GOLDEN_DIR<arch>/tokens.json and logits-exact.f32, which must
 * hold exactly n_vocab logits per position; fails the running Check test
 * on any mismatch. Release with test_golden_free(). */
void test_golden_load(struct test_golden *g, const char *arch, uint32_t n_vocab);
void test_golden_free(struct test_golden *g);

/* The golden prompt of a golden folder: the "input_ids" array of the
 * tokens.json at `path` (e.g. TEST_GOLDEN_DIR "llama/tokens.json" or a
 * quants folder's), which must hold exactly n integers in 0..INT32_MAX,
 * into ids[0..n). Fails the running Check test when the file cannot be
 * read or parsed, or the array is missing, of another length or holds
 * anything else. */
void test_read_golden_ids(const char *path, int32_t *ids, size_t n);

struct kern_bf16_rows;

/* A product's deferred row work for kern_pre (kernels.h): x[t] =
 * silu(g[t]) * u[t] as floats (u kept), or the same values written
 * straight into the bf16 A-tile rows; bf16_rows counts the rows the bf16
 * writer took (atomic: the pool's threads call it). Rows of n_in. */
struct test_silu_pre {
	const float *u, *g;
	float *x;
	size_t n_in;
	int bf16_rows;
};
void test_silu_pre_rows(void *ctx, size_t t0, size_t t1);
void test_silu_pre_bf16(void *ctx, size_t t0, size_t t1, const struct kern_bf16_rows *b);

struct model;

/* A model's outputs through the CPU forward pass (2 threads, or 1 under
 * EMBER_TEST_NO_THREADS), for comparing two settings of a kernel switch
 * bit for bit: the logits of the last token of a 40-token prompt (its
 * other rows prompt rows), those of one decode step after it, then the
 * hidden states of a 37-token text (every row a prompt row), into
 * out[2 * n_vocab + 37 * n_embd]. Fails the running Check test on any
 * error. */
void test_model_outputs(const struct model *m, float *out);
#define TEST_MODEL_OUTPUTS(m) (2 * (size_t)(m)->hp.n_vocab + 37 * (size_t)(m)->hp.n_embd)

/* test_model_outputs() with *off set to 1, then to 0 (a kernel switch
 * that must not change a result), asserted equal bit for bit; what names
 * the model, off_name and on_name the two settings, in a failure. *off
 * is left 0. */
void test_model_switch_same(const struct model *m, int *off, const char *what,
			    const char *off_name, const char *on_name);

struct tokenizer;

/* The engine suites' model: kern_init(), then the golden llama model
 * (TEST_GOLDEN_LLAMA, tiny, with a real SentencePiece vocabulary) into *m
 * and its tokenizer into *tok; fails the running Check test when either
 * cannot be opened. Release with test_llama_close(). */
#define TEST_GOLDEN_LLAMA TEST_GOLDEN_DIR "llama/model-f32.gguf"
void test_llama_open(struct model *m, struct tokenizer **tok);
void test_llama_close(struct model *m, struct tokenizer *tok);

/* The lock and condition of an engine suite's callback sink (defaults);
 * test_sink_sync_destroy() releases them. */
void test_sink_sync_init(pthread_mutex_t *lock, pthread_cond_t *cond);
void test_sink_sync_destroy(pthread_mutex_t *lock, pthread_cond_t *cond);

/*
 * What the callbacks of one request saw, in the engine suites that follow
 * a request as it streams (test_engine.c, test_scheduler.c,
 * test_engine_api.c): pass test_sink_on_text and test_sink_on_done as the
 * request's callbacks and the sink as their data. A suite that keeps more
 * embeds it as the first member of its own struct and sets the hooks,
 * which run under `lock` and may cast the sink back to that struct. Every
 * field is read and written under `lock`; `cond` is broadcast on each text,
 * at the end and by test_sink_unblock().
 */
#define TEST_SINK_TEXT_MAX 8192
struct test_sink {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char text[TEST_SINK_TEXT_MAX]; /* NUL-terminated (test_text_append) */
	size_t len;
	int n_text_calls, n_tokens, n_done;
	int block;                     /* on_text waits while set */
	struct engine_result res;      /* the on_done result */
	/* After a text's count (n_tokens: that text's), and before the end
	 * is counted; NULL for none. */
	void (*text_hook)(struct test_sink *s, int n_tokens);
	void (*done_hook)(struct test_sink *s);
};

/* Zeroes *s and starts its lock and condition; release with
 * test_sink_destroy(). */
void test_sink_init(struct test_sink *s);
void test_sink_destroy(struct test_sink *s);
/* The callbacks (engine.h): text appended and counted (a text after the
 * end fails the test), then waiting while `block` is set; the result
 * kept and n_done counted. */
void test_sink_on_text(void *data, const char *text, size_t len, int n_tokens);
void test_sink_on_done(void *data, const struct engine_result *res);
/* Waits until the request has ended or, with tokens > 0, has streamed
 * that many tokens; bounded (60 s) only so that a hang fails the test. */
void test_sink_wait(struct test_sink *s, int tokens);
/* Clears `block`, releasing an on_text that waits on it. */
void test_sink_unblock(struct test_sink *s);

/* What an engine suite's on_text keeps: text[0..len) appended to buf,
 * which holds *used bytes of cap, and NUL-terminated, when it fits with
 * room for the NUL; a chunk that does not fit is dropped whole. */
void test_text_append(char *buf, size_t *used, size_t cap, const char *text, size_t len);

/* One generation's output in the engine suites that run many requests at
 * once and wait for all (test_structured.c, test_tool_golden.c): pass
 * test_out_on_text and test_out_on_done as the request's callbacks and
 * the struct (zeroed) as their data. text is NUL-terminated; done is set
 * with res, under one lock for all, when the request ends. */
#define TEST_OUT_TEXT_MAX 4096
struct test_out {
	char text[TEST_OUT_TEXT_MAX];
	size_t len;
	struct engine_result res;
	int done;
};
void test_out_on_text(void *data, const char *text, size_t len, int n_tokens);
void test_out_on_done(void *data, const struct engine_result *res);
/* Waits, 240 s at the most (so that a hang fails), until o[0..n) are
 * done; a failure names the i-th as "<what> i". */
void test_outs_wait(struct test_out *o, int n, const char *what);

/* The whole file at `path`, NUL-terminated (malloc'd: the caller frees),
 * its length in *len; NULL if it cannot be read. */
char *test_read_file(const char *path, size_t *len);

/* The float file at `path`, which must hold exactly n floats (a golden
 * logits file: positions x vocabulary); fails the running Check test
 * otherwise. Release with free(). */
float *test_read_floats(const char *path, size_t n);

/* The golden suites' distance of logits a from the reference b, both
 * [n_pos][n_vocab]: the largest over positions of max|a - b| / max|b|
 * (the README's measure, as tests/test_quants.c bounds it against
 * llama.cpp's). Per position, so one position's large logits cannot hide
 * another's error. */
double test_logits_dist(const float *a, const float *b, size_t n_pos, uint32_t n_vocab);

/* Writes to `path` the F32 model `src` (a golden model-f32.gguf) with every
 * 2-D tensor (the weights) converted to `type` row by row through
 * kern_quantize_row, every other tensor and key copied as is; fails the
 * running Check test on any error. */
void test_write_golden_as(const char *src, const char *path, uint32_t type);

/* Nonzero when EMBER_TEST_QUICK is set to anything but "" or "0": the slow
 * suites (kernels) then check fewer shapes, still every type and level and
 * ragged sizes, so they fit under an emulator (tests/arm64/run_qemu.sh). */
int test_quick(void);

/* Nonzero, after printing "<what> skipped: ...", when EMBER_TEST_NO_THREADS
 * is set: under this machine's qemu-user a guest's pthread_create never
 * returns (tests/arm64/run_qemu.sh), so tests that start threads skip. */
int test_no_threads(const char *what);

/* Removes `path` and everything under it, in-process (no `rm -rf` child:
 * forking guests hang under qemu-user); 0 on success. */
int test_remove_tree(const char *path);

/* What fn(data) writes to stderr (fd 2, into a temporary file meanwhile),
 * at most len - 1 bytes into buf, NUL-terminated; returns buf. */
char *test_stderr_of(void (*fn)(void *), void *data, char *buf, size_t len);

/* One step of the kernel suites' xorshift64 (shifts 13, 7, 17) on
 * *state, its bits 16..47. Each suite keeps its own state and seed, so
 * its data is its own. */
static inline uint32_t test_rand(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state >> 16);
}

/* n bytes rounded up to 64, at a 64-byte boundary (the kernels' aligned
 * loads and stores); fails the running Check test when out of memory.
 * Release with free(). */
void *test_alloc64(size_t n);

/* The weight types the kernel suites (test_kernels.c,
 * test_kernels_driver.c) run every check over, as an initializer. */
#define TEST_KERN_TYPES {DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q8_0, DTYPE_Q4_0}

/* The kernel suites' random data, from one xorshift64 stream (test_rand)
 * with a fixed seed: x[0..n) uniform in [-1, 1) times scale, with an
 * occasional 8x outlier so block scales vary. */
void test_kern_fill(float *x, size_t n, float scale);
/* Restarts that stream at `seed` (its start is 0x9e3779b97f4a7c15). */
void test_kern_seed(uint64_t seed);

/* A weight matrix of type t (n_out rows of n_in) from test_kern_fill()
 * floats, aligned (test_alloc64); its dequantized values in *wf (malloc'd
 * the same way). Release both with free(). */
void *test_kern_weights(uint32_t t, size_t n_out, size_t n_in, float **wf);

/* kern_matmul() with its scratch allocated and freed here (pool NULL: one
 * thread). */
struct tpool;
void test_kern_matmul(struct tpool *pool, uint32_t t, const void *w, size_t n_out, size_t n_in,
		      const float *x, size_t n_tok, float *y);

/* Whether the AMX bf16 tests (test_amx_*.c) run here: the tile model and
 * the kernels need the avx512 level and AVX512-BF16; else one line says
 * why the suite skips. */
int test_bf16_tiles_run(const char *suite);

/* The amx bf16 suites' golden check, written once for test_amx_bf16.c
 * (Q4_0 / Q8_0 models) and test_amx_bf16_kq.c (the K-quants): the
 * golden prompt (TEST_GOLDEN_N_IN ids from the tokens.json beside
 * <dir><file>.gguf) evaluated at once through that model, first as the
 * level runs it, then between bf16(1) and bf16(0) (the suite's modelled
 * bf16 path on, then off, asserting it ran), under EMBER_PACK=0 (file
 * layout: the table's gemm[] runs; at most 4096 logits a position); the
 * distances of both from <dir><file>.logits-exact-dequant.f32 printed
 * with llama.cpp's (<dir><file>.logits.f32), and the bf16 one asserted
 * within 1.25x llama.cpp's. Skips (one line) where
 * test_bf16_tiles_run(suite) says so. */
struct test_bf16_golden {
	const char *suite;
	const char *dir;       /* the golden files' folder, ending in '/' */
	const char *prefix;    /* printed before the file's name */
	int width;             /* the printed name's width */
	const char *own;       /* what the level's own path is called */
	void (*bf16)(int on);
};
void test_bf16_golden_check(const struct test_bf16_golden *g, const char *file);

/* The Vulkan suites (test_vulkan.c, test_vulkan_pass.c): nonzero, after
 * printing why, when no Vulkan device opens here (not built in, no
 * driver), so the test skips. */
int test_vulkan_skip(void);

/* Their check of a device result against its double reference: max
 * |got - want| within tol x max |want| over n values, printed as
 * "vulkan <what>: ..." either way; fails the running Check test if not. */
void test_vulkan_close(const float *got, const double *want, size_t n, double tol,
		       const char *what);

#endif
