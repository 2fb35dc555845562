/*
 * test_convert.c - `ember convert` / `ember quantize` against llama.cpp's own
 * conversions of the golden checkpoints (../shared/golden/<arch>), the
 * quantized round trips, and broken checkpoints built here from the golden
 * llama one.
 */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert.h"
#include "dtype.h"
#include "ember.h"
#include "gguf.h"
#include "kernels.h"
#include "safetensors.h"
#include "testutil.h"

#define GOLDEN "../shared/golden"

static char tmpdir[64];

static void make_tmpdir(void)
{
	strcpy(tmpdir, "/tmp/ember-convert-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
	ck_assert_int_eq(test_remove_tree(tmpdir), 0);
}

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* Links golden llama checkpoint file `name` into `dir`. */
static void link_golden(const char *dir, const char *name)
{
	char base[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];

	ck_assert_ptr_nonnull(realpath(GOLDEN "/llama/hf", base));
	snprintf(src, sizeof(src), "%.3000s/%.200s", base, name);
	snprintf(dst, sizeof(dst), "%.3000s/%.200s", dir, name);
	ck_assert_int_eq(symlink(src, dst), 0);
}

static int run_convert(const char *dir, const char *out, const char *recipe, char *err)
{
	struct convert_opts o;

	memset(&o, 0, sizeof(o));
	o.in = dir;
	o.out = out;
	ck_assert_int_eq(recipe_parse(&o.recipe, recipe, err), 0);
	return convert_run(&o, err);
}

static int kv_equal(const struct gguf_kv *a, const struct gguf_kv *b)
{
	return a->type == b->type && a->arr_type == b->arr_type && a->arr_n == b->arr_n &&
	       a->data_len == b->data_len && memcmp(a->data, b->data, a->data_len) == 0;
}

/* Every key of `ref` is in `ours` with the same type and value (but
 * `ignore`), every extra key of ours is ember.*, and the tensors agree in
 * name, order, shape, type and bytes. */
static void assert_same_as_reference(const char *ours, const char *ref, const char *ignore)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf a, b;
	uint64_t i;

	ck_assert_msg(gguf_open(&a, ours, err) == 0, "%s", err);
	ck_assert_msg(gguf_open(&b, ref, err) == 0, "%s", err);
	for (i = 0; i < b.n_kv; i++) {
		const struct gguf_kv *kb = &b.kv[i];
		char key[128];
		const struct gguf_kv *ka;

		snprintf(key, sizeof(key), "%.*s", (int)kb->key.len, kb->key.ptr);
		if (ignore && strcmp(key, ignore) == 0)
			continue;
		ka = gguf_find_kv(&a, key);
		ck_assert_msg(ka != NULL, "%s: key %s missing", ours, key);
		ck_assert_msg(kv_equal(ka, kb), "%s: key %s differs", ours, key);
	}
	for (i = 0; i < a.n_kv; i++) {
		char key[128];

		snprintf(key, sizeof(key), "%.*s", (int)a.kv[i].key.len, a.kv[i].key.ptr);
		ck_assert_msg(gguf_find_kv(&b, key) || strncmp(key, "ember.", 6) == 0,
			      "%s: unexpected key %s", ours, key);
	}
	ck_assert_uint_eq(a.n_tensors, b.n_tensors);
	for (i = 0; i < a.n_tensors; i++) {
		const struct gguf_tensor *x = &a.tensors[i], *y = &b.tensors[i];

		ck_assert_msg(x->name.len == y->name.len &&
				      memcmp(x->name.ptr, y->name.ptr, x->name.len) == 0,
			      "%s: tensor %llu is %.*s, expected %.*s", ours, (unsigned long long)i,
			      (int)x->name.len, x->name.ptr, (int)y->name.len, y->name.ptr);
		ck_assert_uint_eq(x->n_dims, y->n_dims);
		ck_assert(memcmp(x->ne, y->ne, sizeof(x->ne)) == 0);
		ck_assert_uint_eq(x->type, y->type);
		ck_assert_uint_eq(x->size, y->size);
		ck_assert_msg(memcmp(x->data, y->data, x->size) == 0, "%s: tensor %.*s data differs",
			      ours, (int)x->name.len, x->name.ptr);
	}
	gguf_close(&a);
	gguf_close(&b);
}

/* ---- golden conversions ------------------------------------------------------- */

static const char *const golden_archs[] = {"llama", "gemma", "phi", "falcon", "stablelm", "qwen2"};

START_TEST(f32_conversion_matches_llama_cpp_file)
{
	char err[EMBER_ERR_MAX] = "", dir[128], ref[128], out[128];
	const char *arch = golden_archs[_i];

	make_tmpdir();
	snprintf(dir, sizeof(dir), GOLDEN "/%s/hf", arch);
	snprintf(ref, sizeof(ref), GOLDEN "/%s/model-f32.gguf", arch);
	snprintf(out, sizeof(out), "%s/%s.gguf", tmpdir, arch);
	ck_assert_msg(run_convert(dir, out, "f32", err) == 0, "%s: %s", arch, err);
	/* Deliberate difference: llama.cpp hard-codes Gemma's eot id 107;
	 * we look <end_of_turn> up (id 6 in this small vocabulary). */
	assert_same_as_reference(out, ref,
				 strcmp(arch, "gemma") == 0 ? "tokenizer.ggml.eot_token_id" : NULL);
	remove_tmpdir();
}
END_TEST

START_TEST(gemma_eot_is_the_end_of_turn_token)
{
	char err[EMBER_ERR_MAX] = "", out[128];
	struct gguf g;
	uint32_t eot = 0;
	struct gguf_str s;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/g.gguf", tmpdir);
	ck_assert_msg(run_convert(GOLDEN "/gemma/hf", out, "f32", err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	ck_assert_int_eq(gguf_get_u32(&g, "tokenizer.ggml.eot_token_id", &eot), 0);
	ck_assert_int_eq(gguf_arr_str(gguf_find_kv(&g, "tokenizer.ggml.tokens"), eot, &s), 0);
	ck_assert(gguf_str_eq(s, "<end_of_turn>"));
	gguf_close(&g);
	remove_tmpdir();
}
END_TEST

START_TEST(spm_model_bytes_and_recipe_are_embedded)
{
	char err[EMBER_ERR_MAX] = "", out[128];
	const struct gguf_kv *kv;
	struct gguf_str s;
	struct gguf g;
	FILE *f;
	static uint8_t buf[1 << 16];
	size_t n;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/l.gguf", tmpdir);
	ck_assert_msg(run_convert(GOLDEN "/llama/hf", out, "int4-mixed", err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	kv = gguf_find_kv(&g, "ember.tokenizer.spm_model");
	ck_assert_ptr_nonnull(kv);
	ck_assert_int_eq(kv->arr_type, GGUF_TYPE_UINT8);
	f = fopen(GOLDEN "/llama/hf/tokenizer.model", "rb");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	ck_assert_uint_eq(kv->arr_n, n);
	ck_assert(memcmp(kv->data, buf, n) == 0);
	ck_assert_int_eq(gguf_get_str(&g, "ember.recipe", &s), 0);
	ck_assert(gguf_str_eq(s, "int4-mixed"));
	gguf_close(&g);
	remove_tmpdir();
}
END_TEST

START_TEST(sharded_checkpoint_converts_like_the_single_file)
{
	char err[EMBER_ERR_MAX] = "", dir[128], path[192], out[128];
	static const char *const small[] = {"config.json", "tokenizer.model",
					    "tokenizer_config.json", "generation_config.json"};
	uint8_t *file;
	long size;
	FILE *f;
	json_t *hdr, *parts[2], *index, *map;
	const char *key;
	json_t *v;
	uint64_t hlen = 0;
	size_t i, k = 0, n;

	make_tmpdir();
	snprintf(dir, sizeof(dir), "%s/hf", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (i = 0; i < 4; i++)
		link_golden(dir, small[i]);
	f = fopen(GOLDEN "/llama/hf/model.safetensors", "rb");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	file = malloc((size_t)size);
	ck_assert_uint_eq(fread(file, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)file[i] << (8 * i);
	hdr = json_loadb((const char *)file + 8, hlen, 0, NULL);
	ck_assert_ptr_nonnull(hdr);
	json_object_del(hdr, "__metadata__");
	/* Two shards split in name order: the same tensor order as one file.
	 * Each shard keeps the whole data section (offsets stay valid; the
	 * unreferenced bytes are allowed). */
	parts[0] = json_object();
	parts[1] = json_object();
	index = json_object();
	map = json_object();
	n = json_object_size(hdr);
	json_object_foreach(hdr, key, v) {
		size_t p = k++ < n / 2 ? 0 : 1;
		json_object_set(parts[p], key, v);
		json_object_set_new(map, key, json_string(p ? "model-00002-of-00002.safetensors"
							    : "model-00001-of-00002.safetensors"));
	}
	json_object_set_new(index, "weight_map", map);
	for (i = 0; i < 2; i++) {
		char *js = json_dumps(parts[i], JSON_SORT_KEYS | JSON_COMPACT);
		uint64_t len = strlen(js);

		snprintf(path, sizeof(path), "%s/model-0000%zu-of-00002.safetensors", dir, i + 1);
		f = fopen(path, "wb");
		ck_assert_ptr_nonnull(f);
		fwrite(&len, 8, 1, f); /* little-endian host */
		fwrite(js, 1, len, f);
		fwrite(file + 8 + hlen, 1, (size_t)size - 8 - hlen, f);
		fclose(f);
		free(js);
		json_decref(parts[i]);
	}
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	ck_assert_int_eq(json_dump_file(index, path, 0), 0);
	json_decref(index);
	json_decref(hdr);
	free(file);
	snprintf(out, sizeof(out), "%s/sharded.gguf", tmpdir);
	ck_assert_msg(run_convert(dir, out, "f32", err) == 0, "%s", err);
	assert_same_as_reference(out, GOLDEN "/llama/model-f32.gguf", NULL);
	remove_tmpdir();
}
END_TEST

/* ---- Falcon-RW: our own GGUF form ------------------------------------------------ */

START_TEST(falcon_rw_converts_to_the_documented_form)
{
	static const char *const per_layer[] = {
		"attn_norm.bias", "attn_norm.weight", "ffn_down.bias", "ffn_down.weight",
		"ffn_up.bias", "ffn_up.weight", "ffn_norm.bias", "ffn_norm.weight",
		"attn_output.bias", "attn_output.weight", "attn_qkv.bias", "attn_qkv.weight"};
	char err[EMBER_ERR_MAX] = "", out[128], name[64];
	const struct gguf_tensor *qkv;
	struct gguf g;
	uint32_t u = 0;
	int b = 0;
	float f = 0;
	size_t i, l;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/rw.gguf", tmpdir);
	ck_assert_msg(run_convert(GOLDEN "/falcon-rw/hf", out, "f32", err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	ck_assert_int_eq(gguf_get_u32(&g, "falcon.attention.head_count_kv", &u), 0);
	ck_assert_uint_eq(u, 4);
	ck_assert_int_eq(gguf_get_bool(&g, "falcon.use_alibi", &b), 0);
	ck_assert_int_eq(b, 1);
	ck_assert_int_eq(gguf_get_bool(&g, "falcon.use_parallel_residual", &b), 0);
	ck_assert_int_eq(b, 0);
	ck_assert_int_eq(gguf_get_f32(&g, "falcon.attention.max_alibi_bias", &f), 0);
	ck_assert(f == 8.0f);
	ck_assert_uint_eq(g.n_tensors, 2 * 12 + 3);
	for (l = 0; l < 2; l++)
		for (i = 0; i < 12; i++) {
			snprintf(name, sizeof(name), "blk.%zu.%s", l, per_layer[i]);
			ck_assert_msg(gguf_find_tensor(&g, name) != NULL, "%s missing", name);
		}
	ck_assert_ptr_null(gguf_find_tensor(&g, "output.weight")); /* tied */
	qkv = gguf_find_tensor(&g, "blk.1.attn_qkv.weight");
	ck_assert_uint_eq(qkv->ne[0], 128);
	ck_assert_uint_eq(qkv->ne[1], 384);
	/* Row (k, head 2, i=5) of ours is HF's row (head 2, k, 5). */
	{
		struct safetensors s;
		const struct st_tensor *t;

		ck_assert_int_eq(safetensors_open_dir(&s, GOLDEN "/falcon-rw/hf", err), 0);
		t = safetensors_find(&s, "transformer.h.1.self_attention.query_key_value.weight");
		ck_assert_ptr_nonnull(t);
		ck_assert(memcmp((const float *)qkv->data + (128 + 2 * 32 + 5) * 128,
				 (const float *)t->data + ((2 * 3 + 1) * 32 + 5) * 128,
				 128 * sizeof(float)) == 0);
		safetensors_close(&s);
	}
	gguf_close(&g);
	remove_tmpdir();
}
END_TEST

/* ---- recipes and round trips ----------------------------------------------------- */

/* Converts llama with `recipe`; checks every tensor's type with `want`. */
static void check_types(const char *recipe, uint32_t (*want)(const struct gguf_tensor *))
{
	char err[EMBER_ERR_MAX] = "", out[128];
	struct gguf g;
	uint64_t i;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/t.gguf", tmpdir);
	ck_assert_msg(run_convert(GOLDEN "/llama/hf", out, recipe, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	for (i = 0; i < g.n_tensors; i++)
		ck_assert_msg(g.tensors[i].type == want(&g.tensors[i]), "%s: %.*s is %s", recipe,
			      (int)g.tensors[i].name.len, g.tensors[i].name.ptr,
			      dtype_name(g.tensors[i].type));
	gguf_close(&g);
	remove_tmpdir();
}

static int is_embd_or_head(const struct gguf_tensor *t)
{
	return gguf_str_eq(t->name, "token_embd.weight") || gguf_str_eq(t->name, "output.weight");
}

static uint32_t want_mixed(const struct gguf_tensor *t)
{
	return t->n_dims == 1 ? DTYPE_F32 : is_embd_or_head(t) ? DTYPE_Q8_0 : DTYPE_Q4_0;
}

static uint32_t want_f16(const struct gguf_tensor *t)
{
	return t->n_dims == 1 ? DTYPE_F32 : DTYPE_F16;
}

/* ffn_down rows are 352 = 11 x 32, attn rows 128: all quantize. */
static uint32_t want_int8(const struct gguf_tensor *t)
{
	return t->n_dims == 1 ? DTYPE_F32 : DTYPE_Q8_0;
}

START_TEST(recipes_pick_types_like_llama_cpp)
{
	check_types("int4-mixed", want_mixed);
	check_types("f16", want_f16);
	check_types("int8", want_int8);
}
END_TEST

START_TEST(keep_overrides_the_recipe_last_match_wins)
{
	struct recipe r;
	char err[EMBER_ERR_MAX] = "";
	uint64_t ne2[2] = {128, 64}, ne1[1] = {128}, odd[2] = {100, 4};
	uint32_t t;

	ck_assert_int_eq(recipe_parse(&r, "int4", err), 0);
	ck_assert_int_eq(recipe_add_keep(&r, "blk.*.attn_*=q8_0", err), 0);
	ck_assert_int_eq(recipe_add_keep(&r, "blk.1.attn_k.weight=f16", err), 0);
	ck_assert_int_eq(recipe_pick(&r, "blk.0.attn_k.weight", 2, ne2, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q8_0);
	ck_assert_int_eq(recipe_pick(&r, "blk.1.attn_k.weight", 2, ne2, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_F16);
	ck_assert_int_eq(recipe_pick(&r, "blk.1.ffn_up.weight", 2, ne2, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q4_0);
	ck_assert_int_eq(recipe_pick(&r, "blk.1.attn_norm.weight", 1, ne1, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q8_0); /* an explicit --keep wins even over the 1-D rule */
	ck_assert_int_eq(recipe_pick(&r, "blk.1.ffn_norm.weight", 1, ne1, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_F32);
	ck_assert_int_eq(recipe_pick(&r, "x.weight", 2, odd, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_F16); /* rows not of 32: f16 fallback */
	ck_assert_int_eq(recipe_add_keep(&r, "x.*=q4_0", err), 0);
	ck_assert_int_eq(recipe_pick(&r, "x.weight", 2, odd, &t, err), EMBER_EINVAL);
	ck_assert_int_eq(recipe_add_keep(&r, "nonsense", err), EMBER_EINVAL);
	ck_assert_int_eq(recipe_add_keep(&r, "a=q7_k", err), EMBER_EINVAL);
	ck_assert_int_eq(recipe_add_keep(&r, "a=q8_k", err), EMBER_EINVAL); /* not written */
	ck_assert_int_eq(recipe_add_keep(&r, "a=q5_k", err), 0); /* a preset's block type */
	ck_assert_int_eq(recipe_parse(&r, "int3", err), EMBER_EINVAL);
}
END_TEST

/* Dequantized int8/int4 weights stay within the block format's bound of
 * the F32 source: Q8_0 half a step (amax/127/2), Q4_0 one step (amax/8:
 * the side opposite the extreme clamps at +7), plus the f16 scale's
 * rounding (2^-11 relative, applied to at most amax). */
static void check_round_trip(const char *recipe, uint32_t type, float steps)
{
	char err[EMBER_ERR_MAX] = "", out[128];
	struct gguf q, ref;
	float deq[32];
	uint64_t i, b, checked = 0;

	make_tmpdir();
	snprintf(out, sizeof(out), "%s/q.gguf", tmpdir);
	ck_assert_msg(run_convert(GOLDEN "/llama/hf", out, recipe, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&q, out, err), 0);
	ck_assert_int_eq(gguf_open(&ref, GOLDEN "/llama/model-f32.gguf", err), 0);
	for (i = 0; i < q.n_tensors; i++) {
		const struct gguf_tensor *t = &q.tensors[i], *r = &ref.tensors[i];
		const float *x = r->data;
		uint64_t nblk = t->size / dtype_type_size(type);

		if (t->type != type)
			continue;
		for (b = 0; b < nblk; b++) {
			const uint8_t *blk = (const uint8_t *)t->data + b * dtype_type_size(type);
			float amax = 0, bound;
			int j;

			ck_assert_int_eq(kern_dequantize_row(type, blk, deq, 32), 0);
			for (j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(x[b * 32 + j]));
			bound = amax * steps + amax * 0x1p-10f;
			for (j = 0; j < 32; j++)
				ck_assert_msg(fabsf(deq[j] - x[b * 32 + j]) <= bound,
					      "%.*s block %llu: %g vs %g", (int)t->name.len,
					      t->name.ptr, (unsigned long long)b, deq[j], x[b * 32 + j]);
		}
		checked++;
	}
	ck_assert_uint_eq(checked, q.n_tensors - 5); /* all but the 5 norms */
	gguf_close(&q);
	gguf_close(&ref);
	remove_tmpdir();
}

START_TEST(int8_round_trip_within_half_a_step)
{
	check_round_trip("int8", DTYPE_Q8_0, 0.5f / 127.0f);
}
END_TEST

START_TEST(int4_round_trip_within_one_step)
{
	check_round_trip("int4", DTYPE_Q4_0, 1.0f / 8.0f);
}
END_TEST

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long size;

	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	buf = malloc((size_t)size + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*n = (size_t)size;
	return buf;
}

START_TEST(quantize_of_f32_file_equals_direct_conversion)
{
	static const char *const recipes[] = {"int8", "int4", "int4-mixed", "f16", "bf16"};
	const char *archs[] = {"llama", "qwen2", "phi"};
	char err[EMBER_ERR_MAX] = "", f32[128], direct[128], requant[128], dir[128];
	struct convert_opts o;
	size_t a, r, na, nb;

	make_tmpdir();
	for (a = 0; a < 3; a++) {
		snprintf(dir, sizeof(dir), GOLDEN "/%s/hf", archs[a]);
		snprintf(f32, sizeof(f32), "%s/f32.gguf", tmpdir);
		ck_assert_msg(run_convert(dir, f32, "f32", err) == 0, "%s", err);
		for (r = 0; r < 5; r++) {
			uint8_t *x, *y;

			snprintf(direct, sizeof(direct), "%s/direct.gguf", tmpdir);
			snprintf(requant, sizeof(requant), "%s/requant.gguf", tmpdir);
			ck_assert_msg(run_convert(dir, direct, recipes[r], err) == 0, "%s", err);
			memset(&o, 0, sizeof(o));
			o.in = f32;
			o.out = requant;
			ck_assert_int_eq(recipe_parse(&o.recipe, recipes[r], err), 0);
			ck_assert_msg(convert_quantize(&o, err) == 0, "%s", err);
			x = slurp(direct, &na);
			y = slurp(requant, &nb);
			ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s %s: files differ",
				      archs[a], recipes[r]);
			free(x);
			free(y);
		}
	}
	remove_tmpdir();
}
END_TEST

START_TEST(quantize_refuses_quantized_input)
{
	char err[EMBER_ERR_MAX] = "", q4[128], out[128], tmp[140];
	struct convert_opts o;

	make_tmpdir();
	snprintf(q4, sizeof(q4), "%s/q4.gguf", tmpdir);
	snprintf(out, sizeof(out), "%s/out.gguf", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	ck_assert_int_eq(run_convert(GOLDEN "/llama/hf", q4, "int4", err), 0);
	memset(&o, 0, sizeof(o));
	o.in = q4;
	o.out = out;
	ck_assert_int_eq(recipe_parse(&o.recipe, "int8", err), 0);
	ck_assert_int_eq(convert_quantize(&o, err), EMBER_EUNSUPPORTED);
	ck_assert_msg(strstr(err, "q4_0") != NULL, "%s", err);
	ck_assert(!exists(out) && !exists(tmp));
	remove_tmpdir();
}
END_TEST

START_TEST(size_label_follows_llama_cpp)
{
	char buf[32];

	convert_size_label(625280, buf, sizeof(buf));
	ck_assert_str_eq(buf, "625K");
	convert_size_label(1100048384ull, buf, sizeof(buf));
	ck_assert_str_eq(buf, "1.1B");
	convert_size_label(6738415616ull, buf, sizeof(buf));
	ck_assert_str_eq(buf, "6.7B");
	convert_size_label(70553706496ull, buf, sizeof(buf));
	ck_assert_str_eq(buf, "71B");
	convert_size_label(135000000ull, buf, sizeof(buf));
	ck_assert_str_eq(buf, "135M");
}
END_TEST

/* ---- broken checkpoints ---------------------------------------------------------- */

/* Each case starts from the golden llama checkpoint: the header (or
 * config) is edited as JSON, the file rewritten, and the conversion must
 * fail with `code`, a message containing `msg`, and no output file. */
struct bad_case {
	const char *what;
	void (*edit)(json_t *hdr, json_t *config, uint64_t data_len);
	int64_t hlen;     /* header length to write; 0: the real one */
	uint64_t cut;     /* bytes of data to drop from the end */
	int junk_header;  /* header replaced by text that is not JSON */
	int code;
	const char *msg;
};

static void set_entry(json_t *hdr, const char *name, const char *dtype, uint64_t r, uint64_t c,
		      uint64_t begin, uint64_t end)
{
	json_t *e = json_object_get(hdr, name);

	if (dtype)
		json_object_set_new(e, "dtype", json_string(dtype));
	if (r)
		json_object_set_new(e, "shape", json_pack("[II]", (json_int_t)r, (json_int_t)c));
	if (end)
		json_object_set_new(e, "data_offsets",
				    json_pack("[II]", (json_int_t)begin, (json_int_t)end));
}

#define LM_HEAD "lm_head.weight" /* [1000, 128] f32 at [0, 512000) */
#define Q_PROJ "model.layers.1.self_attn.q_proj.weight"

static void no_edit(json_t *h, json_t *c, uint64_t n) { (void)h; (void)c; (void)n; }
static void drop_config(json_t *h, json_t *c, uint64_t n) { (void)h; (void)n; json_object_clear(c); }
static void unknown_arch(json_t *h, json_t *c, uint64_t n)
{
	(void)h; (void)n;
	json_object_set_new(c, "architectures", json_pack("[s]", "MambaForCausalLM"));
}
static void drop_tensor(json_t *h, json_t *c, uint64_t n) { (void)c; (void)n; json_object_del(h, Q_PROJ); }
static void wrong_shape(json_t *h, json_t *c, uint64_t n)
{
	json_t *e = json_object_get(h, Q_PROJ);
	json_int_t b = json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0));

	(void)c; (void)n;
	set_entry(h, Q_PROJ, NULL, 64, 128, (uint64_t)b, (uint64_t)b + 64 * 128 * 4);
}
static void outside(json_t *h, json_t *c, uint64_t n) { (void)c; set_entry(h, LM_HEAD, NULL, 0, 0, n - 4, n - 4 + 512000); }
static void overlap(json_t *h, json_t *c, uint64_t n) { (void)c; (void)n; set_entry(h, "model.embed_tokens.weight", NULL, 0, 0, 256000, 768000); }
static void size_lie(json_t *h, json_t *c, uint64_t n) { (void)c; (void)n; set_entry(h, LM_HEAD, "F16", 0, 0, 0, 0); }
static void int_dtype(json_t *h, json_t *c, uint64_t n) { (void)c; (void)n; set_entry(h, LM_HEAD, "I32", 0, 0, 0, 0); }
static void unknown_tensor(json_t *h, json_t *c, uint64_t n)
{
	(void)c;
	json_object_set_new(h, "model.layers.0.mystery.weight",
			    json_pack("{s:s, s:[i], s:[I,I]}", "dtype", "F32", "shape", 0,
				      "data_offsets", (json_int_t)n, (json_int_t)n));
}
static void bad_heads(json_t *h, json_t *c, uint64_t n)
{
	(void)h; (void)n;
	json_object_set_new(c, "num_key_value_heads", json_integer(3));
}

static const struct bad_case bad_cases[] = {
	{"missing config", drop_config, 0, 0, 0, EMBER_ENOTFOUND, "config.json"},
	{"unknown architecture", unknown_arch, 0, 0, 0, EMBER_EUNSUPPORTED,
	 "supported: Llama, Gemma, Phi, Falcon, StableLm, Qwen2, Qwen3, Phi3, Gemma2, Gemma3, each "
	 "ForCausalLM)"},
	{"missing tensor", drop_tensor, 0, 0, 0, EMBER_EFORMAT, "missing tensor for blk.1.attn_q"},
	{"wrong shape", wrong_shape, 0, 0, 0, EMBER_EFORMAT, "shape [64, 128], expected [128, 128]"},
	{"truncated", no_edit, 0, 1000, 0, EMBER_EFORMAT, "outside the data"},
	{"header length beyond file", no_edit, 1 << 28, 0, 0, EMBER_EFORMAT, "beyond the file"},
	{"offsets outside data", outside, 0, 0, 0, EMBER_EFORMAT, "outside the data"},
	{"overlapping tensors", overlap, 0, 0, 0, EMBER_EFORMAT, "overlap"},
	{"dtype size mismatch", size_lie, 0, 0, 0, EMBER_EFORMAT, "F16 x shape needs 256000"},
	{"unsupported dtype", int_dtype, 0, 0, 0, EMBER_EUNSUPPORTED, "dtype I32 not supported"},
	{"header not JSON", no_edit, 0, 0, 1, EMBER_EFORMAT, "not a JSON object"},
	{"tensor without GGUF name", unknown_tensor, 0, 0, 0, EMBER_EFORMAT, "has no GGUF name"},
	{"inconsistent heads", bad_heads, 0, 0, 0, EMBER_EFORMAT, "inconsistent heads"},
};

START_TEST(broken_checkpoint_fails_cleanly)
{
	const struct bad_case *bc = &bad_cases[_i];
	static const char *const links[] = {"tokenizer.model", "tokenizer_config.json",
					    "generation_config.json"};
	char err[EMBER_ERR_MAX] = "", dir[128], path[192], out[128], tmp[140];
	json_t *hdr, *config;
	uint8_t *file;
	char *js;
	size_t size, i;
	uint64_t hlen = 0, data_len, len;
	FILE *f;

	make_tmpdir();
	snprintf(dir, sizeof(dir), "%s/hf", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (i = 0; i < 3; i++)
		link_golden(dir, links[i]);
	file = slurp(GOLDEN "/llama/hf/model.safetensors", &size);
	for (i = 0; i < 8; i++)
		hlen |= (uint64_t)file[i] << (8 * i);
	data_len = size - 8 - hlen;
	hdr = json_loadb((const char *)file + 8, hlen, 0, NULL);
	config = json_load_file(GOLDEN "/llama/hf/config.json", 0, NULL);
	ck_assert(hdr && config);
	bc->edit(hdr, config, data_len);
	js = bc->junk_header ? strdup("{\"lm_head.weight\": [") : json_dumps(hdr, JSON_COMPACT);
	len = bc->hlen ? (uint64_t)bc->hlen : strlen(js);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	fwrite(&len, 8, 1, f);
	fwrite(js, 1, strlen(js), f);
	fwrite(file + 8 + hlen, 1, data_len - bc->cut, f);
	fclose(f);
	if (json_object_size(config)) {
		snprintf(path, sizeof(path), "%s/config.json", dir);
		ck_assert_int_eq(json_dump_file(config, path, 0), 0);
	}
	free(js);
	free(file);
	json_decref(hdr);
	json_decref(config);

	snprintf(out, sizeof(out), "%s/out.gguf", tmpdir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", out);
	ck_assert_int_eq(run_convert(dir, out, "int4", err), bc->code);
	ck_assert_msg(strstr(err, bc->msg) != NULL, "%s: got '%s'", bc->what, err);
	ck_assert_msg(!exists(out) && !exists(tmp), "%s: output left behind", bc->what);
	remove_tmpdir();
}
END_TEST

START_TEST(missing_tokenizer_fails_cleanly)
{
	char err[EMBER_ERR_MAX] = "", dir[128], out[128];
	static const char *const links[] = {"config.json", "model.safetensors"};
	size_t i;

	make_tmpdir();
	snprintf(dir, sizeof(dir), "%s/hf", tmpdir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (i = 0; i < 2; i++)
		link_golden(dir, links[i]);
	snprintf(out, sizeof(out), "%s/out.gguf", tmpdir);
	ck_assert_int_eq(run_convert(dir, out, "f32", err), EMBER_ENOTFOUND);
	ck_assert_msg(strstr(err, "no tokenizer.model or tokenizer.json") != NULL, "%s", err);
	ck_assert(!exists(out));
	remove_tmpdir();
}
END_TEST

Suite *suite_convert(void)
{
	Suite *s = suite_create("convert");
	TCase *tc = tcase_create("convert");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, f32_conversion_matches_llama_cpp_file, 0,
			    (int)(sizeof(golden_archs) / sizeof(golden_archs[0])));
	tcase_add_test(tc, gemma_eot_is_the_end_of_turn_token);
	tcase_add_test(tc, spm_model_bytes_and_recipe_are_embedded);
	tcase_add_test(tc, sharded_checkpoint_converts_like_the_single_file);
	tcase_add_test(tc, falcon_rw_converts_to_the_documented_form);
	tcase_add_test(tc, recipes_pick_types_like_llama_cpp);
	tcase_add_test(tc, keep_overrides_the_recipe_last_match_wins);
	tcase_add_test(tc, int8_round_trip_within_half_a_step);
	tcase_add_test(tc, int4_round_trip_within_one_step);
	tcase_add_test(tc, quantize_of_f32_file_equals_direct_conversion);
	tcase_add_test(tc, quantize_refuses_quantized_input);
	tcase_add_test(tc, size_label_follows_llama_cpp);
	tcase_add_loop_test(tc, broken_checkpoint_fails_cleanly, 0,
			    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, missing_tokenizer_fails_cleanly);
	suite_add_tcase(s, tc);
	return s;
}
