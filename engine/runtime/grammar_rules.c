/*
 * grammar_rules.c - the GBNF compiler's last steps: checking the rules
 * (every reference defined, no left recursion, which would loop the
 * matcher's stack expansion) and flattening them into struct grammar
 * (grammar_impl.h); and the compiled grammar's release.
 */
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "grammar_build.h"

/* ---- checks and flattening ---------------------------------------------------- */

/* Left recursion: a rule reaching itself before consuming a character
 * (through nullable prefixes). Colour DFS over "may start with" edges. */
static int left_rec_visit(struct builder *b, uint32_t ri, uint8_t *colour, const uint8_t *nullable)
{
	struct brule *r = &b->r[ri];
	uint32_t a, i;

	colour[ri] = 1;
	for (a = 0; a < r->n_alt; a++) {
		for (i = 0; i < r->alt[a].n; i++) {
			const struct gelem *e = &r->alt[a].e[i];

			if (e->type != GE_REF)
				break;
			if (colour[e->val] == 1) {
				const char *nm = b->r[e->val].name;

				return ember_seterr(b->err, EMBER_EINVAL, "grammar: rule %s is left-recursive",
						    nm ? nm : "(a group)");
			}
			if (colour[e->val] == 0 && left_rec_visit(b, e->val, colour, nullable) != 0)
				return EMBER_EINVAL;
			if (!nullable[e->val])
				break;
		}
	}
	colour[ri] = 2;
	return 0;
}

int gbnf_check_rules(struct builder *b)
{
	uint8_t *nullable = calloc(b->n_r + 1, 1), *colour = calloc(b->n_r + 1, 1);
	uint32_t ri, a, i;
	int changed = 1, rc = 0;

	if (nullable == NULL || colour == NULL) {
		rc = gbnf_nomem(b);
		goto out;
	}
	for (ri = 0; ri < b->n_r; ri++) {
		if (!b->r[ri].defined) {
			rc = ember_seterr(b->err, EMBER_EINVAL, "grammar: rule %s is used but not defined",
					  b->r[ri].name);
			goto out;
		}
	}
	while (changed) {
		changed = 0;
		for (ri = 0; ri < b->n_r; ri++) {
			for (a = 0; !nullable[ri] && a < b->r[ri].n_alt; a++) {
				for (i = 0; i < b->r[ri].alt[a].n; i++) {
					const struct gelem *e = &b->r[ri].alt[a].e[i];

					if (e->type != GE_REF || !nullable[e->val])
						break;
				}
				if (i == b->r[ri].alt[a].n)
					nullable[ri] = changed = 1;
			}
		}
	}
	for (ri = 0; ri < b->n_r && rc == 0; ri++)
		if (colour[ri] == 0)
			rc = left_rec_visit(b, ri, colour, nullable);
out:
	free(nullable);
	free(colour);
	return rc;
}

int gbnf_flatten(struct builder *b, struct grammar *g)
{
	uint32_t ri, a, n_el = 0, n_alts = 0, pos = 0, k = 0;

	for (ri = 0; ri < b->n_r; ri++) {
		n_alts += b->r[ri].n_alt;
		for (a = 0; a < b->r[ri].n_alt; a++)
			n_el += b->r[ri].alt[a].n + 1;
	}
	/* Never NULL, even without ranges or classes: the matcher indexes
	 * into them. */
	if (b->ranges == NULL && (b->ranges = calloc(2, sizeof(*b->ranges))) == NULL)
		return gbnf_nomem(b);
	if (b->cls == NULL && (b->cls = calloc(1, sizeof(*b->cls))) == NULL)
		return gbnf_nomem(b);
	g->el = malloc((size_t)(n_el + 1) * sizeof(*g->el));
	g->alts = malloc((size_t)(n_alts + 1) * sizeof(*g->alts));
	g->rule = malloc((size_t)(b->n_r + 1) * sizeof(*g->rule));
	if (!g->el || !g->alts || !g->rule)
		return gbnf_nomem(b);
	for (ri = 0; ri < b->n_r; ri++) {
		g->rule[ri].first_alt = k;
		g->rule[ri].n_alt = b->r[ri].n_alt;
		for (a = 0; a < b->r[ri].n_alt; a++) {
			const struct bseq *s = &b->r[ri].alt[a];

			g->alts[k++] = pos;
			if (s->n > 0) /* an empty alternative has no array */
				memcpy(g->el + pos, s->e, (size_t)s->n * sizeof(*s->e));
			pos += s->n;
			g->el[pos].type = GE_END;
			g->el[pos++].val = 0;
		}
	}
	g->n_el = n_el;
	g->n_alts = n_alts;
	g->n_rule = b->n_r;
	g->ranges = b->ranges;
	g->n_ranges = b->n_ranges;
	g->cls = b->cls;
	g->n_cls = b->n_cls;
	b->ranges = NULL;
	b->cls = NULL;
	return 0;
}

void gbnf_builder_free(struct builder *b)
{
	uint32_t i, a;

	for (i = 0; i < b->n_r; i++) {
		for (a = 0; a < b->r[i].n_alt; a++)
			free(b->r[i].alt[a].e);
		free(b->r[i].alt);
		free(b->r[i].name);
	}
	free(b->r);
	free(b->names);
	free(b->ranges);
	free(b->cls);
}

void grammar_free(struct grammar *g)
{
	if (g == NULL)
		return;
	free(g->el);
	free(g->alts);
	free(g->rule);
	free(g->ranges);
	free(g->cls);
	free(g);
}

uint32_t grammar_n_rules(const struct grammar *g)
{
	return g->n_rule;
}
