"""The manifest of sync chunks, ``.engram/manifest.json``: parsed, checked, merged, rendered.

README (sync): ``{"version": 2, "chunks": [{"id", "created_by", "created_at", "memories",
"sessions", "prompts"}]}``, sorted by id, one entry per line. A manifest is read as untrusted
(``engram.sync.syncfiles``): entries without a safe chunk id are left out and reported, a file
with git conflict markers is read as the union of both sides. ``merge_manifests`` is the set
union the git merge driver applies too. Rendering keeps the layout the file has
(``engram.sync.manifestform``) and scrubs every string of secrets first. Writing is the
store's (``engram.store.files``), under the chunk writers' lock (``engram.sync.chunks``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from engram.errors import InputTooLarge, InvalidInput
from engram.model import dumps, loads
from engram.store.redact import default_scrubber
from engram.sync import manifestform
from engram.sync.syncfiles import (
    MANIFEST,
    MAX_MANIFEST_BYTES,
    ChunkError,
    is_chunk_id,
    read_limited,
)

VERSION: Final = 2


@dataclass(frozen=True)
class ChunkEntry:
    """One manifest entry: which chunk, who wrote it, when, and how many memories it holds.

    ``sessions`` and ``prompts`` count the rows of Go engram's view (its manifest entries have
    them, and its summary adds them up); they do not take part in comparisons.
    """

    id: str
    created_by: str
    created_at: str
    memories: int
    sessions: int = field(default=0, compare=False)
    prompts: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the entry as the JSON object the manifest stores (Go engram's keys)."""
        return {
            "id": self.id,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "memories": self.memories,
            "sessions": self.sessions,
            "prompts": self.prompts,
        }


def check_manifest(value: Any, *, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ChunkError(f"{name}: expected a JSON object, got {type(value).__name__}", path=name)
    try:
        dumps_value(value)
    except (TypeError, ValueError) as exc:
        raise ChunkError(f"{name}: not valid JSON: {exc}", path=name) from exc
    chunks = value.get("chunks")
    if chunks is None:  # Go engram writes null for an empty list
        chunks = []
    if not isinstance(chunks, list):
        raise ChunkError(f'{name}: "chunks" must be a list, got {type(chunks).__name__}', path=name)
    version = value.get("version", VERSION)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ChunkError(f'{name}: "version" must be an integer, got {version!r}', path=name)
    return {**value, "chunks": chunks}


def loads_manifest(data: bytes, *, name: str = MANIFEST) -> Any:
    """Parse manifest bytes as JSON (key order kept), raising ChunkError if they are not."""
    try:
        return loads(data, what=name)
    except InputTooLarge as exc:
        raise ChunkError(exc.message, path=name) from exc
    except UnicodeDecodeError as exc:
        raise ChunkError(f"{name}: invalid UTF-8 at byte {exc.start}", path=name) from exc
    except ValueError as exc:
        raise ChunkError(f"{name}: not JSON: {exc}", path=name) from exc


def parse_manifest(data: bytes, *, name: str = MANIFEST) -> dict[str, Any]:
    """Parse manifest bytes into a dict with a ``chunks`` list, raising ChunkError if malformed."""
    return check_manifest(loads_manifest(data, name=name), name=name)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def entry_from(raw: Mapping[str, Any]) -> ChunkEntry:
    by, at = raw.get("created_by"), raw.get("created_at")
    return ChunkEntry(
        id=str(raw["id"]),
        created_by=by if isinstance(by, str) else "",
        created_at=at if isinstance(at, str) else "",
        memories=_count(raw.get("memories")),
        sessions=_count(raw.get("sessions")),
        prompts=_count(raw.get("prompts")),
    )


def _greater(a: Mapping[str, Any], b: Mapping[str, Any]) -> Mapping[str, Any]:
    """Pick one of two values deterministically: the one whose canonical JSON sorts greater."""
    return a if dumps(a) >= dumps(b) else b


def valid_entries(
    chunks: Sequence[Any], *, name: str = MANIFEST
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Key raw manifest entries by id; refuse (and report) those that are not safe entries."""
    by_id: dict[str, dict[str, Any]] = {}
    problems = []
    for number, raw in enumerate(chunks, 1):
        if not isinstance(raw, dict):
            problems.append(f"{name}: entry {number} is not a JSON object; ignored")
            continue
        if not is_chunk_id(raw.get("id")):
            problems.append(
                f"{name}: entry {number} has id {raw.get('id')!r}, which is not a chunk id "
                "(8 to 64 lowercase hex characters); ignored"
            )
            continue
        try:
            dumps(raw)
        except InvalidInput:
            problems.append(f"{name}: entry {number} is not valid JSON; ignored")
            continue
        known = by_id.get(raw["id"])
        by_id[raw["id"]] = dict(_greater(known, raw)) if known is not None else raw
    return by_id, problems


def read_manifest_file(
    engram_dir: Path,
) -> tuple[dict[str, Any], manifestform.Layout | None, list[str]]:
    """Return the manifest file parsed, its layout (None: no file) and what was odd about it.

    A file with git conflict markers is read as the union of both sides (its layout: our
    side's), and the sentence says so; the next write replaces it with a clean file.
    """
    data = read_limited(engram_dir / MANIFEST, name=MANIFEST, limit=MAX_MANIFEST_BYTES)
    if data is None:
        return {"version": VERSION, "chunks": []}, None, []
    conflict = manifestform.split_conflict(data)
    if conflict is None:
        parsed = loads_manifest(data)
        return check_manifest(parsed, name=MANIFEST), manifestform.layout_of(data, parsed), []
    ours, theirs, sides = conflict
    parsed_ours = loads_manifest(ours, name=f"{MANIFEST} (ours)")
    parsed_theirs = loads_manifest(theirs, name=f"{MANIFEST} (theirs)")
    merged = merge_manifests(
        check_manifest(parsed_ours, name=MANIFEST), check_manifest(parsed_theirs, name=MANIFEST)
    )
    note = (
        f"{MANIFEST}: git conflict markers ({sides}); read as the union of both sides "
        f"({len(merged['chunks'])} chunks); the next `engram sync` writes it without them"
    )
    return merged, manifestform.layout_of(ours, parsed_ours), [note]


def manifest_layout(engram_dir: Path) -> manifestform.Layout | None:
    """Return the layout of the manifest file (None: no file, or an unreadable one)."""
    try:
        return read_manifest_file(engram_dir)[1]
    except ChunkError:
        return None


def load_manifest(
    engram_dir: Path,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
    """Return the parsed manifest, its safe entries by id, and sentences on the unsafe ones.

    No file: an empty manifest. A manifest that cannot be read at all raises ChunkError.
    """
    manifest, _layout, noted = read_manifest_file(engram_dir)
    by_id, problems = valid_entries(manifest["chunks"])
    return manifest, by_id, noted + problems


def read_manifest(engram_dir: Path) -> list[ChunkEntry]:
    """Return the manifest's entries sorted by id (no file: []; unsafe entries left out)."""
    _, by_id, _ = load_manifest(engram_dir)
    return [entry_from(by_id[key]) for key in sorted(by_id)]


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """Render a manifest canonically: sorted keys, one chunk entry per line, sorted by id.

    One line per entry keeps a pull request's diff to one line per new chunk, and the same
    manifest always gives the same bytes. Every string in it (a teammate's ``created_by`` or
    extra keys included) is scrubbed of secrets first: every manifest written is rendered here.
    """
    return manifest_update(manifest, None)


def manifest_update(manifest: Mapping[str, Any], layout: manifestform.Layout | None) -> bytes:
    """Render a manifest in the layout the file has (``manifest_layout``; None: canonical).

    ``engram.sync.manifestform``: the file's key order, entry layout and entry order stay, new
    entries are inserted where a diff only adds them. Every string is scrubbed of secrets
    first: every manifest written is rendered here.
    """
    manifest, _ = default_scrubber().record(manifest)
    return manifestform.render(manifest, layout, _dumps_compact)


def _dumps_compact(value: Any) -> str:
    return dumps(value) if isinstance(value, Mapping) else dumps_value(value)


def dumps_value(value: Any) -> str:
    """Return canonical compact JSON of any JSON value (sorted keys, raw UTF-8)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def newest_version(*values: Any) -> int:
    found = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(found) if found else VERSION


def merge_manifests(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two parsed manifests as a set union of entries by id (the git merge driver's rule).

    Commutative, associative and idempotent: for one id on both sides, or one top-level key
    with two values, the value whose canonical JSON sorts greater is kept; ``version`` is the
    higher one. Entries without a safe chunk id are dropped (no reader would accept them).
    """
    chunks_a = check_manifest(a, name=MANIFEST)["chunks"]
    chunks_b = check_manifest(b, name=MANIFEST)["chunks"]
    merged: dict[str, Any] = {}
    for key in sorted({*a, *b} - {"chunks", "version"}):
        if key in a and key in b:
            merged[key] = _greater({"v": a[key]}, {"v": b[key]})["v"]
        else:
            merged[key] = a[key] if key in a else b[key]
    by_id, _ = valid_entries([*chunks_a, *chunks_b])
    merged["version"] = newest_version(a.get("version"), b.get("version"))
    merged["chunks"] = [by_id[key] for key in sorted(by_id)]
    return merged
