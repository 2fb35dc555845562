/*
 * embed.c - embedding jobs (engine.h, engine_request.on_embed): the final
 * hidden states of a token sequence, pooled and L2-normalized. A worker
 * runs one when it admits it, whole, on a cache of its own that is freed
 * at once: no KV is kept or reused (a cached prefix would skip the rows
 * mean pooling needs) and no token is decoded. It runs in chunks of
 * prefill_chunk tokens, like a prompt's prefill, so it delays the
 * worker's other streams by about the time of that prefill.
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

int embed_run(struct worker *w, const int32_t *tokens, uint32_t n_tok, float *out, char *err)
{
	struct engine *e = w->e;
	const size_t d = e->m->hp.n_embd;
	const enum engine_pooling pool = engine_pooling(e);
	uint32_t chunk = e->cfg.prefill_chunk, done = 0, i;
	struct compute_kv *kv = NULL;
	double *acc = NULL, norm = 0.0;
	float *hidden = NULL;
	size_t k;
	int rc;

	if (pool == ENGINE_POOLING_UNSUPPORTED)
		return ember_seterr(err, EMBER_EUNSUPPORTED, "this model's pooling_type (rank?) "
				    "gives no embeddings");
	if (n_tok == 0)
		return ember_seterr(err, EMBER_EINVAL, "the input has no tokens");
	if (chunk == 0 || chunk > compute_pass_max_batch(w->fp))
		chunk = compute_pass_max_batch(w->fp);
	acc = calloc(d, sizeof(*acc));
	hidden = malloc((size_t)chunk * d * sizeof(*hidden));
	if (!acc || !hidden) {
		rc = ember_seterr(err, EMBER_ENOMEM, "embedding buffers");
		goto out;
	}
	if ((rc = compute_kv_new(&kv, e->m, n_tok, e->cfg.kv_f32 ? DTYPE_F32 : DTYPE_F16, chunk,
				 err)) < 0)
		goto out;
	while (done < n_tok) {
		uint32_t n = n_tok - done < chunk ? n_tok - done : chunk;
		struct compute_seq sq = {kv, tokens + done, n, COMPUTE_HIDDEN_ALL};

		if ((rc = compute_pass_run(w->fp, &sq, 1, hidden, err)) < 0)
			goto out;
		for (i = 0; i < n; i++) {
			const float *row = hidden + (size_t)i * d;
			uint32_t pos = done + i;

			if (pool == ENGINE_POOLING_MEAN || (pool == ENGINE_POOLING_CLS && pos == 0) ||
			    (pool == ENGINE_POOLING_LAST && pos == n_tok - 1))
				for (k = 0; k < d; k++)
					acc[k] += row[k];
		}
		done += n;
	}
	if (pool == ENGINE_POOLING_MEAN)
		for (k = 0; k < d; k++)
			acc[k] /= n_tok;
	for (k = 0; k < d; k++)
		norm += acc[k] * acc[k];
	norm = sqrt(norm);
	/* A zero vector stays zero rather than becoming NaN. */
	for (k = 0; k < d; k++)
		out[k] = (float)(norm > 0 ? acc[k] / norm : 0.0);
	rc = 0;
out:
	compute_kv_free(kv);
	free(hidden);
	free(acc);
	return rc;
}
