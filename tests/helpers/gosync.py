"""A model of Gentleman-Programming's Go engram local sync, written from its struct definitions.

No Go toolchain here, so the tests read and write the shared ``.engram/`` folder the way Go's
``engram sync`` does, in our own words:

- ``unmarshal``: Go's ``json.Unmarshal`` of a chunk into its ``ChunkData`` struct (or of the
  manifest into ``Manifest``). The whole text must be ONE JSON value (trailing data fails, as
  ``invalid character '{' after top-level value`` does in Go); keys match fields
  case-insensitively, unknown keys are ignored, ``null`` leaves a field at its zero value, and a
  value of the wrong JSON type fails (a string for an ``int64``, a number for a ``string``, a
  fraction or an out-of-range number for an integer).
- ``GoStore.sync_import``: reads the manifest, skips chunks already imported, unmarshals each
  listed chunk and stops the whole import on the first that fails; rows become upserts (a row
  with ``deleted_at`` a delete), a ``mutations`` journal replaces the rows it names; sessions
  apply first (observations have a foreign key on them), observations upsert by ``sync_id``,
  a delete soft-deletes the row it names and creates nothing.
- ``GoStore.sync_export``: writes a chunk as Go's ``json.Marshal`` of its struct (field order,
  ``omitempty`` pointers), id = first 8 hex of the sha256 of that JSON, and writes the manifest
  back through its own struct (``json.MarshalIndent``: entries keep only Go's keys).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STRING, PSTRING, INT64, INT, BOOL = "string", "*string", "int64", "int", "bool"
_INT_RANGE = (-(2**63), 2**63 - 1)

SESSION: dict[str, Any] = {
    "id": STRING,
    "project": STRING,
    "directory": STRING,
    "started_at": STRING,
    "ended_at": PSTRING,
    "summary": PSTRING,
}
OBSERVATION: dict[str, Any] = {
    "id": INT64,
    "sync_id": STRING,
    "session_id": STRING,
    "type": STRING,
    "title": STRING,
    "content": STRING,
    "tool_name": PSTRING,
    "project": PSTRING,
    "scope": STRING,
    "topic_key": PSTRING,
    "revision_count": INT,
    "duplicate_count": INT,
    "last_seen_at": PSTRING,
    "review_after": PSTRING,
    "created_at": STRING,
    "updated_at": STRING,
    "deleted_at": PSTRING,
}
PROMPT: dict[str, Any] = {
    "id": INT64,
    "sync_id": STRING,
    "session_id": STRING,
    "content": STRING,
    "project": STRING,
    "created_at": STRING,
}
MUTATION: dict[str, Any] = {
    "seq": INT64,
    "target_key": STRING,
    "entity": STRING,
    "entity_key": STRING,
    "op": STRING,
    "payload": STRING,
    "source": STRING,
    "project": STRING,
    "occurred_at": STRING,
    "acked_at": PSTRING,
}
CHUNK: dict[str, Any] = {
    "sessions": [SESSION],
    "observations": [OBSERVATION],
    "prompts": [PROMPT],
    "mutations": [MUTATION],
}
ENTRY: dict[str, Any] = {
    "id": STRING,
    "created_by": STRING,
    "created_at": STRING,
    "sessions": INT,
    "memories": INT,
    "prompts": INT,
}
MANIFEST: dict[str, Any] = {"version": INT, "chunks": [ENTRY]}


class GoError(Exception):
    """What Go engram's sync would fail with."""


def _decode(value: Any, spec: Any, where: str) -> Any:
    if value is None:
        return None  # Go: null leaves the zero value (a nil slice, pointer or "")
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise GoError(f"json: cannot unmarshal {type(value).__name__} into Go value {where}")
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if key in spec else next((k for k in spec if k.lower() == key.lower()), "")
            if name:  # unknown keys are ignored, but were parsed: they must be valid JSON
                out[name] = _decode(item, spec[name], f"{where}.{name}")
        return out
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise GoError(f"json: cannot unmarshal {type(value).__name__} into {where} (slice)")
        return [_decode(item, spec[0], f"{where}[{n}]") for n, item in enumerate(value)]
    if spec in (STRING, PSTRING):
        if not isinstance(value, str):
            raise GoError(f"json: cannot unmarshal {type(value).__name__} into {where} (string)")
        return value
    if spec in (INT64, INT):
        if isinstance(value, bool) or not isinstance(value, int):
            raise GoError(f"json: cannot unmarshal {value!r} into {where} ({spec})")
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise GoError(f"json: cannot unmarshal number {value} into {where}: out of range")
        return value
    if spec == BOOL:
        if not isinstance(value, bool):
            raise GoError(f"json: cannot unmarshal {type(value).__name__} into {where} (bool)")
        return value
    raise AssertionError(spec)


def unmarshal(data: bytes, spec: dict[str, Any], *, what: str = "ChunkData") -> dict[str, Any]:
    """Decode ``data`` as Go's json.Unmarshal into a ``spec`` struct; raise GoError as Go would."""
    try:
        text = data.decode("utf-8")
        value = json.loads(text)  # the whole text: one value, trailing data refused
    except (UnicodeDecodeError, ValueError) as exc:
        raise GoError(f"parse {what}: {exc}") from exc
    decoded = _decode(value, spec, what)
    if decoded is None:
        return {}
    return decoded


def _marshal(value: Any) -> str:
    """Go's json.Marshal: compact, raw UTF-8, <, > and & escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _struct(row: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A row as Go marshals its struct: fields in order, nil pointers (omitempty) left out."""
    out: dict[str, Any] = {}
    for key, kind in spec.items():
        value = row.get(key)
        if kind == PSTRING:
            if value is not None:
                out[key] = value
        else:
            out[key] = value if value is not None else (0 if kind in (INT, INT64) else "")
    return out


@dataclass
class GoStore:
    """One Go engram database, reduced to what sync touches."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    observations: dict[str, dict[str, Any]] = field(default_factory=dict)  # by sync_id
    prompts: dict[str, dict[str, Any]] = field(default_factory=dict)
    synced: set[str] = field(default_factory=set)
    next_id: int = 1

    def live(self) -> dict[str, dict[str, Any]]:
        """The observations not deleted, by sync_id."""
        return {k: v for k, v in self.observations.items() if not v.get("deleted_at")}

    def read_manifest(self, engram_dir: Path) -> dict[str, Any]:
        path = engram_dir / "manifest.json"
        if not path.exists():
            return {"version": 0, "chunks": []}
        manifest = unmarshal(path.read_bytes(), MANIFEST, what="manifest")
        manifest.setdefault("chunks", None)
        manifest["chunks"] = manifest["chunks"] or []
        return manifest

    def sync_import(self, engram_dir: Path) -> int:
        """Import every chunk of the manifest not imported yet; return how many were."""
        manifest = self.read_manifest(engram_dir)
        imported = 0
        for entry in manifest["chunks"]:
            chunk_id = entry.get("id") or ""
            if chunk_id in self.synced:
                continue
            path = engram_dir / "chunks" / f"{chunk_id}.jsonl.gz"
            if not path.exists():
                continue  # Go skips a chunk whose file is not here
            chunk = unmarshal(gzip.decompress(path.read_bytes()), CHUNK, what=f"chunk {chunk_id}")
            self._apply(chunk, chunk_id)
            self.synced.add(chunk_id)
            imported += 1
        return imported

    def _apply(self, chunk: dict[str, Any], chunk_id: str) -> None:
        rows: list[tuple[str, str, str, dict[str, Any]]] = []
        for session in chunk.get("sessions") or []:
            rows.append(("session", session.get("id", ""), "upsert", session))
        for obs in chunk.get("observations") or []:
            op = "delete" if obs.get("deleted_at") is not None else "upsert"
            rows.append(("observation", obs.get("sync_id", ""), op, obs))
        for prompt in chunk.get("prompts") or []:
            rows.append(("prompt", prompt.get("sync_id", ""), "upsert", prompt))
        explicit = []
        for mutation in chunk.get("mutations") or []:
            payload = json.loads(mutation.get("payload") or "{}")
            explicit.append((mutation["entity"], mutation["entity_key"], mutation["op"], payload))
        named = {(entity, key) for entity, key, _op, _row in explicit}
        rows = [row for row in rows if (row[0], row[1]) not in named] + explicit
        order = {("session", "upsert"): 0, ("session", "delete"): 3}
        rows.sort(key=lambda row: order.get((row[0], row[2]), 1 if row[2] == "upsert" else 2))
        sessions_here = {key for entity, key, op, _ in rows if entity == "session"}
        for entity, key, op, row in rows:
            if entity == "session" and op == "upsert":
                self.sessions[key] = {**self.sessions.get(key, {}), **row}
            elif entity in ("observation", "prompt") and op == "upsert":
                session = row.get("session_id") or ""
                if session not in self.sessions and session not in sessions_here:
                    raise GoError(
                        f"chunk {chunk_id}: FOREIGN KEY constraint failed: {entity} {key} "
                        f"names session {session!r}"
                    )
                table = self.observations if entity == "observation" else self.prompts
                known = table.get(key)
                local_id = known["local_id"] if known else self.next_id
                self.next_id += 0 if known else 1
                revisions = known["revision_count"] + 1 if known else 1
                table[key] = {
                    **row,
                    "local_id": local_id,
                    "revision_count": revisions,
                    "deleted_at": None,
                }
            elif entity == "observation" and op == "delete" and key in self.observations:
                self.observations[key]["deleted_at"] = row.get("deleted_at") or "now"

    def sync_export(
        self,
        engram_dir: Path,
        *,
        sessions: list[dict[str, Any]],
        observations: list[dict[str, Any]],
        mutations: list[dict[str, Any]] | None = None,
        created_by: str = "gopher",
        created_at: str = "2026-03-04T05:06:07.123456789Z",
    ) -> str:
        """Write a chunk and the manifest exactly as Go's Export does; return the chunk id."""
        chunk: dict[str, Any] = {
            "sessions": [_struct(s, SESSION) for s in sessions],
            "observations": [_struct(o, OBSERVATION) for o in observations],
            "prompts": None,
        }
        if mutations:
            chunk["mutations"] = [_struct(m, MUTATION) for m in mutations]
        data = _marshal(chunk).encode("utf-8")
        chunk_id = hashlib.sha256(data).hexdigest()[:8]
        folder = engram_dir / "chunks"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{chunk_id}.jsonl.gz").write_bytes(gzip.compress(data))
        manifest = self.read_manifest(engram_dir)
        entries = [_struct(entry, ENTRY) for entry in manifest["chunks"]]
        entries.append(
            {
                "id": chunk_id,
                "created_by": created_by,
                "created_at": created_at,
                "sessions": len(sessions),
                "memories": len(observations),
                "prompts": 0,
            }
        )
        version = max(int(manifest.get("version") or 0), 2)
        body = {"version": version, "chunks": entries}
        text = json.dumps(body, indent=2, ensure_ascii=False)
        (engram_dir / "manifest.json").write_text(text, encoding="utf-8")
        self.synced.add(chunk_id)
        return chunk_id
