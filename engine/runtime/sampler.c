/* sampler.c - the sampling chain (see sampler.h for the order and rules). */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

/* One candidate: `v` is its logit until the temperature step, its
 * unnormalized probability exp((logit - max) / T) after it. */
struct cand {
	float v;
	int32_t id;
};

struct sampler {
	struct sampler_config cfg;
	int32_t n_vocab;
	uint64_t rng[4];     /* xoshiro256** state */
	struct cand *cand;   /* (n_vocab) scratch, rebuilt every call */
	int32_t *count;      /* (n_vocab) occurrences of each token in the window */
	int32_t *window;     /* (penalty_last_n) ring of the latest accepted tokens */
	int32_t window_len;  /* tokens in the ring */
	int32_t window_next; /* where the next token goes */
	struct sampler_bias *bias; /* [n_bias] logit biases, or NULL */
	size_t n_bias;
};

/* ---- random numbers --------------------------------------------------- */

/* splitmix64 spreads one 64-bit seed over xoshiro's 256 bits of state, so
 * that neighbouring seeds give unrelated streams and no seed gives the
 * all-zero state xoshiro cannot leave. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static void rng_seed(uint64_t st[4], uint64_t seed)
{
	int i;

	for (i = 0; i < 4; i++)
		st[i] = splitmix64(&seed);
}

/* xoshiro256** (Blackman and Vigna): small, fast, and good in every bit. */
static uint64_t rng_next(uint64_t st[4])
{
	uint64_t result = rotl(st[1] * 5, 7) * 9;
	uint64_t t = st[1] << 17;

	st[2] ^= st[0];
	st[3] ^= st[1];
	st[1] ^= st[2];
	st[0] ^= st[3];
	st[2] ^= t;
	st[3] = rotl(st[3], 45);
	return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4])
{
	return (double)(rng_next(st) >> 11) * 0x1.0p-53;
}

/* ---- configuration ---------------------------------------------------- */

void sampler_config_default(struct sampler_config *c)
{
	c->temperature = 1.0f;
	c->top_k = 0;
	c->top_p = 1.0f;
	c->min_p = 0.0f;
	c->repetition_penalty = 1.0f;
	c->presence_penalty = 0.0f;
	c->frequency_penalty = 0.0f;
	c->penalty_last_n = 64;
	c->seed = 0;
}

int sampler_config_validate(const struct sampler_config *c, char *err)
{
	/* Written as !(in range) so that NaN, which fails every comparison,
	 * is rejected too. */
	if (!(c->temperature >= 0.0f && c->temperature <= FLT_MAX))
		return ember_seterr(err, EMBER_EINVAL, "temperature must be a number >= 0 (got %g)",
				    (double)c->temperature);
	if (c->top_k < 0)
		return ember_seterr(err, EMBER_EINVAL, "top_k must be >= 0 (got %d)", (int)c->top_k);
	if (!(c->top_p > 0.0f && c->top_p <= 1.0f))
		return ember_seterr(err, EMBER_EINVAL, "top_p must be in (0, 1] (got %g)",
				    (double)c->top_p);
	if (!(c->min_p >= 0.0f && c->min_p <= 1.0f))
		return ember_seterr(err, EMBER_EINVAL, "min_p must be in [0, 1] (got %g)",
				    (double)c->min_p);
	if (!(c->repetition_penalty > 0.0f && c->repetition_penalty <= FLT_MAX))
		return ember_seterr(err, EMBER_EINVAL, "repetition_penalty must be > 0 (got %g)",
				    (double)c->repetition_penalty);
	if (!(fabsf(c->presence_penalty) <= SAMPLER_PENALTY_MAX))
		return ember_seterr(err, EMBER_EINVAL, "presence_penalty must be in [-2, 2] (got %g)",
				    (double)c->presence_penalty);
	if (!(fabsf(c->frequency_penalty) <= SAMPLER_PENALTY_MAX))
		return ember_seterr(err, EMBER_EINVAL, "frequency_penalty must be in [-2, 2] (got %g)",
				    (double)c->frequency_penalty);
	if (c->penalty_last_n < 0 || c->penalty_last_n > SAMPLER_PENALTY_LAST_N_MAX)
		return ember_seterr(err, EMBER_EINVAL, "penalty_last_n must be in [0, %d] (got %d)",
				    SAMPLER_PENALTY_LAST_N_MAX, (int)c->penalty_last_n);
	return 0;
}

/* ---- lifetime ----------------------------------------------------------- */

int sampler_new(struct sampler **out, const struct sampler_config *c, int32_t n_vocab, char *err)
{
	struct sampler *s = NULL;
	int rc;

	*out = NULL;
	rc = sampler_config_validate(c, err);
	if (rc < 0)
		return rc;
	if (n_vocab <= 0)
		return ember_seterr(err, EMBER_EINVAL, "n_vocab must be > 0 (got %d)", (int)n_vocab);
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		goto nomem;
	s->cfg = *c;
	s->n_vocab = n_vocab;
	s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
	if (s->cand == NULL)
		goto nomem;
	if (c->penalty_last_n > 0) {
		s->count = calloc((size_t)n_vocab, sizeof(*s->count));
		s->window = malloc((size_t)c->penalty_last_n * sizeof(*s->window));
		if (s->count == NULL || s->window == NULL)
			goto nomem;
	}
	rng_seed(s->rng, c->seed);
	*out = s;
	return 0;
nomem:
	sampler_free(s);
	return ember_seterr(err, EMBER_ENOMEM, "sampler for %d tokens: out of memory", (int)n_vocab);
}

void sampler_free(struct sampler *s)
{
	if (s == NULL)
		return;
	free(s->bias);
	free(s->window);
	free(s->count);
	free(s->cand);
	free(s);
}

void sampler_reset(struct sampler *s, uint64_t seed)
{
	int32_t i;

	for (i = 0; i < s->window_len; i++)
		s->count[s->window[i]] = 0;
	s->window_len = 0;
	s->window_next = 0;
	s->cfg.seed = seed;
	rng_seed(s->rng, seed);
}

int sampler_accept(struct sampler *s, int32_t token)
{
	int32_t cap = s->cfg.penalty_last_n;

	if (token < 0 || token >= s->n_vocab)
		return EMBER_EINVAL;
	if (cap == 0)
		return 0;
	if (s->window_len == cap)
		s->count[s->window[s->window_next]]--;
	else
		s->window_len++;
	s->window[s->window_next] = token;
	s->count[token]++;
	s->window_next = (s->window_next + 1) % cap;
	return 0;
}

int sampler_set_bias(struct sampler *s, const struct sampler_bias *b, size_t n, char *err)
{
	struct sampler_bias *copy = NULL;
	size_t i;

	if (n > SAMPLER_MAX_BIAS)
		return ember_seterr(err, EMBER_EINVAL, "at most %d logit biases (got %zu)",
				    SAMPLER_MAX_BIAS, n);
	for (i = 0; i < n; i++) {
		if (b[i].id < 0 || b[i].id >= s->n_vocab)
			return ember_seterr(err, EMBER_EINVAL, "logit_bias: token %d is outside the "
					    "vocabulary (%d tokens)", (int)b[i].id, (int)s->n_vocab);
		if (!isfinite(b[i].bias))
			return ember_seterr(err, EMBER_EINVAL, "logit_bias: token %d: the bias is "
					    "not a finite number", (int)b[i].id);
	}
	if (n > 0) {
		copy = malloc(n * sizeof(*copy));
		if (copy == NULL)
			return ember_seterr(err, EMBER_ENOMEM, "logit biases: out of memory");
		memcpy(copy, b, n * sizeof(*copy));
	}
	free(s->bias);
	s->bias = copy;
	s->n_bias = n;
	return 0;
}

/* After the mask: the biases added (a masked token stays -inf). */
static void apply_bias(const struct sampler *s, struct cand *cand)
{
	size_t i;

	for (i = 0; i < s->n_bias; i++) {
		struct cand *c = &cand[s->bias[i].id];

		if (c->v != -INFINITY)
			c->v = fminf(c->v + s->bias[i].bias, FLT_MAX);
	}
}

/* ---- the chain ------------------------------------------------------------ */

/* Copies the logits into the scratch candidates (index == id), NaN as -inf
 * and +inf as FLT_MAX, so that later arithmetic never meets inf - inf. */
static void load_logits(struct cand *cand, const float *logits, int32_t n)
{
	int32_t i;

	for (i = 0; i < n; i++) {
		float v = logits[i];

		if (isnan(v))
			v = -INFINITY;
		else if (v > FLT_MAX)
			v = FLT_MAX;
		cand[i].v = v;
		cand[i].id = i;
	}
}

static int penalties_active(const struct sampler_config *c)
{
	return c->penalty_last_n > 0 && (c->repetition_penalty != 1.0f || c->presence_penalty != 0.0f ||
					 c->frequency_penalty != 0.0f);
}

/* Step 1, on candidates still indexed by id. Each distinct token is
 * penalized once: its count is negated while it is done, then restored, so
 * no extra per-vocabulary marker array is needed. */
static void apply_penalties(struct sampler *s, struct cand *cand)
{
	const struct sampler_config *c = &s->cfg;
	int32_t i;

	for (i = 0; i < s->window_len; i++) {
		int32_t t = s->window[i];
		int32_t n = s->count[t];
		float v = cand[t].v;

		if (n <= 0)
			continue;
		if (v > 0.0f)
			v /= c->repetition_penalty;
		else
			v *= c->repetition_penalty;
		v -= c->presence_penalty + c->frequency_penalty * (float)n;
		cand[t].v = isnan(v) ? -INFINITY : v;
		s->count[t] = -n;
	}
	for (i = 0; i < s->window_len; i++) {
		int32_t t = s->window[i];

		if (s->count[t] < 0)
			s->count[t] = -s->count[t];
	}
}

/* The candidates' order everywhere: higher value first, then lower id. */
static int better(const struct cand *a, const struct cand *b)
{
	return a->v > b->v || (a->v == b->v && a->id < b->id);
}

/* Greedy: the best candidate, or -1 if all are -inf. Scanning ids upwards
 * with a strict comparison keeps the lowest id among equals. */
static int32_t argmax(const struct cand *cand, int32_t n)
{
	int32_t i, best = 0;

	for (i = 1; i < n; i++)
		if (cand[i].v > cand[best].v)
			best = i;
	return cand[best].v == -INFINITY ? -1 : cand[best].id;
}

/* Lanes of argmax_logits' first pass. */
#define ARGMAX_LANES 16

/*
 * Greedy straight on the caller's logits, when no penalty needs a copy:
 * NaN and -inf never compare greater, so they are skipped for free. Two
 * passes, the same token as one scan of strict comparisons (the lowest id
 * of the maximum): the maximum over independent lanes, whose `x > m ? x :
 * m` is MAXPS's own rule (a NaN keeps m), so the compiler vectorizes it,
 * then the first id holding it. It runs once per stream per step on the
 * worker while the compute threads wait: for 32000 logits (8 rows in
 * turn, as a step leaves them) the one-compare-a-value scan took 38-49 us
 * on Zen 4, this 21.
 */
static int32_t argmax_logits(const float *logits, int32_t n)
{
	float lane[ARGMAX_LANES], max = -INFINITY;
	int32_t i, k;

	for (k = 0; k < ARGMAX_LANES; k++)
		lane[k] = -INFINITY;
	for (i = 0; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
		for (k = 0; k < ARGMAX_LANES; k++)
			lane[k] = logits[i + k] > lane[k] ? logits[i + k] : lane[k];
	for (; i < n; i++)
		max = logits[i] > max ? logits[i] : max;
	for (k = 0; k < ARGMAX_LANES; k++)
		max = lane[k] > max ? lane[k] : max;
	if (!(max > -INFINITY))
		return -1;
	for (i = 0; i < n; i++)
		if (logits[i] == max)
			return i;
	return -1;
}

/* Drops -inf candidates (they can never be drawn); returns how many remain. */
static int32_t drop_impossible(struct cand *cand, int32_t n)
{
	int32_t i, m = 0;

	for (i = 0; i < n; i++)
		if (cand[i].v != -INFINITY)
			cand[m++] = cand[i];
	return m;
}

/* Min-heap on `better` (the worst candidate at the root). */
static void sift_down(struct cand *h, int32_t n, int32_t i)
{
	for (;;) {
		int32_t l = 2 * i + 1, r = l + 1, w = i;
		struct cand t;

		if (l < n && better(&h[w], &h[l]))
			w = l;
		if (r < n && better(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

/*
 * Leaves the best `k` of `n` candidates in cand[0..k), best first
 * (1 <= k <= n). A heap of k scanned once over the rest costs n compares
 * plus log k work only for the few that beat the current k-th best, instead
 * of sorting all n; with k == n it is a heapsort.
 */
static void select_best(struct cand *cand, int32_t n, int32_t k)
{
	int32_t i;

	for (i = k / 2 - 1; i >= 0; i--)
		sift_down(cand, k, i);
	for (i = k; i < n; i++) {
		if (better(&cand[i], &cand[0])) {
			cand[0] = cand[i];
			sift_down(cand, k, 0);
		}
	}
	for (i = k - 1; i > 0; i--) {
		struct cand t = cand[0];

		cand[0] = cand[i];
		cand[i] = t;
		sift_down(cand, i, 0);
	}
}

/* Step 3: logits become exp((logit - max) / T), so the best weighs 1 and
 * nothing overflows. Returns the total weight. */
static double apply_temperature(struct cand *cand, int32_t n, float temperature)
{
	float max = -INFINITY;
	double z = 0.0;
	int32_t i;

	for (i = 0; i < n; i++)
		if (cand[i].v > max)
			max = cand[i].v;
	for (i = 0; i < n; i++) {
		cand[i].v = expf((cand[i].v - max) / temperature);
		z += cand[i].v;
	}
	return z;
}

/* Steps 4 and 5 on sorted candidates: the length of the kept prefix. */
static int32_t cut_sorted(const struct cand *cand, int32_t n, double z, float top_p, float min_p)
{
	float floor_w = min_p * cand[0].v;
	double target = (double)top_p * z, cum = 0.0;
	int32_t i;

	for (i = 0; i < n; i++) {
		if (i > 0 && cand[i].v < floor_w)
			return i;
		cum += cand[i].v;
		if (top_p < 1.0f && cum >= target)
			return i + 1;
	}
	return n;
}

/* Moves candidates weighing >= w to the front; returns how many, and their
 * weight in *mass. */
static int32_t partition_at(struct cand *cand, int32_t n, float w, double *mass)
{
	int32_t i, m = 0;

	*mass = 0.0;
	for (i = 0; i < n; i++) {
		if (cand[i].v >= w) {
			struct cand t = cand[m];

			*mass += cand[i].v;
			cand[m] = cand[i];
			cand[i] = t;
			m++;
		}
	}
	return m;
}

static void swap(struct cand *a, struct cand *b)
{
	struct cand t = *a;

	*a = *b;
	*b = t;
}

/* Of cand[a], cand[b], cand[c]: the index of the middle one. */
static int32_t median3(const struct cand *cand, int32_t a, int32_t b, int32_t c)
{
	if (better(&cand[a], &cand[b]))
		return better(&cand[b], &cand[c]) ? b : better(&cand[a], &cand[c]) ? c : a;
	return better(&cand[a], &cand[c]) ? a : better(&cand[b], &cand[c]) ? c : b;
}

/*
 * Step 4 without sorting: moves the nucleus (the fewest best-first
 * candidates whose weight reaches `need`) to cand[0..m) in no particular
 * order and returns m (n if all together fall short). The draw does not
 * care about order, so a quickselect on mass does it in O(n) expected time,
 * where sorting a flat 256k-token distribution would dominate the step.
 * After too many rounds (a pathological pivot run) the rest is heapsorted.
 */
static int32_t nucleus_select(struct cand *cand, int32_t n, double need)
{
	int32_t lo = 0, hi = n, rounds = 0, i;
	double cum = 0.0;

	while (hi - lo > 16 && rounds++ < 64) {
		int32_t p = median3(cand, lo, lo + (hi - lo) / 2, hi - 1);
		double mass = 0.0;

		/* Lomuto: the candidates better than the pivot go first. */
		swap(&cand[p], &cand[hi - 1]);
		p = lo;
		for (i = lo; i < hi - 1; i++) {
			if (better(&cand[i], &cand[hi - 1])) {
				mass += cand[i].v;
				swap(&cand[i], &cand[p++]);
			}
		}
		swap(&cand[p], &cand[hi - 1]);
		if (mass >= need) {
			hi = p; /* the nucleus ends among the better ones */
		} else if (mass + cand[p].v >= need) {
			return p + 1;
		} else {
			need -= mass + cand[p].v;
			lo = p + 1;
		}
	}
	if (hi - lo > 1)
		select_best(cand + lo, hi - lo, hi - lo);
	for (i = lo; i < hi; i++) {
		cum += cand[i].v;
		if (cum >= need)
			return i + 1;
	}
	return n;
}

/*
 * Steps 4 and 5 on unsorted candidates (no top_k cut). min_p keeps a
 * best-first prefix too, so applying it first and then top_p with the
 * target taken from the whole mass `z` keeps the same set as top_p then
 * min_p, while shrinking the selection's input.
 */
static int32_t cut_unsorted(struct cand *cand, int32_t n, double z, float top_p, float min_p)
{
	double mass;

	if (min_p > 0.0f)
		n = partition_at(cand, n, min_p, &mass); /* the best weighs exactly 1 */
	if (top_p < 1.0f)
		n = nucleus_select(cand, n, (double)top_p * z);
	return n;
}

/* Step 6: draws from the first n candidates by weight. Always consumes
 * exactly one random number, so the stream does not depend on the logits. */
static int32_t draw(struct sampler *s, const struct cand *cand, int32_t n)
{
	double z = 0.0, u, cum = 0.0;
	int32_t i, last = 0;

	for (i = 0; i < n; i++)
		z += cand[i].v;
	u = rng_uniform(s->rng) * z;
	for (i = 0; i < n; i++) {
		if (cand[i].v <= 0.0f)
			continue;
		cum += cand[i].v;
		last = i;
		if (cum > u)
			return cand[i].id;
	}
	/* Rounding left u at or past the total: the last possible one. */
	return cand[last].id;
}

/* Step 0: tokens outside the allowed set become -inf, so no later step
 * can pick them and top_p / min_p renormalize over what is allowed. */
static void apply_mask(struct cand *cand, int32_t n, const uint32_t *allow)
{
	int32_t i;

	for (i = 0; i < n; i++)
		if (!((allow[i >> 5] >> (i & 31)) & 1))
			cand[i].v = -INFINITY;
}

int32_t sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab)
{
	return sampler_sample_masked(s, logits, n_vocab, NULL);
}

int32_t sampler_sample_masked(struct sampler *s, const float *logits, int32_t n_vocab,
			      const uint32_t *allow)
{
	const struct sampler_config *c = &s->cfg;
	struct cand *cand = s->cand;
	int32_t n = n_vocab, best;
	double z;

	if (n_vocab != s->n_vocab)
		return EMBER_EINVAL;
	if ((c->temperature == 0.0f || c->top_k == 1) && !penalties_active(c) && allow == NULL &&
	    s->n_bias == 0) {
		best = argmax_logits(logits, n);
		return best < 0 ? EMBER_ERANGE : best;
	}
	load_logits(cand, logits, n);
	if (allow != NULL)
		apply_mask(cand, n, allow);
	apply_bias(s, cand);
	if (penalties_active(c))
		apply_penalties(s, cand);
	if (c->temperature == 0.0f || c->top_k == 1) {
		best = argmax(cand, n);
		return best < 0 ? EMBER_ERANGE : best;
	}
	n = drop_impossible(cand, n);
	if (n == 0)
		return EMBER_ERANGE;
	if (c->top_k > 0 && c->top_k < n) {
		select_best(cand, n, c->top_k);
		n = c->top_k;
		z = apply_temperature(cand, n, c->temperature);
		n = cut_sorted(cand, n, z, c->top_p, c->min_p);
	} else {
		z = apply_temperature(cand, n, c->temperature);
		n = cut_unsorted(cand, n, z, c->top_p, c->min_p);
	}
	return draw(s, cand, n);
}

int sampler_logprobs(struct sampler *s, const float *logits, int32_t n_vocab,
		     const uint32_t *allow, int32_t token, float *token_logprob,
		     struct sampler_logprob *top, int32_t n_top)
{
	const struct sampler_config *c = &s->cfg;
	float t = c->temperature > 0.0f ? c->temperature : 1.0f, inv_t = 1.0f / t;
	struct cand *cand = s->cand;
	float max = -INFINITY, lse;
	double z = 0.0;
	int32_t i, n;

	if (n_vocab != s->n_vocab || token < 0 || token >= n_vocab || n_top < 0 ||
	    n_top > SAMPLER_MAX_TOP_LOGPROBS)
		return EMBER_EINVAL;
	load_logits(cand, logits, n_vocab);
	if (allow != NULL)
		apply_mask(cand, n_vocab, allow);
	apply_bias(s, cand);
	if (penalties_active(c))
		apply_penalties(s, cand);
	for (i = 0; i < n_vocab; i++)
		if (cand[i].v > max)
			max = cand[i].v;
	if (max == -INFINITY) {
		*token_logprob = -INFINITY;
		return 0;
	}
	/* log-sum-exp of logit / t, shifted by the max so nothing overflows;
	 * expf per token (a float's precision is plenty for terms <= 1),
	 * summed in double */
	for (i = 0; i < n_vocab; i++)
		z += (double)expf((cand[i].v - max) * inv_t);
	lse = (float)((double)max / t + log(z));
	*token_logprob = cand[token].v == -INFINITY ? -INFINITY : cand[token].v / t - lse;
	n = drop_impossible(cand, n_vocab);
	if (n_top > n)
		n_top = n;
	if (n_top > 0)
		select_best(cand, n, n_top);
	for (i = 0; i < n_top; i++) {
		top[i].id = cand[i].id;
		top[i].logprob = cand[i].v / t - lse;
	}
	return n_top;
}
