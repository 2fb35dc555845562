/*
 * compute_pack.c - compute_prepare_model() for the CPU (compute.h): the
 * load step of packed weight rows (kernels.h KERN_PACKED; why and the
 * figures: kernels/LEVELS.md "Packed rows").
 *
 * Which matrices: of those forward.c reads only as matrix products (the
 * layers' q, k, v, qkv, attention output, gate, up, down, and the output
 * head), the ones the chosen kernel level runs packed (kern_pack_type():
 * K-quants at avx512, n_out a multiple of 4); never token_embd's bytes
 * (the tied output's too: get_rows dequantizes single rows in file order). Only where the weights
 * are the model's private copy of the file (gguf_open_weights(), made
 * writable for the pack and read-only again): a file mapping is shared
 * with the page cache and stays as the file lays it out, and so does a
 * Vulkan process (the device uploads the file layout). EMBER_PACK=0 turns
 * it off.
 *
 * Threads: once per model, before any pass uses it (engine_model_open).
 */
#include "compute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "dtype.h"
#include "ember.h"
#include "env.h"
#include "gguf.h"
#include "gguf_map.h"
#include "kernels.h"

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

int compute_prepare_model(struct model *m, char *err)
{
	static const char *const offon[] = {"0", "1"};
	size_t on = 1;
	const struct gguf *g = m->gguf;
	struct model_weight **list;
	size_t cap, n, bytes = 0;
	int rc = 0;
	const double t0 = clock_now_s();

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
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct model_weight *w = list[i];
		rc = kern_pack_rows(w->type, (void *)w->data, w->n_out, w->n_in, err);
		if (rc == 0) {
			w->packed = KERN_PACKED;
			bytes += (size_t)dtype_row_size(w->type, w->n_in) * w->n_out;
		}
	}
	/* read-only again, as the file mapping would be (a stray write faults) */
	if (gguf_map_protect(g->map, g->size, 0) != 0 && rc == 0)
		rc = ember_seterr(err, EMBER_EIO, "packing weights: mprotect: %m");
	if (rc == 0)
		fprintf(stderr,
			"ember: packed the rows of %zu weight matrices (%.1f MiB) for the %s "
			"kernels in %.0f ms\n",
			n, (double)bytes / (1 << 20), cpu_level_name(kern_level()),
			(clock_now_s() - t0) * 1e3);
out:
	free(list);
	return rc;
}
