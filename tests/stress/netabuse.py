#!/usr/bin/python3
"""Network abuse on loopback against the real emberd.

- slowloris: many connections sending a request header a byte a second;
  header_timeout closes them while they still trickle (before: never, as
  libmicrohttpd's timeout is an idle timeout), and a real client is served
  meanwhile.
- idle: as many idle connections as asked (10,000 in `make stress`) held
  at once by a daemon with a long header_timeout: a new client is served
  while they are open; fds return to the idle count once they close.
- headers: an oversized header block gets 431 or 413, the daemon stays up.
- pipelined: several requests in one write get their answers in order.
- noread: a streaming client that never reads: once stream_buffer_kb of
  its stream is unread the generation is cancelled (before: it ran to
  max_tokens, its text queued on the server), its slot frees, RSS stays
  bounded.
- noread_ollama: the same for Ollama's /api/generate and /api/chat.

Usage: netabuse.py [--only NAME,...] [--slow N] [--idle N]
"""
import argparse
import json
import os
import re
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stresslib import HOST, Daemon, check, synth  # noqa: E402

TIMEOUT = 3   # emberd --timeout for these tests: idle connections close
HEADER_TIMEOUT = 2  # --header-timeout: a request header's deadline
STREAM_KB = 32      # --stream-buffer-kb: unread stream bytes before cancel


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
    """A connection sending a header byte a second is closed
    header_timeout after it opened (libmicrohttpd's timeout alone is an
    idle timeout: before header_timeout they were all still open after 9 s
    of trickling); real clients are served while the loris trickles."""
    cut0 = d.gauge("ember_header_timeouts_total") or 0
    conns = []
    for _ in range(a.slow):
        s = socket.create_connection((HOST, d.port))
        s.setblocking(False)
        conns.append(s)
    # One more that gets an answer first: kept alive, its next header is
    # due timeout + header_timeout after that answer.
    ka = socket.create_connection((HOST, d.port), timeout=10)
    ka.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    check(ka.recv(4096).startswith(b"HTTP/1.1 200"), "kept-alive loris "
          "answered once")
    ka.setblocking(False)
    conns.append(ka)
    line = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    t0 = time.monotonic()
    for i in range(3 * TIMEOUT):
        for s in conns:
            try:
                s.send(line[i:i + 1])
            except OSError:
                pass
        if i == 1 or i == 2 * TIMEOUT:
            served(d, "while %d slowloris connections trickle (%.0f s)"
                   % (a.slow, time.monotonic() - t0))
        time.sleep(1)
    alive = sum(1 for s in conns if not closed(s, 0.01))
    check(alive == 0, "%d/%d slowloris connections still open after %.0f s "
          "of a byte a second (header_timeout %d s, timeout %d s)"
          % (alive, len(conns), time.monotonic() - t0, HEADER_TIMEOUT,
             TIMEOUT))
    cut = (d.gauge("ember_header_timeouts_total") or 0) - cut0
    check(cut >= len(conns), "ember_header_timeouts_total counts them: %d"
          % cut)
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
    """N idle connections held at once (a daemon of its own, with a
    header_timeout longer than the test: the point is holding them, and
    max_connections is 16,384 by default, with RLIMIT_NOFILE raised to fit):
    a new client is served while they are all open; its fds come back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(a.idle, hard - 64)
    if soft < want + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want + 64, hard))
    d2 = Daemon(synth("tiny"), "--timeout=120", "--header-timeout=120")
    try:
        fds0 = d2.fds()
        rss0 = d2.rss_kb()
        conns, refused = [], 0
        t0 = time.monotonic()
        for _ in range(want):
            try:
                conns.append(socket.create_connection((HOST, d2.port),
                                                      timeout=5))
            except OSError:
                refused += 1
        print("opened %d idle connections in %.1f s (%d refused)"
              % (len(conns), time.monotonic() - t0, refused))
        deadline = time.monotonic() + 60
        n = 0
        while time.monotonic() < deadline:
            n = d2.gauge("ember_connections") or 0
            if n >= len(conns):
                break
            time.sleep(0.2)
        check(n >= len(conns) == want, "emberd holds %d idle connections at "
              "once (RSS %d -> %d KiB)" % (n, rss0, d2.rss_kb()))
        took = try_health(d2, 30)
        check(took is not None, "with %d idle connections open a new client "
              "is served (in %.2f s)" % (want, took or -1))
        for s in conns:
            s.close()
        served(d2, "once the idle connections close")
        deadline = time.monotonic() + 30
        while d2.fds() > fds0 and time.monotonic() < deadline:
            time.sleep(0.2)
        check(d2.fds() <= fds0, "fds %d back to idle %d" % (d2.fds(), fds0))
    finally:
        rc = d2.stop()
    check(rc == 0, "exit 0 (idle daemon)")


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
                       # ~0.3 KiB a token whatever the wake-ups coalesce:
                       # the stream outgrows the buffers well before 4000
                       "logprobs": 5,
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
    check(busy == 0, "a never-reading stream frees its slot %.1f s after "
          "it started" % (time.monotonic() - t0))
    check(d.gauge("ember_streams_unread_total") == 1, "it was cancelled as "
          "unread (ember_streams_unread_total 1)")
    check(rss_max - rss0 < 16 * 1024, "RSS grew %d KiB (bounded)"
          % (rss_max - rss0))
    s.close()
    # The access log's line for it: its tokens, well short of max_tokens.
    deadline = time.monotonic() + 10
    gen = None
    while gen is None and time.monotonic() < deadline:
        m = re.findall(r"POST /v1/completions 200 .*gen=(\d+)", d.log_text())
        gen = int(m[-1]) if m else None
        time.sleep(0.1)
    check(gen is not None and gen < 2000, "the log shows it cut at %s of "
          "4000 tokens" % gen)
    served(d, "after the never-reading stream")


def t_noread_ollama(a, d):
    """Ollama's streams (/api/generate, /api/chat: NDJSON) follow the same
    rule: a client that never reads is cancelled once stream_buffer_kb is
    unread, its slot freed, RSS bounded. Ollama has no logit_bias to
    forbid the end token (the synthetic model meets it within a few
    hundred tokens), so a format does: an array of 100 strings of 1000
    characters or more cannot end within num_predict. Ollama's lines carry
    no per-token record like logprobs and coalesce (~10 tokens a line), so
    4000 tokens are ~40 KB, less than the socket buffers and
    stream_buffer_kb hold: this daemon has the smallest buffer (16 KiB)
    and a 32K context so the stream can outgrow them."""
    d2 = Daemon(d.model, "--slots=1", "--stream-buffer-kb=16", "--context=32768",
                "--max-tokens=32000")
    model = os.path.splitext(os.path.basename(d.model))[0]
    fmt = {"type": "array", "minItems": 100, "items": {"type": "string", "minLength": 1000}}
    try:
        for path, extra in (("/api/generate", {"prompt": "go"}),
                            ("/api/chat", {"messages": [{"role": "user", "content": "go"}]})):
            unread0 = d2.gauge("ember_streams_unread_total") or 0
            rss0 = d2.rss_kb()
            kv0 = d2.gauge("ember_kv_cache_bytes") or 0
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((HOST, d2.port))
            body = json.dumps(dict(extra, model=model, format=fmt, options={
                "num_predict": 32000, "temperature": 0})).encode()
            s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
            t0 = time.monotonic()
            time.sleep(1)
            deadline = time.monotonic() + 90
            busy, rss_max, kv = None, rss0, kv0
            while time.monotonic() < deadline:
                rss_max = max(rss_max, d2.rss_kb())
                kv = max(kv, d2.gauge("ember_kv_cache_bytes") or 0)
                busy = d2.gauge("ember_slots_busy")
                if busy == 0:
                    break
                time.sleep(0.2)
            check(busy == 0, "%s: a never-reading stream frees its slot %.1f s after it "
                  "started" % (path, time.monotonic() - t0))
            check(d2.gauge("ember_streams_unread_total") == unread0 + 1, "%s: it was "
                  "cancelled as unread (ember_streams_unread_total %d)" % (path, unread0 + 1))
            # The KV cache fills as the sequence grows: not the stream's.
            grew = rss_max - rss0 - (kv - kv0) // 1024
            check(grew < 16 * 1024, "%s: RSS grew %d KiB besides the KV cache (bounded)"
                  % (path, grew))
            s.close()
            deadline = time.monotonic() + 10
            gen = None
            while gen is None and time.monotonic() < deadline:
                m = re.findall(r"POST %s 200 .*gen=(\d+)" % path, d2.log_text())
                gen = int(m[-1]) if m else None
                time.sleep(0.1)
            check(gen is not None and gen < 30000, "%s: the log shows it cut at %s of "
                  "32000 tokens" % (path, gen))
        served(d2, "after the never-reading Ollama streams")
    finally:
        check(d2.stop() == 0, "the 16 KiB-buffer daemon exits 0")


TESTS = {"slowloris": t_slowloris, "idle": t_idle, "headers": t_headers,
         "pipelined": t_pipelined, "noread": t_noread, "noread_ollama": t_noread_ollama}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=",".join(TESTS))
    p.add_argument("--slow", type=int, default=200)
    p.add_argument("--idle", type=int, default=2000)
    a = p.parse_args()
    d = Daemon(synth("tiny"), "--slots=2", "--timeout=%d" % TIMEOUT,
               "--header-timeout=%d" % HEADER_TIMEOUT,
               "--stream-buffer-kb=%d" % STREAM_KB,
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
