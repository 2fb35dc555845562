/*
 * dev_session.c - one sequence on the process's device (dev_session.h).
 */
#include "dev_session.h"

#include <string.h>

#include "dtype.h"

int dev_session_eval(struct dev_session *s, const int32_t *ids, size_t n, float *logits, int all,
		     char *err)
{
	size_t done;
	int rc;

	if (s->fw)
		return forward_eval(s->fw, ids, n, logits, all, err);
	for (done = 0; done < n;) {
		uint32_t k = (uint32_t)(n - done < s->batch ? n - done : s->batch);
		int last = done + k == n;
		struct compute_seq sq = {s->kv, ids + done, k,
					 all ? COMPUTE_LOGITS_ALL
					     : last ? COMPUTE_LOGITS_LAST : COMPUTE_LOGITS_NONE, false};

		if ((rc = compute_pass_run(s->cp, &sq, 1,
					   all ? logits + done * s->n_vocab : last ? logits : NULL,
					   err)) < 0)
			return rc;
		done += k;
	}
	return 0;
}

int dev_session_new(struct dev_session *s, const struct model *m, const struct forward_opts *o,
		    char *err)
{
	struct compute_opts co = {.max_batch = o->max_batch ? o->max_batch : FORWARD_DEFAULT_BATCH,
				  .n_threads = o->n_threads};
	int rc;

	memset(s, 0, sizeof(*s));
	s->n_vocab = m->hp.n_vocab;
	if (!compute_device_vulkan())
		return forward_new(&s->fw, m, o, err);
	if (co.max_batch > o->n_ctx)
		co.max_batch = o->n_ctx;
	s->batch = co.max_batch;
	if ((rc = compute_pass_new(&s->cp, m, &co, err)) < 0)
		return rc;
	return compute_kv_new(&s->kv, m, o->n_ctx, DTYPE_F32, 0, err);
}

void dev_session_free(struct dev_session *s)
{
	forward_free(s->fw);
	compute_kv_free(s->kv);
	compute_pass_free(s->cp);
}

void dev_session_rewind(struct dev_session *s, uint32_t n_pos)
{
	if (s->fw)
		forward_rewind(s->fw, n_pos);
	else
		compute_kv_truncate(s->kv, n_pos);
}
