/* test_sd_notify.c - the systemd protocol against real sockets: a datagram
 * socket standing in for the manager (in a temp dir, and abstract), the
 * watchdog variables, and socket activation in a child process that owns
 * descriptor 3. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>

#include "ember.h"
#include "sd_notify.h"

/* A stand-in for the service manager's notification socket. */
struct manager {
	int fd;
	char dir[48];
	char addr[96];    /* what goes into NOTIFY_SOCKET */
};

static void manager_open_path(struct manager *m)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};

	strcpy(m->dir, "/tmp/ember-sdn-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(m->dir));
	snprintf(m->addr, sizeof(m->addr), "%s/notify", m->dir);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", m->addr);
	m->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(m->fd, 0);
	ck_assert_int_eq(bind(m->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setenv("NOTIFY_SOCKET", m->addr, 1);
}

static void manager_open_abstract(struct manager *m)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len;

	m->dir[0] = '\0';
	snprintf(m->addr, sizeof(m->addr), "@ember-sdn-test-%ld",
		 (long)getpid());
	len = strlen(m->addr);
	memcpy(a.sun_path, m->addr, len);
	a.sun_path[0] = '\0';
	m->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(m->fd, 0);
	ck_assert_int_eq(bind(m->fd, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
					  len)), 0);
	setenv("NOTIFY_SOCKET", m->addr, 1);
}

/* Receives one datagram (non-blocking: it must already be there, since
 * the send returned) and checks it is exactly `want`. */
static void manager_expect(struct manager *m, const char *want)
{
	char buf[512];
	ssize_t n = recv(m->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	ck_assert_str_eq(buf, want);
}

static void manager_close(struct manager *m)
{
	char path[128];

	close(m->fd);
	if (m->dir[0] != '\0') {
		snprintf(path, sizeof(path), "%s/notify", m->dir);
		unlink(path);
		rmdir(m->dir);
	}
	unsetenv("NOTIFY_SOCKET");
}

static void sends_the_protocol_messages(struct manager *m)
{
	char err[EMBER_ERR_MAX] = "";
	struct sd_notify n;

	ck_assert_int_eq(sd_notify_init(&n, err), 0);
	ck_assert_int_ge(n.fd, 0);
	ck_assert_int_eq(sd_notify_send(&n, "READY=1"), 1);
	manager_expect(m, "READY=1");
	ck_assert_int_eq(sd_notify_send(&n, "WATCHDOG=1"), 1);
	manager_expect(m, "WATCHDOG=1");
	ck_assert_int_eq(sd_notify_send(&n, "STOPPING=1\nSTATUS=draining"), 1);
	manager_expect(m, "STOPPING=1\nSTATUS=draining");
	ck_assert_int_eq(sd_notify_status(&n, "serving on %s:%d", "127.0.0.1",
					  8080), 1);
	manager_expect(m, "STATUS=serving on 127.0.0.1:8080");
	sd_notify_free(&n);
	ck_assert_int_eq(n.fd, -1);
	sd_notify_free(&n);
}

START_TEST(sends_datagrams_to_a_path_socket)
{
	struct manager m;

	manager_open_path(&m);
	sends_the_protocol_messages(&m);
	manager_close(&m);
}
END_TEST

START_TEST(sends_datagrams_to_an_abstract_socket)
{
	struct manager m;

	manager_open_abstract(&m);
	sends_the_protocol_messages(&m);
	manager_close(&m);
}
END_TEST

START_TEST(status_is_one_line_and_bounded)
{
	char want[sizeof("STATUS=") + SD_NOTIFY_STATUS_MAX];
	char long_text[SD_NOTIFY_STATUS_MAX * 2];
	struct sd_notify n;
	struct manager m;

	manager_open_path(&m);
	ck_assert_int_eq(sd_notify_init(&n, NULL), 0);
	ck_assert_int_eq(sd_notify_status(&n, "a\nREADY=1\rb"), 1);
	manager_expect(&m, "STATUS=a READY=1 b");
	memset(long_text, 'x', sizeof(long_text) - 1);
	long_text[sizeof(long_text) - 1] = '\0';
	ck_assert_int_eq(sd_notify_status(&n, "%s", long_text), 1);
	memcpy(want, "STATUS=", 7);
	memset(want + 7, 'x', SD_NOTIFY_STATUS_MAX);
	want[7 + SD_NOTIFY_STATUS_MAX] = '\0';
	manager_expect(&m, want);
	sd_notify_free(&n);
	manager_close(&m);
}
END_TEST

START_TEST(without_notify_socket_sends_are_noops)
{
	char err[EMBER_ERR_MAX] = "";
	struct sd_notify n;

	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(sd_notify_init(&n, err), 0);
	ck_assert_int_eq(n.fd, -1);
	ck_assert_int_eq(sd_notify_send(&n, "READY=1"), 0);
	ck_assert_int_eq(sd_notify_status(&n, "x"), 0);
	ck_assert_int_eq(sd_notify_send(NULL, "READY=1"), 0);
	sd_notify_free(&n);
	sd_notify_free(NULL);
	setenv("NOTIFY_SOCKET", "", 1);
	ck_assert_int_eq(sd_notify_init(&n, err), 0);
	ck_assert_int_eq(n.fd, -1);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(rejects_unusable_notify_addresses)
{
	char err[EMBER_ERR_MAX] = "";
	char longpath[200];
	struct sd_notify n;

	setenv("NOTIFY_SOCKET", "relative/notify", 1);
	ck_assert_int_eq(sd_notify_init(&n, err), EMBER_EUNSUPPORTED);
	ck_assert_int_eq(n.fd, -1);
	ck_assert_ptr_nonnull(strstr(err, "NOTIFY_SOCKET"));
	ck_assert_int_eq(sd_notify_send(&n, "READY=1"), 0);
	setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
	ck_assert_int_eq(sd_notify_init(&n, err), EMBER_EUNSUPPORTED);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	ck_assert_int_eq(sd_notify_init(&n, err), EMBER_EINVAL);
	ck_assert_int_eq(n.fd, -1);
	/* 107 bytes + NUL is the longest path that fits sun_path. */
	longpath[107] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	ck_assert_int_eq(sd_notify_init(&n, err), 0);
	ck_assert_int_ge(n.fd, 0);
	sd_notify_free(&n);
	/* An abstract name needs no NUL: '@' + 107 bytes fits, 109 does not. */
	longpath[0] = '@';
	longpath[107] = 'a';
	longpath[108] = '\0';
	setenv("NOTIFY_SOCKET", longpath, 1);
	ck_assert_int_eq(sd_notify_init(&n, err), 0);
	ck_assert_int_ge(n.fd, 0);
	sd_notify_free(&n);
	longpath[108] = 'a';
	setenv("NOTIFY_SOCKET", longpath, 1);
	ck_assert_int_eq(sd_notify_init(&n, err), EMBER_EINVAL);
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

START_TEST(send_to_a_vanished_manager_is_an_error)
{
	struct sd_notify n;
	struct manager m;

	manager_open_path(&m);
	ck_assert_int_eq(sd_notify_init(&n, NULL), 0);
	manager_close(&m);
	ck_assert_int_eq(sd_notify_send(&n, "WATCHDOG=1"), EMBER_EIO);
	ck_assert_int_eq(sd_notify_send(&n, ""), EMBER_EINVAL);
	sd_notify_free(&n);
}
END_TEST

/* ---- watchdog ---------------------------------------------------------- */

static int watchdog(const char *usec, const char *pid, uint64_t *out)
{
	char err[EMBER_ERR_MAX] = "";
	int rc;

	if (usec != NULL)
		setenv("WATCHDOG_USEC", usec, 1);
	else
		unsetenv("WATCHDOG_USEC");
	if (pid != NULL)
		setenv("WATCHDOG_PID", pid, 1);
	else
		unsetenv("WATCHDOG_PID");
	*out = 12345; /* must be overwritten */
	rc = sd_notify_watchdog_usec(out, err);
	if (rc != 0)
		ck_assert_ptr_nonnull(strstr(err, "WATCHDOG_"));
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	return rc;
}

START_TEST(watchdog_interval_is_read_and_checked)
{
	static const char *const bad[] = {
		"", "0", "-5", "+5", " 30", "30 ", "30s", "abc", "1e6",
		"18446744073709551615",  /* systemd's infinity */
		"18446744073709551616",  /* overflows */
		"99999999999999999999999",
	};
	char self[32], other[32];
	uint64_t v;
	size_t i;

	snprintf(self, sizeof(self), "%ld", (long)getpid());
	snprintf(other, sizeof(other), "%ld", (long)getpid() + 1);
	ck_assert_int_eq(watchdog(NULL, NULL, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(watchdog("30000000", NULL, &v), 0);
	ck_assert_uint_eq(v, 30000000);
	ck_assert_int_eq(watchdog("18446744073709551614", NULL, &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX - 1);
	ck_assert_int_eq(watchdog("30000000", self, &v), 0);
	ck_assert_uint_eq(v, 30000000);
	ck_assert_int_eq(watchdog("30000000", other, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(watchdog("30000000", "pid", &v), EMBER_EINVAL);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(watchdog("30000000", "0", &v), EMBER_EINVAL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(watchdog(bad[i], NULL, &v) == EMBER_EINVAL,
			      "WATCHDOG_USEC='%s' accepted", bad[i]);
		ck_assert_uint_eq(v, 0);
	}
}
END_TEST

/* ---- socket activation ------------------------------------------------- */

START_TEST(listen_fds_ignores_another_pid)
{
	char err[EMBER_ERR_MAX] = "";
	char other[32];

	unsetenv("LISTEN_PID");
	setenv("LISTEN_FDS", "1", 1);
	ck_assert_int_eq(sd_notify_listen_fds(0, err), 0);
	snprintf(other, sizeof(other), "%ld", (long)getpid() + 1);
	setenv("LISTEN_PID", other, 1);
	setenv("LISTEN_FDNAMES", "http", 1);
	ck_assert_int_eq(sd_notify_listen_fds(0, err), 0);
	ck_assert_ptr_nonnull(getenv("LISTEN_FDS"));
	ck_assert_int_eq(sd_notify_listen_fds(1, err), 0);
	ck_assert_ptr_null(getenv("LISTEN_PID"));
	ck_assert_ptr_null(getenv("LISTEN_FDS"));
	ck_assert_ptr_null(getenv("LISTEN_FDNAMES"));
}
END_TEST

START_TEST(listen_fds_rejects_malformed_variables)
{
	static const char *const bad_count[] = {"", "0", "-1", "x", "2x",
						"2147483645"};
	char err[EMBER_ERR_MAX] = "";
	char self[32];
	size_t i;

	snprintf(self, sizeof(self), "%ld", (long)getpid());
	setenv("LISTEN_FDS", "1", 1);
	setenv("LISTEN_PID", "abc", 1);
	ck_assert_int_eq(sd_notify_listen_fds(0, err), EMBER_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "LISTEN_PID"));
	for (i = 0; i < sizeof(bad_count) / sizeof(bad_count[0]); i++) {
		setenv("LISTEN_PID", self, 1);
		setenv("LISTEN_FDS", bad_count[i], 1);
		ck_assert_msg(sd_notify_listen_fds(0, err) == EMBER_EINVAL,
			      "LISTEN_FDS='%s' accepted", bad_count[i]);
	}
	/* our pid but no count: nothing passed */
	unsetenv("LISTEN_FDS");
	ck_assert_int_eq(sd_notify_listen_fds(1, err), 0);
	ck_assert_ptr_null(getenv("LISTEN_PID"));
}
END_TEST

/* Runs `check` in a child that has `fd` (or nothing, if -1) as descriptor 3
 * and LISTEN_PID set to itself, as the manager would start us. The child
 * owns descriptor 3 alone, so Check's own descriptors stay intact. */
static int in_activated_child(int fd, const char *count, int (*check)(void))
{
	int status;
	pid_t pid;

	/* qemu-user (tests/arm64/run_qemu.sh): a forked guest hangs there, and
	 * qemu keeps descriptors of its own that descriptor 3 may be. */
	if (getenv("EMBER_TEST_NO_FORK")) {
		fprintf(stderr, "sd_notify: activated child (LISTEN_FDS=%s) skipped: no fork here\n",
			count);
		return 0;
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char self[32];

		if (fd >= 0) {
			if (dup2(fd, SD_NOTIFY_LISTEN_FDS_START) < 0)
				_exit(100);
		} else {
			close(SD_NOTIFY_LISTEN_FDS_START);
		}
		snprintf(self, sizeof(self), "%ld", (long)getpid());
		setenv("LISTEN_PID", self, 1);
		setenv("LISTEN_FDS", count, 1);
		_exit(check());
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int tcp_listener(int do_listen)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (do_listen)
		ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

/* Exit codes: 0 = as expected, anything else names the failed step. */
static int check_one_socket(void)
{
	char err[EMBER_ERR_MAX];
	int fd = -2;

	if (fcntl(3, F_SETFD, 0) != 0)  /* dup2 clears it; be sure */
		return 1;
	if (sd_notify_listen_socket(&fd, err) != 0)
		return 2;
	if (fd != 3)
		return 3;
	if (!(fcntl(3, F_GETFD) & FD_CLOEXEC))
		return 4;
	if (getenv("LISTEN_PID") != NULL || getenv("LISTEN_FDS") != NULL)
		return 5;
	return 0;
}

static int check_rejected(int want)
{
	char err[EMBER_ERR_MAX] = "";
	int fd = -2;

	if (sd_notify_listen_socket(&fd, err) != want)
		return 1;
	if (fd != -1 || err[0] == '\0')
		return 2;
	return 0;
}

static int check_not_listening(void) { return check_rejected(EMBER_EINVAL); }
static int check_two_sockets(void) { return check_rejected(EMBER_EUNSUPPORTED); }
static int check_closed(void) { return check_rejected(EMBER_EIO); }

START_TEST(listen_socket_takes_the_inherited_listener)
{
	int fd = tcp_listener(1);

	ck_assert_int_eq(in_activated_child(fd, "1", check_one_socket), 0);
	close(fd);
}
END_TEST

START_TEST(listen_socket_rejects_what_emberd_cannot_serve)
{
	int fds[2];
	int fd = tcp_listener(0);

	ck_assert_int_eq(in_activated_child(fd, "1", check_not_listening), 0);
	close(fd);
	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(in_activated_child(fds[0], "1", check_not_listening), 0);
	close(fds[0]);
	close(fds[1]);
	fd = tcp_listener(1);
	ck_assert_int_eq(in_activated_child(fd, "2", check_two_sockets), 0);
	close(fd);
	ck_assert_int_eq(in_activated_child(-1, "1", check_closed), 0);
}
END_TEST

START_TEST(listen_socket_without_activation_is_none)
{
	char err[EMBER_ERR_MAX] = "";
	int fd = -2;

	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	ck_assert_int_eq(sd_notify_listen_socket(&fd, err), 0);
	ck_assert_int_eq(fd, -1);
}
END_TEST

Suite *suite_sd_notify(void)
{
	Suite *s = suite_create("sd_notify");
	TCase *tc = tcase_create("sd_notify");

	tcase_add_test(tc, sends_datagrams_to_a_path_socket);
	tcase_add_test(tc, sends_datagrams_to_an_abstract_socket);
	tcase_add_test(tc, status_is_one_line_and_bounded);
	tcase_add_test(tc, without_notify_socket_sends_are_noops);
	tcase_add_test(tc, rejects_unusable_notify_addresses);
	tcase_add_test(tc, send_to_a_vanished_manager_is_an_error);
	tcase_add_test(tc, watchdog_interval_is_read_and_checked);
	tcase_add_test(tc, listen_fds_ignores_another_pid);
	tcase_add_test(tc, listen_fds_rejects_malformed_variables);
	tcase_add_test(tc, listen_socket_takes_the_inherited_listener);
	tcase_add_test(tc, listen_socket_rejects_what_emberd_cannot_serve);
	tcase_add_test(tc, listen_socket_without_activation_is_none);
	suite_add_tcase(s, tc);
	return s;
}
