/*
 * engine.c - the engine's public face (engine.h): configuration, the
 * bounded request queue, cancellation, sessions, statistics and the
 * workers' lifetime. The work itself is scheduler.c's; building jobs is
 * engine_job.c's; loading and the text helpers are engine_model.c's.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "dtype.h"
#include "engine_impl.h"

/* Marks every waiting job (both queues and the one in preparation) for
 * which want(job, arg) holds as cancelled. */
static void cancel_waiting(struct engine *e, bool (*want)(const struct job *, const void *),
			   const void *arg)
{
	struct job *j;

	for (j = e->prep_head; j; j = j->next)
		if (want(j, arg))
			atomic_store(&j->cancelled, 1);
	if (e->prep_current && want(e->prep_current, arg))
		atomic_store(&e->prep_current->cancelled, 1);
	for (j = e->queue_head; j; j = j->next)
		if (want(j, arg))
			atomic_store(&j->cancelled, 1);
}

static bool job_in_session(const struct job *j, const void *s)
{
	return j->session == s;
}

static bool job_has_id(const struct job *j, const void *id)
{
	return j->id == *(const uint64_t *)id;
}

/* ---- sessions (lock held) ---------------------------------------------------- */

static struct session *session_find(struct engine *e, uint64_t id)
{
	struct session *s;

	for (s = e->sessions; s && s->id != id; s = s->next)
		;
	return s;
}

static void session_unlink(struct engine *e, struct session *s)
{
	struct session **pp;

	for (pp = &e->sessions; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	e->n_sessions--;
}

void engine_session_destroy(struct session *s)
{
	if (!s)
		return;
	free(s->tokens);
	free(s);
}

/* Unlinks `s`; its cache becomes anonymous; jobs on it are cancelled and
 * the last one out frees it. */
static void session_drop(struct engine *e, struct session *s)
{
	uint32_t w, i;

	session_unlink(e, s);
	if (s->kv)
		s->kv->owner = NULL;
	s->kv = NULL;
	if (s->n_jobs == 0) {
		engine_session_destroy(s);
		return;
	}
	s->deleted = true;
	cancel_waiting(e, job_in_session, s);
	for (w = 0; w < e->cfg.workers; w++)
		for (i = 0; i < e->cfg.slots; i++) {
			struct seq *q = &e->workers[w].seqs[i];

			if (q->phase != SEQ_FREE && q->job->session == s)
				atomic_store(&q->job->cancelled, 1);
		}
	pthread_cond_broadcast(&e->wake);
}

/* Deletes sessions idle for longer than session_idle_s. */
static void sessions_expire(struct engine *e)
{
	const double now = clock_now_s();
	struct session *s = e->sessions, *next;

	for (; s; s = next) {
		next = s->next;
		if (!s->n_jobs && now - s->last_used > e->cfg.session_idle_s)
			session_drop(e, s);
	}
}

static int session_alloc(struct engine *e, struct session **out, char *err)
{
	struct session *s;
	uint32_t i, best = 0, count;

	*out = NULL;
	sessions_expire(e);
	if (e->n_sessions >= e->cfg.max_sessions)
		return ember_seterr(err, EMBER_EFULL, "engine: %u sessions already live",
				    e->n_sessions);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->tokens = malloc((size_t)e->cfg.n_ctx * sizeof(int32_t)))) {
		free(s);
		return ember_seterr(err, EMBER_ENOMEM, "engine: session");
	}
	/* The worker with the fewest sessions holds the new one's cache. */
	for (i = 0; i < e->cfg.workers; i++) {
		struct session *o;

		for (count = 0, o = e->sessions; o; o = o->next)
			count += o->worker == i;
		if (i == 0 || count < best) {
			best = count;
			s->worker = i;
		}
	}
	s->id = ++e->next_id;
	s->last_used = clock_now_s();
	s->next = e->sessions;
	e->sessions = s;
	e->n_sessions++;
	*out = s;
	return 0;
}

/* ---- queues (lock held) ------------------------------------------------------ */

/* A submitted job goes to the preparation queue; it counts as queued
 * until a worker admits it. */
static void prep_push(struct engine *e, struct job *j)
{
	j->next = NULL;
	if (e->prep_tail)
		e->prep_tail->next = j;
	else
		e->prep_head = j;
	e->prep_tail = j;
	e->queue_len++;
	pthread_cond_broadcast(&e->wake);
}

void engine_queue_push(struct engine *e, struct job *j)
{
	j->next = NULL;
	if (e->queue_tail)
		e->queue_tail->next = j;
	else
		e->queue_head = j;
	e->queue_tail = j;
	pthread_cond_broadcast(&e->wake);
}


/* Queues a job built from `req` under the lock. */
static int submit_locked(struct engine *e, const struct engine_request *req,
			 struct grammar **grammar, struct job **followers, uint64_t *id, char *err)
{
	struct sampler_config greedy;
	struct session *s = NULL;
	struct job *j;
	int rc;

	if (e->stopping)
		return ember_seterr(err, EMBER_EBUSY, "engine: shutting down");
	if (req->session) {
		s = session_find(e, req->session);
		if (!s)
			return ember_seterr(err, EMBER_ENOTFOUND, "session %llu not found",
					    (unsigned long long)req->session);
	}
	if (e->queue_len >= e->cfg.queue_max)
		return ember_seterr(err, EMBER_EFULL, "engine: %u requests already queued",
				    e->queue_len);
	engine_greedy_config(&greedy);
	if ((rc = engine_job_new(e, &j, req, s ? &s->sampling : &greedy, err)) < 0)
		return rc;
	j->id = ++e->next_id;
	e->t_last_submit = j->t_submit;
	if (req->choice_data)
		j->data = req->choice_data[0];
	if (followers != NULL) {
		struct job *f;

		j->followers = *followers; /* the job owns them now */
		*followers = NULL;
		for (f = j->followers; f; f = f->next) {
			f->id = j->id;
			j->n_choices++;
			/* Their own stops go first; the template's follow. */
			for (size_t i = 0; i < e->chat.n_stops && req->n_messages; i++)
				if (engine_job_add_stop(f, e->chat.stops[i]) < 0) {
					engine_job_free(j);
					return ember_seterr(err, EMBER_ENOMEM, "engine: choices");
				}
		}
	}
	if (grammar != NULL) {
		j->grammar = *grammar; /* the job owns it now */
		*grammar = NULL;
	}
	if (s) {
		j->session = s;
		s->n_jobs++;
		s->last_used = clock_now_s();
	}
	prep_push(e, j);
	*id = j->id;
	return 0;
}

int engine_submit(struct engine *e, const struct engine_request *req, uint64_t *id, char *err)
{
	struct grammar *g = NULL;
	struct job *followers = NULL;
	int rc;

	*id = 0;
	if ((rc = engine_request_validate(e, req, err)) < 0)
		return rc;
	if (req->n > 1 && (rc = engine_followers_new(req, &followers, err)) < 0)
		goto out;
	/* Compiled here, off the lock, so that a bad grammar is an error of
	 * the submit call (a 400 before any header is sent). */
	if (req->grammar != NULL &&
	    (rc = grammar_parse_gbnf(&g, req->grammar, req->grammar_len, err)) < 0)
		goto out;
	pthread_mutex_lock(&e->lock);
	sessions_expire(e);
	rc = submit_locked(e, req, &g, &followers, id, err);
	pthread_mutex_unlock(&e->lock);
out:
	grammar_free(g); /* NULL unless the submit failed */
	while (followers) {
		struct job *f = followers;

		followers = f->next;
		engine_job_free(f);
	}
	return rc;
}

void engine_cancel(struct engine *e, uint64_t id)
{
	uint32_t w, i;

	pthread_mutex_lock(&e->lock);
	cancel_waiting(e, job_has_id, &id);
	for (w = 0; w < e->cfg.workers; w++)
		for (i = 0; i < e->cfg.slots; i++) {
			struct seq *s = &e->workers[w].seqs[i];

			if (s->phase != SEQ_FREE && s->job->id == id)
				atomic_store(&s->job->cancelled, 1);
		}
	pthread_cond_broadcast(&e->wake);
	pthread_mutex_unlock(&e->lock);
}

static bool job_any(const struct job *j, const void *unused)
{
	(void)j;
	(void)unused;
	return true;
}

void engine_cancel_all(struct engine *e)
{
	uint32_t w, i;

	pthread_mutex_lock(&e->lock);
	cancel_waiting(e, job_any, NULL);
	for (w = 0; w < e->cfg.workers; w++)
		for (i = 0; i < e->cfg.slots; i++) {
			struct seq *s = &e->workers[w].seqs[i];

			if (s->phase != SEQ_FREE)
				atomic_store(&s->job->cancelled, 1);
		}
	pthread_cond_broadcast(&e->wake);
	pthread_mutex_unlock(&e->lock);
}

void engine_stats(struct engine *e, struct engine_stats *st)
{
	uint32_t w, k;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&e->lock);
	st->queue_depth = e->queue_len;
	st->slots_total = e->cfg.workers * e->cfg.slots;
	for (w = 0; w < e->cfg.workers; w++) {
		const struct worker *wk = &e->workers[w];

		st->slots_busy += wk->n_busy;
		st->kv_bytes += kv_pool_bytes(&wk->kv);
		st->kv_bytes_max += (uint64_t)wk->kv.n_max * wk->kv.entry_bytes;
		st->kv_cached += kv_pool_n_idle(&wk->kv);
		st->steps += wk->n_steps;
		st->prefill_tokens += wk->n_prefill_tok;
		st->decode_tokens += wk->n_decode_tok;
		st->prefill_steps += wk->n_prefill_steps;
		if (wk->max_chunk > st->max_chunk)
			st->max_chunk = wk->max_chunk;
		st->prefill_s += wk->t_prefill;
		st->mixed_s += wk->t_mixed;
		st->decode_s += wk->t_decode;
		st->emit_s += wk->t_emit;
		st->between_s += wk->t_between;
		st->prefill_cpu_s += wk->c_prefill;
		st->mixed_cpu_s += wk->c_mixed;
		st->decode_cpu_s += wk->c_decode;
		for (k = 0; k <= ENGINE_STATS_BATCH; k++) {
			st->decode_steps[k] += wk->n_dec_k[k];
			st->decode_steps_s[k] += wk->t_dec_k[k];
			st->decode_steps_cpu_s[k] += wk->c_dec_k[k];
		}
		st->partial_steps += wk->n_partial;
		st->left_out += wk->n_left_out;
	}
	st->sessions = e->n_sessions;
	st->requests_done = e->requests_done;
	pthread_mutex_unlock(&e->lock);
}

const struct grammar_vocab *engine_grammar_vocab(struct engine *e, char *err)
{
	struct grammar_vocab *v;

	pthread_mutex_lock(&e->gvocab_lock);
	if (e->gvocab == NULL && grammar_vocab_from_tokenizer(&e->gvocab, e->tok, err) < 0)
		e->gvocab = NULL;
	v = e->gvocab;
	pthread_mutex_unlock(&e->gvocab_lock);
	return v;
}

int engine_token_piece(const struct engine *e, int32_t id, char *buf, size_t cap)
{
	if (id < 0 || id >= tokenizer_n_vocab(e->tok))
		return EMBER_ERANGE;
	return tokenizer_piece(e->tok, id, 0, buf, cap);
}

uint32_t engine_n_ctx(const struct engine *e)
{
	return e->cfg.n_ctx;
}

/* ---- session API -------------------------------------------------------------- */

int engine_session_new(struct engine *e, const struct engine_session_opts *o, uint64_t *id,
		       char *err)
{
	struct engine_session_opts none = {0};
	struct session *s;
	uint64_t job_id;
	int rc;

	*id = 0;
	if (!o)
		o = &none;
	pthread_mutex_lock(&e->lock);
	if (o->system_len > 0 && e->queue_len >= e->cfg.queue_max) {
		rc = ember_seterr(err, EMBER_EFULL, "engine: %u requests already queued",
				  e->queue_len);
		goto out;
	}
	if ((rc = session_alloc(e, &s, err)) < 0)
		goto out;
	if (o->sampling)
		s->sampling = *o->sampling;
	else
		engine_greedy_config(&s->sampling);
	if ((rc = sampler_config_validate(&s->sampling, err)) < 0) {
		session_drop(e, s);
		goto out;
	}
	if (o->system && o->system_len > 0) {
		struct engine_request req = {.prompt = o->system, .prompt_len = o->system_len,
					     .add_special = o->add_special,
					     .parse_special = o->parse_special, .session = s->id};

		if ((rc = submit_locked(e, &req, NULL, NULL, &job_id, err)) < 0) {
			session_drop(e, s);
			goto out;
		}
	}
	*id = s->id;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int engine_session_clone(struct engine *e, uint64_t id, uint64_t *clone_id, char *err)
{
	struct session *src, *s;
	int rc;

	*clone_id = 0;
	pthread_mutex_lock(&e->lock);
	src = session_find(e, id);
	if (!src) {
		rc = ember_seterr(err, EMBER_ENOTFOUND, "session %llu not found",
				  (unsigned long long)id);
		goto out;
	}
	if (src->n_jobs) {
		rc = ember_seterr(err, EMBER_EBUSY, "session %llu has a request running",
				  (unsigned long long)id);
		goto out;
	}
	if ((rc = session_alloc(e, &s, err)) < 0)
		goto out;
	/* Same worker: the parent's cache is found there by prefix on the
	 * clone's first request and copied. */
	s->worker = src->worker;
	s->sampling = src->sampling;
	memcpy(s->tokens, src->tokens, (size_t)src->n_tok * sizeof(int32_t));
	s->n_tok = src->n_tok;
	src->last_used = s->last_used;
	*clone_id = s->id;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int engine_session_info(struct engine *e, uint64_t id, struct engine_session_info *info)
{
	struct session *s;
	int rc = 0;

	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&e->lock);
	s = session_find(e, id);
	if (s) {
		info->n_tokens = s->n_tok;
		info->n_ctx = e->cfg.n_ctx;
		info->n_left = e->cfg.n_ctx - s->n_tok;
		info->busy = s->n_jobs > 0;
		info->cached = s->kv != NULL || s->running;
		info->idle_s = s->n_jobs ? 0.0 : clock_now_s() - s->last_used;
	} else {
		rc = EMBER_ENOTFOUND;
	}
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int engine_session_delete(struct engine *e, uint64_t id)
{
	struct session *s;
	int rc = 0;

	pthread_mutex_lock(&e->lock);
	s = session_find(e, id);
	if (s)
		session_drop(e, s);
	else
		rc = EMBER_ENOTFOUND;
	pthread_mutex_unlock(&e->lock);
	return rc;
}

/* ---- lifetime ----------------------------------------------------------------- */

static int config_apply(struct engine_config *c, const struct model *m, char *err)
{
	if (!c->workers)
		c->workers = 1;
	if (!c->threads)
		c->threads = 1;
	if (!c->slots)
		c->slots = 4;
	if (!c->n_ctx)
		c->n_ctx = m->hp.n_ctx_train;
	if (!c->prefill_chunk)
		c->prefill_chunk = 256;
	if (!c->queue_max)
		c->queue_max = 64;
	if (!c->max_sessions)
		c->max_sessions = 64;
	if (!c->session_idle_s)
		c->session_idle_s = 600;
	if (c->n_ctx == 0)
		return ember_seterr(err, EMBER_EINVAL, "engine: context size is zero");
	if (c->workers > 256 || c->slots > 4096 || c->threads > 1024)
		return ember_seterr(err, EMBER_EINVAL, "engine: workers %u, slots %u or threads %u "
				    "out of range", c->workers, c->slots, c->threads);
	return 0;
}

static void worker_free(struct worker *w)
{
	uint32_t i;

	if (!w->e)
		return;
	for (i = 0; w->seqs && i < w->e->cfg.slots; i++)
		free(w->seqs[i].tokens);
	free(w->seqs);
	free(w->batch);
	free(w->batch_seq);
	free(w->logits);
	free(w->text);
	free(w->piece);
	kv_pool_free(&w->kv);
	compute_pass_free(w->fp);
}

static int worker_init(struct engine *e, struct worker *w, uint32_t index, char *err)
{
	const struct engine_config *c = &e->cfg;
	struct compute_opts co = {.max_batch = c->slots + c->prefill_chunk,
				  .n_threads = c->threads};
	size_t budget = c->kv_cache_mb ? (size_t)c->kv_cache_mb << 20
				       : compute_kv_bytes(e->m, c->n_ctx, DTYPE_F16) * c->slots;
	uint32_t i;
	int rc;

	w->e = e;
	w->index = index;
	if (!c->kv_cache_mb && c->kv_f32)
		budget *= 2;
	if ((rc = compute_pass_new(&w->fp, e->m, &co, err)) < 0)
		return rc;
	if ((rc = kv_pool_init(&w->kv, e->m, c->n_ctx, c->kv_f32 ? DTYPE_F32 : DTYPE_F16, budget,
			       err)) < 0 ||
	    (rc = kv_pool_set_ring(&w->kv, compute_pass_max_batch(w->fp), err)) < 0)
		return rc;
	w->seqs = calloc(c->slots, sizeof(*w->seqs));
	w->batch = calloc(c->slots, sizeof(*w->batch));
	w->batch_seq = calloc(c->slots, sizeof(*w->batch_seq));
	w->logits = malloc((size_t)c->slots * e->m->hp.n_vocab * sizeof(float));
	w->piece_cap = 256;
	w->piece = malloc(w->piece_cap);
	w->text_cap = DETOK_OUT_MAX(w->piece_cap);
	w->text = malloc(w->text_cap);
	if (!w->seqs || !w->batch || !w->batch_seq || !w->logits || !w->piece || !w->text)
		return ember_seterr(err, EMBER_ENOMEM, "engine: worker buffers");
	for (i = 0; i < c->slots; i++) {
		w->seqs[i].tokens = malloc((size_t)c->n_ctx * sizeof(int32_t));
		if (!w->seqs[i].tokens)
			return ember_seterr(err, EMBER_ENOMEM, "engine: token lists");
	}
	return 0;
}

int engine_new(struct engine **out, const struct model *m, const struct tokenizer *tok,
	       const struct engine_config *cfg, char *err)
{
	struct engine_config def = {0};
	struct engine *e;
	uint32_t i;
	int rc;

	*out = NULL;
	/* Models may pad the embedding past the vocabulary (Phi-2), not less. */
	if (tokenizer_n_vocab(tok) > (int32_t)m->hp.n_vocab)
		return ember_seterr(err, EMBER_EINVAL, "engine: tokenizer has %d tokens, model %u",
				    tokenizer_n_vocab(tok), m->hp.n_vocab);
	e = calloc(1, sizeof(*e));
	if (!e)
		return ember_seterr(err, EMBER_ENOMEM, "engine");
	e->m = m;
	e->tok = tok;
	engine_fim_init(e);
	e->cfg = cfg ? *cfg : def;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->gvocab_lock, NULL);
	pthread_cond_init(&e->wake, NULL);
	if ((rc = config_apply(&e->cfg, m, err)) < 0)
		goto fail;
	if (!engine_template_known(e->cfg.chat_template)) {
		rc = ember_seterr(err, EMBER_EINVAL, "engine: unknown chat template '%s'",
				  e->cfg.chat_template);
		goto fail;
	}
	chat_style_init(&e->chat, e->cfg.chat_template && e->cfg.chat_template[0]
			? (enum chat_template)chat_template_from_name(e->cfg.chat_template)
			: CHAT_TEMPLATE_AUTO, m->gguf, tok);
	if (e->cfg.chat_template_src &&
	    (rc = chat_style_set_template(&e->chat, e->cfg.chat_template_src,
					  e->cfg.chat_template_len, err)) < 0)
		goto fail;
	e->cfg.chat_template = NULL; /* borrowed for this call only */
	e->cfg.chat_template_src = NULL;
	e->workers = calloc(e->cfg.workers, sizeof(*e->workers));
	if (!e->workers) {
		rc = ember_seterr(err, EMBER_ENOMEM, "engine: workers");
		goto fail;
	}
	for (i = 0; i < e->cfg.workers; i++)
		if ((rc = worker_init(e, &e->workers[i], i, err)) < 0)
			goto fail;
	for (i = 0; i < e->cfg.workers; i++) {
		if (pthread_create(&e->workers[i].thread, NULL, scheduler_main, &e->workers[i])) {
			rc = ember_seterr(err, EMBER_ENOMEM, "engine: worker thread");
			goto fail;
		}
		e->workers[i].started = true;
	}
	if (pthread_create(&e->prep_thread, NULL, scheduler_prep_main, e)) {
		rc = ember_seterr(err, EMBER_ENOMEM, "engine: preparation thread");
		goto fail;
	}
	e->prep_started = true;
	*out = e;
	return 0;
fail:
	engine_free(e);
	return rc;
}

void engine_free(struct engine *e)
{
	struct engine_result res = {.finish = ENGINE_FINISH_CANCELLED, .ttft_ms = -1,
				    .stop_index = -1};
	uint32_t i;

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_cond_broadcast(&e->wake);
	pthread_mutex_unlock(&e->lock);
	for (i = 0; e->workers && i < e->cfg.workers; i++)
		if (e->workers[i].started)
			pthread_join(e->workers[i].thread, NULL);
	if (e->prep_started)
		pthread_join(e->prep_thread, NULL);
	/* Requests no worker took: report them here, prepared ones first
	 * (they were submitted first). */
	if (e->queue_tail) {
		e->queue_tail->next = e->prep_head;
	} else {
		e->queue_head = e->prep_head;
	}
	e->prep_head = e->prep_tail = NULL;
	while (e->queue_head) {
		struct job *j = e->queue_head;

		e->queue_head = j->next;
		if (j->session && --j->session->n_jobs == 0 && j->session->deleted)
			engine_session_destroy(j->session);
		res.n_ctx = e->cfg.n_ctx;
		engine_job_finish(e, j, &res);
	}
	/* Pools first: dropping a pinned cache clears its session's pointer. */
	for (i = 0; e->workers && i < e->cfg.workers; i++)
		worker_free(&e->workers[i]);
	while (e->sessions) {
		struct session *s = e->sessions;

		e->sessions = s->next;
		engine_session_destroy(s);
	}
	free(e->workers);
	chat_style_free(&e->chat);
	pthread_cond_destroy(&e->wake);
	pthread_mutex_destroy(&e->lock);
	engine_model_free(e->owned);
	pthread_mutex_destroy(&e->gvocab_lock);
	grammar_vocab_free(e->gvocab);
	free(e);
}
