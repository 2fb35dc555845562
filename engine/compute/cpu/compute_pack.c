/*
 * compute_pack.c - compute_prepare_model() for the CPU (compute.h): the
 * load step of packed weight rows (kernels.h KERN_PACKED; why and the
 * figures: kernels/LEVELS.md "Packed rows").
 *
 * Which matrices: of those forward.c reads only as matrix products (the
 * layers' q, k, v, qkv, attention output, gate, up, down, and the output
 * head), the ones the chosen kernel level runs packed (kern_pack_type():
 * K-quants at avx512, n_out a multiple of 4; Q4_K/Q6_K at avx2, of 8); never token_embd's bytes
 * (the tied output's too: get_rows dequantizes single rows in file order). Only where the weights
 * are the model's private copy of the file (gguf_open_weights(), made
 * writable for the pack and read-only again): a file mapping is shared
 * with the page cache and stays as the file lays it out, and so does a
 * Vulkan process (the device uploads the file layout). EMBER_PACK=0 turns
 * it off.
 *
 * Threads: once per model, before any pass uses it (engine_model_open).
 * The pack itself runs on a pool made for it (one thread per online CPU,
 * EMBER_PACK_THREADS=n to choose; destroyed before returning): each item
 * packs runs of whole row groups of one matrix, and groups are packed
 * independently, so the bytes do not depend on the thread count.
 */
#include "compute.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "dtype.h"
#include "ember.h"
#include "env.h"
#include "gguf.h"
#include "gguf_map.h"
#include "kernels.h"
#include "threadpool.h"

/* The layer roles forward.c reads only through linear() (kern_matmul):
 * nothing else of a layer may be rewritten. */
static const enum arch_tensor pack__roles[] = {
	ARCH_T_ATTN_Q, ARCH_T_ATTN_K,	 ARCH_T_ATTN_V,	 ARCH_T_ATTN_QKV,
	ARCH_T_ATTN_OUT, ARCH_T_FFN_GATE, ARCH_T_FFN_UP, ARCH_T_FFN_DOWN,
};
#define PACK__NROLES (sizeof(pack__roles) / sizeof(pack__roles[0]))

/* Candidates: the output head unless tied, and the layers' matrices. */
static size_t pack__list(struct model *m, struct model_weight **out, size_t cap)
{
	const void *embd = m->w[ARCH_T_TOKEN_EMBD].data;
	size_t n = 0;

	if (!m->output_tied && n < cap)
		out[n++] = &m->w[ARCH_T_OUTPUT];
	for (uint32_t l = 0; l < m->hp.n_layer; l++)
		for (size_t r = 0; r < PACK__NROLES; r++)
			if (n < cap)
				out[n++] = &m->layers[l].w[pack__roles[r]];
	/* keep those the level packs; never the embedding's bytes, never the
	 * same bytes twice (a tensor bound to two roles) */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const struct model_weight *w = out[i];
		int dup = w->data == NULL || w->data == embd || w->packed;
		for (size_t j = 0; j < k && !dup; j++)
			dup = out[j]->data == w->data;
		if (!dup && kern_pack_type(w->type, w->n_out, w->n_in) != w->type)
			out[k++] = out[i];
	}
	return k;
}

/* Rows per pack item: about 1 MiB, a multiple of 16 (every level's row
 * group divides 16, checked below), so the items balance over the
 * threads and each one's group temporaries stay in cache. */
#define PACK__ITEM_BYTES (1u << 20)
#define PACK__ROW_UNIT 16

/* One item: rows [o0, o1) of matrix w. */
struct pack__item {
	struct model_weight *w;
	size_t o0, o1;
};

struct pack__job {
	const struct pack__item *items;
	pthread_mutex_t mu;
	int rc; /* the first failure, its message in err */
	char *err;
};

static void pack__run(void *ctx, size_t i)
{
	struct pack__job *j = ctx;
	const struct pack__item *it = &j->items[i];
	const size_t row = dtype_row_size(it->w->type, it->w->n_in);
	char e[EMBER_ERR_MAX];
	int rc = kern_pack_rows(it->w->type, (char *)it->w->data + it->o0 * row, it->o1 - it->o0,
				it->w->n_in, e);

	if (rc != 0) {
		pthread_mutex_lock(&j->mu);
		if (j->rc == 0) {
			j->rc = rc;
			if (j->err)
				snprintf(j->err, EMBER_ERR_MAX, "%s", e);
		}
		pthread_mutex_unlock(&j->mu);
	}
}

/* The items of the n matrices in list (NULL items: only counted). */
static size_t pack__items(struct model_weight *const *list, size_t n, struct pack__item *items)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		struct model_weight *w = list[i];
		const size_t row = dtype_row_size(w->type, w->n_in);
		size_t step = PACK__ITEM_BYTES / row / PACK__ROW_UNIT * PACK__ROW_UNIT;

		/* whole matrix when a group might not divide 16 rows */
		if (step == 0)
			step = PACK__ROW_UNIT;
		if (kern_pack_type(w->type, PACK__ROW_UNIT, w->n_in) != (w->type | KERN_PACKED))
			step = w->n_out;
		for (size_t o = 0; o < w->n_out; o += step, k++)
			if (items)
				items[k] = (struct pack__item){
					w, o, w->n_out - o < step ? w->n_out : o + step};
	}
	return k;
}

/* EMBER_PACK_THREADS (1..256; a bad value is refused on stderr) or 0:
 * tpool_create()'s own count. */
static uint32_t pack__threads(void)
{
	size_t n = 0;

	env_size("EMBER_PACK_THREADS", 1, 256, &n);
	return (uint32_t)n;
}

/* Packs the n matrices over a pool of threads; marks them packed when all
 * succeeded. */
static int pack__all(struct model_weight **list, size_t n, char *err)
{
	const size_t n_items = pack__items(list, n, NULL);
	struct pack__job job = {.rc = 0, .err = err};
	struct pack__item *items = malloc(n_items * sizeof(*items));
	tpool_t pool;

	if (items == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "packing weights");
	pack__items(list, n, items);
	job.items = items;
	pthread_mutex_init(&job.mu, NULL);
	/* NULL (one thread, or no threads to be had): the calling thread */
	pool = tpool_create(pack__threads());
	tpool_run_1d(pool, pack__run, &job, n_items);
	tpool_destroy(pool);
	pthread_mutex_destroy(&job.mu);
	free(items);
	if (job.rc == 0)
		for (size_t i = 0; i < n; i++)
			list[i]->packed = KERN_PACKED;
	return job.rc;
}

/* The process's CPU time (all threads), seconds: the pack's cost on a
 * shared machine, where wall time measures the neighbours. */
static double pack__cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int compute_prepare_model(struct model *m, char *err)
{
	static const char *const offon[] = {"0", "1"};
	size_t on = 1;
	const struct gguf *g = m->gguf;
	struct model_weight **list;
	size_t cap, n, bytes = 0;
	int rc = 0;
	const double t0 = clock_now_s(), c0 = pack__cpu_s();

	if (compute_device_vulkan() || g == NULL || !g->copy)
		return 0;
	env_choice("EMBER_PACK", offon, 2, &on);
	if (!on)
		return 0;
	kern_init();
	cap = 1 + (size_t)m->hp.n_layer * PACK__NROLES;
	if ((list = malloc(cap * sizeof(*list))) == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "packing weights");
	n = pack__list(m, list, cap);
	if (n == 0)
		goto out;
	if (gguf_map_protect(g->map, g->size, 1) != 0) {
		rc = ember_seterr(err, EMBER_EIO, "packing weights: mprotect: %m");
		goto out;
	}
	rc = pack__all(list, n, err);
	for (size_t i = 0; i < n; i++)
		bytes += (size_t)dtype_row_size(list[i]->type, list[i]->n_in) * list[i]->n_out;
	/* read-only again, as the file mapping would be (a stray write faults) */
	if (gguf_map_protect(g->map, g->size, 0) != 0 && rc == 0)
		rc = ember_seterr(err, EMBER_EIO, "packing weights: mprotect: %m");
	if (rc == 0)
		fprintf(stderr,
			"ember: packed the rows of %zu weight matrices (%.1f MiB) for the %s "
			"kernels in %.0f ms (%.0f ms of CPU)\n",
			n, (double)bytes / (1 << 20), cpu_level_name(kern_level()),
			(clock_now_s() - t0) * 1e3, (pack__cpu_s() - c0) * 1e3);
out:
	free(list);
	return rc;
}
