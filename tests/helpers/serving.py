"""One HTTP server process a test talks to: started, waited for on /health, stopped with its log.

``engram serve`` and ``python -m engram.http_api`` run here as a user runs them, on a free
loopback port, with their output in a log file the test reads at the end (a Traceback in it
fails most tests).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

START_SECONDS = 60.0


def free_port() -> int:
    """Return a TCP port free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """A server process on ``port``: ``client`` talks to it (with the bearer ``token`` if given)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        port: int,
        log: Path,
        token: str | None = None,
    ) -> None:
        self.root = cwd
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            list(command), cwd=cwd, env=dict(env), stdout=self._log, stderr=subprocess.STDOUT
        )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=60.0)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if self.client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"the server did not start: {self.log.read_text()}")

    def stop(self) -> str:
        """Stop the server; return what it logged."""
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=30)
        self._log.close()
        return self.log.read_text()
