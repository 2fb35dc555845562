/* model_watch.c - the model file changing under the daemon. See
 * model_watch.h. */
#include "model_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

int model_watch_open(struct model_watch *w, const char *path, char *err)
{
	w->path = path;
	w->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (w->fd < 0)
		return ember_seterr(err, EMBER_EIO, "%s: %s", path, strerror(errno));
	if (fstat(w->fd, &w->st) != 0) {
		int e = errno;

		model_watch_close(w);
		return ember_seterr(err, EMBER_EIO, "%s: %s", path, strerror(e));
	}
	return 0;
}

int model_watch_check(const struct model_watch *w, bool same_path, char *err)
{
	struct stat st;

	if (w->fd < 0)
		return 0;
	if (fstat(w->fd, &st) != 0)
		return ember_seterr(err, EMBER_EIO, "model file %s: %s", w->path,
				    strerror(errno));
	if (st.st_size != w->st.st_size)
		return ember_seterr(err, EMBER_EIO, "the model file %s changed on disk "
				    "since it was loaded (%lld -> %lld bytes: rewritten or "
				    "truncated in place); restart emberd to load it (replace "
				    "model files by renaming a new file over them)", w->path,
				    (long long)w->st.st_size, (long long)st.st_size);
	if (st.st_mtim.tv_sec != w->st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != w->st.st_mtim.tv_nsec)
		return ember_seterr(err, EMBER_EIO, "the model file %s changed on disk "
				    "since it was loaded (modified in place, same size); "
				    "restart emberd to load it (replace model files by "
				    "renaming a new file over them)", w->path);
	if (same_path && (stat(w->path, &st) != 0 || st.st_dev != w->st.st_dev ||
			  st.st_ino != w->st.st_ino))
		return ember_seterr(err, EMBER_EIO, "the model file %s was replaced "
				    "while it was being loaded; restart emberd", w->path);
	return 0;
}

void model_watch_close(struct model_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* ---- SIGBUS ---------------------------------------------------------------- */

static uintptr_t guard_lo, guard_hi;
static char guard_head[EMBER_ERR_MAX + 64]; /* "...file X at offset " */
static size_t guard_head_len;

static const char guard_tail[] =
	": the file was truncated or rewritten in place while mapped; exiting "
	"(replace model files by renaming a new file over them)\n";

/* Only async-signal-safe calls: write and _exit. */
static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	char num[24];
	size_t n = sizeof(num);
	uintptr_t off;
	ssize_t rc;

	(void)ctx;
	if (a < guard_lo || a >= guard_hi) {
		/* Not the model: the default action (core dump) on return,
		 * when the access faults again. */
		signal(sig, SIG_DFL);
		return;
	}
	off = a - guard_lo;
	do {
		num[--n] = (char)('0' + off % 10);
		off /= 10;
	} while (off != 0 && n > 0);
	rc = write(STDERR_FILENO, guard_head, guard_head_len);
	rc = write(STDERR_FILENO, num + n, sizeof(num) - n);
	rc = write(STDERR_FILENO, guard_tail, sizeof(guard_tail) - 1);
	(void)rc;
	_exit(MODEL_WATCH_EXIT);
}

int model_watch_guard(const void *map, size_t size, const char *path, char *err)
{
	struct sigaction sa;
	int n;

	n = snprintf(guard_head, sizeof(guard_head),
		     "emberd: fatal: SIGBUS reading the model file %s at offset ", path);
	guard_head_len = n < 0 ? 0 : (size_t)n < sizeof(guard_head) ? (size_t)n
			 : sizeof(guard_head) - 1;
	guard_lo = (uintptr_t)map;
	guard_hi = guard_lo + size;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL) != 0)
		return ember_seterr(err, EMBER_EIO, "SIGBUS handler: %s", strerror(errno));
	return 0;
}
