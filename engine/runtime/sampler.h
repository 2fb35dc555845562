/*
 * sampler.h - picks the next token from a logits vector, per request.
 *
 * One `struct sampler` belongs to one generation: it holds the request's
 * sampling settings, its own random generator (xoshiro256**, seeded through
 * splitmix64, so the same seed and the same logits give the same tokens on
 * every machine) and the token history the penalties look at. Its scratch
 * buffers are sized for n_vocab once, in sampler_new(); sampling allocates
 * nothing.
 *
 * The chain, in this order (that of llama.cpp's default chain, with the
 * optional allowed-token mask of a grammar applied first, as step 0, then
 * the request's logit biases (OpenAI's logit_bias, added to the logits), and
 * temperature placed before the probability cuts, as Hugging Face does, so
 * that top_p and min_p see the distribution actually sampled from):
 *   1. penalties  over the last `penalty_last_n` accepted tokens:
 *                 repetition (llama-style, once per distinct token: a positive
 *                 logit is divided by it, a negative one multiplied), then
 *                 presence and frequency (OpenAI: logit -= presence * [c > 0]
 *                 + frequency * c, c = occurrences in the window)
 *   2. top_k      keep the k best logits (0 = all)
 *   3. temperature softmax(logit / temperature)
 *   4. top_p      keep the smallest best-first set whose mass reaches top_p
 *   5. min_p      keep tokens whose probability is >= min_p * the best one's
 *   6. draw       one token from what is left, renormalized
 * Greedy (temperature 0 or top_k 1) takes the argmax of step 1 and draws no
 * random number. Ties always go to the lowest token id. NaN logits count as
 * -inf, +inf as the largest float; a -inf token is never chosen.
 *
 * Cost per token, n = n_vocab: greedy without penalties is one read-only
 * pass over the logits. Otherwise one copy into scratch, O(window) for the
 * penalties, top_k by a k-sized heap (about n compares when k is small),
 * one expf per surviving candidate; top_p and min_p never sort the
 * vocabulary: after top_k they scan the k sorted survivors, without it
 * min_p is one partition pass and top_p a quickselect on probability mass
 * (O(n) expected), since the draw needs the kept set, not its order.
 *
 * Thread safety: a sampler is used by one thread at a time (its worker).
 */
#ifndef EMBER_SAMPLER_H
#define EMBER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_PENALTY_LAST_N_MAX 65536
#define SAMPLER_PENALTY_MAX 2.0f /* |presence|, |frequency| (OpenAI's range) */

struct sampler_config {
	float temperature;        /* >= 0; 0 = greedy */
	int32_t top_k;            /* >= 0; 0 = off */
	float top_p;              /* (0, 1]; 1 = off */
	float min_p;              /* [0, 1]; 0 = off */
	float repetition_penalty; /* > 0; 1 = off */
	float presence_penalty;   /* [-2, 2]; 0 = off */
	float frequency_penalty;  /* [-2, 2]; 0 = off */
	int32_t penalty_last_n;   /* [0, SAMPLER_PENALTY_LAST_N_MAX]; 0 = no penalties */
	uint64_t seed;            /* the caller draws one when the request gives none */
};

struct sampler;

/* Fills `c` with neutral settings: temperature 1, top_k 0, top_p 1, min_p 0,
 * no penalties, penalty_last_n 64, seed 0. */
void sampler_config_default(struct sampler_config *c);

/* Returns 0 if every field of `c` is in range (NaN never is), else
 * EMBER_EINVAL with the first offending field named in `err`. */
int sampler_config_validate(const struct sampler_config *c, char *err);

/*
 * Creates a sampler for a vocabulary of `n_vocab` (> 0) tokens with a copy of
 * `c` (validated first). Allocates all scratch memory now. On success
 * `*out` owns it (release with sampler_free); returns 0, EMBER_EINVAL or
 * EMBER_ENOMEM.
 */
int sampler_new(struct sampler **out, const struct sampler_config *c, int32_t n_vocab, char *err);
void sampler_free(struct sampler *s);

/* Forgets the history and reseeds with `seed`, as a fresh sampler with the
 * same settings would be. */
void sampler_reset(struct sampler *s, uint64_t seed);

/* Records `token` as generated (or as prompt text, if the caller wants the
 * prompt penalized too) for the penalty window. Returns 0, or EMBER_EINVAL
 * (nothing recorded) for a token outside [0, n_vocab). */
int sampler_accept(struct sampler *s, int32_t token);

/*
 * Picks a token from `logits` (n_vocab floats; read only, never modified)
 * by the chain above. Does not record it: call sampler_accept() with the
 * token the caller keeps. Returns the token id (>= 0), EMBER_EINVAL if
 * `n_vocab` is not the sampler's, or EMBER_ERANGE if no token is possible
 * (every logit is NaN or -inf after the penalties).
 */
int32_t sampler_sample(struct sampler *s, const float *logits, int32_t n_vocab);

/*
 * The same with an allowed set applied before step 1 (a grammar's mask,
 * grammar.h): bit (i & 31) of allow[i >> 5] set = token i may be chosen;
 * the others count as -inf. NULL allows every token. EMBER_ERANGE if no
 * allowed token has a finite logit.
 */
int32_t sampler_sample_masked(struct sampler *s, const float *logits, int32_t n_vocab,
			      const uint32_t *allow);

/* One logit bias (OpenAI's logit_bias): `bias` is added to token `id`'s
 * logit before the penalties; -100 in practice bans a token, +100 forces
 * it. */
struct sampler_bias {
	int32_t id;
	float bias;
};

#define SAMPLER_MAX_BIAS 1024

/*
 * Sets the biases (copied; n <= SAMPLER_MAX_BIAS, replacing earlier ones;
 * n 0 clears them). Returns 0, EMBER_EINVAL (an id outside the vocabulary
 * or a non-finite bias, named in err) or EMBER_ENOMEM. Allocates here,
 * never while sampling.
 */
int sampler_set_bias(struct sampler *s, const struct sampler_bias *b, size_t n, char *err);

/* One entry of sampler_logprobs' answer. */
struct sampler_logprob {
	int32_t id;
	float logprob; /* natural log; -INFINITY for an impossible token */
};

#define SAMPLER_MAX_TOP_LOGPROBS 20 /* OpenAI's top_logprobs limit */

/*
 * The log-probabilities behind a sampled token, for an API's `logprobs`.
 * Call it after sampler_sample[_masked] and before sampler_accept(), with
 * the same logits and mask, so the penalties see the same history. The
 * distribution is that of steps 0, 1 and 3: the mask (disallowed tokens
 * -inf), the logit biases, the penalties, then softmax(logit / temperature) over the whole
 * vocabulary, temperature 0 (greedy) counting as 1; top_k, top_p and
 * min_p are not applied (so a token they cut still has its probability,
 * as OpenAI reports it). Writes the log-probability of `token` to
 * *token_logprob and the `n_top` (<= SAMPLER_MAX_TOP_LOGPROBS) most likely
 * tokens, best first (ties: lower id first), to top[]. Returns how many
 * entries it wrote (fewer when fewer tokens are possible), or EMBER_EINVAL
 * for a wrong n_vocab, token or n_top. Uses the sampler's scratch, so it
 * allocates nothing; costs one pass and n_vocab expf.
 */
int sampler_logprobs(struct sampler *s, const float *logits, int32_t n_vocab,
		     const uint32_t *allow, int32_t token, float *token_logprob,
		     struct sampler_logprob *top, int32_t n_top);

#endif
