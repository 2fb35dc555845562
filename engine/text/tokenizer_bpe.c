/* tokenizer_bpe.c - byte-level BPE (see tokenizer_bpe.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer_bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "tokenizer_impl.h"
#include "utf8.h"

#define BPE_MAX_REGEX 4
#define BPE_MAX_PATTERN 1024
#define BPE_N_MAPPED 324 /* bytes-to-unicode uses code points 0..323 */

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

struct bpe_pre {
	const char *name;  /* value of tokenizer.ggml.pre */
	int ignore_merges; /* a word that is a whole token skips merging */
	int clean_spaces;  /* detokenizer hint, see bpe_clean_spaces() */
	const char *regex[BPE_MAX_REGEX];
};

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

struct bpe_span {
	const char *ptr;
	uint32_t len;
	uint32_t split; /* merges: "left right" has left = ptr[0, split) */
};

struct bpe {
	const struct bpe_pre *pre;
	int spm;                 /* "gemma4": SentencePiece-style, see bpe_pre_spm */
	int32_t byte_tok[256];   /* spm: the <0xAB> token of each byte, -1 = none */
	int32_t n_vocab;
	struct bpe_span *toks;   /* (n_vocab) text as stored, in the map */
	uint32_t *tok_index;     /* (tok_mask + 1) open addressing: id + 1, 0 = empty */
	uint64_t tok_mask;
	uint32_t n_merges;
	struct bpe_span *merges; /* (n_merges) rank = index */
	uint32_t max_merge_len;  /* longest "left right" string */
	uint32_t *merge_index;   /* (merge_mask + 1) rank + 1, 0 = empty */
	uint64_t merge_mask;
	int n_regex;
	pcre2_code *regex[BPE_MAX_REGEX];
	uint8_t byte_utf8[256][2]; /* byte -> UTF-8 of its mapped code point */
	uint8_t byte_utf8_len[256];
	int16_t cp_byte[BPE_N_MAPPED]; /* mapped code point -> byte, -1 = none */
};

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

/* Rank of merging `l` and `r`, -1 if no merge joins them. */
static int32_t find_rank(const struct bpe *b, const char *l, size_t ln, const char *r, size_t rn)
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

/* ---- UTF-8 ------------------------------------------------------------------ */

/* 1 if `s` is strict UTF-8 (what PCRE2 accepts and re-encoding keeps). */
static int utf8_is_canonical(const uint8_t *s, size_t n)
{
	char tmp[4];
	size_t i = 0, adv;

	while (i < n) {
		uint32_t cp;

		if (s[i] < 0x80) {
			i++;
			continue;
		}
		cp = utf8_decode_lenient(s + i, n - i, &adv);
		if ((cp == 0xFFFD && adv == 1) || (cp >= 0xD800 && cp <= 0xDFFF) || utf8_encode(cp, tmp) != adv)
			return 0;
		i += adv;
	}
	return 1;
}

/*
 * Builds what the reference tokenizes: `canon`, the text re-encoded code
 * point by code point, and `subject`, the same bytes for PCRE2 except that
 * surrogates (which it refuses) become U+E000, a private-use character of
 * the same length and class. Both hold up to 3 * n bytes. Returns the
 * length.
 */
static size_t utf8_canonicalize(const uint8_t *s, size_t n, char *canon, char *subject)
{
	size_t i = 0, o = 0, adv, k;

	while (i < n) {
		uint32_t cp = utf8_decode_lenient(s + i, n - i, &adv);

		k = utf8_encode(cp, canon + o);
		if (cp >= 0xD800 && cp <= 0xDFFF)
			utf8_encode(0xE000, subject + o);
		else
			memcpy(subject + o, canon + o, k);
		o += k;
		i += adv;
	}
	return o;
}

/* ---- encoding ------------------------------------------------------------------ */

struct bpe_frag {
	size_t off, len; /* bytes of the canonical text */
};

struct bpe_sym {
	int32_t prev, next; /* -1 = none */
	uint32_t off, len;  /* in the word's mapped text; len 0 = merged away */
};

struct bpe_pair {
	int32_t rank;
	int32_t left, right; /* symbols */
	uint32_t len;        /* left.len + right.len when queued */
};

/* Scratch of one bpe_encode call. */
struct bpe_work {
	const struct bpe *b;
	const char *canon;
	char *mapped;           /* (2 * max_word) the word after bytes-to-unicode */
	struct bpe_sym *syms;   /* (max_word) */
	struct bpe_pair *heap;  /* (3 * max_word) min-heap by (rank, left) */
	size_t n_heap;
	int32_t *ids;
	size_t cap;
	int64_t n_ids;
};

static int frag_split(const struct bpe *b, int r, const char *subject, const struct bpe_frag *in,
		      size_t n_in, struct bpe_frag *out, size_t *n_out, pcre2_match_data *md)
{
	size_t f, n = 0;

	for (f = 0; f < n_in; f++) {
		const char *s = subject + in[f].off;
		size_t len = in[f].len, pos = 0, last = 0;

		while (pos < len) {
			int rc = pcre2_match(b->regex[r], (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
			PCRE2_SIZE *ov;

			if (rc == PCRE2_ERROR_NOMATCH)
				break;
			if (rc < 0)
				return EMBER_ERANGE;
			ov = pcre2_get_ovector_pointer(md);
			if (ov[1] <= ov[0]) {
				/* No pattern here matches empty; step over a character
				 * so that one never loops. */
				pos = ov[0] + 1;
				while (pos < len && ((uint8_t)s[pos] & 0xC0) == 0x80)
					pos++;
				continue;
			}
			if (ov[0] > last)
				out[n++] = (struct bpe_frag){in[f].off + last, ov[0] - last};
			out[n++] = (struct bpe_frag){in[f].off + ov[0], ov[1] - ov[0]};
			last = pos = ov[1];
		}
		if (last < len)
			out[n++] = (struct bpe_frag){in[f].off + last, len - last};
	}
	*n_out = n;
	return 0;
}

static void emit(struct bpe_work *w, int32_t id)
{
	if ((size_t)w->n_ids < w->cap)
		w->ids[w->n_ids] = id;
	w->n_ids++;
}

static int pair_less(const struct bpe_pair *a, const struct bpe_pair *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct bpe_work *w, struct bpe_pair p)
{
	size_t i = w->n_heap++;

	while (i > 0 && pair_less(&p, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = p;
}

static struct bpe_pair heap_pop(struct bpe_work *w)
{
	struct bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
	size_t i = 0, n = w->n_heap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && pair_less(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!pair_less(&w->heap[c], &last))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	if (n > 0)
		w->heap[i] = last;
	return top;
}

static void queue_pair(struct bpe_work *w, int32_t left, int32_t right)
{
	const struct bpe_sym *l, *r;
	int32_t rank;

	if (left < 0 || right < 0)
		return;
	l = &w->syms[left];
	r = &w->syms[right];
	rank = find_rank(w->b, w->mapped + l->off, l->len, w->mapped + r->off, r->len);
	if (rank >= 0)
		heap_push(w, (struct bpe_pair){rank, left, right, l->len + r->len});
}

/* Emits the token of one merged symbol, or its single bytes that are
 * tokens (the reference's fallback; other bytes are dropped). */
static void emit_symbol(struct bpe_work *w, const char *text, size_t len)
{
	int32_t id = bpe_find_token(w->b, text, len);
	size_t i;

	if (id >= 0) {
		emit(w, id);
		return;
	}
	for (i = 0; i < len; i++) {
		id = w->b->spm ? w->b->byte_tok[(uint8_t)text[i]] : bpe_find_token(w->b, text + i, 1);
		if (id >= 0)
			emit(w, id);
	}
}

/* spm: one symbol per UTF-8 character of the raw word (valid: canonical). */
static int32_t spm_symbols(struct bpe_work *w, const uint8_t *s, uint32_t len, uint32_t *off)
{
	int32_t n = 0;
	uint32_t i = 0;

	memcpy(w->mapped, s, len);
	while (i < len) {
		uint32_t k = s[i] < 0x80 ? 1 : s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : 4;
		if (k > len - i)
			k = len - i;
		w->syms[n] = (struct bpe_sym){n - 1, -1, i, k};
		if (n > 0)
			w->syms[n - 1].next = n;
		n++;
		i += k;
	}
	*off = len;
	return n;
}

static void encode_word(struct bpe_work *w, const struct bpe_frag *word)
{
	const uint8_t *s = (const uint8_t *)w->canon + word->off;
	uint32_t off = 0;
	int32_t i, n = (int32_t)word->len;

	if (w->b->spm) {
		n = spm_symbols(w, s, word->len, &off);
		/* a run of newlines that is a token is that token (llama.cpp) */
		if (s[0] == '\n') {
			int32_t id = bpe_find_token(w->b, (const char *)s, word->len);
			if (id >= 0) {
				emit(w, id);
				return;
			}
		}
	}
	for (i = 0; i < n && !w->b->spm; i++) {
		uint8_t k = w->b->byte_utf8_len[s[i]];

		memcpy(w->mapped + off, w->b->byte_utf8[s[i]], k);
		w->syms[i] = (struct bpe_sym){i - 1, i + 1 < n ? i + 1 : -1, off, k};
		off += k;
	}
	if (w->b->pre->ignore_merges) {
		int32_t id = bpe_find_token(w->b, w->mapped, off);

		if (id >= 0) {
			emit(w, id);
			return;
		}
	}
	w->n_heap = 0;
	for (i = 1; i < n; i++)
		queue_pair(w, i - 1, i);
	while (w->n_heap > 0) {
		struct bpe_pair p = heap_pop(w);
		struct bpe_sym *l = &w->syms[p.left], *r = &w->syms[p.right];

		/* Stale: one side was merged into something else since. */
		if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.len)
			continue;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			w->syms[r->next].prev = p.left;
		queue_pair(w, l->prev, p.left);
		queue_pair(w, p.left, l->next);
	}
	for (i = 0; i >= 0; i = w->syms[i].next)
		emit_symbol(w, w->mapped + w->syms[i].off, w->syms[i].len);
}

int64_t bpe_encode(const struct bpe *b, const char *text, size_t len, int32_t *ids, size_t cap)
{
	struct bpe_work w = {.b = b, .ids = ids, .cap = cap};
	char *canon_buf = NULL, *escaped = NULL;
	const char *subject = text;
	struct bpe_frag *frags[2] = {NULL, NULL};
	pcre2_match_data *md = NULL;
	size_t n, n_frag, i, max_word = 0;
	int r, cur = 0, rc = EMBER_ENOMEM;

	if (len == 0)
		return 0;
	if (len > SIZE_MAX / 18)
		return EMBER_ERANGE;
	if (b->spm && memchr(text, ' ', len)) {
		/* SentencePiece's normalizer: every space is U+2581 "▁" */
		size_t k = 0;
		if ((escaped = malloc(3 * len)) == NULL)
			return EMBER_ENOMEM;
		for (i = 0; i < len; i++) {
			if (text[i] == ' ') {
				memcpy(escaped + k, "\xe2\x96\x81", 3);
				k += 3;
			} else {
				escaped[k++] = text[i];
			}
		}
		text = escaped;
		len = k;
	}
	subject = text;
	w.canon = text;
	n = len;
	if (!utf8_is_canonical((const uint8_t *)text, len)) {
		canon_buf = malloc(6 * len);
		if (canon_buf == NULL)
			goto fail;
		n = utf8_canonicalize((const uint8_t *)text, len, canon_buf, canon_buf + 3 * len);
		w.canon = canon_buf;
		subject = canon_buf + 3 * len;
	}
	/* A split never yields more pieces than bytes. */
	frags[0] = malloc(n * sizeof(*frags[0]));
	frags[1] = malloc(n * sizeof(*frags[1]));
	md = pcre2_match_data_create(1, NULL);
	if (frags[0] == NULL || frags[1] == NULL || md == NULL)
		goto fail;
	frags[0][0] = (struct bpe_frag){0, n};
	n_frag = 1;
	for (r = 0; r < b->n_regex; r++) {
		rc = frag_split(b, r, subject, frags[cur], n_frag, frags[cur ^ 1], &n_frag, md);
		if (rc != 0)
			goto fail;
		cur ^= 1;
	}
	for (i = 0; i < n_frag; i++)
		if (frags[cur][i].len > max_word)
			max_word = frags[cur][i].len;
	rc = EMBER_ENOMEM;
	if (max_word > INT32_MAX / 3)
		goto fail;
	w.mapped = malloc(2 * max_word);
	w.syms = malloc(max_word * sizeof(*w.syms));
	w.heap = malloc(3 * max_word * sizeof(*w.heap));
	if (w.mapped == NULL || w.syms == NULL || w.heap == NULL)
		goto fail;
	for (i = 0; i < n_frag; i++)
		encode_word(&w, &frags[cur][i]);
	rc = 0;
fail:
	free(w.heap);
	free(w.syms);
	free(w.mapped);
	pcre2_match_data_free(md);
	free(frags[1]);
	free(frags[0]);
	free(canon_buf);
	free(escaped);
	return rc != 0 ? rc : w.n_ids;
}

/* ---- decoding ------------------------------------------------------------------ */

int bpe_piece(const struct bpe *b, int32_t id, char *buf, size_t cap)
{
	const struct bpe_span *t;
	size_t i = 0, n = 0, adv;

	if (id < 0 || id >= b->n_vocab || b->toks[id].len > INT32_MAX)
		return EMBER_ERANGE;
	t = &b->toks[id];
	if (b->spm) { /* raw UTF-8, "▁" is a space, <0xAB> is that byte */
		int byte = tok_parse_byte_piece((struct gguf_str){.len = t->len, .ptr = t->ptr});
		if (byte >= 0) {
			if (cap > 0)
				buf[0] = (char)byte;
			return 1;
		}
		while (i < t->len) {
			int sp = t->len - i >= 3 && memcmp(t->ptr + i, "\xe2\x96\x81", 3) == 0;
			if (n < cap)
				buf[n] = sp ? ' ' : t->ptr[i];
			n++;
			i += sp ? 3 : 1;
		}
		return (int)n;
	}
	while (i < t->len) {
		uint32_t cp = utf8_decode_lenient((const uint8_t *)t->ptr + i, t->len - i, &adv);

		/* Only the canonical spelling of a mapped character stands for
		 * a byte; anything else is copied through. */
		if (cp < BPE_N_MAPPED && b->cp_byte[cp] >= 0 && adv == (cp < 0x80 ? 1u : 2u)) {
			if (n < cap)
				buf[n] = (char)b->cp_byte[cp];
			n++;
		} else {
			size_t k;

			for (k = 0; k < adv; k++, n++)
				if (n < cap)
					buf[n] = t->ptr[i + k];
		}
		i += adv;
	}
	return (int)n;
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
