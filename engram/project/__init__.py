"""project/ is the opened project and what is done over it: write path, graph, names, git.

Its modules: ``memories`` (the write path: remember, update, forget), ``graph`` (lineage,
neighbours, timeline), ``names`` (project names, variants and renames), ``indexing`` (the
search index and the memories of ADRs and git history), ``git`` (the merge and diff drivers,
a memory's git log). This file holds ``Project``, which they all work on.

One opened project: its workspaces, its session log and the lookups across both stores.

``Project`` is what the feature modules work on: the project's ``Workspace`` and, for
``scope=personal``, the one under ENGRAM_HOME (opened when first asked for), the clone's session
log, and what the features share over both stores: finding the memory an id names (``locate``),
ranked recall (``recall``), the shortest unique id prefixes (``short_ids``) and which cited files
changed since a memory was written (``stale_many``, cached per HEAD). The service facade opens
one and closes it.

Personal memories follow the person: one saved without a project of its own is global (project
``""``) and recall shows it in every project, with the personal memories tied to this project;
``all_projects`` shows those of every other project too. Where no project exists (an MCP server
started outside any repository), ``Project.personal_only`` opens the personal store alone: it is
then ``ws``, and what needs a project's store answers ``NotInitialized`` in words for the person
(``no_project``).

It decides nothing about what to write and writes nothing itself; it must not import the
service or an adapter.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram import config as config_mod
from engram import model
from engram.errors import AmbiguousId, InvalidInput, NotFound, NotInitialized
from engram.index.query import Hit, Query
from engram.index.ranking import epoch
from engram.model import Record, check_id, is_tombstone, normalize_project, repo_path, status_of
from engram.operations import advice
from engram.operations.params import split
from engram.store import init_layout
from engram.workspace import Workspace

if TYPE_CHECKING:
    from engram.indexer.anchors import AnchorChecker
    from engram.store.sessions import SessionLog

__all__ = [
    "ALL_PROJECTS",
    "GLOBAL_PROJECTS",
    "MIN_WRITE_PREFIX",
    "Project",
    "as_list",
    "no_project",
    "records_of",
]

GLOBAL_PROJECTS: Final = ("", "*", "personal")  # personal memories shown in every project
ALL_PROJECTS: Final = "*"  # as a recall's project filter: every project (all_projects)
NO_PROJECT_HINT: Final = (
    "the user can run `engram init` in the repository to create its store; until then only "
    "personal memories (scope=personal) are kept"
)
# A command that changes or deletes a memory needs this many characters of its id (or the whole
# id, if shorter): one typed character must not pick the memory to forget.
MIN_WRITE_PREFIX: Final = 4
# The folder a call's relative paths are relative to, when the call comes from another process
# (a daemon answering a command line): that process's current folder, not this one's.
CALLER_FOLDER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "engram_caller_folder", default=None
)


@contextlib.contextmanager
def calling_from(folder: str) -> Iterator[None]:
    """Take relative paths as typed in ``folder`` for the calls made in this block."""
    token = CALLER_FOLDER.set(folder)
    try:
        yield
    finally:
        CALLER_FOLDER.reset(token)


def as_list(value: Iterable[str] | str | None) -> list[str]:
    """Return the items of a list or of comma-separated text (``params.split``; None: none)."""
    return [] if value is None else split(value)


def records_of(hits: Iterable[Hit]) -> list[Record]:
    """Return the memories of recall hits, in order."""
    return [hit.record for hit in hits]


def no_project(what: str, where: Path) -> NotInitialized:
    """Return the error of ``what`` asked where no project store exists, for the person to act on.

    The words are the person's (an agent relays them), not an instruction to the agent.
    """
    return NotInitialized(
        f"no engram store in this repository ({where} has no .engram/ in it or above it): "
        f"{what} needs one (the personal store is open)",
        hint=NO_PROJECT_HINT,
    )


class Project:
    """One opened project: its workspace, the personal one (``scope=personal``), its session log."""

    def __init__(self, root: Path, ws: Workspace | None = None) -> None:
        self.root = root
        # Without a project store of its own (personal_only) the personal store is ``ws``.
        self.has_project = ws is None
        self.ws = ws or Workspace.open(root, root / config_mod.ENGRAM_DIR, "project")
        self._personal: Workspace | None = None
        # Resolved once: recall checks for the personal store on every call.
        personal = config_mod.personal_dir()
        same = personal.resolve() == self.ws.store.dir.resolve()
        self._personal_dir: Path | None = None if same else personal
        # ... and its file's name, as a string: a recall asks whether it exists every time
        # (one stat; joining Path objects cost more than the stat).
        self._personal_file = None if same else os.fspath(personal / "memories.jsonl")
        self._sessions: SessionLog | None = None
        self._anchor_checker: AnchorChecker | None = None

    @classmethod
    def personal_only(cls, where: Path) -> Project:
        """Open the personal store alone (created if need be), for a folder with no project.

        ``where`` is the folder the caller works in; messages name it.
        """
        folder = config_mod.personal_dir()
        if not (folder / "memories.jsonl").exists():
            init_layout(folder, "personal")
        return cls(where, Workspace.open(folder.parent, folder, "personal"))

    def require_project(self, what: str) -> None:
        """Refuse ``what`` (NotInitialized, in the person's words) when no project is open."""
        if not self.has_project:
            raise no_project(what, self.root)

    def close(self) -> None:
        """Release the index files of every open workspace and the anchor cache."""
        self.ws.close()
        if self._anchor_checker is not None:
            self._anchor_checker.close()
            self._anchor_checker = None
        if self._personal is not None:
            self._personal.close()

    @property
    def config(self) -> config_mod.Config:
        """The project's settings."""
        return self.ws.config

    def now(self) -> str:
        """Return the time to stamp a change with: ``engram.model.now``, read on every call.

        Every feature stamps through this one clock, so a clock set on ``engram.model``
        reaches them all.
        """
        return model.now()

    @property
    def name(self) -> str:
        """This project's name (config.yaml, else the git remote, else the folder; normalised)."""
        return self.ws.config.project

    # -- workspaces ----------------------------------------------------------------------------

    def personal(self, *, create: bool = False) -> Workspace | None:
        """Return the personal store's workspace (ENGRAM_HOME), creating it if asked."""
        if self._personal is None:
            folder = self._personal_dir
            if folder is None or self._personal_file is None:
                return None
            if not os.path.exists(self._personal_file):
                if not create:
                    return None
                init_layout(folder, "personal")
            self._personal = Workspace.open(folder.parent, folder, "personal")
        return self._personal

    def workspace(self, scope: str) -> Workspace:
        """Return the workspace a memory of ``scope`` is written to (personal made if need be)."""
        if scope == "personal":
            ws = self.personal(create=True)
            if ws is not None:
                return ws
        else:
            self.require_project("a project memory")
        return self.ws

    def workspaces(self, scopes: frozenset[str] = frozenset()) -> list[Workspace]:
        """Return the project's workspace and, when ``scopes`` allow and it exists, the personal."""
        out = [self.ws]
        if not scopes or "personal" in scopes:
            personal = self.personal()
            if personal is not None:
                out.append(personal)
        return out

    @property
    def personal_projects(self) -> frozenset[str]:
        """The personal store's memories recall shows here: this project's and global ones.

        A personal memory is global unless it was tied to a project (a project given, or files
        of its repository cited): one whose project is empty, ``*`` or ``personal`` (the store's
        own name) belongs to every project.
        """
        return frozenset((self.name, *GLOBAL_PROJECTS))

    def project_of(self, scope: str, project: str | None, files: Iterable[str] | str | None) -> str:
        """Return the project a new memory is saved under: the one given, else the rule's.

        A project memory is this project's. A personal one is global (``""``), unless it cites
        files: they are paths of this repository, so it is this project's.
        """
        if project is not None and project.strip():
            return project
        if scope == "personal" and not (self.has_project and as_list(files)):
            return ""
        return self.name

    def live_records(self) -> list[Record]:
        """Return every live memory of the project and personal stores."""
        out: list[Record] = []
        for ws in self.workspaces():
            out += ws.index.all_records()
        return out

    def repo_paths(self, paths: Iterable[str] | str | None) -> list[str]:
        """Return paths as agents send them (absolute, or from the current folder) repo-relative.

        One rule for every adapter: ``engram.model.repo_path`` against this repository's root
        and the current folder (the caller's, inside ``calling_from``); a path outside the
        repository is refused. With no
        project open there is no repository: paths are kept as written.
        """
        if not self.has_project:
            return [model.normalize_path(path) for path in as_list(paths)]
        cwd = CALLER_FOLDER.get()
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError:  # the current folder was removed
                cwd = None
        return [repo_path(path, self.root, cwd) for path in as_list(paths)]

    # -- lookups -------------------------------------------------------------------------------

    def locate(
        self, ref: str, *, include_deleted: bool = False, changing: str = ""
    ) -> tuple[Workspace, Record]:
        """Find the workspace and record an id or unique id prefix names.

        ``changing`` names a command that changes the memory (forget, update …): its prefix
        must be at least MIN_WRITE_PREFIX characters long, unless it is a whole id.
        """
        prefix = check_id(ref)
        workspaces = self.workspaces()
        if (
            changing
            and len(prefix) < MIN_WRITE_PREFIX
            and all(ws.index.get(prefix) is None for ws in workspaces)
        ):
            raise InvalidInput(
                f"id prefix {prefix!r} is too short to {changing} a memory: "
                f"give at least {MIN_WRITE_PREFIX} characters of its id",
                hint=f"{advice.cmd('recall', query='WORDS')} shows the ids",
            )
        ws, rid = _resolve(workspaces, prefix)
        record = ws.index.get(rid)
        if record is None:
            raise NotFound(f"no memory with id {prefix}")
        if is_tombstone(record) and not include_deleted:
            # edits made elsewhere that the forget had not seen: kept on it by the merge
            unseen = [c for c in record.get("conflicts") or [] if "deleted_at" not in c]
            kept = f"; it keeps {len(unseen)} edit(s) made on another clone" if unseen else ""
            raise NotFound(
                f"memory {rid} was forgotten at {record.get('deleted_at')}{kept}",
                hint=f"{advice.cmd('export')} shows tombstones and the text they keep; a "
                f"forgotten memory cannot be edited (save the text again with "
                f"{advice.cmd('remember')})",
            )
        return ws, record

    def recall(
        self,
        query: str = "",
        *,
        limit: int = 10,
        offset: int = 0,
        all_projects: bool | None = False,
        **filters: Any,
    ) -> list[Hit]:
        """Return ranked memories of both stores for any text (best first; filters: AND).

        Personal memories are this project's and the global ones, unless ``all_projects`` (or
        the project filter ``*``) asks for every project's.
        """
        if limit < 0 or offset < 0:
            raise InvalidInput("limit and offset must not be negative")
        if filters.get("files"):
            filters["files"] = self.repo_paths(filters["files"])
        if ALL_PROJECTS in as_list(filters.get("projects")):
            all_projects, filters["projects"] = True, None
        q = Query.build(query, limit=limit + offset, **filters)
        hits: list[Hit] = []
        for ws in self.workspaces(q.scopes):
            if ws.scope == "personal" and not q.projects and not all_projects:
                hits.extend(ws.index.search(replace(q, projects=self.personal_projects)))
            else:
                hits.extend(ws.index.search(q))
        hits.sort(key=lambda hit: (-hit.score, hit.id))
        if hits and hits[0].bm25 > 0:
            floor = hits[0].score * self.ws.index.weights.min_score_ratio
            hits = [hit for hit in hits if hit.score >= floor]
        return hits[offset : offset + limit]

    def short_ids(self, ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
        """Return each id's shortest prefix, at least ``minimum`` long, that names only it."""
        ids = list(ids)
        if not ids:
            return {}
        resolvers = [ws.index.resolver() for ws in self.workspaces()]  # each refreshed once
        out: dict[str, str] = {}
        for rid in ids:
            out[rid] = rid
            for size in range(minimum, len(rid)):
                prefix, unique = rid[:size], True
                for resolve in resolvers:
                    try:
                        unique = resolve(prefix) == rid
                    except NotFound:
                        continue
                    except AmbiguousId:
                        unique = False
                    if not unique:
                        break
                if unique:
                    out[rid] = prefix
                    break
        return out

    def hotspots(self) -> Record | None:
        """Return the project's "Code hotspots" memory, unless it is forgotten or put aside."""
        from engram.indexer.plan import hotspots_id

        record = self.ws.index.get(hotspots_id(self.name))
        if record is None or is_tombstone(record):
            return None
        if status_of(record) in ("archived", "rejected"):
            return None
        return record

    # -- staleness -----------------------------------------------------------------------------

    def stale_many(
        self, records: Iterable[Mapping[str, Any]], *, own: Collection[str] = ()
    ) -> dict[str, list[str]]:
        """Say, by id, which anchored files of memories changed in git since they were written.

        One sentence per file, e.g. ``src/auth.py changed in 3 commits since it was written``;
        only memories with something to say are named. Answers are cached per HEAD. ``own``
        names the repository paths the asking agent session edited itself: their uncommitted
        change is that session's work in progress, not a sign that a memory is out of date.
        """
        if not self.has_project:
            return {}
        name = self.name
        wanted = [
            r
            for r in records
            if isinstance(r.get("anchors"), list)
            and r.get("anchors")
            # Anchored in another project's repository (a personal memory): not checked here.
            and str(r.get("project") or "") == name
        ]
        if not wanted:
            return {}
        if self._anchor_checker is None:
            from engram.indexer.anchors import AnchorChecker

            self._anchor_checker = AnchorChecker(self.root, self.ws.store.state_dir)
        items = [(r["anchors"], epoch(r.get("created_at")) or None) for r in wanted]
        # What no commit shows yet is said too: the file as it is now differs from the
        # anchored one (not for a file a commit already changed, nor for the session's own
        # edit).
        looked = self._anchor_checker.look_many(items, own)
        out: dict[str, list[str]] = {}
        for record, (found, edits) in zip(wanted, looked, strict=True):
            lines = []
            for item in found:
                if item.deleted:
                    lines.append(f"{item.path} was deleted since it was written")
                    continue
                least = "at least " if item.capped else ""
                plural = "commit" if item.commits == 1 else "commits"
                count = f"{least}{item.commits} {plural}"
                lines.append(f"{item.path} changed in {count} since it was written")
            for path, removed in edits:
                if removed:
                    lines.append(f"{path} was removed from the work tree (not committed)")
                else:
                    lines.append(f"{path} has uncommitted changes since it was written")
            if lines:
                out[str(record.get("id", ""))] = lines
        return out

    def stale(self, record: Mapping[str, Any], *, own: Collection[str] = ()) -> list[str]:
        """Return ``stale_many`` of one memory (``[]`` when its files are unchanged)."""
        return self.stale_many([record], own=own).get(str(record.get("id", "")), [])

    @property
    def anchor_checker(self) -> AnchorChecker | None:
        """The anchor checker, once a staleness question made it (for benchmarks and tests)."""
        return self._anchor_checker

    # -- sessions and names --------------------------------------------------------------------

    @property
    def sessions(self) -> SessionLog:
        """The clone's session log (state/sessions.json)."""
        if self._sessions is None:
            from engram.store.sessions import SessionLog

            ws = self.ws
            timeout = float(ws.config.number("store.lock_timeout_seconds"))
            self._sessions = SessionLog(
                ws.store.state_dir, lock_timeout=timeout, scrubber=lambda: ws.store.scrubber
            )
        return self._sessions

    def session_id(self, session_id: str | None, project: str) -> str | None:
        """Return the session id given, else the open session of ``project`` (or None)."""
        if session_id is not None and str(session_id).strip():
            return check_session_id(str(session_id))
        current = self.sessions.open_session(project)
        return str(current["id"]) if current else None

    def project_name(self, project: str | None) -> str:
        """Return the project a caller named (scrubbed, normalised), else this project's name."""
        # Scrubbed before lower-casing: a key in a project name must not slip past the rules.
        name = self.redact(str(project or ""))[0]
        return normalize_project(name) or self.name

    def redact(self, text: str) -> tuple[str, int]:
        """Return text with what a write would redact replaced, and how many secrets that was."""
        if not text:
            return text, 0  # nothing to scrub, and no rules to load for it
        return self.ws.store.scrubber.text(text)


def check_session_id(value: str) -> str:
    """Return a session id a caller gave, stripped; refuse an empty, long or unprintable one."""
    text = str(value).strip()
    if not text or len(text) > 200 or any(ord(ch) < 32 for ch in text):
        raise InvalidInput(
            f"invalid session id {value[:40]!r}: 1–200 printable characters",
            hint="use the id session_start returned",
        )
    return text


def _resolve(workspaces: list[Workspace], prefix: str) -> tuple[Workspace, str]:
    """Return the workspace and full id an id prefix names in exactly one memory."""
    found: list[tuple[Workspace, str]] = []
    ambiguous: AmbiguousId | None = None
    for ws in workspaces:
        try:
            found.append((ws, ws.index.resolve(prefix)))
        except NotFound:
            continue
        except AmbiguousId as exc:
            ambiguous = exc
    if ambiguous is not None:
        raise ambiguous
    if not found:
        raise NotFound(f"no memory with id {prefix}")
    if len(found) > 1 and not any(rid == prefix for _, rid in found):
        raise AmbiguousId(f"id prefix {prefix!r} matches memories in several stores")
    return next(((w, r) for w, r in found if r == prefix), found[0])
