#!/usr/bin/python3
"""Structured output against the real build/emberd with a synthesized model.

OpenAI response_format json_schema (plain and streamed) on
/v1/chat/completions, llama.cpp's json_schema on /v1/completions and
grammar (GBNF) on /v1/generate, json_object mode: every output must parse
and satisfy its schema (checked here by a small validator of the keywords
used, since no JSON Schema package is among the Debian ones). Refusals: an
unknown response_format type, an unsupported schema keyword, a bad
grammar, two constraints at once and tools on a model whose template shows
none are 400s naming the
field or keyword. The model is random, so only validity is checked.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_api import Daemon, check, stream, synth  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["x", "y"]},
                 "maxItems": 3},
        "ok": {"type": ["boolean", "null"]},
        "day": {"type": "string", "format": "date"},
    },
    "required": ["name", "age", "day"],
}


def valid(doc):
    """The SCHEMA's rules, as a validator would apply them."""
    if not isinstance(doc, dict) or set(doc) - set(SCHEMA["properties"]):
        return False
    if any(k not in doc for k in SCHEMA["required"]):
        return False
    if not isinstance(doc["name"], str) or len(doc["name"]) > 10:
        return False
    if type(doc["age"]) is not int or not 0 <= doc["age"] <= 120:
        return False
    if "tags" in doc and (not isinstance(doc["tags"], list) or len(doc["tags"]) > 3
                          or any(t not in ("x", "y") for t in doc["tags"])):
        return False
    if "ok" in doc and doc["ok"] not in (True, False, None):
        return False
    return re.fullmatch(r"\d{4}-\d{2}-\d{2}", doc["day"]) is not None


def main():
    d = Daemon(synth("tiny"))
    try:
        rf = {"type": "json_schema",
              "json_schema": {"name": "person", "strict": True, "schema": SCHEMA}}
        for seed in range(24):
            st, _, o = d.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "a person"}],
                "response_format": rf, "seed": seed, "temperature": 1.0,
                "max_tokens": 400})
            check(st == 200, "chat json_schema seed %d: 200" % seed)
            ch = o["choices"][0]
            text = ch["message"]["content"]
            check(ch["finish_reason"] == "stop", "seed %d stops (%s)" % (seed, text))
            check(valid(json.loads(text)), "seed %d output validates: %s" % (seed, text))

        _, _, events = stream(d, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "a person"}],
            "response_format": rf, "seed": 7, "stream": True, "max_tokens": 400})
        text = "".join(e["choices"][0]["delta"].get("content", "")
                       for e in events if e != "[DONE]" and e.get("choices"))
        check(events[-1] == "[DONE]" and valid(json.loads(text)),
              "streamed json_schema deltas join to a valid document")

        for seed in range(8):
            st, _, o = d.post("/v1/completions", {
                "prompt": "JSON:", "json_schema": SCHEMA, "seed": seed,
                "max_tokens": 400})
            text = o["choices"][0]["text"]
            check(st == 200 and valid(json.loads(text)),
                  "completions json_schema seed %d validates" % seed)

        st, _, o = d.post("/v1/generate", {
            "prompt": "Answer:", "grammar": 'root ::= ("yes" | "no") "!"',
            "max_tokens": 50, "seed": 3})
        check(st == 200 and o["text"] in ("yes!", "no!") and o["finish_reason"] == "stop",
              "generate with a GBNF grammar: %r" % o.get("text"))

        parsed = 0
        for seed in range(6):
            st, _, o = d.post("/v1/chat/completions", {
                "messages": [{"role": "user", "content": "json"}],
                "response_format": {"type": "json_object"}, "seed": seed,
                "max_tokens": 300})
            ch = o["choices"][0]
            if ch["finish_reason"] == "stop":
                check(isinstance(json.loads(ch["message"]["content"]), dict),
                      "json_object seed %d is an object" % seed)
                parsed += 1
            else:
                # Cut by max_tokens: still a prefix of an object.
                check(ch["message"]["content"].startswith("{"),
                      "json_object seed %d cut by length starts an object" % seed)
        print("json_object: %d of 6 finished within max_tokens" % parsed)

        bad = [
            ({"response_format": {"type": "yaml"}}, "response_format.type", "yaml"),
            ({"response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "string", "contentEncoding": "base64"}}}},
             "response_format.json_schema.schema", "contentEncoding"),
            ({"json_schema": {"allOf": []}}, "json_schema", "allOf"),
            ({"grammar": "root ::= nowhere"}, "grammar", "nowhere"),
            ({"grammar": "root ::= \"a\"", "json_schema": {}}, "grammar", "together"),
            ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "tools"),
            ({"tool_choice": "required"}, "tool_choice", "tool_choice"),
        ]
        for extra, param, word in bad:
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
            body.update(extra)
            st, _, o = d.post("/v1/chat/completions", body)
            err = o.get("error", {})
            check(st == 400 and err.get("param") == param and word in err.get("message", ""),
                  "400 naming %s (%s): %s" % (param, word, err.get("message")))
        check(d.stop() == 0, "emberd exits 0")
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


if __name__ == "__main__":
    main()
