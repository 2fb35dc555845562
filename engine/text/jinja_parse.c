/*
 * jinja_parse.c - Jinja tokens (jinja_lex.c) to a tree (jinja_impl.h).
 *
 * A recursive-descent parser whose precedence follows Jinja's own (filters and
 * `is` tests bind tighter than arithmetic: `x|length - 1` is `(x|length) - 1`).
 * Recursion is bounded by JINJA_DEPTH_MAX so a hostile template cannot
 * exhaust the stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "jinja_impl.h"

/* ---- parser helpers ---- */

static struct tok *pk(struct parser *p)
{
	return &p->t[p->pos];
}

static int is_op(struct parser *p, const char *op)
{
	struct tok *t = pk(p);
	return t->type == TK_OP && strcmp(t->s, op) == 0;
}

static int is_word(struct parser *p, const char *w)
{
	struct tok *t = pk(p);
	return t->type == TK_NAME && t->n == strlen(w) && memcmp(t->s, w, t->n) == 0;
}

static int accept_op(struct parser *p, const char *op)
{
	if (!is_op(p, op))
		return 0;
	p->pos++;
	return 1;
}

static int accept_word(struct parser *p, const char *w)
{
	if (!is_word(p, w))
		return 0;
	p->pos++;
	return 1;
}

static int expect_op(struct parser *p, const char *op)
{
	if (accept_op(p, op))
		return 0;
	return jparse_fail(p, pk(p)->line, "expected '%.*s'", op, strlen(op));
}

static struct jnode *mk(struct parser *p, int kind)
{
	struct jnode *n = jarena_alloc(p->ar, sizeof(*n));
	if (!n) {
		if (!p->failed && p->err)
			snprintf(p->err, EMBER_ERR_MAX, "template too large");
		p->failed = 1;
		return NULL;
	}
	n->kind = (uint8_t)kind;
	n->line = pk(p)->line;
	return n;
}

/* ---- expressions ---- */

static struct jnode *p_expr(struct parser *p, int no_cond);

/* Comma-separated arguments up to `close`; name=value become KWARG nodes. */
static struct jnode *p_args(struct parser *p, const char *close)
{
	struct jnode *head = NULL, **tail = &head;

	while (!p->failed && !accept_op(p, close)) {
		struct jnode *a;
		if (pk(p)->type == TK_NAME && p->pos + 1 < p->nt && p->t[p->pos + 1].type == TK_OP &&
		    strcmp(p->t[p->pos + 1].s, "=") == 0) {
			if (!(a = mk(p, JN_KWARG)))
				return NULL;
			a->s = pk(p)->s;
			a->n = pk(p)->n;
			p->pos += 2;
			if (!(a->a = p_expr(p, 0)))
				return NULL;
		} else if (!(a = p_expr(p, 0))) {
			return NULL;
		}
		*tail = a;
		tail = &a->next;
		if (!accept_op(p, ",") && !is_op(p, close)) {
			expect_op(p, close);
			return NULL;
		}
	}
	return head;
}

static struct jnode *p_primary(struct parser *p)
{
	struct tok *t = pk(p);
	struct jnode *n;

	if (t->type == TK_STR) {
		if (!(n = mk(p, JN_STR)))
			return NULL;
		n->s = t->s;
		n->n = t->n;
		p->pos++;
		/* Adjacent literals concatenate, as in Python. */
		while (pk(p)->type == TK_STR) {
			char *cat = jarena_alloc(p->ar, n->n + pk(p)->n + 1);
			if (!cat) {
				jparse_fail(p, t->line, "template too large%.*s", "", 0);
				return NULL;
			}
			memcpy(cat, n->s, n->n);
			memcpy(cat + n->n, pk(p)->s, pk(p)->n);
			n->s = cat;
			n->n += pk(p)->n;
			p->pos++;
		}
		return n;
	}
	if (t->type == TK_INT || t->type == TK_FLOAT) {
		if (!(n = mk(p, t->type == TK_INT ? JN_INT : JN_FLOAT)))
			return NULL;
		n->i = t->i;
		n->f = t->f;
		p->pos++;
		return n;
	}
	if (t->type == TK_NAME) {
		static const struct {
			const char *w;
			int kind, val;
		} lits[] = {{"true", JN_BOOL, 1}, {"True", JN_BOOL, 1}, {"false", JN_BOOL, 0},
			    {"False", JN_BOOL, 0}, {"none", JN_NONE, 0}, {"None", JN_NONE, 0}};
		for (size_t k = 0; k < sizeof(lits) / sizeof(lits[0]); k++)
			if (is_word(p, lits[k].w)) {
				if (!(n = mk(p, lits[k].kind)))
					return NULL;
				n->i = lits[k].val;
				p->pos++;
				return n;
			}
		if (!(n = mk(p, JN_NAME)))
			return NULL;
		n->s = t->s;
		n->n = t->n;
		p->pos++;
		return n;
	}
	if (accept_op(p, "(")) {
		struct jnode *first = p_expr(p, 0);
		if (!first)
			return NULL;
		if (accept_op(p, ")"))
			return first;
		/* A tuple: evaluated as a list. */
		if (!(n = mk(p, JN_LIST)))
			return NULL;
		n->list = first;
		if (expect_op(p, ",") < 0)
			return NULL;
		first->next = p_args(p, ")");
		return p->failed ? NULL : n;
	}
	if (accept_op(p, "[")) {
		if (!(n = mk(p, JN_LIST)))
			return NULL;
		n->list = p_args(p, "]");
		return p->failed ? NULL : n;
	}
	if (accept_op(p, "{")) {
		struct jnode **tail;
		if (!(n = mk(p, JN_DICT)))
			return NULL;
		tail = &n->list;
		while (!accept_op(p, "}")) {
			struct jnode *pair = mk(p, JN_PAIR);
			if (!pair || !(pair->a = p_expr(p, 0)) || expect_op(p, ":") < 0 || !(pair->b = p_expr(p, 0)))
				return NULL;
			*tail = pair;
			tail = &pair->next;
			if (!accept_op(p, ",") && !is_op(p, "}")) {
				expect_op(p, "}");
				return NULL;
			}
		}
		return n;
	}
	jparse_fail(p, t->line, "unexpected %.*s", t->type == TK_OP ? t->s : "token", t->type == TK_OP ? t->n : 5);
	return NULL;
}

/* `[` already taken: an index or a slice. */
static struct jnode *p_subscript(struct parser *p, struct jnode *obj)
{
	struct jnode *idx = NULL, *n;

	if (!is_op(p, ":") && !(idx = p_expr(p, 0)))
		return NULL;
	if (accept_op(p, "]")) {
		if (!(n = mk(p, JN_INDEX)))
			return NULL;
		n->a = obj;
		n->b = idx;
		return n;
	}
	if (!(n = mk(p, JN_SLICE)))
		return NULL;
	n->a = obj;
	n->b = idx;
	if (expect_op(p, ":") < 0)
		return NULL;
	if (!is_op(p, ":") && !is_op(p, "]") && !(n->c = p_expr(p, 0)))
		return NULL;
	if (accept_op(p, ":") && !is_op(p, "]") && !(n->d = p_expr(p, 0)))
		return NULL;
	return expect_op(p, "]") < 0 ? NULL : n;
}

static struct jnode *p_postfix(struct parser *p, struct jnode *n)
{
	while (n && !p->failed) {
		struct jnode *m;
		if (accept_op(p, ".")) {
			if (pk(p)->type != TK_NAME && pk(p)->type != TK_INT) {
				jparse_fail(p, pk(p)->line, "expected a name after '.'%.*s", "", 0);
				return NULL;
			}
			if (!(m = mk(p, pk(p)->type == TK_NAME ? JN_ATTR : JN_INDEX)))
				return NULL;
			m->a = n;
			if (pk(p)->type == TK_NAME) {
				m->s = pk(p)->s;
				m->n = pk(p)->n;
			} else if ((m->b = mk(p, JN_INT))) {
				m->b->i = pk(p)->i;
			}
			p->pos++;
			n = m;
		} else if (accept_op(p, "[")) {
			n = p_subscript(p, n);
		} else if (accept_op(p, "(")) {
			if (!(m = mk(p, JN_CALL)))
				return NULL;
			m->a = n;
			m->list = p_args(p, ")");
			n = p->failed ? NULL : m;
		} else {
			break;
		}
	}
	return n;
}

static int starts_operand(struct parser *p)
{
	static const char *const kw[] = {"and", "or", "if", "else", "is", "in", "not", NULL};
	struct tok *t = pk(p);
	if (t->type == TK_STR || t->type == TK_INT || t->type == TK_FLOAT)
		return 1;
	if (t->type != TK_NAME)
		return 0;
	for (size_t k = 0; kw[k]; k++)
		if (is_word(p, kw[k]))
			return 0;
	return 1;
}

/* Filters (`|name(args)`) and tests (`is [not] name args`) after a value. */
static struct jnode *p_filters(struct parser *p, struct jnode *n)
{
	while (n && !p->failed) {
		int is_filter = is_op(p, "|");
		if (!is_filter && !is_word(p, "is"))
			break;
		p->pos++;
		struct jnode *m = mk(p, is_filter ? JN_FILTER : JN_TEST);
		if (!m)
			return NULL;
		if (!is_filter)
			m->neg = (uint8_t)accept_word(p, "not");
		if (pk(p)->type != TK_NAME) {
			jparse_fail(p, pk(p)->line, "expected a filter or test name%.*s", "", 0);
			return NULL;
		}
		m->a = n;
		m->s = pk(p)->s;
		m->n = pk(p)->n;
		p->pos++;
		if (accept_op(p, "(")) {
			m->list = p_args(p, ")");
		} else if (!is_filter && starts_operand(p)) {
			/* `x is equalto 'y'`: one argument without parentheses. */
			m->list = p_postfix(p, p_primary(p));
		}
		n = p->failed ? NULL : m;
	}
	return n;
}

static struct jnode *p_unary(struct parser *p)
{
	if (is_op(p, "-") || is_op(p, "+")) {
		struct jnode *n = mk(p, JN_UNARY);
		if (!n)
			return NULL;
		n->op = is_op(p, "-") ? JOP_NEG : JOP_POS;
		p->pos++;
		if (++p->depth > JINJA_DEPTH_MAX) {
			jparse_fail(p, pk(p)->line, "expression nested too deeply%.*s", "", 0);
			return NULL;
		}
		n->a = p_unary(p);
		p->depth--;
		return n->a ? n : NULL;
	}
	return p_filters(p, p_postfix(p, p_primary(p)));
}

/* Binary levels, loosest first (Jinja's order). */
static const struct {
	const char *ops[7];
	uint8_t codes[7];
} levels[] = {
	{{"==", "!=", "<", "<=", ">", ">=", NULL}, {JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE}},
	{{"+", "-", NULL}, {JOP_ADD, JOP_SUB}},
	{{"~", NULL}, {JOP_CAT}},
	{{"*", "/", "//", "%", NULL}, {JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD}},
	{{"**", NULL}, {JOP_POW}},
};
#define N_LEVELS (sizeof(levels) / sizeof(levels[0]))

static struct jnode *p_binary(struct parser *p, size_t level)
{
	if (level == N_LEVELS)
		return p_unary(p);
	struct jnode *left = p_binary(p, level + 1);
	while (left && !p->failed) {
		int op = 0;
		if (level == 0 && (is_word(p, "in") || (is_word(p, "not") && p->pos + 1 < p->nt &&
							 p->t[p->pos + 1].type == TK_NAME && p->t[p->pos + 1].n == 2 &&
							 memcmp(p->t[p->pos + 1].s, "in", 2) == 0))) {
			op = is_word(p, "in") ? JOP_IN : JOP_NOTIN;
			p->pos += op == JOP_IN ? 1 : 2;
		} else {
			for (size_t k = 0; levels[level].ops[k]; k++)
				if (is_op(p, levels[level].ops[k])) {
					op = levels[level].codes[k];
					p->pos++;
					break;
				}
		}
		if (!op)
			break;
		struct jnode *n = mk(p, JN_BINARY);
		if (!n)
			return NULL;
		n->op = (uint8_t)op;
		n->a = left;
		if (!(n->b = p_binary(p, level + 1)))
			return NULL;
		left = n;
	}
	return left;
}

static struct jnode *p_not(struct parser *p)
{
	if (is_word(p, "not")) {
		struct jnode *n = mk(p, JN_UNARY);
		if (!n)
			return NULL;
		n->op = JOP_NOT;
		p->pos++;
		if (++p->depth > JINJA_DEPTH_MAX) {
			jparse_fail(p, pk(p)->line, "expression nested too deeply%.*s", "", 0);
			return NULL;
		}
		n->a = p_not(p);
		p->depth--;
		return n->a ? n : NULL;
	}
	return p_binary(p, 0);
}

static struct jnode *p_logic(struct parser *p, int is_or)
{
	struct jnode *left = is_or ? p_logic(p, 0) : p_not(p);
	while (left && accept_word(p, is_or ? "or" : "and")) {
		struct jnode *n = mk(p, JN_BINARY);
		if (!n)
			return NULL;
		n->op = is_or ? JOP_OR : JOP_AND;
		n->a = left;
		if (!(n->b = is_or ? p_logic(p, 0) : p_not(p)))
			return NULL;
		left = n;
	}
	return left;
}

/* A full expression; `no_cond`: stop before `if` (a for loop's filter). */
static struct jnode *p_expr(struct parser *p, int no_cond)
{
	struct jnode *n;

	if (++p->depth > JINJA_DEPTH_MAX) {
		jparse_fail(p, pk(p)->line, "expression nested too deeply%.*s", "", 0);
		return NULL;
	}
	n = p_logic(p, 1);
	if (n && !no_cond && accept_word(p, "if")) {
		struct jnode *c = mk(p, JN_COND);
		if (!c)
			return NULL;
		c->a = n;
		if (!(c->b = p_logic(p, 1)))
			return NULL;
		if (accept_word(p, "else") && !(c->c = p_expr(p, 0)))
			return NULL;
		n = c;
	}
	p->depth--;
	return n;
}


/* ---- statements ---- */

static int expect_close(struct parser *p)
{
	if (pk(p)->type == TK_CSTMT) {
		p->pos++;
		return 0;
	}
	return jparse_fail(p, pk(p)->line, "expected '%%}'%.*s", "", 0);
}

static struct jnode *p_body(struct parser *p, const char *const *ends, const char **which);

static struct jnode *p_name(struct parser *p, int kind)
{
	struct jnode *n;
	if (pk(p)->type != TK_NAME) {
		jparse_fail(p, pk(p)->line, "expected a name%.*s", "", 0);
		return NULL;
	}
	if (!(n = mk(p, kind)))
		return NULL;
	n->s = pk(p)->s;
	n->n = pk(p)->n;
	p->pos++;
	return n;
}

static struct jnode *p_if(struct parser *p)
{
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	static const char *const endif[] = {"endif", NULL};
	const char *which = NULL;
	struct jnode *n = mk(p, JS_IF);

	if (!n || !(n->a = p_expr(p, 0)) || expect_close(p) < 0)
		return NULL;
	n->b = p_body(p, ends, &which);
	if (p->failed)
		return NULL;
	if (strcmp(which, "elif") == 0) {
		n->c = p_if(p); /* the rest of the chain, ending at the one endif */
		return n->c ? n : NULL;
	}
	if (strcmp(which, "else") == 0) {
		if (expect_close(p) < 0)
			return NULL;
		n->c = p_body(p, endif, &which);
	}
	return p->failed || expect_close(p) < 0 ? NULL : n;
}

static struct jnode *p_for(struct parser *p)
{
	static const char *const ends[] = {"else", "endfor", NULL};
	static const char *const endfor[] = {"endfor", NULL};
	const char *which = NULL;
	struct jnode *n = mk(p, JS_FOR), **tail;

	if (!n)
		return NULL;
	tail = &n->list;
	do {
		if (!(*tail = p_name(p, JN_NAME)))
			return NULL;
		tail = &(*tail)->next;
	} while (accept_op(p, ","));
	if (!accept_word(p, "in")) {
		jparse_fail(p, pk(p)->line, "expected 'in'%.*s", "", 0);
		return NULL;
	}
	if (!(n->a = p_expr(p, 1)))
		return NULL;
	if (accept_word(p, "if") && !(n->d = p_expr(p, 0)))
		return NULL;
	if (expect_close(p) < 0)
		return NULL;
	n->b = p_body(p, ends, &which);
	if (!p->failed && strcmp(which, "else") == 0) {
		if (expect_close(p) < 0)
			return NULL;
		n->c = p_body(p, endfor, &which);
	}
	return p->failed || expect_close(p) < 0 ? NULL : n;
}

static struct jnode *p_set(struct parser *p)
{
	static const char *const ends[] = {"endset", NULL};
	const char *which = NULL;
	struct jnode *n = mk(p, JS_SET), *target = p_name(p, JN_NAME);

	if (!n || !target)
		return NULL;
	if (accept_op(p, ".")) {
		struct jnode *attr = p_name(p, JN_ATTR);
		if (!attr)
			return NULL;
		attr->a = target;
		target = attr;
	} else {
		struct jnode **tail = &target->next;
		while (accept_op(p, ",")) {
			if (!(*tail = p_name(p, JN_NAME)))
				return NULL;
			tail = &(*tail)->next;
		}
	}
	n->list = target;
	if (accept_op(p, "=")) {
		if (!(n->a = p_expr(p, 0)) || expect_close(p) < 0)
			return NULL;
		return n;
	}
	/* {% set x %}...{% endset %}, optionally piped through filters. */
	n->kind = JS_SETBLOCK;
	if (is_op(p, "|") && !(n->d = p_filters(p, mk(p, JN_NONE))))
		return NULL;
	if (expect_close(p) < 0)
		return NULL;
	n->b = p_body(p, ends, &which);
	return p->failed || expect_close(p) < 0 ? NULL : n;
}

static struct jnode *p_macro(struct parser *p)
{
	static const char *const ends[] = {"endmacro", NULL};
	const char *which = NULL;
	struct jnode *n = p_name(p, JS_MACRO);

	if (!n || expect_op(p, "(") < 0)
		return NULL;
	n->list = p_args(p, ")");
	for (struct jnode *a = n->list; a && !p->failed; a = a->next)
		if (a->kind != JN_NAME && a->kind != JN_KWARG)
			jparse_fail(p, a->line, "bad macro parameter%.*s", "", 0);
	if (p->failed || expect_close(p) < 0)
		return NULL;
	n->b = p_body(p, ends, &which);
	return p->failed || expect_close(p) < 0 ? NULL : n;
}

static struct jnode *p_filterblock(struct parser *p)
{
	static const char *const ends[] = {"endfilter", NULL};
	const char *which = NULL;
	struct jnode *n = mk(p, JS_FILTERBLOCK);

	if (!n)
		return NULL;
	p->pos--; /* re-read the name as the first filter of a chain */
	p->t[p->pos] = (struct tok){.type = TK_OP, .s = "|", .n = 1, .line = p->t[p->pos].line};
	if (!(n->d = p_filters(p, mk(p, JN_NONE))) || expect_close(p) < 0)
		return NULL;
	n->b = p_body(p, ends, &which);
	return p->failed || expect_close(p) < 0 ? NULL : n;
}

/* One `{% ... %}` statement, the `{%` and its name already read. */
static struct jnode *p_statement(struct parser *p, const struct tok *name)
{
#define IS(w) (name->n == strlen(w) && memcmp(name->s, w, name->n) == 0)
	struct jnode *n;
	if (IS("if"))
		return p_if(p);
	if (IS("for"))
		return p_for(p);
	if (IS("set"))
		return p_set(p);
	if (IS("macro"))
		return p_macro(p);
	if (IS("filter"))
		return p_filterblock(p); /* it rewinds onto "filter" */
	if (IS("break") || IS("continue")) {
		n = mk(p, IS("break") ? JS_BREAK : JS_CONTINUE);
		return n && expect_close(p) == 0 ? n : NULL;
	}
	if (IS("generation") || IS("endgeneration")) {
		/* Hugging Face's marker for assistant masks: no output. */
		n = mk(p, JS_TEXT);
		return n && expect_close(p) == 0 ? n : NULL;
	}
#undef IS
	jparse_fail(p, name->line, "unknown or unexpected tag '%.*s'", name->s, name->n);
	return NULL;
}

static struct jnode *p_body(struct parser *p, const char *const *ends, const char **which)
{
	struct jnode *head = NULL, **tail = &head, *n;

	if (++p->depth > JINJA_DEPTH_MAX) {
		jparse_fail(p, pk(p)->line, "blocks nested too deeply%.*s", "", 0);
		return NULL;
	}
	while (!p->failed) {
		struct tok *t = pk(p);
		n = NULL;
		if (t->type == TK_END) {
			if (ends)
				jparse_fail(p, t->line, "missing {%% %.*s %%}", ends[0], strlen(ends[0]));
			break;
		}
		p->pos++;
		if (t->type == TK_COMMENT)
			continue;
		if (t->type == TK_TEXT) {
			if ((n = mk(p, JS_TEXT))) {
				n->s = t->s;
				n->n = t->n;
			}
		} else if (t->type == TK_OEXPR) {
			if ((n = mk(p, JS_OUTPUT)) && (n->a = p_expr(p, 0)) && pk(p)->type != TK_CEXPR)
				jparse_fail(p, pk(p)->line, "expected '}}'%.*s", "", 0);
			p->pos++;
		} else if (t->type == TK_OSTMT && pk(p)->type == TK_NAME) {
			struct tok *name = pk(p);
			for (size_t k = 0; ends && ends[k]; k++)
				if (name->n == strlen(ends[k]) && memcmp(name->s, ends[k], name->n) == 0) {
					p->pos++;
					*which = ends[k];
					p->depth--;
					return head;
				}
			p->pos++;
			n = p_statement(p, name);
		} else {
			jparse_fail(p, t->line, "unexpected token%.*s", "", 0);
		}
		if (!n)
			break;
		*tail = n;
		tail = &n->next;
	}
	p->depth--;
	return head;
}

int jinja_parse_tree(struct jarena *ar, const char *src, size_t len, struct jnode **out, char *err)
{
	struct parser p = {.ar = ar, .err = err};
	size_t n;
	const char *s = jlex_preprocess(ar, src, len, &n);
	int rc;

	*out = NULL;
	if (!s) {
		if (err)
			snprintf(err, EMBER_ERR_MAX, "template too large");
		return EMBER_ENOMEM;
	}
	if ((rc = jlex_run(&p, s, n)) < 0) {
		if (rc == EMBER_ENOMEM && err)
			snprintf(err, EMBER_ERR_MAX, "template too large");
		return rc == EMBER_ENOMEM ? rc : EMBER_EFORMAT;
	}
	*out = p_body(&p, NULL, NULL);
	return p.failed ? EMBER_EFORMAT : 0;
}
