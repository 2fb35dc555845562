#!/usr/bin/python3
"""OpenAI's array prompts and n > 1 against the real build/emberd.

A prompt of token ids answers what its text answers; an array of prompts
answers one choice per prompt; n choices share one prefill (the engine's
prefill counter in /metrics grows by the prompt's uncached tokens once) and
each samples with its own seed (choice i of n equals a single request with
seed + i); index = prompt * n + j; streaming interleaves the choices, each
naming its index, and ends with one usage chunk; usage counts each prompt
once and sums the completions. The model is random: texts are compared with
each other, never with fixed strings. Every wait is bounded.
"""
from test_api import Daemon, check, stream, synth, tokens


def post(d, body, path="/v1/completions"):
    st, _, o = d.post(path, body)
    check(st == 200, "%s answers 200 (%s)" % (path, o if st != 200 else ""))
    return o


def one(d, prompt, seed, temperature=1.0, max_tokens=8):
    o = post(d, {"prompt": prompt, "max_tokens": max_tokens, "seed": seed,
                 "temperature": temperature})
    return o["choices"][0]["text"], o["usage"]


def test_token_ids(d):
    text = "Once upon a time there was a small house"
    want, u = one(d, text, 3, temperature=0)
    ids = tokens(d, text)
    got, u2 = one(d, ids, 3, temperature=0)
    check(got == want, "a token-id prompt answers what its text answers")
    check(u2["prompt_tokens"] == len(ids) == u["prompt_tokens"],
          "a token-id prompt counts its ids")
    o = post(d, {"prompt": [ids, ids[:4]], "max_tokens": 4, "temperature": 0})
    check([c["index"] for c in o["choices"]] == [0, 1], "token-id arrays: a choice each")
    check(o["usage"]["prompt_tokens"] == len(ids) + 4, "usage counts both prompts")
    st, _, o = d.post("/v1/completions", {"prompt": [1, 2, 1 << 30], "max_tokens": 2})
    check(st == 400 and o["error"]["param"] == "prompt" and "1073741824" in o["error"]["message"],
          "an id outside the vocabulary is 400 naming it: %s" % o)


def test_prompt_array(d):
    prompts = ["The quick brown fox", "In a land far away", "Hello"]
    singles = [one(d, p, 11 + i) for i, p in enumerate(prompts)]
    o = post(d, {"prompt": prompts, "max_tokens": 8, "seed": 11, "temperature": 1})
    check(len(o["choices"]) == 3, "three prompts, three choices")
    for i, c in enumerate(o["choices"]):
        check(c["index"] == i and c["text"] == singles[i][0],
              "choice %d answers prompt %d (seed + index)" % (i, i))
    u = o["usage"]
    check(u["prompt_tokens"] == sum(s[1]["prompt_tokens"] for s in singles),
          "usage: every prompt counted once")
    check(u["completion_tokens"] == sum(s[1]["completion_tokens"] for s in singles),
          "usage: completions summed")
    check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], "total")


def test_n(d):
    prompt = "Once upon a time in a quiet village by the sea, a fisherman"
    before = d.metric("ember_engine_prefill_tokens_total")
    o = post(d, {"prompt": prompt, "n": 3, "max_tokens": 8, "seed": 40, "temperature": 1})
    after = d.metric("ember_engine_prefill_tokens_total")
    singles = [one(d, prompt, 40 + j) for j in range(3)]
    u = o["usage"]
    check([c["index"] for c in o["choices"]] == [0, 1, 2], "n = 3: three choices in order")
    for j, c in enumerate(o["choices"]):
        check(c["text"] == singles[j][0], "choice %d samples with seed + %d" % (j, j))
    check(len({c["text"] for c in o["choices"]}) > 1, "the choices differ")
    check(u["prompt_tokens"] == singles[0][1]["prompt_tokens"], "usage: the prompt once")
    check(u["completion_tokens"] == sum(s[1]["completion_tokens"] for s in singles),
          "usage: completions summed")
    cached = u["prompt_tokens_details"]["cached_tokens"]
    check(after - before == u["prompt_tokens"] - cached,
          "one prefill for three choices (%d prompt tokens evaluated, %d cached)"
          % (after - before, cached))
    # Two prompts, n = 2: index = prompt * n + j, seed + index.
    p2 = ["The quick brown fox", "In a land far away"]
    o = post(d, {"prompt": p2, "n": 2, "max_tokens": 6, "seed": 70, "temperature": 1})
    for c in o["choices"]:
        i = c["index"]
        want, _ = one(d, p2[i // 2], 70 + i, max_tokens=6)
        check(c["text"] == want, "prompt %d choice %d is index %d" % (i // 2, i % 2, i))
    st, _, o = d.post("/v1/completions", {"prompt": "x", "n": 9, "max_tokens": 2})
    check(st == 400 and "slots" in o["error"]["message"],
          "n beyond the slots is 400: %s" % o["error"]["message"])


def test_stream(d):
    msgs = [{"role": "user", "content": "Tell me a story about a cat."}]
    body = {"messages": msgs, "n": 3, "max_tokens": 8, "seed": 5, "temperature": 1}
    o = post(d, body, "/v1/chat/completions")
    want = [c["message"]["content"] for c in o["choices"]]
    st, _, events = stream(d, "/v1/chat/completions",
                           dict(body, stream=True, stream_options={"include_usage": True}))
    check(st == 200 and events[-1] == "[DONE]", "n = 3 streams, ends with [DONE]")
    chunks = events[:-1]
    text, roles, finishes = ["", "", ""], [0, 0, 0], [0, 0, 0]
    for c in chunks[:-1]:
        check(len(c["choices"]) == 1, "each chunk carries one choice")
        ch = c["choices"][0]
        i = ch["index"]
        if "role" in ch["delta"]:
            roles[i] += 1
            check(text[i] == "" and finishes[i] == 0, "the role chunk comes first")
        text[i] += ch["delta"].get("content", "")
        if ch["finish_reason"] is not None:
            finishes[i] += 1
    check(roles == [1, 1, 1] and finishes == [1, 1, 1],
          "each choice: one role chunk, one finish")
    check(text == want, "streamed choices equal the body's")
    usage = chunks[-1]
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    check(usage["choices"] == [] and all(usage["usage"][k] == o["usage"][k] for k in keys),
          "one usage chunk at the end, equal to the body's usage")


def test_per_choice_features(d):
    """logprobs and echo are per choice; combinations without a faithful
    answer are 400 naming the field."""
    prompt = "Once upon a time"
    body = {"prompt": prompt, "n": 2, "max_tokens": 6, "seed": 9, "temperature": 1,
            "logprobs": 2}
    o = post(d, body)
    for j, c in enumerate(o["choices"]):
        lp = c["logprobs"]
        check(lp is not None and len(lp["tokens"]) == 6, "choice %d: its own logprobs" % j)
        single = post(d, {"prompt": prompt, "max_tokens": 6, "seed": 9 + j,
                          "temperature": 1, "logprobs": 2})["choices"][0]
        check(single["logprobs"]["tokens"] == lp["tokens"] and
              single["logprobs"]["token_logprobs"] == lp["token_logprobs"],
              "choice %d's logprobs equal a single request's with seed + %d" % (j, j))
    st, _, events = stream(d, "/v1/completions", dict(body, stream=True))
    got = [[], []]
    for c in events[:-1]:
        ch = c["choices"][0]
        if ch.get("logprobs"):
            got[ch["index"]] += ch["logprobs"]["token_logprobs"]
    check(got == [c["logprobs"]["token_logprobs"] for c in o["choices"]],
          "streamed logprobs follow each choice")
    o = post(d, {"prompt": prompt, "n": 2, "max_tokens": 4, "seed": 9, "echo": True})
    check(all(c["text"].startswith(prompt) for c in o["choices"]), "echo leads every choice")
    st, _, events = stream(d, "/v1/completions", {"prompt": prompt, "n": 2, "max_tokens": 4,
                                                   "seed": 9, "echo": True, "stream": True})
    got = ["", ""]
    for c in events[:-1]:
        got[c["choices"][0]["index"]] += c["choices"][0]["text"]
    check(got == [c["text"] for c in o["choices"]], "streamed echo per choice")
    tool = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    refused = [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2,
                                  "tools": tool}, "n"),
        ("/v1/completions", {"prompt": ["a", "b"], "echo": True}, "echo"),
        ("/v1/completions", {"prompt": [1, 2, 3], "echo": True}, "echo"),
        ("/v1/completions", {"prompt": ["a", "b"], "suffix": "c"}, "suffix"),
        ("/completion", {"prompt": "a", "n": 2}, "n"),
        ("/v1/generate", {"prompt": "a", "n": 2}, "n"),
        ("/v1/generate", {"prompt": ["a", "b"]}, "prompt"),
    ]
    for path, b, param in refused:
        st, _, o = d.post(path, dict(b, max_tokens=2))
        check(st == 400 and o["error"]["param"] == param,
              "%s %s is 400 naming %s: %s" % (path, sorted(b), param, o))


def main():
    tiny = synth("tiny")
    d = Daemon(tiny, "--slots=4")
    try:
        test_token_ids(d)
        test_prompt_array(d)
        test_n(d)
        test_stream(d)
        test_per_choice_features(d)
        check(d.stop() == 0, "exit 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
    print("all choice checks passed")


if __name__ == "__main__":
    main()
