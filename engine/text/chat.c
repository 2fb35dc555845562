/*
 * chat.c - chat template families as data: one row per family, one renderer.
 *
 * Table strings may hold two placeholders, expanded while rendering:
 *   {bos}  the BOS text, except at the very start of the prompt (the
 *          tokenizer adds that BOS; see chat.h)
 *   {eos}  the EOS text
 * Message contents are copied verbatim, never expanded.
 */
#include "chat.h"
#include "chat_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ember.h"

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_COUNT };

static const char *const role_names[ROLE_COUNT] = {"system", "user", "assistant"};

/* Where a family puts the system message. */
enum sys_kind {
	SYS_TURN,  /* a turn of its own, with open[ROLE_SYSTEM] / close[ROLE_SYSTEM] */
	SYS_MERGE, /* sys_open + content + sys_close in front of the first user content */
};

struct family {
	const char *name;
	/* Detection: all non-NULL markers present. Rows are tried in enum
	 * order, so a more specific family comes before one whose markers it
	 * also contains (phi3 before zephyr). */
	const char *markers[2];
	const char *open[ROLE_COUNT];  /* before a message's content */
	const char *close[ROLE_COUNT]; /* after it */
	enum sys_kind sys;
	const char *sys_open, *sys_close; /* SYS_MERGE only */
	int trim;			  /* strip whitespace around contents */
	int leading_bos;		  /* the family's template starts with bos_token */
	const char *gen;		  /* generation prompt */
	const char *stops[CHAT_STOPS_MAX];
};

/* Indexed by enum chat_template; row 0 (auto) renders nothing by itself. */
static const struct family families[CHAT_TEMPLATE_COUNT] = {
	[CHAT_TEMPLATE_AUTO] = {.name = "auto"},
	[CHAT_TEMPLATE_CHATML] = {
		.name = "chatml",
		.markers = {"<|im_start|>"},
		.open = {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
		.close = {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"},
		.sys = SYS_TURN,
		.gen = "<|im_start|>assistant\n",
		.stops = {"<|im_end|>", "<|im_start|>"},
	},
	[CHAT_TEMPLATE_LLAMA3] = {
		.name = "llama3",
		.markers = {"<|start_header_id|>"},
		.open = {"<|start_header_id|>system<|end_header_id|>\n\n",
			 "<|start_header_id|>user<|end_header_id|>\n\n",
			 "<|start_header_id|>assistant<|end_header_id|>\n\n"},
		.close = {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"},
		.sys = SYS_TURN,
		.trim = 1,
		.leading_bos = 1,
		.gen = "<|start_header_id|>assistant<|end_header_id|>\n\n",
		.stops = {"<|eot_id|>", "<|end_of_text|>"},
	},
	[CHAT_TEMPLATE_GEMMA] = {
		.name = "gemma",
		.markers = {"<start_of_turn>"},
		.open = {NULL, "<start_of_turn>user\n", "<start_of_turn>model\n"},
		.close = {NULL, "<end_of_turn>\n", "<end_of_turn>\n"},
		.sys = SYS_MERGE,
		.sys_open = "",
		.sys_close = "\n\n",
		.trim = 1,
		.leading_bos = 1,
		.gen = "<start_of_turn>model\n",
		.stops = {"<end_of_turn>"},
	},
	[CHAT_TEMPLATE_PHI3] = {
		.name = "phi3",
		.markers = {"<|end|>", "<|assistant|>"},
		.open = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
		.close = {"<|end|>\n", "<|end|>\n", "<|end|>\n"},
		.sys = SYS_TURN,
		.gen = "<|assistant|>\n",
		.stops = {"<|end|>", "<|endoftext|>", "<|user|>"},
	},
	[CHAT_TEMPLATE_ZEPHYR] = {
		.name = "zephyr",
		/* the golden TinyLlama-style template builds '<|' + role + '|>',
		 * so only its generation prompt is literal */
		.markers = {"<|assistant|>"},
		.open = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
		.close = {"{eos}\n", "{eos}\n", "{eos}\n"},
		.sys = SYS_TURN,
		.gen = "<|assistant|>\n",
		.stops = {"{eos}", "<|user|>"},
	},
	[CHAT_TEMPLATE_LLAMA2] = {
		.name = "llama2",
		.markers = {"[INST]"},
		.open = {NULL, "{bos}[INST] ", " "},
		.close = {NULL, " [/INST]", " {eos}"},
		.sys = SYS_MERGE,
		.sys_open = "<<SYS>>\n",
		.sys_close = "\n<</SYS>>\n\n",
		.trim = 1,
		.leading_bos = 1,
		.gen = "",
		.stops = {"{eos}", "[INST]"},
	},
	[CHAT_TEMPLATE_PHI2] = {
		.name = "phi2",
		.markers = {"Instruct:", "Output:"},
		.open = {"", "Instruct: ", "Output: "},
		.close = {"\n", "\n", "\n"},
		.sys = SYS_TURN,
		.gen = "Output:",
		.stops = {"\nInstruct:", "{eos}"},
	},
	[CHAT_TEMPLATE_FALCON] = {
		.name = "falcon",
		.markers = {"Falcon:"},
		.open = {"System: ", "User: ", "Falcon: "},
		.close = {"\n", "\n", "\n"},
		.sys = SYS_TURN,
		.gen = "Falcon:",
		.stops = {"\nUser:", "{eos}"},
	},
};

/* snprintf-like sink: counts every byte, stores what fits before the NUL. */
struct sink {
	char *buf;
	size_t cap, len;
};

static void sink_put(struct sink *s, const char *p, size_t n)
{
	if (s->cap > 0 && s->len < s->cap - 1) {
		size_t room = s->cap - 1 - s->len;

		memcpy(s->buf + s->len, p, n < room ? n : room);
	}
	s->len += n;
}

/* Bytes of one side of a table string, with placeholders expanded. */
struct texts {
	const char *bos, *eos;
};

static void sink_put_table(struct sink *s, const char *p, const struct texts *tx)
{
	while (p != NULL && *p != '\0') {
		const char *brace = strchr(p, '{');
		size_t run = brace ? (size_t)(brace - p) : strlen(p);

		sink_put(s, p, run);
		p += run;
		if (brace == NULL)
			break;
		if (strncmp(p, "{bos}", 5) == 0) {
			if (s->len > 0) /* the leading BOS is the tokenizer's */
				sink_put(s, tx->bos, strlen(tx->bos));
			p += 5;
		} else if (strncmp(p, "{eos}", 5) == 0) {
			sink_put(s, tx->eos, strlen(tx->eos));
			p += 5;
		} else {
			sink_put(s, p, 1);
			p++;
		}
	}
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* A content's n bytes, NUL included. */
static void sink_put_content(struct sink *s, const char *p, size_t n, int trim)
{
	if (trim) {
		while (n > 0 && is_space(*p)) {
			p++;
			n--;
		}
		while (n > 0 && is_space(p[n - 1]))
			n--;
	}
	sink_put(s, p, n);
}

static int role_parse(const char *role)
{
	for (int r = 0; r < ROLE_COUNT; r++)
		if (strcmp(role, role_names[r]) == 0)
			return r;
	return -1;
}

/* True if `needle` occurs in the len bytes at `hay` (not NUL-terminated). */
static int contains(const char *hay, size_t len, const char *needle)
{
	size_t n = strlen(needle);

	if (n == 0 || n > len)
		return n == 0;
	for (size_t i = 0; i + n <= len; i++)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0)
			return 1;
	return 0;
}

enum chat_template chat_template_detect(const char *jinja, size_t len)
{
	if (jinja == NULL)
		return CHAT_TEMPLATE_AUTO;
	for (int t = CHAT_TEMPLATE_AUTO + 1; t < CHAT_TEMPLATE_COUNT; t++) {
		const struct family *f = &families[t];
		int all = 1;

		for (size_t m = 0; m < 2 && f->markers[m] != NULL; m++)
			all &= contains(jinja, len, f->markers[m]);
		if (all)
			return (enum chat_template)t;
	}
	return CHAT_TEMPLATE_AUTO;
}

int chat_template_from_name(const char *name)
{
	if (name == NULL)
		return EMBER_EINVAL;
	for (int t = 0; t < CHAT_TEMPLATE_COUNT; t++)
		if (strcasecmp(name, families[t].name) == 0)
			return t;
	return EMBER_EINVAL;
}

const char *chat_template_name(enum chat_template t)
{
	if ((int)t < 0 || t >= CHAT_TEMPLATE_COUNT)
		return "?";
	return families[t].name;
}

enum chat_template chat_template_select(enum chat_template choice, const char *jinja, size_t len)
{
	if ((int)choice > CHAT_TEMPLATE_AUTO && choice < CHAT_TEMPLATE_COUNT)
		return choice;
	choice = chat_template_detect(jinja, len);
	return choice == CHAT_TEMPLATE_AUTO ? CHAT_TEMPLATE_FALLBACK : choice;
}

int chat_template_leading_bos(enum chat_template t)
{
	if ((int)t < 0 || t >= CHAT_TEMPLATE_COUNT)
		return 0;
	return families[t].leading_bos;
}

/* Checks every message before anything is rendered, so an error leaves no
 * half-written prompt behind. */
static int check_msgs(const struct family *f, const struct chat_msg *msgs, size_t n, char *err)
{
	for (size_t i = 0; i < n; i++) {
		int role;

		if (msgs[i].role == NULL || msgs[i].content == NULL)
			return ember_seterr(err, EMBER_EINVAL, "chat message %zu: %s is NULL", i,
					    msgs[i].role == NULL ? "role" : "content");
		role = role_parse(msgs[i].role);
		if (role < 0)
			return ember_seterr(err, EMBER_EINVAL,
					    "chat message %zu: unknown role '%.32s' (want system, user or assistant)",
					    i, msgs[i].role);
		if (role == ROLE_SYSTEM && f->sys == SYS_MERGE && i > 0)
			return ember_seterr(err, EMBER_EINVAL,
					    "chat message %zu: the %s template takes a system message only first", i,
					    f->name);
	}
	return 0;
}

/* The bytes of a message's content (see struct chat_msg). */
static size_t content_len(const struct chat_msg *m)
{
	return m->content_len ? m->content_len : strlen(m->content);
}

/* Renders one message as `role`; `merged` is the system message to fold
 * into it (SYS_MERGE families, first user turn) or NULL. */
static void render_msg(struct sink *s, const struct family *f, int role, const struct chat_msg *m,
		       const struct chat_msg *merged, const struct texts *tx)
{
	sink_put_table(s, f->open[role], tx);
	if (merged != NULL) {
		sink_put_table(s, f->sys_open, tx);
		sink_put_content(s, merged->content, content_len(merged), f->trim);
		sink_put_table(s, f->sys_close, tx);
	}
	sink_put_content(s, m->content, content_len(m), f->trim);
	sink_put_table(s, f->close[role], tx);
}

int64_t chat_apply(enum chat_template t, const struct chat_msg *msgs, size_t n, const char *bos_text,
		   const char *eos_text, int add_generation_prompt, char *buf, size_t cap, char *err)
{
	struct texts tx = {bos_text ? bos_text : "", eos_text ? eos_text : ""};
	struct sink s = {buf, cap, 0};
	const struct family *f;
	const struct chat_msg *pending_sys = NULL;
	int rc;

	if ((int)t < 0 || t >= CHAT_TEMPLATE_COUNT)
		return ember_seterr(err, EMBER_EINVAL, "chat template %d: no such family", (int)t);
	if (t == CHAT_TEMPLATE_AUTO)
		t = CHAT_TEMPLATE_FALLBACK;
	f = &families[t];
	if (msgs == NULL || n == 0)
		return ember_seterr(err, EMBER_EINVAL, "chat: no messages");
	if (buf == NULL && cap > 0)
		return ember_seterr(err, EMBER_EINVAL, "chat: NULL buffer with capacity %zu", cap);
	rc = check_msgs(f, msgs, n, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int role = role_parse(msgs[i].role);

		if (role == ROLE_SYSTEM && f->sys == SYS_MERGE) {
			pending_sys = &msgs[i];
			continue;
		}
		if (pending_sys != NULL && role != ROLE_USER) {
			/* Nothing to merge into: the system text speaks as the user. */
			render_msg(&s, f, ROLE_USER, pending_sys, NULL, &tx);
			pending_sys = NULL;
		}
		render_msg(&s, f, role, &msgs[i], pending_sys, &tx);
		pending_sys = NULL;
	}
	if (pending_sys != NULL)
		render_msg(&s, f, ROLE_USER, pending_sys, NULL, &tx);
	if (add_generation_prompt)
		sink_put_table(&s, f->gen, &tx);
	if (cap > 0)
		buf[s.len < cap ? s.len : cap - 1] = '\0';
	return (int64_t)s.len;
}

size_t chat_template_stops(enum chat_template t, const char *eos_text, const char **out, size_t cap)
{
	size_t k = 0;

	if ((int)t < 0 || t >= CHAT_TEMPLATE_COUNT)
		return 0;
	if (t == CHAT_TEMPLATE_AUTO)
		t = CHAT_TEMPLATE_FALLBACK;
	for (size_t i = 0; i < CHAT_STOPS_MAX && families[t].stops[i] != NULL; i++) {
		const char *stop = families[t].stops[i];

		if (strcmp(stop, "{eos}") == 0) {
			if (eos_text == NULL || *eos_text == '\0')
				continue;
			stop = eos_text;
		}
		if (out != NULL && k < cap)
			out[k] = stop;
		k++;
	}
	return k;
}

/* The text of token `id` into out (empty when none or too long). */
static void chat_token_text(const struct tokenizer *t, int32_t id, char *out, size_t size)
{
	size_t len = 0;
	const char *txt = id >= 0 ? tokenizer_token_text(t, id, &len) : NULL;

	if (txt == NULL || len >= size)
		len = 0;
	memcpy(out, txt ? txt : "", len);
	out[len] = '\0';
}

void chat_style_init(struct chat_style *s, enum chat_template choice, const struct gguf *g,
		     const struct tokenizer *t)
{
	struct gguf_str jinja = {0, NULL};
	int32_t ids[2];

	memset(s, 0, sizeof(*s));
	if (gguf_get_str(g, "tokenizer.chat_template", &jinja) != 0)
		memset(&jinja, 0, sizeof(jinja));
	s->family = chat_template_select(choice, jinja.ptr, (size_t)jinja.len);
	chat_token_text(t, tokenizer_bos(t), s->bos_text, sizeof(s->bos_text));
	chat_token_text(t, tokenizer_eos(t), s->eos_text, sizeof(s->eos_text));
	s->n_stops = chat_template_stops(s->family, s->eos_text[0] ? s->eos_text : NULL, s->stops,
					 CHAT_STOPS_MAX);
	/* Does encoding add BOS by itself? Then a template's own leading
	 * bos_token would make two. */
	s->strip_bos = tokenizer_bos(t) >= 0 && tokenizer_encode(t, "", 0, 1, 0, ids, 2) >= 1 &&
		       ids[0] == tokenizer_bos(t);
	if (choice == CHAT_TEMPLATE_AUTO && jinja.ptr != NULL && jinja.len > 0)
		chat_style_load_jinja(s, jinja.ptr, (size_t)jinja.len);
}

int chat_style_render(const struct chat_style *s, const struct chat_msg *msgs, size_t n,
		      char **out, size_t *len, char *err)
{
	return chat_render(s, msgs, n, NULL, 1, out, len, err);
}

/* The family table's rendering for chat_render(). */
int chat_style_render_table(const struct chat_style *s, const struct chat_msg *msgs, size_t n,
			    int add_generation_prompt, char **out, size_t *len, char *err)
{
	int64_t need = chat_apply(s->family, msgs, n, s->bos_text, s->eos_text, add_generation_prompt, NULL, 0,
				  err);
	char *buf;

	*out = NULL;
	if (need < 0)
		return (int)need;
	buf = malloc((size_t)need + 1);
	if (buf == NULL)
		return ember_seterr(err, EMBER_ENOMEM, "chat: out of memory for the prompt");
	chat_apply(s->family, msgs, n, s->bos_text, s->eos_text, add_generation_prompt, buf, (size_t)need + 1, err);
	*out = buf;
	*len = (size_t)need;
	return 0;
}
