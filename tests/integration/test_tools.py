#!/usr/bin/python3
"""Tool calling through the real build/emberd on a synthesized model.

Served with two real chat templates (Qwen2.5: <tool_call> syntax; Llama
3.2: bare JSON calls), since the synthesized model has none. tool_choice
"required" and a named function must give OpenAI tool_calls (finish_reason
"tool_calls", content null, ids call_..., arguments a JSON string valid
under the function's schema) for every seed; streamed deltas must
reassemble to exactly the non-streamed message for the same seed (ids
aside); "auto" streams and answers the same way; an agent round trip
(assistant tool_calls with null content, then a tool message) is accepted;
and every malformed tools field is a 400 naming it. The model is random:
only shapes and validity are checked.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_api import EMBER, TMP, Daemon, check, stream  # noqa: E402

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                         "shared", "chat-templates")
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 8},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather",
                                           "description": "Weather forecast",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "now"}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def valid_call(call):
    if not call["id"].startswith("call_") or call["type"] != "function":
        return False
    args = json.loads(call["function"]["arguments"])
    if call["function"]["name"] == "now":
        return args == {}
    return (call["function"]["name"] == "get_weather" and set(args) == {"city", "days"}
            and isinstance(args["city"], str) and len(args["city"]) <= 8
            and type(args["days"]) is int and 1 <= args["days"] <= 7)


def reassemble(events):
    """The message a client rebuilds from chat.completion.chunk deltas."""
    content, calls, finish = None, [], None
    for e in events:
        if e == "[DONE]" or not e.get("choices"):
            continue
        ch = e["choices"][0]
        d = ch["delta"]
        if d.get("content"):
            content = (content or "") + d["content"]
        for tc in d.get("tool_calls", []):
            while len(calls) <= tc["index"]:
                calls.append({"id": None, "type": None, "function": {"name": "", "arguments": ""}})
            c = calls[tc["index"]]
            c["id"] = tc.get("id", c["id"])
            c["type"] = tc.get("type", c["type"])
            c["function"]["name"] += tc.get("function", {}).get("name", "")
            c["function"]["arguments"] += tc.get("function", {}).get("arguments", "")
        finish = ch.get("finish_reason") or finish
    return content, calls, finish


def same_message(msg, streamed):
    content, calls, _ = streamed
    strip = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in calls]
    want = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in msg.get("tool_calls") or []]
    return (msg["content"] or None) == (content or None) and strip == want


def family_checks(d, name):
    for seed in range(8):
        for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
            body = {"messages": ASK, "tools": TOOLS, "tool_choice": choice, "seed": seed,
                    "max_tokens": 200, "parallel_tool_calls": False}
            st, _, o = d.post("/v1/chat/completions", body)
            ch = o["choices"][0]
            msg = ch["message"]
            check(st == 200 and ch["finish_reason"] == "tool_calls" and msg["content"] is None
                  and len(msg["tool_calls"]) == 1 and valid_call(msg["tool_calls"][0]),
                  "%s: %s seed %d is one valid call: %s" % (name, json.dumps(choice), seed,
                                                            json.dumps(msg)))
            if isinstance(choice, dict):
                check(msg["tool_calls"][0]["function"]["name"] == "get_weather",
                      "%s: the named function is called" % name)
            body["stream"] = True
            _, _, events = stream(d, "/v1/chat/completions", body)
            got = reassemble(events)
            check(events[-1] == "[DONE]" and got[2] == "tool_calls" and same_message(msg, got)
                  and all(c["id"].startswith("call_") and c["type"] == "function" for c in got[1]),
                  "%s: seed %d streamed deltas reassemble to the message" % (name, seed))
    # auto: whatever the random model writes, stream and body agree
    for seed in range(4):
        body = {"messages": ASK, "tools": TOOLS, "seed": seed, "max_tokens": 24}
        st, _, o = d.post("/v1/chat/completions", body)
        body["stream"] = True
        _, _, events = stream(d, "/v1/chat/completions", body)
        got = reassemble(events)
        msg = o["choices"][0]["message"]
        check(st == 200 and same_message(msg, got) and
              got[2] == o["choices"][0]["finish_reason"],
              "%s: auto seed %d streamed == body (%s)" % (name, seed, o["choices"][0]["finish_reason"]))
    # "none": the tools are shown, the answer is text, never parsed into calls
    st, _, o = d.post("/v1/chat/completions", {"messages": ASK, "tools": TOOLS, "tool_choice": "none",
                                               "max_tokens": 8, "seed": 2})
    check(st == 200 and "tool_calls" not in o["choices"][0]["message"]
          and o["choices"][0]["finish_reason"] in ("stop", "length"),
          "%s: tool_choice none answers text" % name)
    # an agent loop's second turn: the call and its result go back in
    st, _, o = d.post("/v1/chat/completions", {
        "messages": ASK + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":1}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}],
        "tools": TOOLS, "max_tokens": 8, "seed": 1})
    check(st == 200 and o["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls"),
          "%s: tool result round trip answers 200" % name)


def main():
    model = os.path.join(TMP, "tools.gguf")
    subprocess.run([EMBER, "synth", "--preset", "tiny", "--ctx", "2048", "--type", "q8_0",
                    "-o", model], check=True, capture_output=True, timeout=120)
    for tmpl, name in (("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"),
                       ("meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3")):
        d = Daemon(model, "--chat-template-file=" + os.path.join(TEMPLATES, tmpl))
        try:
            family_checks(d, name)
            bad = [
                ({"tool_choice": {"type": "function", "function": {"name": "nope"}}},
                 "tool_choice.function.name"),
                ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
                ({"tools": [{"type": "function", "function": {"name": "a b"}}]},
                 "tools[0].function.name"),
                ({"tools": []}, "tools"),
                ({"tool_choice": "sometimes"}, "tool_choice"),
                ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
                ({"functions": [{"name": "f"}]}, "functions"),
                ({"response_format": {"type": "json_object"}}, "tools"),
                ({"tool_choice": "required", "tools": [{"type": "function", "function": {
                    "name": "f", "parameters": {"type": "object", "patternProperties": {}}}}]},
                 "tools[0].function.parameters"),
            ]
            for extra, param in bad:
                body = {"messages": ASK, "tools": TOOLS, "max_tokens": 4}
                body.update(extra)
                st, _, o = d.post("/v1/chat/completions", body)
                check(st == 400 and o["error"]["param"] == param,
                      "%s: 400 naming %s: %s" % (name, param, o["error"]["message"]))
            st, _, o = d.post("/v1/completions", {"prompt": "x", "tools": TOOLS})
            check(st == 400 and o["error"]["param"] == "tools", "tools on completions: 400")
            check(d.stop() == 0, "emberd exits 0")
        finally:
            if d.proc.poll() is None:
                d.proc.kill()


if __name__ == "__main__":
    main()
