/*
 * jinja_impl.h - the Jinja interpreter's internals, shared by its three
 * files: jinja_parse.c (lexer and parser: template text to a tree),
 * jinja_value.c (the arena, values, JSON in and out) and jinja_eval.c (the
 * tree walk, filters, tests and methods). Not a public API: see jinja.h.
 *
 * Memory: everything a template or a render allocates comes from one arena
 * (a list of chunks freed together), so a node or a value never has an owner
 * of its own. A render's arena has a byte limit: that bounds what an
 * untrusted template can build (output, lists, strings) no matter how it
 * loops.
 */
#ifndef EMBER_JINJA_IMPL_H
#define EMBER_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---- arena ---- */

struct jarena_chunk;
struct jarena {
	struct jarena_chunk *head;
	size_t used;  /* bytes handed out, all chunks */
	size_t limit; /* 0: none */
};

/* NULL when out of memory or over the limit. Memory is zeroed. */
void *jarena_alloc(struct jarena *a, size_t n);
void jarena_free(struct jarena *a);

/* ---- the tree ---- */

enum jnode_kind {
	/* expressions */
	JN_STR, JN_INT, JN_FLOAT, JN_BOOL, JN_NONE, JN_NAME, JN_LIST, JN_DICT, JN_PAIR, JN_KWARG,
	JN_ATTR, JN_INDEX, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST, JN_UNARY, JN_BINARY, JN_COND,
	/* statements */
	JS_TEXT, JS_OUTPUT, JS_IF, JS_FOR, JS_SET, JS_SETBLOCK, JS_MACRO, JS_BREAK, JS_CONTINUE,
	JS_FILTERBLOCK,
};

/* Binary and unary operators. */
enum jop {
	JOP_NONE, JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CAT,
	JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_AND, JOP_OR, JOP_IN, JOP_NOTIN,
	JOP_NOT, JOP_NEG, JOP_POS,
};

/*
 * One node. Children by kind:
 *   STR/NAME/ATTR/KWARG/FILTER/TEST/TEXT/MACRO: s,n is the text or name
 *   ATTR a.s; INDEX a[b]; SLICE a[b:c:d] (b, c, d may be NULL)
 *   CALL a(list); FILTER a|s(list); TEST a is [not] s(list) (neg)
 *   LIST/DICT: list (DICT: PAIR nodes, a: b); KWARG s=a
 *   UNARY op a; BINARY a op b; COND: a if b else c (c may be NULL)
 *   OUTPUT a; IF a: body=b, else=c; FOR list (targets) in a: body b, else c,
 *   filter d; SET list (a NAME or an ATTR target) = a; SETBLOCK list: body b
 *   (filters d); MACRO s(list: NAME or KWARG params with defaults): body b;
 *   FILTERBLOCK d (a FILTER chain whose innermost a is NULL): body b
 * Statement lists and argument lists are chained through `next`.
 */
struct jnode {
	uint8_t kind, op, neg;
	const char *s;
	size_t n;
	int64_t i;
	double f;
	struct jnode *a, *b, *c, *d, *list, *next;
	int line;
};

/* ---- lexer and parser (jinja_lex.c, jinja_parse.c) ---- */

enum jtok {
	TK_END, TK_TEXT, TK_COMMENT, TK_OSTMT, TK_CSTMT, TK_OEXPR, TK_CEXPR,
	TK_NAME, TK_STR, TK_INT, TK_FLOAT, TK_OP,
};

struct tok {
	uint8_t type;
	const char *s; /* TEXT, NAME, STR: the text; OP: the operator */
	size_t n;
	int64_t i;
	double f;
	int line;
};

struct parser {
	struct jarena *ar;
	struct tok *t;
	size_t nt, cap, pos;
	int depth;
	char *err;
	int failed;
};

/* Records "line N: <fmt with %.*s of arg, n>" in p->err (first error only)
 * and marks the parse failed. Returns EMBER_EFORMAT. */
int jparse_fail(struct parser *p, int line, const char *fmt, const char *arg, size_t n);
/* The template text after Hugging Face's whitespace rules, in p's arena. */
char *jlex_preprocess(struct jarena *ar, const char *src, size_t len, size_t *out_len);
/* Tokens of `s` into p->t, ending with TK_END. 0 or a negative error. */
int jlex_run(struct parser *p, const char *s, size_t len);

/* Parses `src` into a statement list in `ar`. Returns the list head (NULL
 * for an empty template) and 0, or EMBER_EFORMAT with "line N: ..." in err. */
int jinja_parse_tree(struct jarena *ar, const char *src, size_t len, struct jnode **out, char *err);

/* ---- values ---- */

enum jtype { JT_UNDEF, JT_NONE, JT_BOOL, JT_INT, JT_FLOAT, JT_STR, JT_LIST, JT_DICT, JT_FUNC, JT_MACRO };

struct jlist;
struct jdict;

struct jval {
	uint8_t t;
	union {
		int64_t i;
		double f;
		struct {
			const char *p;
			size_t n;
		} s;
		struct jlist *l;
		struct jdict *d;
		const struct jnode *m; /* JT_MACRO */
		int fn;                /* JT_FUNC: a builtin's id */
	} u;
};

struct jlist {
	struct jval *v;
	size_t n, cap;
};

struct jdict {
	const char **kp; /* keys: strings, not NUL-terminated */
	size_t *kn;
	struct jval *v;
	size_t n, cap;
	int is_ns; /* a namespace(): `set ns.x = ...` may write it */
};

/* A growing byte string in an arena (the output, joins, JSON text). */
struct jbuf {
	struct jarena *ar;
	char *p;
	size_t n, cap;
	int oom;
	int deep; /* jv_to_json met nesting past JINJA_DEPTH_MAX (a cycle); oom set too */
};

void jbuf_put(struct jbuf *b, const char *s, size_t n);
void jbuf_putc(struct jbuf *b, char c);

struct jlist *jlist_new(struct jarena *ar, size_t cap);
int jlist_push(struct jarena *ar, struct jlist *l, struct jval v);
struct jdict *jdict_new(struct jarena *ar);
/* The value under key, or NULL. */
struct jval *jdict_get(const struct jdict *d, const char *k, size_t kn);
int jdict_set(struct jarena *ar, struct jdict *d, const char *k, size_t kn, struct jval v);

struct jval jv_str(const char *p, size_t n);
struct jval jv_int(int64_t i);
struct jval jv_bool(int b);
int jv_truthy(struct jval v);
int jv_equal(struct jval a, struct jval b);

/* Parses JSON text into a value. 0, or EMBER_EFORMAT / EMBER_ENOMEM. */
int jv_from_json(struct jarena *ar, const char *s, size_t n, struct jval *out, char *err);

/* Writes v as JSON the way the reference renderer's tojson does: ", " and
 * ": " separators, or with indent > 0 one item per line; non-ASCII kept. */
void jv_to_json(struct jbuf *b, struct jval v, int indent, int depth);

/* Writes v as {{ v }} shows it ("" for none and undefined). */
void jv_to_text(struct jbuf *b, struct jval v);

/* ---- evaluation (jinja_eval.c, jinja_builtins.c) ---- */

/* Frames of C recursion a render may use (expressions, blocks, macro calls):
 * bounds the stack a hostile template can take. */
#define JINJA_RENDER_DEPTH_MAX 1000

struct jscope {
	struct jdict *vars;
	struct jscope *parent;
};

/* Arguments of a call: positional values, then keyword ones. */
struct jargs {
	struct jval *pos;
	size_t npos;
	struct jdict *kw; /* NULL when none */
};

/* One render. Errors unwind with longjmp to jinja_render: every byte the
 * render took lives in the arena, so nothing between leaks, and the tree
 * walk stays free of error plumbing on every line. */
struct jctx {
	struct jarena ar;
	struct jscope *root; /* the context's variables and the builtins */
	size_t steps;
	int depth;
	int rc;
	char *err;
	jmp_buf fail;
};

_Noreturn void jfail(struct jctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fails the render for a buffer whose writes stopped (b->oom): too deep a
 * value (a list or namespace holding itself) or the memory limit. */
_Noreturn void jbuf_fail(struct jctx *c, const struct jbuf *b);
/* Arena allocation that fails the render when out of memory. */
void *jalloc(struct jctx *c, size_t n);
/* Copies of s into the arena. */
struct jval jv_strdup(struct jctx *c, const char *s, size_t n);
/* v as text ({{ v }}), in the arena. */
struct jval jv_stringify(struct jctx *c, struct jval v);
const char *jv_type_name(struct jval v);

struct jval jeval(struct jctx *c, struct jscope *s, const struct jnode *n);
/* Calls a macro or builtin function value. */
struct jval jcall_value(struct jctx *c, struct jval fn, struct jargs *a);

/* Builtins (jinja_builtins.c). Each fails the render on bad arguments. */
struct jval jfilter_apply(struct jctx *c, struct jscope *s, const char *name, size_t n, struct jval v,
			  struct jargs *a);
int jtest_apply(struct jctx *c, const char *name, size_t n, struct jval v, struct jargs *a);
/* A method of a string, list or dict (`s.strip()`); *found = 0 if none. */
struct jval jmethod_call(struct jctx *c, struct jval obj, const char *name, size_t n, struct jargs *a,
			 int *found);
/* The global functions: namespace, range, raise_exception, strftime_now, dict. */
enum { JFN_NAMESPACE, JFN_RANGE, JFN_RAISE, JFN_STRFTIME, JFN_DICT, JFN_COUNT };
extern const char *const jfn_names[JFN_COUNT];
struct jval jfn_call(struct jctx *c, int fn, struct jargs *a);

#endif
