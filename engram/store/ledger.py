"""A session's hook ledger: what engram's hooks already showed an agent session, and what it edited.

Hooks run as separate processes (or in the store's daemon), often several at once for one tool
call. So that a memory reaches the model once per session, each session has a ledger under the
clone's local state, ``state/hooks/<digest of the session id>.jsonl``: one JSON object a line,
appended under the ledger's own lock (``<digest>.lock``), read whole (it stays small: one line
per hook that showed something). An entry has a ``type``:

- ``files``: repository paths whose pitfalls and decisions were shown (read or edit);
- ``ids``: memories shown unasked (briefing, prompt, failure);
- ``edited``: paths the agent wrote through a hook-seen tool call (its own uncommitted change);
- ``asked``: ids of blocking pitfalls a write asked the person for, or was denied once for;
- ``task``: a subagent's task (agent type and text), ``taken`` when its subagent started;
- ``reset``: the context was compacted: what was shown before no longer counts as seen (the
  agent's own edits still do).

``claim`` is the one read-decide-append step: under the lock it returns which of the wanted
items were not seen yet and records them as seen, so two hooks racing for one file show it once.
Per-clone state, never committed; a line that does not parse is skipped. Ledgers of sessions
untouched for ``KEEP_DAYS`` are removed when a session starts (``prune``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from engram.store.lock import ProcessLock

FOLDER: Final = "hooks"
KEEP_DAYS: Final = 7
MAX_BYTES: Final = 4 * 1024 * 1024  # a longer ledger is read from its last MAX_BYTES only
KINDS: Final = ("files", "ids", "edited", "asked")


class LedgerState:
    """What a session's ledger says now: seen files and ids (since the last reset), edits, tasks."""

    __slots__ = ("asked", "edited", "files", "ids", "tasks")

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.ids: set[str] = set()
        self.edited: set[str] = set()
        self.asked: set[str] = set()
        self.tasks: list[dict[str, Any]] = []  # not yet taken, oldest first

    def add(self, entry: Mapping[str, Any]) -> None:
        """Fold one ledger line into the state."""
        kind = entry.get("type")
        items = entry.get("items")
        if kind == "reset":
            self.files.clear()
            self.ids.clear()
            self.asked.clear()
        elif kind in KINDS and isinstance(items, list):
            getattr(self, str(kind)).update(str(item) for item in items)
        elif kind == "task" and isinstance(entry.get("task"), Mapping):
            self.tasks.append(dict(entry["task"]))
        elif kind == "taken":
            key = entry.get("key")
            self.tasks = [task for task in self.tasks if task.get("key") != key]


class HookLedger:
    """The ledger of one agent session in one ``.engram/`` folder."""

    def __init__(self, state_dir: Path, session_id: str, *, lock_timeout: float = 5.0) -> None:
        digest = hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
        self.folder = state_dir / FOLDER
        self.path = self.folder / f"{digest}.jsonl"
        self._lock = ProcessLock(
            self.folder / f"{digest}.lock", timeout=lock_timeout, what=str(self.path)
        )

    def state(self) -> LedgerState:
        """Return the session's state as its ledger holds it now."""
        state = LedgerState()
        try:
            with self.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > MAX_BYTES:
                    handle.seek(size - MAX_BYTES)
                data = handle.read()
        except FileNotFoundError:
            return state
        for line in data.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a cut first line, or a torn write
            if isinstance(entry, dict):
                state.add(entry)
        return state

    def _append(self, entries: Sequence[Mapping[str, Any]]) -> None:
        if not entries:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        # Led by a newline: a line torn by a crash never swallows the next entry.
        data = b"\n" + b"".join(
            json.dumps(dict(entry), ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"
            for entry in entries
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def record(self, kind: str, items: Iterable[str]) -> None:
        """Record ``items`` (paths or ids) under ``kind`` (one of ``KINDS``)."""
        if kind not in KINDS:
            raise ValueError(f"unknown ledger kind {kind!r}")
        listed = sorted(set(items))
        if listed:
            with self._lock.hold():
                self._append([{"type": kind, "items": listed}])

    def claim(self, kind: str, items: Iterable[str]) -> list[str]:
        """Return the items not yet seen under ``kind``, in order, and record them as seen."""
        if kind not in KINDS:
            raise ValueError(f"unknown ledger kind {kind!r}")
        wanted = list(dict.fromkeys(items))
        if not wanted:
            return []
        with self._lock.hold():
            seen = getattr(self.state(), kind)
            fresh = [item for item in wanted if item not in seen]
            if fresh:
                self._append([{"type": kind, "items": fresh}])
        return fresh

    def reset(self) -> None:
        """Forget what was shown (the context was compacted); the session's edits stay."""
        with self._lock.hold():
            self._append([{"type": "reset"}])

    def add_task(self, agent_type: str, text: str) -> None:
        """Note a subagent's task, for the subagent-start hook that follows it."""
        key = hashlib.sha256(f"{time.time_ns()} {agent_type} {text}".encode()).hexdigest()[:16]
        task = {"key": key, "agent_type": agent_type, "text": text}
        with self._lock.hold():
            self._append([{"type": "task", "task": task}])

    def take_task(self, agent_type: str) -> dict[str, Any] | None:
        """Return the oldest task not yet taken for ``agent_type`` (any, if none is), taking it."""
        with self._lock.hold():
            tasks = self.state().tasks
            mine = [task for task in tasks if task.get("agent_type") == agent_type] or tasks
            if not mine:
                return None
            self._append([{"type": "taken", "key": mine[0].get("key")}])
        return mine[0]


def prune(state_dir: Path, *, keep_days: float = KEEP_DAYS) -> int:
    """Remove the ledgers (and their locks) untouched for ``keep_days``; return how many."""
    folder = state_dir / FOLDER
    cutoff = time.time() - keep_days * 86400
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += entry.name.endswith(".jsonl")
        except OSError:
            continue
    return removed
