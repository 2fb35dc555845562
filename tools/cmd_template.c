/*
 * cmd_template.c - `ember template --file=T.jinja [--context=C.json]`:
 * renders a chat template with the engine's Jinja interpreter and prints the
 * result as is (no newline added). The context is a JSON object (messages,
 * add_generation_prompt, bos_token, eos_token, tools, ...) read from the
 * file, or from stdin when none is given. Shows what a model will see, and
 * lets tests compare the interpreter with the reference renderer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ember.h"
#include "jinja.h"

#define TEMPLATE_INPUT_MAX (16u << 20)

/* Reads all of `f` into a malloc'd buffer; NULL on error or over the cap. */
static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap), *nb;

	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		if (cap >= TEMPLATE_INPUT_MAX || !(nb = realloc(buf, cap * 2))) {
			free(buf);
			return NULL;
		}
		buf = nb;
		cap *= 2;
	}
	if (!buf || ferror(f)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

static char *read_path(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf;

	if (!f)
		return NULL;
	buf = read_all(f, len);
	if (f != stdin)
		fclose(f);
	return buf;
}

int cmd_template(int argc, char **argv)
{
	const char *file = NULL, *context = "-";
	char err[EMBER_ERR_MAX] = "", *src = NULL, *ctx = NULL, *out = NULL;
	size_t src_len = 0, ctx_len = 0, out_len = 0;
	struct jinja_template *t = NULL;
	int status = 1;

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--file=", 7) == 0) {
			file = argv[i] + 7;
		} else if (strncmp(argv[i], "--context=", 10) == 0) {
			context = argv[i] + 10;
		} else if (strcmp(argv[i], "--help") == 0) {
			printf("usage: ember template --file=T.jinja [--context=C.json|-]\n"
			       "renders chat template T with the JSON object C (default: stdin)\n");
			return 0;
		} else {
			fprintf(stderr, "ember template: unknown argument '%s' (see --help)\n", argv[i]);
			return 2;
		}
	}
	if (!file) {
		fprintf(stderr, "ember template: --file=PATH is required\n");
		return 2;
	}
	if (!(src = read_path(file, &src_len))) {
		fprintf(stderr, "ember template: cannot read %s\n", file);
		goto done;
	}
	if (!(ctx = read_path(context, &ctx_len))) {
		fprintf(stderr, "ember template: cannot read the context %s\n", context);
		goto done;
	}
	if (!(t = jinja_parse(src, src_len, err))) {
		fprintf(stderr, "ember template: %s: %s\n", file, err);
		goto done;
	}
	if (jinja_render(t, ctx, ctx_len, &out, &out_len, err) < 0) {
		fprintf(stderr, "ember template: %s\n", err);
		goto done;
	}
	fwrite(out, 1, out_len, stdout);
	status = fflush(stdout) == 0 ? 0 : 1;
done:
	free(out);
	jinja_free(t);
	free(ctx);
	free(src);
	return status;
}
