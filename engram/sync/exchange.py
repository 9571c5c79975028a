"""The sync exchange over one workspace: chunks in and out, and a git remote (``engram sync``).

README (sync). ``sync_local`` imports the chunks this clone has not applied (every one in one
merge, through ``engram.sync.transfer.merge_in``), rewrites chunks of older engram versions in
the form Go engram reads too (``engram.sync.audit.rewrite_legacy``) and exports this clone's
journalled changes as one new chunk. ``sync`` with a remote also fetches the store's branch
(``engram.sync.remote``), merges its memories three-way and its chunks and manifest in,
exports, commits the store's committed files on the branch and pushes (never forced; a remote
that moved meanwhile is fetched and merged again, three times, then a ``SyncError``).
``sync_status`` says what is pending either way.

Files are the store's to write: memories through the workspace (``Workspace.write``, which
keeps the index in step), chunks, the manifest and the sync state through
``engram.sync.chunks``, which places them with ``engram.store.files``. This module must not
import the service or an adapter, and dulwich only through ``engram.sync.remote``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from engram import config as config_mod
from engram.errors import EngramError, SyncError
from engram.formats.goexport import GoName
from engram.formats.instructions import BlockWrite
from engram.model import normalize_project, now
from engram.store import MEMORIES, MemoryStore
from engram.store import files as store_files
from engram.store.journal import ChangeJournal
from engram.sync import chunks as chunks_mod
from engram.sync.audit import Rewritten, rewrite_legacy
from engram.sync.chunks import ChunkEntry, SyncState
from engram.sync.gotransfer import GoImportResult, GoRoute
from engram.sync.transfer import ImportResult, Progress, merge3_in
from engram.workspace import Workspace

# Sync state key: ids of the memories chunks carried (a change of one goes to Go as a mutation).
GO_HAS: Final = "go_has"

__all__ = ["Pulled", "RemoteSync", "SyncReport", "SyncStatus", "sync", "sync_local", "sync_status"]

ATTEMPTS = 3  # fetch, merge and push rounds before a remote that keeps moving is an error


@dataclass
class Pulled:
    """What a sync merged in from the remote's branch: its memories and its new chunks."""

    memories: ImportResult = field(default_factory=ImportResult)
    chunks: int = 0  # chunks fetched that were not here

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: memories (an import's counts), chunks."""
        return {"memories": self.memories.to_dict(), "chunks": self.chunks}


@dataclass
class RemoteSync:
    """What a sync exchanged with a git remote: what it pulled, the commit and the push."""

    url: str
    branch: str
    pulled: Pulled
    head: str  # the branch's commit after the sync
    pushed: bool
    attempts: int  # fetch, merge and push rounds taken
    cleared_locks: list[str]  # stale lock files a killed sync left, removed

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return {
            "url": self.url,
            "branch": self.branch,
            "pulled": self.pulled.to_dict(),
            "head": self.head,
            "pushed": self.pushed,
            "attempts": self.attempts,
            "cleared_locks": self.cleared_locks,
        }


@dataclass
class SyncReport:
    """What one sync did: chunks imported, this clone's changes exported, and the remote."""

    scope: str
    problems: list[str]
    imported_chunks: list[str]
    imported: GoImportResult  # skipped rows (each with its chunk and reason) and notes too
    exported: int  # memories in the exported chunk
    exported_chunk: str | None  # its id (None: nothing to export)
    remote: RemoteSync | None = None  # only a sync with a remote
    rewritten: list[Rewritten] = field(default_factory=list)  # older engram chunks rewritten
    # the instruction files config.yaml's export.formats names, rewritten after the exchange
    instructions: list[BlockWrite] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form; ``remote`` only for a sync with a remote."""
        out: dict[str, Any] = {
            "scope": self.scope,
            "problems": self.problems,
            "imported_chunks": self.imported_chunks,
            "imported": self.imported.to_dict(),
            "exported": self.exported,
            "exported_chunk": self.exported_chunk,
            "rewritten": [item.to_dict() for item in self.rewritten],
        }
        if self.remote is not None:
            out["remote"] = self.remote.to_dict()
        if self.instructions:
            out["instructions"] = [item.to_dict() for item in self.instructions]
        return out


@dataclass
class SyncStatus:
    """What ``sync --status`` reports: the chunks, who made them and what is pending."""

    scope: str
    clone_id: str
    chunks: int
    memories_in_chunks: int
    contributors: dict[str, int]  # memories in the chunks by author, most first
    pending_import: list[str]  # chunks not merged in yet
    pending_export: int  # changed memories not in a chunk yet
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (field names as above)."""
        return asdict(self)


def sync(
    ws: Workspace,
    *,
    root: Path,
    project: str,
    remote: str | None = None,
    branch: str | None = None,
    progress: Progress | None = None,
    route: GoRoute | None = None,
    export: bool = True,
    only_project: str | None = None,
) -> SyncReport:
    """Import the sync chunks not applied here, export this clone's changes as a chunk.

    With ``remote``: also fetch the store's branch from that git remote, merge its memories
    and chunks in, commit the result on the branch and push it (never forced; a remote that
    moved meanwhile is fetched and merged again). ``root`` is the project's work tree (its git
    user names the chunk's author; a project store's repository), ``project`` the name a Go
    engram chunk's records are given, ``route`` where its rows land (default: all in ``ws``).
    ``export`` and ``only_project`` as for ``sync_local``. Returns what was done.
    """
    refuse_tracked_state(ws)
    local_args: dict[str, Any] = {"export": export, "only_project": only_project}
    if remote is None:
        return sync_local(
            ws, root=root, project=project, progress=progress, route=route, **local_args
        )
    from engram.sync import remote as remote_mod

    branch = branch or remote_mod.DEFAULT_BRANCH
    repo_root = ws.store.dir if ws.scope == "personal" else root
    # One sync of a repository at a time; locks a killed sync left are cleared first.
    with remote_mod.exclusive(repo_root, remote, branch) as session:
        for attempt in range(1, ATTEMPTS + 1):
            fetched = remote_mod.fetch(repo_root, ws.store.dir, remote, branch)
            pulled, remote_problems = _merge_remote(ws, fetched.files, fetched.base)
            local = sync_local(
                ws, root=root, project=project, progress=progress, route=route, **local_args
            )
            files, unfit = _committed_files(ws, fetched.files)
            parents = [p for p in (fetched.local_tip, fetched.tip) if p]
            author = remote_mod.author_of(repo_root)
            head = remote_mod.commit(
                repo_root,
                ws.store.dir,
                files,
                parents=parents,
                message=f"engram sync: {local.exported or 0} memories from {author}",
                author=author,
                branch=branch,
            )
            pushed = head == fetched.tip or remote_mod.push(
                repo_root, remote, branch, cleared=session.cleared
            )
            local.problems = remote_problems + local.problems + unfit
            local.remote = RemoteSync(
                fetched.url, branch, pulled, head, pushed, attempt, session.cleared
            )
            if pushed:
                return local
    raise SyncError(
        f"could not push to {remote} ({branch}): it kept moving while engram merged",
        hint="run engram sync --remote again in a moment; nothing local was lost",
    )


def refuse_tracked_state(ws: Workspace) -> None:
    """Raise SyncError when git tracks files of the store's state/ or index/.

    The clone id, the list of applied chunks and the journal's cursor are this clone's: taken
    from a commit (``git add -f``), they would be a teammate's or a stranger's, and could make
    this clone skip chunks it never applied.
    """
    from engram.store.local import tracked_local

    tracked = tracked_local(ws.store.dir)
    if tracked:
        raise SyncError(
            f"git tracks local state of {ws.store.dir}: {', '.join(tracked[:5])}; sync takes "
            "no clone id, cursor or applied chunks from a committed file",
            hint="run engram doctor --fix (it removes them from git and this clone), then sync",
        )


def _merge_remote(
    ws: Workspace, files: Mapping[str, bytes], base: Mapping[str, bytes]
) -> tuple[Pulled, list[str]]:
    """Merge the memories, manifest and chunks of a fetched branch into the store.

    Returns what was pulled, and the problems met on the way.
    """
    pulled = Pulled()
    problems: list[str] = []
    data = files.get(MEMORIES)
    if data:
        scan = MemoryStore(ws.store.dir).scan(data)
        problems += [f"remote {p.message}" for p in scan.problems]
        base_scan = MemoryStore(ws.store.dir).scan(base.get(MEMORIES, b""))
        pulled.memories = merge3_in(ws, base_scan.records, scan.records)
    prefix = f"{chunks_mod.CHUNKS}/"
    # Chunks are verified against their names before they are written, and every file is
    # written atomically under the store lock: a killed sync leaves whole files or none.
    fetched: list[str] = []
    with ws.store.lock():
        for path, blob in sorted(files.items()):
            name = path[len(prefix) :] if path.startswith(prefix) else ""
            chunk = name.removesuffix(chunks_mod.SUFFIX)
            if not name.endswith(chunks_mod.SUFFIX) or not chunks_mod.is_chunk_id(chunk):
                continue
            try:
                if chunks_mod.store_chunk(ws.store.dir, chunk, blob, name=f"remote {path}"):
                    pulled.chunks += 1
                    fetched.append(chunk)
            except EngramError as exc:
                problems.append(exc.message)
        try:
            problems += chunks_mod.merge_manifest_file(
                ws.store.dir,
                files.get(chunks_mod.MANIFEST) or None,
                name=f"remote {chunks_mod.MANIFEST}",
            )
        except EngramError as exc:
            problems.append(exc.message)
        if fetched:
            # A teammate's chunk with a secret is kept scrubbed under its new name, so the
            # push that follows does not carry the secret again.
            from engram.sync.audit import scrub_chunks

            notes = scrub_chunks(ws.store.dir, ws.store.scrubber, fetched)
            problems += [f"remote {note}" for note in notes]
    return pulled, problems


def _committed_files(
    ws: Workspace, pushed: Mapping[str, bytes]
) -> tuple[dict[str, bytes], list[str]]:
    """Return the store's files that belong in git (all but index/, state/ and temp files), checked.

    A chunk not on the remote already (``pushed``) must hash to its name, or it is left
    out (the remote's copy kept where it has one) and named in the returned problems; a
    manifest that does not parse stops the sync: neither is ever committed or pushed.
    """
    out: dict[str, bytes] = {}
    problems: list[str] = []
    folder = ws.store.dir
    with ws.store.lock():
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder).as_posix()
            if rel.split("/")[0] in ("index", "state", ".git") or not path.is_file():
                continue
            if path.is_symlink() or store_files.is_leftover(path.name):
                continue  # a killed write's temp file is no file of the store
            out[rel] = path.read_bytes()
    for rel, data in list(out.items()):
        top, _, name = rel.partition("/")
        if top != chunks_mod.CHUNKS or not name.endswith(chunks_mod.SUFFIX):
            continue
        if pushed.get(rel) == data:
            continue
        try:
            chunks_mod.verify_chunk_file(name.removesuffix(chunks_mod.SUFFIX), data, name=rel)
        except EngramError as exc:
            problems.append(f"{exc.message}; not pushed")
            if rel in pushed:
                out[rel] = pushed[rel]
            else:
                del out[rel]
    manifest = out.get(chunks_mod.MANIFEST)
    if manifest is not None:
        try:
            chunks_mod.parse_manifest(manifest)
        except EngramError as exc:
            raise SyncError(
                f"refusing to push: {exc.message}",
                hint=f"restore .engram/{chunks_mod.MANIFEST} (git checkout) or remove it, "
                "then run engram sync --remote again",
            ) from exc
    return out, problems


def sync_local(
    ws: Workspace,
    *,
    root: Path,
    project: str,
    progress: Progress | None = None,
    route: GoRoute | None = None,
    export: bool = True,
    only_project: str | None = None,
) -> SyncReport:
    """Import unapplied chunks, then export this clone's journalled changes as a chunk.

    ``route``: where Go engram chunks' rows land (default: every row in ``ws``).
    ``export=False`` only imports (Go engram's ``sync --import``): no chunk is written and no
    older chunk rewritten. ``only_project`` exports only the changes of that project's
    memories (a tombstone naming no project goes too); the rest wait for a later export.
    """
    state = chunks_mod.SyncState(ws.store.dir)
    route = route or GoRoute(lambda: [ws])
    applied, totals, problems = _import_chunks(
        ws, state, project=project, progress=progress, route=route, go_names=(root.name,)
    )
    if export:  # a committed conflict in the manifest stops Go's sync: written clean
        problems += chunks_mod.settle_manifest(ws.store.dir)
    rewritten = _rewrite_legacy(ws, state) if export else []
    go_name = GoName(project, root.name) if ws.scope == "project" else None
    exported = (
        _export_changes(ws, state, root=root, only=only_project, go_name=go_name)
        if export
        else None
    )
    return SyncReport(
        scope=ws.scope,
        problems=problems,
        imported_chunks=applied,
        imported=totals,
        exported=exported.memories if exported else 0,
        exported_chunk=exported.id if exported else None,
        rewritten=rewritten,
    )


def _rewrite_legacy(ws: Workspace, state: SyncState) -> list[Rewritten]:
    """Rewrite older engram chunks as Go engram reads them; a new one is applied if its old was.

    Its records are the old chunk's, already merged here: applying it again would change
    nothing, so it is marked applied rather than read again.
    """
    done = rewrite_legacy(ws.store.dir, ws.store.scrubber)
    fresh = [item.new for item in done if item.new and item.old in state.applied]
    if fresh:
        state.mark_applied(fresh)
        state.save()
    return done


def _import_chunks(
    ws: Workspace,
    state: SyncState,
    *,
    project: str,
    progress: Progress | None,
    route: GoRoute,
    go_names: tuple[str, ...] = (),
) -> tuple[list[str], GoImportResult, list[str]]:
    """Merge every chunk not applied here in one merge; return the chunks, counts, problems."""
    from engram.sync.gotransfer import merge_chunks

    entries, problems = chunks_mod.list_chunks(ws.store.dir)
    problems = list(problems) + list(state.problems)
    applied: list[str] = []
    records: list[Any] = []
    go_chunks: list[tuple[str, Mapping[str, Any]]] = []
    where: list[tuple[str, int]] = []
    pending = [entry for entry in entries if entry.id not in state.applied]
    for number, entry in enumerate(pending, start=1):
        if progress is not None:
            progress(number, len(pending))
        name = f"chunks/{entry.id}{chunks_mod.SUFFIX}"
        try:
            numbers: list[int] = []
            chunk = chunks_mod.read_chunk(ws.store.dir, entry.id, problems=problems, lines=numbers)
        except EngramError as exc:
            problems.append(exc.message)
            continue
        if isinstance(chunk, list):
            records += chunk
            where += [(name, line) for line in numbers or range(1, len(chunk) + 1)]
        else:
            go_chunks.append((name, chunk))  # Go engram's: converted after engram's records
        applied.append(entry.id)
    # engram's chunks in one merge, Go's in one more: not one rewrite of the store per chunk.
    totals = merge_chunks(
        ws,
        records,
        go_chunks,
        route=route,
        project=project,
        label="chunks",
        where=where,
        from_clone=True,
        go_names=go_names,
    )
    if applied:
        state.mark_applied(applied)
        kept = state.get(GO_HAS)
        if isinstance(kept, list):  # else read from every chunk when an export needs it
            ids = {str(record.get("id")) for record in records if isinstance(record, dict)}
            state.set(GO_HAS, sorted(set(kept) | ids))
        state.save()
    return applied, totals, problems


def _export_changes(
    ws: Workspace,
    state: SyncState,
    *,
    root: Path,
    only: str | None = None,
    go_name: GoName | None = None,
) -> ChunkEntry | None:
    """Write this clone's changes since its cursor as one chunk; return its entry (or None).

    ``only``: just the memories of that project; the other changes are journalled again
    after the cursor, so the next export carries them.
    """
    exported: ChunkEntry | None = None
    journal = ChangeJournal(ws.store.state_dir)
    with ws.store.lock():
        offset = state.get("journal_offset")
        ids, end = journal.since(offset if isinstance(offset, int) else 0)
        left: list[str] = []
        if ids and only is not None:
            found = ws.index.get_many(ids)
            left = [rid for rid in ids if rid in found and not _of_project(found[rid], only)]
            ids = [rid for rid in ids if rid not in set(left)]
        if ids:
            records = list(ws.index.get_many(ids).values())
            author = config_mod.git_user_name(root) or state.clone_id
            go_has = _go_has(ws, state)
            exported = chunks_mod.write_chunk(
                ws.store.dir,
                records,
                created_by=author,
                created_at=now(),
                scrubber=ws.store.scrubber,
                go_name=go_name,
                go_has=go_has,
            )
            if exported is not None:
                state.mark_applied([exported.id])
                state.set(GO_HAS, sorted(go_has | {str(r.get("id")) for r in records}))
        if ids or end != offset:
            state.set("journal_offset", journal.compact(end))
            journal.append(left)
            state.save()
    return exported


def _go_has(ws: Workspace, state: SyncState) -> set[str]:
    """Return the ids of the memories chunks of this repository carried (Go may have them).

    Kept in the sync state and learnt from each chunk imported or exported; read from every
    engram chunk once, on the first export that needs it.
    """
    kept = state.get(GO_HAS)
    if isinstance(kept, list):
        return {str(item) for item in kept}
    found: set[str] = set()
    entries, _ = chunks_mod.list_chunks(ws.store.dir)
    for entry in entries:
        try:
            chunk = chunks_mod.read_chunk(ws.store.dir, entry.id, problems=[])
        except EngramError:
            continue
        if isinstance(chunk, list):
            found.update(str(record.get("id")) for record in chunk if isinstance(record, dict))
    return found


def _of_project(record: Mapping[str, Any], project: str) -> bool:
    """Tell whether a record belongs to ``project`` (a tombstone naming none does)."""
    named = record.get("project")
    if not named:
        return "deleted_at" in record
    return normalize_project(str(named)) == normalize_project(project)


def sync_status(ws: Workspace) -> SyncStatus:
    """Return the chunks, their contributors and what is pending either way."""
    state = chunks_mod.SyncState(ws.store.dir)
    entries, problems = chunks_mod.list_chunks(ws.store.dir)
    offset = state.get("journal_offset")
    pending, _ = ChangeJournal(ws.store.state_dir).since(offset if isinstance(offset, int) else 0)
    contributors: dict[str, int] = {}
    for entry in entries:
        who = entry.created_by or "unknown"
        contributors[who] = contributors.get(who, 0) + entry.memories
    return SyncStatus(
        scope=ws.scope,
        clone_id=state.clone_id,
        chunks=len(entries),
        memories_in_chunks=sum(entry.memories for entry in entries),
        contributors=dict(sorted(contributors.items(), key=lambda kv: (-kv[1], kv[0]))),
        pending_import=[entry.id for entry in entries if entry.id not in state.applied],
        pending_export=len(pending),
        problems=problems,
    )
