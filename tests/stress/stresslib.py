"""Shared helpers for the stress and fault drivers (tests/stress/); the
Python integration tests (tests/integration/) take check() and
free_port() from here too.

Starts the real emberd on 127.0.0.1 with a model (a synthesized tiny one
unless given), reads its /metrics, RSS and open file descriptors from
/proc, and speaks HTTP with the standard library only. Every wait is
bounded. Nothing here asserts timing; the drivers assert counts.
"""
import atexit
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
JSON = {"Content-Type": "application/json"}
# Statuses the README documents for well-formed requests under load:
# 200/201 served, 429 queue or sessions full, 503 KV cache / draining.
DOCUMENTED = {200, 201, 429, 503}


def build_dir():
    return os.environ.get("BUILD", "build")


def tmp_dir():
    d = os.environ.get("TMPDIR")
    if d:
        return d
    return tempfile.mkdtemp(prefix="ember-stress-")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def synth(preset="tiny", qtype="q8_0"):
    path = os.path.join(tmp_dir(), "%s-%s.gguf" % (preset, qtype))
    if not os.path.exists(path):
        subprocess.run([os.path.join(build_dir(), "ember"), "synth",
                        "--preset", preset, "--type", qtype, "-o", path],
                       check=True, capture_output=True, timeout=300)
    return path


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    # one write: checks from several threads keep a line each
    sys.stdout.write("ok - %s\n" % what)
    sys.stdout.flush()


_STARTED = []


@atexit.register
def _kill_leftovers():
    """A failed check must not leave an emberd running."""
    for p in _STARTED:
        if p.poll() is None:
            p.kill()
            p.wait()


class Daemon:
    """One emberd process; `flags` are extra --key=value flags."""

    def __init__(self, model, *flags, port=None, ready_s=60, ready_status=200):
        self.port = port or free_port()
        self.model = model
        self.logpath = os.path.join(tmp_dir(), "emberd-%d.log" % self.port)
        self.log = open(self.logpath, "a+")
        args = [os.path.join(build_dir(), "emberd"), "--port=%d" % self.port,
                "--threads=1"]
        args += ["--model=" + model] if model else ["--no-model"]
        self.proc = subprocess.Popen(args + list(flags), stderr=self.log,
                                     stdout=subprocess.DEVNULL)
        _STARTED.append(self.proc)
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("emberd exited %d: %s"
                                     % (self.proc.returncode, self.log_text()))
            try:
                st, _, body = self.request("GET", "/health", timeout=2)
                if st == ready_status and b'"loading"' not in body:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        raise AssertionError("emberd did not become ready")

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.logpath) as f:
            return f.read()

    def request(self, method, path, body=None, timeout=60, headers=None):
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            if body is not None and not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or JSON)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def metrics(self):
        st, _, body = self.request("GET", "/metrics", timeout=10)
        if st != 200:
            raise AssertionError("/metrics: %d" % st)
        return body.decode()

    def gauge(self, name):
        m = re.search(r"^%s (\d+)$" % re.escape(name), self.metrics(), re.M)
        return int(m.group(1)) if m else None

    def requests_by_status(self, skip=("metrics", "health")):
        """{status: count} from ember_requests_total, minus the endpoints
        the driver itself polls."""
        out = {}
        for ep, st, n in re.findall(
                r'^ember_requests_total\{endpoint="([^"]*)",status="(\d+)"\} (\d+)$',
                self.metrics(), re.M):
            if any(s in ep for s in skip):
                continue
            out[int(st)] = out.get(int(st), 0) + int(n)
        return out

    def wait_gauge(self, name, value, timeout=30):
        deadline = time.monotonic() + timeout
        v = None
        while time.monotonic() < deadline:
            v = self.gauge(name)
            if v == value:
                return v
            time.sleep(0.1)
        return v

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("emberd did not exit on signal %d" % sig)
        self.log.close()
        return rc


def sse_events(data):
    """The `data:` payloads of an SSE body, in order."""
    out = []
    for line in data.split(b"\n"):
        if line.startswith(b"data: "):
            out.append(line[6:])
    return out
