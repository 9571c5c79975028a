"""The health of ``chunks/`` and ``manifest.json``: what ``engram doctor`` checks and repairs.

``audit_chunks`` reads every chunk file as an import would (safe name, regular file, size and
decompression limits, content hash against the name, each record within the JSON limits) and
compares the folder with the manifest: a manifest that does not parse, entries that are not
safe, chunks the manifest does not list, entries whose file is missing. It changes nothing.

``repair_chunks`` fixes in place what can be fixed: the ``chunks/`` folder is authoritative
(README (sync)), so the manifest is rewritten from it (known entries kept, unlisted chunks
listed, entries of missing files dropped); a chunk whose content parses but hashes to another
name is re-addressed under its true name; a chunk that cannot be read at all is moved to the
committed ``quarantine/chunks/`` (``engram.store.quarantine``), never deleted. Every file is
written by the store (``engram.store.files``).

``rewrite_legacy`` writes each chunk of an older engram (gzip'd JSON Lines, which Go engram's
sync cannot parse and stops on) again as ONE JSON object (``engram.sync.chunkform``): a new
chunk with the same records (its id is its content's), its manifest entry in place of the old
one, the old file removed (moved to ``quarantine/chunks/`` when it had records no reader
accepts, so nothing is lost). Only engram's own chunks: a Go engram chunk is never rewritten.
``engram sync`` runs it after its import, ``doctor`` reports such chunks and ``--fix`` runs it.

``chunk_secrets`` finds the chunks that hold what the store's scrubber would redact; with
``fix`` each is written again scrubbed (a chunk is named by its content: a new chunk, the old
file and its manifest entry dropped). ``engram doctor`` reports them; ``engram sync --remote``
scrubs the chunks it fetched (``scrub_chunks``), so a teammate's secret is neither kept nor
pushed again. A Go engram chunk is Go engram's to write: reported, never rewritten. A chunk with a
few bad records stays: sync skips those records and applies the rest. This module decides
nothing about merging; it must not import the service or any adapter.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engram.errors import EngramError, InvalidInput
from engram.formats.goknown import GO_SOURCE
from engram.model import format_time, now
from engram.store import files as store_files
from engram.store.quarantine import move_aside
from engram.store.redact import Scrubber, find_secrets
from engram.sync.chunks import (
    GO_KEYS,
    chunk_form,
    chunk_id,
    chunk_path,
    drop_chunk,
    inflate_chunk,
    list_chunks,
    manifest_lock,
    parse_chunk_data,
    read_chunk,
    write_chunk,
)
from engram.sync.manifest import (
    VERSION,
    ChunkEntry,
    load_manifest,
    manifest_layout,
    manifest_update,
)
from engram.sync.syncfiles import CHUNKS, MANIFEST, SUFFIX, ChunkError, is_chunk_id


@dataclass
class ChunkAudit:
    """What ``audit_chunks`` found; every list holds sentences naming the file."""

    manifest_error: str = ""  # the manifest as a whole cannot be read
    entry_problems: list[str] = field(default_factory=list)  # entries no reader accepts
    unlisted: list[str] = field(default_factory=list)  # chunk ids with a file, not listed
    missing: list[str] = field(default_factory=list)  # listed chunk ids without a file
    broken: dict[str, str] = field(default_factory=dict)  # chunk id → why it is unreadable
    misnamed: dict[str, str] = field(default_factory=dict)  # chunk id → the id its content has
    bad_records: list[str] = field(default_factory=list)  # records sync skips, file and line
    other: list[str] = field(default_factory=list)  # symlinks, non-files, foreign names
    legacy: list[str] = field(default_factory=list)  # chunk ids of older engram JSON Lines
    counts: dict[str, int] = field(default_factory=dict)  # chunk id → memories it holds
    go_old: list[str] = field(default_factory=list)  # Go chunks whose rows have no sync_id
    carried: dict[str, int] = field(default_factory=dict)  # id → lowest rev an engram chunk has

    @property
    def manifest_stale(self) -> bool:
        """Tell whether the manifest needs rewriting from the folder."""
        return bool(
            self.manifest_error
            or self.entry_problems
            or self.unlisted
            or self.missing
            or self.broken
            or self.misnamed
        )


def _count(value: list[dict[str, Any]] | dict[str, Any]) -> int:
    if isinstance(value, list):
        return len(value)
    return sum(len(value.get(key) or []) for key in GO_KEYS if key != "mutations")


def _note_go(audit: ChunkAudit, ident: str, value: list[dict[str, Any]] | dict[str, Any]) -> None:
    """Learn from one chunk what Go engram has: engram's records, or a Go chunk's version."""
    if isinstance(value, list):
        for record in value:
            rid, rev = str(record.get("id")), record.get("rev")
            rev = rev if isinstance(rev, int) and not isinstance(rev, bool) else 1
            audit.carried[rid] = min(audit.carried.get(rid, rev), rev)
        return
    rows = [
        row
        for key in ("observations", "prompts")
        for row in value.get(key) or []
        if isinstance(row, dict)
    ]
    if rows and not value.get("mutations") and not any(row.get("sync_id") for row in rows):
        audit.go_old.append(ident)  # Go engram 1.7 or older: its rows carry no sync_id


def go_unreachable(audit: ChunkAudit, records: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """Return how many edits and forgets made here Go engram 1.7 (no sync_id) cannot apply.

    Memories an engram chunk carried before they changed (edited: a higher rev; forgotten: a
    tombstone), and memories that came from Go without a sync_id and changed here.
    """
    if not audit.go_old:
        return 0, 0
    edited = forgotten = 0
    for record in records:
        kept = record.get("go")
        go: Mapping[str, Any] = kept if isinstance(kept, Mapping) else {}
        raw = record.get("rev")
        rev = raw if isinstance(raw, int) else 1
        if record.get("source") == GO_SOURCE:
            if go.get("sync_id"):
                continue
            base = go.get("revision_count")
            changed = rev > max(base if isinstance(base, int) else 1, 1)
        else:
            first = audit.carried.get(str(record.get("id")))
            changed = first is not None and rev > first
        if changed and record.get("deleted_at"):
            forgotten += 1
        elif changed:
            edited += 1
    return edited, forgotten


def audit_chunks(engram_dir: Path) -> ChunkAudit:
    """Check every chunk file and the manifest of one store; change nothing."""
    audit = ChunkAudit()
    try:
        _, by_id, audit.entry_problems = load_manifest(engram_dir)
    except ChunkError as exc:
        audit.manifest_error, by_id = exc.message, {}
    entries, problems = list_chunks(engram_dir)
    files = {entry.id for entry in entries}
    skip = {audit.manifest_error, *audit.entry_problems}
    audit.other = [p for p in problems if p not in skip and not p.startswith(f"{MANIFEST}: lists")]
    audit.unlisted = sorted(files - set(by_id))
    audit.missing = sorted(
        ident for ident in by_id if not os.path.lexists(chunk_path(engram_dir, ident))
    )
    for ident in sorted(files):
        try:
            value = read_chunk(engram_dir, ident, problems=audit.bad_records)
            audit.counts[ident] = _count(value)
            _note_go(audit, ident, value)
            if chunk_form(engram_dir, ident) == "legacy":
                audit.legacy.append(ident)
            continue
        except ChunkError as exc:
            reason = exc.message
        try:  # readable records under the wrong name can be re-addressed
            data = inflate_chunk(engram_dir, ident)
            records = parse_chunk_data(data, name=f"{CHUNKS}/{ident}{SUFFIX}")
        except ChunkError:
            audit.broken[ident] = reason
            continue
        actual = chunk_id(data)
        if actual != ident and records:
            audit.misnamed[ident] = actual
            audit.counts[actual] = len(records)
        else:
            audit.broken[ident] = reason
    return audit


def _mtime(path: Path) -> str:
    try:
        return format_time(datetime.fromtimestamp(path.stat().st_mtime, UTC))
    except OSError:
        return ""


def repair_chunks(engram_dir: Path, audit: ChunkAudit) -> list[str]:
    """Repair what ``audit`` found, under the manifest lock; return a sentence per change."""
    done: list[str] = []
    with manifest_lock(engram_dir).hold():
        for ident, reason in sorted(audit.broken.items()):
            path = chunk_path(engram_dir, ident)
            info = path.lstat() if os.path.lexists(path) else None
            if info is None or not stat.S_ISREG(info.st_mode):
                continue  # a symlink or folder is reported, not moved
            target = move_aside(engram_dir, path, folder=CHUNKS)
            where = target.relative_to(engram_dir).as_posix()
            done.append(f"{CHUNKS}/{ident}{SUFFIX} is unreadable ({reason}); moved to {where}")
        for ident, actual in sorted(audit.misnamed.items()):
            path = chunk_path(engram_dir, ident)
            true_path = chunk_path(engram_dir, actual)
            if not true_path.exists():
                store_files.write_chunk(engram_dir, true_path.name, path.read_bytes())
            store_files.remove_chunk(engram_dir, path.name)
            done.append(
                f"{CHUNKS}/{ident}{SUFFIX} holds chunk {actual}; "
                f"renamed to {CHUNKS}/{actual}{SUFFIX}"
            )
        if audit.manifest_stale:
            try:
                manifest, by_id, _ = load_manifest(engram_dir)
            except ChunkError:
                manifest, by_id = {"version": VERSION}, {}
            entries, _ = list_chunks(engram_dir)
            chunks = []
            for entry in entries:
                known = by_id.get(entry.id)
                if known is None:
                    known = {
                        "id": entry.id,
                        "created_by": "",
                        "created_at": _mtime(chunk_path(engram_dir, entry.id)),
                        "memories": audit.counts.get(entry.id, 0),
                    }
                chunks.append(known)
            version = manifest.get("version")
            body = {
                **manifest,
                "version": version if isinstance(version, int) and version > 0 else VERSION,
                "chunks": [c for c in chunks if is_chunk_id(c.get("id"))],
            }
            layout = manifest_layout(engram_dir)
            store_files.write_manifest(engram_dir, manifest_update(body, layout))
            done.append(f"{MANIFEST} rewritten from {CHUNKS}/ ({len(chunks)} chunks listed)")
    return done


# ── chunks of older engram versions ───────────────────────────────────────────


@dataclass
class Rewritten:
    """A legacy chunk written again in the form Go engram reads too."""

    old: str  # its id
    new: str | None  # the new chunk's id (None: it held no readable record)
    memories: int  # records carried over
    kept: str = ""  # where the old file went, when it held records no reader accepts

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {"old": self.old, "new": self.new, "memories": self.memories, "kept": self.kept}

    def sentence(self) -> str:
        """Say what was done, naming both files."""
        old = f"{CHUNKS}/{self.old}{SUFFIX}"
        done = (
            f"rewritten as {CHUNKS}/{self.new}{SUFFIX} ({self.memories} memories)"
            if self.new
            else "removed (no readable record in it)"
        )
        where = f"; the old file moved to {self.kept}" if self.kept else ""
        return f"{old} (older engram JSON Lines, which Go engram cannot read) {done}{where}"


def _rewrite_one(
    engram_dir: Path, entry: ChunkEntry, scrubber: Scrubber | None
) -> Rewritten | None:
    bad: list[str] = []
    try:
        if chunk_form(engram_dir, entry.id) != "legacy":
            return None
        records = read_chunk(engram_dir, entry.id, problems=bad)
    except ChunkError:
        return None  # unreadable or misnamed: doctor reports it (and --fix repairs it first)
    if not isinstance(records, list):
        return None
    new = write_chunk(
        engram_dir,
        records,
        created_by=entry.created_by,
        created_at=entry.created_at or now(),
        scrubber=scrubber,
    )
    done = Rewritten(entry.id, new.id if new else None, len(records))
    if bad:
        with manifest_lock(engram_dir).hold():
            target = move_aside(engram_dir, chunk_path(engram_dir, entry.id), folder=CHUNKS)
        done.kept = target.relative_to(engram_dir).as_posix()
    drop_chunk(engram_dir, entry.id)  # its entry (and its file, unless just moved)
    return done


def rewrite_legacy(engram_dir: Path, scrubber: Scrubber | None = None) -> list[Rewritten]:
    """Rewrite every chunk of an older engram in the form Go engram reads; return what was done.

    Applying the new chunk on a clone that applied the old one changes nothing (the same
    records through the idempotent merge). Chunks that cannot be read are left for doctor.
    """
    entries, _ = list_chunks(engram_dir)
    done = [_rewrite_one(engram_dir, entry, scrubber) for entry in entries]
    return [item for item in done if item is not None]


# ── secrets in chunks ─────────────────────────────────────────────────────────


@dataclass
class ChunkSecret:
    """A chunk that holds what looks like a secret (named, never quoted) and if it was fixed."""

    message: str
    fixed: bool = False


def secret_kinds(scrubber: Scrubber, value: Any) -> list[str]:
    """Return the kinds of secret in every string of a JSON value (keys too), sorted."""
    texts: list[str] = []
    _strings(value, texts)
    return sorted({f.kind for text in texts for f in find_secrets(text, scrubber.patterns)})


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append(str(key))
            _strings(item, out)


def chunk_secrets(
    engram_dir: Path, scrubber: Scrubber, *, fix: bool, only: set[str] | None = None
) -> list[ChunkSecret]:
    """Return the chunks (of ``only``, if given) holding a secret; with ``fix``, scrub them."""
    found: list[ChunkSecret] = []
    entries, _ = list_chunks(engram_dir)  # their problems are the chunk checks' own
    for entry in entries:
        if only is not None and entry.id not in only:
            continue
        name = f"{CHUNKS}/{entry.id}{SUFFIX}"
        try:
            data = read_chunk(engram_dir, entry.id)
        except EngramError:
            continue  # unreadable: reported (and set aside) by the chunk checks
        if isinstance(data, dict):  # a Go engram chunk: its format is Go engram's to write
            kinds = secret_kinds(scrubber, data)
            if kinds:
                found.append(
                    ChunkSecret(
                        f"{name} (a Go engram chunk) holds what looks like {', '.join(kinds)}: "
                        "remove it from the repository's history and rotate the secret"
                    )
                )
            continue
        cleaned, kinds, dropped = _scrub_all(scrubber, data)
        if not kinds and not dropped:
            continue
        what = ", ".join(kinds) or "a secret as a memory id"
        finding = ChunkSecret(f"{name} holds what looks like {what}")
        found.append(finding)
        if not fix:
            continue
        new = write_chunk(
            engram_dir,
            cleaned,
            created_by=entry.created_by,
            created_at=entry.created_at or now(),
            scrubber=scrubber,
        )
        drop_chunk(engram_dir, entry.id)
        finding.fixed = True
        finding.message += (
            f"; chunks are named by their content, so it was written scrubbed as "
            f"{CHUNKS}/{new.id}{SUFFIX} and the old file removed"
            if new is not None
            else "; removed (nothing was left once scrubbed)"
        )
        if dropped:
            finding.message += f" ({dropped} record(s) whose id is a secret left out)"
    return found


def scrub_chunks(engram_dir: Path, scrubber: Scrubber, chunks: Iterable[str]) -> list[str]:
    """Rewrite these chunks scrubbed where they hold a secret; return what was done, per chunk."""
    fixed = chunk_secrets(engram_dir, scrubber, fix=True, only=set(chunks))
    return [finding.message for finding in fixed]


def _scrub_all(
    scrubber: Scrubber, records: Iterable[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str], int]:
    """Scrub a chunk's records: (scrubbed records, kinds found, records dropped for their id)."""
    cleaned: list[dict[str, Any]] = []
    kinds: set[str] = set()
    dropped = 0
    for record in records:
        try:
            clean, count = scrubber.record(record)
        except InvalidInput:
            dropped += 1
            continue
        if count:
            kinds.update(secret_kinds(scrubber, record))
        cleaned.append(clean)
    return cleaned, sorted(kinds), dropped
