/*
 * scheduler_admit.c - a worker's admission: prepared jobs from the run
 * queue into free slots (all of a job's choices at once), each slot filled
 * with its session's and prompt's tokens and its per-request tools, then
 * given a KV cache (a session's resident one, or kv_pool's prefix search)
 * in admission order. The step that runs them is scheduler.c's.
 *
 * Threads: the worker that owns the slots; each function says whether it
 * runs with the engine's lock held or takes it.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "embed.h"
#include "engine_impl.h"

/* ---- queue to slot ---------------------------------------------------------- */

/* A session's requests run on its worker, one at a time, in order. */
static bool eligible(const struct worker *w, const struct job *j)
{
	return !j->session || (j->session->worker == w->index && !j->session->running);
}

/* Lock held: a free slot (there must be one) set up for `j`. */
static struct seq *slot_take(struct worker *w, struct job *j, enum seq_phase phase)
{
	struct seq *s = w->seqs;
	int32_t *tokens;

	while (s->phase != SEQ_FREE)
		s++;
	tokens = s->tokens;
	memset(s, 0, sizeof(*s));
	s->tokens = tokens;
	s->phase = phase;
	s->job = j;
	s->admitted = ++w->admit_tick;
	w->n_busy++;
	return s;
}

/* Lock held: unlinks the queued jobs of this worker that were cancelled
 * onto *dead, and moves the oldest eligible jobs into free slots (a job
 * of n choices takes n slots at once). */
void scheduler_admit(struct worker *w, struct job **dead)
{
	struct engine *e = w->e;
	struct job **pp = &e->queue_head, *prev = NULL;
	uint32_t i, n_free;

	while (*pp) {
		struct job *j = *pp;
		struct seq *s;
		bool cancelled = atomic_load(&j->cancelled);

		if (!eligible(w, j)) {
			prev = j;
			pp = &j->next;
			continue;
		}
		if (!cancelled) {
			for (i = 0, n_free = 0; i < e->cfg.slots; i++)
				n_free += w->seqs[i].phase == SEQ_FREE;
			if (n_free < j->n_choices)
				break;
		}
		*pp = j->next;
		if (e->queue_tail == j)
			e->queue_tail = prev;
		e->queue_len--;
		j->next = NULL;
		if (cancelled) {
			j->next = *dead;
			*dead = j;
			continue;
		}
		s = slot_take(w, j, SEQ_STARTING);
		if (j->session)
			j->session->running = true;
		while (j->followers) {
			struct job *f = j->followers;

			j->followers = f->next;
			f->next = NULL;
			slot_take(w, f, SEQ_FORK)->fork_of = s;
		}
	}
}

/* Fills a just-admitted job's slot: the session's tokens, then the
 * prompt's (tokenized by the preparation thread). Without the lock: a
 * session with a job is only touched by the worker running it. On failure
 * the sequence is finished. */
void scheduler_start_seq(struct worker *w, struct seq *s)
{
	struct engine *e = w->e;
	struct job *j = s->job;
	const uint32_t n_ctx = e->cfg.n_ctx;
	char err[EMBER_ERR_MAX];
	bool special;
	int64_t n;
	int rc;

	if (j->session) {
		s->n_before = j->session->n_tok;
		memcpy(s->tokens, j->session->tokens, (size_t)s->n_before * sizeof(int32_t));
	}
	special = j->add_special && s->n_before == 0;
	if (!j->prepared || (j->prep_rc == 0 && j->tok_special != special))
		scheduler_job_prepare(e, j, special); /* rare: the session changed under it */
	if (j->prep_rc < 0) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, j->prep_rc, j->prep_err ? j->prep_err
						: "engine: preparing the prompt failed");
		return;
	}
	n = j->n_tokens;
	if (j->on_embed && j->embed_truncate && n > n_ctx)
		n = n_ctx; /* the first n_ctx tokens are those scheduler_job_prepare kept */
	if (n > 0 && (uint64_t)n + s->n_before <= n_ctx)
		memcpy(s->tokens + s->n_before, j->tokens, (size_t)n * sizeof(int32_t));
	s->n_prompt = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
	if ((uint64_t)n + s->n_before > n_ctx) {
		if (s->n_before)
			snprintf(err, sizeof(err), "prompt of %lld tokens after the session's %u "
				 "exceeds the context of %u tokens", (long long)n, s->n_before, n_ctx);
		else
			snprintf(err, sizeof(err), "prompt of %lld tokens exceeds the context of %u "
				 "tokens", (long long)n, n_ctx);
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, EMBER_ECONTEXT, err);
		return;
	}
	s->n_tok = s->n_before + (uint32_t)n;
	if (s->n_tok == 0) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, EMBER_EINVAL, "the prompt has no tokens");
		return;
	}
	if (j->on_embed) {
		if ((rc = embed_begin(w, s, err)) < 0) {
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
			return;
		}
		s->t_prefill0 = clock_now_s();
		pthread_mutex_lock(&e->lock); /* engine_cancel reads phases */
		s->phase = SEQ_EMBED;
		pthread_mutex_unlock(&e->lock);
		return;
	}
	if ((rc = scheduler_start_tools(e, s, err)) < 0) {
		scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
		return;
	}
	pthread_mutex_lock(&e->lock); /* engine_cancel reads phases */
	s->phase = SEQ_WAIT_KV;
	pthread_mutex_unlock(&e->lock);
}

/* ---- slot to cache -------------------------------------------------------- */

/* The waiting sequence admitted first, or NULL. */
struct seq *scheduler_oldest(struct worker *w, enum seq_phase phase,
			     bool (*want)(const struct seq *))
{
	struct seq *best = NULL;
	uint32_t i;

	for (i = 0; i < w->e->cfg.slots; i++) {
		struct seq *s = &w->seqs[i];

		if (s->phase == phase && (!want || want(s)) && (!best || s->admitted < best->admitted))
			best = s;
	}
	return best;
}

/*
 * Gives caches to waiting sequences in admission order until one must
 * wait (every cache busy). A session runs on its own resident cache;
 * anything else goes through kv_pool_acquire's prefix search. Prefix
 * copies from pinned caches happen after the lock is dropped.
 */
void scheduler_acquire_caches(struct worker *w, struct kv_claim *claims, struct seq **claimed,
			      uint32_t *n_claims)
{
	struct engine *e = w->e;
	char err[EMBER_ERR_MAX];
	struct seq *s;

	*n_claims = 0;
	pthread_mutex_lock(&e->lock);
	while ((s = scheduler_oldest(w, SEQ_WAIT_KV, NULL))) {
		struct kv_claim *c = &claims[*n_claims];
		struct session *ss = s->job->session;
		int rc = 0;

		if (ss && ss->kv) {
			memset(c, 0, sizeof(*c));
			c->entry = ss->kv;
			kv_pool_take(ss->kv);
			/* At least one token is evaluated, for the logits. */
			compute_kv_truncate(c->entry->kv, s->n_tok - 1);
			/* A sliding-window ring rewound past what it holds
			 * starts over rather than attend to lost keys. */
			if (!compute_kv_holds(c->entry->kv, compute_kv_n_pos(c->entry->kv)))
				compute_kv_truncate(c->entry->kv, 0);
			c->n_reuse = compute_kv_n_pos(c->entry->kv);
		} else {
			rc = kv_pool_acquire(&w->kv, s->tokens, s->n_tok, c, err);
		}
		if (rc == EMBER_EBUSY)
			break;
		if (rc < 0) {
			pthread_mutex_unlock(&e->lock);
			scheduler_finish_seq(w, s, ENGINE_FINISH_ERROR, rc, err);
			pthread_mutex_lock(&e->lock);
			continue;
		}
		s->kv = c->entry;
		s->n_cached = c->n_reuse;
		s->phase = SEQ_RUN;
		s->t_prefill0 = clock_now_s();
		claimed[(*n_claims)++] = s;
	}
	pthread_mutex_unlock(&e->lock);
}
