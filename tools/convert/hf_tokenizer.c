/*
 * hf_tokenizer.c - tokenizer.model / tokenizer.json to GGUF vocabulary
 * arrays (see hf_tokenizer.h).
 */
#include "hf_tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ember.h"
#include "hf_normalizer.h"

#define TOK_MAX_FILE (1u << 30) /* a tokenizer.model beyond 1 GiB is not one */

/* GGUF token types (llama.cpp's llama_token_type). */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* The special-token types in gguf-py's order, with their GGUF key. */
static const struct {
	const char *typ;
	const char *key;
} special_types[] = {
	{"bos", "tokenizer.ggml.bos_token_id"},
	{"eos", "tokenizer.ggml.eos_token_id"},
	{"unk", "tokenizer.ggml.unknown_token_id"},
	{"sep", "tokenizer.ggml.seperator_token_id"}, /* sic: llama.cpp's spelling */
	{"pad", "tokenizer.ggml.padding_token_id"},
	{"cls", "tokenizer.ggml.cls_token_id"},
	{"mask", "tokenizer.ggml.mask_token_id"},
};

#define N_SPECIAL_TYPES (sizeof(special_types) / sizeof(special_types[0]))

/* Pre-tokenizer regexes we recognise in a tokenizer.json Split, by the name
 * llama.cpp gives the vocabulary that uses them. */
static const struct {
	const char *name;
	const char *regex;
} known_pre[] = {
	{"qwen2", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
		  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
	{"llama-bpe", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
		      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
};

/* Reads a whole small file. 0, EMBER_ENOTFOUND if absent, or an error. */
static int read_file(const char *path, uint8_t **out, size_t *len, char *err)
{
	struct stat sb;
	FILE *f;
	uint8_t *buf;

	*out = NULL;
	if (stat(path, &sb) != 0)
		return errno == ENOENT ? EMBER_ENOTFOUND
				       : ember_seterr(err, EMBER_EIO, "%s: %s", path, strerror(errno));
	if (!S_ISREG(sb.st_mode) || sb.st_size > TOK_MAX_FILE)
		return ember_seterr(err, EMBER_EIO, "%s: not a regular file of at most 1 GiB", path);
	f = fopen(path, "rb");
	if (f == NULL)
		return ember_seterr(err, EMBER_EIO, "%s: %s", path, strerror(errno));
	buf = malloc((size_t)sb.st_size + 1);
	if (buf == NULL || fread(buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
		fclose(f);
		free(buf);
		return ember_seterr(err, buf ? EMBER_EIO : EMBER_ENOMEM, "%s: read failed", path);
	}
	fclose(f);
	*out = buf;
	*len = (size_t)sb.st_size;
	return 0;
}

/* Loads `dir/name` as JSON: 0 with *out set, 0 with *out NULL if the file
 * is absent, or EMBER_EFORMAT. */
static int load_json(const char *dir, const char *name, size_t flags, json_t **out, char *err)
{
	char path[PATH_MAX];
	json_error_t jerr;
	struct stat sb;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &sb) != 0)
		return 0;
	*out = json_load_file(path, flags, &jerr);
	if (*out == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return ember_seterr(err, EMBER_EFORMAT, "%s: line %d: %s", path, jerr.line,
				    jerr.text[0] ? jerr.text : "not a JSON object");
	}
	return 0;
}

static int alloc_vocab(struct hf_tokenizer *tk, uint32_t n, int with_scores)
{
	tk->n_vocab = n;
	tk->tokens = calloc(n, sizeof(*tk->tokens));
	tk->lens = calloc(n, sizeof(*tk->lens));
	tk->types = calloc(n, sizeof(*tk->types));
	tk->scores = with_scores ? calloc(n, sizeof(*tk->scores)) : NULL;
	if (tk->tokens == NULL || tk->lens == NULL || tk->types == NULL ||
	    (with_scores && tk->scores == NULL))
		return EMBER_ENOMEM;
	return 0;
}

/* Replaces token i's text with `len` bytes at `s`. */
static int set_token(struct hf_tokenizer *tk, uint32_t i, const char *s, size_t len)
{
	char *p = malloc(len + 1);

	if (p == NULL)
		return EMBER_ENOMEM;
	memcpy(p, s, len);
	p[len] = '\0';
	free(tk->tokens[i]);
	tk->tokens[i] = p;
	tk->lens[i] = len;
	return 0;
}

/* Fills every slot no source named, as llama.cpp does. */
static int pad_vocab(struct hf_tokenizer *tk, int32_t type, float score)
{
	char buf[32];
	uint32_t i;

	for (i = 0; i < tk->n_vocab; i++) {
		if (tk->tokens[i] != NULL)
			continue;
		snprintf(buf, sizeof(buf), "[PAD%u]", i);
		if (set_token(tk, i, buf, strlen(buf)) < 0)
			return EMBER_ENOMEM;
		tk->types[i] = type;
		if (tk->scores)
			tk->scores[i] = score;
	}
	return 0;
}

/* Text of a non-special added token with SentencePiece's "▁" as a space
 * (llama.cpp pre-normalises user-defined tokens). */
static int set_user_token(struct hf_tokenizer *tk, uint32_t id, const char *s)
{
	size_t n = strlen(s), i, j = 0;
	char *buf = malloc(n + 1);
	int rc;

	if (buf == NULL)
		return EMBER_ENOMEM;
	for (i = 0; i < n; i++) {
		if (i + 2 < n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
			buf[j++] = ' ';
			i += 2;
		} else {
			buf[j++] = s[i];
		}
	}
	rc = set_token(tk, id, buf, j);
	free(buf);
	return rc;
}

/* ---- SentencePiece --------------------------------------------------------- */

/* Protobuf varint at *p (bounded by end). */
static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	int shift;

	*v = 0;
	for (shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return EMBER_EFORMAT;
}

/* Skips a field's value of wire type `wt`, or reads a length-delimited one
 * into [*val, *val + *vlen). */
static int pb_field(const uint8_t **p, const uint8_t *end, uint64_t wt, const uint8_t **val,
		    uint64_t *vlen)
{
	uint64_t n;

	switch (wt) {
	case 0:
		return pb_varint(p, end, &n);
	case 1:
	case 5:
		n = wt == 1 ? 8 : 4;
		if ((uint64_t)(end - *p) < n)
			return EMBER_EFORMAT;
		*val = *p;
		*vlen = n;
		*p += n;
		return 0;
	case 2:
		if (pb_varint(p, end, &n) < 0 || n > (uint64_t)(end - *p))
			return EMBER_EFORMAT;
		*val = *p;
		*vlen = n;
		*p += n;
		return 0;
	default:
		return EMBER_EFORMAT; /* groups are not used by sentencepiece */
	}
}

/* SentencePiece.Type -> GGUF token type, as llama.cpp maps it
 * (user-defined counts as normal). */
static int32_t spm_type(uint64_t t)
{
	switch (t) {
	case 2: return TT_UNKNOWN;
	case 3: return TT_CONTROL;
	case 5: return TT_UNUSED;
	case 6: return TT_BYTE;
	default: return TT_NORMAL;
	}
}

/* One SentencePiece message {1: piece, 2: score, 3: type} into slot i. */
static int spm_piece(struct hf_tokenizer *tk, uint32_t i, const uint8_t *p, const uint8_t *end)
{
	const uint8_t *piece = NULL, *val = NULL;
	uint64_t piece_len = 0, key, vlen = 0, type = 1;
	float score = 0.0f;
	int rc;

	while (p < end) {
		if (pb_varint(&p, end, &key) < 0)
			return EMBER_EFORMAT;
		if ((key & 7) == 0 && (key >> 3) == 3) {
			if (pb_varint(&p, end, &type) < 0)
				return EMBER_EFORMAT;
			continue;
		}
		rc = pb_field(&p, end, key & 7, &val, &vlen);
		if (rc < 0)
			return rc;
		if (key == (1 << 3 | 2)) {
			piece = val;
			piece_len = vlen;
		} else if (key == (2 << 3 | 5)) {
			uint32_t bits = (uint32_t)val[0] | (uint32_t)val[1] << 8 |
					(uint32_t)val[2] << 16 | (uint32_t)val[3] << 24;
			memcpy(&score, &bits, sizeof(score));
		}
	}
	if (piece == NULL)
		return EMBER_EFORMAT;
	rc = set_token(tk, i, (const char *)piece, (size_t)piece_len);
	tk->scores[i] = score;
	tk->types[i] = spm_type(type);
	return rc;
}

static int load_spm(struct hf_tokenizer *tk, const char *path, uint32_t n_vocab, char *err)
{
	const uint8_t *p, *end, *val = NULL;
	uint64_t key, vlen = 0;
	uint32_t n = 0;
	int rc;

	rc = read_file(path, &tk->spm_bytes, &tk->spm_len, err);
	if (rc < 0)
		return rc;
	tk->is_spm = 1;
	snprintf(tk->pre, sizeof(tk->pre), "default");
	if (alloc_vocab(tk, n_vocab, 1) < 0)
		return ember_seterr(err, EMBER_ENOMEM, "%s", path);
	p = tk->spm_bytes;
	end = p + tk->spm_len;
	while (p < end) {
		if (pb_varint(&p, end, &key) < 0 || pb_field(&p, end, key & 7, &val, &vlen) < 0)
			return ember_seterr(err, EMBER_EFORMAT, "%s: malformed protobuf", path);
		if (key != (1 << 3 | 2))
			continue; /* trainer_spec, normalizer_spec, ... */
		if (n == n_vocab)
			return ember_seterr(err, EMBER_EFORMAT,
					    "%s: more pieces than vocab_size %u", path, n_vocab);
		rc = spm_piece(tk, n, val, val + vlen);
		if (rc < 0)
			return ember_seterr(err, rc, "%s: piece %u malformed", path, n);
		n++;
	}
	if (n == 0)
		return ember_seterr(err, EMBER_EFORMAT, "%s: no pieces", path);
	return 0;
}

/* tokenizer_config.json's added_tokens_decoder over a SentencePiece vocab. */
static int spm_added(struct hf_tokenizer *tk, json_t *tcfg)
{
	json_t *dec = json_object_get(tcfg, "added_tokens_decoder"), *v;
	const char *key;

	json_object_foreach(dec, key, v) {
		const char *content = json_string_value(json_object_get(v, "content"));
		char *endp;
		unsigned long id = strtoul(key, &endp, 10);
		int rc;

		if (content == NULL || *endp != '\0' || id >= tk->n_vocab)
			continue;
		/* the file's special flag decides: a non-special added token is
		 * matched as text (Qwen's <|fim_*|>), as Hugging Face does */
		if (json_is_true(json_object_get(v, "special"))) {
			tk->types[id] = TT_CONTROL;
			rc = set_token(tk, (uint32_t)id, content, strlen(content));
		} else {
			tk->types[id] = TT_USER;
			rc = set_user_token(tk, (uint32_t)id, content);
		}
		tk->scores[id] = -1000.0f;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- byte-level BPE ------------------------------------------------------- */

static void bpe_pick_pre(struct hf_tokenizer *tk, json_t *tj, const char *bpe_pre)
{
	json_t *pre = json_object_get(tj, "pre_tokenizer"), *list, *v;
	size_t i, k;

	snprintf(tk->pre, sizeof(tk->pre), "%s", bpe_pre ? bpe_pre : "gpt-2");
	list = json_object_get(pre, "pretokenizers");
	json_array_foreach(list, i, v) {
		const char *re = json_string_value(
			json_object_get(json_object_get(v, "pattern"), "Regex"));

		for (k = 0; re && k < sizeof(known_pre) / sizeof(known_pre[0]); k++)
			if (strcmp(re, known_pre[k].regex) == 0)
				snprintf(tk->pre, sizeof(tk->pre), "%s", known_pre[k].name);
	}
}

static int bpe_merges(struct hf_tokenizer *tk, json_t *merges, char *err)
{
	json_t *m;
	size_t i;

	tk->merges = calloc(json_array_size(merges) + 1, sizeof(*tk->merges));
	if (tk->merges == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "merges");
	json_array_foreach(merges, i, m) {
		const char *a = json_string_value(m), *b = NULL;
		size_t n;

		if (a == NULL) { /* the newer form: ["a", "b"] */
			a = json_string_value(json_array_get(m, 0));
			b = json_string_value(json_array_get(m, 1));
			if (a == NULL || b == NULL || json_array_size(m) != 2)
				return ember_seterr(err, EMBER_EFORMAT,
						    "tokenizer.json: merge %zu malformed", i);
		}
		n = strlen(a) + (b ? strlen(b) + 2 : 1);
		tk->merges[i] = malloc(n);
		if (tk->merges[i] == NULL)
			return ember_seterr(err, EMBER_ENOMEM, "merges");
		tk->n_merges = i + 1;
		if (b)
			snprintf(tk->merges[i], n, "%s %s", a, b);
		else
			memcpy(tk->merges[i], a, n);
	}
	return 0;
}

/* 1 if tokenizer.json holds SentencePiece-style BPE: byte fallback and
 * spaces written as U+2581 "▁" (Llama 2, Mistral, Gemma exported from a
 * SentencePiece model), not GPT-2's byte-level BPE. */
static int bpe_is_spm_style(json_t *tj)
{
	json_t *model = json_object_get(tj, "model");
	char *norm = json_dumps(json_object_get(tj, "normalizer"), JSON_ENCODE_ANY | JSON_COMPACT);
	char *pre = json_dumps(json_object_get(tj, "pre_tokenizer"), JSON_ENCODE_ANY | JSON_COMPACT);
	int spm = json_is_true(json_object_get(model, "byte_fallback")) &&
		  ((norm && strstr(norm, "\xe2\x96\x81")) || (pre && strstr(pre, "Metaspace")));

	free(norm);
	free(pre);
	return spm;
}

/* 1 if the SentencePiece-style normalizer puts "▁" in front of the text
 * (Llama 2's Prepend, a Metaspace that prepends), 0 if not (Gemma). */
static int bpe_spm_prepends(json_t *tj)
{
	char *norm = json_dumps(json_object_get(tj, "normalizer"), JSON_ENCODE_ANY | JSON_COMPACT);
	char *pre = json_dumps(json_object_get(tj, "pre_tokenizer"), JSON_ENCODE_ANY | JSON_COMPACT);
	int prepend = (norm && strstr(norm, "\"Prepend\"")) ||
		      (pre && strstr(pre, "Metaspace") && !strstr(pre, "\"prepend_scheme\":\"never\"") &&
		       !strstr(pre, "\"add_prefix_space\":false"));

	free(norm);
	free(pre);
	return prepend;
}

/*
 * SentencePiece-style BPE as the SentencePiece vocabulary it came from
 * ("llama": pieces, scores, types), which is what llama.cpp's tokenizer for
 * these models expects. SentencePiece merges the adjacent pair whose joined
 * piece scores highest; BPE merges the pair of lowest rank. So a piece
 * scores minus the rank of the first merge that makes it, and the two agree;
 * pieces no merge makes (single characters, bytes, specials) never win a
 * merge (-1e9). "<0xAB>" pieces are byte tokens, the model's unk_token the
 * unknown one.
 */
static int bpe_to_spm(struct hf_tokenizer *tk, json_t *tj, char *err)
{
	json_t *model = json_object_get(tj, "model"), *vocab = json_object_get(model, "vocab"), *v;
	const char *unk = json_string_value(json_object_get(model, "unk_token"));
	uint32_t i;
	uint64_t r;

	tk->scores = malloc(tk->n_vocab * sizeof(*tk->scores));
	if (tk->scores == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer.json");
	for (i = 0; i < tk->n_vocab; i++) {
		const char *s = tk->tokens[i];
		tk->scores[i] = -1e9f;
		if (s == NULL || tk->types[i] != TT_NORMAL)
			continue;
		if (tk->lens[i] == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>')
			tk->types[i] = TT_BYTE;
		else if (unk && strcmp(s, unk) == 0)
			tk->types[i] = TT_UNKNOWN;
	}
	for (r = 0; r < tk->n_merges; r++) {
		/* "a b" -> the piece "ab" */
		char *m = tk->merges[r], *sp = strchr(m + 1, ' ');
		size_t la, lb;
		char joined[512];
		int64_t id;

		if (sp == NULL)
			continue;
		la = (size_t)(sp - m);
		lb = strlen(sp + 1);
		if (la + lb >= sizeof(joined))
			continue;
		memcpy(joined, m, la);
		memcpy(joined + la, sp + 1, lb + 1);
		v = json_object_get(vocab, joined);
		id = json_is_integer(v) ? json_integer_value(v) : -1;
		if (id >= 0 && (uint64_t)id < tk->n_vocab && tk->scores[id] == -1e9f)
			tk->scores[id] = -(float)r;
	}
	for (r = 0; r < tk->n_merges; r++)
		free(tk->merges[r]);
	free(tk->merges);
	tk->merges = NULL;
	tk->n_merges = 0;
	tk->is_spm = 1;
	tk->no_space_prefix = !bpe_spm_prepends(tj);
	snprintf(tk->pre, sizeof(tk->pre), "default");
	return 0;
}

static int load_bpe(struct hf_tokenizer *tk, json_t *tj, uint32_t n_vocab, const char *bpe_pre,
		    char *err)
{
	json_t *model = json_object_get(tj, "model"), *vocab = json_object_get(model, "vocab");
	json_t *added = json_object_get(tj, "added_tokens"), *v;
	const char *key;
	size_t i;
	int rc;

	if (!json_is_object(vocab) || !json_is_array(json_object_get(model, "merges")))
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "tokenizer.json: not a BPE model with vocab and merges");
	if (alloc_vocab(tk, n_vocab, 0) < 0)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer.json");
	bpe_pick_pre(tk, tj, bpe_pre);
	json_object_foreach(vocab, key, v) {
		json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;

		if (id < 0)
			return ember_seterr(err, EMBER_EFORMAT, "tokenizer.json: token '%s': bad id",
					    key);
		if ((uint64_t)id >= n_vocab)
			continue; /* past vocab_size: the model cannot emit it */
		if (set_token(tk, (uint32_t)id, key, strlen(key)) < 0)
			return ember_seterr(err, EMBER_ENOMEM, "tokenizer.json");
		tk->types[id] = TT_NORMAL;
	}
	json_array_foreach(added, i, v) {
		json_int_t id = json_integer_value(json_object_get(v, "id"));
		const char *content = json_string_value(json_object_get(v, "content"));

		if (content == NULL || id < 0 || (uint64_t)id >= n_vocab)
			continue;
		if (json_is_true(json_object_get(v, "special"))) { /* the flag decides, as above */
			rc = set_token(tk, (uint32_t)id, content, strlen(content));
			tk->types[id] = TT_CONTROL;
		} else {
			rc = set_user_token(tk, (uint32_t)id, content);
			tk->types[id] = TT_USER;
		}
		if (rc < 0)
			return ember_seterr(err, EMBER_ENOMEM, "tokenizer.json");
	}
	rc = hf_normalizer_check(json_object_get(tj, "normalizer"), bpe_is_spm_style(tj), &tk->nfc,
				 err);
	if (rc == 0)
		rc = bpe_merges(tk, json_object_get(model, "merges"), err);
	if (rc == 0 && bpe_is_spm_style(tj))
		rc = bpe_to_spm(tk, tj, err);
	return rc;
}

/* ---- special tokens -------------------------------------------------------- */

static void set_special(struct hf_tokenizer *tk, size_t typ, json_t *id)
{
	size_t i;

	if (!json_is_integer(id) || json_integer_value(id) < 0 ||
	    json_integer_value(id) >= (json_int_t)tk->n_vocab)
		return;
	for (i = 0; i < tk->n_special; i++)
		if (tk->special[i].key == special_types[typ].key)
			return; /* the first source wins */
	tk->special[tk->n_special].key = special_types[typ].key;
	tk->special[tk->n_special].id = (uint32_t)json_integer_value(id);
	tk->n_special++;
}

static const char *token_content(json_t *entry)
{
	return json_is_object(entry) ? json_string_value(json_object_get(entry, "content"))
				     : json_string_value(entry);
}

static int read_config_side(struct hf_tokenizer *tk, json_t *tj, json_t *tcfg, json_t *cfg,
			    json_t *gen)
{
	json_t *added = json_object_get(tj, "added_tokens"), *v, *eos;
	char key[64];
	size_t t, i;

	for (t = 0; t < 2; t++) {
		snprintf(key, sizeof(key), "add_%s_token", special_types[t].typ);
		v = json_object_get(tcfg, key);
		if (json_is_boolean(v)) {
			tk->add[tk->n_add].key = t == 0 ? "tokenizer.ggml.add_bos_token"
							: "tokenizer.ggml.add_eos_token";
			tk->add[tk->n_add++].value = json_is_true(v);
		}
	}
	for (t = 0; t < N_SPECIAL_TYPES; t++) {
		snprintf(key, sizeof(key), "%s_token", special_types[t].typ);
		const char *content = token_content(json_object_get(tcfg, key));

		json_array_foreach(added, i, v) {
			const char *c = json_string_value(json_object_get(v, "content"));
			if (content && c && strcmp(c, content) == 0) {
				set_special(tk, t, json_object_get(v, "id"));
				break;
			}
		}
	}
	for (t = 0; t < N_SPECIAL_TYPES; t++) {
		snprintf(key, sizeof(key), "%s_token_id", special_types[t].typ);
		set_special(tk, t, json_object_get(cfg, key));
	}
	eos = json_object_get(gen, "eos_token_id");
	set_special(tk, 1, json_is_array(eos) ? json_array_get(eos, 0) : eos);
	if (json_array_size(eos) > 1) {
		json_array_foreach(eos, i, v) {
			if (json_is_integer(v) && json_integer_value(v) >= 0 &&
			    json_integer_value(v) < (json_int_t)tk->n_vocab &&
			    tk->n_eos_ids < HF_TOK_MAX_EOS)
				tk->eos_ids[tk->n_eos_ids++] = (uint32_t)json_integer_value(v);
		}
	}
	v = json_object_get(tcfg, "chat_template");
	if (json_is_array(v)) { /* [{"name", "template"}, ...]: the "default" one */
		json_t *list = v, *e;

		v = NULL;
		json_array_foreach(list, i, e) {
			const char *name = json_string_value(json_object_get(e, "name"));
			if (name && strcmp(name, "default") == 0)
				v = json_object_get(e, "template");
		}
	}
	if (json_is_string(v) && (tk->chat_template = strdup(json_string_value(v))) == NULL)
		return EMBER_ENOMEM;
	return 0;
}

int hf_tokenizer_load(struct hf_tokenizer *tk, const char *dir, uint32_t n_vocab,
		      const char *bpe_pre, char *err)
{
	json_t *tj = NULL, *tcfg = NULL, *cfg = NULL, *gen = NULL;
	char path[PATH_MAX];
	struct stat sb;
	int rc;

	memset(tk, 0, sizeof(*tk));
	/* tokenizer_config.json may hold integers beyond 64 bits
	 * (model_max_length = 1e30) and none we need. */
	if ((rc = load_json(dir, "tokenizer.json", 0, &tj, err)) < 0 ||
	    (rc = load_json(dir, "tokenizer_config.json", JSON_DECODE_INT_AS_REAL, &tcfg, err)) < 0 ||
	    (rc = load_json(dir, "config.json", 0, &cfg, err)) < 0 ||
	    (rc = load_json(dir, "generation_config.json", 0, &gen, err)) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/tokenizer.model", dir);
	if (stat(path, &sb) == 0) {
		rc = load_spm(tk, path, n_vocab, err);
		if (rc == 0)
			rc = spm_added(tk, tcfg);
		if (rc == 0)
			rc = pad_vocab(tk, TT_UNUSED, -10000.0f);
	} else if (tj != NULL) {
		rc = load_bpe(tk, tj, n_vocab, bpe_pre, err);
		if (rc == 0)
			rc = pad_vocab(tk, TT_USER, 0.0f);
	} else {
		rc = ember_seterr(err, EMBER_ENOTFOUND, "%s: no tokenizer.model or tokenizer.json",
				  dir);
	}
	if (rc == 0)
		rc = read_config_side(tk, tj, tcfg, cfg, gen);
	if (rc == EMBER_ENOMEM)
		ember_seterr(err, rc, "tokenizer");
fail:
	json_decref(tj);
	json_decref(tcfg);
	json_decref(cfg);
	json_decref(gen);
	if (rc < 0)
		hf_tokenizer_free(tk);
	return rc;
}

int64_t hf_tokenizer_find(const struct hf_tokenizer *tk, const char *text)
{
	uint32_t i;

	for (i = 0; i < tk->n_vocab; i++)
		if (tk->tokens[i] && strcmp(tk->tokens[i], text) == 0)
			return i;
	return -1;
}

int hf_tokenizer_write(const struct hf_tokenizer *tk, struct gguf_writer *w)
{
	size_t i;
	int rc;

	rc = gguf_writer_set_str(w, "tokenizer.ggml.model", tk->is_spm ? "llama" : "gpt2");
	if (rc == 0)
		rc = gguf_writer_set_str(w, "tokenizer.ggml.pre", tk->pre);
	if (rc == 0)
		rc = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens",
					     (const char *const *)tk->tokens, tk->lens, tk->n_vocab);
	if (rc == 0 && tk->scores)
		rc = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, tk->scores,
					 tk->n_vocab);
	if (rc == 0)
		rc = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, tk->types,
					 tk->n_vocab);
	if (rc == 0 && !tk->is_spm)
		rc = gguf_writer_set_arr_str(w, "tokenizer.ggml.merges",
					     (const char *const *)tk->merges, NULL, tk->n_merges);
	for (i = 0; rc == 0 && i < tk->n_special; i++)
		rc = gguf_writer_set_u32(w, tk->special[i].key, tk->special[i].id);
	for (i = 0; rc == 0 && i < tk->n_add; i++)
		rc = gguf_writer_set_bool(w, tk->add[i].key, tk->add[i].value);
	if (rc == 0 && tk->chat_template)
		rc = gguf_writer_set_str(w, "tokenizer.chat_template", tk->chat_template);
	return rc;
}

int hf_tokenizer_write_ember(const struct hf_tokenizer *tk, struct gguf_writer *w)
{
	int rc = 0;

	if (tk->n_eos_ids > 0)
		rc = gguf_writer_set_arr(w, "ember.tokenizer.eos_token_ids", GGUF_TYPE_UINT32,
					 tk->eos_ids, tk->n_eos_ids);
	if (rc == 0 && tk->nfc)
		rc = gguf_writer_set_str(w, "ember.tokenizer.normalizer", "nfc");
	if (rc == 0 && tk->is_spm && tk->spm_bytes != NULL)
		rc = gguf_writer_set_arr(w, "ember.tokenizer.spm_model", GGUF_TYPE_UINT8,
					 tk->spm_bytes, tk->spm_len);
	return rc;
}

void hf_tokenizer_free(struct hf_tokenizer *tk)
{
	uint64_t i;

	if (tk == NULL)
		return;
	for (i = 0; tk->tokens && i < tk->n_vocab; i++)
		free(tk->tokens[i]);
	for (i = 0; tk->merges && i < tk->n_merges; i++)
		free(tk->merges[i]);
	free(tk->tokens);
	free(tk->lens);
	free(tk->scores);
	free(tk->types);
	free(tk->merges);
	free(tk->spm_bytes);
	free(tk->chat_template);
	memset(tk, 0, sizeof(*tk));
}
