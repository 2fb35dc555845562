/*
 * convert.c - the conversion driver (see convert.h): config and
 * architecture, a plan of every output tensor (name, shape, type,
 * transform) checked in full before a byte is written, then keys and
 * tensors streamed into the GGUF writer.
 */
#include "convert.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert_arch.h"
#include "dtype.h"
#include "ember.h"
#include "gguf.h"
#include "hf_tokenizer.h"
#include "progress.h"
#include "safetensors.h"
#include "tensor_stream.h"

#define NAME_MAX_GGUF 96

typedef unsigned long long ull;

struct plan_item {
	const struct st_tensor *src;
	const struct conv_tensor *map;
	char name[NAME_MAX_GGUF];
	uint32_t n_dims;
	uint64_t ne[ST_MAX_DIMS]; /* GGUF order: innermost first */
	uint32_t type;
	int is_bias;
};

struct conv {
	const struct convert_opts *o;
	json_t *config;
	const struct conv_arch *arch;
	struct conv_hparams hp;
	struct safetensors st;
	struct hf_tokenizer tok;
	struct conv_rope rope;  /* rope scaling keys and tables */
	struct plan_item *plan; /* [n_plan] */
	size_t n_plan;
	uint64_t n_params;
};

void convert_size_label(uint64_t n_params, char *buf, size_t size)
{
	double x = (double)n_params;
	const char *suffix = "K";
	char digits[32];
	int fix;

	if (x > 1e12) {
		x *= 1e-12;
		suffix = "T";
	} else if (x > 1e9) {
		x *= 1e-9;
		suffix = "B";
	} else if (x > 1e6) {
		x *= 1e-6;
		suffix = "M";
	} else {
		x *= 1e-3;
	}
	/* At least two significant digits: decimals = 2 - digits of round(x). */
	snprintf(digits, sizeof(digits), "%.0f", nearbyint(x));
	fix = 2 - (int)strlen(strcmp(digits, "0") == 0 ? "" : digits);
	snprintf(buf, size, "%.*f%s", fix > 0 ? fix : 0, x, suffix);
}

/* ---- planning ---------------------------------------------------------------- */

static int check_shape(const struct conv *c, const struct plan_item *it, char *err)
{
	const struct st_tensor *t = it->src;
	uint64_t want[2] = {convert_arch_dim(&c->hp, it->map->rows),
			    convert_arch_dim(&c->hp, it->map->cols)};
	uint32_t nd = it->is_bias || it->map->cols == D_NONE ? 1 : 2;

	if (t->n_dims == nd && t->shape[0] == want[0] && (nd == 1 || t->shape[1] == want[1]))
		return 0;
	if (nd == 1)
		return ember_seterr(err, EMBER_EFORMAT,
				    "tensor '%s': shape [%llu%s], expected [%llu]", t->name,
				    (ull)t->shape[0], t->n_dims == 1 ? "" : ", ...", (ull)want[0]);
	return ember_seterr(err, EMBER_EFORMAT, "tensor '%s': shape [%llu, %llu%s], expected "
			    "[%llu, %llu]", t->name, (ull)t->shape[0],
			    (ull)(t->n_dims > 1 ? t->shape[1] : 0), t->n_dims > 2 ? ", ..." : "",
			    (ull)want[0], (ull)want[1]);
}

static int plan_one(struct conv *c, const struct st_tensor *t, char *err)
{
	struct plan_item *it = &c->plan[c->n_plan];
	size_t i;
	int rc;

	memset(it, 0, sizeof(*it));
	it->src = t;
	it->map = convert_arch_map(c->arch, &c->hp, t->name, it->name, sizeof(it->name),
				   &it->is_bias);
	if (it->map == NULL)
		return ember_seterr(err, EMBER_EFORMAT, "tensor '%s' has no GGUF name in %s",
				    t->name, c->arch->hf_arch);
	rc = check_shape(c, it, err);
	if (rc < 0)
		return rc;
	for (i = 0; i < c->n_plan; i++)
		if (strcmp(c->plan[i].name, it->name) == 0)
			return ember_seterr(err, EMBER_EFORMAT, "tensors '%s' and '%s' both map to %s",
					    c->plan[i].src->name, t->name, it->name);
	it->n_dims = t->n_dims;
	for (i = 0; i < t->n_dims; i++)
		it->ne[i] = t->shape[t->n_dims - 1 - i];
	for (; i < ST_MAX_DIMS; i++)
		it->ne[i] = 1;
	rc = recipe_pick(&c->o->recipe, it->name, it->n_dims, it->ne, &it->type, err);
	if (rc < 0)
		return rc;
	c->n_params += t->n_elems;
	c->n_plan++;
	return 0;
}

static int has_tensor(const struct conv *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->n_plan; i++)
		if (strcmp(c->plan[i].name, name) == 0)
			return 1;
	return 0;
}

/* Every CT_REQUIRED weight, in every layer for per-layer entries. */
static int check_required(const struct conv *c, char *err)
{
	char name[NAME_MAX_GGUF];
	uint32_t l;
	size_t i;

	for (i = 0; i < c->arch->n_tensors; i++) {
		const struct conv_tensor *t = &c->arch->tensors[i];
		const char *hash = strchr(t->gguf, '#');

		if (!(t->flags & CT_REQUIRED))
			continue;
		for (l = 0; l < (hash ? c->hp.n_layer : 1); l++) {
			if (hash)
				snprintf(name, sizeof(name), "%.*s%u%s.weight", (int)(hash - t->gguf),
					 t->gguf, l, hash + 1);
			else
				snprintf(name, sizeof(name), "%s.weight", t->gguf);
			if (!has_tensor(c, name))
				return ember_seterr(err, EMBER_EFORMAT,
						    "missing tensor for %s (HF %s.weight)", name, t->hf);
		}
	}
	return 0;
}

static int plan(struct conv *c, char *err)
{
	size_t i;
	int rc;

	c->plan = calloc(c->st.n_tensors + 1, sizeof(*c->plan));
	if (c->plan == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "plan");
	for (i = 0; i < c->st.n_tensors; i++) {
		if (convert_arch_skipped(c->arch, c->st.tensors[i].name))
			continue;
		rc = plan_one(c, &c->st.tensors[i], err);
		if (rc < 0)
			return rc;
	}
	/* The llama.cpp presets pick by the model's shape: pick again now
	 * that every tensor is known. */
	struct recipe r = c->o->recipe;
	for (i = 0; i < c->n_plan; i++)
		recipe_count(&r, c->plan[i].name);
	recipe_set_heads(&r, c->hp.n_head, c->hp.n_kv);
	for (i = 0; i < c->n_plan; i++) {
		struct plan_item *it = &c->plan[i];
		rc = recipe_pick(&r, it->name, it->n_dims, it->ne, &it->type, err);
		if (rc < 0)
			return rc;
	}
	return check_required(c, err);
}

/* ---- keys ---------------------------------------------------------------------- */

static int set_arch_key(struct gguf_writer *w, const struct conv *c, const struct conv_key *k)
{
	const struct conv_hparams *hp = &c->hp;
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", c->arch->gguf_arch, k->suffix);
	switch (k->src) {
	case HP_N_CTX: return gguf_writer_set_u32(w, key, hp->n_ctx);
	case HP_N_EMBD: return gguf_writer_set_u32(w, key, hp->n_embd);
	case HP_N_FF: return gguf_writer_set_u32(w, key, hp->n_ff);
	case HP_N_LAYER: return gguf_writer_set_u32(w, key, hp->n_layer);
	case HP_N_HEAD: return gguf_writer_set_u32(w, key, hp->n_head);
	case HP_N_KV: return gguf_writer_set_u32(w, key, hp->n_kv);
	case HP_N_VOCAB: return gguf_writer_set_u32(w, key, hp->n_vocab);
	case HP_HEAD_DIM: return gguf_writer_set_u32(w, key, hp->head_dim);
	case HP_ROPE_DIM: return gguf_writer_set_u32(w, key, hp->rope_dim);
	case HP_ROPE_THETA: return hp->has_rope_theta ? gguf_writer_set_f32(w, key, hp->rope_theta) : 0;
	case HP_EPS: return gguf_writer_set_f32(w, key, hp->eps);
	case HP_PARALLEL: return gguf_writer_set_bool(w, key, hp->parallel);
	case HP_TRUE: return gguf_writer_set_bool(w, key, 1);
	case HP_FALSE: return gguf_writer_set_bool(w, key, 0);
	case HP_ALIBI_MAX: return gguf_writer_set_f32(w, key, 8.0f);
	case HP_STR: return gguf_writer_set_str(w, key, k->str);
	case HP_FILE_TYPE: return gguf_writer_set_u32(w, "general.file_type",
						       recipe_file_type(&c->o->recipe));
	case HP_HEAD_DIM_OPT: return hp->has_head_dim ? gguf_writer_set_u32(w, key, hp->head_dim) : 0;
	case HP_ORIG_CTX: return gguf_writer_set_u32(w, key, hp->orig_ctx);
	case HP_ROPE_THETA_SWA:
		return hp->rope_theta_swa > 0.0f ? gguf_writer_set_f32(w, key, hp->rope_theta_swa) : 0;
	case HP_SWA: return hp->n_swa ? gguf_writer_set_u32(w, key, hp->n_swa) : 0;
	case HP_ATTN_CAP: return hp->attn_cap > 0.0f ? gguf_writer_set_f32(w, key, hp->attn_cap) : 0;
	case HP_FINAL_CAP:
		return hp->final_cap > 0.0f ? gguf_writer_set_f32(w, key, hp->final_cap) : 0;
	case HP_ATTN_SCALE:
		/* Only where llama.cpp's rule (1/sqrt(head_dim)) would differ. */
		return hp->attn_scale > 0.0f &&
				       hp->attn_scale != (float)(1.0 / sqrt((double)hp->head_dim))
			       ? gguf_writer_set_f32(w, key, hp->attn_scale)
			       : 0;
	}
	return EMBER_EINVAL;
}

/* general.name: the checkpoint directory's name, first letter capitalised
 * (what llama.cpp's heuristics give for a plain directory name). */
static void model_name(const char *dir, char *buf, size_t size)
{
	size_t n = strlen(dir);
	const char *b;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	for (b = dir + n; b > dir && b[-1] != '/'; b--)
		;
	snprintf(buf, size, "%.*s", (int)(dir + n - b), b);
	if (buf[0] >= 'a' && buf[0] <= 'z')
		buf[0] = (char)(buf[0] - 'a' + 'A');
}

/* The rope scaling keys (convert_rope.c). */
static int set_rope_keys(struct gguf_writer *w, const struct conv *c)
{
	char key[128];
	int rc = 0;

	if (c->rope.linear_factor > 0.0f) {
		snprintf(key, sizeof(key), "%s.rope.scaling.type", c->arch->gguf_arch);
		rc = gguf_writer_set_str(w, key, "linear");
		snprintf(key, sizeof(key), "%s.rope.scaling.factor", c->arch->gguf_arch);
		rc = rc ? rc : gguf_writer_set_f32(w, key, c->rope.linear_factor);
	}
	if (rc == 0 && c->rope.attn_factor > 0.0f) {
		snprintf(key, sizeof(key), "%s.rope.scaling.attn_factor", c->arch->gguf_arch);
		rc = gguf_writer_set_f32(w, key, c->rope.attn_factor);
	}
	return rc;
}

/* The rope tables as F32 vectors, ahead of the checkpoint's tensors (where
 * llama.cpp puts them). write: 0 declares them, 1 writes their data. */
static int rope_tensors(struct gguf_writer *w, const struct conv *c, int write, char *err)
{
	const struct {
		const char *name;
		const float *v;
	} t[] = {{"rope_freqs.weight", c->rope.freqs},
		 {"rope_factors_long.weight", c->rope.longf},
		 {"rope_factors_short.weight", c->rope.shortf}};
	uint64_t ne[4] = {c->rope.n, 1, 1, 1};
	size_t i;
	int rc = 0;

	for (i = 0; rc == 0 && i < sizeof(t) / sizeof(t[0]); i++) {
		if (!t[i].v)
			continue;
		rc = write ? gguf_writer_write_data(w, t[i].v, c->rope.n * sizeof(float), err)
			   : gguf_writer_add_tensor(w, t[i].name, DTYPE_F32, 1, ne);
	}
	return rc;
}

static int set_keys(struct gguf_writer *w, const struct conv *c)
{
	char name[256], label[32], recipe[512];
	size_t i;
	int64_t eot;
	int rc;

	if (c->o->name)
		snprintf(name, sizeof(name), "%s", c->o->name);
	else
		model_name(c->o->in, name, sizeof(name));
	convert_size_label(c->n_params, label, sizeof(label));
	recipe_describe(&c->o->recipe, recipe, sizeof(recipe));
	rc = gguf_writer_set_str(w, "general.architecture", c->arch->gguf_arch);
	rc = rc ? rc : gguf_writer_set_str(w, "general.type", "model");
	rc = rc ? rc : gguf_writer_set_str(w, "general.name", name);
	rc = rc ? rc : gguf_writer_set_str(w, "general.size_label", label);
	for (i = 0; rc == 0 && i < c->arch->n_keys; i++)
		rc = set_arch_key(w, c, &c->arch->keys[i]);
	rc = rc ? rc : set_rope_keys(w, c);
	/* Replaced in place if the table placed it already. */
	rc = rc ? rc : gguf_writer_set_u32(w, "general.file_type", recipe_file_type(&c->o->recipe));
	if (rc == 0 && c->arch->add_bos_false)
		rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 0);
	rc = rc ? rc : gguf_writer_set_u32(w, "general.quantization_version", 2);
	rc = rc ? rc : hf_tokenizer_write(&c->tok, w);
	/* llama.cpp hard-codes Gemma's <end_of_turn> as id 107 (true of the
	 * released vocabularies); we look it up. */
	eot = c->arch->eot_token ? hf_tokenizer_find(&c->tok, c->arch->eot_token) : -1;
	if (rc == 0 && eot >= 0)
		rc = gguf_writer_set_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot);
	if (rc == 0 && (c->arch->no_space_prefix || c->tok.no_space_prefix))
		rc = gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", 0);
	rc = rc ? rc : gguf_writer_set_str(w, "ember.recipe", recipe);
	rc = rc ? rc : hf_tokenizer_write_ember(&c->tok, w);
	return rc;
}

/* ---- writing -------------------------------------------------------------------- */

static int write_tensor(const struct conv *c, const struct plan_item *it, struct gguf_writer *w,
			struct tensor_stream *ts, char *err)
{
	const struct st_tensor *t = it->src;
	struct tensor_src src = {t->type, t->data, 1, t->n_elems, NULL, 0.0f};
	uint64_t *perm;
	int rc;

	perm = convert_arch_perm(it->map->xf, &c->hp, t->shape[0], &rc);
	if (rc < 0)
		return ember_seterr(err, rc, "tensor '%s': cannot apply its transform", t->name);
	if (t->n_dims == 2 || perm) {
		/* Rows are what the permutations move; a 1-D bias is rows of 1. */
		src.rows = t->shape[0];
		src.cols = t->n_elems / (t->shape[0] ? t->shape[0] : 1);
	}
	src.perm = perm;
	if (it->map->xf == XF_ADD_ONE && !it->is_bias)
		src.add = 1.0f;
	rc = tensor_stream_write(ts, w, &src, it->type, err);
	free(perm);
	if (rc < 0) {
		char msg[EMBER_ERR_MAX];

		snprintf(msg, sizeof(msg), "%s", err ? err : "");
		return ember_seterr(err, rc, "tensor '%s': %s", it->name, msg);
	}
	tensor_stream_release(t->data, (size_t)t->nbytes);
	return 0;
}

static int write_file(struct conv *c, char *err)
{
	struct gguf_writer *w = NULL;
	struct tensor_stream ts;
	struct progress pr;
	size_t i;
	int rc;

	tensor_stream_init(&ts);
	rc = gguf_writer_new(&w, c->o->out, err);
	if (rc < 0)
		return rc;
	rc = set_keys(w, c);
	rc = rc ? rc : rope_tensors(w, c, 0, err);
	for (i = 0; rc == 0 && i < c->n_plan; i++)
		rc = gguf_writer_add_tensor(w, c->plan[i].name, c->plan[i].type, c->plan[i].n_dims,
					    c->plan[i].ne);
	rc = gguf_writer_write_header(w, err); /* reports the first failed set/add */
	progress_init(&pr, c->o->progress);
	rc = rc ? rc : rope_tensors(w, c, 1, err);
	for (i = 0; rc == 0 && i < c->n_plan; i++) {
		rc = write_tensor(c, &c->plan[i], w, &ts, err);
		progress_step(&pr, i + 1, c->n_plan, c->plan[i].name, c->plan[i].src->nbytes);
	}
	progress_done(&pr);
	if (rc == 0)
		rc = gguf_writer_finish(w, err);
	gguf_writer_free(w); /* removes the temporary file unless finished */
	tensor_stream_free(&ts);
	return rc;
}

int convert_run(const struct convert_opts *o, char *err)
{
	struct conv c;
	char path[PATH_MAX];
	json_error_t jerr;
	int rc;

	memset(&c, 0, sizeof(c));
	c.o = o;
	snprintf(path, sizeof(path), "%s/config.json", o->in);
	c.config = json_load_file(path, 0, &jerr);
	if (c.config == NULL || !json_is_object(c.config)) {
		rc = ember_seterr(err, c.config ? EMBER_EFORMAT : EMBER_ENOTFOUND, "%s: %s", path,
				  c.config ? "not a JSON object" : jerr.text);
		goto fail;
	}
	c.arch = convert_arch_find(c.config, err);
	if (c.arch == NULL) {
		rc = EMBER_EUNSUPPORTED;
		goto fail;
	}
	if ((rc = convert_arch_hparams(c.config, &c.hp, err)) < 0 ||
	    (rc = convert_arch_rope(c.config, c.arch, &c.hp, &c.rope, err)) < 0 ||
	    (rc = safetensors_open_dir(&c.st, o->in, err)) < 0 || (rc = plan(&c, err)) < 0 ||
	    (rc = hf_tokenizer_load(&c.tok, o->in, c.hp.n_vocab, c.arch->bpe_pre, err)) < 0)
		goto fail;
	rc = write_file(&c, err);
fail:
	hf_tokenizer_free(&c.tok);
	convert_arch_rope_free(&c.rope);
	free(c.plan);
	safetensors_close(&c.st);
	json_decref(c.config);
	return rc;
}

/* ---- quantize ------------------------------------------------------------------- */

/* The heads the presets' policy reads, from <arch>.attention.head_count
 * and head_count_kv (absent: treated as no grouping). */
static void set_heads_from_keys(struct recipe *r, const struct gguf *g)
{
	struct gguf_str arch;
	uint32_t n_head = 1, n_head_kv = 0;
	char key[160];

	if (gguf_get_str(g, "general.architecture", &arch) != 0 || arch.len > 100)
		return;
	snprintf(key, sizeof(key), "%.*s.attention.head_count", (int)arch.len, arch.ptr);
	if (gguf_get_u32(g, key, &n_head) != 0)
		return;
	snprintf(key, sizeof(key), "%.*s.attention.head_count_kv", (int)arch.len, arch.ptr);
	if (gguf_get_u32(g, key, &n_head_kv) != 0)
		n_head_kv = n_head;
	recipe_set_heads(r, n_head, n_head_kv);
}

static int copy_keys(struct gguf_writer *w, const struct gguf *g, const struct recipe *r)
{
	char recipe[512];
	uint64_t i;
	int rc = 0;

	recipe_describe(r, recipe, sizeof(recipe));
	for (i = 0; rc == 0 && i < g->n_kv; i++)
		rc = gguf_writer_copy_kv(w, &g->kv[i]);
	/* Replaced in place when present, so a re-quantized file keeps the
	 * key order of one converted directly. */
	rc = rc ? rc : gguf_writer_set_u32(w, "general.file_type", recipe_file_type(r));
	rc = rc ? rc : gguf_writer_set_str(w, "ember.recipe", recipe);
	return rc;
}

int convert_quantize(const struct convert_opts *o, char *err)
{
	struct gguf_writer *w = NULL;
	struct tensor_stream ts;
	struct progress pr;
	struct recipe r = o->recipe; /* plus the model's shape, counted below */
	struct gguf g;
	uint32_t *types = NULL;
	char name[NAME_MAX_GGUF + 160];
	uint64_t i;
	int rc;

	tensor_stream_init(&ts);
	rc = gguf_open(&g, o->in, err);
	if (rc < 0)
		return rc;
	types = calloc(g.n_tensors + 1, sizeof(*types));
	if (types == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "%s", o->in);
		goto fail;
	}
	for (i = 0; i < g.n_tensors; i++) {
		snprintf(name, sizeof(name), "%.*s", (int)(g.tensors[i].name.len < 200 ?
			 g.tensors[i].name.len : 200), g.tensors[i].name.ptr);
		recipe_count(&r, name);
	}
	set_heads_from_keys(&r, &g);
	for (i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];

		snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < 200 ? t->name.len : 200),
			 t->name.ptr);
		rc = recipe_pick(&r, name, t->n_dims, t->ne, &types[i], err);
		if (rc == 0 && t->type != types[i] && t->type != DTYPE_F32 && t->type != DTYPE_F16 &&
		    t->type != DTYPE_BF16)
			rc = ember_seterr(err, EMBER_EUNSUPPORTED, "tensor '%s' is %s: only f32, f16 "
					  "and bf16 tensors can be re-quantized", name,
					  dtype_name(t->type));
		if (rc < 0)
			goto fail;
	}
	rc = gguf_writer_new(&w, o->out, err);
	if (rc < 0)
		goto fail;
	rc = copy_keys(w, &g, &o->recipe);
	for (i = 0; rc == 0 && i < g.n_tensors; i++) {
		snprintf(name, sizeof(name), "%.*s", (int)(g.tensors[i].name.len < 200 ?
			 g.tensors[i].name.len : 200), g.tensors[i].name.ptr);
		rc = gguf_writer_add_tensor(w, name, types[i], g.tensors[i].n_dims, g.tensors[i].ne);
	}
	rc = gguf_writer_write_header(w, err);
	progress_init(&pr, o->progress);
	for (i = 0; rc == 0 && i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];
		struct tensor_src src = {t->type, t->data, t->ne[1] * t->ne[2] * t->ne[3], t->ne[0],
					 NULL, 0.0f};

		rc = tensor_stream_write(&ts, w, &src, types[i], err);
		tensor_stream_release(t->data, (size_t)t->size);
		snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < 200 ? t->name.len : 200),
			 t->name.ptr);
		progress_step(&pr, (size_t)i + 1, (size_t)g.n_tensors, name, t->size);
	}
	progress_done(&pr);
	if (rc == 0)
		rc = gguf_writer_finish(w, err);
fail:
	gguf_writer_free(w);
	tensor_stream_free(&ts);
	free(types);
	gguf_close(&g);
	return rc;
}

/* ---- command line ----------------------------------------------------------------- */

int convert_parse_args(int argc, char **argv, int with_name, struct convert_opts *o, char *err)
{
	const char *pos[2] = {NULL, NULL}, *q = "f16";
	int i, n_pos = 0, rc;

	memset(o, 0, sizeof(*o));
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		if ((strcmp(a, "-q") == 0 || strcmp(a, "--keep") == 0 ||
		     (with_name && strcmp(a, "--name") == 0)) && i + 1 >= argc)
			return ember_seterr(err, EMBER_EINVAL, "%s needs a value", a);
		if (strcmp(a, "-q") == 0) {
			q = argv[++i];
		} else if (strcmp(a, "--keep") == 0) {
			i++; /* applied after the recipe is known */
		} else if (with_name && strcmp(a, "--name") == 0) {
			o->name = argv[++i];
		} else if (a[0] == '-' && a[1] != '\0') {
			return ember_seterr(err, EMBER_EINVAL, "unknown option '%s'", a);
		} else if (n_pos < 2) {
			pos[n_pos++] = a;
		} else {
			return ember_seterr(err, EMBER_EINVAL, "unexpected argument '%s'", a);
		}
	}
	if (n_pos != 2)
		return ember_seterr(err, EMBER_EINVAL, "expected IN and OUT");
	rc = recipe_parse(&o->recipe, q, err);
	for (i = 1; rc == 0 && i < argc; i++)
		if (strcmp(argv[i], "-q") == 0 || (with_name && strcmp(argv[i], "--name") == 0))
			i++;
		else if (strcmp(argv[i], "--keep") == 0)
			rc = recipe_add_keep(&o->recipe, argv[++i], err);
	o->in = pos[0];
	o->out = pos[1];
	o->progress = isatty(STDERR_FILENO);
	return rc;
}
