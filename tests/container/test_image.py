#!/usr/bin/python3
"""test_image.py - the built container image, run for real (make image-test).

Starts $IMAGE with podman (the Makefile's $PODMAN: runc, its
containers.conf) the way docker/compose.yaml runs it: read-only root, every
capability dropped, no-new-privileges, a synthetic model mounted read-only
on /models, the port published on 127.0.0.1 only. Checks /health, the
HEALTHCHECK (kept by --format docker, run by hand: podman's timers need
systemd), a non-streamed and a streamed completion, that emberd is PID 1
as a non-root user with no capabilities, that the root file system refuses
writes, and that `podman stop` (SIGTERM) lets a streamed request in flight
finish before emberd exits 0. Ends with the image size.

Environment: PODMAN (command line), IMAGE, EMBER (the host's ember, to
synthesise the model), IMAGE_DIR (scratch space).
"""
import http.client
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

PODMAN = shlex.split(os.environ["PODMAN"])
IMAGE = os.environ["IMAGE"]
EMBER = os.environ["EMBER"]
SCRATCH = os.path.abspath(os.environ.get("IMAGE_DIR", tempfile.gettempdir()))
NAME = f"ember-image-test-{os.getpid()}"
JSON = {"Content-Type": "application/json"}


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    logs = podman("logs", NAME, check=False)
    if logs.stdout or logs.stderr:
        print("container log (tail):\n" + (logs.stdout + logs.stderr)[-3000:],
              file=sys.stderr)
    sys.exit(1)


def podman(*args, check=True, timeout=120):
    # podman's complaints about systemd timers (no systemd here) are noise.
    r = subprocess.run(PODMAN + list(args), capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        fail(f"podman {' '.join(args)}: exit {r.returncode}: {r.stderr[-2000:]}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers=JSON if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def main():
    tmp = tempfile.mkdtemp(prefix="image-test-", dir=SCRATCH)
    models = os.path.join(tmp, "models")
    os.mkdir(models)
    subprocess.run([EMBER, "synth", "--preset", "demo", "--type", "q8_0",
                    "--seed", "7", "-o", os.path.join(models, "model.gguf")],
                   check=True, capture_output=True)
    os.chmod(models, 0o755)  # the container's user 10001 reads it
    os.chmod(os.path.join(models, "model.gguf"), 0o644)
    port = free_port()
    podman("rm", "-f", NAME, check=False)
    try:
        run_checks(models, port)
    finally:
        podman("rm", "-f", NAME, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def run_checks(models, port):
    t0 = time.monotonic()
    podman("run", "-d", "--name", NAME, "--read-only", "--cap-drop=ALL",
           "--security-opt", "no-new-privileges",
           "-p", f"127.0.0.1:{port}:8080",
           "-v", f"{models}:/models:ro", IMAGE)
    deadline = time.monotonic() + 60
    while True:
        try:
            st, body = request(port, "GET", "/health", timeout=5)
            if st == 200:
                break
        except OSError:
            pass
        state = podman("inspect", "--format", "{{.State.Status}}", NAME).stdout.strip()
        if state != "running":
            fail(f"container {state} before /health answered")
        if time.monotonic() > deadline:
            fail("/health did not answer 200 within 60 s")
        time.sleep(0.2)
    print(f"/health: 200 {json.loads(body)} after {time.monotonic() - t0:.1f} s")

    # The HEALTHCHECK survived the build (--format docker) and passes.
    img = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    hc = img.get("HealthCheck") or img.get("Healthcheck") or {}
    if "/usr/local/bin/ember-healthcheck" not in hc.get("Test", []):
        fail(f"image has no HEALTHCHECK: {hc}")
    r = podman("healthcheck", "run", NAME, check=False)
    if r.returncode != 0:
        fail(f"HEALTHCHECK failed: {r.stdout} {r.stderr}")
    print("HEALTHCHECK: present in the image, healthy")

    # Non-root, no capabilities, read-only root.
    status = podman("exec", NAME, "cat", "/proc/1/status").stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    name = fields["Name"].strip()
    uids = fields["Uid"].split()
    if name != "emberd":
        fail(f"PID 1 is {name}, not emberd (the entry point must exec it)")
    if any(u == "0" for u in uids):
        fail(f"emberd runs with uid {uids}")
    if int(fields["CapEff"], 16) != 0 or int(fields["CapBnd"], 16) != 0:
        fail(f"capabilities left: CapEff {fields['CapEff'].strip()}")
    if fields.get("NoNewPrivs", "0").strip() != "1":
        fail("no-new-privileges not in force")
    r = podman("exec", NAME, "sh", "-c", "echo x > /usr/bin/x", check=False)
    if r.returncode == 0 or "Read-only" not in r.stderr:
        fail(f"root file system is writable: {r.returncode} {r.stderr}")
    ro = podman("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", NAME).stdout.strip()
    if ro != "true":
        fail(f"ReadonlyRootfs {ro}")
    print(f"process: PID 1 emberd, uid {uids[0]}, no capabilities, "
          "no-new-privileges, read-only root")

    # A non-streamed completion.
    st, body = request(port, "POST", "/v1/completions",
                       {"prompt": "Hello", "max_tokens": 16})
    o = json.loads(body)
    if st != 200 or o["usage"]["completion_tokens"] < 1 or \
            not isinstance(o["choices"][0]["text"], str):
        fail(f"completion: {st} {body[:300]}")
    print(f"completion: 200, {o['usage']['completion_tokens']} tokens")

    # A streamed chat completion.
    st, body = request(port, "POST", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "Hi"}],
                        "max_tokens": 16, "stream": True})
    events = [ln[6:] for ln in body.decode().split("\n") if ln.startswith("data: ")]
    if st != 200 or not events or events[-1] != "[DONE]":
        fail(f"stream: {st} {body[:300]}")
    chunks = [json.loads(e) for e in events[:-1]]
    if not any(c["choices"] and c["choices"][0]["delta"].get("content")
               for c in chunks):
        fail(f"stream carried no content: {body[:300]}")
    print(f"streamed chat: 200, {len(chunks)} chunks, ends with [DONE]")

    drain_check(port)
    size = img["Size"]
    print(f"image size: {size / 1e6:.0f} MB ({size} bytes, {IMAGE})")


def drain_check(port):
    """SIGTERM (podman stop) while a streamed request runs: it finishes."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    # Long enough to be in flight when SIGTERM lands, however fast the
    # CPU: the end-of-sequence token (id 2 in the demo vocabulary) is
    # banned, so the stream runs its whole max_tokens (it once ended on
    # its own in 54 ms, before podman stop had signalled).
    c.request("POST", "/v1/completions",
              body=json.dumps({"prompt": "Once", "max_tokens": 2000,
                               "temperature": 0, "stream": True,
                               "logit_bias": {"2": -100}}),
              headers=JSON)
    r = c.getresponse()
    if r.status != 200:
        fail(f"drain: stream answered {r.status}")
    first = r.readline()
    while first.strip() == b"":
        first = r.readline()
    stopped = {}

    def stop():
        t = time.monotonic()
        stopped["r"] = podman("stop", "-t", "40", NAME, check=False)
        stopped["s"] = time.monotonic() - t

    th = threading.Thread(target=stop)
    t_stop = time.monotonic()
    th.start()
    after, done = 0, False
    for line in r:  # the rest of the stream, read while emberd drains
        if line.startswith(b"data: "):
            if line.strip() == b"data: [DONE]":
                done = True
                break
            after += 1
    c.close()
    th.join(60)
    if th.is_alive():
        fail("podman stop did not return")
    if not done:
        fail(f"the request in flight was cut off after {after} more events")
    logs = podman("logs", NAME).stdout
    m = re.search(r"draining \((\d+) request", logs + podman("logs", NAME).stderr)
    if not m or int(m.group(1)) < 1:
        fail("emberd's log does not show a drain with the request in flight")
    code = podman("inspect", "--format", "{{.State.ExitCode}}", NAME).stdout.strip()
    if code != "0":
        fail(f"emberd exited {code} after SIGTERM, not 0")
    # 40 s is the stop timeout: reaching it means SIGKILL, not a drain.
    if stopped["s"] >= 39:
        fail(f"podman stop took {stopped['s']:.1f} s: emberd was killed")
    print(f"SIGTERM drain: the stream in flight got {after} more events and "
          f"[DONE] ({time.monotonic() - t_stop:.1f} s); stop took "
          f"{stopped['s']:.1f} s, exit code 0")


if __name__ == "__main__":
    main()
    print("image-test: ok")
