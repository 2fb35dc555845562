/* router.c - route table matching. See router.h. */
#include "router.h"

#include <stdio.h>
#include <string.h>

/* Matches one pattern against a path, recording placeholders. Returns 1 on
 * a match. Both are walked segment by segment. */
static int pattern_match(const char *pat, const char *path,
			 struct route_match *m)
{
	size_t np = 0;

	while (*pat && *path) {
		if (*pat == '{') {
			const char *close = strchr(pat, '}');
			const char *end = strchr(path, '/');

			if (close == NULL)
				return 0;
			if (end == NULL)
				end = path + strlen(path);
			if (end == path || np == ROUTE_MAX_PARAMS)
				return 0;
			m->params[np].name = pat + 1;
			m->params[np].name_len = (size_t)(close - pat - 1);
			m->params[np].value = path;
			m->params[np].len = (size_t)(end - path);
			np++;
			pat = close + 1;
			path = end;
			continue;
		}
		if (*pat != *path)
			return 0;
		pat++;
		path++;
	}
	if (*pat != '\0' || *path != '\0')
		return 0;
	m->n_params = np;
	return 1;
}

static void allow_add(char *allow, size_t size, const char *method)
{
	size_t n = strlen(allow);

	if (strstr(allow, method) != NULL)
		return;
	snprintf(allow + n, size - n, "%s%s", n ? ", " : "", method);
}

int router_match(const struct route *table, size_t n, const char *method,
		 const char *path, struct route_match *m)
{
	struct route_match tmp;
	const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
	int path_known = 0;
	size_t i;

	memset(m, 0, sizeof(*m));
	for (i = 0; i < n; i++) {
		memset(&tmp, 0, sizeof(tmp));
		if (!pattern_match(table[i].pattern, path, &tmp))
			continue;
		path_known = 1;
		allow_add(m->allow, sizeof(m->allow), table[i].method);
		if (m->route == NULL && strcmp(table[i].method, want) == 0) {
			m->route = &table[i];
			m->n_params = tmp.n_params;
			memcpy(m->params, tmp.params, sizeof(tmp.params));
		}
	}
	if (m->route != NULL)
		return m->status = 0;
	return m->status = path_known ? 405 : 404;
}

int router_param(const struct route_match *m, const char *name, char *buf,
		 size_t size)
{
	size_t i, len = strlen(name);

	for (i = 0; i < m->n_params; i++) {
		const struct route_param *p = &m->params[i];

		if (p->name_len != len || memcmp(p->name, name, len) != 0)
			continue;
		if (p->len + 1 > size)
			return -1;
		memcpy(buf, p->value, p->len);
		buf[p->len] = '\0';
		return (int)p->len;
	}
	return -1;
}
