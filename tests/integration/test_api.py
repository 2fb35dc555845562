#!/usr/bin/python3
"""Drives the real build/emberd with a synthesized model over loopback HTTP.

Checks the OpenAI shapes (chat.completion, text_completion and their
streamed chunks, in order), usage numbers against /tokenize, seeds, stop
strings, max_tokens, /v1/generate with timings, /tokenize and /detokenize,
a prompt longer than the context (400 with the numbers, also streamed),
sessions, a client that disconnects mid-stream (its slot is freed:
/metrics), SIGTERM during a stream (the stream ends cleanly, exit 0), 16
concurrent streams, and a full queue (429 with Retry-After). The models are
random, so their text is gibberish: tests compare texts with each other,
never with fixed strings. Every wait is bounded.
"""
import http.client
import json
import os
import re
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
TMP = os.environ["TMPDIR"]
EMBERD = os.path.join(BUILD, "emberd")
EMBER = os.path.join(BUILD, "ember")
HOST = "127.0.0.1"
JSON = {"Content-Type": "application/json"}


def synth(preset):
    path = os.path.join(TMP, preset + ".gguf")
    subprocess.run([EMBER, "synth", "--preset", preset, "--type", "q8_0",
                    "-o", path], check=True, capture_output=True, timeout=120)
    return path


class Daemon:
    def __init__(self, model, *flags):
        self.port = free_port()
        self.log = open(os.path.join(TMP, "emberd-%d.log" % self.port), "w+")
        args = [EMBERD, "--model=" + model, "--port=%d" % self.port,
                "--threads=1"] + list(flags)
        self.proc = subprocess.Popen(args, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("emberd exited: %s" % self.log_text())
            # Our own daemon must be listening before /health is asked:
            # another test's daemon on the same free port would answer.
            if "listening on" not in self.log_text():
                time.sleep(0.05)
                continue
            try:
                st, _, _ = self.request("GET", "/health")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("emberd did not become ready")

    def log_text(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def conn(self, timeout=60):
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def request(self, method, path, body=None):
        c = self.conn()
        try:
            data = json.dumps(body) if isinstance(body, dict) else body
            c.request(method, path, body=data, headers=JSON if body else {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, body):
        st, hdr, raw = self.request("POST", path, body)
        return st, hdr, json.loads(raw)

    def metric(self, name):
        _, _, raw = self.request("GET", "/metrics")
        m = re.search(r"^%s (\S+)$" % name, raw.decode(), re.M)
        return float(m.group(1)) if m else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise AssertionError("emberd did not exit on SIGTERM")
        self.log.close()
        return rc


def sse_events(resp):
    """Reads `data:` payloads until [DONE] or the end; returns the list with
    "[DONE]" as the last element when it came."""
    out = []
    for line in resp:
        line = line.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[6:]
        out.append(data if data == "[DONE]" else json.loads(data))
        if data == "[DONE]":
            break
    return out


def stream(d, path, body):
    c = d.conn()
    try:
        c.request("POST", path, body=json.dumps(body), headers=JSON)
        r = c.getresponse()
        if r.status != 200:
            return r.status, dict(r.getheaders()), json.loads(r.read())
        check(r.getheader("Content-Type") == "text/event-stream",
              "stream is text/event-stream")
        return r.status, dict(r.getheaders()), sse_events(r)
    finally:
        c.close()


def tokens(d, text, add_special=True, parse_special=True):
    st, _, o = d.post("/tokenize", {"content": text, "add_special": add_special,
                                    "parse_special": parse_special})
    assert st == 200, o
    return o["tokens"]


MSGS = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Tell me a story about a cat."}]


def counts(u):
    """Usage without cached_tokens, which depends on what ran before."""
    return {k: v for k, v in u.items() if k != "prompt_tokens_details"}


def usage_ok(u, max_tokens=None):
    check(set(u) == {"prompt_tokens", "completion_tokens", "total_tokens",
                     "prompt_tokens_details"}, "usage keys: %s" % u)
    check(u["prompt_tokens"] > 0 and u["completion_tokens"] >= 1,
          "usage counts are positive")
    check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
          "total_tokens is the sum")
    check(u["prompt_tokens_details"]["cached_tokens"] >= 0, "cached_tokens")
    if max_tokens is not None:
        check(u["completion_tokens"] <= max_tokens, "completion <= max_tokens")


def test_chat(d):
    body = {"messages": MSGS, "max_tokens": 24, "seed": 7, "temperature": 1}
    st, _, o = d.post("/v1/chat/completions", body)
    check(st == 200, "chat 200")
    check(set(o) >= {"id", "object", "created", "model", "choices", "usage"},
          "chat.completion keys")
    check(o["id"].startswith("chatcmpl-") and o["object"] == "chat.completion",
          "id and object")
    ch = o["choices"]
    check(len(ch) == 1 and ch[0]["index"] == 0 and ch[0]["logprobs"] is None,
          "one choice, index 0, logprobs null")
    check(ch[0]["message"]["role"] == "assistant" and
          isinstance(ch[0]["message"]["content"], str), "assistant message")
    check(ch[0]["finish_reason"] in ("stop", "length"), "finish_reason")
    usage_ok(o["usage"], 24)
    if ch[0]["finish_reason"] == "length":
        check(o["usage"]["completion_tokens"] == 24,
              "length: completion_tokens == max_tokens")
    st, _, o2 = d.post("/v1/chat/completions", body)
    check(o2["choices"][0]["message"] == ch[0]["message"],
          "same seed, same text")
    check(counts(o2["usage"]) == counts(o["usage"]), "same seed, same usage")
    check(o2["usage"]["prompt_tokens_details"]["cached_tokens"] > 0,
          "the repeated prompt came from the prefix cache")
    return ch[0]["message"]["content"], o["usage"]


def test_chat_stream(d, text, usage):
    body = {"messages": MSGS, "max_tokens": 24, "seed": 7, "temperature": 1,
            "stream": True, "stream_options": {"include_usage": True}}
    st, _, ev = stream(d, "/v1/chat/completions", body)
    check(st == 200, "chat stream 200")
    check(ev[-1] == "[DONE]", "stream ends with [DONE]")
    ev = ev[:-1]
    ids = {e["id"] for e in ev}
    check(len(ids) == 1 and ev[0]["id"].startswith("chatcmpl-"), "one id")
    check(all(e["object"] == "chat.completion.chunk" for e in ev),
          "every event is a chat.completion.chunk")
    first = ev[0]["choices"][0]
    check(first["delta"] == {"role": "assistant", "content": ""} and
          first["finish_reason"] is None, "role chunk first")
    fin, use = ev[-2], ev[-1]
    check(fin["choices"][0]["delta"] == {} and
          fin["choices"][0]["finish_reason"] in ("stop", "length"),
          "finish chunk: empty delta and finish_reason")
    check(use["choices"] == [] and counts(use["usage"]) == counts(usage),
          "usage chunk: no choices, the same usage as non-streamed")
    mid = ev[1:-2]
    check(all(list(e["choices"][0]["delta"]) == ["content"] and
              e["choices"][0]["finish_reason"] is None and
              e["usage"] is None for e in mid),
          "content chunks carry only content (and usage null)")
    got = "".join(e["choices"][0]["delta"]["content"] for e in mid)
    check(got == text, "streamed text equals the non-streamed text")
    del body["stream_options"]
    _, _, ev = stream(d, "/v1/chat/completions", body)
    check(ev[-1] == "[DONE]" and "usage" not in ev[-2] and
          ev[-2]["choices"][0]["finish_reason"] is not None,
          "without include_usage: no usage chunk")


def test_completions(d):
    prompt = "Once upon a time"
    body = {"prompt": prompt, "max_tokens": 16, "seed": 3}
    st, _, o = d.post("/v1/completions", body)
    check(st == 200 and o["object"] == "text_completion" and
          o["id"].startswith("cmpl-"), "text_completion")
    c = o["choices"][0]
    check(set(c) == {"text", "index", "logprobs", "finish_reason"},
          "completion choice keys")
    usage_ok(o["usage"], 16)
    check(o["usage"]["prompt_tokens"] == len(tokens(d, prompt)),
          "prompt_tokens equals /tokenize of the prompt")
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    st, _, ev = stream(d, "/v1/completions", body)
    check(ev[-1] == "[DONE]", "completion stream ends with [DONE]")
    check(all(e["object"] == "text_completion" for e in ev[:-1]),
          "completion chunks are text_completion")
    check(ev[-3]["choices"][0]["finish_reason"] == c["finish_reason"] and
          ev[-3]["choices"][0]["text"] == "", "completion finish chunk")
    check(ev[-2]["choices"] == [] and counts(ev[-2]["usage"]) == counts(o["usage"]),
          "completion usage chunk")
    got = "".join(e["choices"][0]["text"] for e in ev[:-3])
    check(got == c["text"], "streamed completion equals non-streamed")


def test_length_and_stop(d):
    for seed in range(1, 6):
        _, _, o = d.post("/v1/completions", {"prompt": "a b c", "max_tokens": 5,
                                             "seed": seed})
        if o["choices"][0]["finish_reason"] == "length":
            break
    check(o["choices"][0]["finish_reason"] == "length" and
          o["usage"]["completion_tokens"] == 5,
          "max_tokens: finish_reason length after exactly max_tokens")
    text = ""
    for seed in range(1, 20):
        body = {"prompt": "the story", "max_tokens": 60, "seed": seed}
        _, _, o = d.post("/v1/completions", body)
        text = o["choices"][0]["text"]
        if len(text.strip()) >= 12:
            break
    check(len(text.strip()) >= 12, "a long enough text to cut")
    stop = text.strip()[6:9]
    body["stop"] = [stop]
    _, _, o2 = d.post("/v1/completions", body)
    check(o2["choices"][0]["text"] == text[:text.index(stop)] and
          o2["choices"][0]["finish_reason"] == "stop",
          "stop string cuts the text before it, finish_reason stop")


def test_generate(d):
    body = {"prompt": "hello there", "max_tokens": 12, "seed": 5}
    st, _, o = d.post("/v1/generate", body)
    check(st == 200 and set(o) == {"text", "finish_reason", "usage", "timings"},
          "/v1/generate keys")
    t = o["timings"]
    check(set(t) == {"ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"}
          and t["ttft_ms"] > 0 and t["prefill_tokens_per_s"] > 0, "timings")
    body["stream"] = True
    st, _, ev = stream(d, "/v1/generate", body)
    check(ev[-1] == "[DONE]" and "timings" in ev[-2] and
          ev[-2]["finish_reason"] == o["finish_reason"],
          "/v1/generate stream: final event with timings, then [DONE]")
    check("".join(e["text"] for e in ev[:-1]) == o["text"],
          "/v1/generate stream text equals the body's")


def test_tokenize(d):
    text = "Hello world, how are you?"
    ids = tokens(d, text, add_special=False, parse_special=False)
    check(len(ids) > 0 and all(isinstance(i, int) for i in ids), "tokenize")
    check(len(tokens(d, text)) >= len(ids), "add_special adds BOS")
    st, _, o = d.post("/detokenize", {"tokens": ids})
    check(st == 200 and o == {"content": text}, "detokenize round trip")
    st, _, o = d.post("/detokenize", {"tokens": [10 ** 6]})
    check(st == 400 and o["error"]["param"] == "tokens",
          "a token outside the vocabulary is 400")
    st, _, o = d.post("/tokenize", {"content": 5})
    check(st == 400 and o["error"]["param"] == "content", "content must be text")


def test_too_long(d):
    prompt = "word " * 1200
    st, _, o = d.post("/v1/completions", {"prompt": prompt})
    e = o.get("error", {})
    check(st == 400 and e.get("code") == "context_length_exceeded" and
          e.get("type") == "invalid_request_error", "too long: 400")
    n = len(tokens(d, prompt))
    check("512" in e["message"] and str(n) in e["message"],
          "message names the context (512) and the prompt (%d)" % n)
    st, _, o = stream(d, "/v1/chat/completions",
                      {"messages": [{"role": "user", "content": prompt}],
                       "stream": True})
    check(st == 400 and o["error"]["code"] == "context_length_exceeded",
          "too long, streamed: still a 400 before any event")


def test_model_names(d):
    st, _, raw = d.request("GET", "/v1/models")
    served = json.loads(raw)["data"][0]["id"]
    body = {"messages": MSGS, "max_tokens": 2, "model": served}
    st, _, o = d.post("/v1/chat/completions", body)
    check(st == 200 and o["model"] == served, "the served model by name")
    body["model"] = "gpt-4o"
    st, _, o = d.post("/v1/chat/completions", body)
    check(st == 400 and o["error"]["code"] == "model_not_found" and
          o["error"]["param"] == "model" and served in o["error"]["message"],
          "another model: 400 model_not_found naming the served one")
    st, _, o = d.post("/v1/completions", {"prompt": "x", "model": "nope", "max_tokens": 1})
    check(st == 400 and o["error"]["code"] == "model_not_found", "completions too")


def test_sessions(d):
    st, _, s = d.post("/v1/sessions", {"system": "You are a cat."})
    check(st == 201 and s["id"].startswith("sess-") and s["n_tokens"] >= 0,
          "session created")
    sid = s["id"]
    st, _, o = d.post("/v1/sessions/%s/generate" % sid,
                      {"prompt": " Hello", "max_tokens": 4, "seed": 1})
    check(st == 200 and "timings" in o, "session generate")
    st, _, info = d.request("GET", "/v1/sessions/" + sid)
    info = json.loads(info)
    check(st == 200 and info["n_tokens"] > s["n_tokens"],
          "the session grew by the turn")
    st, _, c = d.post("/v1/sessions/%s/clone" % sid, "")
    check(st == 201 and c["id"] != sid and c["n_tokens"] == info["n_tokens"],
          "clone holds the same tokens")
    for x in (sid, c["id"]):
        st, _, o = d.request("DELETE", "/v1/sessions/" + x)
        check(st == 200 and json.loads(o)["deleted"] is True, "deleted " + x)
    st, _, o = d.request("GET", "/v1/sessions/" + sid)
    check(st == 404, "deleted session is 404")


def test_session_limit(model):
    d = Daemon(model, "--max_sessions=1")
    try:
        st, _, s = d.post("/v1/sessions", {})
        check(st == 201, "first session")
        st, hdr, o = d.post("/v1/sessions", {})
        check(st == 429 and o["error"]["type"] == "rate_limit_error",
              "max_sessions reached: 429")
        d.request("DELETE", "/v1/sessions/" + s["id"])
        st, _, _ = d.post("/v1/sessions", {})
        check(st == 201, "a deleted session frees its place")
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


def wait_metric(d, name, value, limit=10):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        v = d.metric(name)
        if v == value:
            return True
        time.sleep(0.05)
    return False


def open_stream(d, body):
    c = d.conn()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers=JSON)
    return c, c.getresponse()


def first_events(r, n):
    got = 0
    for line in r:
        if line.startswith(b"data: "):
            got += 1
            if got == n:
                return True
    return False


LONG = {"messages": [{"role": "user", "content": "go"}], "stream": True,
        "max_tokens": 100000, "seed": 1}


def test_disconnect(d):
    c, r = open_stream(d, LONG)
    check(r.status == 200 and first_events(r, 3), "long stream started")
    check(d.metric("ember_slots_busy") == 1, "one slot busy while streaming")
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    check(wait_metric(d, "ember_slots_busy", 0),
          "client gone: the slot is free again (metrics)")
    log = d.log_text()
    m = re.findall(r"POST /v1/chat/completions \d+ (?:prompt=\d+ )?gen=(\d+)", log)
    check(m and int(m[-1]) < 1000, "cancelled early (gen=%s)" % m)


def test_concurrent(d):
    results = [None] * 16

    def client(i):
        try:
            body = {"messages": [{"role": "user", "content": "hi %d" % i}],
                    "max_tokens": 20, "seed": i, "stream": True,
                    "stream_options": {"include_usage": True}}
            st, _, ev = stream(d, "/v1/chat/completions", body)
            ok = (st == 200 and ev[-1] == "[DONE]" and
                  ev[0]["choices"][0]["delta"].get("role") == "assistant" and
                  ev[-3]["choices"][0]["finish_reason"] in ("stop", "length")
                  and ev[-2]["usage"]["completion_tokens"] >= 1)
            results[i] = ok
        except Exception as e:  # reported below
            results[i] = repr(e)

    ts = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    check(all(r is True for r in results),
          "16 concurrent streams complete and well-formed: %s" % results)


def test_queue_full(model):
    d = Daemon(model, "--slots=1", "--queue=1", "--workers=1")
    try:
        a, ra = open_stream(d, LONG)
        check(ra.status == 200 and first_events(ra, 2), "A runs")
        b = d.conn()
        b.request("POST", "/v1/chat/completions", body=json.dumps(LONG),
                  headers=JSON)
        deadline = time.monotonic() + 10
        while d.metric("ember_queue_depth") != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        check(d.metric("ember_queue_depth") == 1, "B waits in the queue")
        st, hdr, o = d.post("/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "x"}]})
        check(st == 429 and hdr.get("Retry-After") == "1" and
              o["error"]["type"] == "rate_limit_error",
              "queue full: 429 with Retry-After")
        a.close()
        b.close()
    finally:
        d.proc.kill()
        d.proc.wait(10)


def test_sigterm(model):
    d = Daemon(model)
    c, r = open_stream(d, dict(LONG, max_tokens=300))
    check(r.status == 200 and first_events(r, 2), "stream before SIGTERM")
    d.proc.send_signal(signal.SIGTERM)
    ev = sse_events(r)
    check(ev and ev[-1] == "[DONE]" and
          ev[-2]["choices"][0]["finish_reason"] in ("stop", "length"),
          "SIGTERM: the stream in flight ends cleanly")
    c.close()
    check(d.proc.wait(30) == 0, "emberd exits 0 after the drain")


def main():
    tiny = synth("tiny")
    demo = synth("demo")  # slower per token: long generations stay running
    d = Daemon(tiny, "--slots=4")
    try:
        text, usage = test_chat(d)
        test_chat_stream(d, text, usage)
        test_completions(d)
        test_length_and_stop(d)
        test_generate(d)
        test_tokenize(d)
        test_too_long(d)
        test_model_names(d)
        test_sessions(d)
        test_concurrent(d)
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    d = Daemon(demo, "--slots=2")
    try:
        test_disconnect(d)
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    test_session_limit(tiny)
    test_queue_full(demo)
    test_sigterm(demo)
    print("all API checks passed")


if __name__ == "__main__":
    main()
