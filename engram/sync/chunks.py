"""Sync chunks, the manifest and the per-clone sync state: the file layer of ``engram sync``.

README (sync): an export writes one immutable, content-addressed chunk
``.engram/chunks/<id>.jsonl.gz`` (ONE gzip'd JSON object: full memory versions, tombstones
included, and Go engram's view of them: ``engram.sync.chunkform``) and lists it in
``.engram/manifest.json`` (``{"version": 2, "chunks": [{"id", "created_by", "created_at",
"memories", "sessions", "prompts"}]}``, sorted by id). Chunks of older engram versions (gzip'd
JSON Lines of records, "legacy") are still read.
The ``chunks/`` folder is authoritative: a chunk file the manifest does not list is still a
chunk. ``state/sync.json`` is this clone's own record of its id, the chunks it applied and the
service's export cursor; it is never committed.

Chunks and manifests come from teammates and other tools, so everything read here is untrusted
(README): names are checked against ``^[0-9a-f]{8,64}$`` before any path is built from
them, symlinks and non-files in ``chunks/`` are refused, files are opened without following
links, compressed and decompressed sizes are capped while streaming (gzip bombs), and an engram
chunk whose content does not hash to its name is refused. A failure raises ``ChunkError`` naming
the file and what is wrong; reading never changes a file.

Gentleman-Programming's Go engram keeps the same layout (8-hex chunk ids) and a chunk holds ONE
JSON object ``{sessions, observations, prompts[, mutations]}``; ``read_chunk`` returns such an
object as-is for the service to convert, and engram's own object (``engram`` key) as records.

This module renders and checks these files; ``engram.store.files`` writes them (only the store
writes .engram/). It decides nothing about WHICH records to export or how they merge
(``engram.sync.exchange`` and ``engram.sync.merge`` do); it must not import the service or any
adapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import CorruptStore, InputTooLarge, InvalidInput
from engram.model import MAX_DOCUMENT_DEPTH, dumps, loads, new_id, parse_line
from engram.store import files as store_files
from engram.store.lock import ProcessLock
from engram.store.redact import Scrubber, default_scrubber
from engram.sync import chunkform, manifestform

if TYPE_CHECKING:
    from engram.formats.goexport import GoName

MANIFEST: Final = "manifest.json"
CHUNKS: Final = "chunks"
SUFFIX: Final = ".jsonl.gz"
VERSION: Final = 2
MAX_CHUNK_BYTES: Final = 64 * 1024 * 1024  # decompressed size limit of one chunk (gzip bombs)
MAX_COMPRESSED_BYTES: Final = 16 * 1024 * 1024
MAX_MANIFEST_BYTES: Final = 64 * 1024 * 1024
STATE: Final = "state"
SYNC_STATE: Final = "sync.json"
GO_KEYS: Final = ("sessions", "observations", "prompts", "mutations")
ID_CHARS: Final = 32  # hex characters of chunk_id

# Hex only: engram ids are 32 hex, Go engram's are 8 hex, a full sha256 is 64.
_CHUNK_ID_RE: Final = re.compile(r"^[0-9a-f]{8,64}$")
_READ_PIECE: Final = 256 * 1024
_LOCK_TIMEOUT: Final = 60.0


class ChunkError(CorruptStore):
    """A chunk file, the manifest or the sync state is unreadable, hostile or inconsistent."""

    code = "corrupt_chunk"
    hint = (
        "nothing was changed; run `engram doctor` to list every problem (a chunk another "
        "clone wrote can be exported again by running `engram sync` there)"
    )


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


def is_chunk_id(value: Any) -> bool:
    """Tell whether a value is a safe chunk id (lowercase hex, 8 to 64 characters)."""
    return isinstance(value, str) and _CHUNK_ID_RE.match(value) is not None


def chunk_id(data: bytes) -> str:
    """Return the content address of a chunk: sha256 of its UNCOMPRESSED bytes, 32 hex chars.

    The uncompressed bytes, not the gzip file, because compressed bytes depend on the zlib
    version and level of the machine that wrote them, while the canonical JSON of the same
    records is the same everywhere: two clones exporting the same versions name the chunk alike.
    128 bits keep ids collision-free across every clone without coordination, and a reader can
    verify that a teammate's chunk holds what its name promises.
    """
    return hashlib.sha256(data).hexdigest()[:ID_CHARS]


def chunk_path(engram_dir: Path, chunk: str) -> Path:
    """Return the path of a chunk file, refusing any id that could name something else."""
    if not is_chunk_id(chunk):
        raise ChunkError(
            f"{CHUNKS}/{chunk!r}: not a chunk id (expected 8 to 64 lowercase hex characters)",
            path=f"{CHUNKS}/{chunk!r}",
        )
    return engram_dir / CHUNKS / f"{chunk}{SUFFIX}"


def _rel(chunk: str) -> str:
    return f"{CHUNKS}/{chunk}{SUFFIX}"


# ── atomic files ──────────────────────────────────────────────────────────────


def _read_limited(path: Path, *, name: str, limit: int) -> bytes | None:
    """Read a regular file without following a symlink, refusing more than ``limit`` bytes.

    Returns None when the file does not exist.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if path.is_symlink():
            raise ChunkError(
                f"{name}: is a symbolic link; refused (it could point outside .engram/)",
                path=name,
            ) from exc
        raise ChunkError(f"{name}: cannot be read: {exc.strerror or exc}", path=name) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ChunkError(f"{name}: is not a regular file; refused", path=name)
        if info.st_size > limit:
            raise ChunkError(
                f"{name}: {info.st_size} bytes is over the limit of {limit} bytes; refused",
                path=name,
            )
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while we looked
        raise ChunkError(f"{name}: over the limit of {limit} bytes; refused", path=name)
    return data


def _gunzip(raw: bytes, *, name: str) -> bytes:
    """Decompress gzip data in pieces, refusing more than MAX_CHUNK_BYTES of output."""
    limit = MAX_CHUNK_BYTES
    if not raw:
        raise ChunkError(f"{name}: empty file, not gzip", path=name)
    out = bytearray()
    pending = memoryview(raw)
    while True:  # one pass per gzip member (a file may hold several)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while pending and not inflater.eof:
            piece = pending[:_READ_PIECE]
            pending = pending[len(piece) :]
            while piece:
                try:
                    # max_length bounds what one call may produce: the bomb never inflates.
                    out += inflater.decompress(piece, limit - len(out) + 1)
                except zlib.error as exc:
                    raise ChunkError(f"{name}: not valid gzip: {exc}", path=name) from exc
                if len(out) > limit:
                    raise ChunkError(
                        f"{name}: decompresses to more than the limit of {limit} bytes "
                        "(MAX_CHUNK_BYTES); refused as a possible gzip bomb",
                        path=name,
                    )
                piece = memoryview(inflater.unconsumed_tail)
                if inflater.eof:
                    break
        if not inflater.eof:
            raise ChunkError(f"{name}: gzip data is truncated", path=name)
        rest = inflater.unused_data + bytes(pending)
        if not rest:
            return bytes(out)
        pending = memoryview(rest)


# ── the manifest ──────────────────────────────────────────────────────────────


def _check_manifest(value: Any, *, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ChunkError(f"{name}: expected a JSON object, got {type(value).__name__}", path=name)
    try:
        _dumps_value(value)
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
        return loads(data)
    except UnicodeDecodeError as exc:
        raise ChunkError(f"{name}: invalid UTF-8 at byte {exc.start}", path=name) from exc
    except ValueError as exc:
        raise ChunkError(f"{name}: not JSON: {exc}", path=name) from exc


def parse_manifest(data: bytes, *, name: str = MANIFEST) -> dict[str, Any]:
    """Parse manifest bytes into a dict with a ``chunks`` list, raising ChunkError if malformed."""
    return _check_manifest(loads_manifest(data, name=name), name=name)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _entry_from(raw: Mapping[str, Any]) -> ChunkEntry:
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


def _valid_entries(
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


def _read_manifest_file(
    engram_dir: Path,
) -> tuple[dict[str, Any], manifestform.Layout | None, list[str]]:
    """Return the manifest file parsed, its layout (None: no file) and what was odd about it.

    A file with git conflict markers is read as the union of both sides (its layout: our
    side's), and the sentence says so; the next write replaces it with a clean file.
    """
    data = _read_limited(engram_dir / MANIFEST, name=MANIFEST, limit=MAX_MANIFEST_BYTES)
    if data is None:
        return {"version": VERSION, "chunks": []}, None, []
    conflict = manifestform.split_conflict(data)
    if conflict is None:
        parsed = loads_manifest(data)
        return _check_manifest(parsed, name=MANIFEST), manifestform.layout_of(data, parsed), []
    ours, theirs, sides = conflict
    parsed_ours = loads_manifest(ours, name=f"{MANIFEST} (ours)")
    parsed_theirs = loads_manifest(theirs, name=f"{MANIFEST} (theirs)")
    merged = merge_manifests(
        _check_manifest(parsed_ours, name=MANIFEST), _check_manifest(parsed_theirs, name=MANIFEST)
    )
    note = (
        f"{MANIFEST}: git conflict markers ({sides}); read as the union of both sides "
        f"({len(merged['chunks'])} chunks); the next `engram sync` writes it without them"
    )
    return merged, manifestform.layout_of(ours, parsed_ours), [note]


def _load_manifest(engram_dir: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
    manifest, _layout, noted = _read_manifest_file(engram_dir)
    by_id, problems = _valid_entries(manifest["chunks"])
    return manifest, by_id, noted + problems


def manifest_layout(engram_dir: Path) -> manifestform.Layout | None:
    """Return the layout of the manifest file (None: no file, or an unreadable one)."""
    try:
        return _read_manifest_file(engram_dir)[1]
    except ChunkError:
        return None


def load_manifest(
    engram_dir: Path,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
    """Return the parsed manifest, its safe entries by id, and sentences on the unsafe ones.

    No file: an empty manifest. A manifest that cannot be read at all raises ChunkError.
    """
    return _load_manifest(engram_dir)


def read_manifest(engram_dir: Path) -> list[ChunkEntry]:
    """Return the manifest's entries sorted by id (no file: []; unsafe entries left out)."""
    _, by_id, _ = _load_manifest(engram_dir)
    return [_entry_from(by_id[key]) for key in sorted(by_id)]


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
    return dumps(value) if isinstance(value, Mapping) else _dumps_value(value)


def _dumps_value(value: Any) -> str:
    """Return canonical compact JSON of any JSON value (sorted keys, raw UTF-8)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _version(*values: Any) -> int:
    found = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(found) if found else VERSION


def merge_manifests(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Merge two parsed manifests as a set union of entries by id (the git merge driver's rule).

    Commutative, associative and idempotent: for one id on both sides, or one top-level key
    with two values, the value whose canonical JSON sorts greater is kept; ``version`` is the
    higher one. Entries without a safe chunk id are dropped (no reader would accept them).
    """
    chunks_a = _check_manifest(a, name=MANIFEST)["chunks"]
    chunks_b = _check_manifest(b, name=MANIFEST)["chunks"]
    merged: dict[str, Any] = {}
    for key in sorted({*a, *b} - {"chunks", "version"}):
        if key in a and key in b:
            merged[key] = _greater({"v": a[key]}, {"v": b[key]})["v"]
        else:
            merged[key] = a[key] if key in a else b[key]
    by_id, _ = _valid_entries([*chunks_a, *chunks_b])
    merged["version"] = _version(a.get("version"), b.get("version"))
    merged["chunks"] = [by_id[key] for key in sorted(by_id)]
    return merged


# ── chunk files ───────────────────────────────────────────────────────────────


def _chunks_dir(engram_dir: Path) -> Path:
    folder = engram_dir / CHUNKS
    if folder.is_symlink():
        raise ChunkError(
            f"{CHUNKS}/: is a symbolic link; refused (it could point outside .engram/)",
            path=CHUNKS,
            hint="replace .engram/chunks with a real folder",
        )
    return folder


def manifest_lock(engram_dir: Path) -> ProcessLock:
    """Return the lock every writer of ``chunks/`` and ``manifest.json`` holds."""
    return ProcessLock(
        engram_dir / STATE / "chunks.lock", timeout=_LOCK_TIMEOUT, what=str(engram_dir / MANIFEST)
    )


def write_chunk(
    engram_dir: Path,
    records: Sequence[Mapping[str, Any]],
    *,
    created_by: str,
    created_at: str,
    scrubber: Scrubber | None = None,
    go_name: GoName | None = None,
    go_has: Collection[str] | None = None,
) -> ChunkEntry | None:
    """Write records as a new content-addressed chunk and list it in the manifest.

    Records (and ``created_by``) are scrubbed of secrets with ``scrubber`` (default: the
    built-in rules) on the way in, as the store scrubs memories.jsonl. ``go_name``: Go's name
    for this project, which Go's view of engram's own memories carries; ``go_has``: the ids
    earlier chunks carried (their changes go to Go as its mutation journal).

    Records are written as ``engram.sync.chunkform`` renders them (ONE JSON object Go engram
    reads too, canonical), gzip'd with mtime 0 (the same records give the same bytes). Two
    versions of one id are both kept (the merge function reconciles them on import); identical
    records are written once. Nothing to write: None. A chunk id that exists already is not
    rewritten, and a manifest that lists it is not touched.
    """
    if not records:
        return None
    scrubber = scrubber if scrubber is not None else default_scrubber()
    rendered = chunkform.render(records, scrubber, go_name, go_has)
    data = rendered.data
    created_by = scrubber.text(created_by)[0]
    if len(data) > MAX_CHUNK_BYTES:
        raise InvalidInput(
            f"a chunk of {len(data)} bytes is over the limit of {MAX_CHUNK_BYTES} bytes that "
            "readers accept; export the records in several chunks"
        )
    ident = chunk_id(data)
    folder = _chunks_dir(engram_dir)
    path = folder / f"{ident}{SUFFIX}"
    with manifest_lock(engram_dir).hold():
        # Read the manifest first: a malformed one stops the export before any file is written.
        manifest, layout, _ = _read_manifest_file(engram_dir)
        by_id, _ = _valid_entries(manifest["chunks"])
        try:
            info = path.lstat()
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise ChunkError(
                f"{_rel(ident)}: exists but is not a regular file; refused",
                path=_rel(ident),
                hint=f"remove .engram/{_rel(ident)} and run `engram sync` again",
            )
        if info is None:
            packed = zlib.compress(data, level=9, wbits=16 + zlib.MAX_WBITS)  # gzip, mtime 0
            if len(packed) > MAX_COMPRESSED_BYTES:
                raise InvalidInput(
                    f"a chunk of {len(packed)} compressed bytes is over the limit of "
                    f"{MAX_COMPRESSED_BYTES} bytes; export the records in several chunks"
                )
            store_files.write_chunk(engram_dir, path.name, packed)
        if ident in by_id:
            return _entry_from(by_id[ident])
        entry = ChunkEntry(
            ident,
            created_by,
            created_at,
            rendered.memories,
            sessions=rendered.sessions,
            prompts=rendered.prompts,
        )
        by_id[ident] = entry.to_dict()
        # Unsafe entries are dropped on rewrite: no reader would accept them anyway. The
        # version a file has stays (a new file: VERSION), so a sync adds lines and changes none.
        version = manifest.get("version") if layout is not None else None
        updated = {
            **manifest,
            "version": _version(version, 1 if layout is not None else VERSION),
            "chunks": [by_id[key] for key in sorted(by_id)],
        }
        store_files.write_manifest(engram_dir, manifest_update(updated, layout))
        return entry


def list_chunks(engram_dir: Path) -> tuple[list[ChunkEntry], list[str]]:
    """Return every chunk this folder holds, sorted by id, and the problems found on the way.

    The manifest's entries whose file exists, plus chunk files the manifest does not list
    (their entry has ``created_by`` and ``created_at`` "" and ``memories`` 0: unknown until
    read). Problems are sentences naming the file: a malformed manifest, unsafe entries, listed
    chunks without a file, symlinks, non-files and foreign names in ``chunks/``. Hidden files
    (temp files of an interrupted write) are skipped silently.
    """
    problems: list[str] = []
    try:
        _, by_id, found = _load_manifest(engram_dir)
    except ChunkError as exc:
        by_id, found = {}, [exc.message]
    problems += found
    files: set[str] = set()
    refused: set[str] = set()
    folder = engram_dir / CHUNKS
    if folder.is_symlink():
        problems.append(f"{CHUNKS}/: is a symbolic link; refused (it could point outside .engram/)")
    elif folder.is_dir():
        for item in sorted(os.scandir(folder), key=lambda e: e.name):
            name = item.name
            if name.startswith("."):
                continue
            ident = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
            if not is_chunk_id(ident):
                problems.append(f"{CHUNKS}/{name}: not a chunk file name (<hex id>{SUFFIX})")
            elif item.is_symlink():
                problems.append(
                    f"{CHUNKS}/{name}: is a symbolic link; refused (it could point outside "
                    ".engram/)"
                )
                refused.add(ident)
            elif not item.is_file(follow_symlinks=False):
                problems.append(f"{CHUNKS}/{name}: is not a regular file; refused")
                refused.add(ident)
            else:
                files.add(ident)
    entries = []
    for ident in sorted(set(by_id) | files):
        if ident in files:
            raw = by_id.get(ident)
            entries.append(_entry_from(raw) if raw else ChunkEntry(ident, "", "", 0))
        elif ident not in refused:
            problems.append(f"{MANIFEST}: lists chunk {ident} but {_rel(ident)} is missing")
    return entries, problems


def _document(data: bytes, *, name: str, ident: str = "") -> dict[str, Any] | None:
    """Return the ONE JSON object a chunk holds (engram's or Go engram's), or None for JSONL.

    None: older engram JSON Lines (several lines, or one record: it has an ``id``).
    """
    if data[:4096].lstrip()[:1] != b"{":
        return None
    try:
        value = loads(data, what=name, max_depth=MAX_DOCUMENT_DEPTH)
    except InputTooLarge as exc:
        if b"\n" in data.strip() or chunk_id(data) == ident:
            return None  # engram's JSON Lines: each line is checked on its own later
        raise ChunkError(exc.message, path=name) from exc
    except ValueError:  # several lines (JSONL) or not JSON: not one object
        return None
    if not isinstance(value, dict) or "id" in value:
        return None
    if chunkform.is_engram_object(value):
        return value
    if not any(k in value for k in GO_KEYS):
        return None
    for key in GO_KEYS:
        if value.get(key) is not None and not isinstance(value[key], list):
            raise ChunkError(
                f'{name}: "{key}" must be a list or null, got {type(value[key]).__name__}',
                path=name,
            )
    return value


def chunk_form(engram_dir: Path, chunk: str) -> str:
    """Return what a chunk file holds: ``engram`` (ONE object), ``legacy`` (JSONL) or ``go``.

    Usually told from its first bytes, without inflating the rest: the canonical object starts
    with ``{"engram":{``, Go engram's with ``{"sessions":``. Raises ChunkError when the file
    cannot be read; says nothing about whether its content is sound (``read_chunk`` does).
    """
    name = _rel(chunk) if is_chunk_id(chunk) else f"{CHUNKS}/{chunk!r}"
    path = chunk_path(engram_dir, chunk)
    _chunks_dir(engram_dir)
    raw = _read_limited(path, name=name, limit=MAX_COMPRESSED_BYTES)
    if raw is None:
        raise ChunkError(f"{name}: no such chunk file", path=name)
    try:
        head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, len(chunkform.PREFIX))
    except zlib.error as exc:
        raise ChunkError(f"{name}: not valid gzip: {exc}", path=name) from exc
    if head == chunkform.PREFIX:
        return "engram"
    if head.startswith(chunkform.GO_PREFIX):
        return "go"
    value = _document(_gunzip(raw, name=name), name=name, ident=chunk)
    if value is None:
        return "legacy"
    return "engram" if chunkform.is_engram_object(value) else "go"


def _engram_records(
    value: Mapping[str, Any],
    *,
    name: str,
    problems: list[str] | None,
    lines: list[int] | None,
) -> list[dict[str, Any]]:
    """Check and return the records of engram's chunk object (numbered from 1 like lines)."""
    try:
        items = chunkform.records_of(value, name=name)
    except InvalidInput as exc:
        raise ChunkError(exc.message, path=name) from exc
    records = []
    for number, item in enumerate(items, 1):
        try:
            records.append(parse_line(chunkform.record_line(item), path=name, lineno=number))
            if lines is not None:
                lines.append(number)
        except CorruptStore as exc:
            if problems is None:
                raise ChunkError(exc.message, path=name, line=number) from exc
            problems.append(f"{exc.message}; record skipped")
    return records


def _check_hash(data: bytes, chunk: str, *, name: str, why: str) -> None:
    actual = chunk_id(data)
    if actual != chunk:
        raise ChunkError(
            f"{name}: content hashes to {actual}, not to its name; refused ({why})", path=name
        )


def read_chunk(
    engram_dir: Path,
    chunk: str,
    *,
    problems: list[str] | None = None,
    lines: list[int] | None = None,
) -> list[dict[str, Any]] | dict[str, Any]:
    """Read and verify one chunk by id: its records, or a Go engram chunk's object as-is.

    engram's records come from its chunk object's ``engram.records`` (Go's view beside them is
    not read) or from an older engram chunk's JSON Lines.

    The id must be a chunk id, the file a regular file (never followed through a symlink) in
    ``chunks/`` (itself no symlink); the compressed size is capped by MAX_COMPRESSED_BYTES and
    the decompressed size by MAX_CHUNK_BYTES while inflating. An engram chunk's content must
    hash to its id and every record must be valid within the JSON limits of ``engram.model``
    (errors name file and line: the record's number in the object). With ``problems`` given, a
    bad line is
    appended there as a sentence naming file and line and skipped, so one hostile record does
    not keep the rest of a chunk from applying; a chunk that is unreadable as a whole still
    raises. ``lines``, when given, receives the line number of each record returned (so that
    later messages name the right line). Reading changes nothing.
    """
    name = _rel(chunk)
    data = inflate_chunk(engram_dir, chunk)
    value = _document(data, name=name, ident=chunk)
    if value is not None and not chunkform.is_engram_object(value):
        return value  # Go engram's: its own ids, not our hash
    _check_hash(data, chunk, name=name, why="altered or misnamed")
    if value is not None:
        return _engram_records(value, name=name, problems=problems, lines=lines)
    return parse_chunk_lines(data, name=name, problems=problems, lines=lines)


def parse_chunk_data(data: bytes, *, name: str) -> list[dict[str, Any]]:
    """Return the records of engram chunk bytes (either form), verifying no hash; or raise."""
    value = _document(data, name=name)
    if value is None:
        return parse_chunk_lines(data, name=name)
    if not chunkform.is_engram_object(value):
        raise ChunkError(f"{name}: a Go engram chunk, not engram's records", path=name)
    return _engram_records(value, name=name, problems=None, lines=None)


def inflate_chunk(engram_dir: Path, chunk: str) -> bytes:
    """Return the decompressed bytes of one chunk file, within the size limits; verify nothing.

    The checks of ``read_chunk`` on the file itself: a safe id, a regular file not reached
    through a symlink, MAX_COMPRESSED_BYTES and MAX_CHUNK_BYTES (gzip bombs).
    """
    name = _rel(chunk) if is_chunk_id(chunk) else f"{CHUNKS}/{chunk!r}"
    path = chunk_path(engram_dir, chunk)
    _chunks_dir(engram_dir)
    raw = _read_limited(path, name=name, limit=MAX_COMPRESSED_BYTES)
    if raw is None:
        raise ChunkError(f"{name}: no such chunk file", path=name)
    return _gunzip(raw, name=name)


def parse_chunk_lines(
    data: bytes,
    *,
    name: str,
    problems: list[str] | None = None,
    lines: list[int] | None = None,
) -> list[dict[str, Any]]:
    """Parse an engram chunk's JSON Lines (see ``read_chunk`` for ``problems`` and ``lines``)."""
    records = []
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(parse_line(line, path=name, lineno=lineno))
            if lines is not None:
                lines.append(lineno)
        except CorruptStore as exc:
            if problems is None:
                raise ChunkError(exc.message, path=name, line=lineno) from exc
            problems.append(f"{exc.message}; record skipped")
    return records


# ── files fetched from a remote ───────────────────────────────────────────────


def verify_chunk_file(chunk: str, raw: bytes, *, name: str) -> None:
    """Check a chunk file's bytes before they are stored or pushed, raising ChunkError if bad.

    Within the size limits, the gzip must be whole, and an engram chunk's content must hash to
    its name (a Go engram chunk, ONE JSON object with its own ids, only has to be that object).
    """
    if not is_chunk_id(chunk):
        raise ChunkError(f"{name}: not a chunk id (8 to 64 lowercase hex characters)", path=name)
    if len(raw) > MAX_COMPRESSED_BYTES:
        raise ChunkError(
            f"{name}: {len(raw)} bytes is over the limit of {MAX_COMPRESSED_BYTES} bytes; refused",
            path=name,
        )
    data = _gunzip(raw, name=name)
    value = _document(data, name=name)
    if value is not None and not chunkform.is_engram_object(value):
        return
    _check_hash(data, chunk, name=name, why="altered or torn")


def store_chunk(engram_dir: Path, chunk: str, raw: bytes, *, name: str) -> bool:
    """Verify a chunk file fetched from elsewhere and write it atomically; False if it exists.

    ``name`` says where the bytes came from, for the error a bad chunk raises.
    """
    verify_chunk_file(chunk, raw, name=name)
    path = chunk_path(engram_dir, chunk)
    _chunks_dir(engram_dir)
    with manifest_lock(engram_dir).hold():
        try:
            path.lstat()
            return False  # content-addressed: the file there is the same chunk (or reported)
        except FileNotFoundError:
            pass  # not here yet: written below
        store_files.write_chunk(engram_dir, path.name, raw)
    return True


def merge_manifest_file(engram_dir: Path, theirs: bytes | None, *, name: str) -> list[str]:
    """Merge a fetched manifest into ``manifest.json`` atomically; return what was repaired.

    A local manifest that does not parse (torn by a crash of an older engram, or a bad merge)
    is never kept, merged or pushed: it is rebuilt from the ``chunks/`` files (authoritative)
    and the fetched manifest, and the returned sentences say so. A fetched manifest that does
    not parse raises ChunkError before anything is written.
    """
    other = parse_manifest(theirs, name=name) if theirs is not None else None
    repaired: list[str] = []
    with manifest_lock(engram_dir).hold():
        layout: manifestform.Layout | None = None
        try:
            ours, layout, noted = _read_manifest_file(engram_dir)
            repaired += [note for note in noted if "conflict markers" in note]
        except ChunkError as exc:
            entries, _ = list_chunks(engram_dir)  # its manifest is unreadable: files only
            ours = {"version": VERSION, "chunks": [entry.to_dict() for entry in entries]}
            repaired.append(f"{exc.message}; rebuilt from {CHUNKS}/ and the remote's manifest")
        merged = merge_manifests(ours, other) if other is not None else ours
        if repaired or merged != ours:
            store_files.write_manifest(engram_dir, manifest_update(merged, layout))
    return repaired


def settle_manifest(engram_dir: Path) -> list[str]:
    """Rewrite a manifest holding git conflict markers as the union of its sides; say so.

    Go engram's sync stops on such a file; nothing else is written (another defect is left to
    ``doctor``).
    """
    with manifest_lock(engram_dir).hold():
        try:
            manifest, layout, noted = _read_manifest_file(engram_dir)
        except ChunkError:
            return []
        if not any("conflict markers" in note for note in noted):
            return []
        store_files.write_manifest(engram_dir, manifest_update(manifest, layout))
    return [
        f"{MANIFEST}: written without its git conflict markers, as the union of both sides "
        f"({len(manifest['chunks'])} chunks)"
    ]


def drop_chunk(engram_dir: Path, chunk: str) -> None:
    """Remove a chunk file and its manifest entry, under the chunk writers' lock."""
    path = chunk_path(engram_dir, chunk)
    with manifest_lock(engram_dir).hold():
        manifest, layout, _ = _read_manifest_file(engram_dir)
        by_id, _ = _valid_entries(manifest["chunks"])
        if chunk in by_id:
            del by_id[chunk]
            updated = {**manifest, "chunks": [by_id[key] for key in sorted(by_id)]}
            store_files.write_manifest(engram_dir, manifest_update(updated, layout))
        store_files.remove_chunk(engram_dir, path.name)


# ── per-clone sync state ──────────────────────────────────────────────────────


class SyncState:
    """Per-clone sync state in ``state/sync.json``: clone id, applied chunks, service values.

    The file is ``{"version": 1, "clone_id", "applied": [ids], "values": {key: value}}``,
    written atomically under ``state/sync.lock``. ``save`` re-reads the file first and merges:
    applied ids are a union (a chunk applied by another process stays applied) and values this
    instance set win. A file that does not parse or has the wrong shape is set aside as
    ``sync.json.corrupt`` (never deleted), the state starts afresh (a new clone id; applying a
    chunk again changes nothing) and ``problems`` says so.
    """

    def __init__(self, engram_dir: Path) -> None:
        self.path = engram_dir / STATE / SYNC_STATE
        self.problems: list[str] = []
        self._lock = ProcessLock(
            engram_dir / STATE / "sync.lock", timeout=_LOCK_TIMEOUT, what=str(self.path)
        )
        self._clone_id = ""
        self._applied: set[str] = set()
        self._values: dict[str, Any] = {}
        self._dirty: set[str] = set()
        with self._lock.hold():
            self._load(self._read())

    def _read(self) -> dict[str, Any]:
        name = f"{STATE}/{SYNC_STATE}"
        try:
            data = _read_limited(self.path, name=name, limit=MAX_MANIFEST_BYTES)
            if data is None:
                return {}
            value = loads(data)
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object, got {type(value).__name__}")
            clone, applied, values = (
                value.get("clone_id"),
                value.get("applied"),
                value.get("values"),
            )
            if not isinstance(clone, str) or not clone:
                raise ValueError("no clone_id")
            if not isinstance(applied, list) or not all(isinstance(i, str) for i in applied):
                raise ValueError('"applied" is not a list of chunk ids')
            if not isinstance(values, dict):
                raise ValueError('"values" is not an object')
            return value
        except (ChunkError, ValueError) as exc:
            aside = SYNC_STATE + ".corrupt"
            store_files.set_aside_state(self.path.parent, SYNC_STATE, aside)
            reason = exc.message if isinstance(exc, ChunkError) else str(exc)
            self.problems.append(
                f"{name} was unreadable ({reason}); set aside as {aside} and started afresh"
            )
            return {}

    def _load(self, value: Mapping[str, Any]) -> None:
        self._clone_id = str(value.get("clone_id") or self._clone_id)
        self._applied |= set(value.get("applied") or ())
        ours = {key: self._values[key] for key in self._dirty}
        self._values = {**(value.get("values") or {}), **ours}

    def _write(self) -> None:
        body = {
            "version": 1,
            "clone_id": self._clone_id,
            "applied": sorted(self._applied),
            "values": self._values,
        }
        text = json.dumps(body, sort_keys=True, indent=1, ensure_ascii=False)
        store_files.write_state(self.path.parent, SYNC_STATE, (text + "\n").encode("utf-8"))

    @property
    def clone_id(self) -> str:
        """This clone's random id, made and saved on first use."""
        if not self._clone_id:
            with self._lock.hold():
                self._load(self._read())
                if not self._clone_id:
                    self._clone_id = new_id()
                    self._write()
        return self._clone_id

    @property
    def applied(self) -> frozenset[str]:
        """The ids of the chunks this clone has applied."""
        return frozenset(self._applied)

    def mark_applied(self, ids: Iterable[str]) -> None:
        """Record chunks as applied (kept in memory until ``save``)."""
        self._applied.update(str(i) for i in ids)

    def get(self, key: str) -> Any:
        """Return a value the service stored (None when unset)."""
        return self._values.get(key)

    def set(self, key: str, value: Any) -> None:
        """Store a small JSON value (kept in memory until ``save``)."""
        try:
            _dumps_value(value)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"sync state value for {key!r} is not JSON: {exc}") from exc
        self._values[str(key)] = value
        self._dirty.add(str(key))

    def save(self) -> None:
        """Write the state atomically, merged with what other processes saved meanwhile."""
        with self._lock.hold():
            self._load(self._read())
            if not self._clone_id:
                self._clone_id = new_id()
            self._write()
            self._dirty.clear()
