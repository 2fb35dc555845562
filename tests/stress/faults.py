#!/usr/bin/python3
"""Fault matrix against the real binaries (each fault a test).

- sigterm: SIGTERM while N streams run (more than the slots, so some
  wait): every stream ends with [DONE] or a clean error event, within
  drain_timeout, and emberd exits 0.
- sigkill: SIGKILL under load, then a restart on the same port: clients
  see connection errors, every complete SSE event they got parses; the
  restarted daemon serves.
- truncated: the model file cut short (and cut to its header): emberd
  refuses to start with a message, never a crash.
- changed: the model file truncated or rewritten in place while emberd
  runs: 503 naming the change, or (under a running job) exit 74 with a
  log line naming the file, never a wrong answer or a silent SIGBUS.
- diskfull: `ember quantize` and `ember synth` (the GGUF writer convert
  uses too) and `ember convert` with the output limited (RLIMIT_FSIZE,
  and a tiny tmpfs for a real ENOSPC when running as root): a non-zero
  exit with a message, no output file left behind.
- kvtiny: a tiny kv_cache_mb: requests that do not fit are refused with
  429/503 and a message, small ones still work, the daemon stays up.

Usage: faults.py [--only NAME,...] [--streams N]
"""
import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stresslib import (HOST, JSON, Daemon, build_dir, check, free_port,  # noqa: E402
                       sse_events,
                       synth, tmp_dir)


def stream_body(n=64):
    return json.dumps({"messages": [{"role": "user", "content": "tell me"}],
                       "max_tokens": n, "stream": True, "temperature": 0.8,
                       # no end of text: each stream runs to max_tokens
                       "logit_bias": {"0": -100, "1": -100, "2": -100}})


def read_stream(port, out, i, n=64):
    """out[i] = (status, raw bytes, exception or None)."""
    c = http.client.HTTPConnection(HOST, port, timeout=120)
    raw, st = b"", None
    try:
        c.request("POST", "/v1/chat/completions", stream_body(n), JSON)
        r = c.getresponse()
        st = r.status
        while True:
            b = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not b:
                break
            raw += b
        out[i] = (st, raw, None)
    except (OSError, http.client.HTTPException) as e:
        out[i] = (st, raw, e)
    finally:
        c.close()


def complete_events_parse(raw):
    """Every event terminated by a blank line is JSON or [DONE]."""
    for block in raw.split(b"\n\n")[:-1]:
        for e in sse_events(block + b"\n"):
            if e != b"[DONE]":
                json.loads(e)
    return True


def start_streams(a, d, n):
    """a.streams streams of n tokens against daemon d, each on its own
    thread into out[i]; returns (out, threads) once every stream is in
    (+1: the metrics scrape) and 4 are decoding, or after 30 s, so that a
    signal sent next finds them running."""
    out = [None] * a.streams
    th = [threading.Thread(target=read_stream, args=(d.port, out, i, n))
          for i in range(a.streams)]
    for t in th:
        t.start()
    deadline = time.monotonic() + 30
    while ((d.gauge("ember_requests_in_flight") or 0) < a.streams + 1 or
           (d.gauge("ember_slots_busy") or 0) < 4) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    return out, th


def t_sigterm(a):
    model = synth("demo")   # slower per token: streams are still running
    drain = 20
    d = Daemon(model, "--slots=4", "--drain-timeout=%d" % drain,
               "--max-tokens=1500", "--context=2048")
    out, th = start_streams(a, d, 1500)
    busy = d.gauge("ember_slots_busy")
    check(busy >= 1, "SIGTERM sent with %d streams decoding" % busy)
    t0 = time.monotonic()
    rc = d.stop(signal.SIGTERM, timeout=drain + 15)
    took = time.monotonic() - t0
    for t in th:
        t.join(timeout=30)
    check(rc == 0, "SIGTERM during %d streams: exit 0 after %.1f s"
          % (a.streams, took))
    check(took <= drain + 5, "exited within drain_timeout (%d s)" % drain)
    done = errs = 0
    for st, raw, exc in out:
        ev = sse_events(raw)
        check(exc is None, "stream ended cleanly (status %s, %r)" % (st, exc))
        complete_events_parse(raw)
        if st == 200 and ev and ev[-1] == b"[DONE]":
            done += 1
        elif st in (429, 503) or (ev and b"error" in ev[-1]):
            errs += 1
    check(done + errs == a.streams, "%d streams finished, %d refused/ended "
          "with an error event, none cut" % (done, errs))


def t_drain_timeout(a):
    """Streams longer than drain_timeout: each still ends with a clean
    final event (an error event naming the shutdown), not a cut
    connection, and emberd exits 0 soon after drain_timeout."""
    model = synth("demo")
    drain = 1
    d = Daemon(model, "--slots=4", "--drain-timeout=%d" % drain,
               "--max-tokens=4000", "--context=4096")
    out, th = start_streams(a, d, 4000)
    t0 = time.monotonic()
    rc = d.stop(signal.SIGTERM, timeout=drain + 15)
    took = time.monotonic() - t0
    for t in th:
        t.join(timeout=30)
    check(rc == 0, "SIGTERM with drain_timeout %d s: exit 0 after %.1f s"
          % (drain, took))
    check(took <= drain + 2 + 10, "exited after drain_timeout + the 2 s "
          "grace (+ slack for a loaded machine)")
    for st, raw, exc in out:
        check(exc is None, "response complete (status %s, %r)" % (st, exc))
        if st != 200:
            msg = json.loads(raw)["error"]["message"]
            check(st == 503 and "shutting down" in msg,
                  "a queued stream: %d %s" % (st, msg))
            continue
        ev = sse_events(raw)
        complete_events_parse(raw)
        check(len(ev) >= 2 and ev[-1] == b"[DONE]"
              and b"shutting down" in ev[-2],
              "a running stream ended with an error event then [DONE]: %r"
              % ev[-2:])


def t_sigkill(a):
    model = synth("tiny")
    d = Daemon(model, "--slots=2", "--queue=8", "--max-tokens=64")
    port = d.port
    stop = time.monotonic() + 4
    res = {"ok": 0, "conn": 0, "corrupt": []}
    lock = threading.Lock()

    def loop():
        while time.monotonic() < stop:
            out = [None]
            read_stream(port, out, 0, 48)
            st, raw, exc = out[0]
            try:
                complete_events_parse(raw)
            except ValueError as e:
                with lock:
                    res["corrupt"].append(repr(e))
            with lock:
                if exc is None and st is not None:
                    res["ok"] += 1
                else:
                    res["conn"] += 1
            if exc is not None:
                time.sleep(0.05)

    th = [threading.Thread(target=loop) for _ in range(6)]
    for t in th:
        t.start()
    time.sleep(1.5)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(timeout=10)
    d.log.close()
    time.sleep(0.5)
    d2 = Daemon(model, "--slots=2", "--queue=8", "--max-tokens=64", port=port)
    for t in th:
        t.join(timeout=60)
    check(not res["corrupt"], "no corrupt output across SIGKILL (%s)"
          % res["corrupt"][:3])
    check(res["conn"] > 0 and res["ok"] > 0,
          "clients saw %d answers and %d connection errors"
          % (res["ok"], res["conn"]))
    st, _, _ = d2.request("POST", "/v1/completions",
                          {"prompt": "hi", "max_tokens": 4})
    check(st == 200, "restarted emberd on the same port serves")
    check(d2.stop() == 0, "restarted emberd exits 0")


def t_truncated(a):
    """A model that fails to load leaves the daemon up (systemd READY) with
    /health 503 naming the reason, generation 503, and the reason in the
    log (it was only in /health and sd_notify's STATUS before)."""
    model = synth("tiny")
    size = os.path.getsize(model)
    for name, cut in (("half", size // 2), ("header", 64),
                      ("last byte", size - 1), ("empty", 0)):
        p = os.path.join(tmp_dir(), "cut-%d.gguf" % cut)
        with open(model, "rb") as f, open(p, "wb") as g:
            g.write(f.read(cut))
        d = Daemon(p, ready_s=60, ready_status=503)
        st, _, body = d.request("GET", "/health")
        msg = json.loads(body).get("message", "")
        check(st == 503 and msg, "model truncated (%s): /health 503: %s"
              % (name, msg[:120]))
        st, _, body = d.request("POST", "/v1/completions",
                                {"prompt": "hi", "max_tokens": 2})
        check(st == 503, "generation refused with 503 (%s)" % name)
        # ready_cb logs it on its next 20 ms poll.
        deadline = time.monotonic() + 10
        while ("model failed to load: " + msg not in d.log_text() and
               time.monotonic() < deadline):
            time.sleep(0.05)
        check(d.stop() == 0, "exit 0")
        check("model failed to load: " + msg in d.log_text(),
              "the reason is in the log (%s)" % name)


def t_changed(a):
    """The model file changed while emberd runs (model_watch.h). Rewritten
    in place or truncated between jobs: the next job and /health get 503
    naming the change (before: answers from whatever bytes the mapping then
    showed, or SIGBUS). Truncated under a running generation: SIGBUS on the
    mapping is one log line naming the file and exit 74 (before: killed by
    SIGBUS, no word in the log)."""
    model = synth("tiny")
    size = os.path.getsize(model)
    p = os.path.join(tmp_dir(), "changed.gguf")
    gen = {"prompt": "hi", "max_tokens": 4}
    for how in ("truncated", "rewritten"):
        shutil.copyfile(model, p)
        d = Daemon(p)
        st, _, _ = d.request("POST", "/v1/completions", gen)
        check(st == 200, "served before the change (%s)" % how)
        if how == "truncated":
            os.truncate(p, size // 2)
        else:
            time.sleep(0.01)  # a distinct mtime, even on a coarse clock
            with open(p, "r+b") as f:
                f.write(open(model, "rb").read(16))
        st, _, body = d.request("POST", "/v1/completions", gen)
        msg = json.loads(body)["error"]["message"]
        check(st == 503 and "changed on disk" in msg,
              "model %s in place: generation 503: %s" % (how, msg[:100]))
        st, _, body = d.request("GET", "/health")
        check(st == 503 and "changed on disk" in json.loads(body)["message"],
              "/health 503 names the change (%s)" % how)
        check(d.stop() == 0, "exit 0 (%s)" % how)
        check("changed on disk" in d.log_text(), "the change is logged (%s)" % how)
    # Truncated under a running generation.
    shutil.copyfile(model, p)
    d = Daemon(p, "--max-tokens=100000", "--context=4096")
    out = [None]
    t = threading.Thread(target=read_stream, args=(d.port, out, 0, 4000))
    t.start()
    deadline = time.monotonic() + 30
    while d.gauge("ember_slots_busy") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.truncate(p, 64)
    try:
        rc = d.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rc = None
    t.join(60)
    log = d.log_text()
    if rc is None:
        d.stop()
    check(rc == 74, "truncated under a generation: emberd exits 74 (got %s)" % rc)
    check("SIGBUS reading the model file %s at offset" % p in log,
          "the log names the file: %s" % log.strip().splitlines()[-1][:160])


def limited(limit):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def try_tmpfs(path, size):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    os.makedirs(path, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size,
                           "tmpfs", path], capture_output=True).returncode == 0


def t_diskfull(a):
    ember = os.path.join(build_dir(), "ember")
    src = synth("tiny", "f32")
    hf = os.path.join(os.environ.get("SHARED", "../shared"), "golden/llama/hf")
    jobs = [("quantize", lambda o: [ember, "quantize", src, o, "-q", "int8"]),
            ("synth", lambda o: [ember, "synth", "--preset", "tiny",
                                 "--type", "q8_0", "-o", o])]
    if os.path.isdir(hf):
        jobs.append(("convert", lambda o: [ember, "convert", hf, o, "-q", "f32"]))
    for name, cmd in jobs:
        outdir = os.path.join(tmp_dir(), "out-" + name)
        os.makedirs(outdir, exist_ok=True)
        out = os.path.join(outdir, "m.gguf")
        r = subprocess.run(cmd(out), capture_output=True, text=True,
                           timeout=300, preexec_fn=limited(100000))
        check(r.returncode != 0 and r.stderr.strip(),
              "%s past RLIMIT_FSIZE: exit %d: %s" % (
                  name, r.returncode,
                  (r.stderr.strip().splitlines() or [""])[-1][:160]))
        check(os.listdir(outdir) == [], "%s left no output file (%s)"
              % (name, os.listdir(outdir)))
        mnt = os.path.join(tmp_dir(), "full-" + name)
        if try_tmpfs(mnt, 128 * 1024):
            try:
                r = subprocess.run(cmd(os.path.join(mnt, "m.gguf")),
                                   capture_output=True, text=True, timeout=300)
                check(r.returncode != 0 and r.stderr.strip(),
                      "%s on a full tmpfs: exit %d: %s" % (
                          name, r.returncode,
                          (r.stderr.strip().splitlines() or [""])[-1][:160]))
                check(os.listdir(mnt) == [], "%s left nothing on the full "
                      "disk (%s)" % (name, os.listdir(mnt)))
            finally:
                subprocess.run(["umount", mnt])
        else:
            print("skip - no tmpfs (not root or mount refused)")


def t_kvtiny(a):
    model = synth("demo")   # 4 MiB of KV cache per 2048-position context
    d = Daemon(model, "--slots=2", "--context=2048", "--kv-cache-mb=1",
               ready_status=503)
    st, _, body = d.request("GET", "/health")
    msg = json.loads(body).get("message", "")
    check(st == 503 and "kv cache budget" in msg,
          "kv_cache_mb below one context: /health 503: %s" % msg[:120])
    check(d.stop() == 0, "exit 0")
    # Room for one context, two slots, four clients with long prompts.
    d = Daemon(model, "--slots=2", "--context=2048", "--kv-cache-mb=4",
               "--queue=1", "--max-tokens=16")
    long_prompt = " ".join(["word"] * 500)
    res = [None] * 4

    def one(i):
        try:
            res[i] = d.request("POST", "/v1/completions",
                               {"prompt": long_prompt, "max_tokens": 16},
                               timeout=240)
        except OSError as e:
            res[i] = (None, {}, repr(e).encode())
    th = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in th:
        t.start()
    for t in th:
        t.join(timeout=300)
    for st, _, body in res:
        if st == 200:
            continue
        e = json.loads(body)["error"] if st else {"message": body}
        check(st in (429, 503) and e["message"],
              "refused with %s: %s" % (st, e["message"][:120]))
    print("statuses:", [r[0] for r in res])
    check(d.alive(), "daemon up after a full KV cache")
    st, _, _ = d.request("POST", "/v1/completions",
                         {"prompt": "hi", "max_tokens": 2})
    check(st == 200, "a small request still served")
    check(d.stop() == 0, "exit 0")


TESTS = {"sigterm": t_sigterm, "drain_timeout": t_drain_timeout, "sigkill": t_sigkill, "truncated": t_truncated,
         "changed": t_changed,
         "diskfull": t_diskfull, "kvtiny": t_kvtiny}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=",".join(TESTS))
    p.add_argument("--streams", type=int, default=8)
    a = p.parse_args()
    for name in a.only.split(","):
        print("# fault:", name, flush=True)
        TESTS[name](a)


if __name__ == "__main__":
    main()
