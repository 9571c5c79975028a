"""The git merge driver of the canonical files: ``engram merge-driver %O %A %B %P``.

README (sync): git merges ``.engram/memories.jsonl`` and ``.engram/manifest.json`` through this
driver, which calls the one merge function (``engram.sync.merge.merge3``); the manifest merges
as a set union of its chunks. This module owns ``merge_driver``, the three-way merge of one
file's bytes (``merge_bytes``: memories line by line, the manifest by chunks) and the reading
and atomic replacing of the files git hands it. Setting git up is ``gitsetup``, ``resolve`` is
``gitresolve``, a memory's history ``gitlog``.

Rules where git leaves a choice:

- The driver writes nothing and exits 1 when a side holds a line it cannot read (conflict
  markers included): git then reports the conflict and ``engram resolve`` takes over.
- The manifest ignores git's base: chunks are immutable and the ``chunks/`` folder is
  authoritative, so a chunk listed on either side stays listed. The same id twice keeps the
  entry whose canonical JSON sorts greater; other top-level keys are kept (ours over theirs),
  ``version`` is the larger of the sides' (2 when absent).

What it must not do: run ``git`` at all, or write ``memories.jsonl`` or ``manifest.json`` in a
work tree (the store does). It writes only git's files: the merge driver's ``%A`` (a temp file
git names) and, for ``gitsetup``, ``.gitattributes``.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any, Final

import orjson

from engram.errors import CorruptStore, EngramError
from engram.model import Record, canonical_line, has_float, parse_line
from engram.store.atomic import atomic_write
from engram.store.jsonl import scrub_lines
from engram.store.redact import Scrubber, default_scrubber
from engram.sync.merge import conflicted, merge3, merge3_record, taken

__all__ = [
    "MANIFEST_PATH",
    "MARKERS",
    "MEMORIES_PATH",
    "is_manifest",
    "merge_bytes",
    "merge_driver",
    "parse_memories",
    "read_file",
    "write_file",
]

MEMORIES_PATH: Final = ".engram/memories.jsonl"
MANIFEST_PATH: Final = ".engram/manifest.json"
MANIFEST_VERSION: Final = 2
MARKERS: Final = (b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>")


def write_file(path: Path, data: bytes) -> None:
    """Replace a file of git's (``%A``, ``.gitattributes``) atomically, keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, mode=None)


def read_file(path: Path) -> bytes:
    """Return a file's bytes, or nothing when it is missing (a deleted side)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def is_manifest(pathname: str) -> bool:
    """Tell whether git names the manifest (else it is memories.jsonl)."""
    return pathname.replace("\\", "/").endswith("manifest.json")


def parse_memories(data: bytes, name: str) -> list[Record]:
    """Parse every line of a memories.jsonl version; CorruptStore names the first bad line."""
    records = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.strip():
            records.append(parse_line(raw, path=name, lineno=lineno))
    return records


def _parse_manifest(data: bytes, name: str) -> dict[str, Any]:
    """Parse one side's manifest (empty: no chunks); CorruptStore says what is wrong.

    Conflict markers are told apart here; the format itself is engram.sync.chunks's.
    """
    from engram.sync.manifest import VERSION, parse_manifest

    for lineno, raw in enumerate(data.splitlines(), start=1):
        if raw.startswith(MARKERS):
            raise CorruptStore(
                f"{name}:{lineno}: git conflict marker {raw[:7].decode('ascii', 'replace')!r}",
                path=name,
                line=lineno,
            )
    if not data.strip():
        return {"version": VERSION, "chunks": []}
    return parse_manifest(data, name=name)


def _memories_bytes(records: list[Record]) -> bytes:
    return b"".join(canonical_line(record) for record in sorted(records, key=lambda r: r["id"]))


def merge_bytes(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    """Merge three versions of one file; return (bytes, records, conflicted records)."""
    sides = (("base", base), ("ours", ours), ("theirs", theirs))
    if is_manifest(name):
        from engram.sync.manifest import manifest_update, merge_manifests
        from engram.sync.manifestform import layout_of

        manifests = [_parse_manifest(data, f"{name} ({side})") for side, data in sides]
        merged = merge_manifests(manifests[1], manifests[2])
        # Our side's layout and order: the merge adds theirs and changes nothing of ours.
        layout = layout_of(ours, manifests[1]) if ours.strip() else None
        return manifest_update(merged, layout), len(merged["chunks"]), 0
    return _merge_memories(base, ours, theirs, name)


def _merge_memories_full(
    base: bytes, ours: bytes, theirs: bytes, name: str
) -> tuple[bytes, int, int]:
    """The reference merge of memories.jsonl: parse every line, ``merge3``, serialise all.

    ``_merge_memories`` gives the same bytes faster; this is its oracle in the tests.
    """
    sides = (("base", base), ("ours", ours), ("theirs", theirs))
    parsed = [parse_memories(data, f"{name} ({side})") for side, data in sides]
    records = merge3(*parsed)
    return _memories_bytes(records), len(records), sum(1 for r in records if conflicted(r))


class _Side:
    """One version of memories.jsonl split into lines by id, each distinct line parsed once."""

    __slots__ = ("by_id", "repeated")

    def __init__(self, data: bytes, name: str, parsed: dict[bytes, Record]) -> None:
        self.by_id: dict[str, bytes] = {}  # id -> its (first) raw line, newline stripped
        self.repeated: dict[str, list[bytes]] = {}  # id -> every line of an id seen twice
        by_id, repeated = self.by_id, self.repeated
        for lineno, raw in enumerate(data.splitlines(), start=1):
            record = parsed.get(raw)
            if record is None:
                if not raw.strip():
                    continue
                record = parse_line(raw, path=name, lineno=lineno)
                parsed[raw] = record
            rid = record["id"]
            if rid in by_id:
                repeated.setdefault(rid, [by_id[rid]]).append(raw)
            else:
                by_id[rid] = raw


def _line_of(raw: bytes, record: Record) -> bytes:
    """Return ``canonical_line(record)`` without its newline: ``raw`` itself when canonical.

    orjson with sorted keys writes what ``engram.model.dumps`` writes for every value a line
    parses to except floats (formatted differently) and integers past 64 bits (refused), so
    equal bytes prove the line canonical; anything else is serialised by ``canonical_line``.
    """
    try:
        same = orjson.dumps(record, option=orjson.OPT_SORT_KEYS) == raw
    except (TypeError, ValueError):
        same = False
    if same and not has_float(record):
        return raw
    return canonical_line(record)[:-1]


def _merge_memories(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    """Three-way merge of memories.jsonl: the bytes of ``_merge_memories_full``, faster.

    Each distinct line is parsed once, whichever sides hold it (every line is still read, so
    a bad line fails the merge with the same message). Equal lines are equal records, so an id
    whose line is the same on both sides, or changed on one side only, takes that side's line
    as it is (serialised again only when it is not canonical); only ids whose lines differ on
    both sides from the base, that one side added, or that a side holds twice, go through
    ``merge3_record``.
    """
    enabled = gc.isenabled()
    gc.disable()  # the parsed lines stay alive to the end: collecting would rescan them in vain
    try:
        return _merge_lines(base, ours, theirs, name)
    finally:
        if enabled:
            gc.enable()


def _merge_lines(base: bytes, ours: bytes, theirs: bytes, name: str) -> tuple[bytes, int, int]:
    parsed: dict[bytes, Record] = {}
    o, a, b = (
        _Side(data, f"{name} ({side})", parsed)
        for side, data in (("base", base), ("ours", ours), ("theirs", theirs))
    )
    out: list[tuple[str, bytes]] = []
    conflicts = 0
    for rid in a.by_id.keys() | b.by_id.keys():
        if rid in o.repeated or rid in a.repeated or rid in b.repeated:
            merged = merge3(*(_versions(side, rid, parsed) for side in (o, a, b)))
            if merged:
                out.append((rid, canonical_line(merged[0])[:-1]))
                conflicts += conflicted(merged[0])
            continue
        x, y, z = a.by_id.get(rid), b.by_id.get(rid), o.by_id.get(rid)
        if x == y:
            pick = x
        elif z is not None and x == z:
            pick = y
        elif z is not None and y == z:
            pick = x
        else:
            record = merge3_record(*(None if raw is None else parsed[raw] for raw in (z, x, y)))
            if record is not None:
                out.append((rid, canonical_line(record)[:-1]))
                conflicts += conflicted(record)
            continue
        if pick is not None:
            record = parsed[pick]
            if record.get("conflicts"):  # taken as merge3 takes a side: conflicts settled
                record = taken(record)
                out.append((rid, canonical_line(record)[:-1]))
            else:
                out.append((rid, _line_of(pick, record)))
            conflicts += conflicted(record)
    out.sort()
    data = b"\n".join([line for _, line in out]) + b"\n" if out else b""
    return data, len(out), conflicts


def _versions(side: _Side, rid: str, parsed: dict[bytes, Record]) -> list[Record]:
    lines = side.repeated.get(rid) or ([side.by_id[rid]] if rid in side.by_id else [])
    return [parsed[raw] for raw in lines]


def merge_driver(
    base: Path, ours: Path, theirs: Path, pathname: str = "", *, scrubber: Scrubber | None = None
) -> int:
    """Merge git's %O %A %B into %A; return 0 when clean, 1 (and leave %A alone) when not.

    Every memory line the result holds that is not ours byte for byte is scrubbed of secrets,
    as the store scrubs every write: a teammate's line with a key in it is merged redacted.
    """
    name = pathname or MEMORIES_PATH
    try:
        mine = read_file(Path(ours))
        data, _, _ = merge_bytes(read_file(Path(base)), mine, read_file(Path(theirs)), name)
        if not is_manifest(name):
            data = scrub_lines(data, scrubber or default_scrubber(), known=set(mine.splitlines()))
        write_file(Path(ours), data)
    except EngramError as exc:
        sys.stderr.write(
            f"engram merge-driver: cannot merge {name}: {exc.message}\n"
            "  git leaves the conflict in the file; run `engram resolve` "
            "(or `engram doctor --fix`) after fixing it\n"
        )
        return 1
    except OSError as exc:
        sys.stderr.write(f"engram merge-driver: cannot merge {name}: {exc}\n")
        return 1
    return 0
