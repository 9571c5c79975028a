"""``engram doctor``'s secret scan: every place engram keeps text, and with ``fix`` its repair.

Scanned: every string of every record of memories.jsonl (tombstones, history, conflicts,
judgements, unknown fields and their keys; only the structural id, rev and times are not free
text), every record of the sync chunks, the lines an earlier repair set aside in
``quarantine/``, the per-clone files in ``state/`` and the records the index holds. The test is
the store's own scrubber (``engram.store.redact``), so doctor finds exactly what a write would
redact, with the user's ``redact.extra_patterns``.

Repairs (``fix``): memories are written scrubbed through the store, rev+1 and a fresh
``updated_at`` so the redacted version wins the merge on every other clone; a chunk is named by
the hash of its content and never edited in place, so its records are written scrubbed as a new
chunk and the old file and its manifest entry are dropped (``engram.sync.audit.chunk_secrets``,
which ``engram sync --remote`` runs on the chunks it fetched); the session log is written again
(it scrubs what it writes); quarantined text is redacted in place; an index that holds a secret,
or held the old text of a memory just written scrubbed, is purged (``Index.purge``: rebuilt from
the scrubbed file with its full-text files deleted first and its SQLite files vacuumed and their
write-ahead logs truncated after, so no old page keeps the secret). A Go engram chunk, another
state file or a memory whose id is itself a secret is reported, not repaired.

Must not: print, read outside ``.engram/``, write a file itself (the store and the chunk writer
do), or report a secret's text (findings name the file, the memory or the line, and the kind of
secret).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.errors import InvalidInput
from engram.fileio import gunzip, read_regular
from engram.model import change_time, rev_of
from engram.operations import advice

if TYPE_CHECKING:
    from engram.hygiene.finding import Finding
    from engram.index.db import Index
    from engram.store import MemoryStore

__all__ = ["check_secrets"]

# State files that never hold free text worth a scan (locks, signatures, binary vectors).
_SKIP_STATE_SUFFIXES: Final = (".lock", ".sig", ".npy")
_MAX_SCAN_BYTES: Final = 64 * 1024 * 1024


def check_secrets(store: MemoryStore, index: Index, *, fix: bool) -> list[Finding]:
    """Return a finding for each file or memory that holds a secret; with ``fix``, scrub it."""
    found = _memories(store, fix=fix)
    # A memory written scrubbed leaves its old text in the index's files (Tantivy segments,
    # SQLite free pages and WAL) even once the index rows follow: purge those too.
    rewritten = any(finding.fixed for finding in found)
    found += _chunks(store, fix=fix)
    found += _quarantine(store, fix=fix)
    found += _state(store, fix=fix)
    found += _index(store, index, fix=fix, rewritten=rewritten)
    return found


def _finding(check: str, message: str) -> Finding:
    from engram.hygiene.finding import Finding

    return Finding("error", check, message)


def _memories(store: MemoryStore, *, fix: bool) -> list[Finding]:
    from engram.sync.audit import secret_kinds

    found: list[Finding] = []
    repaired: list[dict[str, Any]] = []
    for record in store.scan().records:
        try:
            clean, count = store.scrubber.record(record)
        except InvalidInput:
            found.append(
                _finding(
                    "secrets",
                    f"memory id {str(record['id'])[:4]}… in {store.path} looks like a secret: "
                    f"forget it ({advice.cmd('forget', hard=True)}) and save its text again",
                )
            )
            continue
        if not count:
            continue
        kinds = ", ".join(secret_kinds(store.scrubber, record))
        finding = _finding("secrets", f"memory {record['id']} holds what looks like {kinds}")
        found.append(finding)
        if fix:
            clean["rev"] = rev_of(clean) + 1
            clean["updated_at"] = change_time(record.get("updated_at"))
            repaired.append(clean)
            finding.fixed = True
    if repaired:
        from engram.store.journal import ChangeJournal

        store.put(repaired)
        # Journalled as this clone's changes: the next export carries the redaction as a chunk.
        ChangeJournal(store.state_dir).append(str(record["id"]) for record in repaired)
    return found


def _chunks(store: MemoryStore, *, fix: bool) -> list[Finding]:
    from engram.sync.audit import chunk_secrets

    found: list[Finding] = []
    for secret in chunk_secrets(store.dir, store.scrubber, fix=fix):
        finding = _finding("secrets", secret.message)
        finding.fixed = secret.fixed
        found.append(finding)
    return found


def _text_of(path: Path) -> str | None:
    """Return a file's text (a .gz decompressed), or None when it is too big or unreadable."""
    try:
        data = read_regular(path, limit=_MAX_SCAN_BYTES)
        if path.name.endswith(".gz"):
            data = gunzip(data, name=str(path), limit=_MAX_SCAN_BYTES)
    except InvalidInput:  # too big, a gzip bomb, broken gzip, not a regular file
        return None
    return data.decode("utf-8", errors="replace")


def _quarantine(store: MemoryStore, *, fix: bool) -> list[Finding]:
    from engram.store.quarantine import quarantine_dir, rewrite_kept
    from engram.store.redact import find_secrets, redact

    found: list[Finding] = []
    folder = quarantine_dir(store.dir)
    if not folder.is_dir():
        return found
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        text = _text_of(path)
        if text is None:  # set aside because it could not be read: nothing to scan
            continue
        hits = find_secrets(text, store.scrubber.patterns)
        if not hits:
            continue
        lines = sorted({hit.line for hit in hits})
        kinds = ", ".join(sorted({hit.kind for hit in hits}))
        finding = _finding(
            "secrets", f"{path}: line(s) {', '.join(map(str, lines[:10]))} hold {kinds}"
        )
        found.append(finding)
        if fix and not path.name.endswith(".gz"):
            # Set aside because they do not parse: redacted as text, kept for their owner.
            rewrite_kept(store.dir, path, redact(text, store.scrubber.patterns)[0].encode("utf-8"))
            finding.fixed = True
    return found


def _state(store: MemoryStore, *, fix: bool) -> list[Finding]:
    from engram.store.redact import find_secrets
    from engram.store.sessions import SESSIONS, SessionLog

    found: list[Finding] = []
    if not store.state_dir.is_dir():
        return found
    for path in sorted(p for p in store.state_dir.rglob("*") if p.is_file()):
        if path.is_symlink() or path.name.endswith(_SKIP_STATE_SUFFIXES):
            continue
        text = _text_of(path)
        if text is None:  # set aside because it could not be read: nothing to scan
            continue
        kinds = sorted({hit.kind for hit in find_secrets(text, store.scrubber.patterns)})
        if not kinds:
            continue
        finding = _finding("secrets", f"{path} holds what looks like {', '.join(kinds)}")
        if path.name == SESSIONS and path.parent == store.state_dir:
            if fix:
                SessionLog(store.state_dir, scrubber=store.scrubber).rewrite()
                finding.fixed = True
        else:
            finding.message += " (per-clone state, never committed: delete the file)"
        found.append(finding)
    return found


def _index(store: MemoryStore, index: Index, *, fix: bool, rewritten: bool) -> list[Finding]:
    """Find records with secrets in the index; with ``fix``, purge it (also when ``rewritten``).

    ``rewritten``: memories were just written scrubbed. Their index rows follow the file, but
    the old text stays in the index's files until ``Index.purge`` rewrites them.
    """
    leaked = 0
    for record in index.all_records(include_deleted=True):
        try:
            leaked += bool(store.scrubber.record(record)[1])
        except InvalidInput:
            leaked += 1
    folder = store.dir / "index"
    found: list[Finding] = []
    if leaked:
        found.append(
            _finding("secrets", f"the index under {folder} holds {leaked} memories with secrets")
        )
    if fix and (leaked or rewritten):
        emptied = index.purge()
        for finding in found:
            finding.fixed = True
        if not emptied:
            found.append(
                _finding(
                    "secrets",
                    f"the index under {folder} was rebuilt, but another engram process kept "
                    "its write-ahead log open: stop it (an MCP server, the daemon) and run "
                    f"{advice.cmd('doctor', fix=True)} again",
                )
            )
    return found
