/*
 * dev_session.h - one sequence for the tools (eval, bench) on the device
 * the process runs on (compute.h, devices): the CPU's forward session, or
 * on a Vulkan device a compute pass with one cache of its own, driven
 * through compute.h. Owned by the caller; one thread.
 */
#ifndef EMBER_DEV_SESSION_H
#define EMBER_DEV_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "compute.h"
#include "forward.h"

struct dev_session {
	struct forward_ctx *fw;  /* CPU */
	struct compute_pass *cp; /* Vulkan */
	struct compute_kv *kv;
	uint32_t batch, n_vocab;
};

/* As forward_new (n_ctx, max_batch, n_threads of o); F32 cache. */
int dev_session_new(struct dev_session *s, const struct model *m, const struct forward_opts *o,
		    char *err);

/* As forward_eval: steps of at most max_batch tokens. */
int dev_session_eval(struct dev_session *s, const int32_t *ids, size_t n, float *logits,
		     int all, char *err);

/* As forward_rewind. */
void dev_session_rewind(struct dev_session *s, uint32_t n_pos);

/* NULL members safe. */
void dev_session_free(struct dev_session *s);

#endif
