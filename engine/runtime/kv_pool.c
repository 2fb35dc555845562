/* kv_pool.c - a worker's KV caches, prefix reuse and LRU eviction (kv_pool.h). */
#include "kv_pool.h"

#include <stdlib.h>
#include <string.h>

#include "ember.h"

int kv_pool_init(struct kv_pool *p, const struct model *m, uint32_t n_ctx, uint32_t type,
		 size_t budget, char *err)
{
	memset(p, 0, sizeof(*p));
	p->m = m;
	p->n_ctx = n_ctx;
	p->type = type;
	p->entry_bytes = compute_kv_bytes(m, n_ctx, type);
	p->budget = budget;
	if (p->entry_bytes == 0 || budget / p->entry_bytes == 0)
		return ember_seterr(err, EMBER_EINVAL, "kv cache budget of %zu bytes is below one "
				    "context of %u positions (%zu bytes)", budget, n_ctx,
				    p->entry_bytes);
	p->n_max = budget / p->entry_bytes > UINT32_MAX ? UINT32_MAX
							: (uint32_t)(budget / p->entry_bytes);
	/* Entries are only bookkeeping until allocated; cap the table itself. */
	if (p->n_max > 4096)
		p->n_max = 4096;
	p->e = calloc(p->n_max, sizeof(*p->e));
	if (!p->e)
		return ember_seterr(err, EMBER_ENOMEM, "kv pool: %u entries", p->n_max);
	return 0;
}

int kv_pool_set_ring(struct kv_pool *p, uint32_t max_step, char *err)
{
	size_t bytes = compute_kv_ring_bytes(p->m, p->n_ctx, p->type, max_step);
	uint64_t n = bytes ? p->budget / bytes : 0;
	struct kv_entry *e;

	if (bytes == 0 || bytes >= p->entry_bytes || p->n_alloc > 0)
		return 0; /* no ring layers, or too late to change the entries */
	p->ring_step = max_step;
	p->entry_bytes = bytes;
	if (n > 4096)
		n = 4096;
	if (n <= p->n_max)
		return 0;
	e = calloc((size_t)n, sizeof(*e));
	if (!e)
		return ember_seterr(err, EMBER_ENOMEM, "kv pool: %llu entries", (unsigned long long)n);
	free(p->e);
	p->e = e;
	p->n_max = (uint32_t)n;
	return 0;
}

static void entry_drop(struct kv_pool *p, struct kv_entry *en)
{
	if (en->owner)
		*en->owner = NULL;
	en->owner = NULL;
	compute_kv_free(en->kv);
	en->kv = NULL;
	free(en->tokens);
	en->tokens = NULL;
	if (en->allocated)
		p->n_alloc--;
	en->allocated = false;
}

void kv_pool_free(struct kv_pool *p)
{
	uint32_t i;

	if (!p || !p->e)
		return;
	for (i = 0; i < p->n_max; i++)
		entry_drop(p, &p->e[i]);
	free(p->e);
	memset(p, 0, sizeof(*p));
}

static uint32_t common_prefix(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
	uint32_t i, n = na < nb ? na : nb;

	for (i = 0; i < n && a[i] == b[i]; i++)
		;
	return i;
}

/* A fresh entry: an unallocated one while the budget allows, else the
 * least recently used idle one (anonymous first), never `keep`. */
static struct kv_entry *entry_fresh(struct kv_pool *p, const struct kv_entry *keep, char *err,
				    int *rc)
{
	struct kv_entry *lru = NULL;
	uint32_t i;
	int pass;

	*rc = 0;
	for (i = 0; i < p->n_max; i++) {
		struct kv_entry *en = &p->e[i];

		if (en->allocated)
			continue;
		if ((*rc = compute_kv_new(&en->kv, p->m, p->n_ctx, p->type, p->ring_step, err)) < 0)
			return NULL;
		en->tokens = malloc((size_t)p->n_ctx * sizeof(*en->tokens));
		if (!en->tokens) {
			compute_kv_free(en->kv);
			en->kv = NULL;
			*rc = ember_seterr(err, EMBER_ENOMEM, "kv pool: token list");
			return NULL;
		}
		en->allocated = true;
		p->n_alloc++;
		return en;
	}
	for (pass = 0; pass < 2 && !lru; pass++)
		for (i = 0; i < p->n_max; i++) {
			struct kv_entry *en = &p->e[i];

			if (!en->allocated || en->busy || en == keep || (pass == 0) != !en->owner)
				continue;
			if (!lru || en->last_used < lru->last_used)
				lru = en;
		}
	if (!lru) {
		*rc = EMBER_EBUSY;
		return NULL;
	}
	if (lru->owner)
		*lru->owner = NULL;
	lru->owner = NULL;
	compute_kv_truncate(lru->kv, 0);
	return lru;
}

static void take(struct kv_entry *en, uint32_t n_pos)
{
	if (en->owner)
		*en->owner = NULL;
	en->owner = NULL;
	en->busy = true;
	compute_kv_truncate(en->kv, n_pos);
}

int kv_pool_acquire(struct kv_pool *p, const int32_t *tokens, uint32_t n, struct kv_claim *c,
		    char *err)
{
	struct kv_entry *best = NULL, *fresh;
	uint32_t best_len = 0, i;
	int rc;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < p->n_max; i++) {
		struct kv_entry *en = &p->e[i];
		uint32_t len;

		if (!en->allocated || en->busy)
			continue;
		len = common_prefix(en->tokens, compute_kv_n_pos(en->kv), tokens, n - 1);
		if (!compute_kv_holds(en->kv, len))
			len = 0; /* a ring that no longer has the window before it */
		/* Ties go to the least recently used, which eviction would pick. */
		if (len > best_len || (len == best_len && best && len > 0 &&
				       en->last_used < best->last_used)) {
			best = en;
			best_len = len;
		}
	}
	/* Taking over an anonymous cache loses nothing when the match covers
	 * all it holds, or when there is no room to keep it beside a copy. */
	if (best && best_len > 0 && !best->owner &&
	    (best_len == compute_kv_n_pos(best->kv) || p->n_alloc == p->n_max)) {
		take(best, best_len);
		c->entry = best;
		c->n_reuse = best_len;
		return 0;
	}
	fresh = entry_fresh(p, best_len > 0 ? best : NULL, err, &rc);
	if (!fresh && rc == EMBER_EBUSY && best && best_len > 0) {
		/* No room for a copy: the cache moves to this sequence. */
		take(best, best_len);
		c->entry = best;
		c->n_reuse = best_len;
		return 0;
	}
	if (!fresh)
		return rc;
	take(fresh, 0);
	c->entry = fresh;
	if (best && best_len > 0) {
		c->copy_from = best;
		c->n_reuse = best_len;
	}
	return 0;
}

void kv_pool_take(struct kv_entry *en)
{
	take(en, compute_kv_n_pos(en->kv));
}

void kv_pool_copy(struct kv_claim *c)
{
	if (!c->copy_from)
		return;
	compute_kv_copy_prefix(c->entry->kv, c->copy_from->kv, c->n_reuse);
	memcpy(c->entry->tokens, c->copy_from->tokens, (size_t)c->n_reuse * sizeof(int32_t));
	c->copy_from = NULL;
}

void kv_pool_release(struct kv_pool *p, struct kv_entry *en, struct kv_entry **owner)
{
	en->busy = false;
	en->last_used = ++p->tick;
	en->owner = owner;
	if (owner)
		*owner = en;
}

size_t kv_pool_bytes(const struct kv_pool *p)
{
	return (size_t)p->n_alloc * p->entry_bytes;
}

uint32_t kv_pool_n_idle(const struct kv_pool *p)
{
	uint32_t i, n = 0;

	for (i = 0; i < p->n_max; i++)
		n += p->e[i].allocated && !p->e[i].busy;
	return n;
}
