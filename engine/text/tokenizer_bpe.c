/* tokenizer_bpe.c - byte-level BPE (see tokenizer_bpe.h): vocabulary and
 * merge tables, pre-tokenizer selection, the tokenizer.c backend. Encoding
 * is tokenizer_bpe_encode.c. */
#include "tokenizer_bpe_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tokenizer_impl.h"
#include "utf8.h"

/*
 * Pre-tokenizer regexes, as the reference lists them per vocabulary type.
 * "\s" and "\S" are rewritten to Unicode White_Space before compiling
 * (expand_ws): the reference's \s is exactly that set, while PCRE2's \s
 * under UCP also takes U+180E (a space in Unicode before 6.3).
 */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3_HEAD                                                     \
	"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])" \
	"|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
#define RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3 RE_LLAMA3_HEAD "|\\p{N}{1,3}" RE_LLAMA3_TAIL
#define RE_QWEN2 RE_LLAMA3_HEAD "|\\p{N}" RE_LLAMA3_TAIL
#define RE_PORO " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
#define RE_DIGITS3 "[0-9][0-9][0-9]"


/* The first entry is what a file without tokenizer.ggml.pre gets. */
static const struct bpe_pre bpe_pres[] = {
	{"default", 0, 1, {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", RE_DIGITS3}},
	{"gpt-2", 0, 1, {RE_GPT2}},
	{"phi-2", 0, 1, {RE_GPT2}},
	{"mpt", 0, 1, {RE_GPT2}},
	{"olmo", 0, 1, {RE_GPT2}},
	{"jais", 0, 1, {RE_GPT2}},
	{"gigachat", 0, 1, {RE_GPT2}},
	{"roberta-bpe", 0, 1, {RE_GPT2}},
	{"jina-es", 0, 1, {RE_GPT2}},
	{"jina-de", 0, 1, {RE_GPT2}},
	{"jina-v2-es", 0, 1, {RE_GPT2}},
	{"jina-v2-de", 0, 1, {RE_GPT2}},
	{"jina-v2-code", 0, 1, {RE_GPT2}},
	{"falcon", 0, 1, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, RE_DIGITS3}},
	{"llama3", 1, 1, {RE_LLAMA3}},
	{"llama-v3", 1, 1, {RE_LLAMA3}},
	{"llama-bpe", 1, 1, {RE_LLAMA3}},
	{"falcon3", 1, 1, {RE_LLAMA3}},
	{"dbrx", 0, 1, {RE_LLAMA3}},
	{"smaug-bpe", 0, 1, {RE_LLAMA3}},
	{"qwen2", 0, 0, {RE_QWEN2}},
	{"stablelm2", 0, 1, {RE_QWEN2}},
	{"starcoder", 0, 1, {"\\p{N}", RE_GPT2}},
	{"refact", 0, 1, {"\\p{N}", RE_GPT2}},
	{"command-r", 0, 0, {"\\p{N}", RE_GPT2}},
	{"smollm", 0, 0, {"\\p{N}", RE_GPT2}},
	{"codeshell", 0, 1, {"\\p{N}", RE_GPT2}},
	{"exaone", 0, 1, {"\\p{N}", RE_GPT2}},
	{"minerva-7b", 0, 1, {"\\p{N}", RE_GPT2}},
	{"poro-chat", 0, 1, {RE_PORO}},
	{"bloom", 0, 1, {RE_PORO}},
	{"gpt3-finnish", 0, 1, {RE_PORO}},
};

/* "gemma4" vocabularies (tokenizer.ggml.model): SentencePiece-style BPE.
 * Spaces become U+2581 first, merges run on raw UTF-8 (no bytes-to-unicode
 * mapping) over whole lines, and a symbol missing from the vocabulary falls
 * back to <0xAB> byte tokens; as llama.cpp's "gemma4" pre-tokenizer. */
static const struct bpe_pre bpe_pre_spm = {"gemma4", 0, 1, {"[^\\n]+|[\\n]+"}};

/* Unicode White_Space, written for use inside a character class. */
static const char bpe_ws_class[] = "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
				   "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

/* ---- hashing ------------------------------------------------------------ */

static uint64_t fnv_add(uint64_t h, const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
	return h;
}

#define FNV_SEED 0xcbf29ce484222325ull

static uint64_t table_mask(uint64_t n)
{
	uint64_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	return cap - 1;
}

int32_t bpe_find_token(const struct bpe *b, const char *text, size_t len)
{
	uint64_t i = fnv_add(FNV_SEED, text, len) & b->tok_mask;
	uint32_t slot;

	while ((slot = b->tok_index[i]) != 0) {
		const struct bpe_span *t = &b->toks[slot - 1];

		if (t->len == len && memcmp(t->ptr, text, len) == 0)
			return (int32_t)(slot - 1);
		i = (i + 1) & b->tok_mask;
	}
	return -1;
}

int32_t bpe_find_rank(const struct bpe *b, const char *l, size_t ln, const char *r, size_t rn)
{
	uint64_t h, i;
	uint32_t slot;

	/* Long symbols (runs of one character) are common and join nothing:
	 * skip hashing them. */
	if (ln + 1 + rn > b->max_merge_len)
		return -1;
	h = fnv_add(fnv_add(fnv_add(FNV_SEED, l, ln), " ", 1), r, rn);
	i = h & b->merge_mask;
	while ((slot = b->merge_index[i]) != 0) {
		const struct bpe_span *m = &b->merges[slot - 1];

		if (m->split == ln && m->len == ln + 1 + rn && memcmp(m->ptr, l, ln) == 0 &&
		    memcmp(m->ptr + ln + 1, r, rn) == 0)
			return (int32_t)(slot - 1);
		i = (i + 1) & b->merge_mask;
	}
	return -1;
}

/* ---- loading -------------------------------------------------------------- */

/* GPT-2's bytes-to-unicode: printable Latin-1 bytes stand for themselves,
 * the other 68 bytes take code points 256.. in byte order, so every byte
 * has a visible, non-space character. */
static void init_byte_map(struct bpe *b)
{
	int n_other = 0, c;

	for (c = 0; c < BPE_N_MAPPED; c++)
		b->cp_byte[c] = -1;
	for (c = 0; c < 256; c++) {
		int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
		int cp = printable ? c : 256 + n_other++;

		b->cp_byte[cp] = (int16_t)c;
		if (cp < 0x80) {
			b->byte_utf8[c][0] = (uint8_t)cp;
			b->byte_utf8_len[c] = 1;
		} else {
			b->byte_utf8[c][0] = (uint8_t)(0xC0 | (cp >> 6));
			b->byte_utf8[c][1] = (uint8_t)(0x80 | (cp & 0x3F));
			b->byte_utf8_len[c] = 2;
		}
	}
}

static int load_tokens(struct bpe *b, const struct gguf *g, char *err)
{
	const struct gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.tokens");
	uint64_t i;

	if (kv == NULL || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens: missing or not a string array");
	if (kv->arr_n == 0 || kv->arr_n > INT32_MAX)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens: %llu tokens",
				    (unsigned long long)kv->arr_n);
	b->n_vocab = (int32_t)kv->arr_n;
	b->tok_mask = table_mask(kv->arr_n);
	b->toks = calloc(kv->arr_n, sizeof(*b->toks));
	b->tok_index = calloc(b->tok_mask + 1, sizeof(*b->tok_index));
	if (b->toks == NULL || b->tok_index == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: %llu tokens", (unsigned long long)kv->arr_n);
	for (i = 0; i < kv->arr_n; i++) {
		struct gguf_str s;
		uint64_t h;

		if (gguf_arr_str(kv, i, &s) != 0 || s.len > UINT32_MAX)
			return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.tokens[%llu]: unreadable",
					    (unsigned long long)i);
		b->toks[i].ptr = s.ptr;
		b->toks[i].len = (uint32_t)s.len;
		/* A repeated text maps to its last id, as in the reference. */
		h = fnv_add(FNV_SEED, s.ptr, s.len) & b->tok_mask;
		while (b->tok_index[h] != 0) {
			const struct bpe_span *t = &b->toks[b->tok_index[h] - 1];

			if (t->len == s.len && memcmp(t->ptr, s.ptr, s.len) == 0)
				break;
			h = (h + 1) & b->tok_mask;
		}
		b->tok_index[h] = (uint32_t)i + 1;
	}
	return 0;
}

static int load_merges(struct bpe *b, const struct gguf *g, char *err)
{
	const struct gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.merges");
	uint64_t i;

	if (kv == NULL)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.merges: missing (a BPE vocabulary needs it)");
	if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.merges: not a string array");
	if (kv->arr_n > INT32_MAX - 1)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.merges: %llu merges",
				    (unsigned long long)kv->arr_n);
	b->n_merges = (uint32_t)kv->arr_n;
	b->merge_mask = table_mask(kv->arr_n);
	b->merges = calloc(kv->arr_n ? kv->arr_n : 1, sizeof(*b->merges));
	b->merge_index = calloc(b->merge_mask + 1, sizeof(*b->merge_index));
	if (b->merges == NULL || b->merge_index == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: %llu merges", (unsigned long long)kv->arr_n);
	for (i = 0; i < kv->arr_n; i++) {
		struct bpe_span *m = &b->merges[i];
		struct gguf_str s;
		const char *sp;
		uint64_t h;

		if (gguf_arr_str(kv, i, &s) != 0 || s.len > UINT32_MAX)
			return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.merges[%llu]: unreadable",
					    (unsigned long long)i);
		/* The split is the first space after the first byte, as the
		 * reference reads it; both halves must be non-empty. */
		sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
		if (sp == NULL || sp == s.ptr + s.len - 1)
			return ember_seterr(err, EMBER_EFORMAT,
					    "tokenizer.ggml.merges[%llu]: \"%.*s\" is not \"left right\"",
					    (unsigned long long)i, (int)(s.len > 64 ? 64 : s.len), s.ptr);
		m->ptr = s.ptr;
		m->len = (uint32_t)s.len;
		m->split = (uint32_t)(sp - s.ptr);
		if (m->len > b->max_merge_len)
			b->max_merge_len = m->len;
		/* A repeated merge keeps its first (lowest) rank. */
		h = fnv_add(FNV_SEED, s.ptr, s.len) & b->merge_mask;
		while (b->merge_index[h] != 0) {
			const struct bpe_span *o = &b->merges[b->merge_index[h] - 1];

			if (o->len == m->len && o->split == m->split && memcmp(o->ptr, m->ptr, m->len) == 0)
				break;
			h = (h + 1) & b->merge_mask;
		}
		if (b->merge_index[h] == 0)
			b->merge_index[h] = (uint32_t)i + 1;
	}
	return 0;
}

/* Copies `src` to `dst`, replacing \s and \S by explicit White_Space classes. */
static int expand_ws(const char *src, char *dst, size_t cap)
{
	size_t n = 0, wl = strlen(bpe_ws_class);
	int in_class = 0;

	while (*src != '\0') {
		const char *add = src;
		size_t add_len = 1;

		if (src[0] == '\\' && (src[1] == 's' || src[1] == 'S')) {
			if (in_class && src[1] == 'S')
				return -1;
			if (n + wl + 4 >= cap)
				return -1;
			if (!in_class)
				dst[n++] = '[';
			if (src[1] == 'S')
				dst[n++] = '^';
			memcpy(dst + n, bpe_ws_class, wl);
			n += wl;
			if (!in_class)
				dst[n++] = ']';
			src += 2;
			continue;
		}
		if (src[0] == '\\' && src[1] != '\0')
			add_len = 2;
		else if (src[0] == '[' && !in_class)
			in_class = 1;
		else if (src[0] == ']' && in_class)
			in_class = 0;
		if (n + add_len >= cap)
			return -1;
		memcpy(dst + n, add, add_len);
		n += add_len;
		src += add_len;
	}
	dst[n] = '\0';
	return 0;
}

static int compile_regexes(struct bpe *b, char *err)
{
	char pattern[BPE_MAX_PATTERN];
	int i;

	for (i = 0; i < BPE_MAX_REGEX && b->pre->regex[i] != NULL; i++) {
		PCRE2_SIZE erroff;
		int rc;

		if (expand_ws(b->pre->regex[i], pattern, sizeof(pattern)) != 0)
			return ember_seterr(err, EMBER_EINVAL, "tokenizer: pre-tokenizer regex too long");
		b->regex[i] = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
					    &rc, &erroff, NULL);
		if (b->regex[i] == NULL) {
			PCRE2_UCHAR msg[128];

			pcre2_get_error_message(rc, msg, sizeof(msg));
			return ember_seterr(err, EMBER_EINVAL, "tokenizer: regex %d of \"%s\": %s at %zu", i,
					    b->pre->name, (const char *)msg, (size_t)erroff);
		}
		b->n_regex = i + 1;
		/* JIT is only a speed-up; the interpreter serves if it fails. */
		(void)pcre2_jit_compile(b->regex[i], PCRE2_JIT_COMPLETE);
	}
	return 0;
}

static int select_pre(struct bpe *b, const struct gguf *g, char *err)
{
	struct gguf_str pre;
	size_t i;

	b->pre = &bpe_pres[0];
	if (gguf_find_kv(g, "tokenizer.ggml.pre") == NULL)
		return 0;
	if (gguf_get_str(g, "tokenizer.ggml.pre", &pre) != 0)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.pre: not a string");
	if (pre.len == 0)
		return 0;
	for (i = 0; i < sizeof(bpe_pres) / sizeof(bpe_pres[0]); i++) {
		if (gguf_str_eq(pre, bpe_pres[i].name)) {
			b->pre = &bpe_pres[i];
			return 0;
		}
	}
	return ember_seterr(err, EMBER_EUNSUPPORTED, "tokenizer.ggml.pre: unknown pre-tokenizer \"%.*s\"",
			    (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
}

int bpe_new(struct bpe **out, const struct gguf *g, char *err)
{
	struct gguf_str model;
	struct bpe *b;
	int rc;

	*out = NULL;
	if (gguf_get_str(g, "tokenizer.ggml.model", &model) != 0)
		return ember_seterr(err, EMBER_EFORMAT, "tokenizer.ggml.model: missing or not a string");
	if (!gguf_str_eq(model, "gpt2") && !gguf_str_eq(model, "gemma4"))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "tokenizer: model \"%.*s\" is not BPE",
				    (int)(model.len > 64 ? 64 : model.len), model.ptr);
	b = calloc(1, sizeof(*b));
	if (b == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "tokenizer: out of memory");
	init_byte_map(b);
	b->spm = gguf_str_eq(model, "gemma4");
	if (b->spm)
		b->pre = &bpe_pre_spm; /* the model implies it, whatever .pre says */
	rc = b->spm ? 0 : select_pre(b, g, err);
	if (rc == 0)
		rc = load_tokens(b, g, err);
	for (int c = 0; rc == 0 && c < 256; c++) {
		char hex[7];
		snprintf(hex, sizeof(hex), "<0x%02X>", c);
		b->byte_tok[c] = b->spm ? bpe_find_token(b, hex, 6) : -1;
	}
	if (rc == 0)
		rc = load_merges(b, g, err);
	if (rc == 0)
		rc = compile_regexes(b, err);
	if (rc != 0)
		goto fail;
	*out = b;
	return 0;
fail:
	bpe_free(b);
	return rc;
}

void bpe_free(struct bpe *b)
{
	int i;

	if (b == NULL)
		return;
	for (i = 0; i < b->n_regex; i++)
		pcre2_code_free(b->regex[i]);
	free(b->merge_index);
	free(b->merges);
	free(b->tok_index);
	free(b->toks);
	free(b);
}

int32_t bpe_n_vocab(const struct bpe *b)
{
	return b->n_vocab;
}

int bpe_clean_spaces(const struct bpe *b)
{
	return b->pre->clean_spaces;
}

const char *bpe_pre_name(const struct bpe *b)
{
	return b->pre->name;
}

/* ---- the backend that tokenizer.c drives (contract: tokenizer_impl.h) ---- */

static int bpe__tok_encode(const struct tokenizer *t, const char *text, size_t len, struct tok_out *out)
{
	size_t room = out->n < out->cap ? out->cap - out->n : 0;
	int64_t n = bpe_encode(t->state, text, len, room ? out->ids + out->n : NULL, room);

	if (n < 0)
		return (int)n;
	out->n += (size_t)n;
	return 0;
}

static int bpe__tok_piece(const struct tokenizer *t, int32_t id, char *buf, size_t cap)
{
	return bpe_piece(t->state, id, buf, cap);
}

static void bpe__tok_free(void *state)
{
	bpe_free(state);
}

static const struct tokenizer_ops bpe__tok_ops = {
	.name = "bpe",
	.encode = bpe__tok_encode,
	.piece = bpe__tok_piece,
	.free = bpe__tok_free,
};

int tokenizer_bpe_init(struct tokenizer *t, const struct gguf *g, char *err)
{
	struct bpe *b = NULL;
	int rc = bpe_new(&b, g, err);

	if (rc < 0)
		return rc;
	/* As llama.cpp: byte-level BPE adds neither BOS/EOS nor a space prefix
	 * unless the file says so; "gemma4" always adds BOS. */
	if (t->add_bos < 0 || b->spm)
		t->add_bos = b->spm ? 1 : 0;
	if (t->add_eos < 0)
		t->add_eos = 0;
	t->add_space_prefix = 0;
	t->ops = &bpe__tok_ops;
	t->state = b;
	return 0;
}
