/*
 * tokenizer.c - the front shared by every vocabulary type (see tokenizer.h
 * and, for the backend contract, tokenizer_impl.h): vocabulary arrays,
 * special tokens, BOS/EOS, pieces, decoding, end-of-generation ids.
 */
#include "tokenizer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tokenizer_impl.h"
#include "unicode_nfc.h"


/* Texts that end generation when they are a control or user-defined token
 * (llama.cpp's end-of-generation list; EOS/EOT/EOM ids join it). */
static const char *const eog_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>",  "<end_of_turn>", "<|endoftext|>",
	"<|eom_id|>", "<EOT>",      "_<EOT>",   "<|end_of_text|>",
	("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), /* <｜end▁of▁sentence｜> */
};

/* Texts llama.cpp takes as EOT when tokenizer.ggml.eot_token_id is absent. */
static const char *const eot_texts[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
	("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), /* <｜end▁of▁sentence｜> */
};

struct id_key {
	const char *key;
	size_t field; /* offsetof(struct tokenizer, ...) */
};

static const struct id_key id_keys[] = {
	{"tokenizer.ggml.bos_token_id", offsetof(struct tokenizer, bos)},
	{"tokenizer.ggml.eos_token_id", offsetof(struct tokenizer, eos)},
	{"tokenizer.ggml.eot_token_id", offsetof(struct tokenizer, eot)},
	{"tokenizer.ggml.eom_token_id", offsetof(struct tokenizer, eom)},
	{"tokenizer.ggml.padding_token_id", offsetof(struct tokenizer, pad)},
	{"tokenizer.ggml.unknown_token_id", offsetof(struct tokenizer, unk)},
};

static const struct id_key flag_keys[] = {
	{"tokenizer.ggml.add_bos_token", offsetof(struct tokenizer, add_bos)},
	{"tokenizer.ggml.add_eos_token", offsetof(struct tokenizer, add_eos)},
	{"tokenizer.ggml.add_space_prefix", offsetof(struct tokenizer, add_space_prefix)},
};

#define ID_FIELD(t, k) ((int32_t *)((char *)(t) + (k)->field))
#define FLAG_FIELD(t, k) ((int *)((char *)(t) + (k)->field))

int tok_parse_byte_piece(struct gguf_str s)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *hi, *lo;

	if (s.len != 6 || memcmp(s.ptr, "<0x", 3) != 0 || s.ptr[5] != '>')
		return -1;
	hi = s.ptr[3] ? strchr(hex, toupper((unsigned char)s.ptr[3])) : NULL;
	lo = s.ptr[4] ? strchr(hex, toupper((unsigned char)s.ptr[4])) : NULL;
	if (hi == NULL || lo == NULL)
		return -1;
	return (int)((hi - hex) << 4 | (lo - hex));
}

static int load_vocab(struct tokenizer *t, const struct gguf *g, char *err)
{
	const struct gguf_kv *tok = gguf_find_kv(g, "tokenizer.ggml.tokens");
	const struct gguf_kv *sc = gguf_find_kv(g, "tokenizer.ggml.scores");
	const struct gguf_kv *ty = gguf_find_kv(g, "tokenizer.ggml.token_type");
	uint64_t i;
	double v;

	if (tok == NULL)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens missing");
	if (tok->type != GGUF_TYPE_ARRAY || tok->arr_type != GGUF_TYPE_STRING || tok->arr_n == 0 ||
	    tok->arr_n > INT32_MAX)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens: not a non-empty string array");
	if (sc != NULL && (sc->type != GGUF_TYPE_ARRAY || sc->arr_n != tok->arr_n))
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.scores: %llu entries for %llu tokens",
				    (unsigned long long)(sc->type == GGUF_TYPE_ARRAY ? sc->arr_n : 0),
				    (unsigned long long)tok->arr_n);
	if (ty != NULL && (ty->type != GGUF_TYPE_ARRAY || ty->arr_n != tok->arr_n))
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.token_type: %llu entries for %llu tokens",
				    (unsigned long long)(ty->type == GGUF_TYPE_ARRAY ? ty->arr_n : 0),
				    (unsigned long long)tok->arr_n);
	t->n_vocab = (int32_t)tok->arr_n;
	t->text = calloc(tok->arr_n, sizeof(*t->text));
	t->score = calloc(tok->arr_n, sizeof(*t->score));
	t->type = calloc(tok->arr_n, sizeof(*t->type));
	t->eog = calloc(tok->arr_n / 8 + 1, 1);
	if (!t->text || !t->score || !t->type || !t->eog)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: vocabulary of %d tokens", t->n_vocab);
	for (i = 0; i < tok->arr_n; i++) {
		if (gguf_arr_str(tok, i, &t->text[i]) != 0)
			return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens[%llu] unreadable",
					    (unsigned long long)i);
		t->type[i] = TOK_NORMAL;
		if (sc != NULL) {
			if (gguf_arr_num(sc, i, &v) != 0)
				return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.scores: not numeric");
			t->score[i] = (float)v;
		}
		if (ty != NULL) {
			if (gguf_arr_num(ty, i, &v) != 0 || v < TOK_UNDEFINED || v > TOK_BYTE)
				return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.token_type[%llu] invalid",
						    (unsigned long long)i);
			t->type[i] = (uint8_t)v;
		}
	}
	return 0;
}

static int load_special_keys(struct tokenizer *t, const struct gguf *g, char *err)
{
	size_t i;
	int64_t v;
	int b, rc;

	for (i = 0; i < sizeof(id_keys) / sizeof(id_keys[0]); i++) {
		*ID_FIELD(t, &id_keys[i]) = TOK_UNSET;
		rc = gguf_get_i64(g, id_keys[i].key, &v);
		if (rc == EMBER_ENOTFOUND)
			continue;
		if (rc != 0)
			return ember_seterr(err, EMBER_EFORMAT, "%s: not an integer", id_keys[i].key);
		/* Out of range is not fatal (some files carry e.g. pad = n_vocab);
		 * the id is dropped after the backend's defaults. */
		*ID_FIELD(t, &id_keys[i]) = v >= 0 && v < t->n_vocab ? (int32_t)v : -1;
	}
	for (i = 0; i < sizeof(flag_keys) / sizeof(flag_keys[0]); i++) {
		*FLAG_FIELD(t, &flag_keys[i]) = -1;
		rc = gguf_get_bool(g, flag_keys[i].key, &b);
		if (rc == EMBER_ENOTFOUND)
			continue;
		if (rc != 0)
			return ember_seterr(err, EMBER_EFORMAT, "%s: not a bool", flag_keys[i].key);
		*FLAG_FIELD(t, &flag_keys[i]) = b;
	}
	return 0;
}

/* TOK_KEY_NORMALIZER: absent is none; a value we do not implement is
 * refused, since tokenizing without it would give other ids silently. */
static int load_normalizer(struct tokenizer *t, const struct gguf *g, char *err)
{
	struct gguf_str v;
	int rc = gguf_get_str(g, TOK_KEY_NORMALIZER, &v);

	if (rc == EMBER_ENOTFOUND)
		return 0;
	if (rc != 0)
		return ember_seterr(err, EMBER_EFORMAT, TOK_KEY_NORMALIZER ": not a string");
	if (!gguf_str_eq(v, "nfc"))
		return ember_seterr(err, EMBER_EUNSUPPORTED, TOK_KEY_NORMALIZER " \"%.*s\" not supported",
				    (int)(v.len > 64 ? 64 : v.len), v.ptr);
	t->nfc = 1;
	return 0;
}

static void finish_special_keys(struct tokenizer *t)
{
	size_t i;
	int32_t *id;

	for (i = 0; i < sizeof(id_keys) / sizeof(id_keys[0]); i++) {
		id = ID_FIELD(t, &id_keys[i]);
		if (*id < 0 || *id >= t->n_vocab)
			*id = -1;
	}
	for (i = 0; i < sizeof(flag_keys) / sizeof(flag_keys[0]); i++)
		if (*FLAG_FIELD(t, &flag_keys[i]) < 0)
			*FLAG_FIELD(t, &flag_keys[i]) = 0;
}

static int is_special_type(uint8_t type)
{
	return type == TOK_CONTROL || type == TOK_USER_DEFINED || type == TOK_UNKNOWN;
}

/* qsort context-free: the texts are reached through the ids' owner, so the
 * comparison sorts (length, id) pairs packed into the entries first. */
struct special_sort {
	uint64_t len;
	int32_t id;
};

static int cmp_special(const void *a, const void *b)
{
	const struct special_sort *x = a, *y = b;

	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/*
 * llama.cpp marks every special token of Phi-3 vocabularies "rstrip" (the
 * whitespace after it is eaten), except these, following the Hugging Face
 * tokenizer_config of those models; it recognises them by general.name.
 */
static int phi3_rstrip(const struct gguf *g, struct gguf_str text)
{
	struct gguf_str name;
	char low[64];
	size_t i, n;

	if (gguf_get_str(g, "general.name", &name) != 0)
		return 0;
	n = name.len < sizeof(low) - 1 ? name.len : sizeof(low) - 1;
	for (i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)name.ptr[i]);
	low[n] = '\0';
	if (strstr(low, "phi-3") == NULL && strstr(low, "phi3") == NULL)
		return 0;
	return !gguf_str_eq(text, "<unk>") && !gguf_str_eq(text, "<s>") && !gguf_str_eq(text, "<|endoftext|>");
}

static int build_special(struct tokenizer *t, const struct gguf *g, char *err)
{
	struct special_sort *s;
	size_t n = 0, i;
	int32_t id;

	for (id = 0; id < t->n_vocab; id++)
		if (is_special_type(t->type[id]) && t->text[id].len > 0)
			n++;
	if (n == 0)
		return 0;
	s = malloc(n * sizeof(*s));
	t->special = calloc(n, sizeof(*t->special));
	if (s == NULL || t->special == NULL) {
		free(s);
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: %zu special tokens", n);
	}
	for (id = 0, i = 0; id < t->n_vocab; id++)
		if (is_special_type(t->type[id]) && t->text[id].len > 0)
			s[i++] = (struct special_sort){t->text[id].len, id};
	qsort(s, n, sizeof(*s), cmp_special);
	for (i = 0; i < n; i++) {
		t->special[i].id = s[i].id;
		t->special[i].rstrip = (uint8_t)phi3_rstrip(g, t->text[s[i].id]);
	}
	t->n_special = n;
	free(s);
	return 0;
}

static void eog_set(struct tokenizer *t, int32_t id)
{
	if (id >= 0 && id < t->n_vocab)
		t->eog[id >> 3] |= (uint8_t)(1u << (id & 7));
}

static int text_in(struct gguf_str s, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (gguf_str_eq(s, list[i]))
			return 1;
	return 0;
}

static void build_eog(struct tokenizer *t)
{
	size_t i;
	int32_t id;

	for (i = 0; i < t->n_special; i++) {
		id = t->special[i].id;
		if (t->type[id] == TOK_UNKNOWN)
			continue;
		if (t->eot < 0 && text_in(t->text[id], eot_texts, sizeof(eot_texts) / sizeof(eot_texts[0])))
			t->eot = id;
		if (text_in(t->text[id], eog_texts, sizeof(eog_texts) / sizeof(eog_texts[0])))
			eog_set(t, id);
	}
	eog_set(t, t->eos);
	eog_set(t, t->eot);
	eog_set(t, t->eom);
}

int tokenizer_new(struct tokenizer **out, const struct gguf *g, char *err)
{
	struct tokenizer *t;
	struct gguf_str model;
	int rc;

	*out = NULL;
	if (gguf_get_str(g, "tokenizer.ggml.model", &model) != 0)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.model missing or not a string");
	t = calloc(1, sizeof(*t));
	if (t == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer");
	rc = load_vocab(t, g, err);
	if (rc != 0)
		goto fail;
	rc = load_special_keys(t, g, err);
	if (rc == 0)
		rc = load_normalizer(t, g, err);
	if (rc != 0)
		goto fail;
	if (gguf_str_eq(model, "llama")) {
		rc = tokenizer_spm_init(t, g, err);
	} else if (gguf_str_eq(model, "gpt2") || gguf_str_eq(model, "gemma4")) {
		rc = tokenizer_bpe_init(t, g, err);
	} else {
		rc = ember_seterr(err, EMBER_EUNSUPPORTED, "tokenizer.ggml.model \"%.*s\" not supported",
				  (int)(model.len > 64 ? 64 : model.len), model.ptr);
	}
	if (rc != 0)
		goto fail;
	finish_special_keys(t);
	rc = build_special(t, g, err);
	if (rc != 0)
		goto fail;
	build_eog(t);
	*out = t;
	return 0;
fail:
	tokenizer_free(t);
	return rc;
}

void tokenizer_free(struct tokenizer *t)
{
	if (t == NULL)
		return;
	if (t->ops != NULL && t->ops->free != NULL)
		t->ops->free(t->state);
	free(t->special);
	free(t->eog);
	free(t->type);
	free(t->score);
	free(t->text);
	free(t);
}

/* ---- encoding ------------------------------------------------------------ */

/* A run of the input: raw text (id < 0) or one special token. */
struct frag {
	size_t off, len;
	int32_t id;
};

struct frags {
	struct frag *v;
	size_t n, cap;
};

static int frags_push(struct frags *f, size_t off, size_t len, int32_t id)
{
	struct frag *v;
	size_t cap;

	if (f->n == f->cap) {
		cap = f->cap ? f->cap * 2 : 16;
		v = realloc(f->v, cap * sizeof(*v));
		if (v == NULL)
			return EMBER_ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n++] = (struct frag){off, len, id};
	return 0;
}

static int is_space(char c)
{
	return isspace((unsigned char)c) != 0;
}

/* Cuts every occurrence of special token `s` out of the raw runs of `in`,
 * appending the result to `out`. */
static int split_one(const struct tokenizer *t, const char *text, const struct tok_special *s,
		     const struct frags *in, struct frags *out)
{
	struct gguf_str st = t->text[s->id];
	const char *hit;
	size_t i, off, end, l, r;
	int rc;

	for (i = 0; i < in->n; i++) {
		const struct frag *f = &in->v[i];

		if (f->id >= 0) {
			rc = frags_push(out, f->off, f->len, f->id);
			if (rc != 0)
				return rc;
			continue;
		}
		off = f->off;
		end = f->off + f->len;
		while (off < end &&
		       (hit = memmem(text + off, end - off, st.ptr, st.len)) != NULL) {
			l = (size_t)(hit - text);
			r = l + st.len;
			while (s->lstrip && l > off && is_space(text[l - 1]))
				l--;
			while (s->rstrip && r < end && is_space(text[r]))
				r++;
			if (l > off && (rc = frags_push(out, off, l - off, -1)) != 0)
				return rc;
			if ((rc = frags_push(out, (size_t)(hit - text), st.len, s->id)) != 0)
				return rc;
			off = r;
		}
		if (off < end && (rc = frags_push(out, off, end - off, -1)) != 0)
			return rc;
	}
	return 0;
}

/* llama.cpp's partitioning: special tokens longest first, each cutting all
 * the raw runs left by the previous ones. Without parse_special only
 * user-defined tokens are cut (as Hugging Face does for added tokens). */
static int partition(const struct tokenizer *t, const char *text, size_t len, int parse_special,
		     struct frags *a, struct frags *b)
{
	struct frags tmp;
	size_t i;
	int rc;

	a->n = 0;
	rc = frags_push(a, 0, len, -1);
	for (i = 0; rc == 0 && i < t->n_special; i++) {
		const struct tok_special *s = &t->special[i];

		if (!parse_special && t->type[s->id] != TOK_USER_DEFINED)
			continue;
		b->n = 0;
		rc = split_one(t, text, s, a, b);
		tmp = *a;
		*a = *b;
		*b = tmp;
	}
	return rc;
}

/* One fragment of plain text, normalized first when the model says so
 * (special tokens are cut out before: their text is never normalized). */
static int encode_raw(const struct tokenizer *t, const char *text, size_t len, struct tok_out *out)
{
	char *norm = NULL;
	size_t n = len;
	int rc;

	if (t->nfc && (rc = unicode_nfc(text, len, &norm, &n)) != 0)
		return rc;
	rc = t->ops->encode(t, norm != NULL ? norm : text, n, out);
	free(norm);
	return rc;
}

int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, int add_special,
			 int parse_special, int32_t *ids, size_t cap)
{
	struct tok_out out = {ids, ids != NULL ? cap : 0, 0};
	struct frags a = {0}, b = {0};
	size_t i;
	int rc = 0;

	if (t == NULL || (text == NULL && len > 0))
		return EMBER_EINVAL;
	if (add_special && t->add_bos && t->bos >= 0)
		tok_out_push(&out, t->bos);
	if (len > 0) {
		rc = partition(t, text, len, parse_special, &a, &b);
		for (i = 0; rc == 0 && i < a.n; i++) {
			if (a.v[i].id >= 0)
				tok_out_push(&out, a.v[i].id);
			else
				rc = encode_raw(t, text + a.v[i].off, a.v[i].len, &out);
		}
	}
	if (add_special && t->add_eos && t->eos >= 0)
		tok_out_push(&out, t->eos);
	free(a.v);
	free(b.v);
	if (rc != 0)
		return rc;
	return out.n > INT64_MAX ? EMBER_ERANGE : (int64_t)out.n;
}

/* ---- decoding ------------------------------------------------------------ */

static int copy_out(const char *src, size_t n, char *buf, size_t cap)
{
	if (buf != NULL && cap > 0)
		memcpy(buf, src, n < cap ? n : cap);
	return n > INT32_MAX ? EMBER_ERANGE : (int)n;
}

int tokenizer_piece(const struct tokenizer *t, int32_t id, int special, char *buf, size_t cap)
{
	if (t == NULL)
		return EMBER_EINVAL;
	if (id < 0 || id >= t->n_vocab)
		return EMBER_ERANGE;
	switch (t->type[id]) {
	case TOK_CONTROL:
	case TOK_UNKNOWN:
		return special ? copy_out(t->text[id].ptr, t->text[id].len, buf, cap) : 0;
	case TOK_USER_DEFINED:
		return copy_out(t->text[id].ptr, t->text[id].len, buf, cap);
	case TOK_UNUSED:
		return 0;
	default:
		return t->ops->piece(t, id, buf, cap);
	}
}

/*
 * As SentencePiece's decoder: the space the encoder put in front of the text
 * is dropped from the first piece that yields any output (so a leading BOS
 * does not keep it). llama.cpp drops it from the first token even when that
 * is an invisible BOS; we prefer the round trip decode(encode(x)) == x.
 */
int64_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int special,
			 char *buf, size_t cap)
{
	uint64_t total = 0;
	size_t i, avail, w;
	int strip, m;
	char first;

	if (t == NULL || (ids == NULL && n > 0))
		return EMBER_EINVAL;
	if (buf == NULL)
		cap = 0;
	strip = t->add_space_prefix;
	for (i = 0; i < n; i++) {
		avail = total < cap ? cap - (size_t)total : 0;
		if (strip) {
			m = tokenizer_piece(t, ids[i], special, &first, 1);
			if (m < 0)
				return m;
			if (m == 0)
				continue;
			strip = 0;
			if (first == ' ') {
				/* Render aside, then copy all but the space: rendering
				 * in place would cut the piece at `avail` bytes and
				 * leave its last byte twice. */
				char local[256], *tmp = local;
				m = tokenizer_piece(t, ids[i], special, NULL, 0);
				if (m < 0)
					return m;
				if (avail > 0) {
					if ((size_t)m > sizeof(local) && (tmp = malloc((size_t)m)) == NULL)
						return EMBER_ENOMEM;
					m = tokenizer_piece(t, ids[i], special, tmp, (size_t)m);
					w = (size_t)m - 1 < avail ? (size_t)m - 1 : avail;
					if (m > 0)
						memcpy(buf + total, tmp + 1, w);
					if (tmp != local)
						free(tmp);
					if (m < 0)
						return m;
				}
				total += (uint64_t)m - 1;
				continue;
			}
		}
		m = tokenizer_piece(t, ids[i], special, avail > 0 ? buf + total : NULL, avail);
		if (m < 0)
			return m;
		total += (uint64_t)m;
	}
	return total > INT64_MAX ? EMBER_ERANGE : (int64_t)total;
}

/* ---- queries ------------------------------------------------------------- */

int32_t tokenizer_n_vocab(const struct tokenizer *t)
{
	return t != NULL ? t->n_vocab : 0;
}

int32_t tokenizer_bos(const struct tokenizer *t)
{
	return t != NULL ? t->bos : -1;
}

int32_t tokenizer_eos(const struct tokenizer *t)
{
	return t != NULL ? t->eos : -1;
}

int tokenizer_is_eog(const struct tokenizer *t, int32_t id)
{
	if (t == NULL || id < 0 || id >= t->n_vocab)
		return 0;
	return (t->eog[id >> 3] >> (id & 7)) & 1;
}

const char *tokenizer_token_text(const struct tokenizer *t, int32_t id, size_t *len)
{
	if (t == NULL || id < 0 || id >= t->n_vocab)
		return NULL;
	if (len != NULL)
		*len = t->text[id].len;
	return t->text[id].ptr;
}
