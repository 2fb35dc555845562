/*
 * engine_job.c - a request's job: building one from an engine_request (a
 * deep copy: the caller's buffers are not kept), validating the request,
 * the followers of n > 1 choices, and freeing and finishing a job.
 * Threads: building and validating run on the submitting thread, off the
 * lock; finishing runs on the worker (or whoever ends the job), without
 * the lock.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine_impl.h"

/* ---- jobs ------------------------------------------------------------------- */

void engine_job_free(struct job *j)
{
	size_t i;

	if (!j)
		return;
	while (j->followers) {
		struct job *f = j->followers;

		j->followers = f->next;
		engine_job_free(f);
	}
	free(j->prompt);
	free(j->logit_bias);
	grammar_free(j->grammar);
	free(j->trigger);
	for (i = 0; i < j->n_stop; i++)
		free(j->stop[i]);
	for (i = 0; j->msgs && i < j->n_msgs; i++) {
		free((char *)j->msgs[i].role);
		free((char *)j->msgs[i].content);
		free((char *)j->msgs[i].tool_calls);
		free((char *)j->msgs[i].tool_call_id);
	}
	free(j->msgs);
	free(j->tools);
	free(j->tokens);
	free(j->prep_err);
	free(j);
}

void engine_job_finish(struct engine *e, struct job *j, struct engine_result *res)
{
	/* Choices never admitted end the way their leader did. */
	while (j->followers) {
		struct job *f = j->followers;

		j->followers = f->next;
		engine_job_finish(e, f, res);
	}
	if (j->on_done)
		j->on_done(j->data, res);
	pthread_mutex_lock(&e->lock);
	e->requests_done++;
	pthread_mutex_unlock(&e->lock);
	engine_job_free(j);
}

static char *dup_bytes(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

void engine_greedy_config(struct sampler_config *c)
{
	sampler_config_default(c);
	c->temperature = 0.0f;
}

/* Copies the messages into `j`; 0 or EMBER_ENOMEM. */
static int job_copy_messages(struct job *j, const struct engine_request *req)
{
	size_t i;

	j->msgs = calloc(req->n_messages, sizeof(*j->msgs));
	if (!j->msgs)
		return EMBER_ENOMEM;
	j->n_msgs = req->n_messages;
	for (i = 0; i < req->n_messages; i++) {
		const struct engine_message *m = &req->messages[i];

		j->msgs[i].role = dup_bytes(m->role, strlen(m->role));
		if (!j->msgs[i].role)
			return EMBER_ENOMEM;
		/* NULL stays NULL: JSON null content, no tool calls, no id */
		if (m->content) {
			/* by length: it may hold NUL; 0 reads a C string */
			size_t n = m->content_len ? m->content_len : strlen(m->content);

			if (!(j->msgs[i].content = dup_bytes(m->content, n)))
				return EMBER_ENOMEM;
			j->msgs[i].content_len = n;
		}
		if (m->tool_calls &&
		    !(j->msgs[i].tool_calls = dup_bytes(m->tool_calls, strlen(m->tool_calls))))
			return EMBER_ENOMEM;
		if (m->tool_call_id &&
		    !(j->msgs[i].tool_call_id = dup_bytes(m->tool_call_id, strlen(m->tool_call_id))))
			return EMBER_ENOMEM;
	}
	if (req->tools && !(j->tools = dup_bytes(req->tools, strlen(req->tools))))
		return EMBER_ENOMEM;
	return 0;
}

/* Adds `text` to the job's stop strings unless present or full; 0 or
 * EMBER_ENOMEM. */
int engine_job_add_stop(struct job *j, const char *text)
{
	size_t i;

	for (i = 0; i < j->n_stop; i++)
		if (strcmp(j->stop[i], text) == 0)
			return 0;
	if (j->n_stop == ENGINE_MAX_STOP || !text[0] || strlen(text) > DETOK_MAX_STOP_LEN)
		return 0;
	j->stop[j->n_stop] = dup_bytes(text, strlen(text));
	if (!j->stop[j->n_stop])
		return EMBER_ENOMEM;
	j->n_stop++;
	return 0;
}

/* A job from `req` (validated), not yet queued. */
int engine_job_new(struct engine *e, struct job **out, const struct engine_request *req,
		   const struct sampler_config *defaults, char *err)
{
	struct job *j = calloc(1, sizeof(*j));
	size_t i;
	int rc;

	*out = NULL;
	if (!j)
		return ember_seterr(err, EMBER_ENOMEM, "engine: request");
	j->prompt = dup_bytes(req->prompt ? req->prompt : "", req->prompt ? req->prompt_len : 0);
	j->prompt_len = req->prompt ? req->prompt_len : 0;
	if (!j->prompt)
		goto nomem;
	if (req->grammar_trigger && req->grammar_trigger[0] &&
	    !(j->trigger = dup_bytes(req->grammar_trigger, strlen(req->grammar_trigger))))
		goto nomem;
	j->trigger_at_start = req->grammar_trigger_at_start;
	if (req->tokens) {
		j->tokens = malloc((req->n_tokens + 1) * sizeof(int32_t));
		if (!j->tokens)
			goto nomem;
		memcpy(j->tokens, req->tokens, req->n_tokens * sizeof(int32_t));
		j->n_tokens = (int64_t)req->n_tokens;
		j->ids_given = true;
	}
	j->n_choices = 1;
	for (i = 0; i < req->n_stop; i++) {
		j->stop[i] = dup_bytes(req->stop[i], strlen(req->stop[i]));
		if (!j->stop[i])
			goto nomem;
		j->n_stop = i + 1;
	}
	if (req->n_messages) {
		if (job_copy_messages(j, req) < 0)
			goto nomem;
		/* The template's end-of-turn texts stop it (its end-of-generation
		 * tokens stop it regardless). */
		for (i = 0; i < e->chat.n_stops; i++)
			if (engine_job_add_stop(j, e->chat.stops[i]) < 0)
				goto nomem;
	}
	j->add_special = req->add_special;
	j->parse_special = req->parse_special;
	j->max_tokens = req->max_tokens;
	j->prefill_only = req->max_tokens == 0;
	j->sampling = req->sampling ? *req->sampling : *defaults;
	if ((rc = sampler_config_validate(&j->sampling, err)) < 0) {
		engine_job_free(j);
		return rc;
	}
	if (req->embed_n_tokens) {
		/* Already tokens: nothing for the preparation thread to do. */
		j->tokens = malloc(req->embed_n_tokens * sizeof(int32_t));
		if (!j->tokens)
			goto nomem;
		memcpy(j->tokens, req->embed_tokens, req->embed_n_tokens * sizeof(int32_t));
		j->n_tokens = (int64_t)req->embed_n_tokens;
		j->prepared = true;
		j->tok_special = j->add_special = false;
	}
	j->on_embed = req->on_embed;
	j->embed_truncate = req->embed_truncate;
	j->on_text = req->on_text;
	j->on_done = req->on_done;
	j->on_logprobs = req->on_logprobs;
	j->top_logprobs = req->top_logprobs;
	if (req->n_logit_bias > 0) {
		if (req->n_logit_bias > SAMPLER_MAX_BIAS) {
			engine_job_free(j);
			return ember_seterr(err, EMBER_EINVAL, "at most %d logit biases",
					    SAMPLER_MAX_BIAS);
		}
		j->logit_bias = malloc(req->n_logit_bias * sizeof(*j->logit_bias));
		if (j->logit_bias == NULL)
			goto nomem;
		memcpy(j->logit_bias, req->logit_bias, req->n_logit_bias * sizeof(*j->logit_bias));
		j->n_logit_bias = req->n_logit_bias;
	}
	j->data = req->data;
	atomic_init(&j->cancelled, 0);
	j->t_submit = clock_now_s();
	*out = j;
	return 0;
nomem:
	engine_job_free(j);
	return ember_seterr(err, EMBER_ENOMEM, "engine: request copy");
}

int engine_request_validate(const struct engine *e, const struct engine_request *req, char *err)
{
	size_t i;

	if (req->max_tokens < 0)
		return ember_seterr(err, EMBER_EINVAL, "max_tokens %d is negative", req->max_tokens);
	if (req->top_logprobs < 0 || req->top_logprobs > SAMPLER_MAX_TOP_LOGPROBS)
		return ember_seterr(err, EMBER_EINVAL, "top_logprobs %d is outside [0, %d]",
				    req->top_logprobs, SAMPLER_MAX_TOP_LOGPROBS);
	if (req->n_stop > ENGINE_MAX_STOP || (req->n_stop && !req->stop))
		return ember_seterr(err, EMBER_EINVAL, "at most %d stop strings", ENGINE_MAX_STOP);
	for (i = 0; i < req->n_stop; i++)
		if (!req->stop[i] || !req->stop[i][0] || strlen(req->stop[i]) > DETOK_MAX_STOP_LEN)
			return ember_seterr(err, EMBER_EINVAL, "stop string %zu is empty or longer "
					    "than %d bytes", i, DETOK_MAX_STOP_LEN);
	if (!req->prompt && req->prompt_len)
		return ember_seterr(err, EMBER_EINVAL, "prompt is NULL");
	if (req->n_messages && (req->prompt || !req->messages))
		return ember_seterr(err, EMBER_EINVAL, "a request has a prompt or messages, not both");
	if (req->tokens && (req->prompt || req->n_messages))
		return ember_seterr(err, EMBER_EINVAL, "a request has prompt tokens or text, not both");
	for (i = 0; req->tokens && i < req->n_tokens; i++)
		if (req->tokens[i] < 0 || req->tokens[i] >= tokenizer_n_vocab(e->tok))
			return ember_seterr(err, EMBER_ERANGE, "prompt token %zu (id %d) is outside the "
					    "vocabulary of %d tokens", i, req->tokens[i],
					    tokenizer_n_vocab(e->tok));
	if (req->n > 1 && (req->session || req->max_tokens == 0))
		return ember_seterr(err, EMBER_EINVAL, "several choices (n = %u) need max_tokens > 0 "
				    "and no session", req->n);
	if (req->n > e->cfg.slots)
		return ember_seterr(err, EMBER_EINVAL, "n = %u choices exceed the %u slots of a worker",
				    req->n, e->cfg.slots);
	for (i = 0; i < req->n_messages; i++)
		/* content may be NULL only in a turn that only calls tools */
		if (!req->messages[i].role ||
		    (!req->messages[i].content && !req->messages[i].tool_calls))
			return ember_seterr(err, EMBER_EINVAL, "message %zu has no role or content", i);
	if (req->on_embed && (req->n_messages || req->session || req->grammar || req->n_stop))
		return ember_seterr(err, EMBER_EINVAL, "an embedding takes a prompt or tokens only");
	if (req->on_embed && engine_pooling(e) == ENGINE_POOLING_UNSUPPORTED)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "this model's pooling_type gives no "
				    "embeddings");
	if (req->embed_n_tokens && (!req->on_embed || !req->embed_tokens || req->prompt_len))
		return ember_seterr(err, EMBER_EINVAL, "embed_tokens without on_embed, or with a "
				    "prompt");
	if (req->on_embed && (req->tokens || req->n > 1))
		return ember_seterr(err, EMBER_EINVAL, "an embedding takes embed_tokens, not tokens, "
				    "and one choice");
	return 0;
}

/*
 * Choices 1 .. n-1 of `req` as jobs linked by `next` into *out: no prompt
 * (they take the leader's tokens when it forks), their own stop strings,
 * grammar and seed (seed + i). Built off the lock. 0 or an error.
 */
int engine_followers_new(const struct engine_request *req, struct job **out, char *err)
{
	struct sampler_config greedy;
	struct job **tail = out;
	uint32_t i;
	size_t k;
	int rc;

	*out = NULL;
	engine_greedy_config(&greedy);
	for (i = 1; i < req->n; i++) {
		struct job *f = calloc(1, sizeof(*f));

		if (!f)
			return ember_seterr(err, EMBER_ENOMEM, "engine: choices");
		*tail = f;
		tail = &f->next;
		for (k = 0; k < req->n_stop; k++) {
			if (!(f->stop[k] = dup_bytes(req->stop[k], strlen(req->stop[k]))))
				return ember_seterr(err, EMBER_ENOMEM, "engine: choices");
			f->n_stop = k + 1;
		}
		if (req->grammar &&
		    (rc = grammar_parse_gbnf(&f->grammar, req->grammar, req->grammar_len, err)) < 0)
			return rc;
		f->max_tokens = req->max_tokens;
		f->sampling = req->sampling ? *req->sampling : greedy;
		f->sampling.seed += i;
		f->n_choices = 1;
		f->prepared = true;
		f->on_text = req->on_text;
		f->on_done = req->on_done;
		f->on_logprobs = req->on_logprobs;
		f->top_logprobs = req->top_logprobs;
		if (req->grammar_trigger && req->grammar_trigger[0] &&
		    !(f->trigger = dup_bytes(req->grammar_trigger, strlen(req->grammar_trigger))))
			return ember_seterr(err, EMBER_ENOMEM, "engine: choices");
		f->trigger_at_start = req->grammar_trigger_at_start;
		if (req->n_logit_bias > 0 && req->n_logit_bias <= SAMPLER_MAX_BIAS) {
			f->logit_bias = malloc(req->n_logit_bias * sizeof(*f->logit_bias));
			if (f->logit_bias == NULL)
				return ember_seterr(err, EMBER_ENOMEM, "engine: choices");
			memcpy(f->logit_bias, req->logit_bias,
			       req->n_logit_bias * sizeof(*f->logit_bias));
			f->n_logit_bias = req->n_logit_bias;
		}
		f->data = req->choice_data ? req->choice_data[i] : req->data;
		atomic_init(&f->cancelled, 0);
		f->t_submit = clock_now_s();
	}
	return 0;
}
