/* sd_notify.c - systemd notification and socket-activation protocol. See
 * sd_notify.h. */
#include "sd_notify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"

/* Parses a whole string as an unsigned decimal number no larger than `max`:
 * digits only, so "", "-1", " 5", "5s" and overflow are all rejected. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s != '\0'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (d > 9 || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* Parses LISTEN_PID / WATCHDOG_PID. Returns 1 if it is our pid, 0 if
 * another, -1 if malformed. */
static int pid_is_ours(const char *s)
{
	uint64_t pid;

	if (parse_u64(s, INT_MAX, &pid) != 0 || pid == 0)
		return -1;
	return (pid_t)pid == getpid();
}

/* ---- notifications ------------------------------------------------------- */

int sd_notify_init(struct sd_notify *n, char *err)
{
	const char *e = getenv("NOTIFY_SOCKET");
	size_t len;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (e == NULL || *e == '\0')
		return 0;
	if (e[0] != '/' && e[0] != '@')
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "NOTIFY_SOCKET '%.64s': not a path or "
				    "@abstract socket", e);
	len = strlen(e);
	if (len > sizeof(n->addr.sun_path) - (e[0] == '/'))
		return ember_seterr(err, EMBER_EINVAL,
				    "NOTIFY_SOCKET: address of %zu bytes is "
				    "too long", len);
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, e, len);
	/* An abstract name starts with a NUL and its length is exact (no
	 * terminator); a path's length includes its NUL. */
	if (e[0] == '@')
		n->addr.sun_path[0] = '\0';
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
				  (e[0] == '/'));
	/* Non-blocking: the loop thread sends, and must never wait on the
	 * manager; a full queue is reported and the next ping retries. */
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0)
		return ember_seterr(err, EMBER_EIO, "notify socket: %s",
				    strerror(errno));
	return 0;
}

int sd_notify_send(const struct sd_notify *n, const char *state)
{
	size_t len;
	ssize_t sent;

	if (n == NULL || n->fd < 0)
		return 0;
	if (state == NULL || (len = strlen(state)) == 0)
		return EMBER_EINVAL;
	do {
		sent = sendto(n->fd, state, len, MSG_NOSIGNAL,
			      (const struct sockaddr *)&n->addr, n->addr_len);
	} while (sent < 0 && errno == EINTR);
	if (sent < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? EMBER_EBUSY
							     : EMBER_EIO;
	return (size_t)sent == len ? 1 : EMBER_EIO;
}

int sd_notify_status(const struct sd_notify *n, const char *fmt, ...)
{
	char buf[sizeof("STATUS=") + SD_NOTIFY_STATUS_MAX];
	size_t pre = sizeof("STATUS=") - 1;
	va_list ap;
	char *p;

	if (n == NULL || n->fd < 0)
		return 0;
	memcpy(buf, "STATUS=", pre);
	va_start(ap, fmt);
	vsnprintf(buf + pre, sizeof(buf) - pre, fmt, ap);
	va_end(ap);
	for (p = buf + pre; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	return sd_notify_send(n, buf);
}

void sd_notify_free(struct sd_notify *n)
{
	if (n == NULL || n->fd < 0)
		return;
	close(n->fd);
	n->fd = -1;
}

/* ---- watchdog -------------------------------------------------------------- */

int sd_notify_watchdog_usec(uint64_t *usec, char *err)
{
	const char *e = getenv("WATCHDOG_USEC");
	const char *p = getenv("WATCHDOG_PID");
	uint64_t v;
	int ours;

	*usec = 0;
	if (e == NULL)
		return 0;
	/* UINT64_MAX is systemd's "infinity", which is not an interval. */
	if (parse_u64(e, UINT64_MAX - 1, &v) != 0 || v == 0)
		return ember_seterr(err, EMBER_EINVAL,
				    "WATCHDOG_USEC '%.32s': not a positive "
				    "number of microseconds", e);
	if (p != NULL) {
		ours = pid_is_ours(p);
		if (ours < 0)
			return ember_seterr(err, EMBER_EINVAL,
					    "WATCHDOG_PID '%.32s': not a pid", p);
		if (!ours)
			return 0;
	}
	*usec = v;
	return 0;
}

/* ---- socket activation ----------------------------------------------------- */

static void unset_listen_env(void)
{
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

static int listen_fds(char *err)
{
	const char *pid = getenv("LISTEN_PID");
	const char *fds = getenv("LISTEN_FDS");
	uint64_t count;
	int ours, fd, flags;

	if (pid == NULL)
		return 0;
	ours = pid_is_ours(pid);
	if (ours < 0)
		return ember_seterr(err, EMBER_EINVAL,
				    "LISTEN_PID '%.32s': not a pid", pid);
	if (!ours || fds == NULL)
		return 0;
	if (parse_u64(fds, (uint64_t)INT_MAX - SD_NOTIFY_LISTEN_FDS_START,
		      &count) != 0 || count == 0)
		return ember_seterr(err, EMBER_EINVAL,
				    "LISTEN_FDS '%.32s': not a positive count",
				    fds);
	for (fd = SD_NOTIFY_LISTEN_FDS_START;
	     fd < SD_NOTIFY_LISTEN_FDS_START + (int)count; fd++) {
		flags = fcntl(fd, F_GETFD);
		if (flags < 0)
			return ember_seterr(err, EMBER_EIO,
					    "LISTEN_FDS: descriptor %d: %s", fd,
					    strerror(errno));
		/* Inherited descriptors must not leak into anything we exec. */
		if (!(flags & FD_CLOEXEC) &&
		    fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
			return ember_seterr(err, EMBER_EIO,
					    "LISTEN_FDS: descriptor %d: %s", fd,
					    strerror(errno));
	}
	return (int)count;
}

int sd_notify_listen_fds(int unset_env, char *err)
{
	int rc = listen_fds(err);

	if (unset_env)
		unset_listen_env();
	return rc;
}

int sd_notify_listen_socket(int *fd, char *err)
{
	const int s = SD_NOTIFY_LISTEN_FDS_START;
	int count, type = 0, listening = 0;
	socklen_t len;

	*fd = -1;
	count = sd_notify_listen_fds(1, err);
	if (count <= 0)
		return count;
	if (count > 1)
		return ember_seterr(err, EMBER_EUNSUPPORTED,
				    "socket activation passed %d sockets; "
				    "emberd listens on exactly one", count);
	len = sizeof(type);
	if (getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_STREAM)
		return ember_seterr(err, EMBER_EINVAL,
				    "socket activation: descriptor %d is not "
				    "a stream socket", s);
	len = sizeof(listening);
	if (getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
	    !listening)
		return ember_seterr(err, EMBER_EINVAL,
				    "socket activation: descriptor %d is not "
				    "listening (Accept=yes?)", s);
	*fd = s;
	return 0;
}
