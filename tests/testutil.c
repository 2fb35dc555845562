/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <check.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"
#include "gguf.h"
#include "cpu.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"
#include "tokenizer.h"
#include "vk.h"

char *test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
			buf[n] = '\0';
			*len = (size_t)n;
		} else {
			free(buf);
			buf = NULL;
		}
	}
	fclose(f);
	return buf;
}

float *test_read_floats(const char *path, size_t n)
{
	size_t len;
	char *buf = test_read_file(path, &len);

	ck_assert_msg(buf != NULL, "cannot read %s", path);
	ck_assert_msg(len == n * sizeof(float), "%s: %zu bytes, expected %zu (%zu floats)", path,
		      len, n * sizeof(float), n);
	return (float *)buf;
}

double test_logits_dist(const float *a, const float *b, size_t n_pos, uint32_t n_vocab)
{
	double worst = 0;

	for (size_t t = 0; t < n_pos; t++) {
		const float *ra = a + t * n_vocab, *rb = b + t * n_vocab;
		double d = 0, ref = 0;

		for (uint32_t v = 0; v < n_vocab; v++) {
			d = fmax(d, fabs((double)ra[v] - rb[v]));
			ref = fmax(ref, fabs(rb[v]));
		}
		worst = fmax(worst, d / ref);
	}
	return worst;
}

void test_write_golden_as(const char *src, const char *path, uint32_t type)
{
	enum { ROW_MAX = 1 << 16 }; /* one converted row; asserted per row below */
	char err[EMBER_ERR_MAX] = "", name[128];
	struct gguf g;
	struct gguf_writer *w;
	uint8_t *buf = malloc(ROW_MAX);

	ck_assert_ptr_nonnull(buf);
	ck_assert_msg(gguf_open(&g, src, err) == 0, "%s: %s", src, err);
	ck_assert_msg(gguf_writer_new(&w, path, err) == 0, "%s: %s", path, err);
	for (uint64_t i = 0; i < g.n_kv; i++)
		ck_assert_int_eq(gguf_writer_copy_kv(w, &g.kv[i]), 0);
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];

		ck_assert_uint_lt(t->name.len, sizeof(name));
		memcpy(name, t->name.ptr, t->name.len);
		name[t->name.len] = '\0';
		ck_assert_int_eq(gguf_writer_add_tensor(w, name, t->n_dims == 2 ? type : t->type,
							t->n_dims, t->ne),
				 0);
	}
	ck_assert_int_eq(gguf_writer_write_header(w, err), 0);
	for (uint64_t i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];

		ck_assert_uint_eq(t->type, DTYPE_F32);
		if (t->n_dims != 2) {
			ck_assert_int_eq(gguf_writer_write_data(w, t->data, t->size, err), 0);
			continue;
		}
		for (uint64_t r = 0; r < t->ne[1]; r++) {
			size_t len = (size_t)dtype_row_size(type, t->ne[0]);

			ck_assert_uint_le(len, ROW_MAX);
			ck_assert_int_eq(kern_quantize_row(type, (const float *)t->data + r * t->ne[0],
							   buf, t->ne[0]),
					 0);
			ck_assert_int_eq(gguf_writer_write_data(w, buf, len, err), 0);
		}
	}
	ck_assert_msg(gguf_writer_finish(w, err) == 0, "write %s: %s", path, err);
	gguf_writer_free(w);
	gguf_close(&g);
	free(buf);
}

/* root[key] (a tokens.json's id list) into out[0..n): exactly n integers
 * in 0..INT32_MAX, else the running Check test fails. */
static void test_read_ids(json_t *root, const char *key, int32_t *out, size_t n)
{
	json_t *arr = json_object_get(root, key);
	size_t i;

	ck_assert_msg(json_is_array(arr) && json_array_size(arr) == n, "tokens.json: %s", key);
	for (i = 0; i < n; i++) {
		json_t *v = json_array_get(arr, i);

		ck_assert_msg(json_is_integer(v) && json_integer_value(v) >= 0 &&
				      json_integer_value(v) <= INT32_MAX,
			      "tokens.json: %s[%zu] is not a token id", key, i);
		out[i] = (int32_t)json_integer_value(v);
	}
}

void test_read_golden_ids(const char *path, int32_t *ids, size_t n)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr);

	ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
	test_read_ids(root, "input_ids", ids, n);
	json_decref(root);
}

void test_golden_load(struct test_golden *g, const char *arch, uint32_t n_vocab)
{
	const size_t n = (size_t)TEST_GOLDEN_N_IN * n_vocab;
	char path[256];
	json_error_t jerr;
	json_t *root;
	FILE *f;

	snprintf(path, sizeof(path), TEST_GOLDEN_DIR "%s/tokens.json", arch);
	root = json_load_file(path, 0, &jerr);
	ck_assert_msg(root != NULL, "%s: %s", path, jerr.text);
	test_read_ids(root, "input_ids", g->input, TEST_GOLDEN_N_IN);
	test_read_ids(root, "greedy_continuation", g->greedy, TEST_GOLDEN_N_GREEDY);
	json_decref(root);
	g->n_vocab = n_vocab;
	g->exact = malloc(sizeof(float) * n);
	ck_assert_ptr_nonnull(g->exact);
	snprintf(path, sizeof(path), TEST_GOLDEN_DIR "%s/logits-exact.f32", arch);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_uint_eq(fread(g->exact, sizeof(float), n, f), n);
	ck_assert_int_eq(fgetc(f), EOF); /* the vocabulary sizes agree */
	fclose(f);
}

void test_golden_free(struct test_golden *g)
{
	free(g->exact);
	g->exact = NULL;
}

int test_quick(void)
{
	const char *v = getenv("EMBER_TEST_QUICK");

	return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

int test_no_threads(const char *what)
{
	if (getenv("EMBER_TEST_NO_THREADS") == NULL)
		return 0;
	fprintf(stderr, "%s skipped: no threads here (EMBER_TEST_NO_THREADS)\n", what);
	return 1;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int test_remove_tree(const char *path)
{
	/* FTW_DEPTH: children before their folder; FTW_PHYS: links are removed,
	 * never followed. */
	return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *test_stderr_of(void (*fn)(void *), void *data, char *buf, size_t len)
{
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n;

	ck_assert_ptr_nonnull(tmp);
	ck_assert_int_ge(saved, 0);
	fflush(stderr);
	ck_assert_int_eq(dup2(fileno(tmp), 2), 2);
	fn(data);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, len - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
	return buf;
}

void *test_alloc64(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);

	ck_assert_ptr_nonnull(p);
	return p;
}

int test_bf16_tiles_run(const char *suite)
{
	struct cpu_features f;

	cpu_detect(&f);
	if (!kern_level_runs(CPU_LEVEL_AVX512) || !f.avx512_bf16) {
		fprintf(stderr, "%s: skipping: this CPU lacks avx512 or AVX512-BF16\n", suite);
		return 0;
	}
	return 1;
}

/* testutil.h: the prompt, decode and hidden rows' outputs. */
void test_model_outputs(const struct model *m, float *out)
{
	struct forward_opts o = {.max_batch = 48,
				 .n_threads = getenv("EMBER_TEST_NO_THREADS") ? 1 : 2};
	const size_t nv = m->hp.n_vocab;
	struct forward_pass *p = NULL;
	struct kv_cache kv;
	char err[EMBER_ERR_MAX] = "";
	int32_t ids[41];

	for (int j = 0; j < 41; j++)
		ids[j] = (int32_t)((37 * j + 11) % nv);
	ck_assert_msg(forward_pass_new(&p, m, &o, err) == 0, "pass: %s", err);
	ck_assert_int_eq(kv_cache_init(&kv, &m->hp, 96, DTYPE_F16, err), 0);
	struct forward_seq q = {&kv, ids, 40, FORWARD_LOGITS_LAST, false};
	ck_assert_msg(forward_pass_run(p, &q, 1, out, err) == 0, "prompt: %s", err);
	q = (struct forward_seq){&kv, ids + 40, 1, FORWARD_LOGITS_LAST, false};
	ck_assert_msg(forward_pass_run(p, &q, 1, out + nv, err) == 0, "decode: %s", err);
	kv_cache_free(&kv);
	ck_assert_int_eq(kv_cache_init(&kv, &m->hp, 96, DTYPE_F16, err), 0);
	q = (struct forward_seq){&kv, ids + 3, 37, FORWARD_HIDDEN_ALL, false};
	ck_assert_msg(forward_pass_run(p, &q, 1, out + 2 * nv, err) == 0, "hidden: %s", err);
	kv_cache_free(&kv);
	forward_pass_free(p);
}

/* testutil.h: a switch's two settings, the same outputs. */
void test_model_switch_same(const struct model *m, int *off, const char *what,
			    const char *off_name, const char *on_name)
{
	const size_t nv = m->hp.n_vocab, n = TEST_MODEL_OUTPUTS(m);
	float *a = test_alloc64(n * sizeof(float)), *b = test_alloc64(n * sizeof(float));

	*off = 1;
	test_model_outputs(m, a);
	*off = 0;
	test_model_outputs(m, b);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(memcmp(a + i, b + i, sizeof(float)) == 0, "%s: %s %zu: %.9g %s, %.9g %s",
			      what, i < nv ? "prompt logit" : i < 2 * nv ? "decode logit" : "hidden value",
			      i, a[i], off_name, b[i], on_name);
	free(a);
	free(b);
}

/* testutil.h: the SiLU row work, float and bf16 writers. */
void test_silu_pre_rows(void *ctx, size_t t0, size_t t1)
{
	struct test_silu_pre *p = ctx;

	for (size_t t = t0; t < t1; t++) {
		memcpy(p->x + t * p->n_in, p->u + t * p->n_in, p->n_in * sizeof(float));
		kern_silu_mul(p->x + t * p->n_in, p->g + t * p->n_in, p->n_in);
	}
}

void test_silu_pre_bf16(void *ctx, size_t t0, size_t t1, const struct kern_bf16_rows *b)
{
	struct test_silu_pre *p = ctx;

	for (size_t t = t0; t < t1; t++)
		kern_silu_mul_bf16(p->u + t * p->n_in, p->g + t * p->n_in, p->n_in,
				   kern_bf16_row(b, t), KERN_BF16_ROW_STEP);
	__atomic_add_fetch(&p->bf16_rows, (int)(t1 - t0), __ATOMIC_RELAXED);
}

/* The kernel suites' one random stream (test_kern_fill). */
static uint64_t test_kern_rng = 0x9e3779b97f4a7c15ull;

void test_kern_seed(uint64_t seed)
{
	test_kern_rng = seed;
}

void test_kern_fill(float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++) {
		float u = (float)(test_rand(&test_kern_rng) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
		x[i] = u * scale * ((test_rand(&test_kern_rng) & 63) == 0 ? 8.0f : 1.0f);
	}
}

void *test_kern_weights(uint32_t t, size_t n_out, size_t n_in, float **wf)
{
	size_t row = (size_t)dtype_row_size(t, n_in);
	uint8_t *w = test_alloc64(row * n_out);
	float *src = test_alloc64(n_in * sizeof(float));

	*wf = test_alloc64(n_out * n_in * sizeof(float));
	for (size_t o = 0; o < n_out; o++) {
		test_kern_fill(src, n_in, 0.05f + (float)(o % 7));
		ck_assert_int_eq(kern_quantize_row(t, src, w + o * row, n_in), 0);
		ck_assert_int_eq(kern_dequantize_row(t, w + o * row, *wf + o * n_in, n_in), 0);
	}
	free(src);
	return w;
}

void test_kern_matmul(struct tpool *pool, uint32_t t, const void *w, size_t n_out, size_t n_in,
		      const float *x, size_t n_tok, float *y)
{
	size_t sz = kern_matmul_scratch(t, n_in, n_tok);
	void *scratch = sz ? test_alloc64(sz) : NULL;

	kern_matmul(pool, t, w, n_out, n_in, x, n_tok, y, scratch);
	free(scratch);
}

void test_llama_open(struct model *m, struct tokenizer **tok)
{
	char err[EMBER_ERR_MAX] = "";

	kern_init();
	ck_assert_msg(model_open(m, TEST_GOLDEN_LLAMA, err) == 0, "model: %s", err);
	ck_assert_msg(tokenizer_new(tok, m->gguf, err) == 0, "tokenizer: %s", err);
}

void test_llama_close(struct model *m, struct tokenizer *tok)
{
	tokenizer_free(tok);
	model_free(m);
}

void test_sink_sync_init(pthread_mutex_t *lock, pthread_cond_t *cond)
{
	pthread_mutex_init(lock, NULL);
	pthread_cond_init(cond, NULL);
}

void test_sink_sync_destroy(pthread_mutex_t *lock, pthread_cond_t *cond)
{
	pthread_mutex_destroy(lock);
	pthread_cond_destroy(cond);
}

void test_text_append(char *buf, size_t *used, size_t cap, const char *text, size_t len)
{
	if (*used + len < cap) {
		memcpy(buf + *used, text, len);
		*used += len;
		buf[*used] = '\0';
	}
}

void test_sink_init(struct test_sink *s)
{
	memset(s, 0, sizeof(*s));
	test_sink_sync_init(&s->lock, &s->cond);
}

void test_sink_destroy(struct test_sink *s)
{
	test_sink_sync_destroy(&s->lock, &s->cond);
}

void test_sink_on_text(void *data, const char *text, size_t len, int n_tokens)
{
	struct test_sink *s = data;

	pthread_mutex_lock(&s->lock);
	ck_assert_int_eq(s->n_done, 0);
	test_text_append(s->text, &s->len, TEST_SINK_TEXT_MAX, text, len);
	s->n_text_calls++;
	s->n_tokens += n_tokens;
	pthread_cond_broadcast(&s->cond);
	while (s->block)
		pthread_cond_wait(&s->cond, &s->lock);
	if (s->text_hook)
		s->text_hook(s, n_tokens);
	pthread_mutex_unlock(&s->lock);
}

void test_sink_on_done(void *data, const struct engine_result *res)
{
	struct test_sink *s = data;

	pthread_mutex_lock(&s->lock);
	if (s->done_hook)
		s->done_hook(s);
	s->n_done++;
	s->res = *res;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void test_sink_wait(struct test_sink *s, int tokens)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&s->lock);
	while (s->n_done == 0 && (tokens <= 0 || s->n_tokens < tokens))
		ck_assert_msg(pthread_cond_timedwait(&s->cond, &s->lock, &until) == 0,
			      "request never got there (%d tokens of %d, done %d)", s->n_tokens,
			      tokens, s->n_done);
	pthread_mutex_unlock(&s->lock);
}

void test_sink_unblock(struct test_sink *s)
{
	pthread_mutex_lock(&s->lock);
	s->block = 0;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static pthread_mutex_t test_out_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t test_out_cond = PTHREAD_COND_INITIALIZER;

void test_out_on_text(void *data, const char *text, size_t len, int n_tokens)
{
	struct test_out *o = data;

	(void)n_tokens;
	test_text_append(o->text, &o->len, TEST_OUT_TEXT_MAX, text, len);
}

void test_out_on_done(void *data, const struct engine_result *res)
{
	struct test_out *o = data;

	pthread_mutex_lock(&test_out_lock);
	o->res = *res;
	o->done = 1;
	pthread_cond_broadcast(&test_out_cond);
	pthread_mutex_unlock(&test_out_lock);
}

void test_outs_wait(struct test_out *o, int n, const char *what)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 240;
	pthread_mutex_lock(&test_out_lock);
	for (int i = 0; i < n; i++)
		while (!o[i].done)
			ck_assert_msg(pthread_cond_timedwait(&test_out_cond, &test_out_lock,
							     &until) == 0,
				      "%s %d never finished", what, i);
	pthread_mutex_unlock(&test_out_lock);
}

/* test_bf16_golden_check's logits of one model (bf16: through the
 * suite's modelled bf16 path) into logits, its vocabulary in *n_vocab. */
static void test_bf16_golden_logits(const struct test_bf16_golden *g, const char *file,
				    float *logits, uint32_t *n_vocab, int bf16)
{
	struct forward_opts fo = {.n_ctx = TEST_GOLDEN_N_IN};
	char path[512], err[EMBER_ERR_MAX] = "";
	const char *slash = strrchr(file, '/'); /* the tokens.json beside the model */
	struct forward_ctx *f = NULL;
	int32_t input[TEST_GOLDEN_N_IN];
	struct model m;

	snprintf(path, sizeof(path), "%s%.*stokens.json", g->dir, slash ? (int)(slash + 1 - file) : 0,
		 file);
	test_read_golden_ids(path, input, TEST_GOLDEN_N_IN);
	snprintf(path, sizeof(path), "%s%s.gguf", g->dir, file);
	ck_assert_msg(model_open(&m, path, err) == 0, "%s: %s", path, err);
	*n_vocab = m.hp.n_vocab;
	ck_assert_msg(forward_new(&f, &m, &fo, err) == 0, "%s", err);
	if (bf16)
		g->bf16(1);
	ck_assert_msg(forward_eval(f, input, TEST_GOLDEN_N_IN, logits, 1, err) == 0, "%s", err);
	if (bf16)
		g->bf16(0);
	forward_free(f);
	model_free(&m);
}

void test_bf16_golden_check(const struct test_bf16_golden *g, const char *file)
{
	const size_t n_in = TEST_GOLDEN_N_IN, cap = n_in * 4096;
	float *l8 = malloc(sizeof(float) * cap), *lb = malloc(sizeof(float) * cap);
	float *exact, *lcpp;
	char path[512];
	uint32_t nv = 0;
	double d8, db, dl;

	ck_assert(l8 && lb);
	if (!test_bf16_tiles_run(g->suite))
		goto out;
	setenv("EMBER_PACK", "0", 1);
	test_bf16_golden_logits(g, file, l8, &nv, 0);
	ck_assert_uint_le((size_t)nv * n_in, cap);
	test_bf16_golden_logits(g, file, lb, &nv, 1);
	unsetenv("EMBER_PACK");
	snprintf(path, sizeof(path), "%s%s.logits-exact-dequant.f32", g->dir, file);
	exact = test_read_floats(path, n_in * nv);
	snprintf(path, sizeof(path), "%s%s.logits.f32", g->dir, file);
	lcpp = test_read_floats(path, n_in * nv);
	d8 = test_logits_dist(l8, exact, n_in, nv);
	db = test_logits_dist(lb, exact, n_in, nv);
	dl = test_logits_dist(lcpp, exact, n_in, nv);
	printf("%s: %s%-*s prefill vs exact dequant: bf16 tiles %.3e, %s (%s) %.3e, "
	       "llama.cpp %.3e\n",
	       g->suite, g->prefix, g->width, file, db, g->own, cpu_level_name(kern_level()), d8,
	       dl);
	ck_assert_msg(db <= 1.25 * dl, "%s: bf16 %.3e > 1.25 x llama.cpp's %.3e", file, db, dl);
	free(exact);
	free(lcpp);
out:
	free(l8);
	free(lb);
}

int test_vulkan_skip(void)
{
	char err[EMBER_ERR_MAX] = "";

	if (vk_open(-1, err) == 0)
		return 0;
	printf("skip vulkan test: %s\n", err);
	return 1;
}

void test_vulkan_close(const float *got, const double *want, size_t n, double tol,
		       const char *what)
{
	double worst = 0.0, mx = 1e-30;

	for (size_t i = 0; i < n; i++) {
		worst = fmax(worst, fabs(got[i] - want[i]));
		mx = fmax(mx, fabs(want[i]));
	}
	printf("vulkan %s: max |diff| %.3g (max |ref| %.3g)\n", what, worst, mx);
	ck_assert_msg(worst <= tol * mx, "%s: max |diff| %g > %g x %g", what, worst, tol, mx);
}
