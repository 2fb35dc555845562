/* test_sampler.c - the sampling chain: determinism, each cut, penalties,
 * ties, non-finite logits and config validation. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "sampler.h"

static struct sampler *make(const struct sampler_config *c, int32_t n_vocab)
{
	struct sampler *s = NULL;
	char err[EMBER_ERR_MAX] = "";

	ck_assert_msg(sampler_new(&s, c, n_vocab, err) == 0, "sampler_new: %s", err);
	return s;
}

/* A fixed pseudo-random logits vector, independent of the sampler's RNG. */
static void fill_logits(float *l, int32_t n, uint32_t seed)
{
	int32_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		l[i] = (float)(seed >> 8) / (float)(1u << 24) * 8.0f - 4.0f;
	}
}

/* Draws `n` tokens and counts them per id. */
static void draw_counts(struct sampler *s, const float *l, int32_t n_vocab, int n, int *count)
{
	int i;

	memset(count, 0, (size_t)n_vocab * sizeof(*count));
	for (i = 0; i < n; i++) {
		int32_t t = sampler_sample(s, l, n_vocab);

		ck_assert_int_ge(t, 0);
		ck_assert_int_lt(t, n_vocab);
		count[t]++;
	}
}

/* Pearson's chi-square of `count` against softmax(l / temperature). */
static double chi_square(const float *l, int32_t n_vocab, float temperature, const int *count, int n)
{
	double p[64], z = 0.0, chi = 0.0;
	int32_t i;

	ck_assert_int_le(n_vocab, 64);
	for (i = 0; i < n_vocab; i++) {
		p[i] = exp((double)l[i] / temperature);
		z += p[i];
	}
	for (i = 0; i < n_vocab; i++) {
		double e = p[i] / z * n;

		chi += (count[i] - e) * (count[i] - e) / e;
	}
	return chi;
}

START_TEST(same_seed_repeats_and_other_seed_differs)
{
	struct sampler_config c;
	struct sampler *a, *b, *d;
	float l[50];
	int i, differ = 0;

	fill_logits(l, 50, 7);
	sampler_config_default(&c);
	c.seed = 1234;
	a = make(&c, 50);
	b = make(&c, 50);
	c.seed = 1235;
	d = make(&c, 50);
	for (i = 0; i < 200; i++) {
		int32_t ta = sampler_sample(a, l, 50);

		ck_assert_int_eq(ta, sampler_sample(b, l, 50));
		differ += ta != sampler_sample(d, l, 50);
	}
	ck_assert_int_gt(differ, 20);
	sampler_free(a);
	sampler_free(b);
	sampler_free(d);
}
END_TEST

START_TEST(reset_replays_the_same_sequence)
{
	struct sampler_config c;
	struct sampler *s;
	int32_t first[100];
	float l[30];
	int i;

	fill_logits(l, 30, 3);
	sampler_config_default(&c);
	c.seed = 99;
	c.frequency_penalty = 0.5f;
	s = make(&c, 30);
	for (i = 0; i < 100; i++) {
		first[i] = sampler_sample(s, l, 30);
		sampler_accept(s, first[i]);
	}
	sampler_reset(s, 99);
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(sampler_sample(s, l, 30), first[i]);
		sampler_accept(s, first[i]);
	}
	sampler_free(s);
}
END_TEST

START_TEST(top_k_one_and_temperature_zero_are_greedy)
{
	struct sampler_config c;
	struct sampler *k1, *t0;
	float l[1000];
	uint32_t v;

	sampler_config_default(&c);
	c.top_k = 1;
	c.temperature = 0.8f;
	k1 = make(&c, 1000);
	sampler_config_default(&c);
	c.temperature = 0.0f;
	t0 = make(&c, 1000);
	for (v = 0; v < 50; v++) {
		int32_t i, best = 0;

		fill_logits(l, 1000, v);
		for (i = 1; i < 1000; i++)
			if (l[i] > l[best])
				best = i;
		ck_assert_int_eq(sampler_sample(k1, l, 1000), best);
		ck_assert_int_eq(sampler_sample(t0, l, 1000), best);
	}
	sampler_free(k1);
	sampler_free(t0);
}
END_TEST

START_TEST(neutral_cuts_leave_the_distribution_alone)
{
	static const float l[8] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.25f};
	static const int32_t top_ks[3] = {0, 8, 100}; /* off, == n_vocab, > n_vocab */
	struct sampler_config c;
	int count[8];
	int k;

	for (k = 0; k < 3; k++) {
		struct sampler *s;

		sampler_config_default(&c);
		c.seed = 42;
		c.top_k = top_ks[k];
		c.top_p = 1.0f;
		c.min_p = 0.0f;
		s = make(&c, 8);
		draw_counts(s, l, 8, 20000, count);
		/* df = 7: P(chi2 > 30) < 1e-4; a broken chain is off by thousands. */
		ck_assert_double_lt(chi_square(l, 8, 1.0f, count, 20000), 30.0);
		sampler_free(s);
	}
}
END_TEST

START_TEST(temperature_scales_the_logits)
{
	static const float l[6] = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
	struct sampler_config c;
	struct sampler *s;
	int count[6];

	sampler_config_default(&c);
	c.seed = 5;
	c.temperature = 2.5f;
	s = make(&c, 6);
	draw_counts(s, l, 6, 20000, count);
	ck_assert_double_lt(chi_square(l, 6, 2.5f, count, 20000), 25.0);
	/* The same counts are far from the T = 1 distribution. */
	ck_assert_double_gt(chi_square(l, 6, 1.0f, count, 20000), 500.0);
	sampler_free(s);
}
END_TEST

START_TEST(top_k_keeps_only_the_k_best_of_a_large_vocabulary)
{
	enum { N = 131072 };
	struct sampler_config c;
	struct sampler *s;
	float *l = malloc(N * sizeof(*l));
	int i, seen[5] = {0};
	static const int32_t best[5] = {777, 100000, 5, 65536, 131071};

	ck_assert_ptr_nonnull(l);
	fill_logits(l, N, 11); /* all in [-4, 4) */
	for (i = 0; i < 5; i++)
		l[best[i]] = 5.0f + 0.01f * (float)i;
	sampler_config_default(&c);
	c.top_k = 5;
	c.temperature = 10.0f; /* nearly flat among the five */
	s = make(&c, N);
	for (i = 0; i < 500; i++) {
		int32_t t = sampler_sample(s, l, N);
		int j, hit = 0;

		for (j = 0; j < 5; j++)
			if (t == best[j]) {
				seen[j] = 1;
				hit = 1;
			}
		ck_assert_msg(hit, "token %d is not in the top 5", (int)t);
	}
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(seen[i], 1);
	sampler_free(s);
	free(l);
}
END_TEST

START_TEST(tiny_top_p_always_picks_the_argmax)
{
	enum { N = 5000 };
	static const int32_t top_ks[2] = {0, 40};
	struct sampler_config c;
	float l[N];
	int k, i;

	fill_logits(l, N, 21);
	l[1234] = 4.5f; /* barely above the rest: a flat distribution */
	for (k = 0; k < 2; k++) {
		struct sampler *s;

		sampler_config_default(&c);
		c.top_k = top_ks[k];
		c.top_p = 1e-6f;
		c.temperature = 1.5f;
		s = make(&c, N);
		for (i = 0; i < 200; i++)
			ck_assert_int_eq(sampler_sample(s, l, N), 1234);
		sampler_free(s);
	}
}
END_TEST

START_TEST(top_p_keeps_the_smallest_best_first_set)
{
	/* probabilities 0.5, 0.3, 0.2 (ids 2, 0, 1) */
	const float l[3] = {logf(0.3f), logf(0.2f), logf(0.5f)};
	struct sampler_config c;
	struct sampler *s;
	int count[3];

	sampler_config_default(&c);
	c.top_p = 0.75f;
	s = make(&c, 3);
	draw_counts(s, l, 3, 4000, count);
	ck_assert_int_eq(count[1], 0);
	/* renormalized 5:3 -> 2500:1500 */
	ck_assert_int_gt(count[2], 2300);
	ck_assert_int_gt(count[0], 1300);
	sampler_free(s);
}
END_TEST

START_TEST(top_p_on_a_flat_vocabulary_keeps_the_lowest_ids)
{
	/* Every token equal: the nucleus of 0.5 is exactly the first half
	 * (ties go to the lower id); this forces the full-sort fallback. */
	enum { N = 4096 };
	struct sampler_config c;
	struct sampler *s;
	float l[N];
	int i, high = 0;

	for (i = 0; i < N; i++)
		l[i] = 0.25f;
	sampler_config_default(&c);
	c.top_p = 0.5f;
	s = make(&c, N);
	for (i = 0; i < 2000; i++) {
		int32_t t = sampler_sample(s, l, N);

		ck_assert_int_lt(t, N / 2);
		high += t >= N / 4;
	}
	ck_assert_int_gt(high, 800); /* and the whole half is used */
	sampler_free(s);

	/* 33 equal: the first pivot (id 16) is itself the boundary, 16.5 of 33. */
	{
		struct sampler *s33 = make(&c, 33);
		int count[33];

		draw_counts(s33, l, 33, 2000, count);
		for (i = 0; i < 33; i++)
			ck_assert_msg(i <= 16 ? count[i] > 0 : count[i] == 0, "token %d: %d", i,
				      count[i]);
		sampler_free(s33);
	}
}
END_TEST

static const float *sort_logits; /* for by_logit_desc (qsort has no context) */

static int by_logit_desc(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	if (sort_logits[x] != sort_logits[y])
		return sort_logits[x] > sort_logits[y] ? -1 : 1;
	return x < y ? -1 : 1;
}

START_TEST(top_p_matches_a_sorted_reference)
{
	enum { N = 1000 };
	static const float top_ps[4] = {0.3f, 0.5f, 0.8f, 0.97f};
	static float l[N];
	static int32_t order[N];
	static int in_nucleus[N], count[N];
	struct sampler_config c;
	int32_t i;
	int k;

	fill_logits(l, N, 5);
	for (i = 0; i < N; i++)
		order[i] = i;
	sort_logits = l;
	qsort(order, N, sizeof(order[0]), by_logit_desc);
	for (k = 0; k < 4; k++) {
		double z = 0.0, cum = 0.0;
		struct sampler *s;
		int32_t m = 0;

		for (i = 0; i < N; i++)
			z += exp((double)l[i] / 3.0);
		memset(in_nucleus, 0, sizeof(in_nucleus));
		while (cum < top_ps[k] * z) {
			cum += exp((double)l[order[m]] / 3.0);
			in_nucleus[order[m++]] = 1;
		}
		sampler_config_default(&c);
		c.top_p = top_ps[k];
		c.temperature = 3.0f; /* flat: a wrongly kept token would be drawn */
		c.seed = (uint64_t)k;
		s = make(&c, N);
		draw_counts(s, l, N, 10000, count);
		for (i = 0; i < N; i++)
			ck_assert_msg(in_nucleus[i] || count[i] == 0, "top_p %g: token %d drawn",
				      (double)top_ps[k], (int)i);
		ck_assert_int_gt(count[order[0]], 0);
		ck_assert_int_gt(count[order[m - 1]], 0); /* the last one kept is used */
		sampler_free(s);
	}
}
END_TEST

START_TEST(min_p_cuts_relative_to_the_best)
{
	/* weights relative to the best: 1, 0.6, 0.4, 1, ~0 (ids 0 and 3 tie) */
	const float l[5] = {0.0f, logf(0.6f), logf(0.4f), 0.0f, -20.0f};
	struct sampler_config c;
	struct sampler *s;
	int count[5];

	sampler_config_default(&c);
	c.min_p = 0.5f;
	s = make(&c, 5);
	draw_counts(s, l, 5, 3000, count);
	ck_assert_int_eq(count[2] + count[4], 0);
	ck_assert_int_gt(count[1], 300);
	sampler_free(s);

	/* min_p = 1 keeps exactly the tied best ones. */
	c.min_p = 1.0f;
	s = make(&c, 5);
	draw_counts(s, l, 5, 2000, count);
	ck_assert_int_eq(count[1] + count[2] + count[4], 0);
	ck_assert_int_gt(count[0], 800);
	ck_assert_int_gt(count[3], 800);
	sampler_free(s);

	/* The same through the top_k (sorted) path: top_k keeps id 2, min_p not. */
	c.min_p = 0.5f;
	c.top_k = 4;
	s = make(&c, 5);
	draw_counts(s, l, 5, 2000, count);
	ck_assert_int_eq(count[2] + count[4], 0);
	ck_assert_int_gt(count[1], 200);
	sampler_free(s);
}
END_TEST

/* Greedy choice after accepting `hist`, with one penalty set. */
static int32_t greedy_after(const float *l, int32_t n, const int32_t *hist, int n_hist, float rep,
			    float presence, float frequency, int32_t last_n)
{
	struct sampler_config c;
	struct sampler *s;
	float copy[8];
	int32_t t;
	int i;

	sampler_config_default(&c);
	c.temperature = 0.0f;
	c.repetition_penalty = rep;
	c.presence_penalty = presence;
	c.frequency_penalty = frequency;
	c.penalty_last_n = last_n;
	s = make(&c, n);
	for (i = 0; i < n_hist; i++)
		ck_assert_int_eq(sampler_accept(s, hist[i]), 0);
	memcpy(copy, l, (size_t)n * sizeof(*l));
	t = sampler_sample(s, l, n);
	ck_assert_int_eq(memcmp(copy, l, (size_t)n * sizeof(*l)), 0); /* caller's logits untouched */
	sampler_free(s);
	return t;
}

START_TEST(penalties_move_the_argmax_as_computed_by_hand)
{
	static const float rep[4] = {2.0f, 1.5f, -1.0f, 1.0f};
	static const float neg[2] = {-1.0f, -1.5f};
	static const float pres[2] = {1.0f, 0.9f};
	static const float freq[2] = {1.0f, 0.5f};
	static const float close[2] = {0.9f, 1.0f};
	static const int32_t h110[3] = {1, 1, 0};
	static const int32_t h0[3] = {0, 0, 0};
	static const int32_t h01[3] = {0, 1, 1};

	/* repetition: 2.0 / 2 = 1.0 < 1.5, once however often token 0 came */
	ck_assert_int_eq(greedy_after(rep, 4, NULL, 0, 2.0f, 0, 0, 64), 0);
	ck_assert_int_eq(greedy_after(rep, 4, h0, 1, 2.0f, 0, 0, 64), 1);
	ck_assert_int_eq(greedy_after(rep, 4, h0, 3, 1.3f, 0, 0, 64), 0); /* 2/1.3 = 1.54 */
	/* a negative logit is multiplied: -1 * 2 = -2 < -1.5 */
	ck_assert_int_eq(greedy_after(neg, 2, h0, 1, 2.0f, 0, 0, 64), 1);
	/* presence: 1.0 - 0.2 = 0.8 < 0.9, whatever the count */
	ck_assert_int_eq(greedy_after(pres, 2, h0, 3, 1.0f, 0.2f, 0, 64), 1);
	ck_assert_int_eq(greedy_after(pres, 2, h0, 1, 1.0f, 0.05f, 0, 64), 0);
	/* frequency: 1.0 - 0.2 * 2 = 0.6 > 0.5; 1.0 - 0.2 * 3 = 0.4 < 0.5 */
	ck_assert_int_eq(greedy_after(freq, 2, h0, 2, 1.0f, 0, 0.2f, 64), 0);
	ck_assert_int_eq(greedy_after(freq, 2, h0, 3, 1.0f, 0, 0.2f, 64), 1);
	/* negative penalties favour repeats: 0.9 + 0.5 > 1.0 */
	ck_assert_int_eq(greedy_after(pres, 2, h01 + 1, 1, 1.0f, -0.5f, 0, 64), 1);
	/* the window: with last_n = 2, token 0 of {0, 1, 1} has left it */
	ck_assert_int_eq(greedy_after(freq, 2, h01, 3, 1.0f, 0, 1.0f, 2), 0);
	ck_assert_int_eq(greedy_after(freq, 2, h01, 1, 1.0f, 0, 1.0f, 2), 1);
	/* {1, 1, 0} with last_n = 2 leaves one 1: 1.0 - 0.3 = 0.7 > 0.9 - 0.3 */
	ck_assert_int_eq(greedy_after(close, 2, h110, 3, 1.0f, 0, 0.3f, 2), 1);
	ck_assert_int_eq(greedy_after(close, 2, h110, 2, 1.0f, 0, 0.3f, 2), 0);
	/* penalty_last_n = 0 turns them off */
	ck_assert_int_eq(greedy_after(freq, 2, h0, 3, 2.0f, 2.0f, 2.0f, 0), 0);
}
END_TEST

START_TEST(ties_go_to_the_lowest_id)
{
	static const float flat[5] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
	static const float l[6] = {1.0f, 3.0f, 0.0f, 3.0f, 3.0f, -2.0f};
	struct sampler_config c;
	struct sampler *s;
	int count[6];

	ck_assert_int_eq(greedy_after(flat, 5, NULL, 0, 1.0f, 0, 0, 64), 0);
	ck_assert_int_eq(greedy_after(l, 6, NULL, 0, 1.0f, 0, 0, 64), 1);
	sampler_config_default(&c);
	c.top_k = 1;
	s = make(&c, 6);
	ck_assert_int_eq(sampler_sample(s, l, 6), 1);
	sampler_free(s);
	/* top_k = 2 among three tied best: ids 1 and 3, never 4 */
	c.top_k = 2;
	s = make(&c, 6);
	draw_counts(s, l, 6, 1000, count);
	ck_assert_int_eq(count[4], 0);
	ck_assert_int_gt(count[1], 350);
	ck_assert_int_gt(count[3], 350);
	sampler_free(s);
}
END_TEST

START_TEST(nan_and_minus_inf_are_never_chosen)
{
	float l[5] = {NAN, -INFINITY, -30.0f, NAN, -INFINITY};
	const int32_t two = 2;
	struct sampler_config c;
	struct sampler *g, *s;
	int count[5], i;

	sampler_config_default(&c);
	s = make(&c, 5);
	c.temperature = 0.0f;
	g = make(&c, 5);
	ck_assert_int_eq(sampler_sample(g, l, 5), 2);
	ck_assert_int_eq(greedy_after(l, 5, &two, 1, 1.5f, 0.5f, 0, 64), 2); /* the copying path */
	draw_counts(s, l, 5, 200, count);
	ck_assert_int_eq(count[2], 200);
	/* +inf: certain; two of them share. */
	l[0] = INFINITY;
	l[4] = INFINITY;
	ck_assert_int_eq(sampler_sample(g, l, 5), 0);
	draw_counts(s, l, 5, 1000, count);
	ck_assert_int_eq(count[0] + count[4], 1000);
	ck_assert_int_gt(count[0], 350);
	ck_assert_int_gt(count[4], 350);
	/* nothing possible: an error, never a token */
	for (i = 0; i < 5; i++)
		l[i] = i % 2 ? NAN : -INFINITY;
	ck_assert_int_eq(sampler_sample(g, l, 5), EMBER_ERANGE);
	ck_assert_int_eq(sampler_sample(s, l, 5), EMBER_ERANGE);
	ck_assert_int_eq(greedy_after(l, 5, &two, 1, 1.5f, 0.5f, 0, 64), EMBER_ERANGE);
	sampler_free(g);
	sampler_free(s);
}
END_TEST

/* The lowest id of the strictly greatest logit, NaN and -inf never: the
 * reference for greedy's fast path. */
static int32_t strict_scan(const float *l, int32_t n)
{
	float max = -INFINITY;
	int32_t i, best = EMBER_ERANGE;

	for (i = 0; i < n; i++)
		if (l[i] > max) {
			max = l[i];
			best = i;
		}
	return best;
}

/* Greedy over logits straight from the caller (its blocked two-pass
 * argmax) gives the strict scan's token at every length, with the
 * maximum in a block, in the tail, tied across both, beside NaN, -inf and
 * +inf, and an error when nothing can be chosen. */
START_TEST(greedy_matches_a_strict_scan_at_any_length)
{
	static const int32_t lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 47, 100, 32000, 32007};
	struct sampler_config c;
	uint32_t seed = 7;
	size_t li;
	int round;

	sampler_config_default(&c);
	c.temperature = 0.0f;
	for (li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
		const int32_t n = lens[li];
		float *l = malloc((size_t)n * sizeof(*l));
		struct sampler *g = make(&c, n);

		ck_assert_ptr_nonnull(l);
		for (round = 0; round < 24; round++) {
			int32_t i;

			fill_logits(l, n, (uint32_t)round * 977u + (uint32_t)n);
			for (i = 0; i < n; i++) {
				seed = seed * 1664525u + 1013904223u;
				switch (round % 6 == 5 ? 0 : (seed >> 24) % 16) {
				case 0: l[i] = (seed >> 8) & 1 ? NAN : -INFINITY; break;
				case 1: l[i] = 3.0f; break; /* ties at a small value */
				case 2: if (round % 4 == 3) l[i] = INFINITY; break;
				default: break;
				}
			}
			if (round % 3 == 1) /* the maximum, tied, in the tail and in a block */
				l[n - 1] = l[n / 2] = 9.0f;
			ck_assert_int_eq(sampler_sample(g, l, n), strict_scan(l, n));
		}
		sampler_free(g);
		free(l);
	}
}
END_TEST

START_TEST(validation_rejects_each_bad_value)
{
	struct sampler_config c;
	struct sampler *s = (struct sampler *)&c; /* non-NULL: sampler_new must clear it */
	char err[EMBER_ERR_MAX];
	int i;

	sampler_config_default(&c);
	ck_assert_int_eq(sampler_config_validate(&c, err), 0);
	for (i = 0; i < 16; i++) {
		const char *field = NULL;

		sampler_config_default(&c);
		switch (i) {
		case 0: c.temperature = -0.1f; field = "temperature"; break;
		case 1: c.temperature = NAN; field = "temperature"; break;
		case 2: c.top_p = 0.0f; field = "top_p"; break;
		case 3: c.top_p = 1.01f; field = "top_p"; break;
		case 4: c.min_p = -0.01f; field = "min_p"; break;
		case 5: c.min_p = 1.5f; field = "min_p"; break;
		case 6: c.top_k = -1; field = "top_k"; break;
		case 7: c.presence_penalty = 2.01f; field = "presence_penalty"; break;
		case 8: c.presence_penalty = -2.5f; field = "presence_penalty"; break;
		case 9: c.frequency_penalty = 3.0f; field = "frequency_penalty"; break;
		case 10: c.frequency_penalty = -2.01f; field = "frequency_penalty"; break;
		case 11: c.repetition_penalty = 0.0f; field = "repetition_penalty"; break;
		case 12: c.repetition_penalty = NAN; field = "repetition_penalty"; break;
		case 13: c.penalty_last_n = -1; field = "penalty_last_n"; break;
		case 14: c.penalty_last_n = SAMPLER_PENALTY_LAST_N_MAX + 1; field = "penalty_last_n"; break;
		case 15: c.top_p = NAN; field = "top_p"; break;
		}
		err[0] = '\0';
		ck_assert_int_eq(sampler_config_validate(&c, err), EMBER_EINVAL);
		ck_assert_msg(strstr(err, field) != NULL, "case %d: '%s' does not name %s", i, err, field);
		ck_assert_int_eq(sampler_new(&s, &c, 10, NULL), EMBER_EINVAL);
		ck_assert_ptr_null(s);
	}
	/* the edges themselves are fine */
	sampler_config_default(&c);
	c.top_p = 1.0f;
	c.min_p = 1.0f;
	c.presence_penalty = -2.0f;
	c.frequency_penalty = 2.0f;
	c.temperature = 0.0f;
	ck_assert_int_eq(sampler_config_validate(&c, err), 0);
	ck_assert_int_eq(sampler_new(&s, &c, 0, err), EMBER_EINVAL);
}
END_TEST

START_TEST(misuse_is_an_error_not_a_crash)
{
	struct sampler_config c;
	struct sampler *s;
	float l[4] = {0};

	sampler_config_default(&c);
	s = make(&c, 4);
	ck_assert_int_eq(sampler_sample(s, l, 5), EMBER_EINVAL);
	ck_assert_int_eq(sampler_accept(s, 4), EMBER_EINVAL);
	ck_assert_int_eq(sampler_accept(s, -1), EMBER_EINVAL);
	ck_assert_int_eq(sampler_accept(s, 3), 0);
	sampler_free(s);
	sampler_free(NULL);
}
END_TEST


START_TEST(a_mask_forbids_tokens_before_any_other_step)
{
	struct sampler_config c;
	struct sampler *s;
	float logits[70];
	uint32_t allow[3] = {0, 0, 0};
	int i;

	for (i = 0; i < 70; i++)
		logits[i] = (float)(70 - i); /* token 0 is the best */
	allow[1] = 1u << 3;                 /* token 35 */
	allow[2] = 1u << 1;                 /* token 65 */
	sampler_config_default(&c);
	c.temperature = 0.0f;
	ck_assert_int_eq(sampler_new(&s, &c, 70, NULL), 0);
	ck_assert_int_eq(sampler_sample_masked(s, logits, 70, allow), 35);
	sampler_free(s);
	c.temperature = 5.0f;
	c.top_k = 40; /* would keep only tokens 0..39 without the mask */
	ck_assert_int_eq(sampler_new(&s, &c, 70, NULL), 0);
	for (i = 0; i < 200; i++) {
		int32_t t = sampler_sample_masked(s, logits, 70, allow);

		ck_assert(t == 35 || t == 65);
	}
	allow[1] = allow[2] = 0;
	logits[0] = -INFINITY;
	allow[0] = 1;
	ck_assert_int_eq(sampler_sample_masked(s, logits, 70, allow), EMBER_ERANGE);
	sampler_free(s);
}
END_TEST

/* logprobs: log-softmax of (masked, penalized) logits / temperature over
 * the whole vocabulary, checked against a direct computation; the top list
 * is best first; greedy counts as temperature 1; a masked token is -inf. */
START_TEST(logprobs_are_the_log_softmax_actually_sampled_from)
{
	struct sampler_config c;
	struct sampler_logprob top[SAMPLER_MAX_TOP_LOGPROBS];
	float logits[40], lp;
	double z = 0.0;
	uint32_t allow[2] = {0xffffffffu, 0xffu};
	struct sampler *s;
	int32_t i, n, best = 0;

	fill_logits(logits, 40, 7);
	sampler_config_default(&c);
	c.temperature = 0.5f;
	c.top_k = 3; /* not applied to logprobs */
	s = make(&c, 40);
	for (i = 0; i < 40; i++) {
		z += exp((double)logits[i] / 0.5);
		if (logits[i] > logits[best])
			best = i;
	}
	n = sampler_logprobs(s, logits, 40, NULL, 5, &lp, top, 4);
	ck_assert_int_eq(n, 4);
	ck_assert_double_eq_tol(lp, logits[5] / 0.5 - log(z), 1e-4);
	ck_assert_int_eq(top[0].id, best);
	ck_assert_double_eq_tol(top[0].logprob, logits[best] / 0.5 - log(z), 1e-4);
	for (i = 1; i < 4; i++)
		ck_assert(top[i].logprob <= top[i - 1].logprob);
	/* a mask: token 39 impossible, and the rest renormalized */
	allow[1] = 0x7fu;
	n = sampler_logprobs(s, logits, 40, allow, 39, &lp, top, 0);
	ck_assert_int_eq(n, 0);
	ck_assert(lp == -INFINITY);
	sampler_free(s);
	/* greedy: temperature 1 */
	c.temperature = 0.0f;
	s = make(&c, 40);
	z = 0.0;
	for (i = 0; i < 40; i++)
		z += exp((double)logits[i]);
	ck_assert_int_eq(sampler_logprobs(s, logits, 40, NULL, 3, &lp, top, 1), 1);
	ck_assert_double_eq_tol(lp, logits[3] - log(z), 1e-4);
	ck_assert_int_eq(sampler_logprobs(s, logits, 39, NULL, 3, &lp, top, 1), EMBER_EINVAL);
	ck_assert_int_eq(sampler_logprobs(s, logits, 40, NULL, 40, &lp, top, 1), EMBER_EINVAL);
	ck_assert_int_eq(sampler_logprobs(s, logits, 40, NULL, 0, &lp, top, 21), EMBER_EINVAL);
	sampler_free(s);
}
END_TEST

/* logit_bias: -100 bans the greedy choice, +100 forces a token; the
 * logprobs see the biased distribution; bad entries are refused. */
START_TEST(logit_bias_moves_the_choice_and_the_logprobs)
{
	struct sampler_config c;
	struct sampler_bias ban, force = {17, 100.0f}, bad = {40, 1.0f};
	struct sampler_logprob top[1];
	char err[EMBER_ERR_MAX];
	float logits[40], lp;
	struct sampler *s;
	int32_t best;

	fill_logits(logits, 40, 3);
	sampler_config_default(&c);
	c.temperature = 0.0f;
	s = make(&c, 40);
	best = sampler_sample(s, logits, 40);
	ban.id = best;
	ban.bias = -100.0f;
	ck_assert_int_eq(sampler_set_bias(s, &ban, 1, err), 0);
	ck_assert_int_ne(sampler_sample(s, logits, 40), best);
	ck_assert_int_eq(sampler_logprobs(s, logits, 40, NULL, best, &lp, top, 1), 1);
	ck_assert(lp < -90.0f);
	ck_assert_int_ne(top[0].id, best);
	ck_assert_int_eq(sampler_set_bias(s, &force, 1, err), 0);
	ck_assert_int_eq(sampler_sample(s, logits, 40), 17);
	ck_assert_int_eq(sampler_set_bias(s, &bad, 1, err), EMBER_EINVAL);
	ck_assert_int_eq(sampler_sample(s, logits, 40), 17); /* unchanged */
	ck_assert_int_eq(sampler_set_bias(s, NULL, 0, err), 0);
	ck_assert_int_eq(sampler_sample(s, logits, 40), best);
	sampler_free(s);
}
END_TEST

Suite *suite_sampler(void)
{
	Suite *s = suite_create("sampler");
	TCase *tc = tcase_create("sampler");

	tcase_add_test(tc, same_seed_repeats_and_other_seed_differs);
	tcase_add_test(tc, reset_replays_the_same_sequence);
	tcase_add_test(tc, top_k_one_and_temperature_zero_are_greedy);
	tcase_add_test(tc, neutral_cuts_leave_the_distribution_alone);
	tcase_add_test(tc, temperature_scales_the_logits);
	tcase_add_test(tc, top_k_keeps_only_the_k_best_of_a_large_vocabulary);
	tcase_add_test(tc, tiny_top_p_always_picks_the_argmax);
	tcase_add_test(tc, top_p_keeps_the_smallest_best_first_set);
	tcase_add_test(tc, top_p_on_a_flat_vocabulary_keeps_the_lowest_ids);
	tcase_add_test(tc, top_p_matches_a_sorted_reference);
	tcase_add_test(tc, min_p_cuts_relative_to_the_best);
	tcase_add_test(tc, penalties_move_the_argmax_as_computed_by_hand);
	tcase_add_test(tc, ties_go_to_the_lowest_id);
	tcase_add_test(tc, nan_and_minus_inf_are_never_chosen);
	tcase_add_test(tc, greedy_matches_a_strict_scan_at_any_length);
	tcase_add_test(tc, validation_rejects_each_bad_value);
	tcase_add_test(tc, misuse_is_an_error_not_a_crash);
	tcase_add_test(tc, a_mask_forbids_tokens_before_any_other_step);
	tcase_add_test(tc, logprobs_are_the_log_softmax_actually_sampled_from);
	tcase_add_test(tc, logit_bias_moves_the_choice_and_the_logprobs);
	suite_add_tcase(s, tc);
	return s;
}
