/*
 * test_kernels_golden.c - the quantized kernels end to end: the golden
 * LLaMA model (../shared/golden/llama) with every matrix quantized to Q8_0
 * in memory and written to a temporary GGUF must continue the golden
 * prompt with the same greedy tokens as the F32 model, with logits close
 * to the exact reference, on every kernel level this CPU runs.
 *
 * The level is chosen once per process (EMBER_CPU), so each level runs in
 * a sub-process: `ember eval` from the build directory of this test binary
 * (make builds it before the unit tests), with EMBER_CPU set, behind
 * EMBER_TEST_RUNNER if that is set (an emulator for a cross build).
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "ember.h"
#include "gguf.h"
#include "kernels.h"
#include "kernels_impl.h"
#include "testutil.h"

#define KG_DIR "../shared/golden/llama/"
#define KG_N_IN 24
#define KG_N_GREEDY 16
#define KG_N_VOCAB 1000
/* Q8_0 weights and Q8 activations against the float64 reference: per
 * position, max|diff| <= KG_Q8_TOL x max|exact|. Measured 2.3e-2 at every
 * level on this model (vs 1e-4 for F32); the bound leaves room, and still
 * fails if a kernel drops a block, a scale or a sign. */
#define KG_Q8_TOL 5e-2

/* `ember` next to this test binary. */
static void kg_ember_path(char *out, size_t size)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	ck_assert_int_gt(n, 0);
	self[n] = '\0';
	slash = strrchr(self, '/');
	ck_assert_ptr_nonnull(slash);
	*slash = '\0';
	snprintf(out, size, "%s/ember", self);
	ck_assert_msg(access(out, X_OK) == 0, "%s not built", out);
}

/* Runs `ember eval` at `level` on `model`: greedy ids into greedy[], all
 * prompt logits into `logits`. */
static void kg_eval(const char *ember, const char *level, const char *model,
		    const struct test_golden *g, const char *out, int32_t *greedy, float *logits)
{
	char cmd[4096], line[1024], *p;
	size_t len;
	FILE *f;
	int n = 0;

	/* EMBER_TEST_RUNNER (a trusted command prefix, e.g. "qemu-aarch64 -cpu
	 * max" from tests/arm64/run_qemu.sh) runs a cross-built `ember`. */
	const char *runner = getenv("EMBER_TEST_RUNNER");

	len = (size_t)snprintf(cmd, sizeof(cmd), "EMBER_CPU=%s %s '%s' eval -m '%s' -o '%s' "
				"--greedy %d --tokens ", level, runner ? runner : "", ember, model,
				out, KG_N_GREEDY);
	for (int i = 0; i < KG_N_IN; i++)
		len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, "%s%d", i ? "," : "",
					g->input[i]);
	snprintf(cmd + len, sizeof(cmd) - len, " 2>/dev/null");
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_msg(strncmp(line, "greedy:", 7) == 0, "%s: %s", level, line);
	for (p = line + 7; n < KG_N_GREEDY; n++) {
		char *end;
		long v = strtol(p, &end, 10);

		ck_assert_msg(end != p, "%s: short greedy line: %s", level, line);
		greedy[n] = (int32_t)v;
		p = end;
	}
	f = fopen(out, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(logits, sizeof(float), KG_N_IN * KG_N_VOCAB, f),
			  KG_N_IN * KG_N_VOCAB);
	fclose(f);
	unlink(out);
}

START_TEST(q8_0_golden_llama_keeps_greedy_and_logits_on_every_level)
{
	static const enum cpu_level levels[] = {CPU_LEVEL_SCALAR, CPU_LEVEL_AVX2,
						CPU_LEVEL_AVX512, CPU_LEVEL_NEON,
						CPU_LEVEL_DOTPROD, CPU_LEVEL_I8MM};
	char ember[PATH_MAX + 8], model[128], out[128];
	struct test_golden g;
	float *logits = malloc(sizeof(float) * KG_N_IN * KG_N_VOCAB);
	int32_t greedy[KG_N_GREEDY];
	int ran = 0;

	ck_assert_ptr_nonnull(logits);
	test_golden_load(&g, "llama", KG_N_VOCAB);
	kg_ember_path(ember, sizeof(ember));
	snprintf(model, sizeof(model), "/tmp/ember_test_kg_%ld_q8_0.gguf", (long)getpid());
	snprintf(out, sizeof(out), "/tmp/ember_test_kg_%ld_logits.f32", (long)getpid());
	test_write_golden_as(KG_DIR "model-f32.gguf", model, DTYPE_Q8_0);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		const char *name = cpu_level_name(levels[i]);
		double ratio;

		if (!kern_level_runs(levels[i]))
			continue;
		kg_eval(ember, name, model, &g, out, greedy, logits);
		ratio = test_logits_dist(logits, g.exact, KG_N_IN, KG_N_VOCAB);
		printf("kernels_golden: %s Q8_0: max|diff| / max|exact| = %.3g\n", name, ratio);
		ck_assert_msg(ratio <= KG_Q8_TOL, "%s: logits off by %g of max", name, ratio);
		for (int t = 0; t < KG_N_GREEDY; t++)
			ck_assert_msg(greedy[t] == g.greedy[t], "%s: greedy token %d: %d, expected %d",
				      name, t, greedy[t], g.greedy[t]);
		ran++;
	}
	ck_assert_int_ge(ran, 1);
	unlink(model);
	free(logits);
	test_golden_free(&g);
}
END_TEST

Suite *suite_kernels_golden(void)
{
	Suite *s = suite_create("kernels_golden");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, q8_0_golden_llama_keeps_greedy_and_logits_on_every_level);
	suite_add_tcase(s, tc);
	return s;
}
