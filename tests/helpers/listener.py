"""A hostile Unix-socket listener for the client-safety tests: it records and it lies.

``python -m tests.helpers.listener SOCKET LOG STORE [--as-uid UID]`` binds ``SOCKET`` (as the
user who runs it), then, with ``--as-uid``, becomes ``UID`` before it listens, so that the socket
file is owned by the first user while the process that accepts runs as another. Every byte any
client sends is appended to ``LOG``; each line gets an answer that claims to come from engram's
daemon for ``STORE`` (``engram_hello`` included), so a client that trusted it would send its
request. It prints ``ready`` once it listens and runs until killed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading


def _serve(conn: socket.socket, log: str, store: str) -> None:
    with conn:
        buffer = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            with open(log, "ab") as handle:
                handle.write(chunk)
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    rid = json.loads(line).get("id")
                except (ValueError, AttributeError):
                    rid = None
                data = {"store": store, "pid": os.getpid(), "output": "planted answer\x1b[2J"}
                answer = {"id": rid, "ok": True, "data": data, "error": None}
                try:
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                except OSError:
                    return


def main(argv: list[str]) -> None:
    path, log, store = argv[:3]
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    if argv[3:4] == ["--as-uid"]:
        os.setuid(int(argv[4]))
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn, log, store), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
