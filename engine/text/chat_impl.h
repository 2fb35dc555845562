/*
 * chat_impl.h - what chat.c (the family table) and chat_jinja.c (models'
 * own Jinja templates) share. Not a public API: see chat.h.
 */
#ifndef EMBER_CHAT_IMPL_H
#define EMBER_CHAT_IMPL_H

#include "chat.h"

/* Parses `src` as s's template; on failure leaves s->jinja NULL and writes
 * the one load warning to s->warning. */
void chat_style_load_jinja(struct chat_style *s, const char *src, size_t len);

/* Renders with the family table into a malloc'd *out (chat_render's
 * contract, without tools). */
int chat_style_render_table(const struct chat_style *s, const struct chat_msg *msgs, size_t n,
			    int add_generation_prompt, char **out, size_t *len, char *err);

#endif
