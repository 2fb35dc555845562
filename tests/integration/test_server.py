#!/usr/bin/python3
"""Drives the real build/emberd over loopback HTTP (no model: --no-model).

Checks health, routing errors (404, 405 + Allow), body limits (413 for a
declared and for a chunked body), request validation (400 with the OpenAI
error shape and param, 415), 503 after validation without a model, API keys
(401 / 200), CORS (preflight and simple requests), /metrics text, the idle
connection timeout, a second daemon refused on a taken port, and shutdown:
SIGTERM drains an in-flight request and exits 0, a second SIGINT exits at
once. Every wait is bounded.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

# check() and free_port(), shared with the stress drivers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stress"))
from stresslib import check, free_port  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
EMBERD = os.path.join(BUILD, "emberd")
HOST = "127.0.0.1"


class Daemon:
    def __init__(self, *flags):
        self.port = free_port()
        args = [EMBERD, "--no-model", "--port=%d" % self.port] + list(flags)
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("emberd exited: %s" % self.proc.stderr.read())
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("emberd did not start listening")

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection(HOST, self.port, timeout=10)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise AssertionError("emberd did not exit on SIGTERM")
        self.proc.stderr.close()
        return rc


def error_of(body):
    e = json.loads(body)["error"]
    check(set(e) == {"message", "type", "param", "code"},
          "error has message/type/param/code: %s" % e)
    return e


JSON = {"Content-Type": "application/json"}
CHAT = "/v1/chat/completions"
GOOD = '{"messages":[{"role":"user","content":"hi"}]}'

BAD_ROWS = [  # (path, body, status, type, param)
    (CHAT, "{", 400, "invalid_request_error", None),
    (CHAT, '{"messages":[]}', 400, "invalid_request_error", "messages"),
    (CHAT, '{"messages":[{"role":"x","content":"a"}]}', 400,
     "invalid_request_error", "messages[0].role"),
    (CHAT, GOOD[:-1] + ',"temperature":5}', 400, "invalid_request_error",
     "temperature"),
    (CHAT, GOOD[:-1] + ',"max_tokens":-1}', 400, "invalid_request_error",
     "max_tokens"),
    (CHAT, GOOD[:-1] + ',"n":0}', 400, "invalid_request_error", "n"),
    (CHAT, GOOD[:-1] + ',"top_p":0}', 400, "invalid_request_error", "top_p"),
    (CHAT, '{"a":1,"a":1}', 400, "invalid_request_error", None),
    (CHAT, '{"x":' + "[" * 200 + "]" * 200 + "}", 400,
     "invalid_request_error", None),
    ("/v1/completions", '{"prompt":[1,"a"]}', 400, "invalid_request_error",
     "prompt"),
]


def test_basics(d):
    st, h, b = d.request("GET", "/health")
    check(st == 503 and json.loads(b) == {"status": "no_model"},
          "health is 503 without a model")
    st, h, b = d.request("GET", "/nope")
    check(st == 404 and error_of(b)["type"] == "invalid_request_error",
          "unknown path is 404")
    st, h, b = d.request("GET", CHAT)
    check(st == 405 and h.get("Allow") == "POST", "wrong method is 405 + Allow")
    error_of(b)
    for path, body, status, typ, param in BAD_ROWS:
        st, h, b = d.request("POST", path, body.encode(), JSON)
        e = error_of(b)
        check(st == status and e["type"] == typ and e["param"] == param,
              "%s %.40s -> %d %s %s" % (path, body, status, typ, param))
    st, h, b = d.request("POST", CHAT, GOOD, {"Content-Type": "text/plain"})
    check(st == 415, "wrong Content-Type is 415")
    st, h, b = d.request("POST", CHAT, GOOD, JSON)
    e = error_of(b)
    check(st == 503 and e["code"] == "model_not_loaded",
          "valid request without a model is 503 model_not_loaded")
    st, h, b = d.request("GET", "/v1/models")
    check(st == 200 and json.loads(b) == {"object": "list", "data": []},
          "models lists nothing without a model")


def raw_exchange(port, data, timeout=5):
    """Sends bytes, returns everything read until close or timeout."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
            if b"\r\n\r\n" in out and b'"error"' in out and out.endswith(b"}}"):
                break
    finally:
        s.close()
    return out


def test_body_limit(d):
    # Declared too large: answered from the headers, before any body byte.
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 5000\r\n\r\n" % CHAT).encode()
    out = raw_exchange(d.port, head)
    check(out.startswith(b"HTTP/1.1 413"), "declared oversized body is 413")
    check(b"request_too_large" in out, "413 carries the error body")
    # Chunked past the limit: read, dropped, then 413.
    chunk = b"x" * 3000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2))
    req = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n" % CHAT).encode() + body + b"0\r\n\r\n"
    out = raw_exchange(d.port, req)
    check(out.startswith(b"HTTP/1.1 413"), "chunked oversized body is 413")
    st, h, b = d.request("POST", CHAT, b" " * 3000 + GOOD.encode(), JSON)
    check(st == 503, "a body under the limit passes")


def test_metrics(d):
    st, h, b = d.request("GET", "/metrics")
    text = b.decode()
    check(st == 200 and h.get("Content-Type", "").startswith("text/plain"),
          "metrics is text/plain")
    line = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? '
                      r'[0-9.e+-]+$')
    for ln in text.splitlines():
        if ln.startswith("#"):
            check(re.match(r"^# (HELP|TYPE) [a-z_]+ .+$", ln), "comment: " + ln)
        else:
            check(line.match(ln), "sample: " + ln)
    check('ember_requests_total{endpoint="health",status="503"}' in text,
          "requests are counted by endpoint and status")
    check("ember_request_duration_seconds_bucket" in text, "duration histogram")


def test_auth():
    d = Daemon("--api-key=k1,k2", "--timeout=5")
    try:
        st, h, b = d.request("GET", "/v1/models")
        check(st == 401 and error_of(b)["type"] == "authentication_error",
              "no key is 401")
        check(h.get("WWW-Authenticate") == "Bearer", "401 asks for Bearer")
        st, h, b = d.request("GET", "/v1/models",
                             headers={"Authorization": "Bearer k3"})
        check(st == 401, "wrong key is 401")
        st, h, b = d.request("GET", "/v1/models",
                             headers={"Authorization": "Bearer k2"})
        check(st == 200, "right key is 200")
        st, h, b = d.request("GET", "/health")
        check(st == 503, "health needs no key")
        st, h, b = d.request("GET", "/metrics")
        check(st == 401, "metrics needs the key")
    finally:
        check(d.stop() == 0, "auth daemon exits 0")


def test_cors():
    origin = "http://app.example"
    d = Daemon("--cors-origins=" + origin, "--timeout=5")
    try:
        pre = {"Origin": origin, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization,content-type"}
        st, h, b = d.request("OPTIONS", CHAT, headers=pre)
        check(st == 204, "preflight is 204")
        check(h.get("Access-Control-Allow-Origin") == origin, "echoes origin")
        check("POST" in h.get("Access-Control-Allow-Methods", ""),
              "allows POST")
        # header names are case-insensitive; the requested ones are echoed
        check("authorization" in h.get("Access-Control-Allow-Headers", "").lower(),
              "allows the Authorization header")
        pre["Origin"] = "http://evil.example"
        st, h, b = d.request("OPTIONS", CHAT, headers=pre)
        check(st == 403 and "Access-Control-Allow-Origin" not in h,
              "unlisted origin preflight is refused")
        st, h, b = d.request("GET", "/v1/models", headers={"Origin": origin})
        check(st == 200 and h.get("Access-Control-Allow-Origin") == origin
              and h.get("Vary") == "Origin", "simple request gets CORS headers")
    finally:
        check(d.stop() == 0, "cors daemon exits 0")


def test_idle_timeout(d, timeout_s):
    s = socket.create_connection((HOST, d.port), timeout=timeout_s + 5)
    t0 = time.monotonic()
    try:
        data = s.recv(1)
    except ConnectionResetError:
        data = b""
    s.close()
    check(data == b"" and time.monotonic() - t0 < timeout_s + 5,
          "idle connection is closed by the timeout")


def partial_request(port):
    """A request whose body is not complete yet: in flight on the server."""
    s = socket.create_connection((HOST, port), timeout=10)
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               "\r\nContent-Length: %d\r\n\r\n" % (CHAT, len(GOOD))).encode()
              + GOOD[:10].encode())
    return s


def wait_exit(proc, limit):
    try:
        return proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        return None


def test_sigterm_drains():
    d = Daemon("--drain-timeout=20", "--timeout=30")
    s = partial_request(d.port)
    time.sleep(0.2)  # let the server see the headers
    d.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    check(d.proc.poll() is None, "SIGTERM waits for the request in flight")
    s.sendall(GOOD[10:].encode())
    resp = b""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            break
        resp += chunk
    s.close()
    check(resp.startswith(b"HTTP/1.1 503"), "the in-flight request is answered")
    check(wait_exit(d.proc, 20) == 0, "SIGTERM exits 0 after draining")
    d.proc.stderr.close()


def test_second_sigint():
    d = Daemon("--drain-timeout=60", "--timeout=60")
    s = partial_request(d.port)
    time.sleep(0.2)
    d.proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    check(d.proc.poll() is None, "first SIGINT starts draining")
    d.proc.send_signal(signal.SIGINT)
    rc = wait_exit(d.proc, 10)
    s.close()
    check(rc == 130, "second SIGINT exits at once (130), got %r" % rc)
    d.proc.stderr.close()


def test_port_in_use(d):
    """A second emberd on a port another one listens on refuses to start
    (before: SO_REUSEPORT let both bind, and the kernel spread connections
    between them, so clients were silently answered by either daemon; a
    test whose free port a concurrent test's daemon also took talked to
    both). The first keeps serving its own clients, all of them."""
    p = subprocess.Popen([EMBERD, "--no-model", "--port=%d" % d.port, "--timeout=2"],
                         stderr=subprocess.PIPE, text=True)
    rc = wait_exit(p, 10)
    err = p.stderr.read()
    p.stderr.close()
    check(rc is not None and rc != 0 and "cannot listen" in err,
          "a second emberd on a taken port exits with an error (%r): %s" % (rc, err.strip()))
    for _ in range(8):
        st, _, _ = d.request("GET", "/health")
        check(st == 503, "the first still answers on its port")


def main():
    if not os.path.exists(EMBERD):
        sys.exit("missing " + EMBERD)
    out = subprocess.run([EMBERD], capture_output=True, text=True, timeout=10)
    check(out.returncode == 2 and "no model configured" in out.stderr,
          "emberd without a model refuses to start")
    out = subprocess.run([EMBERD, "--help"], capture_output=True, text=True,
                         timeout=10)
    check(out.returncode == 0 and "--max_body=" in out.stdout, "--help lists keys")
    d = Daemon("--max-body=4096", "--timeout=2")
    try:
        test_basics(d)
        test_body_limit(d)
        test_metrics(d)
        test_idle_timeout(d, 2)
        test_port_in_use(d)
        st, h, b = d.request("GET", "/health")
        check(st == 503, "still serving after all that")
    finally:
        check(d.stop() == 0, "daemon exits 0 on SIGTERM")
    test_auth()
    test_cors()
    test_sigterm_drains()
    test_second_sigint()
    print("all passed")


if __name__ == "__main__":
    main()
