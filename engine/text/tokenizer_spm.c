/*
 * tokenizer_spm.c - the SentencePiece backend ("llama" vocabularies), over
 * libsentencepiece through tokenizer_spm_shim.cc.
 *
 * GGUF files carry only the vocabulary arrays, so we write the equivalent
 * SentencePiece ModelProto (protobuf wire format, by hand) and load that: a
 * BPE model (TrainerSpec.model_type = BPE) with byte fallback when the
 * vocabulary has <0xAB> byte pieces, and an identity normalizer that keeps
 * every character and only turns spaces into "▁". The " " llama.cpp puts in
 * front of each text fragment (add_space_prefix) is added here rather than
 * by SentencePiece's add_dummy_prefix, so the GGUF key decides. A file
 * with the original tokenizer.model bytes (TOK_KEY_SPM_MODEL) loads those;
 * the key then still decides, the model's add_dummy_prefix turned off.
 *
 * Field numbers (sentencepiece_model.proto):
 *   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec,
 *                   3 normalizer_spec
 *   SentencePiece   1 piece (string), 2 score (float), 3 type (enum:
 *                   NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4,
 *                   UNUSED 5, BYTE 6)
 *   TrainerSpec     3 model_type (UNIGRAM 1, BPE 2), 35 byte_fallback
 *   NormalizerSpec  1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces,
 *                   5 escape_whitespaces
 *
 * SentencePiece needs exactly one UNKNOWN piece and unique, non-empty
 * pieces; GGUF vocabularies do not promise that (Phi-3 types its <unk> as
 * control and has 53 "unknown" padding tokens). So the unknown id becomes
 * the UNKNOWN piece, other unknown-typed tokens CONTROL (never produced from
 * text, as in llama.cpp without parse_special), and empty or repeated texts
 * CONTROL pieces under a unique placeholder name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tokenizer_impl.h"
#include "tokenizer_spm_shim.h"
#include "utf8.h"

enum { PB_VARINT = 0, PB_LEN = 2, PB_FIXED32 = 5 };
enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER_DEFINED = 4, SP_UNUSED = 5, SP_BYTE = 6 };
enum { SP_MODEL_BPE = 2 };

struct spm_state {
	struct spm *sp;
	int32_t byte_id[256]; /* id of <0xAB>, or the unknown id */
	int space_prefix;     /* add " " before each fragment ourselves */
};

/* ---- protobuf writer (into a buffer sized beforehand) ---------------------- */

struct pb {
	uint8_t *p;
	size_t n, cap;
};

static void pb_byte(struct pb *b, uint8_t v)
{
	if (b->n < b->cap)
		b->p[b->n] = v;
	b->n++;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	while (v >= 0x80) {
		pb_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	pb_byte(b, (uint8_t)v);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static void pb_tag(struct pb *b, unsigned field, unsigned wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

static void pb_bytes(struct pb *b, unsigned field, const void *s, size_t len)
{
	size_t i;

	pb_tag(b, field, PB_LEN);
	pb_varint(b, len);
	for (i = 0; i < len; i++)
		pb_byte(b, ((const uint8_t *)s)[i]);
}

static void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, v);
}

static void pb_float(struct pb *b, unsigned field, float f)
{
	uint32_t u;
	int i;

	memcpy(&u, &f, 4);
	pb_tag(b, field, PB_FIXED32);
	for (i = 0; i < 4; i++)
		pb_byte(b, (uint8_t)(u >> (8 * i)));
}

/* ---- building the model ----------------------------------------------------- */

struct sort_ent {
	const char *ptr;
	uint64_t len;
	int32_t id;
};

static int cmp_text(const void *a, const void *b)
{
	const struct sort_ent *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->ptr, y->ptr, n);

	if (c != 0)
		return c;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Marks in `dup` every id whose text is empty or equals a lower id's. */
static int find_duplicates(const struct tokenizer *t, uint8_t *dup)
{
	struct sort_ent *e = malloc((size_t)t->n_vocab * sizeof(*e));
	int32_t i;

	if (e == NULL)
		return EMBER_ENOMEM;
	for (i = 0; i < t->n_vocab; i++)
		e[i] = (struct sort_ent){t->text[i].ptr, t->text[i].len, i};
	qsort(e, (size_t)t->n_vocab, sizeof(*e), cmp_text);
	for (i = 0; i < t->n_vocab; i++) {
		if (e[i].len == 0 ||
		    (i > 0 && e[i].len == e[i - 1].len && memcmp(e[i].ptr, e[i - 1].ptr, e[i].len) == 0))
			dup[e[i].id] = 1;
	}
	free(e);
	return 0;
}

static int sp_type(const struct tokenizer *t, int32_t id, int renamed)
{
	if (id == t->unk)
		return SP_UNKNOWN;
	if (renamed)
		return SP_CONTROL;
	switch (t->type[id]) {
	case TOK_UNKNOWN:
	case TOK_CONTROL:
		return SP_CONTROL;
	case TOK_USER_DEFINED:
		return SP_USER_DEFINED;
	case TOK_UNUSED:
		return SP_UNUSED;
	case TOK_BYTE:
		/* SentencePiece insists on the <0xAB> spelling for byte pieces. */
		return tok_parse_byte_piece(t->text[id]) >= 0 ? SP_BYTE : SP_CONTROL;
	default:
		return SP_NORMAL;
	}
}

static void write_piece(struct pb *b, const struct tokenizer *t, int32_t id, const uint8_t *dup)
{
	char ph[32];
	const char *s = t->text[id].ptr;
	size_t len = t->text[id].len, body;
	int type = sp_type(t, id, dup[id] && id != t->unk);

	if (dup[id] && id != t->unk) {
		len = (size_t)snprintf(ph, sizeof(ph), "<ember:renamed:%d>", (int)id);
		s = ph;
	}
	body = 1 + varint_len(len) + len + 5 + 2;
	pb_tag(b, 1, PB_LEN);
	pb_varint(b, body);
	pb_bytes(b, 1, s, len);
	pb_float(b, 2, t->score[id]);
	pb_uint(b, 3, (uint64_t)type);
}

/* Serializes the ModelProto for `t`'s vocabulary into a malloc'ed buffer. */
static int build_proto(const struct tokenizer *t, const uint8_t *dup, uint8_t **out, size_t *out_len)
{
	struct pb b = {0};
	int32_t id;
	int byte_fallback = 0;
	size_t cap = 256, spec;

	for (id = 0; id < t->n_vocab; id++) {
		cap += 48 + t->text[id].len;
		if (sp_type(t, id, dup[id] && id != t->unk) == SP_BYTE)
			byte_fallback = 1;
	}
	b.p = malloc(cap);
	if (b.p == NULL)
		return EMBER_ENOMEM;
	b.cap = cap;
	for (id = 0; id < t->n_vocab; id++)
		write_piece(&b, t, id, dup);
	/* trainer_spec { model_type: BPE, byte_fallback } */
	spec = 2 + (byte_fallback ? 3 : 0);
	pb_tag(&b, 2, PB_LEN);
	pb_varint(&b, spec);
	pb_uint(&b, 3, SP_MODEL_BPE);
	if (byte_fallback)
		pb_uint(&b, 35, 1);
	/* normalizer_spec { name: "identity", add_dummy_prefix: false,
	 * remove_extra_whitespaces: false, escape_whitespaces: true } */
	pb_tag(&b, 3, PB_LEN);
	pb_varint(&b, 10 + 2 + 2 + 2);
	pb_bytes(&b, 1, "identity", 8);
	pb_uint(&b, 3, 0);
	pb_uint(&b, 4, 0);
	pb_uint(&b, 5, 1);
	if (b.n > b.cap) { /* the bound above is wrong: a bug, not bad input */
		free(b.p);
		return EMBER_ERANGE;
	}
	*out = b.p;
	*out_len = b.n;
	return 0;
}

/* ModelProto field 3 (normalizer_spec) holding only add_dummy_prefix =
 * false. Appended to a serialized model it clears the model's own flag
 * (a parser merges repeated embedded messages, the last scalar wins). */
static const uint8_t no_dummy_prefix[] = {(3 << 3) | PB_LEN, 2, (3 << 3) | PB_VARINT, 0};

/* 1 if piece p (len bytes) is `text` with each " " written as "▁". */
static int same_but_spaces(const char *p, size_t len, struct gguf_str text)
{
	size_t i = 0, j = 0;

	while (i < len && j < text.len) {
		if (text.ptr[j] == ' ' && len - i >= 3 && memcmp(p + i, "\xe2\x96\x81", 3) == 0) {
			i += 3;
			j++;
		} else if (p[i] == text.ptr[j]) {
			i++;
			j++;
		} else {
			return 0;
		}
	}
	return i == len && j == text.len;
}

/* Loads the original model bytes when the file has them (TOK_KEY_SPM_MODEL);
 * `own_prefix`: with the model's dummy prefix turned off (we add it). */
static int load_native(const struct tokenizer *t, const struct gguf_kv *kv, int own_prefix,
		       struct spm **sp, char *err)
{
	const char *p;
	uint8_t *proto;
	size_t len;
	int32_t id;
	int rc;

	if (kv->type != GGUF_TYPE_ARRAY ||
	    (kv->arr_type != GGUF_TYPE_UINT8 && kv->arr_type != GGUF_TYPE_INT8))
		return ember_seterr(err, EMBER_EFORMAT, "%s: not a byte array", TOK_KEY_SPM_MODEL);
	len = (size_t)kv->arr_n;
	proto = malloc(len + sizeof(no_dummy_prefix));
	if (proto == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: SentencePiece model");
	memcpy(proto, kv->data, len);
	if (own_prefix) {
		memcpy(proto + len, no_dummy_prefix, sizeof(no_dummy_prefix));
		len += sizeof(no_dummy_prefix);
	}
	rc = spm_new(sp, proto, len, err);
	free(proto);
	if (rc != 0)
		return rc;
	/* More tokens than pieces is a config.json vocab_size past the model's
	 * (Gemma: 262208 for 262144): fine when the extra ones are padding or
	 * added tokens, which the front handles and the model never emits. */
	if (spm_n_pieces(*sp) > t->n_vocab)
		return ember_seterr(err, EMBER_EFORMAT, "%s: %d pieces for %d tokens", TOK_KEY_SPM_MODEL,
				    (int)spm_n_pieces(*sp), (int)t->n_vocab);
	for (id = spm_n_pieces(*sp); id < t->n_vocab; id++)
		if (t->type[id] != TOK_UNUSED && t->type[id] != TOK_USER_DEFINED && t->type[id] != TOK_CONTROL)
			return ember_seterr(err, EMBER_EFORMAT,
					    "%s: %d pieces for %d tokens, and token %d is a piece",
					    TOK_KEY_SPM_MODEL, (int)spm_n_pieces(*sp), (int)t->n_vocab, (int)id);
	for (id = 0; id < spm_n_pieces(*sp); id++) {
		if (spm_piece(*sp, id, &p, &len) != 0)
			return ember_seterr(err, EMBER_EFORMAT, "%s: piece %d unreadable", TOK_KEY_SPM_MODEL,
					    (int)id);
		if (len == t->text[id].len && memcmp(p, t->text[id].ptr, len) == 0)
			continue;
		/* user-defined tokens are written with "▁" as a space (as
		 * llama.cpp pre-normalises them: Gemma's "▁▁" pieces) */
		if (t->type[id] != TOK_USER_DEFINED || !same_but_spaces(p, len, t->text[id]))
			return ember_seterr(err, EMBER_EFORMAT, "%s: piece %d differs from the vocabulary",
					    TOK_KEY_SPM_MODEL, (int)id);
	}
	return 0;
}

static int build_model(const struct tokenizer *t, struct spm **sp, char *err)
{
	uint8_t *dup = NULL, *proto = NULL;
	size_t len = 0;
	int rc;

	dup = calloc((size_t)t->n_vocab, 1);
	if (dup == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: SentencePiece model");
	rc = find_duplicates(t, dup);
	if (rc == 0)
		rc = build_proto(t, dup, &proto, &len);
	if (rc != 0) {
		ember_seterr(err, rc, "tokenizer: building the SentencePiece model");
		goto fail;
	}
	rc = spm_new(sp, proto, len, err);
fail:
	free(proto);
	free(dup);
	return rc;
}

/* ---- the backend -------------------------------------------------------------- */

static int encode_run(const struct spm_state *st, const char *text, size_t len, int prefix,
		      struct tok_out *out)
{
	size_t room = out->n < out->cap ? out->cap - out->n : 0;
	int64_t n;

	if (len == 0 && !prefix)
		return 0;
	n = spm_encode(st->sp, text, len, prefix, room > 0 ? out->ids + out->n : NULL, room);
	if (n < 0)
		return (int)n;
	out->n += (size_t)n;
	return 0;
}

/*
 * SentencePiece would turn each invalid UTF-8 byte into U+FFFD; llama.cpp
 * keeps the byte (as a byte token). So invalid bytes are cut out here and
 * emitted as byte tokens, and the valid runs between them go to the model.
 */
static int spm_encode_cb(const struct tokenizer *t, const char *text, size_t len, struct tok_out *out)
{
	const struct spm_state *st = t->state;
	const uint8_t *u = (const uint8_t *)text;
	size_t i = 0, start = 0, k;
	int prefix = st->space_prefix, rc;

	while (i < len) {
		k = utf8_seq_len(u + i, len - i);
		if (k > 0) {
			i += k;
			continue;
		}
		rc = encode_run(st, text + start, i - start, prefix, out);
		if (rc != 0)
			return rc;
		prefix = 0;
		tok_out_push(out, st->byte_id[u[i]]);
		start = ++i;
	}
	return encode_run(st, text + start, len - start, prefix, out);
}

static int spm_piece_cb(const struct tokenizer *t, int32_t id, char *buf, size_t cap)
{
	struct gguf_str s = t->text[id];
	size_t i, n = 0;
	int byte;
	char c;

	if (t->type[id] == TOK_UNDEFINED)
		return 0;
	if (t->type[id] == TOK_BYTE && (byte = tok_parse_byte_piece(s)) >= 0) {
		if (buf != NULL && cap > 0)
			buf[0] = (char)byte;
		return 1;
	}
	for (i = 0; i < s.len; i++, n++) {
		c = s.ptr[i];
		if (i + 2 < s.len && memcmp(s.ptr + i, "\xe2\x96\x81", 3) == 0) {
			c = ' ';
			i += 2;
		}
		if (buf != NULL && n < cap)
			buf[n] = c;
	}
	return n > INT32_MAX ? EMBER_ERANGE : (int)n;
}

static void spm_free_cb(void *state)
{
	struct spm_state *st = state;

	if (st == NULL)
		return;
	spm_free(st->sp);
	free(st);
}

static const struct tokenizer_ops spm_ops = {
	.name = "spm",
	.encode = spm_encode_cb,
	.piece = spm_piece_cb,
	.free = spm_free_cb,
};

static void spm_defaults(struct tokenizer *t)
{
	if (t->unk == TOK_UNSET)
		t->unk = 0;
	if (t->bos == TOK_UNSET)
		t->bos = 1;
	if (t->eos == TOK_UNSET)
		t->eos = 2;
	if (t->add_bos < 0)
		t->add_bos = 1;
	if (t->add_eos < 0)
		t->add_eos = 0;
	if (t->add_space_prefix < 0)
		t->add_space_prefix = 1;
	/* SentencePiece needs an unknown piece: take the first unknown-typed
	 * token when the id is missing or out of range. */
	if (t->unk < 0 || t->unk >= t->n_vocab) {
		int32_t id;

		t->unk = -1;
		for (id = 0; id < t->n_vocab && t->unk < 0; id++)
			if (t->type[id] == TOK_UNKNOWN)
				t->unk = id;
	}
}

int tokenizer_spm_init(struct tokenizer *t, const struct gguf *g, char *err)
{
	const struct gguf_kv *native = gguf_find_kv(g, TOK_KEY_SPM_MODEL);
	struct spm_state *st;
	int32_t id;
	/* Whether the file says if a space goes in front (before defaults). */
	const int prefix_key = t->add_space_prefix >= 0;
	int rc, b;

	spm_defaults(t);
	if (t->unk < 0)
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "SentencePiece vocabulary without an unknown token");
	st = calloc(1, sizeof(*st));
	if (st == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer");
	for (b = 0; b < 256; b++)
		st->byte_id[b] = t->unk;
	for (id = 0; id < t->n_vocab; id++)
		if (t->type[id] == TOK_BYTE && (b = tok_parse_byte_piece(t->text[id])) >= 0)
			st->byte_id[b] = id;
	if (native != NULL) {
		/* The file's add_space_prefix key decides, as on the arrays
		 * path (Gemma's converter writes false whatever the model's
		 * add_dummy_prefix); without the key the model's own does. */
		st->space_prefix = prefix_key && t->add_space_prefix;
		rc = load_native(t, native, prefix_key, &st->sp, err);
	} else {
		st->space_prefix = t->add_space_prefix;
		rc = build_model(t, &st->sp, err);
	}
	if (rc != 0) {
		spm_free_cb(st);
		return rc;
	}
	t->ops = &spm_ops;
	t->state = st;
	return 0;
}
