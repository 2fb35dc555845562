#!/usr/bin/python3
"""The Python HTTP clients and curl that issue 19 names, against the real
build/emberd on a synthesized model: what a script written with `requests`
or `httpx` (Debian's python3-requests, python3-httpx) or a shell line with
curl sends and reads.

requests: chat and completions (plain and streamed with iter_lines), n = 2
choices, logprobs, a prompt of token ids, /v1/models/{id}, embeddings, an
OpenAI-shaped 400 naming a refused field. httpx: the same chat streamed
with client.stream(), Ollama's /api/chat NDJSON stream and /api/tags, and
an AsyncClient of 4 concurrent completions. curl: `curl -d` with no
Content-Type (curl then sends form encoding) to /v1/chat/completions and
llama.cpp's /completion. The model is random: texts are compared with each
other, never with fixed strings.
"""
import asyncio
import json
import os
import subprocess
import sys

import httpx
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_api import Daemon, check, synth  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Tell me a story"}],
        "max_tokens": 12, "temperature": 0}


def sse_data(lines):
    """The JSON payloads of an SSE stream's data lines, and whether it ended with [DONE]."""
    out, done = [], False
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode()
        line = line.strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        try:
            out.append(json.loads(line[6:]))
        except ValueError:
            raise AssertionError("not JSON: %r" % line[:200])
    return out, done


def with_requests(base):
    r = requests.post(base + "/v1/chat/completions", json=CHAT, timeout=60)
    check(r.status_code == 200 and r.headers["Content-Type"].startswith("application/json"),
          "requests: chat 200 JSON")
    body = r.json()
    text = body["choices"][0]["message"]["content"]
    check(body["object"] == "chat.completion" and body["usage"]["completion_tokens"] > 0,
          "requests: chat completion shape")

    r = requests.post(base + "/v1/chat/completions", json=dict(CHAT, stream=True),
                      stream=True, timeout=60)
    chunks, done = sse_data(r.iter_lines())
    check(r.status_code == 200 and done, "requests: streamed chat ends with [DONE]")
    streamed = "".join(c["choices"][0]["delta"].get("content") or ""
                       for c in chunks if c["choices"])
    check(streamed == text, "requests: streamed text equals the plain answer")

    r = requests.post(base + "/v1/completions", json={
        "prompt": "Once upon", "max_tokens": 6, "n": 2, "seed": 7}, timeout=60)
    ch = r.json()["choices"]
    check(r.status_code == 200 and sorted(c["index"] for c in ch) == [0, 1],
          "requests: n = 2 gives choices 0 and 1")

    r = requests.post(base + "/v1/completions", json={
        "prompt": [1, 15, 27, 3], "max_tokens": 4, "temperature": 0,
        "logprobs": 2}, timeout=60)
    b = r.json()
    lp = b["choices"][0]["logprobs"]
    check(r.status_code == 200 and b["usage"]["prompt_tokens"] == 4,
          "requests: a prompt of token ids counts its ids")
    check(len(lp["tokens"]) == len(lp["token_logprobs"]) > 0 and
          all(len(t) <= 2 for t in lp["top_logprobs"]),
          "requests: legacy logprobs shape")

    model = requests.get(base + "/v1/models", timeout=10).json()["data"][0]["id"]
    r = requests.get(base + "/v1/models/" + model, timeout=10)
    check(r.status_code == 200 and r.json()["id"] == model, "requests: /v1/models/{id}")
    r = requests.get(base + "/v1/models/no-such-model", timeout=10)
    check(r.status_code == 404 and r.json()["error"]["code"] == "model_not_found",
          "requests: unknown model 404")

    r = requests.post(base + "/v1/embeddings", json={"input": ["a b", "c"]}, timeout=60)
    d = r.json()["data"]
    norms = [sum(x * x for x in e["embedding"]) for e in d]
    check(r.status_code == 200 and len(d) == 2 and all(abs(n - 1) < 1e-3 for n in norms),
          "requests: two normalized embeddings")

    r = requests.post(base + "/v1/chat/completions", json=dict(CHAT, store=True), timeout=10)
    err = r.json()["error"]
    check(r.status_code == 400 and err["param"] == "store", "requests: a refused field is named")
    return text


def with_httpx(base, text):
    with httpx.Client(base_url=base, timeout=60) as c:
        with c.stream("POST", "/v1/chat/completions", json=dict(CHAT, stream=True)) as r:
            chunks, done = sse_data(r.iter_lines())
        streamed = "".join(x["choices"][0]["delta"].get("content") or ""
                           for x in chunks if x["choices"])
        check(r.status_code == 200 and done and streamed == text,
              "httpx: streamed chat equals the requests answer")

        tags = c.get("/api/tags").json()["models"]
        check(len(tags) == 1, "httpx: /api/tags lists the served model")
        lines = []
        with c.stream("POST", "/api/chat", json={
                "model": tags[0]["name"], "options": {"temperature": 0, "num_predict": 12},
                "messages": CHAT["messages"]}) as r:
            for line in r.iter_lines():
                if line:
                    lines.append(json.loads(line))
        check(r.status_code == 200 and lines and lines[-1]["done"] and
              all(not x["done"] for x in lines[:-1]), "httpx: Ollama NDJSON ends with done")
        ollama_text = "".join(x["message"]["content"] for x in lines)
        check(ollama_text == text, "httpx: Ollama chat equals the OpenAI answer")

    async def four():
        async with httpx.AsyncClient(base_url=base, timeout=60) as ac:
            rs = await asyncio.gather(*[ac.post("/v1/completions", json={
                "prompt": "Hello", "max_tokens": 8, "temperature": 0})
                for _ in range(4)])
        return [r.json()["choices"][0]["text"] for r in rs if r.status_code == 200]

    outs = asyncio.run(four())
    check(len(outs) == 4 and len(set(outs)) == 1,
          "httpx: 4 concurrent greedy completions agree")


def with_curl(base, text):
    body = json.dumps(CHAT)
    # No -H: curl sends application/x-www-form-urlencoded, as people type it.
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-d", body,
                          base + "/v1/chat/completions"],
                         capture_output=True, text=True, timeout=60).stdout
    payload, code = out.rsplit("\n", 1)
    check(code == "200" and json.loads(payload)["choices"][0]["message"]["content"] == text,
          "curl -d without a Content-Type: 200, the same answer")
    out = subprocess.run(["curl", "-s", "-d", json.dumps(
        {"prompt": "Once upon", "n_predict": 6, "temperature": 0}), base + "/completion"],
        capture_output=True, text=True, timeout=60).stdout
    check("content" in json.loads(out), "curl -d to llama.cpp's /completion")


def main():
    d = Daemon(synth("tiny"))
    try:
        base = "http://127.0.0.1:%d" % d.port
        text = with_requests(base)
        with_httpx(base, text)
        with_curl(base, text)
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    print("requests, httpx and curl checks passed")


if __name__ == "__main__":
    main()
