/*
 * scheduler_tools.c - a sequence's per-request tools: its sampler,
 * stop-string detok and grammar matcher (started at once, or lazily once
 * the output holds the grammar's trigger). Threads: the worker that runs
 * the sequence, without the lock.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "sampler.h"

/* Gives slot `s` a matcher for its job's grammar and a mask as wide as
 * the larger of the model's and the tokenizer's vocabularies (bits past
 * the tokenizer's stay 0: those logits can never be chosen). */
static int start_grammar(struct engine *e, struct seq *s, char *err)
{
	const struct grammar_vocab *v = engine_grammar_vocab(e, err);
	size_t n = (size_t)e->m->hp.n_vocab;
	int rc;

	if (v == NULL)
		return EMBER_ENOMEM;
	if ((size_t)grammar_vocab_n(v) > n)
		n = (size_t)grammar_vocab_n(v);
	s->mask = calloc((n + 31) / 32, sizeof(uint32_t));
	if (s->mask == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "grammar mask: out of memory");
	rc = grammar_matcher_new(&s->gm, s->job->grammar, v, err);
	return rc;
}

/*
 * A lazy grammar waiting for its trigger: `piece` (n bytes) is the newest
 * token's text. Once the output holds the trigger, the matcher starts
 * there and takes the bytes from the trigger on; if they do not fit, or
 * an at-start trigger did not begin the output, the output stays free.
 * Returns 0 or EMBER_ENOMEM.
 */
int scheduler_lazy_scan(struct engine *e, struct seq *s, const char *piece, size_t n,
			char *err)
{
	const char *t = s->job->trigger;
	size_t tl = strlen(t), from = 0, keep;
	const char *at = NULL;
	char *grown;
	int rc;

	if (s->job->trigger_at_start && s->lazy_len == 0)
		while (from < n && (piece[from] == ' ' || piece[from] == '\n' || piece[from] == '\t' ||
				    piece[from] == '\r'))
			from++;
	if (from == n)
		return 0;
	grown = realloc(s->lazy_tail, s->lazy_len + n - from);
	if (grown == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "lazy grammar: out of memory");
	s->lazy_tail = grown;
	memcpy(s->lazy_tail + s->lazy_len, piece + from, n - from);
	s->lazy_len += n - from;
	if (s->job->trigger_at_start) {
		keep = s->lazy_len < tl ? s->lazy_len : tl;
		if (memcmp(s->lazy_tail, t, keep) != 0) {
			s->lazy = false; /* the output began otherwise */
			return 0;
		}
		at = s->lazy_len >= tl ? s->lazy_tail : NULL;
	} else {
		at = memmem(s->lazy_tail, s->lazy_len, t, tl);
	}
	if (at == NULL) {
		if (!s->job->trigger_at_start && s->lazy_len >= tl) {
			/* only a tail shorter than the trigger can still begin it */
			memmove(s->lazy_tail, s->lazy_tail + s->lazy_len - (tl - 1), tl - 1);
			s->lazy_len = tl - 1;
		}
		return 0;
	}
	s->lazy = false;
	if ((rc = start_grammar(e, s, err)) == 0 &&
	    (rc = grammar_matcher_accept_bytes(s->gm, at, (size_t)(s->lazy_tail + s->lazy_len - at),
						err)) == 0)
		return 0;
	grammar_matcher_free(s->gm); /* the text after the trigger does not fit: stay free */
	s->gm = NULL;
	free(s->mask);
	s->mask = NULL;
	return rc == EMBER_ENOMEM ? rc : 0;
}

/* A sequence's sampler, stop-string detok and grammar matcher. */
int scheduler_start_tools(struct engine *e, struct seq *s, char *err)
{
	const struct job *j = s->job;
	int rc;

	rc = sampler_new(&s->sampler, &j->sampling, (int32_t)e->m->hp.n_vocab, err);
	if (rc == 0 && j->n_logit_bias > 0)
		rc = sampler_set_bias(s->sampler, j->logit_bias, j->n_logit_bias, err);
	if (rc == 0)
		rc = detok_init(&s->detok, (const char *const *)j->stop, j->n_stop, err);
	if (rc == 0 && j->grammar != NULL && j->trigger == NULL)
		rc = start_grammar(e, s, err);
	s->lazy = j->grammar != NULL && j->trigger != NULL;
	return rc;
}
