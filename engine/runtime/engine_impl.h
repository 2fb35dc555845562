/*
 * engine_impl.h - what engine.c (the public API: queue, sessions,
 * lifetime), engine_job.c (building jobs) and scheduler*.c (the worker
 * and preparation threads) share. Not a public header.
 *
 * A job's path: engine_submit -> the preparation queue -> prep_main
 * (render, tokenize; scheduler_prep.c) -> the run queue -> a worker's slot.
 *
 * Locking: one mutex per engine guards both queues, the session table, job
 * states, each worker's slot table and kv_pool bookkeeping. Workers and
 * the preparation thread hold it only to take jobs, pick caches and
 * publish results, never while computing, tokenizing or calling callbacks.
 */
#ifndef EMBER_ENGINE_IMPL_H
#define EMBER_ENGINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "chat.h"
#include "detok.h"
#include "engine.h"
#include "compute.h"
#include "grammar.h"
#include "kv_pool.h"

/* One submitted request, from engine_submit to on_done. Owned by the
 * queue while queued, by a worker's sequence while running. */
struct job {
	uint64_t id;
	struct job *next;          /* queue link */
	char *prompt;              /* owned copy, NUL-terminated (rendered messages
				    * once prepared) */
	size_t prompt_len;
	struct chat_msg *msgs;     /* [n_msgs] owned copies until rendered */
	size_t n_msgs;
	char *tools;               /* owned copy of engine_request.tools, or NULL */
	/* Set by job_prepare (prep thread, or the worker when the session's
	 * BOS decision changed): */
	bool prepared;
	bool tok_special;          /* tokenized with add_special */
	int prep_rc;               /* < 0: rendering or tokenizing failed */
	char *prep_err;            /* its message (owned) */
	int32_t *tokens;           /* [min(n_tokens, n_ctx)] owned */
	int64_t n_tokens;          /* the prompt's tokens (may exceed n_ctx) */
	bool ids_given;            /* tokens came with the request: never tokenized */
	/* Choices 1.. of a request with n > 1, linked by `next`, owned here
	 * until admission gives each a slot (they share this job's id). */
	struct job *followers;
	uint32_t n_choices;        /* 1 + followers, for admission */
	char *stop[ENGINE_MAX_STOP]; /* owned copies */
	size_t n_stop;
	bool add_special, parse_special;
	bool prefill_only;         /* max_tokens 0 */
	struct sampler_config sampling;
	int32_t max_tokens;
	struct session *session;   /* NULL, or the session it runs in */
	struct grammar *grammar;   /* owned; NULL: unconstrained */
	engine_embed_cb on_embed;  /* non-NULL: an embedding job (embed.h) */
	bool embed_truncate;
	char *trigger;             /* owned; NULL, or the lazy grammar's trigger */
	bool trigger_at_start;
	engine_text_cb on_text;
	engine_done_cb on_done;
	engine_logprobs_cb on_logprobs; /* NULL: no logprobs */
	struct sampler_bias *logit_bias; /* [n_logit_bias] owned copy, or NULL */
	size_t n_logit_bias;
	int32_t top_logprobs;
	void *data;
	atomic_int cancelled;
	double t_submit;           /* clock_now_s() */
};

/* A conversation kept between requests (engine.h). */
struct session {
	uint64_t id;
	struct session *next;
	uint32_t worker;           /* whose kv_pool holds its cache */
	int32_t *tokens;           /* [n_ctx] prompt and generated tokens so far */
	uint32_t n_tok;
	struct kv_entry *kv;       /* idle resident cache (pinned), or NULL */
	struct sampler_config sampling;
	uint32_t n_jobs;           /* requests queued or running on it */
	bool running;              /* one of them runs (they run one at a time) */
	bool deleted;              /* freed when its last job finishes */
	double last_used;
};

enum seq_phase {
	SEQ_FREE,
	SEQ_STARTING,  /* taken from the queue, being tokenized */
	SEQ_WAIT_KV,   /* tokenized, waiting for a cache */
	SEQ_RUN,       /* prefilling or decoding */
	SEQ_EMBED,     /* an embedding job (embed.h), a chunk per step */
	SEQ_FORK,      /* a further choice, waiting for its leader's prefill */
};

/* One slot of a worker: a running sequence. */
struct seq {
	enum seq_phase phase;
	struct job *job;
	struct kv_entry *kv;       /* busy entry while running */
	int32_t *tokens;           /* [n_ctx] the whole sequence (its cache holds the first compute_kv_n_pos) */
	uint32_t n_tok;
	uint32_t n_before;         /* a session's tokens before this request */
	uint32_t n_prompt;         /* this request's prompt tokens */
	uint32_t n_cached;         /* positions reused from a cache */
	uint32_t n_gen;
	uint64_t admitted;         /* admission order: the oldest prefills first */
	struct sampler *sampler;
	struct grammar_matcher *gm; /* with a job's grammar, else NULL */
	uint32_t *mask;            /* [(n_vocab + 31) / 32] allowed tokens, with gm */
	bool lazy;                 /* waiting for the job's trigger to start gm */
	char *lazy_tail;           /* the output's last bytes (or, at start, all of
				    * it after leading whitespace) being matched */
	size_t lazy_len;
	struct detok detok;
	int pending_tokens;        /* generated tokens whose text is held back */
	double t_prefill0, t_first, t_last;
	uint32_t n_prefilled;
	float *logits;             /* into the worker's logits rows, this step */
	struct embed_state *emb;   /* SEQ_EMBED's (embed.h), else NULL */
	bool batched;              /* has rows in this step */
	struct seq *fork_of;       /* SEQ_FORK: the slot prefilling the prompt */
};

struct worker {
	struct engine *e;
	uint32_t index;
	pthread_t thread;
	bool started;
	struct compute_pass *fp;
	struct kv_pool kv;
	struct seq *seqs;          /* [slots] */
	uint32_t n_busy;           /* slots not FREE */
	struct compute_seq *batch; /* [slots] this step's sequences */
	uint32_t *batch_seq;       /* [slots] slot of each batch entry */
	float *logits;             /* [slots][n_vocab] */
	char *text;                /* DETOK_OUT_MAX(piece) bytes of output */
	size_t text_cap;
	char *piece;               /* token piece bytes */
	size_t piece_cap;
	struct engine_logprobs logprobs; /* scratch for on_logprobs */
	uint64_t admit_tick;
	/* engine_stats counters (lock held to write and read) */
	uint64_t n_steps, n_prefill_tok, n_decode_tok, n_prefill_steps;
	uint32_t max_chunk;
	double t_prefill, t_mixed, t_decode, t_emit, t_between;
	uint64_t n_dec_k[ENGINE_STATS_BATCH + 1];
	double t_dec_k[ENGINE_STATS_BATCH + 1];
	double c_prefill, c_mixed, c_decode; /* process CPU seconds in passes */
	double c_dec_k[ENGINE_STATS_BATCH + 1];
	uint64_t n_partial, n_left_out;
	double t_step_end;         /* the last step's end while busy, else 0 */
};

struct engine {
	const struct model *m;
	const struct tokenizer *tok;
	struct engine_model *owned; /* engine_open's load, freed with the engine */
	struct chat_style chat;    /* what messages are rendered with */
	struct engine_config cfg;  /* defaults applied */
	pthread_mutex_t lock;
	pthread_cond_t wake;       /* queue or cancel news for the workers and prep */
	bool stopping;
	struct job *prep_head, *prep_tail; /* submitted, not yet prepared */
	struct job *prep_current;  /* being prepared (off the lock) */
	pthread_t prep_thread;
	bool prep_started;
	struct job *queue_head, *queue_tail; /* prepared, waiting for a slot */
	uint32_t queue_len;        /* jobs in both queues and in prep */
	struct session *sessions;
	uint32_t n_sessions;
	uint64_t next_id;
	double t_last_submit;      /* the newest job's t_submit (gather_wait_s) */
	uint64_t requests_done;
	struct worker *workers;    /* [cfg.workers] */
	/* The vocabulary trie for grammars, built by the first worker that
	 * needs it (engine_grammar_vocab), then read only. */
	pthread_mutex_t gvocab_lock;
	struct grammar_vocab *gvocab;
	/* The FIM tokens (prefix, suffix, middle), found once at start
	 * (engine_fim.c); fim[0] < 0: the model has none. */
	int32_t fim[3];
};

/* Finds the model's FIM tokens into e->fim (engine_fim.c). */
void engine_fim_init(struct engine *e);

/* The engine's grammar vocabulary, built on first use (any worker). NULL
 * on failure, with the reason in err. */
const struct grammar_vocab *engine_grammar_vocab(struct engine *e, char *err);

/* Ends a job: calls on_done with `res` (finish and counts filled in by the
 * caller), then frees it. Called without the lock. */
void engine_job_finish(struct engine *e, struct job *j, struct engine_result *res);

/* Frees a job that never reached a callback. NULL-safe. */
void engine_job_free(struct job *j);

/* Sets `c` to the default sampling with temperature 0 (greedy;
 * engine_job.c). */
void engine_greedy_config(struct sampler_config *c);

/* Checks `req` against the engine before anything is copied (engine_job.c);
 * 0 or an error with the reason in err. */
int engine_request_validate(const struct engine *e, const struct engine_request *req, char *err);

/* A job from `req` (validated), not yet queued (engine_job.c). */
int engine_job_new(struct engine *e, struct job **out, const struct engine_request *req,
		   const struct sampler_config *defaults, char *err);

/* Adds `text` to the job's stop strings unless present or full; 0 or
 * EMBER_ENOMEM (engine_job.c). */
int engine_job_add_stop(struct job *j, const char *text);

/* Choices 1 .. n-1 of `req` as jobs linked by `next` into *out, built
 * off the lock (engine_job.c). 0 or an error. */
int engine_followers_new(const struct engine_request *req, struct job **out, char *err);

/* Frees a session and its token list (its cache entry must be unpinned). */
void engine_session_destroy(struct session *s);

/* The worker thread. */
void *scheduler_main(void *arg);

/* The preparation thread (arg: the engine): renders and tokenizes queued
 * jobs in submission order and moves them to the run queue. */
void *scheduler_prep_main(void *arg);

/* Renders the job's messages (once) and tokenizes its prompt, with
 * add_special as `special` says, into j->tokens; failures land in
 * j->prep_rc / j->prep_err (scheduler_prep.c). Off the lock. */
void scheduler_job_prepare(struct engine *e, struct job *j, bool special);

/* A sequence's sampler, stop-string detok and grammar matcher
 * (scheduler_tools.c). 0 or an error with the reason in err. */
int scheduler_start_tools(struct engine *e, struct seq *s, char *err);

/* A lazy grammar waiting for its trigger sees the newest token's text
 * `piece` (n bytes); starts the matcher once the trigger shows
 * (scheduler_tools.c). 0 or EMBER_ENOMEM. */
int scheduler_lazy_scan(struct engine *e, struct seq *s, const char *piece, size_t n,
			char *err);

/* Worker, lock held: unlinks the queued jobs it may run that were
 * cancelled onto *dead, and moves the oldest eligible jobs into free slots
 * (SEQ_STARTING; a job of n choices takes n slots at once, the further
 * ones SEQ_FORK) (scheduler_admit.c). */
void scheduler_admit(struct worker *w, struct job **dead);

/* Worker, without the lock: fills a SEQ_STARTING slot with the session's
 * and the prompt's tokens and starts its tools (SEQ_WAIT_KV, or
 * SEQ_EMBED); on failure finishes it (scheduler_admit.c). */
void scheduler_start_seq(struct worker *w, struct seq *s);

/* Worker: its slot in `phase` (and, with `want`, for which want() holds)
 * admitted first, or NULL (scheduler_admit.c). With or without the lock:
 * only the worker changes its slots' phases. */
struct seq *scheduler_oldest(struct worker *w, enum seq_phase phase,
			     bool (*want)(const struct seq *));

/* Worker, without the lock (takes it): gives caches to SEQ_WAIT_KV slots
 * in admission order until every cache is busy; the claims whose prefix
 * copies are still to do land in claims/claimed[0..*n_claims), both
 * [slots] (scheduler_admit.c). */
void scheduler_acquire_caches(struct worker *w, struct kv_claim *claims, struct seq **claimed,
			      uint32_t *n_claims);

/* Appends a prepared job to the run queue and wakes the workers (lock held). */
void engine_queue_push(struct engine *e, struct job *j);

/* Worker: hands `len` bytes of s's text to its job's on_text with the
 * tokens behind them (scheduler_finish.c). */
void scheduler_send_text(struct seq *s, const char *text, size_t len);

/* Worker: frees slot `s` and reports `finish` (with `code` and `msg` for
 * errors) to its job, and to the choices waiting on it
 * (scheduler_finish.c). Takes the engine's lock: call without it. */
void scheduler_finish_seq(struct worker *w, struct seq *s, enum engine_finish finish, int code,
			  const char *msg);

/* Worker: reports job `j`, cancelled in the queue, as never run
 * (scheduler_finish.c). Without the lock. */
void scheduler_finish_unstarted(struct worker *w, struct job *j);

#endif
