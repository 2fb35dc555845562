/*
 * scheduler_finish.c - ending a sequence: its slot and cache go back
 * (a session keeps its tokens on success), the choices still waiting on
 * it end the same way, and the result goes to the job's on_done; and jobs
 * cancelled in the queue before they ran. Threads: the worker that owns
 * the slot (scheduler.c); the engine's lock is taken here as needed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "embed.h"
#include "engine_impl.h"
#include "sampler.h"

void scheduler_send_text(struct seq *s, const char *text, size_t len)
{
	if (len == 0)
		return;
	if (s->job->on_text)
		s->job->on_text(s->job->data, text, len, s->pending_tokens);
	s->pending_tokens = 0;
}

/* Choices still waiting for leader `lead`, which ended before its prompt
 * was prefilled, end the same way. */
static void finish_forks(struct worker *w, struct seq *lead, enum engine_finish finish,
			 int code, const char *msg)
{
	uint32_t i;

	for (i = 0; i < w->e->cfg.slots; i++) {
		struct seq *q = &w->seqs[i];

		if (q->phase == SEQ_FORK && q->fork_of == lead) {
			q->fork_of = NULL;
			q->n_prompt = lead->n_prompt;
			scheduler_finish_seq(w, q, finish, code, msg);
		}
	}
}

/*
 * Frees slot `s` and reports: `finish`, with `code` and a message for
 * errors. Held-back text is flushed unless the sequence was cancelled or
 * failed. A session keeps the tokens on success and rolls back to what it
 * held before otherwise; the cache goes back to the pool (pinned to the
 * session when there is one).
 */
void scheduler_finish_seq(struct worker *w, struct seq *s, enum engine_finish finish, int code,
			  const char *msg)
{
	struct engine *e = w->e;
	struct job *j = s->job;
	struct engine_result res = {0};
	double now = clock_now_s();
	size_t len = 0;

	if (finish == ENGINE_FINISH_STOP || finish == ENGINE_FINISH_LENGTH) {
		if (detok_flush(&s->detok, w->text, w->text_cap, &len) >= 0)
			scheduler_send_text(s, w->text, len);
	}
	res.finish = finish;
	res.code = code;
	res.prompt_tokens = s->n_prompt;
	res.cached_tokens = s->n_cached;
	res.completion_tokens = s->n_gen;
	res.n_ctx = e->cfg.n_ctx;
	res.ttft_ms = s->n_gen > 0 ? (s->t_first - j->t_submit) * 1000.0 : -1.0;
	if (s->n_prefilled > 0 && s->t_prefill0 > 0) {
		double t_end = s->n_gen > 0 ? s->t_first : now;

		res.prefill_tps = t_end > s->t_prefill0 ? s->n_prefilled / (t_end - s->t_prefill0) : 0;
	}
	if (s->n_gen > 1 && s->t_last > s->t_first)
		res.decode_tps = (s->n_gen - 1) / (s->t_last - s->t_first);
	res.stop_index = finish == ENGINE_FINISH_STOP ? detok_stop_index(&s->detok) : -1;
	if (msg)
		snprintf(res.message, sizeof(res.message), "%s", msg);

	pthread_mutex_lock(&e->lock);
	if (s->kv) {
		struct session *ss = j->session;
		bool keep = ss && !ss->deleted;
		bool ok = finish == ENGINE_FINISH_STOP || finish == ENGINE_FINISH_LENGTH;

		if (keep && ok) {
			memcpy(ss->tokens, s->tokens, (size_t)s->n_tok * sizeof(int32_t));
			ss->n_tok = s->n_tok;
		} else if (keep) {
			compute_kv_truncate(s->kv->kv, ss->n_tok);
		}
		memcpy(s->kv->tokens, s->tokens, (size_t)compute_kv_n_pos(s->kv->kv) * sizeof(int32_t));
		kv_pool_release(&w->kv, s->kv, keep ? &ss->kv : NULL);
		s->kv = NULL;
	}
	if (j->session) {
		j->session->running = false;
		j->session->last_used = now;
		if (--j->session->n_jobs == 0 && j->session->deleted)
			engine_session_destroy(j->session);
		j->session = NULL;
	}
	s->phase = SEQ_FREE;
	s->job = NULL;
	w->n_busy--;
	pthread_mutex_unlock(&e->lock);

	sampler_free(s->sampler);
	s->sampler = NULL;
	embed_end(s);
	grammar_matcher_free(s->gm);
	s->gm = NULL;
	free(s->mask);
	s->mask = NULL;
	free(s->lazy_tail);
	s->lazy_tail = NULL;
	s->lazy_len = 0;
	s->lazy = false;
	engine_job_finish(e, j, &res);
	finish_forks(w, s, finish, code, msg);
}

/* Reports a job that never ran (cancelled in the queue). The session, if
 * any, is released like a finished sequence's. */
void scheduler_finish_unstarted(struct worker *w, struct job *j)
{
	struct engine *e = w->e;
	struct engine_result res = {.finish = ENGINE_FINISH_CANCELLED, .ttft_ms = -1,
				    .stop_index = -1};

	res.n_ctx = e->cfg.n_ctx;
	pthread_mutex_lock(&e->lock);
	if (j->session) {
		if (--j->session->n_jobs == 0 && j->session->deleted)
			engine_session_destroy(j->session);
		j->session = NULL;
	}
	pthread_mutex_unlock(&e->lock);
	engine_job_finish(e, j, &res);
}
