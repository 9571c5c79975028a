"""The clone's session log: which agent sessions started and ended here (``state/sessions.json``).

A session's *summary* is a memory (kind ``session``) and travels with memories.jsonl; the log
only remembers what the summary needs later (when the session started, in which folder, whether
it ended) and which session is open, so that a summary or a saved prompt without a session id
lands in the session the agent started. It is per-clone state, never committed, but it holds
free text (the folder a session ran in, its project), so every entry written goes through the
store's scrubber like a memory does.

The file is one JSON object ``{"version": 1, "sessions": {id: {...}}}``, written atomically under
its own lock. A file that does not parse is set aside as ``sessions.json.corrupt`` (never
deleted) and the log starts afresh: losing it loses no memory.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.store.atomic import atomic_write
from engram.store.lock import ProcessLock
from engram.store.redact_lazy import LazyScrubber

if TYPE_CHECKING:
    from collections.abc import Callable

    from engram.store.redact import Scrubber

SESSIONS: Final = "sessions.json"
VERSION: Final = 1
KEEP: Final = 1000  # sessions the log keeps (the oldest go first)


class SessionLog:
    """Start, end and look up sessions of one .engram/ folder."""

    def __init__(
        self,
        state_dir: Path,
        *,
        lock_timeout: float = 60.0,
        scrubber: Scrubber | Callable[[], Scrubber] | None = None,
    ) -> None:
        self.path = state_dir / SESSIONS
        self._scrubber = LazyScrubber(scrubber)
        self._lock = ProcessLock(
            state_dir / "sessions.lock", timeout=lock_timeout, what=str(self.path)
        )

    @property
    def scrubber(self) -> Scrubber:
        """What every write of the log goes through (made on first use, as the store's is)."""
        return self._scrubber.get()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, UnicodeDecodeError):
            with contextlib.suppress(OSError):
                os.replace(self.path, self.path.with_name(SESSIONS + ".corrupt"))
            return {}
        sessions = raw.get("sessions") if isinstance(raw, dict) else None
        if not isinstance(sessions, dict):
            return {}
        return {str(k): v for k, v in sessions.items() if isinstance(v, dict)}

    def _write(
        self,
        sessions: dict[str, dict[str, Any]],
        read: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Write the log, scrubbed. With ``read`` (the log as this edit found it, which a write
        like this one left scrubbed) only what the edit added is scanned: a session's new id,
        times and anything the log did not hold yet. Without it every string is scanned."""
        if len(sessions) > KEEP:
            newest = sorted(sessions, key=lambda k: str(sessions[k].get("started_at", "")))
            sessions = {k: sessions[k] for k in newest[-KEEP:]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if read is None:
            # Scrubbed as one record, session ids (the keys) included: a session id that is a
            # secret becomes the same [REDACTED] its memories' session_id becomes. A scrubber of
            # its own, so nothing another write found clean in this process is taken on trust.
            from engram.store.redact import Scrubber

            sessions = Scrubber(self.scrubber.patterns).record(sessions)[0]
        else:
            sessions = {
                sid: self._added(entry, read.get(sid), read) for sid, entry in sessions.items()
            }
        data = json.dumps({"version": VERSION, "sessions": sessions}, sort_keys=True, indent=1)
        atomic_write(self.path, (data + "\n").encode("utf-8"))

    def _added(
        self, entry: dict[str, Any], before: dict[str, Any] | None, read: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        """Return a log entry with what the edit added scrubbed (ids are scrubbed by ``_key``)."""
        if entry == before:
            return entry
        known = set(_strings_of(read))
        out: dict[str, Any] = {}
        for key, value in entry.items():
            name = key if key in known else self.scrubber.text(str(key))[0]
            if isinstance(value, str):
                out[name] = value if value in known else self.scrubber.text(value)[0]
            elif isinstance(value, dict | list):
                out[name] = self.scrubber.record({"value": value})[0]["value"]
            else:
                out[name] = value
        return out

    @contextlib.contextmanager
    def _editing(self, *, scan_all: bool = False) -> Iterator[dict[str, dict[str, Any]]]:
        with self._lock.hold():
            sessions = self._read()
            read = None if scan_all else copy.deepcopy(sessions)
            yield sessions
            self._write(sessions, read)

    def rewrite(self) -> None:
        """Write the log again, every string scanned again (scrubbed): `doctor --fix`."""
        with self._editing(scan_all=True):
            pass  # _editing writes the log back on exit, scrubbed

    def get(self, session_id: str) -> dict[str, Any] | None:
        """Return the logged session, or None."""
        sessions = self._read()
        session_id = self._key(session_id, sessions)
        found = sessions.get(session_id)
        return {"id": session_id, **found} if found is not None else None

    def entries(self) -> list[dict[str, Any]]:
        """Return every logged session (its id among its fields), oldest start first."""
        found = [{"id": sid, **entry} for sid, entry in self._read().items()]
        return sorted(found, key=lambda s: (str(s.get("started_at", "")), s["id"]))

    def _key(self, session_id: str, sessions: dict[str, dict[str, Any]]) -> str:
        """Return the id the log files a session under: scrubbed, as a memory's session_id is.

        An id the log already files a session under was scrubbed when it was written: it is
        taken as it is, without loading the secret rules for it (a hook's usual case).
        """
        if session_id in sessions:  # the log as read by the caller
            return session_id
        return self.scrubber.text(session_id)[0]

    def start(self, session_id: str, *, project: str, directory: str, stamp: str) -> dict[str, Any]:
        """Log a session's start; starting a known session again reopens it, keeping its start."""
        with self._editing() as sessions:
            session_id = self._key(session_id, sessions)
            entry = sessions.get(session_id) or {"started_at": stamp}
            entry.update(project=project, directory=directory or entry.get("directory", ""))
            entry.pop("ended_at", None)
            sessions[session_id] = entry
            return {"id": session_id, **entry}

    def end(self, session_id: str, *, stamp: str, summary_id: str | None = None) -> dict[str, Any]:
        """Log a session's end (a session never started here is logged as starting now)."""
        with self._editing() as sessions:
            session_id = self._key(session_id, sessions)
            entry = sessions.get(session_id) or {"started_at": stamp}
            entry["ended_at"] = stamp
            if summary_id:
                entry["summary_id"] = summary_id
            sessions[session_id] = entry
            return {"id": session_id, **entry}

    def note_summary(self, session_id: str, summary_id: str) -> None:
        """Remember which memory summarises a logged session."""
        with self._editing() as sessions:
            session_id = self._key(session_id, sessions)
            if session_id in sessions:
                sessions[session_id]["summary_id"] = summary_id

    def note(self, session_id: str, **fields: Any) -> None:
        """Keep further fields of a session (one never started here is logged with them)."""
        with self._editing() as sessions:
            session_id = self._key(session_id, sessions)
            sessions.setdefault(session_id, {}).update(fields)

    def open_session(self, project: str) -> dict[str, Any] | None:
        """Return the most recently started session of ``project`` that has not ended."""
        candidates = [
            {"id": sid, **entry}
            for sid, entry in self._read().items()
            if "ended_at" not in entry and entry.get("project") == project
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda s: (str(s.get("started_at", "")), s["id"]))

    def projects(self) -> set[str]:
        """Return the projects the log has sessions of."""
        return {str(entry.get("project", "")) for entry in self._read().values()}

    def drop_projects(self, names: Iterable[str]) -> int:
        """Remove the sessions of these projects from the log; return how many went."""
        doomed = set(names)
        with self._editing() as sessions:
            gone = [sid for sid, entry in sessions.items() if entry.get("project") in doomed]
            for sid in gone:
                del sessions[sid]
            return len(gone)


def _strings_of(sessions: dict[str, dict[str, Any]]) -> Iterator[str]:
    """Yield the strings of a read log: session ids, field names and string values."""
    for sid, entry in sessions.items():
        yield sid
        for key, value in entry.items():
            yield str(key)
            if isinstance(value, str):
                yield value
