"""The daemon's wire protocol: newline-delimited JSON over a Unix socket, and its client.

One request per line, one response per line, answered in order on each connection::

    request   {"id": 7, "method": "memory_search", "params": {"query": "lock"}}
    response  {"id": 7, "ok": true, "data": {...}, "error": null}
    failure   {"id": 7, "ok": false, "data": null,
               "error": {"code": 1002, "message": "no memory with id x", "hint": "..."}}

``id`` is any JSON string, number or null chosen by the client and echoed back; ``params`` may
be left out (an empty object). ``error.hint``, when present, is the next thing to run. A blank
line is ignored; any other line that is not a request gets an error response with ``id`` null
and the connection goes on. Error codes (engram-rs numbering where it has one):

    ====  =====================  =========================================================
    code  name                   meaning
    ====  =====================  =========================================================
    1001  INVALID_PARAMS         a parameter is missing or has the wrong type (names it)
    1002  NOT_FOUND              no memory has this id (or prefix)
    1003  AMBIGUOUS_ID           the prefix names more than one memory
    1004  INVALID_INPUT          a value was refused by engram (a field, kind, query …)
    2001  STORE_ERROR            corrupt memories.jsonl, store lock timeout, index failure
    3001  CONFIG_ERROR           config unreadable, or no .engram/ here
    4001  SYNC_ERROR             sync with a remote or chunk import failed
    6007  UNKNOWN_METHOD         no such method
    6008  READ_ONLY              a setting cannot be changed over the socket
    6010  VERSION_MISMATCH       memory_import of a version other than 1
    7001  MALFORMED_JSON         the line is not JSON, or not a request object
    7002  REQUEST_TOO_LARGE      the line is longer than MAX_LINE bytes, or nests deeper than
                                 MAX_JSON_DEPTH (64) levels
    9000  INTERNAL_ERROR         a bug: the daemon logs the traceback
    ====  =====================  =========================================================

``error_code`` is the one place that maps engram's exceptions onto these codes. The default
socket is ``.engram/state/engram.sock``; ``socket_path`` says where it goes when that path is too
long for a Unix socket. This module is plain stdlib: the CLI uses the client without loading
the daemon, and nothing here opens a store.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engram import reach
from engram.errors import (
    AmbiguousId,
    ConfigError,
    CorruptStore,
    EngramError,
    IndexError_,
    InvalidInput,
    LockTimeout,
    NotFound,
    NotInitialized,
    SyncError,
)
from engram.fileio import Closing

INVALID_PARAMS: Final = 1001
NOT_FOUND: Final = 1002
AMBIGUOUS_ID: Final = 1003
INVALID_INPUT: Final = 1004
STORE_ERROR: Final = 2001
CONFIG_ERROR: Final = 3001
SYNC_ERROR: Final = 4001
UNKNOWN_METHOD: Final = 6007
READ_ONLY: Final = 6008
VERSION_MISMATCH: Final = 6010
MALFORMED_JSON: Final = 7001
REQUEST_TOO_LARGE: Final = 7002
INTERNAL_ERROR: Final = 9000

MAX_LINE: Final = 8 * 1024 * 1024  # bytes of one request line, newline excluded
SOCKET_NAME: Final = reach.SOCKET_NAME
SUN_PATH_MAX: Final = reach.SUN_PATH_MAX  # bytes of a Unix socket path, NUL left out (Linux)

_CODE_PREFIX: Final = re.compile(r"\[(\d{4})\]\s*")


class RpcError(Exception):
    """An error response: a numeric ``code``, a ``message`` and an optional ``hint``."""

    def __init__(self, code: int, message: str, *, hint: str = "", id: Any = None) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.hint = hint
        self.id = id  # the request's id, when the error answers a request

    def to_dict(self) -> dict[str, Any]:
        """Return the ``error`` member of a response."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        return out

    @classmethod
    def from_dict(cls, error: Any, id: Any = None) -> RpcError:
        """Return the RpcError an ``error`` member of a response describes."""
        if not isinstance(error, Mapping):
            return cls(INTERNAL_ERROR, f"malformed error in response: {error!r}", id=id)
        code = error.get("code")
        return cls(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(error.get("message") or ""),
            hint=str(error.get("hint") or ""),
            id=id,
        )


@dataclass(frozen=True)
class Request:
    """One decoded request line."""

    id: Any
    method: str
    params: dict[str, Any] = field(default_factory=dict)


def encode(obj: Any) -> bytes:
    """Return ``obj`` as one protocol line: compact UTF-8 JSON and a newline."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def ok(id: Any, data: Any) -> dict[str, Any]:
    """Return a success response."""
    return {"id": id, "ok": True, "data": data, "error": None}


def failure(error: RpcError) -> dict[str, Any]:
    """Return the error response for ``error`` (its ``id`` echoed)."""
    return {"id": error.id, "ok": False, "data": None, "error": error.to_dict()}


def decode_request(line: bytes) -> Request | RpcError:
    """Return the request on one line, or the error to answer it with."""
    # The server's checks: a client (a hook answered by the daemon) must not pay for them.
    from engram.model import MAX_JSON_DEPTH, json_depth_exceeded, peek_request

    offset = json_depth_exceeded(line)
    if offset is not None:  # refused before parsing: the json module would recurse
        deep_id, deep_method = peek_request(line)
        return RpcError(
            REQUEST_TOO_LARGE,
            f"request{f' {deep_method}' if deep_method else ''} is nested deeper than "
            f"{MAX_JSON_DEPTH} levels (at byte {offset})",
            id=deep_id,
        )
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return RpcError(MALFORMED_JSON, f"request is not valid UTF-8 (byte {exc.start})")
    except ValueError as exc:
        return RpcError(MALFORMED_JSON, f"request is not valid JSON: {exc}")
    if not isinstance(obj, dict):
        return RpcError(MALFORMED_JSON, "a request must be a JSON object {id, method, params}")
    rid = obj.get("id")
    if not (rid is None or isinstance(rid, str | int | float)) or isinstance(rid, bool):
        return RpcError(MALFORMED_JSON, "request id must be a string, a number or null")
    method = obj.get("method")
    if not isinstance(method, str) or not method:
        return RpcError(MALFORMED_JSON, "request has no method name", id=rid)
    params = obj.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return RpcError(INVALID_PARAMS, f"{method}: params must be an object", id=rid)
    return Request(rid, method, params)


def error_code(exc: BaseException) -> int:
    """Return the protocol code for an exception (the one mapping of engram's errors)."""
    if isinstance(exc, RpcError):
        return exc.code
    if isinstance(exc, InvalidInput):
        # Some messages carry an engram-rs code of their own, e.g. "[6010] import version …".
        match = _CODE_PREFIX.match(exc.message)
        return int(match.group(1)) if match else INVALID_INPUT
    table: tuple[tuple[type[EngramError], int], ...] = (
        (NotFound, NOT_FOUND),
        (AmbiguousId, AMBIGUOUS_ID),
        (SyncError, SYNC_ERROR),
        (CorruptStore, STORE_ERROR),
        (LockTimeout, STORE_ERROR),
        (IndexError_, STORE_ERROR),
        (ConfigError, CONFIG_ERROR),
        (NotInitialized, CONFIG_ERROR),
        (EngramError, INVALID_INPUT),
    )
    for cls, code in table:
        if isinstance(exc, cls):
            return code
    return INTERNAL_ERROR


def to_rpc_error(exc: BaseException, id: Any = None) -> RpcError:
    """Return the RpcError to answer a failed request with."""
    if isinstance(exc, RpcError):
        exc.id = id
        return exc
    code = error_code(exc)
    if isinstance(exc, EngramError):
        return RpcError(code, _CODE_PREFIX.sub("", exc.message, count=1), hint=exc.hint, id=id)
    return RpcError(code, f"internal error: {type(exc).__name__}: {exc}", id=id)


def socket_path(engram_dir: Path) -> Path:
    """Return the daemon socket of a store: ``state/engram.sock``, or a short path if too long.

    A store deeper than a Unix socket path allows gets a short path in the temporary folder
    instead, which every process computes alike (``engram.reach.socket_path``), so the CLI
    and the hooks still find their daemon.
    """
    return Path(reach.socket_path(os.fspath(engram_dir)))


def running(engram_dir: Path) -> Path | None:
    """Return the socket of the store's daemon if one accepts connections, else None."""
    path = socket_path(engram_dir)
    return path if connectable(path) else None


def connectable(path: Path, timeout: float = 0.5) -> bool:
    """Return whether a process accepts connections on the Unix socket ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(path))
    except OSError:
        return False
    finally:
        sock.close()
    return True


class Client(Closing):
    """A connection to the daemon; ``call`` one method or ``pipeline`` many, in order.

    ``timeout`` bounds each wait on the socket (None waits forever: for long methods such as
    ``memory_train_generate``).
    """

    def __init__(self, socket_path: Path | str, timeout: float | None = 5.0) -> None:
        self.socket_path = Path(socket_path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(os.fspath(self.socket_path))
        except OSError:
            self._sock.close()
            raise
        self._reader = self._sock.makefile("rb")
        self._next_id = 0

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Return the ``data`` of one call; raise RpcError with its code if it failed."""
        response = self.pipeline([(method, params)])[0]
        if not response.get("ok"):
            raise RpcError.from_dict(response.get("error"), id=response.get("id"))
        return response.get("data")

    def pipeline(
        self, calls: Iterable[tuple[str, Mapping[str, Any] | None]]
    ) -> list[dict[str, Any]]:
        """Send every call at once and return their responses in the same order."""
        ids: list[int] = []
        lines: list[bytes] = []
        for method, params in calls:
            self._next_id += 1
            ids.append(self._next_id)
            lines.append(encode({"id": self._next_id, "method": method, "params": params or {}}))
        self._sock.sendall(b"".join(lines))
        responses: list[dict[str, Any]] = []
        for rid in ids:
            line = self._reader.readline()
            if not line.endswith(b"\n"):
                raise ConnectionError(f"engram daemon at {self.socket_path} closed the connection")
            response = json.loads(line.decode("utf-8"))
            if not isinstance(response, dict) or response.get("id") != rid:
                raise RpcError(INTERNAL_ERROR, f"response out of order: expected id {rid}")
            responses.append(response)
        return responses

    def settimeout(self, timeout: float | None) -> None:
        """Bound each later wait on the socket by ``timeout`` seconds (None: wait forever)."""
        self._sock.settimeout(timeout)

    def close(self) -> None:
        """Close the connection."""
        self._reader.close()
        self._sock.close()
