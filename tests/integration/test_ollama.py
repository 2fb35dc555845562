#!/usr/bin/python3
"""Drives the real build/emberd on the golden llama model (real tokenizer and
chat template) over loopback HTTP through every Ollama and embedding
endpoint: GET / and /api/version, /api/tags, /api/ps, /api/show,
/api/generate and /api/chat (NDJSON lines in Ollama's shapes, the final
object's counts and durations, stream false, raw, load-only, options,
format), /api/embed and /api/embeddings, /v1/embeddings and /embeddings
(every input shape, base64, dimensions, usage), llama.cpp's /embedding, and
Ollama's {"error": "..."} shape for unknown models, bad bodies, unknown
/api/ routes and a missing API key. The weights are random: texts are
compared with each other, never with fixed strings. Every wait is bounded.
"""
import base64
import http.client
import json
import math
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

# check() and free_port(), shared with the stress drivers.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stress"))
from stresslib import check, free_port  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
TMP = os.environ["TMPDIR"]
SHARED = os.environ.get("SHARED", "../shared")
EMBERD = os.path.join(BUILD, "emberd")
HOST = "127.0.0.1"
MODEL = os.path.join(TMP, "golden-llama.gguf")
ID = "golden-llama"


class Daemon:
    def __init__(self, *flags):
        self.port = free_port()
        self.log = open(os.path.join(TMP, "emberd-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen([EMBERD, "--model=" + MODEL, "--port=%d" % self.port,
                                      "--threads=1"] + list(flags), stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("emberd exited")
            # Our own daemon must be listening before /health is asked:
            # another test's daemon on the same free port would answer.
            self.log.flush()
            with open(self.log.name) as f:
                if "listening on" not in f.read():
                    time.sleep(0.05)
                    continue
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("emberd did not become ready")

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection(HOST, self.port, timeout=60)
        try:
            data = json.dumps(body) if isinstance(body, (dict, list)) else body
            c.request(method, path, body=data, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, body, headers=None):
        st, hdr, raw = self.request("POST", path, body,
                                    headers or {"Content-Type": "application/json"})
        return st, hdr, json.loads(raw)

    def lines(self, path, body):
        """POSTs and returns the status, headers and NDJSON objects."""
        st, hdr, raw = self.request("POST", path, body)
        return st, hdr, [json.loads(l) for l in raw.decode().split("\n") if l]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        return rc


def is_ollama_error(st, body, status, text=None):
    return (st == status and isinstance(body, dict) and list(body) == ["error"]
            and isinstance(body["error"], str) and (text is None or text in body["error"]))


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def info_endpoints(d):
    st, hdr, raw = d.request("GET", "/")
    check(st == 200 and raw == b"Ollama is running", "GET / says Ollama is running")
    st, _, raw = d.request("HEAD", "/")
    check(st == 200, "HEAD / is 200")
    st, _, raw = d.request("GET", "/api/version")
    check(st == 200 and isinstance(json.loads(raw)["version"], str), "/api/version")
    st, _, raw = d.request("GET", "/api/tags")
    tags = json.loads(raw)
    m = tags["models"][0]
    check(st == 200 and len(tags["models"]) == 1 and m["name"] == ID + ":latest"
          and m["model"] == m["name"] and m["size"] == os.path.getsize(MODEL)
          and len(m["digest"]) == 64 and m["details"]["format"] == "gguf"
          and m["details"]["family"] == "llama" and m["details"]["quantization_level"] == "F32"
          and m["modified_at"].endswith("Z"), "/api/tags lists the served model as name:latest")
    st, _, raw = d.request("GET", "/api/ps")
    ps = json.loads(raw)["models"][0]
    check(st == 200 and ps["name"] == ID + ":latest" and ps["context_length"] > 0
          and "expires_at" in ps and ps["size_vram"] == 0, "/api/ps")
    for name in (ID, ID + ":latest"):
        st, _, show = d.post("/api/show", {"model": name})
        check(st == 200 and show["model_info"]["general.architecture"] == "llama"
              and show["model_info"]["llama.embedding_length"] == 128
              and "{% for message in messages %}" in show["template"]
              and show["capabilities"] == ["completion", "embedding"], "/api/show " + name)
    st, _, show = d.post("/api/show", {"name": ID})
    check(st == 200, "/api/show takes the older 'name'")
    st, _, body = d.post("/api/show", {"model": "llama3.2"})
    check(is_ollama_error(st, body, 404, "model 'llama3.2' not found"), "/api/show unknown: 404")
    st, _, body = d.post("/api/show", {})
    check(is_ollama_error(st, body, 400, "model is required"), "/api/show without model: 400")


def generation(d):
    opts = {"num_predict": 6, "seed": 7, "temperature": 0.8}
    st, hdr, lines = d.lines("/api/generate", {"model": ID, "prompt": "Why is the sky blue?",
                                               "options": opts})
    check(st == 200 and hdr["Content-Type"] == "application/x-ndjson",
          "/api/generate streams NDJSON by default")
    fin = lines[-1]
    check(all(set(l) == {"model", "created_at", "response", "done"} and l["done"] is False
              and l["model"] == ID for l in lines[:-1]) and len(lines) >= 2,
          "text lines: model, created_at, response, done false")
    keys = {"model", "created_at", "response", "done", "done_reason", "total_duration",
            "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
            "eval_duration"}
    check(set(fin) == keys and fin["done"] is True and fin["response"] == ""
          and fin["done_reason"] == "length" and fin["eval_count"] == 6
          and fin["prompt_eval_count"] > 5 and fin["total_duration"] > fin["eval_duration"] > 0,
          "the final line: done, done_reason, counts and durations")
    text = "".join(l["response"] for l in lines)
    st, hdr, one = d.post("/api/generate", {"model": ID + ":latest", "prompt": "Why is the sky blue?",
                                            "options": opts, "stream": False})
    check(st == 200 and hdr["Content-Type"] == "application/json" and set(one) == keys
          and one["response"] == text and one["eval_count"] == 6
          and one["prompt_eval_count"] == fin["prompt_eval_count"],
          "stream false: one object, same text and counts")
    # The prompt is a user turn of the chat template; raw sends it as is.
    st, _, chat = d.post("/api/chat", {"model": ID, "messages": [
        {"role": "user", "content": "Why is the sky blue?"}], "options": opts, "stream": False})
    check(st == 200 and chat["message"] == {"role": "assistant", "content": text},
          "generate without raw = chat with one user turn")
    st, _, raw = d.post("/api/generate", {"model": ID, "prompt": "Why is the sky blue?",
                                          "raw": True, "options": opts, "stream": False})
    check(st == 200 and raw["prompt_eval_count"] < one["prompt_eval_count"],
          "raw: the prompt without the template")
    st, _, sysd = d.post("/api/generate", {"model": ID, "prompt": "Why is the sky blue?",
                                           "system": "Be brief.", "options": opts, "stream": False})
    check(st == 200 and sysd["prompt_eval_count"] > one["prompt_eval_count"], "system is a system turn")
    st, _, lines = d.lines("/api/chat", {"model": ID, "messages": [
        {"role": "user", "content": "Why is the sky blue?"}], "options": opts})
    check(st == 200 and all(l["message"]["role"] == "assistant" for l in lines)
          and "".join(l["message"]["content"] for l in lines) == text
          and lines[-1]["done"] is True and lines[-1]["done_reason"] == "length",
          "/api/chat streams message lines")
    st, _, stop = d.post("/api/generate", {"model": ID, "prompt": "Why is the sky blue?",
                                           "options": dict(opts, num_predict=30, stop=[text[2:4]]),
                                           "stream": False})
    check(st == 200 and stop["done_reason"] == "stop" and len(stop["response"]) < len(text),
          "options.stop ends the text: done_reason stop")
    for fmt in ("json", {"type": "object", "properties": {"a": {"type": "integer"}},
                         "required": ["a"]}):
        st, _, js = d.post("/api/chat", {"model": ID, "format": fmt, "stream": False,
                                         "messages": [{"role": "user", "content": "JSON"}],
                                         "options": {"num_predict": 40, "seed": 1}})
        ok = st == 200 and (js["done_reason"] == "length" or isinstance(json.loads(
            js["message"]["content"]), dict))
        if isinstance(fmt, dict) and js["done_reason"] == "stop":
            ok = ok and isinstance(json.loads(js["message"]["content"])["a"], int)
        check(ok, "format %s constrains the output" % json.dumps(fmt)[:20])
    st, _, load = d.post("/api/generate", {"model": ID})
    check(st == 200 and load["done"] is True and load["done_reason"] == "load", "no prompt: load")
    st, _, load = d.post("/api/chat", {"model": ID, "messages": []})
    check(st == 200 and load["done_reason"] == "load" and load["message"]["content"] == "",
          "no messages: load")
    # curl -d sends form encoding: Ollama reads the body as JSON anyway.
    st, _, body = d.post("/api/generate", {"model": ID, "prompt": "x", "stream": False,
                                           "options": {"num_predict": 1}},
                         {"Content-Type": "application/x-www-form-urlencoded"})
    check(st == 200 and body["eval_count"] == 1, "any Content-Type is read as JSON")


def metric(d, name):
    _, _, raw = d.request("GET", "/metrics")
    for line in raw.decode().split("\n"):
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def disconnect(d):
    """A client that leaves mid-stream: its generation is cancelled and its
    slot freed. Greedy: the golden model then runs to the end of its
    context (~2000 tokens); sampled, it can meet its end token a few
    tokens after the first line, and the slot was free before the check
    below (a flake seen under load)."""
    c = http.client.HTTPConnection(HOST, d.port, timeout=60)
    c.request("POST", "/api/generate", body=json.dumps(
        {"model": ID, "prompt": "Tell me a long story.",
         "options": {"num_predict": 100000, "temperature": 0}}))
    r = c.getresponse()
    first = json.loads(r.readline())
    check(first["done"] is False, "a streamed line arrives")
    check(metric(d, "ember_slots_busy") == 1, "one slot busy while streaming")
    c.close()
    deadline = time.monotonic() + 20
    while metric(d, "ember_slots_busy") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    check(metric(d, "ember_slots_busy") == 0, "the client left: its slot is freed")


def errors(d):
    for path, body, status, text in [
            ("/api/generate", {"model": "llama3.2", "prompt": "x"}, 404, "model 'llama3.2' not found"),
            ("/api/chat", {"model": ID + ":7b", "messages": []}, 404, "not found"),
            ("/api/embed", {"model": "nomic-embed-text", "input": "x"}, 404,
             "model 'nomic-embed-text' not found"),
            ("/api/generate", {"prompt": "x"}, 400, "model is required"),
            ("/api/generate", {"model": ID, "prompt": "x", "options": {"mirostat": 1}}, 400, "mirostat"),
            ("/api/generate", {"model": ID, "prompt": "x", "options": {"foo": 1}}, 400, "foo"),
            ("/api/generate", {"model": ID, "prompt": "x", "images": ["aGk="]}, 400, "images"),
            ("/api/generate", {"model": ID, "prompt": "x", "template": "{{.Prompt}}"}, 400, "template"),
            ("/api/chat", {"model": ID, "messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function"}]}, 400, "tools"),
            ("/api/generate", "{not json", 400, "JSON"),
            ("/api/nothing", {}, 404, "No such endpoint")]:
        st, _, raw = d.request("POST", path, body)
        check(is_ollama_error(st, json.loads(raw), status, text),
              "%s %s: %d {\"error\": \"...%s...\"}" % (path, json.dumps(body)[:40], status, text))
    st, _, raw = d.request("POST", "/api/generate", json.dumps(
        {"model": ID, "prompt": "word " * 3000, "stream": False}))
    check(is_ollama_error(st, json.loads(raw), 400, "context"), "a prompt beyond the context: 400")
    st, _, raw = d.request("GET", "/api/generate")
    check(is_ollama_error(st, json.loads(raw), 405), "GET /api/generate: 405 in Ollama's shape")


def tokens(d, text):
    st, _, body = d.post("/tokenize", {"content": text, "add_special": True})
    return body["tokens"]


def embeddings(d):
    st, _, one = d.post("/v1/embeddings", {"input": "The sea is calm.", "model": ID})
    v = one["data"][0]["embedding"]
    ids = tokens(d, "The sea is calm.")
    check(st == 200 and one["object"] == "list" and one["model"] == ID
          and one["data"][0]["object"] == "embedding" and one["data"][0]["index"] == 0
          and len(v) == 128 and abs(norm(v) - 1) < 1e-5 and one["pooling"] == "mean"
          and one["usage"] == {"prompt_tokens": len(ids), "total_tokens": len(ids)},
          "/v1/embeddings: one normalized vector, pooling named, usage = its tokens")
    st, _, again = d.post("/v1/embeddings", {"input": "The sea is calm."})
    check(again["data"][0]["embedding"] == v, "deterministic")
    st, _, batch = d.post("/embeddings", {"input": ["Other words here.", "The sea is calm."]})
    check(st == 200 and [x["index"] for x in batch["data"]] == [0, 1]
          and batch["data"][1]["embedding"] == v and batch["data"][0]["embedding"] != v,
          "/embeddings: a batch of 2 equals the singles, in order")
    st, _, byid = d.post("/v1/embeddings", {"input": ids})
    check(st == 200 and byid["data"][0]["embedding"] == v, "token ids equal their text")
    st, _, byids = d.post("/v1/embeddings", {"input": [ids, tokens(d, "Other words here.")]})
    check(st == 200 and byids["data"][0]["embedding"] == v
          and byids["data"][1]["embedding"] == batch["data"][0]["embedding"],
          "an array of token-id arrays")
    st, _, b64 = d.post("/v1/embeddings", {"input": "The sea is calm.", "encoding_format": "base64"})
    raw = base64.b64decode(b64["data"][0]["embedding"])
    # the JSON numbers round-trip to the same float32s (%.9g)
    check(st == 200 and raw == struct.pack("<128f", *v), "base64: little-endian float32")
    st, _, dim = d.post("/v1/embeddings", {"input": "x", "dimensions": 128})
    check(st == 200, "dimensions equal to n_embd is accepted")
    st, _, err = d.post("/v1/embeddings", {"input": "x", "dimensions": 64})
    check(st == 400 and err["error"]["param"] == "dimensions", "other dimensions: 400 naming it")
    st, _, err = d.post("/v1/embeddings", {"input": "x", "model": "text-embedding-3-small"})
    check(st == 400 and err["error"]["code"] == "model_not_found", "another model: 400")
    st, _, err = d.post("/v1/embeddings", {"input": [1, 99999]})
    check(st == 400 and "vocabulary" in err["error"]["message"], "a token id beyond the vocabulary")
    st, _, err = d.post("/v1/embeddings", {"input": "word " * 3000})
    check(st == 400 and err["error"]["code"] == "context_length_exceeded", "too long: 400")
    st, _, ll = d.post("/embedding", {"content": "The sea is calm."})
    check(st == 200 and ll == [{"index": 0, "embedding": [v]}], "llama.cpp /embedding shape")
    st, _, ol = d.post("/api/embed", {"model": ID, "input": ["The sea is calm.", "Other words here."],
                                      "keep_alive": "5m"})
    check(st == 200 and ol["model"] == ID and close(ol["embeddings"][0], v)
          and close(ol["embeddings"][1], batch["data"][0]["embedding"])
          and ol["prompt_eval_count"] == len(ids) + len(tokens(d, "Other words here."))
          and ol["total_duration"] > 0 and ol["load_duration"] == 0, "/api/embed")
    st, _, ol = d.post("/api/embed", {"model": ID, "input": "word " * 3000})
    check(st == 200 and len(ol["embeddings"][0]) == 128, "/api/embed truncates by default")
    st, _, body = d.post("/api/embed", {"model": ID, "input": "word " * 3000, "truncate": False})
    check(is_ollama_error(st, body, 400), "truncate false: 400 in Ollama's shape")
    st, _, leg = d.post("/api/embeddings", {"model": ID + ":latest", "prompt": "The sea is calm."})
    check(st == 200 and list(leg) == ["embedding"] and close(leg["embedding"], v),
          "/api/embeddings (legacy)")


def auth():
    d = Daemon("--api-key=sekrit")
    try:
        st, _, raw = d.request("GET", "/api/tags")
        check(is_ollama_error(st, json.loads(raw), 401), "no API key: 401 in Ollama's shape")
        st, _, raw = d.request("GET", "/api/tags", headers={"Authorization": "Bearer sekrit"})
        check(st == 200, "with the key: 200")
    finally:
        check(d.stop() == 0, "emberd exits 0")


def main():
    shutil.copy(os.path.join(SHARED, "golden", "llama", "model-f32.gguf"), MODEL)
    d = Daemon()
    try:
        info_endpoints(d)
        generation(d)
        disconnect(d)
        errors(d)
        embeddings(d)
    finally:
        check(d.stop() == 0, "emberd exits 0")
    auth()


if __name__ == "__main__":
    main()
