"""systemd integration of emberd, with a real notify socket:
READY=1 only once /health answers 200, WATCHDOG=1 periodically when
WATCHDOG_USEC is set, STOPPING=1 on SIGTERM (then exit 0), and socket
activation: an inherited listening socket (LISTEN_FDS) is served."""
import http.client
import os
import signal
import socket
import subprocess
import sys
import time

BUILD = os.environ["BUILD"]
TMP = os.environ["TMPDIR"]
EMBERD = os.path.join(BUILD, "emberd")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def health(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        status = c.getresponse().status
        c.close()
        return status
    except OSError:
        return None


def recv_until(sock, want, limit):
    """Datagrams received until one equals `want` (or the limit passes)."""
    got = []
    end = time.time() + limit
    while time.time() < end:
        sock.settimeout(max(0.01, end - time.time()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append(msg)
        if msg == want:
            return got
    sys.exit(f"no {want!r} within {limit}s; got {got}")


def test_notify(model):
    path = os.path.join(TMP, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    port = free_port()
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
    env.pop("WATCHDOG_PID", None)
    log = open(os.path.join(TMP, "emberd.log"), "wb")
    p = subprocess.Popen([EMBERD, "--model=" + model, "--port=%d" % port], env=env, stderr=log)
    try:
        got = recv_until(sock, "READY=1", 60)
        assert health(port) == 200, "READY=1 sent before /health turned 200"
        assert all(m != "READY=1" for m in got[:-1])
        t0 = time.time()
        dogs = 0
        while dogs < 3 and time.time() - t0 < 5:
            sock.settimeout(1)
            if sock.recv(4096).decode() == "WATCHDOG=1":
                dogs += 1
        assert dogs == 3, "watchdog pings missing"
        # at 200 ms the pings come every ~100 ms: 3 need well under 2 s
        assert time.time() - t0 < 2.0, time.time() - t0
        p.send_signal(signal.SIGTERM)
        recv_until(sock, "STOPPING=1", 10)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        sock.close()


def test_socket_activation(model):
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    port = lsock.getsockname()[1]
    fd = lsock.fileno()
    # LISTEN_PID must be emberd's own pid: the shell's $$ survives exec.
    move = f"exec 3<&{fd} {fd}<&-; " if fd != 3 else ""
    cmd = (f"{move}LISTEN_PID=$$ LISTEN_FDS=1 exec {EMBERD} "
           f"--model={model} --port=1")  # port 1 would fail if it were bound
    log = open(os.path.join(TMP, "emberd-sa.log"), "wb")
    p = subprocess.Popen(["sh", "-c", cmd], pass_fds=(fd,), stderr=log)
    lsock.close()
    try:
        end = time.time() + 60
        while health(port) != 200 and time.time() < end:
            assert p.poll() is None, open(os.path.join(TMP, "emberd-sa.log")).read()
            time.sleep(0.05)
        assert health(port) == 200
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert b"socket systemd passed" in open(os.path.join(TMP, "emberd-sa.log"), "rb").read()


def main():
    model = os.path.join(TMP, "m.gguf")
    subprocess.run([os.path.join(BUILD, "ember"), "synth", "--preset", "tiny", "-o", model], check=True)
    test_notify(model)
    test_socket_activation(model)


main()
