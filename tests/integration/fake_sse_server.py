#!/usr/bin/python3
"""A scripted stand-in for emberd's streaming endpoint, for test_loadgen.sh.

Usage: fake_sse_server.py MODE PORTFILE. Listens on 127.0.0.1 (port 0),
writes the port to PORTFILE, then answers every POST with the response
MODE names (see RESPONSES), each connection on its own thread, until
killed. POST /tokenize gets 404, as from a daemon without that endpoint.
"""
import os
import socket
import sys
import threading

CHUNK = ('{"object":"chat.completion.chunk","choices":[{"index":0,'
         '"delta":{"content":"%s"},"finish_reason":null}]}')
FINISH = ('{"object":"chat.completion.chunk","choices":[{"index":0,'
          '"delta":{},"finish_reason":"length"}]}')
USAGE = ('{"object":"chat.completion.chunk","choices":[],'
         '"usage":{"prompt_tokens":7,"completion_tokens":%d}}')


def events(*datas):
    return "".join("data: %s\n\n" % d for d in datas)


RESPONSES = {
    # a clean stream: 3 content chunks, 4 tokens by usage, [DONE]
    "ok": (200, events(CHUNK % "a", CHUNK % "b c", CHUNK % "d", FINISH,
                       USAGE % 4, "[DONE]")),
    "bad_json": (200, events(CHUNK % "a", '{"choices": [nope', "[DONE]")),
    "bad_line": (200, "data: " + CHUNK % "a" + "\nGARBAGE\n\n"),
    "no_done": (200, events(CHUNK % "a", FINISH, USAGE % 1)),
    "status500": (500, '{"error":{"message":"boom","type":"server_error",'
                       '"param":null,"code":null}}'),
    "stream_error": (200, events(CHUNK % "a", '{"error":{"message":"x",'
                                 '"type":"server_error"}}', "[DONE]")),
    "no_usage": (200, events(CHUNK % "a", FINISH, "[DONE]")),
    "usage_low": (200, events(CHUNK % "a", CHUNK % "b", FINISH, USAGE % 1,
                              "[DONE]")),
}


def chunked(body):
    """Chunked framing, one chunk per 7 bytes so events straddle chunks."""
    out = b""
    raw = body.encode()
    for i in range(0, len(raw), 7):
        part = raw[i:i + 7]
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return out + b"0\r\n\r\n"


def serve(conn, mode):
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            got = conn.recv(65536)
            if not got:
                return
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            got = conn.recv(65536)
            if not got:
                return
            rest += got
        if head.startswith(b"POST /tokenize"):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            return
        if mode == "stall":
            threading.Event().wait(30)
            return
        status, body = RESPONSES[mode]
        if status != 200:
            b = body.encode()
            conn.sendall(b"HTTP/1.1 %d Err\r\nContent-Type: application/json"
                         b"\r\nContent-Length: %d\r\n\r\n" % (status, len(b))
                         + b)
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n" + chunked(body))


def main():
    mode, portfile = sys.argv[1], sys.argv[2]
    if mode != "stall" and mode not in RESPONSES:
        sys.exit("unknown mode " + mode)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, mode), daemon=True).start()


if __name__ == "__main__":
    main()
