#!/usr/bin/python3
"""Chat templates in the daemon: POST /apply-template shows the prompt a chat
request renders to; the model's own Jinja template is used; a
--chat-template-file overrides it (messages, tools, tool calls and tool
results reach it); raise_exception() in a template answers 400 with its
message; a template file that does not parse stops emberd at start-up."""
import os
import subprocess

from test_api import EMBERD, TMP, Daemon, check, synth


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_model_template(model):
    d = Daemon(model)
    try:
        st, _, body = d.post("/apply-template", {"messages": [
            {"role": "system", "content": "S"}, {"role": "user", "content": "U"}]})
        check(st == 200, "/apply-template answers 200")
        p = body["prompt"]
        # the synthesized model's template is Zephyr's, rendered by Jinja:
        # its newline after each "}}" is kept, as Hugging Face keeps it
        check(p.startswith("<|system|>\nS") and "<|user|>\nU" in p and p.endswith("</s>\n<|assistant|>\n"),
              "the model's own template renders: %r" % p)
        st, _, body = d.post("/apply-template", {"messages": [
            {"role": "user", "content": "U"}], "tools": {}})
        check(st == 400 and body["error"]["param"] == "tools", "tools must be an array")
    finally:
        check(d.stop() == 0, "exit 0")


def test_override(model):
    tmpl = write("t.jinja", (
        "{%- for m in messages %}[{{ m.role }}|{{ m.content if m.content is not none else 'null' }}"
        "{%- if m.tool_calls %}|call {{ m.tool_calls[0].function.name }}"
        "({{ m.tool_calls[0].function.arguments | tojson }}){% endif %}"
        "{%- if m.tool_call_id %}|id {{ m.tool_call_id }}{% endif %}]{% endfor %}"
        "{%- if tools %}<tools {{ tools | map(attribute='function') | map(attribute='name') | join(',') }}>"
        "{%- endif %}"
        "{%- if messages[-1].content == 'boom' %}{{ raise_exception('Boom is not allowed here') }}{% endif %}"
        "{%- if add_generation_prompt %}<gen>{% endif %}\n"))
    d = Daemon(model, "--chat-template-file=" + tmpl)
    try:
        msgs = [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "cold"},
        ]
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
        st, _, body = d.post("/apply-template", {"messages": msgs, "tools": tools})
        check(st == 200, "tool messages render: %r" % (body,))
        want = ('[user|Weather?][assistant|null|call get_weather({"city": "Oslo"})]'
                "[tool|cold|id c1]<tools get_weather><gen>")
        check(body["prompt"] == want, "override template sees messages, tool calls and tools: %r" % body["prompt"])
        st, _, body = d.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "boom"}], "max_tokens": 2})
        check(st == 400 and "Boom is not allowed here" in body["error"]["message"],
              "raise_exception answers 400 with its message: %r" % (body,))
        st, _, body = d.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2, "temperature": 0})
        check(st == 200 and body["usage"]["prompt_tokens"] > 0, "a chat request renders through the override")
    finally:
        check(d.stop() == 0, "exit 0")


def test_bad_template_file(model):
    bad = write("bad.jinja", "{% if x %}never closed")
    r = subprocess.run([EMBERD, "--model=" + model, "--port=1", "--chat-template-file=" + bad],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode != 0 and "bad.jinja" in r.stderr and "line 1" in r.stderr,
          "a template file that does not parse stops emberd: %r" % r.stderr.strip())


def main():
    tiny = synth("tiny")
    test_model_template(tiny)
    test_override(tiny)
    test_bad_template_file(tiny)


if __name__ == "__main__":
    main()
