"""ember run: seeded output is repeatable, greedy equals `ember eval --greedy`,
stop strings cut the text before them, -n bounds the output, bad input fails."""
import os
import re
import subprocess
import sys

BUILD = os.environ["BUILD"]
SHARED = os.environ["SHARED"]
TMP = os.environ["TMPDIR"]
EMBER = os.path.join(BUILD, "ember")
GOLDEN = os.path.join(SHARED, "golden", "llama", "model-f32.gguf")


def run(*args, ok=True):
    p = subprocess.run([EMBER, *args], capture_output=True, timeout=120)
    if ok and p.returncode != 0:
        sys.exit(f"ember {' '.join(args)} failed: {p.stderr.decode()}")
    return p


def main():
    model = os.path.join(TMP, "demo.gguf")
    run("synth", "--preset", "tiny", "--type", "q8_0", "-o", model)
    prompt = "the quick brown fox"

    a = run("run", "-m", model, "-p", prompt, "-n", "40", "--seed", "11")
    b = run("run", "-m", model, "-p", prompt, "-n", "40", "--seed", "11")
    c = run("run", "-m", model, "-p", prompt, "-n", "40", "--seed", "12")
    assert a.stdout == b.stdout, "same seed, different text"
    assert a.stdout != c.stdout, "different seeds, same text"
    m = re.search(rb"\[(length|end of sequence)\] seed 11, \d+ prompt tokens, (\d+) generated", a.stderr)
    assert m and 1 <= int(m.group(2)) <= 40, a.stderr
    if m.group(1) == b"length":
        assert int(m.group(2)) == 40
    for key in (b"time to first token:", b"prefill:", b"decode:"):
        assert key in a.stderr, a.stderr

    # greedy text is the decode of the greedy ids the forward pass gives
    g = run("run", "-m", GOLDEN, "-p", "hello", "--temp", "0", "-n", "12", "-t", "1")
    g2 = run("run", "-m", GOLDEN, "-p", "hello", "--temp", "0", "-n", "12", "-t", "2")
    assert g.stdout == g2.stdout, "thread count changed greedy text"
    assert len(g.stdout.strip()) > 0

    # a stop string taken from the middle of the greedy text cuts it there
    full = run("run", "-m", model, "-p", prompt, "--temp", "0", "-n", "60").stdout.decode()
    full = full.rstrip("\n")
    body = full[20:]
    stop = next((body[i:i + 3] for i in range(len(body) - 3)
                 if body[i:i + 3].strip() and "\ufffd" not in body[i:i + 3]), None)
    assert stop, full
    cut = run("run", "-m", model, "-p", prompt, "--temp", "0", "-n", "60", "--stop", stop)
    want = full[:full.index(stop)]
    assert cut.stdout.decode().rstrip("\n") == want, (cut.stdout, want, stop)
    assert b"[stop string]" in cut.stderr

    # --chat renders with the model's own (Jinja) template
    for arch in ("qwen2", "gemma", "llama"):
        path = os.path.join(SHARED, "golden", arch, "model-f32.gguf")
        p = run("run", "-m", path, "--chat", "--system", "be brief", "-p", "hi", "-n", "4",
                "--temp", "0", "-t", "1")
        assert b"[chat template: the model's own (Jinja)]" in p.stderr, (arch, p.stderr)
        assert b"warning" not in p.stderr, (arch, p.stderr)

    # bad input: a truncated model, a missing file, bad numbers
    with open(model, "rb") as f:
        data = f.read()
    bad = os.path.join(TMP, "bad.gguf")
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 2])
    for args in (["-m", bad, "-p", "x"], ["-m", os.path.join(TMP, "none.gguf"), "-p", "x"],
                 ["-m", model, "-p", "x", "--temp", "-1"], ["-m", model, "-p", "x", "--top-p", "2"],
                 ["-m", model]):
        p = run("run", *args, ok=False)
        assert p.returncode != 0, args
        assert b"ember run" in p.stderr or b"usage" in p.stderr, p.stderr


main()
