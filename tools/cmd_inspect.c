/*
 * cmd_inspect.c - `ember inspect FILE`: the header, every key with its type
 * and value, and a table of tensors with totals. Reads through gguf_open(),
 * so a bad file is reported exactly as the daemon would report it.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ember.h"
#include "gguf.h"

#define INSPECT_MAX_STR 64 /* bytes of a string value shown */
#define INSPECT_MAX_ELEMS 5 /* array elements shown */

/* Prints a map string quoted, escaping control bytes, cut at `max` bytes. */
static void print_str(struct gguf_str s, uint64_t max)
{
	uint64_t i, n = s.len < max ? s.len : max;

	putchar('"');
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s.ptr[i];
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", stdout);
		else if (ch == '\t')
			fputs("\\t", stdout);
		else if (ch < 0x20 || ch == 0x7f)
			printf("\\x%02x", ch);
		else
			putchar(ch);
	}
	putchar('"');
	if (n < s.len)
		printf("... (%llu bytes)", (unsigned long long)s.len);
}

/* Prints element i of an array kv (or a scalar viewed as a 1-element array).
 * Integers are decoded exactly, not through double. */
static void print_elem(const struct gguf_kv *arr, uint64_t i)
{
	size_t size = gguf_vtype_size(arr->arr_type), k;
	const uint8_t *p = (const uint8_t *)arr->data + i * size;
	struct gguf_str s;
	uint64_t u = 0;
	double d;

	switch (arr->arr_type) {
	case GGUF_TYPE_STRING:
		if (gguf_arr_str(arr, i, &s) == 0)
			print_str(s, INSPECT_MAX_STR);
		return;
	case GGUF_TYPE_FLOAT32:
	case GGUF_TYPE_FLOAT64:
		if (gguf_arr_num(arr, i, &d) == 0)
			printf("%.9g", d);
		return;
	case GGUF_TYPE_BOOL:
		fputs(p[0] ? "true" : "false", stdout);
		return;
	case GGUF_TYPE_ARRAY:
		fputs("[...]", stdout);
		return;
	default:
		break;
	}
	for (k = 0; k < size; k++)
		u |= (uint64_t)p[k] << (8 * k);
	if (arr->arr_type == GGUF_TYPE_INT8 || arr->arr_type == GGUF_TYPE_INT16 ||
	    arr->arr_type == GGUF_TYPE_INT32 || arr->arr_type == GGUF_TYPE_INT64) {
		if (size < 8 && (u >> (8 * size - 1)) & 1)
			u |= ~0ull << (8 * size); /* sign-extend */
		printf("%lld", (long long)u);
	} else {
		printf("%llu", (unsigned long long)u);
	}
}

static void print_kv(const struct gguf_kv *kv, int width)
{
	uint64_t zero = 0, i;
	struct gguf_kv one;
	char type[32];

	printf("  %-*.*s  ", width, (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr);
	if (kv->type != GGUF_TYPE_ARRAY) {
		/* A scalar is shown as element 0 of a one-element array view. */
		one = *kv;
		one.type = GGUF_TYPE_ARRAY;
		one.arr_type = kv->type;
		one.arr_n = 1;
		one.str_offsets = &zero;
		printf("%-10s ", gguf_vtype_name(kv->type));
		print_elem(&one, 0);
		putchar('\n');
		return;
	}
	snprintf(type, sizeof(type), "arr[%s]", gguf_vtype_name(kv->arr_type));
	printf("%-10s n=%llu [", type, (unsigned long long)kv->arr_n);
	for (i = 0; i < kv->arr_n && i < INSPECT_MAX_ELEMS; i++) {
		if (i)
			fputs(", ", stdout);
		print_elem(kv, i);
	}
	printf("%s]\n", kv->arr_n > INSPECT_MAX_ELEMS ? ", ..." : "");
}

static void print_tensors(const struct gguf *g)
{
	uint64_t i, params = 0, bytes = 0;
	int width = 4;
	uint32_t d;

	for (i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].name.len > (uint64_t)width)
			width = g->tensors[i].name.len > 64 ? 64 : (int)g->tensors[i].name.len;
	printf("tensors:   %llu\n", (unsigned long long)g->n_tensors);
	printf("  %-*s  %-5s  %-24s %12s %12s\n", width, "name", "type", "shape", "offset", "bytes");
	for (i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		char shape[128];
		int n = 0;
		uint64_t elems = 1;

		for (d = 0; d < t->n_dims; d++) {
			n += snprintf(shape + n, sizeof(shape) - (size_t)n, "%s%llu", d ? ", " : "[",
				      (unsigned long long)t->ne[d]);
			elems *= t->ne[d];
		}
		snprintf(shape + n, sizeof(shape) - (size_t)n, "]");
		printf("  %-*.*s  %-5s  %-24s %12llu %12llu\n", width,
		       (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
		       dtype_name(t->type), shape, (unsigned long long)t->offset,
		       (unsigned long long)t->size);
		params += elems; /* the reader bounded every product */
		bytes += t->size;
	}
	printf("total:     %llu parameters, %llu bytes (%.2f MiB)\n", (unsigned long long)params,
	       (unsigned long long)bytes, (double)bytes / (1024.0 * 1024.0));
}

int cmd_inspect(int argc, char **argv)
{
	char err[EMBER_ERR_MAX] = "";
	struct gguf g;
	uint64_t i;
	int width = 8;

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: ember inspect FILE\n"
		       "Prints a GGUF file's header, keys and tensors.\n");
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: ember inspect FILE\n");
		return 2;
	}
	if (gguf_open(&g, argv[1], err) != 0) {
		fprintf(stderr, "ember inspect: %s: %s\n", argv[1], err);
		return 1;
	}
	printf("file:      %s (%zu bytes)\n", argv[1], g.size);
	printf("version:   %u\n", g.version);
	printf("alignment: %u\n", g.alignment);
	printf("data:      offset %llu\n", (unsigned long long)g.data_offset);
	printf("keys:      %llu\n", (unsigned long long)g.n_kv);
	for (i = 0; i < g.n_kv; i++)
		if (g.kv[i].key.len > (uint64_t)width)
			width = g.kv[i].key.len > 48 ? 48 : (int)g.kv[i].key.len;
	for (i = 0; i < g.n_kv; i++)
		print_kv(&g.kv[i], width);
	print_tensors(&g);
	gguf_close(&g);
	return 0;
}
