"""The one exception tree of engram; every error carries a hint: the next thing to run.

    EngramError
    ├── ConfigError           config.yaml / config.json unreadable or invalid
    ├── NotInitialized        no .engram/ found for this project
    ├── InvalidInput          a field, id, option or query argument a caller passed is wrong
    │   ├── InputTooLarge     JSON nested deeper or bigger than engram reads (also a ValueError)
    │   └── ProtocolError     [trainer.protocol] a trainer printed a line outside its protocol
    ├── NotFound              no memory has this id (or prefix)
    ├── AmbiguousId           the prefix names more than one memory
    ├── CorruptStore          memories.jsonl has a bad line, a duplicate id or conflict markers
    │   └── ChunkError        [sync.syncfiles] a chunk, the manifest or the sync state is unreadable
    ├── LockTimeout           another process held the store lock for too long
    ├── StoreChanged          memories.jsonl was replaced (git) while a write ran: read again
    ├── UnsafePath            .engram/state or index/ (or a file in them) is a symbolic link
    ├── IndexError_           the derived index could not be read or written
    ├── SyncError             a sync with a remote failed (nothing local was lost)
    ├── ServeError            [http_api.errors] the HTTP server cannot start as asked
    ├── DaemonError       [daemon.server] another daemon serves the store, or the socket is unusable
    └── _UnknownTool          [mcp_server.core] an MCP client called a tool not served here

A class marked ``[module]`` is defined in ``engram.<module>``, next to the only code that raises
it; the others live here and are all in ``__all__``. tests/test_architecture.py checks that every
subclass of ``EngramError`` in engram/ is drawn above. Adapters catch ``EngramError`` at their
one boundary and show ``message`` and ``hint``; this module must not import anything from engram.
A hint names a command as the CLI types it (run `engram doctor --fix`); each adapter's boundary
renders it in its own words (``engram.operations.advice.render``: MCP names its tools).
"""

from __future__ import annotations

__all__ = [
    "AmbiguousId",
    "ConfigError",
    "CorruptStore",
    "EngramError",
    "IndexError_",
    "InputTooLarge",
    "InvalidInput",
    "LockTimeout",
    "NotFound",
    "NotInitialized",
    "StoreChanged",
    "SyncError",
    "UnsafePath",
]


class EngramError(Exception):
    """Base of every error engram raises on purpose."""

    hint: str = ""
    code: str = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def to_dict(self) -> dict[str, str]:
        """Return the error as a JSON-ready mapping (code, message, hint)."""
        return {"code": self.code, "message": self.message, "hint": self.hint}


class ConfigError(EngramError):
    code = "config"
    hint = "fix .engram/config.yaml (`engram doctor` shows what is read)"


class NotInitialized(EngramError):
    code = "not_initialized"
    hint = "run `engram init` in the project, or pass -C PATH"


class InvalidInput(EngramError):
    code = "invalid_input"
    hint = "check the value against the command's help"


class InputTooLarge(InvalidInput, ValueError):
    """JSON input over a size or nesting limit; a ValueError too, so JSON parse errors catch it."""

    code = "input_too_large"
    hint = "real memories never come near the limits; the input is damaged or hostile"


class NotFound(EngramError):
    code = "not_found"
    hint = "run `engram recall WORDS` to find the id"


class AmbiguousId(EngramError):
    code = "ambiguous_id"
    hint = "type more characters of the id"


class CorruptStore(EngramError):
    code = "corrupt_store"
    hint = "run `engram doctor` to see every problem, `engram doctor --fix` to repair"

    def __init__(
        self, message: str, *, path: str = "", line: int = 0, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.line = line


class LockTimeout(EngramError):
    code = "lock_timeout"
    hint = "another engram process is writing; retry, or remove a stale .engram/state/store.lock"


class StoreChanged(EngramError):
    code = "store_changed"
    hint = "run the command again: it reads the new file first"


class UnsafePath(EngramError):
    code = "unsafe_path"
    hint = "remove the symbolic link inside .engram/ and run the command again"


class IndexError_(EngramError):  # trailing underscore: not the builtin IndexError
    code = "index"
    hint = "run `engram index --rebuild`"


class SyncError(EngramError):
    code = "sync"
    hint = "check the remote and run `engram sync --status`; nothing local was lost"
