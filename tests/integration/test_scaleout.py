#!/usr/bin/python3
"""Two emberd replicas behind HAProxy on loopback, with docker/haproxy.cfg
itself (only its addresses rewritten): what docker/compose.yaml runs,
without containers.

Checks: stateless load spreads over both replicas (leastconn); a replica
whose queue is full answers 503 (full_status) and HAProxy retries the
request on the other; sessions are named by their replica (replica_id) and
every request on one goes to that replica; SIGTERM to one replica in the
middle of a load loses no request (its requests in flight drain, new ones
are retried on the survivor) and that replica's sessions then get a prompt
404 session_not_found from the survivor, naming the lost replica. Prints
the figures the README's "Scaling out" section quotes.
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

# check() and free_port(), shared with the stress drivers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stress"))
from stresslib import check, free_port  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
ROOT = os.environ.get("ROOT", ".")
TMP = os.environ["TMPDIR"]
HOST = "127.0.0.1"
JSON = {"Content-Type": "application/json"}


def wait_port(port, proc, what):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on {port}")


class Replica:
    def __init__(self, model, name, *flags):
        self.name = name
        self.port = free_port()
        self.logpath = os.path.join(TMP, f"{name}.log")
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "emberd"), "--model=" + model,
             f"--port={self.port}", "--threads=1", f"--replica_id={name}",
             "--full_status=503", "--drain_timeout=30"] + list(flags),
            stderr=open(self.logpath, "w"))
        wait_port(self.port, self.proc, name)
        # The model loads after the port opens (/health and generation
        # answer 503 meanwhile): a replica joins the balancer once ready,
        # as HAProxy's health check would have it, so a start that takes
        # longer (ASan, a start-up self-test) is not counted as "full".
        deadline = time.monotonic() + 60
        while request(self.port, "GET", "/health")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        check(request(self.port, "GET", "/health")[0] == 200, f"{name} ready")

    def metric(self, name):
        _, _, raw = request(self.port, "GET", "/metrics")
        m = re.search(r"^%s (\S+)$" % name, raw.decode(), re.M)
        return float(m.group(1)) if m else None

    def wait_idle(self):
        deadline = time.monotonic() + 30
        while (self.metric("ember_slots_busy"), self.metric("ember_queue_depth")) \
                != (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        check((self.metric("ember_slots_busy"), self.metric("ember_queue_depth"))
              == (0, 0), f"{self.name} idle")

    def statuses(self, path):
        """Statuses of the requests to `path` in this replica's log."""
        with open(self.logpath) as f:
            return [int(m.group(1)) for m in
                    re.finditer(r"POST %s (\d{3}) " % re.escape(path), f.read())]


def request(port, method, path, body=None, timeout=60):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers=JSON if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, r.getheader("X-Ember-Replica"), data


def completion(port):
    return request(port, "POST", "/v1/completions",
                   {"prompt": "The replica", "max_tokens": 48})


def load(port, n, conc, results, on_progress=None):
    """n completions from conc threads; appends (status, replica, t)."""
    lock = threading.Lock()
    left = [n]

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            t = time.monotonic()
            try:
                st, who, _ = completion(port)
            except OSError as e:
                st, who = f"error {e}", None
            with lock:
                results.append((st, who, time.monotonic() - t))
                if on_progress:
                    on_progress(len(results))

    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for th in threads:
        th.start()
    return threads


def main():
    if shutil.which("haproxy") is None:
        # make deps installs it (DEB_PKGS): missing means deps were skipped.
        raise AssertionError("haproxy is not installed (make deps installs it)")
    model = os.path.join(TMP, "demo.gguf")
    # 8k context: the stream that holds ember1 below must outlast the
    # requests sent meanwhile on any CPU (at 2k it once ended on its own).
    subprocess.run([os.path.join(BUILD, "ember"), "synth", "--preset", "demo",
                    "--type", "q8_0", "--ctx", "8192", "-o", model], check=True,
                   capture_output=True, timeout=120)
    # ember1 holds one request and queues none, so it is often full;
    # ember2 has room.
    r1 = Replica(model, "ember1", "--slots=1", "--queue=0", "--max_tokens=8000")
    r2 = Replica(model, "ember2", "--slots=4", "--queue=16")
    lb_port = free_port()
    cfg = open(os.path.join(ROOT, "docker/haproxy.cfg")).read()
    for old, new in ((r"server ember1 ember1:8080", f"server ember1 {HOST}:{r1.port}"),
                     (r"server ember2 ember2:8080", f"server ember2 {HOST}:{r2.port}"),
                     (r"bind :8080", f"bind {HOST}:{lb_port}")):
        check(old in cfg, f"haproxy.cfg has '{old}'")
        cfg = cfg.replace(old, new)
    cfgpath = os.path.join(TMP, "haproxy.cfg")
    open(cfgpath, "w").write(cfg)
    lb_log = open(os.path.join(TMP, "haproxy.log"), "w")
    lb = subprocess.Popen(["haproxy", "-db", "-f", cfgpath], stdout=lb_log,
                          stderr=subprocess.STDOUT)
    try:
        wait_port(lb_port, lb, "haproxy")
        run(r1, r2, lb_port)
    except BaseException:
        for p in (r1.logpath, r2.logpath, os.path.join(TMP, "haproxy.log")):
            print(f"--- {os.path.basename(p)} (tail)\n" + open(p).read()[-2500:],
                  file=sys.stderr)
        raise
    finally:
        for p in (lb, r1.proc, r2.proc):
            if p.poll() is None:
                p.kill()
            p.wait()


def run(r1, r2, lb):
    figures = {}

    # ---- stateless load: spread, and a full replica's 503 retried --------
    res = []
    t0 = time.monotonic()
    for th in load(lb, 48, 4, res):
        th.join(120)
    wall = time.monotonic() - t0
    bad = [r for r in res if r[0] != 200]
    check(len(res) == 48 and not bad, f"48 completions through HAProxy, all 200 ({bad[:3]})")
    by = {n: sum(1 for r in res if r[1] == n) for n in ("ember1", "ember2")}
    check(by["ember1"] >= 5 and by["ember2"] >= 5,
          f"load spread over both replicas: {by}")
    lat = sorted(r[2] for r in res)
    figures["spread"] = (f"48 requests, 4 at a time: ember1 {by['ember1']}, "
                         f"ember2 {by['ember2']}; 0 failed; median "
                         f"{lat[len(lat) // 2] * 1000:.0f} ms, {wall:.1f} s in all")

    # Streams straight to ember1 (past HAProxy, which therefore still sees
    # it idle) fill it: one holds its only slot, one its queue of one
    # (queue=0 still lets one wait). Requests HAProxy sends it get 503 and
    # are retried on ember2.
    # The end-of-sequence token (2 in the demo vocabulary) is banned, so
    # the stream runs until the context is full.
    long = json.dumps({"messages": [{"role": "user", "content": "go"}],
                       "stream": True, "max_tokens": 100000, "seed": 1,
                       "logit_bias": {"2": -100}})
    hold = http.client.HTTPConnection(HOST, r1.port, timeout=60)
    hold.request("POST", "/v1/chat/completions", headers=JSON, body=long)
    hr = hold.getresponse()
    check(hr.status == 200 and hr.readline().startswith(b"data: "),
          "a stream holds ember1's only slot")
    wait = http.client.HTTPConnection(HOST, r1.port, timeout=60)
    wait.request("POST", "/v1/chat/completions", headers=JSON, body=long)
    deadline = time.monotonic() + 10
    while r1.metric("ember_queue_depth") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    check(r1.metric("ember_queue_depth") == 1, "another waits in its queue")
    before = r1.statuses("/v1/completions").count(503)
    res = [completion(lb) for _ in range(8)]
    hold.close()
    wait.close()
    # The two streams are cancelled when their connections close; wait for
    # that, so the sessions below find ember1 idle.
    r1.wait_idle()
    refused = r1.statuses("/v1/completions").count(503) - before
    check(all(st == 200 and who == "ember2" for st, who, _ in res),
          f"8 completions while ember1 is full: all 200 from ember2 "
          f"({[(st, who) for st, who, _ in res]})")
    check(refused >= 1, f"ember1 answered {refused} of them 503 (full_status) "
          "and HAProxy retried each on ember2")
    figures["full"] = (f"ember1 full: 8 requests, {refused} refused by ember1 "
                       "with 503 and retried on ember2, 8 answered 200")

    # ---- sessions stick to the replica that made them --------------------
    sessions = []
    for i in range(6):
        st, who, body = request(lb, "POST", "/v1/sessions", {"system": "Be brief."})
        check(st == 201, f"session {i} created: {st} {body[:120]}")
        sid = json.loads(body)["id"]
        m = re.fullmatch(r"sess-(ember[12])-\d+", sid)
        check(m is not None and m.group(1) == who,
              f"{sid} names the replica that made it ({who})")
        sessions.append(sid)
    owners = {s.split("-")[1] for s in sessions}
    # A system prompt is prefilled by a job of its own, after the 201: let
    # those finish, or ember1's first turn finds its slot and queue taken.
    for r in (r1, r2):
        r.wait_idle()
    check(owners == {"ember1", "ember2"}, f"sessions made on both replicas: {sessions}")
    for sid in sessions:
        owner = sid.split("-")[1]
        n = []
        for turn in range(3):
            st, who, body = request(lb, "POST", f"/v1/sessions/{sid}/generate",
                                    {"prompt": f" turn {turn}", "max_tokens": 4})
            check(st == 200 and who == owner,
                  f"{sid} turn {turn}: {st} from {who}")
            st, who, body = request(lb, "GET", f"/v1/sessions/{sid}")
            n.append(json.loads(body)["n_tokens"])
        check(n[0] < n[1] < n[2], f"{sid} kept its tokens across turns: {n}")
    figures["sessions"] = (f"6 sessions ({sum(1 for s in sessions if 'ember1' in s)} "
                           "on ember1), 3 turns each: every turn on the owner")

    # ---- SIGTERM to ember1 mid-load ----------------------------------------
    res = []
    fired = threading.Event()

    def progress(done):
        if done == 12 and not fired.is_set():
            fired.set()
            r1.proc.send_signal(signal.SIGTERM)

    t0 = time.monotonic()
    threads = load(lb, 60, 4, res, progress)
    check(fired.wait(120), "12 requests done: SIGTERM sent to ember1")
    # ember1's sessions while it drains and after it is gone.
    lost = [s for s in sessions if "ember1" in s]
    answers = []
    for sid in lost:
        t = time.monotonic()
        st, who, body = request(lb, "POST", f"/v1/sessions/{sid}/generate",
                                {"prompt": " again", "max_tokens": 4}, timeout=30)
        answers.append((sid, st, who, body, time.monotonic() - t))
    for th in threads:
        th.join(180)
    code = r1.proc.wait(60)
    check(code == 0, f"ember1 drained and exited 0 (exit {code})")
    bad = [r for r in res if r[0] != 200]
    check(len(res) == 60 and not bad,
          f"60 completions across the stop: none lost ({len(bad)} failed: {bad[:3]})")
    after_stop = sum(1 for r in res[12:] if r[1] == "ember2")
    by = {n: sum(1 for r in res if r[1] == n) for n in ("ember1", "ember2")}
    worst = max(r[2] for r in res)
    # Once ember1 is gone, every one of its sessions gets the survivor's 404.
    t_down = time.monotonic()
    slowest = 0.0
    for sid in lost:
        t = time.monotonic()
        st, who, body = request(lb, "GET", f"/v1/sessions/{sid}", timeout=30)
        dt = time.monotonic() - t
        slowest = max(slowest, dt)
        err = json.loads(body).get("error", {})
        check(st == 404 and who == "ember2" and err.get("code") == "session_not_found"
              and "ember1" in err.get("message", "") and dt < 5,
              f"{sid} after the stop: {st} {err.get('code')} from {who} in "
              f"{dt * 1000:.0f} ms: {err.get('message')}")
    # During the drain: each answer is prompt and either served by ember1
    # (still draining), or the survivor's 404, or HAProxy's 503 when the
    # connection was refused before the health check saw ember1 go.
    kinds = []
    for sid, st, who, body, dt in answers:
        code_ = json.loads(body).get("error", {}).get("code") if body[:1] == b"{" else None
        ok = (st == 200 and who == "ember1") or \
             (st == 404 and code_ == "session_not_found") or st == 503
        check(ok and dt < 10, f"{sid} during the stop: {st} {code_} from {who} "
              f"in {dt * 1000:.0f} ms")
        kinds.append(f"{st}")
    for sid in [s for s in sessions if "ember2" in s]:
        st, who, body = request(lb, "POST", f"/v1/sessions/{sid}/generate",
                                {"prompt": " still here", "max_tokens": 4})
        check(st == 200 and who == "ember2", f"{sid} on the survivor still serves")
    figures["stop"] = (f"60 requests, 4 at a time, SIGTERM to ember1 after 12: "
                       f"60 answered 200 (ember1 {by['ember1']}, ember2 "
                       f"{by['ember2']}; {after_stop} of the last 48 on ember2), "
                       f"slowest {worst:.1f} s; ember1 exit 0; its sessions: "
                       f"{'/'.join(kinds)} during the drain, then 404 "
                       f"session_not_found from ember2 in at most "
                       f"{slowest * 1000:.0f} ms")
    del t_down
    for k, v in figures.items():
        print(f"figures {k}: {v}")


if __name__ == "__main__":
    main()
