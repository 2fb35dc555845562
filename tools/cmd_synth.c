/*
 * cmd_synth.c - `ember synth`: a model file with seeded random weights.
 *
 * Nothing can be downloaded on the machines Ember is tested on, so tests,
 * benchmarks and the demo daemon run on models this command makes: the
 * exact tensor names, shapes, types and metadata keys of a real model of
 * the chosen architecture (any row of arch.c) and size (llama.cpp loads
 * them too), with weights
 * drawn from a seeded generator and a synthetic SentencePiece-style
 * vocabulary (byte tokens plus letter n-grams), so text goes in and out.
 *
 * Memory stays at one chunk of rows: each tensor is generated, converted
 * and written a few MiB at a time.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "commands.h"
#include "dtype.h"
#include "ember.h"
#include "gguf.h"
#include "kernels.h"
#include "model.h"

struct synth_shape {
	const char *name;
	uint32_t hidden, layers, heads, kv_heads, ffn, vocab, ctx;
};

static const struct synth_shape presets[] = {
	/* TinyLlama-1.1B: the shape the benchmarks in the issues use. */
	{"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048},
	/* The built-in demo model `make run` serves: small enough to make in a
	 * second and to answer at hundreds of tokens/s. */
	{"demo", 256, 4, 8, 4, 704, 2048, 2048},
	/* Unit and integration tests. */
	{"tiny", 64, 2, 4, 2, 192, 320, 512},
};

#define N_PRESETS (sizeof(presets) / sizeof(presets[0]))

#define SYNTH_BIT(role) (1ull << (role))

/* What a real checkpoint of each family has beyond the roles arch.c
 * requires (optional roles it does carry), and its rotary fraction. The
 * tensor list itself comes from the architecture table, the shapes from
 * model_tensor_shape(): the same data the loader checks against. */
static const struct synth_arch {
	const char *arch;  /* arch.c row name */
	float rot_frac;    /* rope.dimension_count / head dim */
	float rope_base;
	uint64_t with;     /* ARCH_OPT roles to write */
} synth_archs[] = {
	{"llama", 1.0f, 10000.0f, SYNTH_BIT(ARCH_T_OUTPUT)},
	{"gemma", 1.0f, 10000.0f, 0},
	{"qwen2", 1.0f, 1000000.0f,
	 SYNTH_BIT(ARCH_T_ATTN_Q_B) | SYNTH_BIT(ARCH_T_ATTN_K_B) | SYNTH_BIT(ARCH_T_ATTN_V_B)},
	{"stablelm", 0.25f, 10000.0f, SYNTH_BIT(ARCH_T_OUTPUT)},
	{"phi2", 0.4f, 10000.0f,
	 SYNTH_BIT(ARCH_T_ATTN_Q) | SYNTH_BIT(ARCH_T_ATTN_Q_B) | SYNTH_BIT(ARCH_T_ATTN_K) |
		 SYNTH_BIT(ARCH_T_ATTN_K_B) | SYNTH_BIT(ARCH_T_ATTN_V) | SYNTH_BIT(ARCH_T_ATTN_V_B)},
	{"falcon", 1.0f, 10000.0f, 0},
	{"falcon-rw", 0.0f, 0.0f, 0},
};

#define N_SYNTH_ARCHS (sizeof(synth_archs) / sizeof(synth_archs[0]))
#define SYNTH_CHUNK_BYTES (4u << 20)
#define SYNTH_MIN_VOCAB 300

/* TinyLlama-chat's template (Zephyr style). */
static const char synth_chat_template[] =
	"{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
	"{{ '<|user|>\n' + message['content'] + eos_token }}\n"
	"{% elif message['role'] == 'system' %}\n"
	"{{ '<|system|>\n' + message['content'] + eos_token }}\n"
	"{% elif message['role'] == 'assistant' %}\n"
	"{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
	"{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float synth_uniform(uint64_t *s)
{
	return (float)((splitmix64(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Each tensor gets its own stream, so a tensor's values depend only on the
 * seed and its name. */
static uint64_t synth_tensor_seed(uint64_t seed, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ seed;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 1099511628211ull;
	return h;
}

/* ---- vocabulary ---------------------------------------------------------- */

struct synth_vocab {
	char **text; /* owned, n entries */
	float *scores;
	int32_t *types;
	uint32_t n;
};

static void synth_vocab_free(struct synth_vocab *v)
{
	uint32_t i;

	if (v->text)
		for (i = 0; i < v->n; i++)
			free(v->text[i]);
	free(v->text);
	free(v->scores);
	free(v->types);
	memset(v, 0, sizeof(*v));
}

static int synth_vocab_add(struct synth_vocab *v, uint32_t cap, const char *s, float score, int32_t type)
{
	if (v->n >= cap)
		return 0;
	v->text[v->n] = strdup(s);
	if (v->text[v->n] == NULL)
		return EMBER_ENOMEM;
	v->scores[v->n] = score;
	v->types[v->n] = type;
	v->n++;
	return 0;
}

/*
 * <unk> <s> </s>, the 256 byte tokens, then "▁" and printable characters,
 * then letter n-grams with and without the word marker, scores falling so
 * SentencePiece prefers longer pieces. Every piece is reachable by merging
 * two shorter ones, as a trained BPE vocabulary's are.
 */
static int synth_vocab_build(struct synth_vocab *v, uint32_t n)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-:;\"()";
	static const char letters[] = "etaoinshrdlucmfwypvbgkjqxz";
	const char *ws = "\xe2\x96\x81"; /* U+2581, SentencePiece's space */
	char buf[32];
	size_t i, j, k;
	float score = 0.0f;
	int rc = 0;

	memset(v, 0, sizeof(*v));
	v->text = calloc(n, sizeof(*v->text));
	v->scores = calloc(n, sizeof(*v->scores));
	v->types = calloc(n, sizeof(*v->types));
	if (!v->text || !v->scores || !v->types)
		return EMBER_ENOMEM;
	rc |= synth_vocab_add(v, n, "<unk>", 0.0f, 2);
	rc |= synth_vocab_add(v, n, "<s>", 0.0f, 3);
	rc |= synth_vocab_add(v, n, "</s>", 0.0f, 3);
	for (i = 0; i < 256; i++) {
		snprintf(buf, sizeof(buf), "<0x%02X>", (unsigned)i);
		rc |= synth_vocab_add(v, n, buf, 0.0f, 6);
	}
	rc |= synth_vocab_add(v, n, ws, score--, 1);
	for (i = 0; chars[i]; i++) {
		snprintf(buf, sizeof(buf), "%c", chars[i]);
		rc |= synth_vocab_add(v, n, buf, score--, 1);
	}
	for (i = 0; letters[i]; i++) {
		snprintf(buf, sizeof(buf), "%s%c", ws, letters[i]);
		rc |= synth_vocab_add(v, n, buf, score--, 1);
	}
	for (i = 0; letters[i]; i++)
		for (j = 0; letters[j]; j++) {
			snprintf(buf, sizeof(buf), "%c%c", letters[i], letters[j]);
			rc |= synth_vocab_add(v, n, buf, score--, 1);
			snprintf(buf, sizeof(buf), "%s%c%c", ws, letters[i], letters[j]);
			rc |= synth_vocab_add(v, n, buf, score--, 1);
		}
	for (i = 0; letters[i] && v->n < n; i++)
		for (j = 0; letters[j] && v->n < n; j++)
			for (k = 0; letters[k] && v->n < n; k++) {
				snprintf(buf, sizeof(buf), "%c%c%c", letters[i], letters[j], letters[k]);
				rc |= synth_vocab_add(v, n, buf, score--, 1);
				snprintf(buf, sizeof(buf), "%s%c%c%c", ws, letters[i], letters[j], letters[k]);
				rc |= synth_vocab_add(v, n, buf, score--, 1);
			}
	/* Past ~36k entries: numbered filler pieces, still unique. */
	for (i = 0; v->n < n; i++) {
		snprintf(buf, sizeof(buf), "%s%zu", ws, i);
		rc |= synth_vocab_add(v, n, buf, score--, 1);
	}
	return rc;
}

/* ---- tensors ------------------------------------------------------------- */

enum synth_init { SYNTH_INIT_NORM, SYNTH_INIT_BIAS, SYNTH_INIT_LINEAR, SYNTH_INIT_EMBED };

struct synth_tensor {
	char name[64];
	uint64_t n_in, n_out; /* ne = {n_in, n_out}; n_out = 1 for vectors */
	uint32_t type;
	enum synth_init init;
};

struct synth_opts {
	struct synth_shape shape;
	const struct synth_arch *sa;
	const struct arch_desc *arch;
	uint32_t wtype; /* type of 2-D weights */
	uint64_t seed;
	const char *out;
	int fim; /* --fim: the last three tokens are Qwen-style FIM control tokens */
};

static const char *const synth_fim[3] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"};

/* --fim: replaces the last three (filler) tokens with FIM control tokens
 * and names them in the GGUF, as converted code models do. */
static int synth_add_fim(struct gguf_writer *w, struct synth_vocab *v)
{
	int rc = 0, i;

	for (i = 0; i < 3; i++) {
		uint32_t id = v->n - 3 + (uint32_t)i;

		free(v->text[id]);
		if ((v->text[id] = strdup(synth_fim[i])) == NULL)
			return EMBER_ENOMEM;
		v->types[id] = 3;
	}
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.fim_pre_token_id", v->n - 3);
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.fim_suf_token_id", v->n - 2);
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.fim_mid_token_id", v->n - 1);
	return rc ? EMBER_ENOMEM : 0;
}

static void synth_hparams(const struct synth_opts *o, struct model_hparams *hp)
{
	const struct synth_shape *s = &o->shape;

	memset(hp, 0, sizeof(*hp));
	hp->n_vocab = s->vocab;
	hp->n_embd = s->hidden;
	hp->n_layer = s->layers;
	hp->n_ff = s->ffn;
	hp->n_head = s->heads;
	hp->n_head_kv = s->kv_heads;
	hp->head_dim_k = hp->head_dim_v = s->hidden / s->heads;
}

/* One tensor of `role` (layer `l`) when the family has it. */
static int synth_add_role(const struct synth_opts *o, const struct model_hparams *hp,
			  enum arch_tensor role, uint32_t l, struct synth_tensor *t, size_t *k,
			  size_t cap)
{
	unsigned use = o->arch->tensors[role];
	uint64_t ne[2];

	if (use != ARCH_REQ && !(use == ARCH_OPT && (o->sa->with & SYNTH_BIT(role))))
		return 0;
	if (*k >= cap)
		return EMBER_ERANGE;
	model_tensor_shape(role, hp, ne);
	model_tensor_name(role, l, t[*k].name, sizeof(t[*k].name));
	t[*k].n_in = ne[0];
	t[*k].n_out = ne[1];
	if (ne[1] == 1) {
		/* Norm gains, their biases and linear biases: F32 vectors. */
		size_t len = strlen(t[*k].name);
		int is_bias = len > 5 && strcmp(t[*k].name + len - 5, ".bias") == 0;

		t[*k].type = DTYPE_F32;
		t[*k].init = is_bias ? SYNTH_INIT_BIAS : SYNTH_INIT_NORM;
	} else {
		t[*k].type = o->wtype;
		t[*k].init = role == ARCH_T_TOKEN_EMBD ? SYNTH_INIT_EMBED : SYNTH_INIT_LINEAR;
	}
	(*k)++;
	return 0;
}

static int synth_list_tensors(const struct synth_opts *o, struct synth_tensor *t, size_t cap, size_t *n)
{
	struct model_hparams hp;
	size_t k = 0;
	uint32_t l;
	int r, rc;

	synth_hparams(o, &hp);
	for (r = 0; r < ARCH_T_FIRST_LAYER; r++)
		if ((rc = synth_add_role(o, &hp, (enum arch_tensor)r, 0, t, &k, cap)) < 0)
			return rc;
	for (l = 0; l < o->shape.layers; l++)
		for (r = ARCH_T_FIRST_LAYER; r < ARCH_T_COUNT; r++)
			if ((rc = synth_add_role(o, &hp, (enum arch_tensor)r, l, t, &k, cap)) < 0)
				return rc;
	*n = k;
	return 0;
}

/* Values with the variance of a trained model's: unit-variance outputs for
 * linear layers (1/sqrt(n_in)), norm gains near 1, small biases. */
static void synth_fill_row(const struct synth_tensor *t, uint64_t *rng, float *row)
{
	float a = t->init == SYNTH_INIT_LINEAR ? sqrtf(3.0f / (float)t->n_in) : 1.0f;
	uint64_t i;

	for (i = 0; i < t->n_in; i++) {
		float u = synth_uniform(rng);
		row[i] = t->init == SYNTH_INIT_NORM   ? 1.0f + 0.1f * u
			 : t->init == SYNTH_INIT_BIAS ? 0.02f * u
						      : a * u;
	}
}

static int synth_write_tensor(struct gguf_writer *w, const struct synth_tensor *t, uint64_t seed, char *err)
{
	uint64_t row_bytes = dtype_row_size(t->type, t->n_in), rng = synth_tensor_seed(seed, t->name);
	uint64_t rows_per_chunk = SYNTH_CHUNK_BYTES / row_bytes ? SYNTH_CHUNK_BYTES / row_bytes : 1;
	float *row = malloc(t->n_in * sizeof(float));
	uint8_t *chunk = malloc(rows_per_chunk * row_bytes);
	uint64_t r = 0, filled = 0;
	int rc = 0;

	if (row == NULL || chunk == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "synth: out of memory for %s", t->name);
		goto out;
	}
	for (r = 0; r < t->n_out; r++) {
		synth_fill_row(t, &rng, row);
		rc = kern_quantize_row(t->type, row, chunk + filled * row_bytes, t->n_in);
		if (rc < 0) {
			ember_seterr(err, rc, "synth: cannot store %s as %s", t->name, dtype_name(t->type));
			goto out;
		}
		if (++filled == rows_per_chunk || r + 1 == t->n_out) {
			rc = gguf_writer_write_data(w, chunk, filled * row_bytes, err);
			if (rc < 0)
				goto out;
			filled = 0;
		}
	}
out:
	free(row);
	free(chunk);
	return rc;
}

static uint32_t synth_file_type(uint32_t wtype)
{
	/* llama.cpp's general.file_type (enum llama_ftype) */
	switch (wtype) {
	case DTYPE_F16:
		return 1;
	case DTYPE_Q4_0:
		return 2;
	case DTYPE_Q8_0:
		return 7;
	case DTYPE_BF16:
		return 32;
	default:
		return 0;
	}
}

/* Sets "<gguf_arch>.<suffix>" as u32 / f32 / bool. */
static int synth_key_u32(struct gguf_writer *w, const char *a, const char *suffix, uint32_t v)
{
	char key[96];

	snprintf(key, sizeof(key), "%s.%s", a, suffix);
	return gguf_writer_set_u32(w, key, v);
}

static int synth_key_f32(struct gguf_writer *w, const char *a, const char *suffix, float v)
{
	char key[96];

	snprintf(key, sizeof(key), "%s.%s", a, suffix);
	return gguf_writer_set_f32(w, key, v);
}

static int synth_key_bool(struct gguf_writer *w, const char *a, const char *suffix, int v)
{
	char key[96];

	snprintf(key, sizeof(key), "%s.%s", a, suffix);
	return gguf_writer_set_bool(w, key, v);
}

static int synth_set_keys(struct gguf_writer *w, const struct synth_opts *o, const struct synth_vocab *v)
{
	const struct synth_shape *s = &o->shape;
	const char *a = o->arch->gguf_arch;
	uint32_t hd = s->hidden / s->heads, n_rot = (uint32_t)(o->sa->rot_frac * (float)hd) & ~1u;
	int rc = 0;

	rc |= gguf_writer_set_str(w, "general.architecture", a);
	rc |= gguf_writer_set_str(w, "general.name", s->name ? s->name : "synthetic");
	rc |= gguf_writer_set_u32(w, "general.file_type", synth_file_type(o->wtype));
	if (o->wtype == DTYPE_Q8_0 || o->wtype == DTYPE_Q4_0)
		rc |= gguf_writer_set_u32(w, "general.quantization_version", 2);
	rc |= synth_key_u32(w, a, "context_length", s->ctx);
	rc |= synth_key_u32(w, a, "embedding_length", s->hidden);
	rc |= synth_key_u32(w, a, "block_count", s->layers);
	rc |= synth_key_u32(w, a, "feed_forward_length", s->ffn);
	rc |= synth_key_u32(w, a, "attention.head_count", s->heads);
	rc |= synth_key_u32(w, a, "attention.head_count_kv", s->kv_heads);
	if (o->arch->rope != ARCH_ROPE_NONE) {
		rc |= synth_key_u32(w, a, "rope.dimension_count", n_rot ? n_rot : 2);
		rc |= synth_key_f32(w, a, "rope.freq_base", o->sa->rope_base);
	}
	if (o->arch->norm == ARCH_NORM_RMS)
		rc |= synth_key_f32(w, a, "attention.layer_norm_rms_epsilon", 1e-5f);
	else
		rc |= synth_key_f32(w, a, "attention.layer_norm_epsilon", 1e-5f);
	if (o->arch->when_true) /* the variant's selector, e.g. falcon.use_alibi */
		rc |= synth_key_bool(w, a, o->arch->when_true, 1);
	if (o->arch->alibi != ARCH_ALIBI_NONE)
		rc |= synth_key_f32(w, a, "attention.max_alibi_bias", 8.0f);
	rc |= synth_key_u32(w, a, "vocab_size", s->vocab);
	rc |= gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	rc |= gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
	rc |= gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->text, NULL, v->n);
	rc |= gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, v->scores, v->n);
	rc |= gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types, v->n);
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
	rc |= gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
	rc |= gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
	rc |= gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", 0);
	rc |= gguf_writer_set_str(w, "tokenizer.chat_template", synth_chat_template);
	return rc ? EMBER_ENOMEM : 0;
}

/* Writes the model described by `o`. Returns 0 or a negative code with a
 * message in `err`; on failure no file is left behind. */
static int synth_write_model(const struct synth_opts *o, char *err)
{
	struct synth_tensor *t = NULL;
	struct synth_vocab v = {0};
	struct gguf_writer *w = NULL;
	size_t n = 0, i, cap = ARCH_T_FIRST_LAYER + (size_t)o->shape.layers * ARCH_T_COUNT;
	int rc;

	t = calloc(cap, sizeof(*t));
	if (t == NULL) {
		rc = ember_seterr(err, EMBER_ENOMEM, "synth: out of memory");
		goto out;
	}
	rc = synth_list_tensors(o, t, cap, &n);
	if (rc == 0)
		rc = synth_vocab_build(&v, o->shape.vocab);
	if (rc < 0) {
		ember_seterr(err, rc, "synth: cannot build the model description");
		goto out;
	}
	rc = gguf_writer_new(&w, o->out, err);
	if (rc < 0)
		goto out;
	rc = o->fim ? synth_add_fim(w, &v) : 0;
	if (rc == 0)
		rc = synth_set_keys(w, o, &v);
	for (i = 0; rc == 0 && i < n; i++) {
		uint64_t ne[2] = {t[i].n_in, t[i].n_out};
		rc = gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_out > 1 ? 2 : 1, ne);
	}
	if (rc < 0) {
		ember_seterr(err, rc, "synth: cannot describe the file");
		goto out;
	}
	rc = gguf_writer_write_header(w, err);
	for (i = 0; rc == 0 && i < n; i++)
		rc = synth_write_tensor(w, &t[i], o->seed, err);
	if (rc == 0)
		rc = gguf_writer_finish(w, err);
out:
	gguf_writer_free(w);
	synth_vocab_free(&v);
	free(t);
	return rc;
}

static void synth_usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: ember synth [--arch NAME] [--preset NAME] [--type TYPE] [--seed N] -o FILE\n"
		   "                   [--hidden N --layers N --heads N --kv-heads N --ffn N --vocab N --ctx N]\n"
		   "                   [--fim (FIM control tokens, as code models have)]\n"
		   "  types: f32 f16 bf16 q8_0 q4_0 (2-D weights; norms stay f32)\n  presets:");
	for (i = 0; i < N_PRESETS; i++)
		fprintf(f, " %s", presets[i].name);
	fprintf(f, "\n  architectures:");
	for (i = 0; i < N_SYNTH_ARCHS; i++)
		fprintf(f, " %s", synth_archs[i].arch);
	fprintf(f, "\n");
}

/* 1 if kern_quantize_row() writes type `t` (some types only load). */
static int synth_can_write(uint32_t t)
{
	float zero[256] = {0};
	uint8_t block[512];

	return dtype_block(t) <= 256 && dtype_type_size(t) <= sizeof(block) &&
	       kern_quantize_row(t, zero, block, dtype_block(t)) == 0;
}

static int synth_parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v == 0 || v > (1ul << 24))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int cmd_synth(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"arch", required_argument, 0, 'a'},   {"preset", required_argument, 0, 'P'},
		{"type", required_argument, 0, 'T'},   {"seed", required_argument, 0, 's'},
		{"out", required_argument, 0, 'o'},    {"hidden", required_argument, 0, 'H'},
		{"layers", required_argument, 0, 'L'}, {"heads", required_argument, 0, 'N'},
		{"kv-heads", required_argument, 0, 'K'}, {"ffn", required_argument, 0, 'F'},
		{"vocab", required_argument, 0, 'V'},  {"ctx", required_argument, 0, 'C'},
		{"fim", no_argument, 0, 'I'},
		{"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
	};
	struct synth_opts o = {.shape = presets[2], .sa = &synth_archs[0], .wtype = DTYPE_F32,
			       .seed = 1234};
	char err[EMBER_ERR_MAX];
	uint32_t *field;
	size_t i;
	int c, t;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		field = NULL;
		switch (c) {
		case 'a':
			for (i = 0; i < N_SYNTH_ARCHS && strcmp(synth_archs[i].arch, optarg) != 0; i++)
				;
			if (i == N_SYNTH_ARCHS) {
				fprintf(stderr, "ember synth: unsupported architecture '%s'\n", optarg);
				synth_usage(stderr);
				return 1;
			}
			o.sa = &synth_archs[i];
			break;
		case 'P':
			for (i = 0; i < N_PRESETS && strcmp(presets[i].name, optarg) != 0; i++)
				;
			if (i == N_PRESETS) {
				fprintf(stderr, "ember synth: unknown preset '%s'\n", optarg);
				synth_usage(stderr);
				return 1;
			}
			o.shape = presets[i];
			break;
		case 'T':
			t = dtype_from_name(optarg);
			if (t < 0 || !kern_supports((uint32_t)t) || !synth_can_write((uint32_t)t)) {
				fprintf(stderr, "ember synth: unsupported type '%s'\n", optarg);
				return 1;
			}
			o.wtype = (uint32_t)t;
			break;
		case 's':
			o.seed = strtoull(optarg, NULL, 0);
			break;
		case 'I':
			o.fim = 1;
			break;
		case 'o':
			o.out = optarg;
			break;
		case 'H': field = &o.shape.hidden; break;
		case 'L': field = &o.shape.layers; break;
		case 'N': field = &o.shape.heads; break;
		case 'K': field = &o.shape.kv_heads; break;
		case 'F': field = &o.shape.ffn; break;
		case 'V': field = &o.shape.vocab; break;
		case 'C': field = &o.shape.ctx; break;
		case 'h':
			synth_usage(stdout);
			return 0;
		default:
			synth_usage(stderr);
			return 1;
		}
		if (field && synth_parse_u32(optarg, field) < 0) {
			for (i = 0; longopts[i].val != c; i++)
				;
			fprintf(stderr, "ember synth: bad value '%s' for --%s\n", optarg, longopts[i].name);
			return 1;
		}
	}
	if (o.out == NULL || optind != argc) {
		synth_usage(stderr);
		return 1;
	}
	o.arch = arch_find(o.sa->arch, strlen(o.sa->arch));
	if (o.arch == NULL) {
		fprintf(stderr, "ember synth: architecture '%s' is not in the engine's table\n", o.sa->arch);
		return 1;
	}
	if (o.shape.hidden % o.shape.heads || o.shape.heads % o.shape.kv_heads ||
	    (o.shape.hidden / o.shape.heads) % 2 || o.shape.vocab < SYNTH_MIN_VOCAB ||
	    dtype_row_size(o.wtype, o.shape.hidden) == 0 || dtype_row_size(o.wtype, o.shape.ffn) == 0) {
		fprintf(stderr, "ember synth: inconsistent shape (heads must divide hidden, kv-heads divide heads, "
				"even head size, vocab >= %d, hidden and ffn multiples of the type's block)\n",
			SYNTH_MIN_VOCAB);
		return 1;
	}
	kern_init();
	if (synth_write_model(&o, err) < 0) {
		fprintf(stderr, "ember synth: %s\n", err);
		return 1;
	}
	return 0;
}
