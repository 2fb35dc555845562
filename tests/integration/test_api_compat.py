#!/usr/bin/python3
"""What real clients send beyond the basic path (issue 19), against the
real build/emberd on synthesized models:

logprobs / top_logprobs in OpenAI's chat and legacy shapes, streamed and
not (greedy: the chosen token is the top alternative; the streamed entries
equal the non-streamed ones); echo; suffix and /infill through a model's
FIM tokens (and the 400 naming the field on a model without them); every
refused OpenAI field named in its 400, the accepted ones 200;
/v1/models meta, /v1/models/{id} and its 404, the unprefixed aliases;
llama.cpp's /completion (shapes, stream without [DONE], n_probs, refused
knobs), /props, /slots and slot actions (403 without an API key, 501 with);
curl -d's form Content-Type; CORS preflight echoing the requested headers
or the configured list.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_api import Daemon, check, sse_events, stream, synth  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Tell me a story"}]}


def chat(**kw):
    b = dict(CHAT)
    b.update(kw)
    return b


def test_chat_logprobs(d):
    st, _, r = d.post("/v1/chat/completions", chat(
        max_tokens=8, temperature=0, logprobs=True, top_logprobs=3))
    check(st == 200, "chat logprobs: 200")
    lp = r["choices"][0]["logprobs"]
    check(set(lp) == {"content", "refusal"} and lp["refusal"] is None,
          "chat logprobs has content and refusal")
    content = lp["content"]
    check(len(content) == r["usage"]["completion_tokens"] or
          (r["choices"][0]["finish_reason"] == "stop" and
           len(content) == r["usage"]["completion_tokens"] - 1),
          "one entry per generated token (%d)" % len(content))
    for e in content:
        check(set(e) == {"token", "logprob", "bytes", "top_logprobs"}, "entry keys")
        if not e["token"].startswith("bytes:"):
            check(bytes(e["bytes"]) == e["token"].encode(), "bytes are the token's")
        check(e["logprob"] <= 0, "logprob <= 0")
        check(len(e["top_logprobs"]) == 3, "3 alternatives")
        tops = [t["logprob"] for t in e["top_logprobs"]]
        check(tops == sorted(tops, reverse=True), "alternatives best first")
        # greedy: the chosen token is the most likely one
        check(abs(e["logprob"] - tops[0]) < 1e-4, "greedy picks the top alternative")
        check(set(e["top_logprobs"][0]) == {"token", "logprob", "bytes"},
              "alternative keys")
    # streamed: the same entries, spread over the text chunks
    st, _, ev = stream(d, "/v1/chat/completions", chat(
        max_tokens=8, temperature=0, logprobs=True, top_logprobs=3, stream=True))
    check(st == 200 and ev[-1] == "[DONE]", "streamed logprobs: 200")
    got = []
    for e in ev[:-1]:
        for c in e["choices"]:
            if c["delta"].get("content"):
                check(c["logprobs"] is not None, "a text chunk carries logprobs")
                got += c["logprobs"]["content"]
            else:
                check(c["logprobs"] is None, "other chunks have logprobs null")
    check([g["bytes"] for g in got] == [c["bytes"] for c in content],
          "streamed entries equal the non-streamed ones")
    # without logprobs: null, as before
    st, _, r = d.post("/v1/chat/completions", chat(max_tokens=2))
    check(r["choices"][0]["logprobs"] is None, "no logprobs asked: null")
    # sampling with penalties and a stop string: still one entry per token
    st, _, r = d.post("/v1/chat/completions", chat(
        max_tokens=12, temperature=1.3, seed=5, presence_penalty=1.5,
        logprobs=True, top_logprobs=0, stop=["e"]))
    check(st == 200 and all(e["top_logprobs"] == []
                            for e in r["choices"][0]["logprobs"]["content"]),
          "top_logprobs 0: empty lists")


def test_completion_logprobs_and_echo(d):
    st, _, r = d.post("/v1/completions", {
        "prompt": "Once upon", "max_tokens": 6, "temperature": 0, "logprobs": 2})
    check(st == 200, "completions logprobs: 200")
    lp = r["choices"][0]["logprobs"]
    check(set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"},
          "legacy logprobs keys")
    n = len(lp["tokens"])
    check(n > 0 and len(lp["token_logprobs"]) == n and len(lp["top_logprobs"]) == n
          and len(lp["text_offset"]) == n, "legacy arrays line up")
    check(lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"]),
          "text offsets grow from 0")
    check(all(len(t) <= 2 for t in lp["top_logprobs"]), "at most 2 alternatives")
    # streamed: the same tokens
    st, _, ev = stream(d, "/v1/completions", {
        "prompt": "Once upon", "max_tokens": 6, "temperature": 0, "logprobs": 2,
        "stream": True})
    toks = []
    for e in ev[:-1]:
        if e["choices"] and e["choices"][0]["logprobs"]:
            toks += e["choices"][0]["logprobs"]["tokens"]
    check(toks == lp["tokens"], "streamed legacy tokens equal the non-streamed")
    # echo: the prompt leads the text
    st, _, plain = d.post("/v1/completions", {
        "prompt": "Once upon", "max_tokens": 5, "temperature": 0})
    st, _, r = d.post("/v1/completions", {
        "prompt": "Once upon", "max_tokens": 5, "temperature": 0, "echo": True})
    check(st == 200 and r["choices"][0]["text"] ==
          "Once upon" + plain["choices"][0]["text"], "echo prepends the prompt")
    st, _, ev = stream(d, "/v1/completions", {
        "prompt": "Once upon", "max_tokens": 5, "temperature": 0, "echo": True,
        "stream": True})
    text = "".join(e["choices"][0]["text"] for e in ev[:-1] if e["choices"])
    check(text == r["choices"][0]["text"], "streamed echo: the same text")
    st, _, r = d.post("/v1/generate", {"prompt": "Once upon", "max_tokens": 6,
                                       "temperature": 0, "logprobs": 2})
    check(st == 200 and len(r["logprobs"]["content"]) == len(lp["tokens"]),
          "/v1/generate carries logprobs when asked")
    st, _, r = d.post("/v1/completions", {"prompt": "x", "echo": True, "logprobs": 1})
    check(st == 400 and r["error"]["param"] == "echo", "echo + logprobs: 400 naming echo")


# (field, value, chat?) refused with a 400 naming the field
REFUSED = [
    ("store", True, 1), ("audio", {"voice": "alloy", "format": "wav"}, 1),
    ("modalities", ["text", "audio"], 1), ("reasoning_effort", "low", 1),
    ("verbosity", "high", 1), ("service_tier", "priority", 1),
    ("web_search_options", {}, 1), ("logit_bias", {"99999": 5}, 1),
    ("top_logprobs", 2, 1), ("best_of", 3, 0), ("logit_bias", {"1": 101}, 0),
    ("suffix", "tail", 0),
]
ACCEPTED = {"user": "u1", "store": False, "metadata": {"k": "v"}, "service_tier": "auto",
            "modalities": ["text"], "prediction": {"type": "content", "content": "x"},
            "parallel_tool_calls": True, "logit_bias": {}, "safety_identifier": "s",
            "prompt_cache_key": "k", "an_unknown_field": [1, 2]}


def test_field_audit(d):
    for field, value, is_chat in REFUSED:
        body = chat(max_tokens=2) if is_chat else {"prompt": "x", "max_tokens": 2}
        body[field] = value
        st, _, r = d.post("/v1/chat/completions" if is_chat else "/v1/completions", body)
        check(st == 400 and r["error"]["param"] == field and field in r["error"]["message"],
              "%s=%s refused naming it" % (field, json.dumps(value)))
    body = chat(max_tokens=2)
    body.update(ACCEPTED)
    st, _, r = d.post("/v1/chat/completions", body)
    check(st == 200, "labels, no-op fields and unknown fields accepted: %s" % r)


def test_logit_bias(d):
    st, _, t = d.post("/tokenize", {"content": "e", "add_special": False})
    e = t["tokens"][-1]
    st, _, r = d.post("/v1/completions", {"prompt": "Once", "max_tokens": 4, "temperature": 0,
                                          "logit_bias": {str(e): 100}})
    check(st == 200 and r["choices"][0]["text"] == "eeee", "logit_bias +100 forces a token")
    # the token the model likes best after "Once" (its id from /completion), banned
    st, _, r = d.post("/completion", {"prompt": "Once", "n_predict": 1, "temperature": 0,
                                      "n_probs": 1})
    banned = r["completion_probabilities"][0]["id"]
    first = r["completion_probabilities"][0]["token"]
    st, _, r = d.post("/v1/completions", {"prompt": "Once", "max_tokens": 3, "temperature": 0,
                                          "logprobs": 1, "logit_bias": {str(banned): -100}})
    lp = r["choices"][0]["logprobs"]
    check(st == 200 and lp["tokens"][0] != first and lp["token_logprobs"][0] > -50,
          "logit_bias -100 bans the greedy choice")


def test_models_and_aliases(d):
    st, _, raw = d.request("GET", "/v1/models")
    m = json.loads(raw)["data"][0]
    meta = m["meta"]
    for k in ("vocab_type", "n_vocab", "n_ctx_train", "n_embd", "n_params", "size", "n_ctx"):
        check(isinstance(meta.get(k), int) and meta[k] > 0, "models meta.%s" % k)
    st, _, raw = d.request("GET", "/v1/models/" + m["id"])
    check(st == 200 and json.loads(raw)["id"] == m["id"], "GET /v1/models/{id}")
    st, _, raw = d.request("GET", "/v1/models/gpt-4o")
    err = json.loads(raw)["error"]
    check(st == 404 and err["code"] == "model_not_found" and err["param"] == "model",
          "unknown model: 404 model_not_found")
    st, _, raw = d.request("GET", "/models")
    check(st == 200 and json.loads(raw)["data"][0]["id"] == m["id"], "GET /models")
    st, _, raw = d.request("GET", "/models/" + m["id"])
    check(st == 200, "GET /models/{id}")
    st, _, r = d.post("/chat/completions", chat(max_tokens=2))
    check(st == 200 and r["object"] == "chat.completion", "POST /chat/completions")
    st, _, r = d.post("/completions", {"prompt": "x", "max_tokens": 2})
    check(st == 200 and r["object"] == "text_completion", "POST /completions")


def raw_request(d, method, path, body, headers):
    c = d.conn()
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def test_content_type_and_cors(d, cors_fixed):
    body = json.dumps({"prompt": "x", "max_tokens": 2})
    st, _, _ = raw_request(d, "POST", "/v1/completions", body,
                           {"Content-Type": "application/x-www-form-urlencoded"})
    check(st == 200, "curl -d (form Content-Type) with a JSON body: 200")
    st, _, _ = raw_request(d, "POST", "/v1/completions", body, {"Content-Type": "text/plain"})
    check(st == 415, "text/plain: still 415")
    hdrs = {"Origin": "http://app.test", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, x-stainless-os, x-stainless-lang"}
    st, h, _ = raw_request(d, "OPTIONS", "/v1/chat/completions", None, hdrs)
    check(st == 204 and h.get("Access-Control-Allow-Headers") ==
          "authorization, x-stainless-os, x-stainless-lang",
          "preflight echoes the requested headers")
    st, h, _ = raw_request(cors_fixed, "OPTIONS", "/v1/chat/completions", None, hdrs)
    check(st == 204 and h.get("Access-Control-Allow-Headers") == "Authorization, X-Mine",
          "configured cors_headers answer instead")
    hdrs["Origin"] = "http://evil.test"
    st, h, _ = raw_request(d, "OPTIONS", "/v1/chat/completions", None, hdrs)
    check(st == 403 and "Access-Control-Allow-Headers" not in h,
          "other origins: 403, no headers")


def test_llamacpp(d):
    st, _, r = d.post("/completion", {"prompt": "Once upon", "n_predict": 4,
                                      "temperature": 0, "n_probs": 2})
    check(st == 200 and isinstance(r["content"], str) and r["stop"] is True,
          "/completion: content and stop")
    for k in ("tokens_predicted", "tokens_evaluated", "stop_type", "timings", "model"):
        check(k in r, "/completion has %s" % k)
    check(r["stop_type"] == "limit" and r["tokens_predicted"] == 4, "n_predict limits")
    probs = r["completion_probabilities"]
    check(len(probs) == 4 and all(set(p) == {"id", "token", "bytes", "logprob",
                                             "top_logprobs"} for p in probs),
          "completion_probabilities entries")
    check(all(len(p["top_logprobs"]) == 2 for p in probs), "n_probs alternatives")
    c = d.conn()
    try:
        c.request("POST", "/completion", body=json.dumps(
            {"prompt": "Once upon", "n_predict": 4, "temperature": 0, "stream": True}),
            headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        ev = sse_events(resp)
    finally:
        c.close()
    check(ev and ev[-1] != "[DONE]" and ev[-1]["stop"] is True and
          all(e["stop"] is False for e in ev[:-1]), "streamed: stop false ... true, no [DONE]")
    check("".join(e["content"] for e in ev) == r["content"], "streamed content equals")
    c = d.conn()
    try:
        c.request("POST", "/completion", body=json.dumps(
            {"prompt": "Once upon", "n_predict": 4, "temperature": 0, "stream": True,
             "n_probs": 2}), headers={"Content-Type": "application/json"})
        ev = sse_events(c.getresponse())
    finally:
        c.close()
    got = [p["id"] for e in ev for p in e.get("completion_probabilities", [])]
    check(got == [p["id"] for p in probs], "streamed completion_probabilities equal")
    st, _, r2 = d.post("/completion", {"prompt": "Once upon", "n_predict": 4,
                                       "temperature": 0, "stop": [r["content"][1:3]]}
                       ) if len(r["content"]) >= 3 else (200, None, None)
    if r2 is not None and r2["stop_type"] == "word":
        check(r2["stopping_word"] == r["content"][1:3], "stopping_word names the stop")
    for field, value in (("mirostat", 2), ("typical_p", 0.5), ("ignore_eos", True),
                         ("logit_bias", [[1, -1]]), ("samplers", ["top_k"])):
        st, _, r = d.post("/completion", {"prompt": "x", field: value})
        check(st == 400 and r["error"]["param"] == field, "/completion %s refused" % field)
    st, _, r = d.post("/completion", {"prompt": "x", "n_predict": 0})
    check(st == 400 and r["error"]["param"] == "n_predict", "n_predict 0: 400 naming it")
    st, _, r = d.post("/completion", {"prompt": "x", "n_predict": -1, "seed": -1,
                                      "mirostat": 0, "cache_prompt": True,
                                      "repeat_penalty": 1.1, "repeat_last_n": -1})
    check(st == 200, "neutral knobs, n_predict -1 and seed -1 accepted")
    st, _, raw = d.request("GET", "/props")
    p = json.loads(raw)
    check(st == 200 and p["total_slots"] >= 1 and
          p["default_generation_settings"]["n_ctx"] > 0, "/props")
    st, _, raw = d.request("GET", "/slots")
    s = json.loads(raw)
    check(st == 200 and len(s) == p["total_slots"] and "is_processing" in s[0], "/slots")
    st, _, raw = d.request("POST", "/slots/0?action=erase", "{}")
    check(st == 403, "slot actions without an API key: 403")
    st, _, r = d.post("/infill", {"input_prefix": "a", "input_suffix": "b\u0000c"})
    check(st == 400 and r["error"]["param"] == "input_suffix", "/infill: NUL in the suffix 400")
    st, _, r = d.post("/infill", {"input_prefix": "def f(", "input_suffix": ")\n"})
    check(st == 400 and r["error"]["param"] == "input_suffix",
          "/infill without FIM tokens: 400 naming input_suffix")


def test_fim(path):
    d = Daemon(path)
    try:
        st, _, r = d.post("/infill", {"input_prefix": "def f(", "input_suffix": ")\n",
                                      "n_predict": 3, "temperature": 0})
        check(st == 200 and r["tokens_predicted"] == 3, "/infill with FIM tokens")
        # the FIM prompt is prefix, suffix and middle tokens around the texts
        c = d.conn()
        st, _, tok = d.post("/tokenize", {"content": "def f("})
        n_pre = len(tok["tokens"])
        st, _, tok = d.post("/tokenize", {"content": ")\n", "add_special": False})
        check(r["tokens_evaluated"] == n_pre + len(tok["tokens"]) + 3,
              "FIM prompt = prefix + suffix + 3 FIM tokens")
        c.close()
        st, _, r = d.post("/v1/completions", {"prompt": "def f(", "suffix": ")\n",
                                              "max_tokens": 3, "temperature": 0})
        check(st == 200 and r["usage"]["prompt_tokens"] == n_pre + len(tok["tokens"]) + 3,
              "suffix: fill in the middle")
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


def test_slot_actions_with_key(path):
    d = Daemon(path, "--api-key=k1")
    try:
        c = d.conn()
        c.request("POST", "/slots/0?action=save", body="{}",
                  headers={"Authorization": "Bearer k1", "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        c.close()
        check(r.status == 501, "slot actions with an API key: 501")
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


def main():
    tiny = synth("tiny")
    fim = os.path.join(os.environ["TMPDIR"], "fim.gguf")
    import subprocess
    from test_api import EMBER
    subprocess.run([EMBER, "synth", "--preset", "tiny", "--type", "q8_0", "--fim",
                    "-o", fim], check=True, capture_output=True, timeout=120)
    d = Daemon(tiny, "--cors-origins=http://app.test")
    d2 = Daemon(tiny, "--cors-origins=http://app.test", "--cors-headers=Authorization, X-Mine")
    try:
        test_chat_logprobs(d)
        test_completion_logprobs_and_echo(d)
        test_field_audit(d)
        test_logit_bias(d)
        test_models_and_aliases(d)
        test_content_type_and_cors(d, d2)
        test_llamacpp(d)
        check(d.stop() == 0 and d2.stop() == 0, "exit 0")
    finally:
        for x in (d, d2):
            if x.proc.poll() is None:
                x.proc.kill()
    test_fim(fim)
    test_slot_actions_with_key(tiny)
    print("all API compatibility checks passed")


if __name__ == "__main__":
    main()
