/*
 * scheduler.c - the engine's threads. The preparation thread renders chat
 * messages and tokenizes prompts in submission order, off the workers, so
 * a long prompt never delays a step. Each worker takes prepared requests
 * in arrival order, finds each a KV cache (reusing a cached prefix when it
 * can), and runs continuous batching: each step is one forward pass over
 * the next token of every decoding sequence plus a chunk of prompt tokens
 * of the oldest prefilling ones. Sampled tokens go through detok to the
 * request's on_text.
 *
 * The step policy. Let B = prefill_chunk (the step's token budget: 256 in
 * the engine, 512 in emberd's config) and d = the sequences decoding now
 * (a prompt's last token counts: it is a one-token entry). A step holds
 *
 *     d decode tokens  +  c = max(min(16, B), floor(B / (1 + d))) prompt tokens,
 *
 * the prompt tokens going to prefilling sequences oldest first (a prompt
 * may finish and the next start in the same step). An embedding job
 * (embed.c) advances a chunk every step from the same c, in its own pass
 * after the batch's: half of c while prompts wait, all of it otherwise.
 * Why:
 *
 *  - Every decoding sequence is in every step, so a stream waits for its
 *    next token one step at most, and a step holds one chunk at most: the
 *    delay a newly arrived prompt adds to a running stream is the cost of
 *    c prompt tokens per token it streams, never a whole prompt.
 *  - Prefill is compute-bound: c tokens cost about c * t_p (t_p: one
 *    token's share of a GEMM). Each of the d streams waits for them, so
 *    the stream time spent waiting on one step's chunk is d * c * t_p <=
 *    d / (1 + d) * B * t_p < B * t_p: however many streams run, one
 *    step's prefill costs them together less than one full chunk. With a
 *    fixed chunk it would grow with d (8 streams x 256 tokens: 2048 token
 *    times of waiting per step). Example, B = 256: d = 0 -> 256, 1 -> 128,
 *    4 -> 51, 8 -> 28, 16 -> 16 (the floor).
 *  - Time to first token stays bounded under load: a prompt of P tokens
 *    behind Q queued prompt tokens needs ceil((Q + P) / c) steps, and c
 *    never drops below 16 tokens (prefill always advances) while each step
 *    costs about t_w + (d + c) * t_p (t_w: reading the weights once, shared
 *    by the whole step). With d = 8, B = 256 and 100-token prompts, a new
 *    prompt is ready after 4 steps of 36 tokens each.
 *  - The weights are read once per step for all d + c tokens, so the
 *    aggregate decode rate grows with d as far as the small-batch kernels
 *    allow; small chunks cost prefill little since t_w is shared.
 *  - While no sequence decodes (d = 0: no stream waits on a step), a step
 *    waits for more prompts: those the preparation thread holds, and any
 *    arriving within GATHER_QUIET_S (2 ms) of the last, GATHER_MAX_S (10
 *    ms) after the first at most (gather_wait_s). Clients that start
 *    together then share the first B-token step instead of a lone first
 *    prompt taking a step of its own and the rest following in B / (1 +
 *    d) chunks. 8 clients of 100-token prompts, B = 512, by step counts
 *    (3 runs alike): 5 steps with prompt tokens instead of 7, 68 steps
 *    instead of 70, a tail of 4 small decode steps (batches 3, 2, 2, 1)
 *    instead of 6 (7, 5, 3, 3, 2, 1). Worth ~1% of the run with the
 *    figures below (2 weight reads, 13 tail tokens moved into full
 *    batches); the price is the first prompts' first token, which now
 *    waits for the 512-token step (mean TTFT ~2.4 s instead of ~2.05 s by
 *    the same figures), and 10 ms at most for a lone request.
 *
 * What k streams can gain over one (issue 18's "8 streams >= 4x one").
 * Let p be one prompt's prefill and d_k a decode step of k sequences. One
 * stream of G generated tokens takes T1 = p + G * d1. k streams take at
 * least Tk = k * p + G * d_k: prefill is compute-bound, so prompts
 * prefilled together cost no less per token, and every stream needs G
 * steps. The aggregate gain is therefore bounded by the serial prefill:
 *
 *     k * T1 / Tk  <=  k * (p + G * d1) / (k * p + G * d_k)
 *
 * Measured on 2 Zen 4 vCPUs (EPYC, AVX-512 VNNI; TinyLlama Q4_0, 2
 * threads, quiet machine; bench/forward_step best ms and pp512): P = 100
 * prompt tokens, G = 64, p = 100 / 255 tok/s = 0.39 s, d1 = 21.1 ms,
 * d8 = 40 ms: T1 = 0.39 + 1.35 = 1.74 s, T8 >= 3.14 + 2.56 = 5.70 s, so
 * 8 streams can give at most 8 * 1.74 / 5.70 = 2.45x one stream; even
 * with batching for free (d8 = d1) 8 * 1.74 / (3.14 + 1.35) = 3.1x. 4x
 * needs 24 p <= 512 d1 - 256 d8: p <= 23 ms with these steps (a 4,300
 * tok/s prefill), p <= 0.23 s even with d8 = d1. So at this prompt to
 * output ratio the target is out of reach for any schedule; what the
 * schedule controls is how close a run comes to k * p + G * d_k. Mixed
 * steps come slightly under it (decode tokens riding a prompt chunk share
 * its weight read), partial steps, a late start and a ragged tail (the
 * last streams decoding in small batches) go over it. The per-phase
 * account in engine_stats (and /metrics, printed by bench/serve_bench.sh)
 * splits a run's time into prefill, mixed and decode passes (these by
 * batch size), emitting and the gaps between steps, to compare.
 *
 * The same bound from the machine's limits (Zen 4, 2 cores: VPDPBUSD on
 * ZMM retires 1 a cycle, ~463 G int8 ops/s a core, 926 for two; a 1-token
 * step streams 582 MB in ~20.5 ms). A token costs 1.94 G ops in the
 * layers plus 0.13 G in the output head. 8 streams: 800 prompt tokens =
 * 1.55 T ops (1.67 s at peak) and 504 decode tokens in 63 steps = 1.04 T
 * (1.13 s at peak, but 63 weight reads take ~1.3 s): a floor of ~2.8-3.0 s
 * for 512 tokens, ~175 tok/s. One stream's floor: p = 0.21 s, so even at
 * peak 4x needs 8 (p + G d1) >= 4 (8 p + G d8), i.e. p <= G d1 / 6 = 0.22 s
 * with d8 = d1: prefill at >= 95% of the int8 peak with batching free.
 * 2.5x llama-server (44.3 tok/s at 8 streams, quiet run) is 512 tokens in
 * 4.62 s: ~62% of the floor's speed, e.g. d8 <= 28 ms at today's prefill.
 * d8's own floor is higher than the int8 peak's: bit-identical to one
 * token means per 16 rows x 32 inputs x token a VMULPS and a VFMADD on
 * VPDPBUSD's pipes (10 cycles, not 8), so 8 tokens' products take >= 44
 * ms of CPU (22 ms on two cores) and the norms and attention ~5 more;
 * measured 56 ms of CPU on one thread (kernels/LEVELS.md, second pass).
 *
 * Several choices (n > 1): admission reserves n slots at once; the first
 * prefills the prompt, the others wait (SEQ_FORK). When its prompt's
 * logits come out, each waiting choice copies the prompt's KV cache
 * (compute_kv_copy_prefix) and samples its own first token from those same
 * logits with its own sampler (seed + i), then decodes on its own: one
 * prefill for n choices. A choice that finds no cache free then prefills
 * by itself (same result, more work).
 *
 * Reading order: scheduler_prep_main() and scheduler_job_prepare()
 * (scheduler_prep.c: submit to run queue), scheduler_main() (the loop),
 * scheduler_admit() and scheduler_start_seq() (queue to slot; a
 * sequence's sampler, detok and grammar are scheduler_tools.c's),
 * scheduler_acquire_caches() (slot to cache; these three are
 * scheduler_admit.c's), run_step() (the batch), fork_choices() (n > 1),
 * emit() (one token out), scheduler_finish_seq() (slot back;
 * scheduler_finish.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "dtype.h"
#include "embed.h"
#include "engine_impl.h"
#include "sampler.h"
#include "tokenizer.h"

/* ---- one token out -------------------------------------------------------- */

/* The log-probabilities behind `tok`, before sampler_accept changes the
 * penalty window. Into the worker's one scratch struct: no allocation. */
static void report_logprobs(struct worker *w, struct seq *s, const float *logits, int32_t tok)
{
	struct engine_logprobs *lp = &w->logprobs;
	int n = sampler_logprobs(s->sampler, logits, (int32_t)w->e->m->hp.n_vocab, s->mask, tok,
				 &lp->logprob, lp->top, s->job->top_logprobs);

	lp->token = tok;
	lp->n_top = n < 0 ? 0 : n;
	s->job->on_logprobs(s->job->data, lp);
}

/* Samples the next token of `s` from `logits` and streams its text; may
 * finish the sequence. */
static void emit(struct worker *w, struct seq *s, const float *logits)
{
	struct engine *e = w->e;
	int32_t tok;
	size_t len = 0;
	int n, st;

	if (s->n_tok >= e->cfg.n_ctx) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_LENGTH, 0, NULL);
		return;
	}
	if (s->gm != NULL) {
		char err[EMBER_ERR_MAX];
		int64_t allowed = grammar_matcher_fill_mask(s->gm, s->mask, err);

		if (allowed < 0) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, (int)allowed, err);
			return;
		}
	}
	tok = sampler_sample_masked(s->sampler, logits, (int32_t)e->m->hp.n_vocab, s->mask);
	if (tok < 0) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, tok, "no token can be sampled");
		return;
	}
	if (s->job->on_logprobs != NULL && !tokenizer_is_eog(e->tok, tok))
		report_logprobs(w, s, logits, tok);
	if (s->gm != NULL) {
		char err[EMBER_ERR_MAX];
		int rc = grammar_matcher_accept(s->gm, tok, err);

		if (rc < 0) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
			return;
		}
	}
	sampler_accept(s->sampler, tok);
	s->t_last = clock_now_s();
	if (s->n_gen++ == 0)
		s->t_first = s->t_last;
	s->tokens[s->n_tok++] = tok;
	s->pending_tokens++;
	if (tokenizer_is_eog(e->tok, tok)) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_STOP, 0, NULL);
		return;
	}
	n = tokenizer_piece(e->tok, tok, 0, w->piece, w->piece_cap);
	if (n > (int)w->piece_cap) {
		/* A longer piece than any seen so far: grow once. */
		char *p = realloc(w->piece, (size_t)n);

		if (!p) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, EMBER_ENOMEM, "piece buffer");
			return;
		}
		w->piece = p;
		w->piece_cap = (size_t)n;
		n = tokenizer_piece(e->tok, tok, 0, w->piece, w->piece_cap);
	}
	if (n < 0)
		n = 0;
	if (s->lazy) {
		char err[EMBER_ERR_MAX];

		if (scheduler_lazy_scan(e, s, w->piece, (size_t)n, err) != 0) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, EMBER_ENOMEM, err);
			return;
		}
	}
	if (DETOK_OUT_MAX(n) > w->text_cap) {
		char *t = realloc(w->text, DETOK_OUT_MAX(n));

		if (!t) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, EMBER_ENOMEM, "text buffer");
			return;
		}
		w->text = t;
		w->text_cap = DETOK_OUT_MAX(n);
	}
	st = detok_push(&s->detok, w->piece, (size_t)n, w->text, w->text_cap, &len);
	scheduler_send_text(s, w->text, len);
	/* A grammar that cannot continue ends the output without waiting for
	 * the model's end token. */
	if (st == DETOK_STOP || (s->gm != NULL && grammar_matcher_done(s->gm)))
		scheduler_finish_seq(w, s, ENGINE_FINISH_STOP, 0, NULL);
	else if (s->job->max_tokens > 0 && s->n_gen >= (uint32_t)s->job->max_tokens)
		scheduler_finish_seq(w, s, ENGINE_FINISH_LENGTH, 0, NULL);
}

/* ---- the batch ------------------------------------------------------------ */

static bool prefilling(const struct seq *s)
{
	return s->n_tok - compute_kv_n_pos(s->kv->kv) > 1 && !s->batched;
}

/*
 * A prompt whose uncached part is shorter than this runs all its rows on
 * the exact path (compute_seq.exact). Why: on the amx level prompt rows
 * take the bf16 tiles (kernels_amx_bf16.c), which dequantize every weight
 * once per product whatever the rows: a 5-token prompt then took ~7x the
 * int8 path's time (0.6 s against 0.09 s, TinyLlama Q4_0, Emerald Rapids,
 * loaded), and the tiles pay only from 32-64 rows (LEVELS.md, det11). A
 * rule by chunk size would make a prompt row's numbers depend on load
 * (the chunk is B / (1 + d)); this one depends only on the request and on
 * what the cache held when it came, so a repeated request (its prompt
 * cached, its last token exact either way) samples the same text. A
 * prompt that reuses a cached prefix of another request's keeps that
 * request's numbers for those positions, as it keeps its rounding.
 */
#define SHORT_PREFILL 64

static bool short_prefill(const struct seq *s)
{
	return s->n_tok - s->n_cached < SHORT_PREFILL;
}

/* The prompt tokens of a step beside n_dec decode tokens (the header's
 * policy). */
static uint32_t step_chunk(uint32_t budget, uint32_t n_dec)
{
	uint32_t c = budget / (1 + n_dec), floor = budget < 16 ? budget : 16;

	return c < floor ? floor : c;
}

/*
 * The prompt of `lead` is in its cache and `logits` are its last token's:
 * each choice waiting on it copies the cache and samples its own first
 * token from the same logits (before the leader samples, which may end it
 * and release its cache). A choice for which no cache is free prefills by
 * itself later.
 */
static void fork_choices(struct worker *w, struct seq *lead, const float *logits)
{
	struct engine *e = w->e;
	char err[EMBER_ERR_MAX];
	struct kv_claim c;
	uint32_t i;
	int rc;

	for (i = 0; i < e->cfg.slots; i++) {
		struct seq *q = &w->seqs[i];

		if (q->phase != SEQ_FORK || q->fork_of != lead)
			continue;
		q->fork_of = NULL;
		memcpy(q->tokens, lead->tokens, (size_t)lead->n_tok * sizeof(int32_t));
		q->n_tok = lead->n_tok;
		q->n_prompt = lead->n_prompt;
		q->t_prefill0 = lead->t_prefill0;
		if ((rc = scheduler_start_tools(e, q, err)) < 0) {
			scheduler_finish_seq(w, q, ENGINE_FINISH_ERROR, rc, err);
			continue;
		}
		pthread_mutex_lock(&e->lock);
		rc = kv_pool_acquire(&w->kv, q->tokens, q->n_tok, &c, err);
		if (rc == 0) {
			q->kv = c.entry;
			q->phase = SEQ_RUN;
		} else if (rc == EMBER_EBUSY) {
			q->phase = SEQ_WAIT_KV;
		}
		pthread_mutex_unlock(&e->lock);
		if (rc == EMBER_EBUSY)
			continue;
		if (rc == 0) /* a pending copy from a session's cache is not needed */
			rc = compute_kv_copy_prefix(q->kv->kv, lead->kv->kv, lead->n_tok);
		if (rc < 0) {
			scheduler_finish_seq(w, q, ENGINE_FINISH_ERROR, rc, "engine: copying the prompt's cache");
			continue;
		}
		q->n_cached = lead->n_cached;
		emit(w, q, logits);
	}
}

/*
 * One forward pass: the pending token of every decoding sequence, then
 * prompt chunks of prefilling sequences, oldest first, step_chunk() tokens
 * in all. A sequence whose pending tokens are all in the batch gets logits
 * (unless it only prefills). The oldest embedding's chunk shares that
 * budget (*emb and *emb_n: its slot and tokens, run by run_embed after
 * the pass; they count among the step's prompt tokens).
 */
/* Lock held: adds one step to the worker's per-phase account
 * (engine_stats): the pass from t0 to t1 (wall) costing cpu seconds of
 * process CPU time, with n_gen generated and n_prompt prompt tokens,
 * n_dec sequences decoding, n_left busy sequences not in it. */
static void account_step(struct worker *w, double t0, double t1, double cpu, uint32_t n_gen,
			 uint32_t n_prompt, uint32_t n_dec, uint32_t n_left)
{
	uint32_t k = n_dec < ENGINE_STATS_BATCH ? n_dec : ENGINE_STATS_BATCH;

	if (w->t_step_end > 0 && t0 > w->t_step_end)
		w->t_between += t0 - w->t_step_end;
	if (n_gen > 0 && n_prompt > 0) {
		w->t_mixed += t1 - t0;
		w->c_mixed += cpu;
	} else if (n_gen > 0) {
		w->t_decode += t1 - t0;
		w->c_decode += cpu;
		w->n_dec_k[k]++;
		w->t_dec_k[k] += t1 - t0;
		w->c_dec_k[k] += cpu;
	} else {
		w->t_prefill += t1 - t0;
		w->c_prefill += cpu;
	}
	w->n_partial += n_left > 0;
	w->n_left_out += n_left;
}

/* Busy sequences that are not in this step, not counting choices waiting
 * for their leader's prompt or the embedding that runs beside it. */
static uint32_t left_out(const struct worker *w, const struct seq *emb)
{
	uint32_t i, n = 0;

	for (i = 0; i < w->e->cfg.slots; i++) {
		const struct seq *s = &w->seqs[i];

		n += s->phase != SEQ_FREE && s->phase != SEQ_FORK && !s->batched && s != emb;
	}
	return n;
}

static void run_step(struct worker *w, struct seq **emb, uint32_t *emb_n)
{
	struct engine *e = w->e;
	uint32_t i, nb = 0, n_dec, chunk, budget, row = 0, n_gen_tok = 0, n_prompt_tok, n_left;
	double t0 = clock_now_s(), t1, c0;
	char err[EMBER_ERR_MAX];
	struct seq *s;
	int rc;

	for (i = 0; i < e->cfg.slots; i++) {
		s = &w->seqs[i];
		s->batched = false;
		if (s->phase == SEQ_RUN && s->n_tok - compute_kv_n_pos(s->kv->kv) == 1) {
			w->batch_seq[nb] = i;
			w->batch[nb++] = (struct compute_seq){s->kv->kv, s->tokens + s->n_tok - 1, 1,
							      COMPUTE_LOGITS_NONE, false};
			s->batched = true;
			n_gen_tok += s->n_gen > 0; /* else a prompt's last token */
		}
	}
	n_dec = nb;
	budget = chunk = step_chunk(e->cfg.prefill_chunk, n_dec);
	/* The oldest embedding advances every step, from the same budget:
	 * half of it while prompts are waiting (they keep the other half),
	 * all of it otherwise. */
	*emb = scheduler_oldest(w, SEQ_EMBED, NULL);
	*emb_n = 0;
	if (*emb) {
		uint32_t share =
			scheduler_oldest(w, SEQ_RUN, prefilling) ? (budget + 1) / 2 : budget;

		*emb_n = embed_next_chunk(*emb);
		if (*emb_n > share)
			*emb_n = share;
		budget -= *emb_n;
	}
	while (budget > 0 && (s = scheduler_oldest(w, SEQ_RUN, prefilling))) {
		uint32_t pos = compute_kv_n_pos(s->kv->kv), n = s->n_tok - pos;

		if (n > budget)
			n = budget;
		budget -= n;
		w->batch_seq[nb] = (uint32_t)(s - w->seqs);
		w->batch[nb++] = (struct compute_seq){s->kv->kv, s->tokens + pos, n,
						      COMPUTE_LOGITS_NONE, short_prefill(s)};
		s->batched = true;
		s->n_prefilled += n;
	}
	if (nb == 0 && *emb_n == 0)
		return;
	for (i = 0; i < nb; i++) {
		s = &w->seqs[w->batch_seq[i]];
		if (w->batch[i].tokens + w->batch[i].n_tok == s->tokens + s->n_tok &&
		    !s->job->prefill_only) {
			w->batch[i].logits = COMPUTE_LOGITS_LAST;
			s->logits = w->logits + (size_t)row++ * e->m->hp.n_vocab;
		} else {
			s->logits = NULL;
		}
	}
	n_left = left_out(w, *emb);
	c0 = clock_cpu_s();
	rc = nb ? compute_pass_run(w->fp, w->batch, nb, w->logits, err) : 0;
	t1 = clock_now_s();
	c0 = clock_cpu_s() - c0;
	/* Counted before any token goes out, so a caller woken by one sees
	 * the step that made it. */
	n_prompt_tok = chunk - budget + (n_dec - n_gen_tok);
	pthread_mutex_lock(&e->lock);
	account_step(w, t0, t1, c0, n_gen_tok, n_prompt_tok, n_dec, n_left);
	w->n_steps++;
	w->n_decode_tok += n_gen_tok;
	w->n_prefill_tok += n_prompt_tok;
	w->n_prefill_steps += n_prompt_tok > 0;
	if (n_gen_tok > 0 && n_prompt_tok > w->max_chunk)
		w->max_chunk = n_prompt_tok;
	pthread_mutex_unlock(&e->lock);
	for (i = 0; i < nb; i++) {
		s = &w->seqs[w->batch_seq[i]];
		if (rc < 0) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
			continue;
		}
		if (s->logits && s->n_gen == 0 && s->job->n_choices > 1)
			fork_choices(w, s, s->logits);
		if (s->logits)
			emit(w, s, s->logits);
		else if (s->job->prefill_only && compute_kv_n_pos(s->kv->kv) == s->n_tok)
			scheduler_finish_seq(w, s, ENGINE_FINISH_STOP, 0, NULL);
	}
	pthread_mutex_lock(&e->lock);
	w->t_step_end = clock_now_s();
	w->t_emit += w->t_step_end - t1;
	pthread_mutex_unlock(&e->lock);
}

/* The next chunk (n tokens, run_step's share of the budget) of the
 * embedding in slot s, beside the step's batch: one per step, so a step
 * holds one budget of prompt tokens at most. */
static void run_embed(struct worker *w, struct seq *s, uint32_t n)
{
	char err[EMBER_ERR_MAX];
	bool finished;
	int rc;

	if (!s || n == 0 || s->phase != SEQ_EMBED)
		return;
	rc = embed_step(w, s, n, &finished, err);
	if (rc < 0) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
	} else if (finished) {
		s->n_prefilled = s->n_tok;
		s->job->on_embed(s->job->data, embed_result(s), w->e->m->hp.n_embd);
		scheduler_finish_seq(w, s, ENGINE_FINISH_STOP, 0, NULL);
	}
}

/* ---- the loop --------------------------------------------------------------- */

/* A burst of clients is gathered until GATHER_QUIET_S pass without a new
 * request, GATHER_MAX_S after its first at most. */
#define GATHER_QUIET_S 0.002
#define GATHER_MAX_S 0.010

/*
 * Lock held: how long the next step should wait for more prompts: 0 (not
 * at all), a number of seconds, or -1 (until the preparation thread
 * queues what it holds). While no sequence of this worker decodes,
 * nobody waits on a step, and prompts arriving now (clients that started
 * together) can join the ones already here in one step rather than a
 * lone first prompt taking a step of its own and the rest following in
 * B / (1 + d) chunks: fewer, larger prompt steps and streams that start
 * (and end) together. Only with a slot free for them; the first prompt's
 * first token comes GATHER_MAX_S later at most.
 */
static double gather_wait_s(const struct worker *w)
{
	const struct engine *e = w->e;
	double first = 0, now, left;
	uint32_t i;

	if (w->n_busy >= e->cfg.slots)
		return 0;
	for (i = 0; i < e->cfg.slots; i++) {
		const struct seq *s = &w->seqs[i];

		if (s->phase == SEQ_RUN && s->n_gen > 0)
			return 0;
		if ((s->phase == SEQ_STARTING || s->phase == SEQ_WAIT_KV || s->phase == SEQ_RUN) &&
		    (first == 0 || s->job->t_submit < first))
			first = s->job->t_submit;
	}
	if (first == 0)
		return 0;
	if (e->prep_head || e->prep_current)
		return -1;
	now = clock_now_s();
	if (now - first >= GATHER_MAX_S)
		return 0;
	left = e->t_last_submit + GATHER_QUIET_S - now;
	if (left > first + GATHER_MAX_S - now)
		left = first + GATHER_MAX_S - now;
	return left > 0 ? left : 0;
}

/* Lock held: waits on the engine's wake-up for `s` seconds at most. */
static void wait_wake(struct engine *e, double s)
{
	struct timespec ts;
	long ns;

	clock_gettime(CLOCK_REALTIME, &ts); /* the condition's clock */
	ns = ts.tv_nsec + (long)(s * 1e9);
	ts.tv_sec += ns / 1000000000L;
	ts.tv_nsec = ns % 1000000000L;
	pthread_cond_timedwait(&e->wake, &e->lock, &ts);
}

static void cancel_all(struct worker *w)
{
	uint32_t i;

	for (i = 0; i < w->e->cfg.slots; i++)
		if (w->seqs[i].phase != SEQ_FREE)
			scheduler_finish_seq(w, &w->seqs[i], ENGINE_FINISH_CANCELLED, 0, NULL);
}

void *scheduler_main(void *arg)
{
	struct worker *w = arg;
	struct engine *e = w->e;
	struct kv_claim *claims = NULL;
	struct seq **claimed = NULL;
	uint32_t i, n_claims;

	claims = calloc(e->cfg.slots, sizeof(*claims));
	claimed = calloc(e->cfg.slots, sizeof(*claimed));
	pthread_mutex_lock(&e->lock);
	while (!e->stopping && claims && claimed) {
		struct job *dead = NULL;
		struct seq *emb = NULL;
		uint32_t emb_n = 0;
		double gather;

		scheduler_admit(w, &dead);
		if (!dead && w->n_busy == 0) {
			w->t_step_end = 0; /* idle: not time between steps */
			pthread_cond_wait(&e->wake, &e->lock);
			continue;
		}
		if (!dead && (gather = gather_wait_s(w)) != 0) {
			if (gather < 0)
				pthread_cond_wait(&e->wake, &e->lock);
			else
				wait_wake(e, gather);
			continue;
		}
		pthread_mutex_unlock(&e->lock);
		while (dead) {
			struct job *j = dead;

			dead = j->next;
			scheduler_finish_unstarted(w, j);
		}
		for (i = 0; i < e->cfg.slots; i++)
			if (w->seqs[i].phase == SEQ_STARTING)
				scheduler_start_seq(w, &w->seqs[i]);
		for (i = 0; i < e->cfg.slots; i++)
			if (w->seqs[i].phase != SEQ_FREE && atomic_load(&w->seqs[i].job->cancelled))
				scheduler_finish_seq(w, &w->seqs[i], ENGINE_FINISH_CANCELLED, 0, NULL);
		scheduler_acquire_caches(w, claims, claimed, &n_claims);
		for (i = 0; i < n_claims; i++)
			kv_pool_copy(&claims[i]);
		run_step(w, &emb, &emb_n);
		run_embed(w, emb, emb_n);
		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	cancel_all(w);
	free(claims);
	free(claimed);
	return NULL;
}
