/*
 * test_kv_cache.c - the cache's position-blocked addressing (kv_cache.h):
 * every (layer, head, position) its own row, chunks holding their
 * positions' rows of all layers, runs ending at a chunk's edge or a
 * ring's wrap; prefix copies between different chunkings; attention
 * across chunk edges the same bits as on one chunk; and what the first
 * token of a long slot commits.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "attention.h"
#include "dtype.h"
#include "ember.h"
#include "kernels.h"
#include "kv_cache.h"
#include "pages.h"

/* A value for element c of (layer, head, K or V, position). */
static float kc_val(uint32_t il, uint32_t h, int v, uint32_t pos, uint32_t c)
{
	uint32_t x = il * 2654435761u ^ h * 40503u ^ (uint32_t)v * 977u ^ pos * 131u ^ c * 7u;

	x ^= x >> 13;
	x *= 0x5bd1e995u;
	x ^= x >> 15;
	return (float)(x % 2001u) / 1000.0f - 1.0f;
}

static void kc_write(struct kv_cache *kv, uint32_t il, uint32_t h, uint32_t pos)
{
	char *r[2] = {kv_cache_k_at(kv, il, h, pos), kv_cache_v_at(kv, il, h, pos)};
	const uint32_t d[2] = {kv->head_dim_k, kv->head_dim_v};

	for (int v = 0; v < 2; v++)
		for (uint32_t c = 0; c < d[v]; c++) {
			const float x = kc_val(il, h, v, pos, c);

			if (kv->type == DTYPE_F32)
				((float *)r[v])[c] = x;
			else
				((uint16_t *)r[v])[c] = kern_fp32_to_fp16(x);
		}
}

/* Whether position pos's rows hold kc_val()'s values. */
static int kc_holds(const struct kv_cache *kv, uint32_t il, uint32_t h, uint32_t pos)
{
	const char *r[2] = {kv_cache_k_at(kv, il, h, pos), kv_cache_v_at(kv, il, h, pos)};
	const uint32_t d[2] = {kv->head_dim_k, kv->head_dim_v};

	for (int v = 0; v < 2; v++)
		for (uint32_t c = 0; c < d[v]; c++) {
			const float x = kc_val(il, h, v, pos, c);
			const float y = kv->type == DTYPE_F32 ? ((const float *)r[v])[c]
							      : kern_fp16_to_fp32(((const uint16_t *)r[v])[c]);

			if (y != (kv->type == DTYPE_F32 ? x : kern_fp16_to_fp32(kern_fp32_to_fp16(x))))
				return 0;
		}
	return 1;
}

/* Every row of the cache is one (layer, head, row) and in bounds; rows
 * of consecutive positions are consecutive exactly where kv_cache_run()
 * says; a full layer's positions of chunk c lie in chunk c's span. */
static void kc_check_layout(const struct kv_cache *kv)
{
	const size_t total = kv_cache_bytes(kv) / ((kv->head_dim_k + kv->head_dim_v) * kv->elt);
	const uint32_t p = 1u << kv->chunk_shift;
	unsigned char *seen = calloc(total, 1);

	ck_assert_ptr_nonnull(seen);
	for (uint32_t il = 0; il < kv->n_layer; il++) {
		const struct kv_cache_layer *L = &kv->layer[il];

		for (uint32_t h = 0; h < kv->n_head_kv; h++)
			for (uint32_t row = 0; row < L->rows; row++) {
				/* a ring's rows: position row is row row */
				const size_t i = kv_cache_index(kv, il, h, row);
				const uint32_t run = kv_cache_run(kv, il, row, 1000000);
				const uint32_t want = row / p * p + p < L->rows ? row / p * p + p - row
										: L->rows - row;

				ck_assert_uint_lt(i, total);
				ck_assert_msg(!seen[i], "row %zu twice (layer %u head %u row %u)", i, il,
					      h, row);
				seen[i] = 1;
				ck_assert_uint_eq(run, want);
				if (run > 1)
					ck_assert_uint_eq(kv_cache_index(kv, il, h, row + 1), i + 1);
				if (!kv_cache_is_ring(kv, il)) {
					const size_t span = (size_t)p * L->heads;

					ck_assert_uint_ge(i, L->base + row / p * span);
					ck_assert_uint_lt(i, L->base + (row / p + 1) * span);
				}
			}
	}
	for (size_t i = 0; i < total; i++)
		ck_assert_msg(seen[i], "row %zu unused", i);
	free(seen);
}

static const struct model_hparams kc_hp = {.n_layer = 6, .n_head_kv = 3, .head_dim_k = 16,
					   .head_dim_v = 8, .n_swa = 40};

START_TEST(rows_are_distinct_in_bounds_and_chunked)
{
	static const uint32_t ctx[] = {1, 63, 64, 65, 200, 256, 300};
	static const uint32_t shift[] = {6, 7, 8};
	const struct arch_desc *gemma3 = arch_find("gemma3", 6);
	char err[EMBER_ERR_MAX] = "";

	ck_assert_ptr_nonnull(gemma3);
	for (size_t i = 0; i < sizeof(ctx) / sizeof(ctx[0]); i++)
		for (size_t j = 0; j < sizeof(shift) / sizeof(shift[0]); j++)
			for (int ring = 0; ring < 2; ring++) {
				struct kv_cache kv;

				ck_assert_int_eq(kv_cache_init_chunked(&kv, &kc_hp, ctx[i], DTYPE_F16,
								       ring ? gemma3 : NULL, 7,
								       shift[j], err),
						 0);
				ck_assert_uint_eq(kv_cache_bytes(&kv),
						  kv_cache_bytes_for(&kc_hp, ctx[i], DTYPE_F16,
								     ring ? gemma3 : NULL, 7));
				kc_check_layout(&kv);
				kv_cache_free(&kv);
			}
	{
		struct kv_cache kv;

		ck_assert_int_eq(kv_cache_init_chunked(&kv, &kc_hp, 100, DTYPE_F16, NULL, 0, 5, err),
				 EMBER_EINVAL);
		kv_cache_free(&kv);
	}
}
END_TEST

/* Prefixes copied between caches chunked differently (edges at 64, 128,
 * 192 on one side, 128 on the other; a context not a multiple of either),
 * F32 and F16, full and ring layers: every position the copy keeps holds
 * its values. */
START_TEST(prefix_copy_crosses_chunk_edges)
{
	const struct arch_desc *gemma3 = arch_find("gemma3", 6);
	char err[EMBER_ERR_MAX] = "";

	for (int ring = 0; ring < 2; ring++)
		for (uint32_t type = 0; type < 2; type++) {
			const uint32_t dt = type ? DTYPE_F16 : DTYPE_F32;
			const struct arch_desc *arch = ring ? gemma3 : NULL;
			struct kv_cache src, dst;

			/* the F16 source in the 2 MiB-aligned mapping (small:
			 * only EMBER_HUGEPAGES=always puts it there), the rest
			 * on the heap: copies between the two kinds */
			if (type)
				setenv("EMBER_HUGEPAGES", "always", 1);
			ck_assert_int_eq(kv_cache_init_chunked(&src, &kc_hp, 210, dt, arch, 70, 6, err), 0);
			unsetenv("EMBER_HUGEPAGES");
			ck_assert_uint_eq(src.map_len != 0, type);
			ck_assert_int_eq(kv_cache_init_chunked(&dst, &kc_hp, 170, dt, arch, 70, 7, err), 0);
			ck_assert_uint_eq(dst.map_len, 0);
			/* a ring: rows 109, so positions wrap (and overwrite) */
			for (uint32_t pos = 0; pos < 150; pos++)
				for (uint32_t il = 0; il < kc_hp.n_layer; il++)
					for (uint32_t h = 0; h < kc_hp.n_head_kv; h++)
						kc_write(&src, il, h, pos);
			src.n_pos = src.n_hi = 150;
			ck_assert_int_eq(kv_cache_copy_prefix(&dst, &src, 140), 0);
			ck_assert_uint_eq(dst.n_pos, 140);
			for (uint32_t il = 0; il < kc_hp.n_layer; il++) {
				const uint32_t held = dst.layer[il].rows < src.layer[il].rows
							      ? dst.layer[il].rows
							      : src.layer[il].rows;
				/* and no older than the source's ring still holds */
				const uint32_t lo = 150 > src.layer[il].rows ? 150 - src.layer[il].rows : 0;
				const uint32_t p0 = 140 > held && 140 - held > lo ? 140 - held : lo;

				for (uint32_t h = 0; h < kc_hp.n_head_kv; h++)
					for (uint32_t pos = p0; pos < 140; pos++)
						ck_assert_msg(kc_holds(&dst, il, h, pos),
							      "ring %d type %u layer %u head %u pos %u",
							      ring, dt, il, h, pos);
			}
			/* and back into the first chunking */
			kv_cache_truncate(&src, 0);
			ck_assert_int_eq(kv_cache_copy(&src, &dst), 0);
			for (uint32_t h = 0; h < kc_hp.n_head_kv; h++)
				for (uint32_t pos = 41; pos < 140; pos++)
					ck_assert(kc_holds(&src, 5, h, pos));
			kv_cache_free(&src);
			kv_cache_free(&dst);
		}
}
END_TEST

/* Attention of decode rows and a prompt read across chunk edges (64-key
 * chunks; window starts and a ring's rows that cross them) gives the
 * same bits as on a cache of one chunk. */
START_TEST(attention_across_chunk_edges_is_bit_equal)
{
	enum { N = 230, H = 8, HKV = 2, D = 64, W = 40, STEP = 70 };
	struct model_hparams hp = {.n_layer = 6, .n_head = H, .n_head_kv = HKV, .head_dim_k = D,
				   .head_dim_v = D, .n_swa = W};
	const struct arch_desc *gemma3 = arch_find("gemma3", 6);
	struct attention_tile tiles[(N + ATTENTION_TILE - 1) / ATTENTION_TILE];
	const size_t nf = (size_t)N * H * D;
	float *q = malloc(nf * sizeof(float)), *o[2] = {malloc(nf * sizeof(float)),
							  malloc(nf * sizeof(float))};
	char err[EMBER_ERR_MAX] = "";

	kern_init();
	for (size_t i = 0; i < nf; i++)
		q[i] = kc_val(99, 0, 0, (uint32_t)i, 0);
	for (int form = 0; form < 3; form++) { /* full, window on full rows, ring */
		const struct arch_desc *arch = form ? gemma3 : NULL;
		struct attention a;
		struct kv_cache kv[2];
		uint32_t il = form == 0 ? 5 : 0; /* gemma3: layer 0 slides */

		ck_assert_int_eq(attention_init(&a, &hp, ARCH_ALIBI_NONE, err), 0);
		if (form)
			attention_set_window(&a, gemma3, W);
		for (int k = 0; k < 2; k++) {
			ck_assert_int_eq(kv_cache_init_chunked(&kv[k], &hp, N, DTYPE_F16,
							       form == 2 ? arch : NULL, STEP,
							       k ? 24 : 6, err),
					 0);
			for (uint32_t pos = 0; pos < N; pos++)
				for (uint32_t h = 0; h < HKV; h++)
					kc_write(&kv[k], il, h, pos);
		}
		for (int prompt = 0; prompt < 2; prompt++) {
			/* decode: one query at each of 4 positions; prompt: the
			 * last STEP rows in one call (a ring holds them) */
			static const uint32_t at[] = {63, 64, 129, N - 1};

			for (size_t t = 0; t < (prompt ? 1 : 4); t++) {
				const uint32_t pos = prompt ? N - STEP : at[t], n = prompt ? STEP : 1;

				for (int k = 0; k < 2; k++) {
					uint32_t nt;

					kv[k].n_pos = pos;
					nt = attention_plan(tiles, &kv[k], 0, pos, n);
					for (uint32_t i = 0; i < nt; i++)
						tiles[i].prompt = prompt;
					memset(o[k], 0, nf * sizeof(float));
					attention_run(&a, NULL, il, tiles, nt, q, o[k]);
				}
				ck_assert_msg(memcmp(o[0], o[1], (size_t)n * H * D * sizeof(float)) == 0,
					      "form %d prompt %d pos %u", form, prompt, pos);
			}
		}
		kv_cache_free(&kv[0]);
		kv_cache_free(&kv[1]);
		attention_free(&a);
	}
	free(q), free(o[0]), free(o[1]);
}
END_TEST

/* Bytes of [p, p + len) resident (mincore). */
static size_t kc_resident(const void *p, size_t len)
{
	const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	const uintptr_t b = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	const size_t n = ((uintptr_t)p + len - b + pg - 1) / pg;
	unsigned char *vec = malloc(n);
	size_t got = 0;

	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore((void *)b, n * pg, vec), 0);
	for (size_t i = 0; i < n; i++)
		got += vec[i] & 1;
	free(vec);
	return got * pg;
}

/* A 2048-position slot of TinyLlama's shape (22 layers, 4 kv heads of 64,
 * F16: 22 MiB an array): its first token commits at most one 2.75 MiB
 * chunk and a 2 MiB page beyond, an array, and 300 positions two chunks,
 * whether the arrays are in huge pages or not (kv_cache.h). */
START_TEST(first_token_commits_one_chunk)
{
	struct model_hparams hp = {.n_layer = 22, .n_head = 32, .n_head_kv = 4, .head_dim_k = 64,
				   .head_dim_v = 64};
	const size_t chunk = (size_t)256 * 22 * 4 * 64 * 2, mib = (size_t)1 << 20;
	struct kv_cache kv;
	char err[EMBER_ERR_MAX] = "";
	size_t bytes, rk, rv;

	ck_assert_int_eq(kv_cache_init(&kv, &hp, 2048, DTYPE_F16, err), 0);
	bytes = kv_cache_bytes(&kv) / 2;
	ck_assert_uint_eq(bytes, 22 * mib);
	for (uint32_t il = 0; il < hp.n_layer; il++)
		for (uint32_t h = 0; h < hp.n_head_kv; h++)
			kc_write(&kv, il, h, 0);
	rk = kc_resident(kv.k, bytes), rv = kc_resident(kv.v, bytes);
	fprintf(stderr, "kv_cache: first token of 2048: %zu + %zu KiB resident (%s)\n", rk >> 10,
		rv >> 10, kv.map_len ? "2 MiB-aligned mapping" : "heap");
	ck_assert_uint_le(rk, chunk + 2 * mib);
	ck_assert_uint_le(rv, chunk + 2 * mib);
	for (uint32_t pos = 1; pos < 300; pos++)
		for (uint32_t il = 0; il < hp.n_layer; il++)
			for (uint32_t h = 0; h < hp.n_head_kv; h++)
				kc_write(&kv, il, h, pos);
	rk = kc_resident(kv.k, bytes), rv = kc_resident(kv.v, bytes);
	ck_assert_uint_le(rk, 2 * chunk + 2 * mib);
	ck_assert_uint_le(rv, 2 * chunk + 2 * mib);
	if (pages_huge_enabled())
		ck_assert_uint_ne(kv.map_len, 0);
	kv_cache_free(&kv);
	/* EMBER_HUGEPAGES=0: the heap, whatever the chunk */
	setenv("EMBER_HUGEPAGES", "0", 1);
	ck_assert_int_eq(kv_cache_init(&kv, &hp, 2048, DTYPE_F16, err), 0);
	unsetenv("EMBER_HUGEPAGES");
	ck_assert_uint_eq(kv.map_len, 0);
	kv_cache_free(&kv);
}
END_TEST

Suite *suite_kv_cache(void)
{
	Suite *s = suite_create("kv_cache");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, rows_are_distinct_in_bounds_and_chunked);
	tcase_add_test(tc, prefix_copy_crosses_chunk_edges);
	tcase_add_test(tc, attention_across_chunk_edges_is_bit_equal);
	tcase_add_test(tc, first_token_commits_one_chunk);
	suite_add_tcase(s, tc);
	return s;
}
