"""A model of Go engram v1.7's local sync (``internal/sync``, ``internal/store`` at tag v1.7.0).

Written from its struct definitions and SQL, in our own words, for tests of a mixed team; the
newer Go (sync_ids, a mutation journal) is ``tests.helpers.gosync``. What v1.7 does:

- Its rows have no ``sync_id``: an observation is an integer id (AUTOINCREMENT), a session a
  string id, a prompt an integer id.
- ``sync_import``: for each manifest entry not imported yet whose chunk file exists, unmarshal
  ``{sessions, observations, prompts}`` (unknown keys ignored), ``INSERT OR IGNORE`` the
  sessions, and INSERT every observation and prompt as a NEW row (a new id), keeping its
  ``deleted_at``: an edit arrives as a second row, a delete as a deleted copy, never as a change
  of the row it has. ``revision_count`` and ``duplicate_count`` at least 1; the topic key
  lower-cased, blanks to ``-``.
- ``sync_export``: every row of the database, filtered to the folder's project (sessions whose
  project is the folder's base name, and the observations and prompts of those sessions); only
  rows created after the newest manifest entry's ``created_at`` (times compared as
  ``YYYY-MM-DD HH:MM:SS`` strings, strictly later); ``json.Marshal`` of the chunk struct, id =
  first 8 hex of its sha256; the manifest written back through its struct
  (``json.MarshalIndent(m, "", "  ")``: Go's key order, entries with Go's keys only, no final
  newline; ``version`` as read, 1 for a new file).
- ``export``: the whole database as ``engram export`` writes it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.helpers.gosync import ENTRY, PSTRING, SESSION, STRING, _marshal, _struct, unmarshal

V17_OBSERVATION: dict[str, Any] = {
    "id": "int64",
    "session_id": STRING,
    "type": STRING,
    "title": STRING,
    "content": STRING,
    "tool_name": PSTRING,
    "project": PSTRING,
    "scope": STRING,
    "topic_key": PSTRING,
    "revision_count": "int",
    "duplicate_count": "int",
    "last_seen_at": PSTRING,
    "created_at": STRING,
    "updated_at": STRING,
    "deleted_at": PSTRING,
}
V17_PROMPT: dict[str, Any] = {
    "id": "int64",
    "session_id": STRING,
    "content": STRING,
    "project": STRING,  # omitempty
    "created_at": STRING,
}
V17_CHUNK: dict[str, Any] = {
    "sessions": [SESSION],
    "observations": [V17_OBSERVATION],
    "prompts": [V17_PROMPT],
}
V17_MANIFEST: dict[str, Any] = {"version": "int", "chunks": [ENTRY]}


def go_now() -> str:
    """Go's ``store.Now()``: UTC, ``YYYY-MM-DD HH:MM:SS``."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _normal(value: str) -> str:
    """Go's ``normalizeTime``: an RFC 3339 time as ``YYYY-MM-DD HH:MM:SS`` UTC, else as is."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value.strip()
    if "T" not in value or parsed.tzinfo is None:
        return value.strip()
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def manifest_text(manifest: dict[str, Any]) -> str:
    """Go's ``json.MarshalIndent(m, "", "  ")`` of its Manifest struct (no final newline)."""
    body = {
        "version": manifest.get("version") or 0,
        "chunks": [_struct(e, ENTRY) for e in manifest.get("chunks") or []] or None,
    }
    text = json.dumps(body, indent=2, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass
class GoV17:
    """One Go engram v1.7 database, reduced to what sync, save, update and delete touch."""

    folder: str  # the base name of the folder Go runs in: its project name
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    observations: dict[int, dict[str, Any]] = field(default_factory=dict)
    prompts: dict[int, dict[str, Any]] = field(default_factory=dict)
    synced: set[str] = field(default_factory=set)
    next_obs: int = 1
    next_prompt: int = 1

    def live(self) -> list[dict[str, Any]]:
        """The observations not deleted, in id order."""
        return [o for _i, o in sorted(self.observations.items()) if not o.get("deleted_at")]

    def context_titles(self) -> list[str]:
        """The titles ``FormatContext(folder)`` lists (``RecentObservations``: this project)."""
        return [o["title"] for o in self.live() if o.get("project") == self.folder]

    # ── local writes, as its MCP tools make them ──

    def start_session(self, sid: str) -> None:
        self.sessions.setdefault(
            sid,
            {
                "id": sid,
                "project": self.folder,
                "directory": f"/w/{self.folder}",
                "started_at": go_now(),
            },
        )

    def save(self, sid: str, title: str, content: str, typ: str = "decision") -> int:
        self.start_session(sid)
        now = go_now()
        row = {
            "id": self.next_obs,
            "session_id": sid,
            "type": typ,
            "title": title,
            "content": content,
            "project": self.folder,
            "scope": "project",
            "revision_count": 1,
            "duplicate_count": 1,
            "last_seen_at": now,
            "created_at": now,
            "updated_at": now,
        }
        self.observations[self.next_obs] = row
        self.next_obs += 1
        return int(row["id"])

    def update(self, obs_id: int, **changes: Any) -> None:
        row = self.observations[obs_id]
        row.update(changes)
        row["revision_count"] += 1
        row["updated_at"] = go_now()

    def delete(self, obs_id: int) -> None:
        row = self.observations[obs_id]
        row["deleted_at"] = row["updated_at"] = go_now()

    # ── sync ──

    def read_manifest(self, engram_dir: Path) -> dict[str, Any]:
        path = engram_dir / "manifest.json"
        if not path.exists():
            return {"version": 1, "chunks": []}
        manifest = unmarshal(path.read_bytes(), V17_MANIFEST, what="manifest")
        manifest["chunks"] = manifest.get("chunks") or []
        return manifest

    def sync_import(self, engram_dir: Path) -> int:
        """``engram sync --import``: insert every row of every chunk not imported yet."""
        imported = 0
        for entry in self.read_manifest(engram_dir)["chunks"]:
            ident = entry.get("id") or ""
            path = engram_dir / "chunks" / f"{ident}.jsonl.gz"
            if ident in self.synced or not path.exists():
                continue
            chunk = unmarshal(gzip.decompress(path.read_bytes()), V17_CHUNK, what=ident)
            for session in chunk.get("sessions") or []:
                self.sessions.setdefault(session["id"], dict(session))
            for obs in chunk.get("observations") or []:
                row = {**obs, "id": self.next_obs}
                row["scope"] = "personal" if obs.get("scope") == "personal" else "project"
                topic = " ".join((obs.get("topic_key") or "").lower().split()).replace(" ", "-")
                row["topic_key"] = topic[:120] or None
                row["revision_count"] = max(obs.get("revision_count") or 0, 1)
                row["duplicate_count"] = max(obs.get("duplicate_count") or 0, 1)
                self.observations[self.next_obs] = row
                self.next_obs += 1
            for prompt in chunk.get("prompts") or []:
                self.prompts[self.next_prompt] = {**prompt, "id": self.next_prompt}
                self.next_prompt += 1
            self.synced.add(ident)
            imported += 1
        return imported

    def sync_export(self, engram_dir: Path, *, created_by: str = "gopher") -> str | None:
        """``engram sync``: export this folder's rows created after the newest chunk."""
        manifest = self.read_manifest(engram_dir)
        cutoff = max((str(e.get("created_at") or "") for e in manifest["chunks"]), default="")
        mine = {sid for sid, s in self.sessions.items() if s.get("project") == self.folder}
        sessions = [s for s in self.sessions.values() if s["id"] in mine]
        observations = [o for _i, o in sorted(self.observations.items()) if o["session_id"] in mine]
        prompts = [p for _i, p in sorted(self.prompts.items()) if p["session_id"] in mine]
        if cutoff:
            limit = _normal(cutoff)
            sessions = [s for s in sessions if _normal(s["started_at"]) > limit]
            observations = [o for o in observations if _normal(o["created_at"]) > limit]
            prompts = [p for p in prompts if _normal(p["created_at"]) > limit]
        if not sessions and not observations and not prompts:
            return None
        chunk = {
            "sessions": [_struct(s, SESSION) for s in sessions] or None,
            "observations": [_struct(o, V17_OBSERVATION) for o in observations] or None,
            "prompts": [
                {k: v for k, v in _struct(p, V17_PROMPT).items() if k != "project" or v}
                for p in prompts
            ]
            or None,
        }
        data = _marshal(chunk).encode("utf-8")
        ident = hashlib.sha256(data).hexdigest()[:8]
        if ident in {e.get("id") for e in manifest["chunks"]}:
            return None
        folder = engram_dir / "chunks"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{ident}.jsonl.gz").write_bytes(gzip.compress(data))
        manifest["chunks"].append(
            {
                "id": ident,
                "created_by": created_by,
                "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "sessions": len(sessions),
                "memories": len(observations),
                "prompts": len(prompts),
            }
        )
        (engram_dir / "manifest.json").write_text(manifest_text(manifest), encoding="utf-8")
        self.synced.add(ident)
        return ident

    def export(self) -> dict[str, Any]:
        """``engram export``: the whole database, as Go's ExportData."""
        return {
            "version": "0.1.0",
            "exported_at": go_now(),
            "sessions": [_struct(s, SESSION) for s in self.sessions.values()],
            "observations": [
                _struct(o, V17_OBSERVATION) for _i, o in sorted(self.observations.items())
            ],
            "prompts": [_struct(p, V17_PROMPT) for _i, p in sorted(self.prompts.items())],
        }
