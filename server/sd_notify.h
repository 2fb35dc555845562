/*
 * sd_notify.h - talking to systemd without libsystemd: readiness and
 * watchdog notifications, and the sockets of socket activation.
 *
 * Notification protocol (sd_notify(3)): the service manager puts the address
 * of an AF_UNIX datagram socket in NOTIFY_SOCKET, either a file system path
 * ("/run/systemd/notify") or an abstract name written with a leading '@'.
 * The service sends it datagrams of newline-separated "KEY=value" lines:
 * READY=1 once it serves, STOPPING=1 when it starts shutting down,
 * WATCHDOG=1 at least every WATCHDOG_USEC microseconds, STATUS=<one line>
 * for `systemctl status`. The kernel attaches our credentials, which is all
 * NotifyAccess=main needs. Without NOTIFY_SOCKET (a shell, Docker) every
 * send is a no-op returning 0, so callers never branch on "under systemd?".
 *
 * Socket activation (sd_listen_fds(3)): when LISTEN_PID equals our pid, the
 * manager passed LISTEN_FDS descriptors, numbered from 3 up; they are
 * already bound and listening, so emberd hands one to libmicrohttpd
 * (MHD_OPTION_LISTEN_SOCKET) instead of binding host:port itself.
 *
 * Ownership: struct sd_notify is caller storage holding one socket, released
 * by sd_notify_free(). Inherited listening sockets belong to the caller.
 *
 * Threads: the environment readers (sd_notify_init, sd_notify_watchdog_usec,
 * sd_notify_listen_fds, sd_notify_listen_socket) call getenv/unsetenv, so
 * call them from main() before any thread starts. Sends never block (the
 * socket is non-blocking) and may come from the loop thread.
 */
#ifndef EMBER_SD_NOTIFY_H
#define EMBER_SD_NOTIFY_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The first inherited descriptor; LISTEN_FDS counts from here. */
#define SD_NOTIFY_LISTEN_FDS_START 3

/* Longest STATUS= text sent; longer text is cut (not an error). */
#define SD_NOTIFY_STATUS_MAX 240

struct sd_notify {
	int fd;                  /* AF_UNIX datagram socket; -1: no manager */
	socklen_t addr_len;      /* of the used part of addr */
	struct sockaddr_un addr; /* the manager's socket, from NOTIFY_SOCKET */
};

/* Reads NOTIFY_SOCKET and opens a socket to send to it. Unset or empty
 * means no manager: returns 0 with n->fd = -1, and sends are no-ops.
 * Returns EMBER_EUNSUPPORTED for an address that is neither a path nor
 * '@'-abstract (for example "vsock:..."), EMBER_EINVAL for one too long for
 * sockaddr_un, EMBER_EIO if the socket cannot be made; in every error case
 * n is still a valid "no manager" state, so a caller may log and go on. */
int sd_notify_init(struct sd_notify *n, char *err);

/* Sends `state` ("READY=1", "STOPPING=1", "WATCHDOG=1", or several
 * newline-separated assignments) as one datagram. Returns 1 if sent, 0 if
 * there is no manager (n NULL or not initialised to a socket), EMBER_EINVAL
 * for an empty state, EMBER_EBUSY if the manager's queue is full (try at
 * the next tick), EMBER_EIO for other failures (manager gone). */
int sd_notify_send(const struct sd_notify *n, const char *state);

/* Sends "STATUS=<text>" with `text` formatted like printf. Newlines in the
 * text become spaces (a newline would start a new assignment); text longer
 * than SD_NOTIFY_STATUS_MAX is cut. Returns as sd_notify_send(). */
int sd_notify_status(const struct sd_notify *n, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Closes the socket. NULL allowed; calling it twice is harmless. */
void sd_notify_free(struct sd_notify *n);

/* Reads the watchdog interval the manager expects WATCHDOG=1 within.
 * Sets *usec to WATCHDOG_USEC, or to 0 (watchdog off) when it is unset or
 * WATCHDOG_PID names another process. Returns 0, or EMBER_EINVAL (and
 * *usec = 0) when either variable is not a positive decimal number that
 * fits. Ping at half the interval, as systemd recommends. */
int sd_notify_watchdog_usec(uint64_t *usec, char *err);

/* sd_listen_fds(): returns how many descriptors the manager passed us (0
 * when LISTEN_PID is unset or names another process, or LISTEN_FDS is
 * unset), starting at SD_NOTIFY_LISTEN_FDS_START, and marks each one
 * close-on-exec. Returns EMBER_EINVAL for malformed variables and
 * EMBER_EIO for a descriptor that is not open. If `unset_env` is non-zero,
 * removes LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES in every case, so
 * children do not take them for their own. */
int sd_notify_listen_fds(int unset_env, char *err);

/* The one listening TCP socket emberd accepts from socket activation. Sets
 * *fd to it, or to -1 when nothing was passed (bind host:port as usual);
 * removes the LISTEN_* variables. Returns 0, EMBER_EUNSUPPORTED if more
 * than one descriptor was passed, EMBER_EINVAL if the descriptor is not a
 * listening stream socket, or an error of sd_notify_listen_fds(). */
int sd_notify_listen_socket(int *fd, char *err);

#endif
