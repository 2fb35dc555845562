/*
 * test_fuse_act.c - the gated SiLU fused into the gate|up product
 * (forward.c mlp_fused: each activation block made and quantized for
 * down by the thread that completes it) gives the logits of the unfused
 * order (EMBER_FUSE_ACT=0: SiLU and quantization before down) bit for
 * bit: prompts of up to 16 tokens and over (which do not fuse), a
 * 3-sequence step and one-token decodes; file layout and packed rows;
 * 1, 2 and 3 threads (other chunk cuts); Q4_0 and Q8_0 (32-value
 * activation blocks), Q4_K_M and Q6_K (256-value Q8_K blocks), F32 (no
 * quantization). Models: the golden llama-256 files (../shared/golden/
 * quants/llama-256). Runs at the level this process chose; the packed
 * half needs gguf_map's private copy (EMBER_HUGEPAGES=always).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "cpu.h"
#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "forward_impl.h"
#include "kernels.h"
#include "kv_cache.h"
#include "model.h"

#define FA_DIR "../shared/golden/quants/llama-256/"
/* logits rows of fa_run(): 12 prompt, 3 step, 3 decodes, 1 long prompt */
#define FA_ROWS 19

/* The logits of a fixed run into out[FA_ROWS * nv], fused or not. */
static void fa_run(const struct model *m, uint32_t threads, int fused, float *out)
{
	struct forward_opts o = {.max_batch = 24, .n_threads = threads};
	const size_t nv = m->hp.n_vocab;
	struct forward_pass *p = NULL;
	struct kv_cache kv[4];
	char err[EMBER_ERR_MAX] = "";
	int32_t ids[40];

	for (int j = 0; j < 40; j++)
		ids[j] = (int32_t)((29 * j + 7) % nv);
	if (fused)
		unsetenv("EMBER_FUSE_ACT");
	else
		setenv("EMBER_FUSE_ACT", "0", 1);
	ck_assert_msg(forward_pass_new(&p, m, &o, err) == 0, "pass: %s", err);
	unsetenv("EMBER_FUSE_ACT");
	/* the fused path is on for the file's gated SiLU, or off when asked */
	ck_assert_int_eq(p->fuse_act, fused);
	ck_assert_ptr_nonnull(p->act_done);
	for (int s = 0; s < 4; s++)
		ck_assert_int_eq(kv_cache_init(kv + s, &m->hp, 48, DTYPE_F16, err), 0);
	struct forward_seq q = {kv, ids, 12, FORWARD_LOGITS_ALL};
	ck_assert_msg(forward_pass_run(p, &q, 1, out, err) == 0, "prefill: %s", err);
	struct forward_seq three[3];
	for (int s = 0; s < 3; s++)
		three[s] = (struct forward_seq){kv + s, ids + 12 + s, 1, FORWARD_LOGITS_LAST};
	ck_assert_msg(forward_pass_run(p, three, 3, out + 12 * nv, err) == 0, "step: %s", err);
	for (int t = 0; t < 3; t++) {
		q = (struct forward_seq){kv, ids + 15 + t, 1, FORWARD_LOGITS_LAST};
		ck_assert_msg(forward_pass_run(p, &q, 1, out + (15 + t) * nv, err) == 0,
			      "decode: %s", err);
	}
	q = (struct forward_seq){kv + 3, ids + 18, 20, FORWARD_LOGITS_LAST};
	ck_assert_msg(forward_pass_run(p, &q, 1, out + 18 * nv, err) == 0, "long: %s", err);
	for (int s = 0; s < 4; s++)
		kv_cache_free(kv + s);
	forward_pass_free(p);
}

static void fa_compare(const struct model *m, const char *name, const char *layout)
{
	const size_t nv = m->hp.n_vocab, n = FA_ROWS * nv;
	float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);

	for (uint32_t th = 1; th <= 3; th++) {
		fa_run(m, th, 0, a);
		fa_run(m, th, 1, b);
		for (size_t i = 0; i < n; i++)
			ck_assert_msg(memcmp(a + i, b + i, sizeof(float)) == 0,
				      "%s (%s) at %s, %u threads: logit %zu of row %zu: %.9g "
				      "unfused, %.9g fused",
				      name, layout, cpu_level_name(kern_level()), th, i % nv, i / nv,
				      a[i], b[i]);
	}
	free(a);
	free(b);
}

START_TEST(fused_silu_gives_the_unfused_logits)
{
	static const char *const files[] = {"Q4_0", "Q8_0", "Q4_K_M", "Q6_K", "source-f32"};
	char path[256], err[EMBER_ERR_MAX] = "";
	const char *old = getenv("EMBER_HUGEPAGES");
	char *keep = old ? strdup(old) : NULL;
	struct model m;
	int packed = 0;

	snprintf(path, sizeof(path), FA_DIR "%s.gguf", files[_i]);
	setenv("EMBER_HUGEPAGES", "always", 1);
	ck_assert_msg(model_open(&m, path, err) == 0, "model_open %s: %s", path, err);
	if (keep)
		setenv("EMBER_HUGEPAGES", keep, 1);
	else
		unsetenv("EMBER_HUGEPAGES");
	free(keep);
	fa_compare(&m, files[_i], "file layout");
	ck_assert_int_eq(compute_prepare_model(&m, err), 0);
	for (size_t l = 0; l < m.hp.n_layer; l++)
		packed += m.layers[l].w[ARCH_T_FFN_DOWN].packed != 0;
	if (packed)
		fa_compare(&m, files[_i], "packed");
	printf("fuse_act: %s at the %s level: fused SiLU = unfused bit for bit (file layout%s)\n",
	       files[_i], cpu_level_name(kern_level()), packed ? " and packed" : "");
	model_free(&m);
}
END_TEST

Suite *suite_fuse_act(void)
{
	Suite *s = suite_create("fuse_act");
	TCase *tc = tcase_create("logits");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, fused_silu_gives_the_unfused_logits, 0, 5);
	suite_add_tcase(s, tc);
	return s;
}
