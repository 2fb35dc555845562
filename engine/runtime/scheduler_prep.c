/*
 * scheduler_prep.c - the preparation thread: renders each queued job's
 * chat messages and tokenizes its prompt, in submission order, then
 * moves it to the run queue, so a long prompt never delays a worker's
 * step. Threads: scheduler_prep_main is the preparation thread; a worker
 * calls scheduler_job_prepare again (off the lock, on a job it holds)
 * when the session changed under a prepared job.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "tokenizer.h"

/* ---- preparation ------------------------------------------------------------ */

static void prep_fail(struct job *j, int rc, const char *msg)
{
	j->prep_rc = rc;
	free(j->prep_err);
	j->prep_err = strdup(msg);
}

/*
 * Renders the job's messages (once) and tokenizes its prompt, with
 * add_special as `special` says, into j->tokens. Reads only what the
 * engine never changes, so any thread may run it on a job it holds.
 */
void scheduler_job_prepare(struct engine *e, struct job *j, bool special)
{
	const uint32_t n_ctx = e->cfg.n_ctx;
	char err[EMBER_ERR_MAX] = "";
	int32_t *shrunk;
	int64_t n;
	size_t i, len;
	char *text;
	int rc;

	j->prepared = true;
	j->tok_special = special;
	if (j->ids_given) { /* used as given */
		j->prep_rc = 0;
		return;
	}
	if (j->n_msgs) {
		rc = chat_render(&e->chat, j->msgs, j->n_msgs, j->tools, 1, &text, &len, err);
		if (rc < 0) {
			prep_fail(j, rc, err);
			return;
		}
		free(j->prompt);
		j->prompt = text;
		j->prompt_len = len;
		for (i = 0; i < j->n_msgs; i++) {
			free((char *)j->msgs[i].role);
			free((char *)j->msgs[i].content);
			free((char *)j->msgs[i].tool_calls);
			free((char *)j->msgs[i].tool_call_id);
		}
		free(j->msgs);
		j->msgs = NULL;
		j->n_msgs = 0;
	}
	free(j->tokens);
	if (!(j->tokens = malloc((size_t)n_ctx * sizeof(int32_t)))) {
		prep_fail(j, EMBER_ENOMEM, "engine: prompt tokens");
		return;
	}
	n = tokenizer_encode(e->tok, j->prompt, j->prompt_len, special, j->parse_special,
			     j->tokens, n_ctx);
	if (n < 0) {
		prep_fail(j, (int)n, "tokenizer failed on the prompt");
		return;
	}
	/* Queued jobs keep only what they need. */
	if (n < n_ctx && (shrunk = realloc(j->tokens, ((size_t)n + 1) * sizeof(int32_t))))
		j->tokens = shrunk;
	j->n_tokens = n;
	j->tok_special = special;
	j->prep_rc = 0;
}

/* Lock held: whether a request of `s` runs or waits for a worker (the
 * one being prepared is in neither place). */
static bool session_busy(const struct engine *e, const struct session *s)
{
	const struct job *j;

	if (s->running)
		return true;
	for (j = e->queue_head; j; j = j->next)
		if (j->session == s)
			return true;
	return false;
}

void *scheduler_prep_main(void *arg)
{
	struct engine *e = arg;

	pthread_mutex_lock(&e->lock);
	while (!e->stopping) {
		struct job *j = e->prep_head;
		bool special;

		if (!j) {
			pthread_cond_wait(&e->wake, &e->lock);
			continue;
		}
		e->prep_head = j->next;
		if (!e->prep_head)
			e->prep_tail = NULL;
		e->prep_current = j;
		/* BOS goes only into an empty session; if a request ahead of
		 * this one changes that, the worker tokenizes again (start_seq). */
		special = j->add_special &&
			  (!j->session || (j->session->n_tok == 0 && !session_busy(e, j->session)));
		pthread_mutex_unlock(&e->lock);
		if (!atomic_load(&j->cancelled) && !j->prepared)
			scheduler_job_prepare(e, j, special);
		pthread_mutex_lock(&e->lock);
		e->prep_current = NULL;
		engine_queue_push(e, j);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}
