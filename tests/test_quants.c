/*
 * test_quants.c - the community block formats (engine/compute/cpu/kernels/quants.h)
 * against llama.cpp's files in ../shared/golden/quants (see its README):
 *   - every quantized tensor of every file dequantizes bit for bit as
 *     ggml does (sha256 of the float32 values, from dequant-sha256.json);
 *   - Ember's logits on every file are no farther from the exact
 *     dequantized reference than 1.25x llama.cpp's own logits are (both
 *     distances printed per file), the prompt evaluated at once (the
 *     prefill GEMMs) and one token a step (the decode GEMVs, which for
 *     Q4_K/Q5_K/Q6_K quantize activations per super-block).
 * Both golden folders: llama/ (32-element fallback types, mixed per file)
 * and llama-256/ (every K-quant and IQ4_XS).
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "ember.h"
#include "forward.h"
#include "gguf.h"
#include "kernels.h"
#include "model.h"
#include "recipe.h"
#include "testutil.h"

#define QDIR "../shared/golden/quants/"
#define Q_N_IN 24
/* The bound: Ember within 1.25x llama.cpp's distance. */
#define Q_LLAMACPP_FACTOR 1.25

static const char *const q_dirs[] = {"llama", "llama-256"};
static const char *const q_types[] = {"Q4_K_M", "Q4_K_S", "Q5_K_M", "Q6_K", "Q3_K_M",
				      "Q2_K",   "Q8_0",   "Q4_0",   "Q4_1", "Q5_0",
				      "Q5_1",   "IQ4_NL", "IQ4_XS"};
#define N_DIRS 2
#define N_TYPES ((int)(sizeof(q_types) / sizeof(q_types[0])))

/* ---- SHA-256 (FIPS 180-4), for the reference digests -------------------- */

struct sha256 {
	uint32_t h[8];
	uint8_t buf[64];
	uint64_t len;
};

static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
	0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
	0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
	0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
	0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
	0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha256_block(struct sha256 *s, const uint8_t *p)
{
	uint32_t w[64], v[8];
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (; i < 64; i++) {
		uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, s->h, sizeof(v));
	for (i = 0; i < 64; i++) {
		uint32_t S1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
		uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
		uint32_t t1 = v[7] + S1 + ch + sha256_k[i] + w[i];
		uint32_t S0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
		uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
		memmove(v + 1, v, 7 * sizeof(uint32_t));
		v[4] += t1;
		v[0] = t1 + S0 + maj;
	}
	for (i = 0; i < 8; i++)
		s->h[i] += v[i];
}

static void sha256_init(struct sha256 *s)
{
	static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
}

static void sha256_update(struct sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;

	while (n > 0) {
		size_t used = s->len % 64, take = 64 - used < n ? 64 - used : n;
		memcpy(s->buf + used, p, take);
		s->len += take;
		p += take;
		n -= take;
		if (s->len % 64 == 0)
			sha256_block(s, s->buf);
	}
}

static void sha256_hex(struct sha256 *s, char out[65])
{
	uint64_t bits = s->len * 8;
	uint8_t pad = 0x80, len_be[8];
	int i;

	sha256_update(s, &pad, 1);
	pad = 0;
	while (s->len % 64 != 56)
		sha256_update(s, &pad, 1);
	for (i = 0; i < 8; i++)
		len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_update(s, len_be, 8);
	for (i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

START_TEST(sha256_of_abc_is_the_standard_vector)
{
	struct sha256 s;
	char hex[65];

	sha256_init(&s);
	sha256_update(&s, "abc", 3);
	sha256_hex(&s, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9c"
			      "b410ff61f20015ad");
}
END_TEST

/* ---- dequantization, bit for bit ---------------------------------------- */

static json_t *load_json(const char *path)
{
	json_error_t je;
	json_t *j = json_load_file(path, 0, &je);

	ck_assert_msg(j != NULL, "%s: %s", path, je.text);
	return j;
}

START_TEST(every_tensor_dequantizes_bit_for_bit_as_ggml)
{
	const char *dir = q_dirs[_i / N_TYPES], *type = q_types[_i % N_TYPES];
	char path[512], err[EMBER_ERR_MAX] = "", hex[65];
	struct gguf g;
	json_t *all, *per;
	const char *name;
	json_t *ent;
	int checked = 0;

	snprintf(path, sizeof(path), QDIR "%s/dequant-sha256.json", dir);
	all = load_json(path);
	per = json_object_get(all, type);
	ck_assert_msg(json_is_object(per), "%s: no entry %s", path, type);
	snprintf(path, sizeof(path), QDIR "%s/%s.gguf", dir, type);
	ck_assert_msg(gguf_open(&g, path, err) == 0, "%s: %s", path, err);
	json_object_foreach(per, name, ent) {
		const struct gguf_tensor *t = gguf_find_tensor(&g, name);
		const char *want = json_string_value(json_object_get(ent, "sha256"));
		struct sha256 s;
		uint64_t rows, r, row_bytes;
		float *row;

		ck_assert_msg(t != NULL && want != NULL, "%s: tensor %s", path, name);
		ck_assert_msg(strcasecmp(dtype_name(t->type),
					 json_string_value(json_object_get(ent, "type"))) == 0,
			      "%s %s: type %s", path, name, dtype_name(t->type));
		rows = t->ne[1] * t->ne[2] * t->ne[3];
		row_bytes = dtype_row_size(t->type, t->ne[0]);
		row = malloc(sizeof(float) * t->ne[0]);
		sha256_init(&s);
		for (r = 0; r < rows; r++) {
			ck_assert_int_eq(kern_dequantize_row(t->type, (const char *)t->data +
								  r * row_bytes,
							     row, t->ne[0]),
					 0);
			sha256_update(&s, row, sizeof(float) * t->ne[0]);
		}
		sha256_hex(&s, hex);
		ck_assert_msg(strcmp(hex, want) == 0, "%s %s (%s): dequantized sha256 %s, ggml's %s",
			      path, name, dtype_name(t->type), hex, want);
		free(row);
		checked++;
	}
	ck_assert_int_gt(checked, 0);
	printf("quants: %-9s %-6s %d tensors dequantize bit for bit as ggml\n", dir, type, checked);
	gguf_close(&g);
	json_decref(all);
}
END_TEST

/* ---- logits against the exact dequantized reference --------------------- */

/* File _i's logits over the golden prompt: evaluated at once, or one
 * token a step (`steps`). */
static void q_check_logits(int i, int steps)
{
	const char *dir = q_dirs[i / N_TYPES], *type = q_types[i % N_TYPES];
	struct forward_opts fo = {.n_ctx = Q_N_IN};
	char path[512], err[EMBER_ERR_MAX] = "";
	struct forward_ctx *f = NULL;
	int32_t input[Q_N_IN];
	float *logits, *exact, *lcpp;
	double ours, theirs;
	struct model m;
	size_t n;

	snprintf(path, sizeof(path), QDIR "%s/tokens.json", dir);
	test_read_golden_ids(path, input, Q_N_IN);

	snprintf(path, sizeof(path), QDIR "%s/%s.gguf", dir, type);
	ck_assert_msg(model_open(&m, path, err) == 0, "%s: %s", path, err);
	n = (size_t)Q_N_IN * m.hp.n_vocab;
	snprintf(path, sizeof(path), QDIR "%s/%s.logits-exact-dequant.f32", dir, type);
	exact = test_read_floats(path, n);
	snprintf(path, sizeof(path), QDIR "%s/%s.logits.f32", dir, type);
	lcpp = test_read_floats(path, n);
	logits = malloc(sizeof(float) * n);
	ck_assert_msg(forward_new(&f, &m, &fo, err) == 0, "%s", err);
	if (steps) {
		for (int t = 0; t < Q_N_IN; t++)
			ck_assert_msg(forward_eval(f, input + t, 1, logits + (size_t)t * m.hp.n_vocab,
						   1, err) == 0,
				      "%s", err);
	} else {
		ck_assert_msg(forward_eval(f, input, Q_N_IN, logits, 1, err) == 0, "%s", err);
	}
	ours = test_logits_dist(logits, exact, Q_N_IN, m.hp.n_vocab);
	theirs = test_logits_dist(lcpp, exact, Q_N_IN, m.hp.n_vocab);
	printf("quants: %-9s %-6s %s vs exact dequant: ember %.3e, llama.cpp %.3e (bound %.3e, "
	       "%s)\n",
	       dir, type, steps ? "decode " : "prefill", ours, theirs, Q_LLAMACPP_FACTOR * theirs,
	       cpu_level_name(kern_level()));
	ck_assert_msg(ours <= Q_LLAMACPP_FACTOR * theirs, "%s %s: %.3e > %.2f x llama.cpp's %.3e",
		      dir, type, ours, Q_LLAMACPP_FACTOR, theirs);
	forward_free(f);
	free(logits);
	free(exact);
	free(lcpp);
	model_free(&m);
}

START_TEST(logits_within_the_llamacpp_distance_of_the_exact_dequant)
{
	q_check_logits(_i, 0);
}
END_TEST

START_TEST(decode_logits_within_the_llamacpp_distance_of_the_exact_dequant)
{
	q_check_logits(_i, 1);
}
END_TEST

/* ---- quantization, byte for byte as llama-quantize ----------------------- */

/* Every tensor of llama-256/TYPE.gguf in a type Ember writes, quantized
 * from the same rows of source-f32.gguf (what llama-quantize was given),
 * must have the same bytes. */
START_TEST(quantized_tensors_are_byte_identical_to_llama_quantize)
{
	const char *type = q_types[_i];
	char path[512], err[EMBER_ERR_MAX] = "";
	struct gguf src, ref;
	int same = 0, skipped = 0;

	ck_assert_msg(gguf_open(&src, QDIR "llama-256/source-f32.gguf", err) == 0, "%s", err);
	snprintf(path, sizeof(path), QDIR "llama-256/%s.gguf", type);
	ck_assert_msg(gguf_open(&ref, path, err) == 0, "%s: %s", path, err);
	for (uint64_t i = 0; i < ref.n_tensors; i++) {
		const struct gguf_tensor *t = &ref.tensors[i];
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
		const struct gguf_tensor *s = gguf_find_tensor(&src, name);
		uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], row_bytes;
		uint8_t *out;

		ck_assert_msg(s != NULL && s->type == DTYPE_F32, "%s: source tensor", name);
		if (t->type == DTYPE_F32)
			continue;
		row_bytes = dtype_row_size(t->type, t->ne[0]);
		out = malloc(row_bytes);
		for (uint64_t r = 0; r < rows; r++) {
			int rc = kern_quantize_row(t->type, (const float *)s->data + r * t->ne[0], out,
						   t->ne[0]);
			if (rc == EMBER_EUNSUPPORTED) {
				skipped++; /* printed in the summary below */
				break;
			}
			ck_assert_int_eq(rc, 0);
			ck_assert_msg(memcmp(out, (const uint8_t *)t->data + r * row_bytes, row_bytes) ==
					      0,
				      "%s %s (%s) row %llu differs from llama-quantize's", type, name,
				      dtype_name(t->type), (unsigned long long)r);
			if (r + 1 == rows)
				same++;
		}
		free(out);
	}
	printf("quants: llama-256 %-6s %d quantized tensors byte-identical to llama-quantize, %d "
	       "not compared\n",
	       type, same, skipped);
	ck_assert_int_gt(same, 0);
	ck_assert_int_eq(skipped, 0);
	gguf_close(&ref);
	gguf_close(&src);
}
END_TEST

/* ---- the presets' per-tensor policy on a TinyLlama-shaped model ---------- */

/* 22 layers, 32 query / 4 KV heads. llama-quantize's Q4_K_M of such a file
 * (made from `ember synth --preset tinyllama-1.1b --type f16`, compared
 * tensor for tensor) has Q6_K on output.weight and on attn_v / ffn_down of
 * layers 0, 1, 4, 7, 10, 13, 16, 19, 20, 21: 21 tensors. */
START_TEST(q4_k_m_policy_matches_llama_quantize_on_22_layers)
{
	static const int q6_layers[] = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
	static const char *const roles[] = {"attn_q", "attn_k", "attn_v", "attn_output",
					    "ffn_gate", "ffn_up", "ffn_down"};
	char err[EMBER_ERR_MAX] = "", name[64];
	uint64_t ne[2] = {2048, 2048};
	struct recipe r;
	uint32_t t;
	int n_q6 = 0;

	ck_assert_int_eq(recipe_parse(&r, "q4_k_m", err), 0);
	recipe_count(&r, "token_embd.weight");
	recipe_count(&r, "output.weight");
	for (int l = 0; l < 22; l++)
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++) {
			snprintf(name, sizeof(name), "blk.%d.%s.weight", l, roles[k]);
			recipe_count(&r, name);
		}
	recipe_set_heads(&r, 32, 4);
	ck_assert_int_eq(recipe_pick(&r, "output.weight", 2, ne, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q6_K);
	n_q6++;
	ck_assert_int_eq(recipe_pick(&r, "token_embd.weight", 2, ne, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q4_K);
	for (int l = 0; l < 22; l++) {
		int more = 0;
		for (size_t k = 0; k < sizeof(q6_layers) / sizeof(q6_layers[0]); k++)
			more |= q6_layers[k] == l;
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++) {
			int grows = strcmp(roles[k], "attn_v") == 0 || strcmp(roles[k], "ffn_down") == 0;
			snprintf(name, sizeof(name), "blk.%d.%s.weight", l, roles[k]);
			ck_assert_int_eq(recipe_pick(&r, name, 2, ne, &t, err), 0);
			ck_assert_msg(t == (more && grows ? DTYPE_Q6_K : DTYPE_Q4_K), "%s: %s", name,
				      dtype_name(t));
			n_q6 += t == DTYPE_Q6_K;
		}
	}
	ck_assert_int_eq(n_q6, 21);
	/* rows that do not fit 256: llama.cpp's fallback */
	ne[0] = 2080;
	ck_assert_int_eq(recipe_pick(&r, "blk.3.ffn_up.weight", 2, ne, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q5_0);
	ck_assert_int_eq(recipe_pick(&r, "blk.4.ffn_down.weight", 2, ne, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q8_0);
	/* tied embeddings: token_embd.weight takes the output head's type */
	ck_assert_int_eq(recipe_parse(&r, "q4_k_m", err), 0);
	recipe_count(&r, "token_embd.weight");
	ne[0] = 2048;
	ck_assert_int_eq(recipe_pick(&r, "token_embd.weight", 2, ne, &t, err), 0);
	ck_assert_uint_eq(t, DTYPE_Q6_K);
}
END_TEST

Suite *suite_quants(void)
{
	Suite *s = suite_create("quants");
	TCase *tc = tcase_create("golden");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sha256_of_abc_is_the_standard_vector);
	tcase_add_test(tc, q4_k_m_policy_matches_llama_quantize_on_22_layers);
	tcase_add_loop_test(tc, every_tensor_dequantizes_bit_for_bit_as_ggml, 0, N_DIRS * N_TYPES);
	tcase_add_loop_test(tc, decode_logits_within_the_llamacpp_distance_of_the_exact_dequant, 0,
			    N_DIRS * N_TYPES);
	tcase_add_loop_test(tc, logits_within_the_llamacpp_distance_of_the_exact_dequant, 0,
			    N_DIRS * N_TYPES);
	tcase_add_loop_test(tc, quantized_tensors_are_byte_identical_to_llama_quantize, 0, N_TYPES);
	suite_add_tcase(s, tc);
	return s;
}
