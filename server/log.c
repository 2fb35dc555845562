/* log.c - level-filtered lines on stderr. See log.h. */
#include "log.h"

#include <stdarg.h>
#include <string.h>

void log_init(struct logger *lg, int level, FILE *out)
{
	lg->level = level;
	lg->out = out;
}

void log_printf(const struct logger *lg, int level, const char *fmt, ...)
{
	char line[1024];
	size_t n = 0;
	va_list ap;
	int w;

	if (lg == NULL || level > lg->level || lg->out == NULL)
		return;
	if (level <= LOG_WARN)
		n = (size_t)snprintf(line, sizeof(line), "%s: ",
				     config_log_level_name(level));
	va_start(ap, fmt);
	w = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (w < 0)
		return;
	n += (size_t)w;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	line[n] = '\0';
	fputs(line, lg->out);
}

char *log_format_request(const struct log_request *r, char *buf, size_t size)
{
	char path[256];
	size_t i, n, len;

	len = strlen(r->path);
	if (len > sizeof(path) - 1)
		len = sizeof(path) - 1;
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)r->path[i];

		path[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	path[len] = '\0';
	n = (size_t)snprintf(buf, size, "%s %s %d", r->method, path, r->status);
	if (r->prompt_tokens >= 0 && n < size)
		n += (size_t)snprintf(buf + n, size - n, " prompt=%ld",
				      r->prompt_tokens);
	if (r->gen_tokens >= 0 && n < size)
		n += (size_t)snprintf(buf + n, size - n, " gen=%ld",
				      r->gen_tokens);
	if (r->ttft_ms >= 0 && n < size)
		n += (size_t)snprintf(buf + n, size - n, " ttft=%.1fms",
				      r->ttft_ms);
	if (n < size)
		snprintf(buf + n, size - n, " dur=%.1fms", r->duration_ms);
	return buf;
}

void log_request(const struct logger *lg, const struct log_request *r)
{
	char line[512];

	log_printf(lg, LOG_INFO, "%s", log_format_request(r, line, sizeof(line)));
}
