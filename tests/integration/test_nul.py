#!/usr/bin/python3
"""The JSON escape "\\u0000" is an ordinary character of a chat message's
content (issue 15), on the golden llama model (real tokenizer, its own Jinja
template): /apply-template shows the NUL in place; a chat request with it
answers 200 with the prompt tokens of the /v1/completions prompt that is its
rendering, NUL included (which /tokenize counts, so it is not dropped);
Ollama's /api/chat and a session's system text take it too. Strings that cannot carry it (stop) are
refused naming the field."""
import json
import os
import shutil
import time

from test_api import TMP, Daemon, check, tokens

SHARED = os.environ.get("SHARED", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
MODEL = os.path.join(TMP, "golden-llama.gguf")
ID = "golden-llama"
MSGS = [{"role": "system", "content": "Be\u0000brief."},
        {"role": "user", "content": "Name a\u0000 color."}]


def main():
    shutil.copy(os.path.join(SHARED, "golden", "llama", "model-f32.gguf"), MODEL)
    d = Daemon(MODEL)
    try:
        st, _, body = d.post("/apply-template", {"messages": MSGS})
        check(st == 200, "/apply-template with a NUL in contents: 200 (%r)" % (body,))
        p = body["prompt"]
        check("Be\u0000brief." in p and "Name a\u0000 color." in p,
              "the rendered prompt holds the NULs in place: %r" % p)
        ids = tokens(d, p)
        check(len(ids) > len(tokens(d, p.replace("\u0000", ""))), "the NUL is tokenized, not dropped")
        st, _, de = d.post("/detokenize", {"tokens": tokens(d, "a\u0000b", add_special=False)})
        check(st == 200 and de["content"] == "a\u0000b", "/detokenize gives the NUL back: %r" % (de,))
        st, _, chat = d.post("/v1/chat/completions", {"messages": MSGS, "max_tokens": 3,
                                                      "temperature": 0})
        check(st == 200, "chat with a NUL in contents: 200 (%r)" % (chat,))
        st, _, comp = d.post("/v1/completions", {"prompt": p, "max_tokens": 3, "temperature": 0})
        check(st == 200 and chat["usage"]["prompt_tokens"] == comp["usage"]["prompt_tokens"] == len(ids),
              "the chat's prompt tokens are its rendering's as a completion prompt: %r %r %d"
              % (chat["usage"], comp["usage"], len(ids)))
        check(comp["choices"][0]["text"].startswith(chat["choices"][0]["message"]["content"]),
              "and the same text (the chat's stop strings may only cut it shorter)")
        st, _, parts = d.post("/v1/chat/completions", {"messages": [
            {"role": "user", "content": [{"type": "text", "text": "a\u0000b"}]}], "max_tokens": 1})
        check(st == 200, "text parts carry a NUL too")
        st, _, ol = d.post("/api/chat", {"model": ID, "stream": False, "messages": MSGS,
                                         "options": {"num_predict": 3, "temperature": 0}})
        check(st == 200 and ol["prompt_eval_count"] == len(ids),
              "Ollama /api/chat with a NUL in contents: 200, same prompt (%r)" % (ol,))
        sys_text = "You\u0000 are a cat."
        st, _, sess = d.post("/v1/sessions", {"system": sys_text})
        check(st == 201, "a session's system text with a NUL: 201")
        want, deadline = len(tokens(d, sys_text)), time.monotonic() + 30
        while sess["n_tokens"] != want and time.monotonic() < deadline:
            time.sleep(0.05)
            sess = json.loads(d.request("GET", "/v1/sessions/" + sess["id"])[2])
        check(sess["n_tokens"] == want, "the whole system text is prefilled, NUL included: %r, want %d"
              % (sess, want))
        st, _, err = d.post("/v1/chat/completions", {"messages": MSGS, "stop": ["x\u0000"]})
        check(st == 400 and err["error"]["param"] == "stop" and "NUL" in err["error"]["message"],
              "a NUL in a stop string is refused naming stop: %r" % (err,))
        st, _, err = d.post("/api/chat", {"model": ID, "stream": False, "messages": MSGS,
                                          "options": {"stop": "x\u0000"}})
        check(st == 400 and "NUL" in err["error"], "Ollama: a NUL in a stop string is refused: %r" % (err,))
        st, _, err = d.post("/v1/chat/completions", {"messages": [{"role": "user\u0000x", "content": "a"}]})
        check(st == 400 and err["error"]["param"] == "messages[0].role", "a role with a NUL is no role: %r" % (err,))
    finally:
        check(d.stop() == 0, "emberd exits 0")


if __name__ == "__main__":
    main()
