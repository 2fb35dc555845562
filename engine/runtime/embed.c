/*
 * embed.c - embedding jobs (engine.h, engine_request.on_embed): the final
 * hidden states of a token sequence, pooled and L2-normalized. A job runs
 * in a worker's slot on a cache of its own that is freed when it ends: no
 * KV is kept or reused (a cached prefix would skip the rows mean pooling
 * needs) and no token is decoded. It advances at most one chunk per
 * worker step, beside the step's batch, its tokens taken from the step's
 * prompt-token budget (scheduler.c: half of it while prompts wait), so
 * like a prompt's prefill it delays running streams by at most a chunk
 * per step.
 *
 * Pooling is accumulated chunk by chunk in double precision (mean: the
 * sum of every row; cls: row 0; last: the last row) so the memory is one
 * chunk of hidden rows whatever the length.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "embed.h"

enum engine_pooling engine_pooling(const struct engine *e)
{
	const struct gguf *g = e->m->gguf;
	struct gguf_str arch;
	char key[160];
	uint32_t v = 1;

	if (g == NULL || gguf_get_str(g, "general.architecture", &arch) != 0 || arch.len > 100)
		return ENGINE_POOLING_MEAN;
	snprintf(key, sizeof(key), "%.*s.pooling_type", (int)arch.len, arch.ptr);
	if (gguf_get_u32(g, key, &v) != 0)
		return ENGINE_POOLING_MEAN;
	switch (v) {
	case 0: /* "none" means per-token vectors; one vector per input is asked */
	case 1:
		return ENGINE_POOLING_MEAN;
	case 2:
		return ENGINE_POOLING_CLS;
	case 3:
		return ENGINE_POOLING_LAST;
	default:
		return ENGINE_POOLING_UNSUPPORTED;
	}
}

const char *engine_pooling_name(enum engine_pooling p)
{
	switch (p) {
	case ENGINE_POOLING_MEAN:
		return "mean";
	case ENGINE_POOLING_CLS:
		return "cls";
	case ENGINE_POOLING_LAST:
		return "last";
	default:
		return "unsupported";
	}
}

/* One embedding in a slot: its own cache, the pooled sums, a chunk of rows. */
struct embed_state {
	struct compute_kv *kv;
	double *acc;               /* [n_embd] */
	float *hidden;             /* [chunk][n_embd] */
	float *out;                /* [n_embd] the result, once done */
	uint32_t chunk, done;
	enum engine_pooling pool;
};

void embed_end(struct seq *s)
{
	struct embed_state *st = s->emb;

	if (!st)
		return;
	compute_kv_free(st->kv);
	free(st->acc);
	free(st->hidden);
	free(st->out);
	free(st);
	s->emb = NULL;
}

int embed_begin(struct worker *w, struct seq *s, char *err)
{
	struct engine *e = w->e;
	const size_t d = e->m->hp.n_embd;
	struct embed_state *st;
	int rc;

	if (s->n_tok == 0)
		return ember_seterr(err, EMBER_EINVAL, "the input has no tokens");
	if (!(st = calloc(1, sizeof(*st))))
		return ember_seterr(err, EMBER_ENOMEM, "embedding state");
	s->emb = st;
	st->pool = engine_pooling(e);
	if (st->pool == ENGINE_POOLING_UNSUPPORTED)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "this model's pooling_type gives no "
				    "embeddings");
	st->chunk = e->cfg.prefill_chunk;
	if (st->chunk == 0 || st->chunk > compute_pass_max_batch(w->fp))
		st->chunk = compute_pass_max_batch(w->fp);
	st->acc = calloc(d, sizeof(*st->acc));
	st->hidden = malloc((size_t)st->chunk * d * sizeof(*st->hidden));
	st->out = malloc(d * sizeof(*st->out));
	if (!st->acc || !st->hidden || !st->out)
		return ember_seterr(err, EMBER_ENOMEM, "embedding buffers");
	rc = compute_kv_new(&st->kv, e->m, s->n_tok, e->cfg.kv_f32 ? DTYPE_F32 : DTYPE_F16,
			    st->chunk, err);
	return rc < 0 ? rc : 0;
}

uint32_t embed_next_chunk(const struct seq *s)
{
	const struct embed_state *st = s->emb;

	return s->n_tok - st->done < st->chunk ? s->n_tok - st->done : st->chunk;
}

int embed_step(struct worker *w, struct seq *s, uint32_t max_tok, bool *finished, char *err)
{
	struct embed_state *st = s->emb;
	const size_t d = w->e->m->hp.n_embd;
	const uint32_t n_tok = s->n_tok;
	uint32_t n = embed_next_chunk(s), i;
	struct compute_seq sq;
	double norm = 0.0;
	size_t k;
	int rc;

	*finished = false;
	if (n > max_tok)
		n = max_tok;
	if (n == 0)
		return 0;
	sq = (struct compute_seq){st->kv, s->tokens + st->done, n, COMPUTE_HIDDEN_ALL, false};
	if ((rc = compute_pass_run(w->fp, &sq, 1, st->hidden, err)) < 0)
		return rc;
	for (i = 0; i < n; i++) {
		const float *row = st->hidden + (size_t)i * d;
		uint32_t pos = st->done + i;

		if (st->pool == ENGINE_POOLING_MEAN || (st->pool == ENGINE_POOLING_CLS && pos == 0) ||
		    (st->pool == ENGINE_POOLING_LAST && pos == n_tok - 1))
			for (k = 0; k < d; k++)
				st->acc[k] += row[k];
	}
	st->done += n;
	if (st->done < n_tok)
		return 0;
	if (st->pool == ENGINE_POOLING_MEAN)
		for (k = 0; k < d; k++)
			st->acc[k] /= n_tok;
	for (k = 0; k < d; k++)
		norm += st->acc[k] * st->acc[k];
	norm = sqrt(norm);
	/* A zero vector stays zero rather than becoming NaN. */
	for (k = 0; k < d; k++)
		st->out[k] = (float)(norm > 0 ? st->acc[k] / norm : 0.0);
	*finished = true;
	return 0;
}

const float *embed_result(const struct seq *s)
{
	return s->emb->out;
}
