#!/usr/bin/python3
"""Soak: N concurrent clients against one emberd for a fixed duration.

Mix per request, drawn at random: chat (streamed or not), completions
(streamed or not), /v1/generate, a session round (create, generate, clone,
generate on the clone, delete both), /tokenize. 10% of streams are cut by
the client mid-way (socket closed after the first event). The queue is
kept small so the offered load exceeds capacity and 429s happen.

Pass: emberd never exits; every request gets a status in DOCUMENTED (no
connection error, no other status); the client's count of requests per
status equals the server's ember_requests_total; RSS at the end is within
--rss-pct of RSS after the warm-up; open fds return to the idle count;
ember_slots_busy and ember_requests_in_flight return to 0.

Usage: soak.py [--duration S] [--clients N] [--slots N] [--queue N]
               [--warmup S] [--model PATH] [--rss-pct P]
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stresslib import (DOCUMENTED, HOST, JSON, Daemon, check, sse_events,  # noqa: E402
                       synth)

WORDS = ("the quick brown fox jumps over a lazy dog while seven ember "
         "daemons serve tokens to many clients on one small box").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Client(threading.Thread):
    def __init__(self, port, seed, stop_at, stats, lock):
        super().__init__(daemon=True)
        self.port = port
        self.rng = random.Random(seed)
        self.stop_at = stop_at
        self.stats = stats
        self.lock = lock

    def note(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def call(self, method, path, body=None, stream=False, cut=False):
        """One request on a fresh connection; counts its status."""
        ok = DOCUMENTED | ({409} if path.endswith("/clone") else set())
        c = http.client.HTTPConnection(HOST, self.port, timeout=120)
        try:
            c.request(method, path,
                      body=None if body is None else json.dumps(body),
                      headers=JSON)
            r = c.getresponse()
            self.note(r.status)
            if r.status == 429:
                time.sleep(0.02)   # spin less on a shared machine
            if r.status not in ok:
                self.note("bad:%d %s %s" % (r.status, path, r.read()[:200]))
                return r.status, None
            if stream and cut and r.status == 200:
                r.fp.readline()          # at least one event arrived
                c.sock.shutdown(socket.SHUT_RDWR)
                self.note("cut")
                return r.status, None
            data = r.read()
            if stream and r.status == 200:
                ev = sse_events(data)
                if not ev or (path != "/completion" and ev[-1] != b"[DONE]"):
                    self.note("bad:unterminated stream %s" % path)
                for e in ev:
                    if e != b"[DONE]":
                        json.loads(e)    # never corrupt
                return r.status, None
            return r.status, (json.loads(data) if data else None)
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.note("bad:%s %s: %r" % (method, path, e))
            return None, None
        finally:
            c.close()

    def gen_body(self, **extra):
        b = {"max_tokens": self.rng.randint(4, 40),
             "temperature": self.rng.choice([0, 0.8])}
        b.update(extra)
        return b

    def one(self):
        rng = self.rng
        kind = rng.choice(["chat", "chat_s", "comp", "comp_s", "gen_s",
                           "session", "tokenize"])
        stream = kind.endswith("_s")
        cut = stream and rng.random() < 0.10
        if kind.startswith("chat"):
            self.call("POST", "/v1/chat/completions", self.gen_body(
                messages=[{"role": "user", "content": words(rng, 12)}],
                stream=stream), stream, cut)
        elif kind.startswith("comp"):
            self.call("POST", "/v1/completions", self.gen_body(
                prompt=words(rng, 20), stream=stream), stream, cut)
        elif kind == "gen_s":
            self.call("POST", "/v1/generate", self.gen_body(
                prompt=words(rng, 8), stream=True), True, cut)
        elif kind == "tokenize":
            self.call("POST", "/tokenize", {"content": words(rng, 30)})
        else:
            st, s = self.call("POST", "/v1/sessions",
                              {"system": words(rng, 6)})
            if st != 201:
                return
            sid = s["id"]
            gst, _ = self.call("POST", "/v1/sessions/%s/generate" % sid,
                               self.gen_body(prompt=words(rng, 6)))
            st, c = self.call("POST", "/v1/sessions/%s/clone" % sid)
            # 409 busy: the session still runs a job (its system prompt's
            # prefill when the generate was refused with 429); documented.
            if st == 201:
                self.call("POST", "/v1/sessions/%s/generate" % c["id"],
                          self.gen_body(prompt=words(rng, 4)))
                self.call("DELETE", "/v1/sessions/%s" % c["id"])
            self.call("DELETE", "/v1/sessions/%s" % sid)

    def run(self):
        while time.monotonic() < self.stop_at:
            self.one()


def run(args):
    model = args.model or synth("tiny")
    d = Daemon(model, "--slots=%d" % args.slots, "--queue=%d" % args.queue,
               "--max-tokens=64", "--log-level=info", "--context=512")
    try:
        time.sleep(0.5)
        fds_idle = d.fds()
        stats, lock = {}, threading.Lock()
        t0 = time.monotonic()
        stop_at = t0 + args.duration
        clients = [Client(d.port, args.seed + i, stop_at, stats, lock)
                   for i in range(args.clients)]
        for c in clients:
            c.start()
        time.sleep(min(args.warmup, args.duration))
        rss_warm = d.rss_kb()
        rss_max = rss_warm
        while any(c.is_alive() for c in clients):
            check_alive = d.alive()
            if not check_alive:
                break
            rss_max = max(rss_max, d.rss_kb())
            time.sleep(0.5)
        for c in clients:
            c.join(timeout=180)
        elapsed = time.monotonic() - t0
        check(d.alive(), "emberd alive after %.0f s" % elapsed)
        # The scrape that reads the gauge is itself in flight.
        check(d.wait_gauge("ember_requests_in_flight", 1) == 1,
              "ember_requests_in_flight back to 1 (the scrape)")
        check(d.wait_gauge("ember_slots_busy", 0) == 0,
              "ember_slots_busy back to 0")
        rss_end = d.rss_kb()
        server = d.requests_by_status()
        client = {k: v for k, v in stats.items() if isinstance(k, int)}
        total = sum(client.values())
        bad = sorted(k for k in stats if isinstance(k, str)
                     and k.startswith("bad:"))
        print("summary: %.0f s, %d clients, %d slots, queue %d: %d requests,"
              " statuses %s, %d streams cut, RSS warm %d KiB max %d KiB end"
              " %d KiB" % (elapsed, args.clients, args.slots, args.queue,
                           total, dict(sorted(client.items())),
                           stats.get("cut", 0), rss_warm, rss_max, rss_end),
              flush=True)
        check(not bad, "every request answered with a documented status "
              "and well-formed body (%s)" % "; ".join(bad[:5]))
        check(client == server, "client counts %s == server counts %s"
              % (dict(sorted(client.items())), dict(sorted(server.items()))))
        logged = {}
        for st in re.findall(r"^[A-Z]+ (?!/metrics|/health)\S+ (\d+) ",
                             d.log_text(), re.M):
            logged[int(st)] = logged.get(int(st), 0) + 1
        check(client == logged, "client counts == the log's request lines %s"
              % dict(sorted(logged.items())))
        if args.expect_429:
            check(client.get(429, 0) > 0, "load above capacity gave 429s")
        if "ASAN_OPTIONS" in os.environ:
            print("skip - RSS check under ASan (its quarantine grows RSS)")
        else:
            check(rss_end <= rss_warm * (1 + args.rss_pct / 100.0),
                  "RSS end %d KiB within %.0f%% of RSS after warm-up %d KiB"
                  % (rss_end, args.rss_pct, rss_warm))
        deadline = time.monotonic() + 10
        while d.fds() > fds_idle and time.monotonic() < deadline:
            time.sleep(0.2)
        check(d.fds() <= fds_idle, "fds %d back to idle %d"
              % (d.fds(), fds_idle))
    finally:
        rc = d.stop()
    check(rc == 0, "emberd exit 0 on SIGTERM")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=25)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--queue", type=int, default=-1,
                   help="default: clients/4, so the load exceeds capacity")
    p.add_argument("--warmup", type=float, default=-1,
                   help="default: 60 s, or a third of a short run")
    p.add_argument("--model")
    p.add_argument("--rss-pct", type=float, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-expect-429", dest="expect_429",
                   action="store_false")
    a = p.parse_args()
    if a.queue < 0:
        a.queue = max(1, a.clients // 4)
    if a.warmup < 0:
        a.warmup = 60 if a.duration >= 180 else a.duration / 3
    run(a)


if __name__ == "__main__":
    main()
