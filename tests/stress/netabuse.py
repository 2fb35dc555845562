#!/usr/bin/python3
"""Network abuse on loopback against the real emberd.

- slowloris: many connections sending a request header a byte at a time;
  they are closed by the connection timeout, and a real client is served
  meanwhile.
- idle: as many idle connections as asked (beyond the daemon's connection
  limit): the daemon stays up, serves once the timeout frees them, and its
  fds return to the idle count.
- headers: an oversized header block gets 431 or 413, the daemon stays up.
- pipelined: several requests in one write get their answers in order.
- noread: a streaming client that never reads: the generation ends and
  its slot frees, RSS stays bounded. Measured: it is not cancelled; the
  text queues on the server (bounded by max_tokens, ~0.5 KiB a token in
  SSE) and the connection is closed `timeout` seconds after the socket
  stops taking bytes.

Usage: netabuse.py [--only NAME,...] [--slow N] [--idle N]
"""
import argparse
import json
import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stresslib import HOST, Daemon, check, synth  # noqa: E402

TIMEOUT = 3   # emberd --timeout for these tests: idle connections close


def served(d, what):
    # Retried like a real client: under a connection flood the kernel's
    # accept queue overflows and a handshake can sit in SYN-ACK backoff.
    t0 = time.monotonic()
    st, tries = None, 0
    while st is None and time.monotonic() - t0 < 90:
        tries += 1
        try:
            st, _, _ = d.request("GET", "/health", timeout=TIMEOUT * 3)
        except OSError:
            pass
    check(st == 200, "a real client is served %s (in %.2f s, %d tries)"
          % (what, time.monotonic() - t0, tries))


def closed(s, wait):
    """True when the peer closed s within `wait` seconds."""
    s.settimeout(wait)
    try:
        s.recv(4096)
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def t_slowloris(a, d):
    """MHD's timeout is an idle timeout: a connection sending a byte more
    often than `timeout` is kept (the bound is then the connection limit,
    1024, and the per-connection memory limit on headers). Checked: real
    clients are served while the loris trickles, and the loris connections
    are closed `timeout` seconds after they stop."""
    conns = []
    for _ in range(a.slow):
        s = socket.create_connection((HOST, d.port))
        s.setblocking(False)
        conns.append(s)
    line = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    for i in range(3 * TIMEOUT):
        for s in conns:
            try:
                s.send(line[i:i + 1])
            except OSError:
                pass
        if i == 2:
            served(d, "while %d slowloris connections trickle" % a.slow)
        time.sleep(1)
    alive = sum(1 for s in conns if not closed(s, 0.01))
    print("%d/%d slowloris connections still open after %d s of a byte a "
          "second (timeout %d s)" % (alive, len(conns), 3 * TIMEOUT, TIMEOUT))
    time.sleep(TIMEOUT + 2)
    n_closed = sum(1 for s in conns if closed(s, 0.5))
    check(n_closed == len(conns), "%d/%d slowloris connections closed by the "
          "%d s timeout once they stop" % (n_closed, len(conns), TIMEOUT))
    for s in conns:
        s.close()


def try_health(d, wait):
    """Seconds until /health answered 200, or None after `wait`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < wait:
        try:
            if d.request("GET", "/health", timeout=TIMEOUT * 3)[0] == 200:
                return time.monotonic() - t0
        except OSError:
            pass
    return None


def t_idle(a, d):
    """Below the connection limit (1,024) idle connections cost a real
    client nothing; above it the kernel's accept queue overflows and a
    newcomer waits for timeouts and SYN-ACK retries (measured, printed, not
    asserted: tens of seconds on a loaded machine); the daemon stays up and
    serves once they go."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(a.idle, hard - 64)
    if soft < want + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want + 64, hard))
    conns, refused = [], 0
    for k in range(want):
        if k == 900:
            served(d, "with 900 idle connections open")
        try:
            conns.append(socket.create_connection((HOST, d.port), timeout=5))
        except OSError:
            refused += 1
    print("opened %d idle connections (%d refused)" % (len(conns), refused))
    check(d.alive(), "daemon up with %d idle connections" % want)
    took = try_health(d, 30)
    print("with %d idle connections open a new client was %s" % (
        want, "served in %.1f s" % took if took is not None
        else "not served within 30 s"))
    for s in conns:
        s.close()
    served(d, "once the idle connections close")


def t_headers(a, d):
    for size in (64 * 1024, 1024 * 1024):
        s = socket.create_connection((HOST, d.port), timeout=10)
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: "
                      + b"a" * size + b"\r\n\r\n")
        except OSError:
            pass
        try:
            head = s.recv(4096)
        except OSError:
            head = b""
        s.close()
        st = head.split(b" ")[1] if head.startswith(b"HTTP/1.") else b"closed"
        check(st in (b"431", b"413", b"closed"), "a %d KiB header: %s"
              % (size // 1024, st.decode()))
    served(d, "after oversized headers")


def t_pipelined(a, d):
    body = json.dumps({"content": "hello world"}).encode()
    req = (b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: "
           b"application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (len(body), body))
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    s = socket.create_connection((HOST, d.port), timeout=10)
    s.sendall(get + req + get + req + b"GET /health HTTP/1.1\r\nHost: x\r\n"
              b"Connection: close\r\n\r\n")
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    s.close()
    n = data.count(b"HTTP/1.1 200")
    check(n == 5, "5 pipelined requests: %d answered 200 in one connection" % n)


def t_noread(a, d):
    rss0 = d.rss_kb()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((HOST, d.port))
    body = json.dumps({"prompt": "go", "max_tokens": 4000, "stream": True,
                       "temperature": 1.0,
                       # no end of text: the stream runs to max_tokens
                       "logit_bias": {"0": -100, "1": -100, "2": -100}}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
              b"application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body))
    t0 = time.monotonic()
    time.sleep(1)
    deadline = time.monotonic() + 60
    busy = None
    rss_max = rss0
    while time.monotonic() < deadline:
        rss_max = max(rss_max, d.rss_kb())
        busy = d.gauge("ember_slots_busy")
        if busy == 0:
            break
        time.sleep(0.2)
    check(busy == 0, "a never-reading stream frees its slot (ended or "
          "cancelled) %.1f s after it started" % (time.monotonic() - t0))
    check(rss_max - rss0 < 64 * 1024, "RSS grew %d KiB (bounded)"
          % (rss_max - rss0))
    s.close()
    served(d, "after the never-reading stream")


TESTS = {"slowloris": t_slowloris, "idle": t_idle, "headers": t_headers,
         "pipelined": t_pipelined, "noread": t_noread}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=",".join(TESTS))
    p.add_argument("--slow", type=int, default=200)
    p.add_argument("--idle", type=int, default=2000)
    a = p.parse_args()
    d = Daemon(synth("tiny"), "--slots=2", "--timeout=%d" % TIMEOUT,
               "--max-tokens=4000", "--context=4096")
    try:
        time.sleep(0.3)
        fds0 = d.fds()
        for name in a.only.split(","):
            print("# abuse:", name, flush=True)
            TESTS[name](a, d)
            check(d.alive(), "emberd alive after %s" % name)
        deadline = time.monotonic() + TIMEOUT * 4
        while d.fds() > fds0 and time.monotonic() < deadline:
            time.sleep(0.2)
        check(d.fds() <= fds0, "fds %d back to idle %d" % (d.fds(), fds0))
    finally:
        rc = d.stop()
    check(rc == 0, "exit 0")


if __name__ == "__main__":
    main()
