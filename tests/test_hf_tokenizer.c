/*
 * test_hf_tokenizer.c - tokenizers converted from Hugging Face files
 * (tools/convert/hf_tokenizer.c). A Llama-2-style checkpoint that ships only
 * tokenizer.json (SentencePiece-style BPE: byte fallback, spaces as "▁")
 * must tokenize exactly as the same vocabulary from tokenizer.model; the
 * tokenizer.json is derived here from the golden llama tokenizer.model the
 * way Hugging Face's converter derives it (merges ordered by the merged
 * piece's score).
 */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert.h"
#include "ember.h"
#include "gguf.h"
#include "recipe.h"
#include "testutil.h"
#include "tokenizer.h"
#include "utf8.h"

#define GOLDEN "../shared/golden"
#define VEC "../shared/tokenizer-vectors/"
#define SEP "\n__ggml_vocab_test__\n"

static char tmp[64];

static int convert_dir(const char *dir, const char *out, char *err)
{
	struct convert_opts o;

	memset(&o, 0, sizeof(o));
	o.in = dir;
	o.out = out;
	ck_assert_int_eq(recipe_parse(&o.recipe, "f32", err), 0);
	return convert_run(&o, err);
}

static void link_from(const char *arch, const char *dir, const char *name)
{
	char base[PATH_MAX], src[PATH_MAX + 256], dst[PATH_MAX], from[64];

	snprintf(from, sizeof(from), GOLDEN "/%s/hf", arch);
	ck_assert_ptr_nonnull(realpath(from, base));
	snprintf(src, sizeof(src), "%s/%s", base, name);
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	ck_assert_int_eq(symlink(src, dst), 0);
}

struct merge {
	double score;
	int64_t l, r;
	char *text;
};

static int merge_cmp(const void *a, const void *b)
{
	const struct merge *x = a, *y = b;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	if (x->l != y->l)
		return x->l < y->l ? -1 : 1;
	return (x->r > y->r) - (x->r < y->r);
}

/* tokenizer.json for the SentencePiece vocabulary in `g`: its normalizer
 * is Llama 2's (Prepend "▁", then spaces to "▁") or, without `prepend`,
 * Gemma's (only the Replace). */
static json_t *spm_as_tokenizer_json(const struct gguf *g, int prepend)
{
	const struct gguf_kv *toks = gguf_find_kv(g, "tokenizer.ggml.tokens");
	const struct gguf_kv *scores = gguf_find_kv(g, "tokenizer.ggml.scores");
	const struct gguf_kv *types = gguf_find_kv(g, "tokenizer.ggml.token_type");
	json_t *vocab = json_object(), *merges = json_array(), *added = json_array(), *root;
	struct merge *m = NULL;
	size_t nm = 0, cap = 0;
	uint64_t i;

	ck_assert(toks && scores && types);
	for (i = 0; i < toks->arr_n; i++) {
		struct gguf_str s;
		double ty;
		char buf[256];
		ck_assert_int_eq(gguf_arr_str(toks, i, &s), 0);
		ck_assert_uint_lt(s.len, sizeof(buf));
		memcpy(buf, s.ptr, s.len);
		buf[s.len] = '\0';
		json_object_set_new(vocab, buf, json_integer((json_int_t)i));
		gguf_arr_num(types, i, &ty);
		if (ty == 2 || ty == 3)
			json_array_append_new(added, json_pack("{s:I,s:s,s:b}", "id", (json_int_t)i, "content",
							       buf, "special", 1));
	}
	for (i = 0; i < toks->arr_n; i++) {
		struct gguf_str s;
		double ty, sc;
		gguf_arr_str(toks, i, &s);
		gguf_arr_num(types, i, &ty);
		gguf_arr_num(scores, i, &sc);
		if (ty != 1)
			continue;
		for (size_t k = 1; k < s.len; k++) {
			char l[256], r[256];
			json_t *lv, *rv;
			if (((unsigned char)s.ptr[k] & 0xC0) == 0x80)
				continue; /* split between characters only */
			memcpy(l, s.ptr, k);
			l[k] = '\0';
			memcpy(r, s.ptr + k, s.len - k);
			r[s.len - k] = '\0';
			lv = json_object_get(vocab, l);
			rv = json_object_get(vocab, r);
			if (!lv || !rv)
				continue;
			if (nm == cap) {
				cap = cap ? 2 * cap : 1024;
				m = realloc(m, cap * sizeof(*m));
				ck_assert_ptr_nonnull(m);
			}
			m[nm].score = sc;
			m[nm].l = json_integer_value(lv);
			m[nm].r = json_integer_value(rv);
			m[nm].text = malloc(s.len + 2);
			snprintf(m[nm].text, s.len + 2, "%s %s", l, r);
			nm++;
		}
	}
	qsort(m, nm, sizeof(*m), merge_cmp);
	for (i = 0; i < nm; i++) {
		json_array_append_new(merges, json_string(m[i].text));
		free(m[i].text);
	}
	free(m);
	root = json_pack("{s:o,s:o,s:o,s:o}", "normalizer",
			 prepend ? json_pack("{s:s,s:[{s:s,s:s},{s:s,s:{s:s},s:s}]}", "type", "Sequence",
					     "normalizers", "type", "Prepend", "prepend", "\xe2\x96\x81", "type",
					     "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81")
				 : json_pack("{s:s,s:{s:s},s:s}", "type", "Replace", "pattern", "String", " ",
					     "content", "\xe2\x96\x81"),
			 "pre_tokenizer", json_null(), "added_tokens", added, "model",
			 json_pack("{s:s,s:b,s:s,s:o,s:o}", "type", "BPE", "byte_fallback", 1, "unk_token", "<unk>",
				   "vocab", vocab, "merges", merges));
	ck_assert_ptr_nonnull(root);
	return root;
}

/*
 * The golden `arch` checkpoint converted from its tokenizer.model, and again
 * with only a tokenizer.json derived from it (normalizer with or without
 * Prepend): both tokenize every vector text alike, and the tokenizer.json
 * one decodes each back to the text (Gemma's lost text on decode when it
 * was taken for byte-level BPE).
 */
static void json_alone_like_tokenizer_model(const char *arch, int prepend)
{
	char err[EMBER_ERR_MAX] = "", dir[128], ref[128], out[128], path[256], from[128];
	struct gguf gr = {0}, go = {0};
	struct tokenizer *tr = NULL, *to = NULL;
	static const char *const links[] = {"config.json", "model.safetensors", "tokenizer_config.json",
					    "generation_config.json", "special_tokens_map.json"};
	char *in, *text;
	size_t in_len, cases = 0;
	json_t *tj;

	strcpy(tmp, "/tmp/ember-hftok-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(ref, sizeof(ref), "%s/ref.gguf", tmp);
	snprintf(from, sizeof(from), GOLDEN "/%s/hf", arch);
	ck_assert_msg(convert_dir(from, ref, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&gr, ref, err), 0);
	snprintf(dir, sizeof(dir), "%s/hf", tmp);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		link_from(arch, dir, links[i]);
	tj = spm_as_tokenizer_json(&gr, prepend);
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	ck_assert_int_eq(json_dump_file(tj, path, 0), 0);
	json_decref(tj);
	snprintf(out, sizeof(out), "%s/json.gguf", tmp);
	ck_assert_msg(convert_dir(dir, out, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&go, out, err), 0);
	ck_assert_msg(tokenizer_new(&tr, &gr, err) == 0, "%s", err);
	ck_assert_msg(tokenizer_new(&to, &go, err) == 0, "%s", err);

	in = test_read_file(VEC "ggml-vocab-llama-spm.gguf.inp", &in_len);
	ck_assert_ptr_nonnull(in);
	for (text = in;; cases++) {
		char *sep = strstr(text, SEP);
		int32_t a[2048], b[2048];
		int64_t na, nb;
		if (sep == NULL)
			break;
		na = tokenizer_encode(tr, text, (size_t)(sep - text), 1, 0, a, 2048);
		nb = tokenizer_encode(to, text, (size_t)(sep - text), 1, 0, b, 2048);
		ck_assert_int_ge(na, 0);
		ck_assert_msg(na == nb && memcmp(a, b, (size_t)na * sizeof(*a)) == 0,
			      "%s case %zu (%.*s): %lld ids vs %lld, or different ids", arch, cases,
			      (int)(sep - text), text, (long long)na, (long long)nb);
		if (utf8_valid(text, (size_t)(sep - text))) {
			char back[8192];
			int64_t m = tokenizer_decode(to, b, (size_t)nb, 0, back, sizeof(back));
			ck_assert_msg(m == sep - text && memcmp(back, text, (size_t)m) == 0,
				      "%s case %zu (%.*s) decodes to (%.*s)", arch, cases, (int)(sep - text),
				      text, (int)(m > 0 ? m : 0), back);
		}
		text = sep + strlen(SEP);
	}
	ck_assert_uint_ge(cases, 40);
	free(in);
	tokenizer_free(to);
	tokenizer_free(tr);
	gguf_close(&go);
	gguf_close(&gr);
	ck_assert_int_eq(test_remove_tree(tmp), 0);
}

START_TEST(llama2_tokenizer_json_alone_tokenizes_like_tokenizer_model)
{
	json_alone_like_tokenizer_model("llama", 1);
}
END_TEST

/* Gemma's tokenizer.json: spaces become "▁" but none is put in front. */
START_TEST(gemma_tokenizer_json_alone_tokenizes_like_tokenizer_model)
{
	json_alone_like_tokenizer_model("gemma3", 0);
}
END_TEST

/* An added token marked "special": false is user-defined text, matched in
 * plain text even without special parsing (Hugging Face's rule), not a
 * control token; "<|...|>" names made it control before. */
START_TEST(non_special_added_tokens_stay_text)
{
	char err[EMBER_ERR_MAX] = "", dir[128], out[128], path[256];
	static const char *const links[] = {"config.json", "model.safetensors", "tokenizer_config.json",
					    "generation_config.json"};
	const char *text = "x<|fim_prefix|>y";
	struct gguf g = {0};
	struct tokenizer *t = NULL;
	const struct gguf_kv *types;
	json_error_t je;
	json_t *tj;
	double ty;
	int32_t ids[16];
	int64_t n, i, found = 0;

	strcpy(tmp, "/tmp/ember-hftok-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(dir, sizeof(dir), "%s/hf", tmp);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (size_t k = 0; k < sizeof(links) / sizeof(links[0]); k++)
		link_from("qwen2", dir, links[k]);
	tj = json_load_file(GOLDEN "/qwen2/hf/tokenizer.json", 0, &je);
	ck_assert_ptr_nonnull(tj);
	json_array_append_new(json_object_get(tj, "added_tokens"),
			      json_pack("{s:i,s:s,s:b}", "id", 1000, "content", "<|fim_prefix|>", "special", 0));
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	ck_assert_int_eq(json_dump_file(tj, path, 0), 0);
	json_decref(tj);
	snprintf(out, sizeof(out), "%s/q.gguf", tmp);
	ck_assert_msg(convert_dir(dir, out, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	types = gguf_find_kv(&g, "tokenizer.ggml.token_type");
	ck_assert_ptr_nonnull(types);
	ck_assert_int_eq(gguf_arr_num(types, 1000, &ty), 0);
	ck_assert_msg(ty == 4, "type %g, want 4 (user-defined)", ty);
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	n = tokenizer_encode(t, text, strlen(text), 0, 0, ids, 16);
	for (i = 0; i < n; i++)
		found |= ids[i] == 1000;
	ck_assert_msg(found, "the non-special added token is matched in plain text");
	tokenizer_free(t);
	gguf_close(&g);
	ck_assert_int_eq(test_remove_tree(tmp), 0);
}
END_TEST

/* A copy of the golden qwen2 checkpoint in tmp/hf whose tokenizer.json
 * has `normalizer` (stolen; NULL keeps the file's own, NFC). */
static void qwen2_dir_with(json_t *normalizer, char *dir, size_t cap)
{
	static const char *const links[] = {"config.json", "model.safetensors", "tokenizer_config.json",
					    "generation_config.json"};
	char path[256];
	json_error_t je;
	json_t *tj;

	strcpy(tmp, "/tmp/ember-hftok-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(dir, cap, "%s/hf", tmp);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	for (size_t k = 0; k < sizeof(links) / sizeof(links[0]); k++)
		link_from("qwen2", dir, links[k]);
	tj = json_load_file(GOLDEN "/qwen2/hf/tokenizer.json", 0, &je);
	ck_assert_ptr_nonnull(tj);
	if (normalizer != NULL)
		json_object_set_new(tj, "normalizer", normalizer);
	snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
	ck_assert_int_eq(json_dump_file(tj, path, 0), 0);
	json_decref(tj);
}

static void rm_tmp(void)
{
	ck_assert_int_eq(test_remove_tree(tmp), 0);
}

/* Qwen2/Qwen3's tokenizer.json normalizes to NFC: the converter records it
 * and the tokenizer applies it, so text in decomposed form (NFD "café",
 * conjoining Hangul jamo) gets the ids of its composed form, as Hugging
 * Face gives; special-token text is cut out first. A value the engine does
 * not implement is refused at load. */
START_TEST(nfc_normalizer_is_recorded_and_applied)
{
	static const char nfd[] = "<|im_start|>cafe\xcc\x81 "
				  "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 A\xcc\x8a";
	static const char nfc[] = "<|im_start|>caf\xc3\xa9 \xea\xb0\x81 \xc3\x85";
	char err[EMBER_ERR_MAX] = "", dir[128], out[128];
	struct gguf g = {0};
	struct gguf_str v;
	struct tokenizer *t = NULL;
	int32_t a[64], b[64];
	int64_t na, nb;
	uint8_t *bytes;
	size_t len, i;
	FILE *f;

	qwen2_dir_with(NULL, dir, sizeof(dir));
	snprintf(out, sizeof(out), "%s/q.gguf", tmp);
	ck_assert_msg(convert_dir(dir, out, err) == 0, "%s", err);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	ck_assert_int_eq(gguf_get_str(&g, "ember.tokenizer.normalizer", &v), 0);
	ck_assert(gguf_str_eq(v, "nfc"));
	ck_assert_msg(tokenizer_new(&t, &g, err) == 0, "%s", err);
	na = tokenizer_encode(t, nfd, sizeof(nfd) - 1, 0, 1, a, 64);
	nb = tokenizer_encode(t, nfc, sizeof(nfc) - 1, 0, 1, b, 64);
	ck_assert_int_gt(nb, 1);
	ck_assert_msg(na == nb && memcmp(a, b, (size_t)na * sizeof(*a)) == 0,
		      "NFD text: %lld ids, NFC text: %lld ids, or different ids", (long long)na, (long long)nb);
	tokenizer_free(t);
	gguf_close(&g);

	/* The same file saying "nfd": refused, naming it. */
	bytes = (uint8_t *)test_read_file(out, &len);
	ck_assert_ptr_nonnull(bytes);
	for (i = 0; i + 30 < len; i++)
		if (memcmp(bytes + i, "ember.tokenizer.normalizer", 26) == 0)
			break;
	ck_assert_uint_lt(i + 30, len);
	ck_assert(memcmp(bytes + i + 26 + 4 + 8, "nfc", 3) == 0); /* type u32, length u64 */
	bytes[i + 26 + 4 + 8 + 2] = 'd';
	f = fopen(out, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
	fclose(f);
	free(bytes);
	ck_assert_int_eq(gguf_open(&g, out, err), 0);
	ck_assert_int_eq(tokenizer_new(&t, &g, err), EMBER_EUNSUPPORTED);
	ck_assert_msg(strstr(err, "ember.tokenizer.normalizer \"nfd\" not supported"), "%s", err);
	ck_assert_ptr_null(t);
	gguf_close(&g);
	rm_tmp();
}
END_TEST

/* Normalizers Ember does not implement are refused by name at conversion,
 * never dropped; NFC inside a Sequence is found. */
START_TEST(unsupported_normalizers_are_refused_by_name)
{
	static const struct {
		const char *json, *name; /* name: NULL = accepted */
	} cases[] = {
		{"{\"type\":\"NFKC\"}", "NFKC"},
		{"{\"type\":\"NFD\"}", "NFD"},
		{"{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Lowercase\"}]}",
		 "Lowercase"},
		{"{\"type\":\"BertNormalizer\",\"lowercase\":true}", "BertNormalizer"},
		{"{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}", "Precompiled"},
		/* the SentencePiece space rule, but this vocabulary is byte-level */
		{"{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}", "Replace"},
		{"{\"type\":\"Sequence\",\"normalizers\":"
		 "[{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]}]}", NULL},
	};
	char err[EMBER_ERR_MAX], dir[128], out[128];
	struct gguf g = {0};
	struct gguf_str v;
	json_error_t je;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *n = json_loads(cases[i].json, 0, &je);

		ck_assert_msg(n != NULL, "case %zu: %s", i, je.text);
		qwen2_dir_with(n, dir, sizeof(dir));
		snprintf(out, sizeof(out), "%s/q.gguf", tmp);
		err[0] = '\0';
		rc = convert_dir(dir, out, err);
		if (cases[i].name != NULL) {
			ck_assert_msg(rc == EMBER_EUNSUPPORTED, "case %zu: rc %d (%s)", i, rc, err);
			ck_assert_msg(strstr(err, cases[i].name) && strstr(err, "normalizer"),
				      "case %zu: %s", i, err);
			ck_assert_int_ne(access(out, F_OK), 0);
		} else {
			ck_assert_msg(rc == 0, "case %zu: %s", i, err);
			ck_assert_int_eq(gguf_open(&g, out, err), 0);
			ck_assert_int_eq(gguf_get_str(&g, "ember.tokenizer.normalizer", &v), 0);
			ck_assert(gguf_str_eq(v, "nfc"));
			gguf_close(&g);
		}
		rm_tmp();
	}
}
END_TEST

Suite *suite_hf_tokenizer(void)
{
	Suite *s = suite_create("hf_tokenizer");
	TCase *tc = tcase_create("hf_tokenizer");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, llama2_tokenizer_json_alone_tokenizes_like_tokenizer_model);
	tcase_add_test(tc, gemma_tokenizer_json_alone_tokenizes_like_tokenizer_model);
	tcase_add_test(tc, non_special_added_tokens_stay_text);
	tcase_add_test(tc, nfc_normalizer_is_recorded_and_applied);
	tcase_add_test(tc, unsupported_normalizers_are_refused_by_name);
	suite_add_tcase(s, tc);
	return s;
}
