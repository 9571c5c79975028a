"""Sync chunks: written, listed, read and verified, and the manifest kept in step with them.

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

The manifest itself is ``engram.sync.manifest``, the sync state ``engram.sync.syncstate``, and
the bounded, symlink-refusing reads of these files ``engram.sync.syncfiles``. This module renders
and checks chunk files; ``engram.store.files`` writes them (only the store
writes .engram/). It decides nothing about WHICH records to export or how they merge
(``engram.sync.exchange`` and ``engram.sync.merge`` do); it must not import the service or any
adapter.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import CorruptStore, InputTooLarge, InvalidInput
from engram.model import MAX_DOCUMENT_DEPTH, loads, parse_line
from engram.store import files as store_files
from engram.store.lock import ProcessLock
from engram.store.redact import Scrubber, default_scrubber
from engram.sync import chunkform, manifestform
from engram.sync.manifest import (
    VERSION,
    ChunkEntry,
    entry_from,
    load_manifest,
    manifest_update,
    merge_manifests,
    newest_version,
    parse_manifest,
    read_manifest_file,
    valid_entries,
)
from engram.sync.syncfiles import (
    CHUNKS,
    LOCK_TIMEOUT,
    MANIFEST,
    STATE,
    SUFFIX,
    ChunkError,
    inflate,
    is_chunk_id,
    read_limited,
)

if TYPE_CHECKING:
    from engram.formats.goexport import GoName

MAX_CHUNK_BYTES: Final = 64 * 1024 * 1024  # decompressed size limit of one chunk (gzip bombs)
MAX_COMPRESSED_BYTES: Final = 16 * 1024 * 1024
GO_KEYS: Final = ("sessions", "observations", "prompts", "mutations")
ID_CHARS: Final = 32  # hex characters of chunk_id


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
        engram_dir / STATE / "chunks.lock", timeout=LOCK_TIMEOUT, what=str(engram_dir / MANIFEST)
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
        manifest, layout, _ = read_manifest_file(engram_dir)
        by_id, _ = valid_entries(manifest["chunks"])
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
            return entry_from(by_id[ident])
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
            "version": newest_version(version, 1 if layout is not None else VERSION),
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
        _, by_id, found = load_manifest(engram_dir)
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
            entries.append(entry_from(raw) if raw else ChunkEntry(ident, "", "", 0))
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
    raw = read_limited(path, name=name, limit=MAX_COMPRESSED_BYTES)
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
    value = _document(inflate(raw, name=name, limit=MAX_CHUNK_BYTES), name=name, ident=chunk)
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
    raw = read_limited(path, name=name, limit=MAX_COMPRESSED_BYTES)
    if raw is None:
        raise ChunkError(f"{name}: no such chunk file", path=name)
    return inflate(raw, name=name, limit=MAX_CHUNK_BYTES)


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
    data = inflate(raw, name=name, limit=MAX_CHUNK_BYTES)
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
            ours, layout, noted = read_manifest_file(engram_dir)
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
            manifest, layout, noted = read_manifest_file(engram_dir)
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
        manifest, layout, _ = read_manifest_file(engram_dir)
        by_id, _ = valid_entries(manifest["chunks"])
        if chunk in by_id:
            del by_id[chunk]
            updated = {**manifest, "chunks": [by_id[key] for key in sorted(by_id)]}
            store_files.write_manifest(engram_dir, manifest_update(updated, layout))
        store_files.remove_chunk(engram_dir, path.name)


# ── per-clone sync state ──────────────────────────────────────────────────────
