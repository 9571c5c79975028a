"""The service facade: the one API every adapter (CLI, MCP, HTTP, TUI, daemon) calls.

``Engram`` opens a project (``engram.project.Project``: the project's workspace, the personal
store under ENGRAM_HOME for ``scope=personal``, the session log), chooses the workspace an
operation works on, forwards each operation to the feature module that owns it, and closes what
it opened. The logic lives in the features: the write path in ``engram.project.memories``, lineage,
neighbours and timeline in ``engram.project.graph``, ``engram.agents.check``, the briefing in
``engram.agents.briefing``, sessions and capture in ``engram.agents.session``,
``engram.hygiene.judging``, consolidation and insights in ``engram.hygiene``,
``engram.project.names``, git in ``engram.project.git``, the indexers in
``engram.project.indexing``, sync in ``engram.sync``. ``Engram.personal_only`` serves the personal
store alone where no project exists; the operations marked ``@in_project`` then answer
``NotInitialized`` in words for the person (``engram.project.no_project``), and a project-scoped one
refuses its project scope the same way. Operations return typed results: dataclasses of the feature
that builds them, each with one ``to_dict()`` that the adapters send (a method's return type is its
operation's declared ``result``; tests/service/test_contract.py holds them together), or
records; a recall with no hits returns ``[]``. Errors are ``EngramError``s with a hint. Nothing
here imports typer, rich, mcp or an HTTP framework, and nothing here prints.
"""

from __future__ import annotations

import contextlib
import functools
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack

from engram import config as config_mod
from engram import project as project_mod
from engram.errors import ConfigError, CorruptStore, InvalidInput, NotInitialized
from engram.index.query import Hit
from engram.model import Record, normalize_project
from engram.project import Project, memories
from engram.project.memories import Draft, SaveResult
from engram.store import init_layout
from engram.sync import transfer
from engram.sync.transfer import ImportResult
from engram.workspace import Workspace

if TYPE_CHECKING:
    from engram.agents.briefing import Briefing, StandingCache
    from engram.agents.check import Findings
    from engram.agents.gitguard import PullRequestReview, StagedCheck
    from engram.agents.hookspec import HookSpec
    from engram.agents.payload import Event
    from engram.agents.session import Capture, Session
    from engram.formats.goexport import GoExport
    from engram.formats.instructions import BlockWrite
    from engram.formats.obsidian import ExportResult
    from engram.hygiene.consolidate import Applied, Group, Plan
    from engram.hygiene.curate import Training
    from engram.hygiene.finding import Finding
    from engram.project.git import GitSetup
    from engram.project.graph import Lineage, Neighbour, Timeline
    from engram.project.indexing import IndexReport, IndexSummary, Stats
    from engram.project.names import ProjectInfo, ProjectMerge, ProjectPrune, VariantGroup
    from engram.store.sessions import SessionLog
    from engram.sync.exchange import SyncReport, SyncStatus
    from engram.sync.gitdiff import MemoryDiff
    from engram.sync.gitguard import HookInstall
    from engram.sync.gitlog import Version
    from engram.sync.gitresolve import Resolved
    from engram.sync.transfer import ExportDocument

Progress = Callable[[int, int], None]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_project(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark an operation that needs a project's store (refused where only the personal is open)."""
    what = method.__name__.strip("_").replace("_", " ")

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        facade = args[0]
        if isinstance(facade, Engram):
            facade.here.require_project(what)
        return method(*args, **kwargs)

    return guarded


class Engram:
    """The facade over one project (and the personal store for ``scope=personal``)."""

    def __init__(self, root: Path | Project) -> None:
        self.here = root if isinstance(root, Project) else Project(root)
        self._context_cache: StandingCache | None = None  # context's query-free sections

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | None = None) -> Engram:
        """Open the project holding ``path`` (default: the working directory)."""
        return cls(config_mod.find_root(path))

    @classmethod
    def personal_only(cls, where: Path | None = None) -> Engram:
        """Open the personal store alone, for ``where`` (default: here), a folder with no project.

        Recall, get, remember with scope=personal, context and the other reads and edits of
        memories work on it; what needs a project answers NotInitialized for the person.
        """
        return cls(Project.personal_only((where or Path.cwd()).resolve()))

    @property
    def has_project(self) -> bool:
        """Tell whether a project's store is open (False: the personal store alone)."""
        return self.here.has_project

    @classmethod
    def init(
        cls, path: Path | None = None, project: str | None = None, *, git: bool = True
    ) -> tuple[Engram, list[Path]]:
        """Create .engram/ in ``path`` (default: the git work tree here); keep what exists.

        ``git``: also install the merge and diff drivers (``git_setup(install=True)``; a caller
        that reports what they changed passes False and calls it itself).
        """
        root = config_mod.find_repo_root(path) if path is None else path.resolve()
        root.mkdir(parents=True, exist_ok=True)
        name = normalize_project(project or "") or config_mod.detect_project(root)
        created = init_layout(root / config_mod.ENGRAM_DIR, name)
        engram = cls(root)
        if git:
            engram.git_setup(install=True)
        return engram, created

    def close(self) -> None:
        """Release index files of every open workspace."""
        self.here.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def calling_from(self, folder: str) -> contextlib.AbstractContextManager[None]:
        """Take relative paths as typed in ``folder`` in this block (a caller in another process).

        A daemon answering a command line runs it here for a shell whose current folder is
        ``folder``: ``--files money.py`` typed in ``ledger/`` is ``ledger/money.py`` there too.
        """
        return project_mod.calling_from(folder)

    @property
    def root(self) -> Path:
        """The project's folder (the one holding .engram/)."""
        return self.here.root

    @property
    def project_ws(self) -> Workspace:
        """The project's workspace: .engram/ of this project."""
        return self.here.ws

    @property
    def config(self) -> config_mod.Config:
        return self.here.config

    @property
    def project(self) -> str:
        """This project's name (config.yaml, else the git remote, else the folder; normalised)."""
        return self.here.name

    @property
    def sessions(self) -> SessionLog:
        """The clone's session log (state/sessions.json)."""
        return self.here.sessions

    def personal(self, *, create: bool = False) -> Workspace | None:
        """Return the personal store's workspace (ENGRAM_HOME), creating it if asked."""
        return self.here.personal(create=create)

    def _scoped(self, scope: str) -> Workspace:
        """Return the workspace of a whole-store operation: ``project`` or ``personal``."""
        if scope not in ("project", "personal"):
            raise InvalidInput(f"unknown scope {scope!r}; use project or personal")
        return self.here.workspace(scope)

    # -- writes ------------------------------------------------------------------------------

    def scrub_text(self, text: str) -> str:
        """Return text with what a write would redact replaced: for text a title is cut from."""
        return self.here.redact(text)[0]

    def remember(self, title: str, content: str = "", **draft: Unpack[Draft]) -> SaveResult:
        """Save a memory; an identical recent save or a known topic key updates instead.

        ``draft`` holds the other fields (kind, tags, files, importance, status, scope,
        topic_key, links, source, session_id, author, project, extra): see ``Draft``.
        """
        return memories.remember(self.here, title, content, **draft)

    def update(self, ref: str, **changes: Any) -> Record:
        """Change fields of a memory (rev+1; earlier title and content kept in history)."""
        return memories.update(self.here, ref, changes)

    def forget(self, ref: str, *, hard: bool = False) -> Record:
        """Delete a memory: a tombstone that travels to other clones (hard drops the text)."""
        return memories.forget(self.here, ref, hard=hard)

    def pin(self, ref: str) -> Record:
        """Pin a memory: every session briefing shows it first, within its budget."""
        return memories.set_pinned(self.here, ref, True)

    def unpin(self, ref: str) -> Record:
        """Unpin a memory: the briefing ranks it like any other again."""
        return memories.set_pinned(self.here, ref, False)

    # -- reads -------------------------------------------------------------------------------

    def by_go_id(self, number: int) -> Record:
        """Return the memory a Go engram integer id names (imported with it, or derived)."""
        return memories.find_by_go_id(self.here, number)

    def stale(self, record: Mapping[str, Any]) -> list[str]:
        """Say which of a memory's anchored files changed in git since it was written."""
        return self.here.stale(record)

    def stale_many(self, records: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
        """Return ``stale`` for several memories by id (only those with something to say)."""
        return self.here.stale_many(records)

    def suggest_topic_key(self, *, kind: str = "", title: str = "", content: str = "") -> str:
        """Suggest a stable ``family/segment`` topic key for a memory about to be saved."""
        from engram.model import suggest_topic_key

        return suggest_topic_key(kind, title, content)

    def get(self, ref: str) -> Record:
        """Return the full memory an id or unique prefix names."""
        return self.here.locate(ref)[1]

    def target(self, ref: str, changing: str) -> Record:
        """Return the memory a command about to change it names (a prefix of 4+ characters)."""
        return self.here.locate(ref, changing=changing)[1]

    def why(self, ref: str) -> Lineage:
        """Return the lineage of a memory: supersede chains, links, provenance, judgements."""
        from engram.project.graph import why

        return why(self.here, ref)

    def related(self, ref: str, *, limit: int = 10) -> list[Neighbour]:
        """Return a memory's neighbours by links, shared files and shared tags, best first."""
        from engram.project.graph import neighbours

        return neighbours(self.here, ref, limit=limit)

    @in_project
    def check(
        self, files: Iterable[str] | str, *, text: str = "", budget: int | None = None
    ) -> Findings:
        """Return what the memory knows about files about to be edited, packed under a budget."""
        from engram.agents.check import check_files

        return check_files(self.here, files, text=text, budget=budget)

    @in_project
    def check_staged(self, *, budget: int | None = None) -> StagedCheck:
        """Return what the memory knows about the staged files, and what blocks the commit."""
        from engram.agents.gitguard import check_staged

        return check_staged(self.here, budget=budget)

    @in_project
    def review_pr(self, spec: str) -> PullRequestReview:
        """Return the pull-request comment for a range: memory changes, pitfalls, decisions."""
        from engram.agents.gitguard import review_range

        return review_range(self.here, spec, self.project_ws.store.path)

    @in_project
    def setup_git_hooks(self, *, dry_run: bool = False) -> HookInstall:
        """Install the pre-commit hook running ``engram check --staged`` (chaining any other)."""
        from engram.sync.gitguard import install_hook

        return install_hook(self.root, "engram", dry_run=dry_run)

    def short_ids(self, ids: Iterable[str], minimum: int = 8) -> dict[str, str]:
        """Return each id's shortest prefix, at least ``minimum`` long, that names only it."""
        return self.here.short_ids(ids, minimum)

    def recall(
        self, query: str = "", *, limit: int = 10, offset: int = 0, **filters: Any
    ) -> list[Hit]:
        """Return ranked memories for any text (best first; filters combine with AND).

        ``filters`` are the recall filters engram.operations declares, by their Query field
        (``kinds``, ``tags``, ``files`` …); the index reads them (``Query.build``).
        """
        return self.here.recall(query, limit=limit, offset=offset, **filters)

    def problems(self) -> list[tuple[int, str]]:
        """Return unreadable lines the index skipped in memories.jsonl (for warnings)."""
        return self.here.ws.index.stored_problems()

    def stats(self) -> Stats:
        """Return counts by kind, status, scope and project, and the sizes of the files."""
        from engram.project.indexing import stats

        return stats(self.here)

    def context(self, *, budget: int | None = None, query: str = "") -> Briefing:
        """Return the session-start briefing packed under a token budget (text, items, tokens)."""
        from engram.agents.briefing import StandingCache, brief

        if self._context_cache is None:
            self._context_cache = StandingCache()
        return brief(self.here, self._context_cache, budget=budget, query=query)

    def hook(self, spec: HookSpec, event: Event) -> str:
        """Return what an agent reads at one of its hooks (the briefing, a check …), acting."""
        from engram.agents.answer import answer
        from engram.agents.briefing import StandingCache

        if self._context_cache is None:
            self._context_cache = StandingCache()
        return answer(self.here, self._context_cache, spec, event)

    # -- sessions, prompts, capture, timeline ------------------------------------------------

    @in_project
    def session_start(
        self, session_id: str | None = None, *, directory: str = "", project: str | None = None
    ) -> Session:
        """Start (or reopen) a session; without an id a new one is made. Returns the session."""
        from engram.agents import session

        return session.start(self.here, session_id, directory=directory, project=project)

    @in_project
    def session_end(
        self, session_id: str | None = None, *, summary: str = "", project: str | None = None
    ) -> Session:
        """End a session (default: the open one), saving ``summary`` as its summary if given."""
        from engram.agents import session

        return session.end(self.here, session_id, summary=summary, project=project)

    @in_project
    def session_summary(
        self,
        content: str = "",
        *,
        session_id: str | None = None,
        project: str | None = None,
        **sections: str | None,
    ) -> SaveResult:
        """Save a session summary (a ``session`` memory: a later one of the session revises it)."""
        from engram.agents import session

        return session.save_summary(
            self.here, content, session_id=session_id, project=project, sections=sections
        )

    @in_project
    def save_prompt(
        self, content: str, *, session_id: str | None = None, project: str | None = None
    ) -> SaveResult:
        """Save a user's prompt (kind ``prompt``; redacted like every memory)."""
        from engram.agents import session

        return session.save_prompt(self.here, content, session_id=session_id, project=project)

    @in_project
    def capture(
        self,
        text: str,
        *,
        session_id: str | None = None,
        project: str | None = None,
        source: str = "capture",
    ) -> Capture:
        """Save the learnings of an agent's output (its last "Key Learnings" section)."""
        from engram.agents import session

        return session.capture(
            self.here, text, session_id=session_id, project=project, source=source
        )

    def timeline(self, ref: str, *, before: int = 5, after: int = 5) -> Timeline:
        """Return what happened before and after a memory, oldest first."""
        from engram.project.graph import timeline

        return timeline(self.here, ref, before=before, after=after)

    # -- export / import ---------------------------------------------------------------------

    def export(self, *, scope: str = "project") -> ExportDocument:
        """Return every memory and tombstone of a store as engram's export document."""
        return transfer.export(self._scoped(scope))

    def export_go(self, *, scope: str = "project") -> GoExport:
        """Return a store's memories as the JSON file Go engram's ``engram import`` reads."""
        from engram.formats.goexport import GoName
        from engram.sync.gotransfer import export_go

        name = GoName(self.project, self.root.name) if scope == "project" else None
        return export_go(self._scoped(scope), name)

    @in_project
    def import_(self, document: Any, *, progress: Progress | None = None) -> ImportResult:
        """Merge an export document into the store through the one merge function."""
        return transfer.import_document(self.here.ws, document, progress=progress)

    @in_project
    def import_path(self, path: Path, *, progress: Progress | None = None) -> ImportResult:
        """Import a file or folder of another memory tool (format detected) or of engram.

        A Go engram file goes through ``engram.sync.gotransfer``: its personal rows go to the
        personal store, and its rows land on the memories both stores already hold. Plain rows
        and folders of Markdown notes go through ``engram.sync.plaintransfer``.
        """
        from engram.sync.gotransfer import import_go_file, import_path
        from engram.sync.plaintransfer import import_plain

        plain = import_plain(
            self.here.ws,
            lambda: self.here.workspace("personal"),
            path,
            project=self.project,
            progress=progress,
        )
        if plain is not None:
            return plain
        go = import_go_file(
            self.here.ws,
            lambda: self.here.workspace("personal"),
            path,
            project=self.project,
            stores=self.here.workspaces(),
            progress=progress,
            go_names=(self.root.name,),
        )
        if go is not None:
            return go
        return import_path(self.here.ws, path, project=self.project, progress=progress)

    @in_project
    def import_platform(
        self,
        platform: str,
        *,
        folder: Path | None = None,
        home: Path | None = None,
        progress: Progress | None = None,
    ) -> ImportResult:
        """Import another agent's own memory files as proposed memories (``engram review``)."""
        from engram.sync.plaintransfer import import_platform

        return import_platform(
            self.here.ws,
            lambda: self.here.workspace("personal"),
            platform,
            root=self.root,
            home=home if home is not None else Path.home(),
            folder=folder,
            project=self.project,
            progress=progress,
        )

    @in_project
    def import_go(self, data: bytes, *, name: str = "the request body") -> ImportResult:
        """Import the bytes of a Go engram export or chunk as ``import_path`` imports its file."""
        from engram.sync.gotransfer import import_go_data

        result = import_go_data(
            self.here.ws,
            lambda: self.here.workspace("personal"),
            data,
            name,
            project=self.project,
            stores=self.here.workspaces(),
            go_names=(self.root.name,),
        )
        if result is None:
            raise InvalidInput(
                f"{name} is not a Go engram export or sync chunk",
                hint="send the JSON of Go engram's `engram export` (sessions, observations, "
                "prompts)",
            )
        return result

    # -- hygiene: judge, consolidate, insights ----------------------------------------------

    def judge(
        self,
        ref: str,
        *,
        score: float | None = None,
        verdict: str | None = None,
        reason: str = "",
        query: str = "",
        author: str | None = None,
    ) -> Record:
        """Record a judgement of a memory (who, when, why); it moves the memory's ranking."""
        from engram.hygiene.judging import judge

        return judge(
            self.here, ref, score=score, verdict=verdict, reason=reason, query=query, author=author
        )

    @in_project
    def consolidate_preview(self) -> list[Group]:
        """Return the candidate groups for consolidation, each with a reason and an action."""
        from engram.hygiene.curate import groups

        return groups(self.here)

    @in_project
    def consolidate(
        self,
        *,
        groups: Sequence[Group | Mapping[str, Any]] | None = None,
        llm: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> Plan:
        """Return a consolidation plan: merge, archive, delete or keep, per group."""
        from engram.hygiene.curate import plan

        return plan(self.here, chosen=groups, llm=llm)

    @in_project
    def consolidate_apply(
        self, plan: Plan | Mapping[str, Any] | None = None, *, dry_run: bool = False
    ) -> Applied:
        """Apply a consolidation plan (default: a fresh one); nothing is lost, twice is a no-op."""
        from engram.hygiene.curate import apply_plan

        return apply_plan(self.here, plan, dry_run=dry_run)

    @in_project
    def train(
        self,
        *,
        timeout: float | None = None,
        on_event: Callable[[Any], None] | None = None,
        command: Sequence[str] | None = None,
    ) -> Training:
        """Run the trainer; store its insights as ``insight`` memories derived from sources."""
        from engram.hygiene.curate import train

        return train(self.here, timeout=timeout, on_event=on_event, command=command)

    def insights(self) -> list[Record]:
        """Return the live insight memories, newest first."""
        from engram.hygiene.curate import insights

        return insights(self.here)

    def delete_insight(self, ref: str) -> Record:
        """Forget an insight memory (a tombstone: a later training does not bring it back)."""
        from engram.hygiene.curate import delete_insight

        return delete_insight(self.here, ref)

    # -- projects ----------------------------------------------------------------------------

    def projects(self) -> list[ProjectInfo]:
        """Return every project named in the project and personal stores, with its counts."""
        from engram.project.names import listing

        return listing(self.here)

    def projects_merge(
        self, sources: Iterable[str], into: str, *, dry_run: bool = False
    ) -> ProjectMerge:
        """Move the memories of ``sources`` to project ``into`` (rev+1 each), in both stores."""
        from engram.project.names import merge

        return merge(self.here, sources, into, dry_run=dry_run)

    def projects_variants(self) -> list[VariantGroup]:
        """Return groups of project names that look like one project spelled differently."""
        from engram.project.names import variants

        return variants(self.here)

    @in_project
    def projects_prune(self, *, dry_run: bool = False) -> ProjectPrune:
        """Forget projects that have no live memory left: their entries in the session log."""
        from engram.project.names import prune

        return prune(self.here, dry_run=dry_run)

    def obsidian_export(
        self,
        vault: Path,
        *,
        project: str | None = None,
        since: str | None = None,
        folder: str = "engram",
    ) -> ExportResult:
        """Write the memories as notes in an Obsidian vault (incremental; the user's notes kept)."""
        from engram.formats.obsidian import export_vault

        name = normalize_project(project) if project else None
        records = self.here.live_records()
        return export_vault(records, Path(vault), folder=folder, project=name, since=since)

    def export_instructions(
        self, fmt: str, *, to: Path | None = None, budget: int | None = None
    ) -> BlockWrite:
        """Write the pinned and important memories into an agent's instruction file's block.

        Only the project store's memories: a committed file never carries personal ones.
        """
        from engram.formats.instructions import write_block

        if budget is None:
            budget = int(self.config.number("export.budget"))
        records = self.project_ws.index.all_records()
        return write_block(fmt, records, self.root, to=to, budget=budget)

    def refresh_instructions(self) -> list[BlockWrite]:
        """Rewrite the blocks of the formats config.yaml's ``export.formats`` names."""
        formats = self.config.get("export.formats")
        if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
            raise ConfigError(f"setting 'export.formats' must be a list of names, got {formats!r}")
        return [self.export_instructions(fmt) for fmt in formats]

    # -- git integration ---------------------------------------------------------------------

    @staticmethod
    def merge_driver(base: Path, ours: Path, theirs: Path, pathname: str = "") -> int:
        """git's merge driver for .engram files: merge %O %A %B into %A; 0 when clean."""
        from engram.project.git import merge_driver

        return merge_driver(base, ours, theirs, pathname)

    @staticmethod
    def textconv(args: list[str]) -> int:
        """git's diff driver for memories.jsonl: print ``args``' file as readable blocks."""
        from engram.sync.gitdiff import textconv_main

        return textconv_main(args)

    def diff(self, spec: str | None = None, *, scope: str = "project") -> MemoryDiff:
        """List the memories added, changed and forgotten between two versions of a store."""
        from engram.project.git import diff

        return diff(self._scoped(scope).store.path, spec)

    @in_project
    def git_setup(self, *, install: bool = False, command: str | None = None) -> GitSetup:
        """Report (and with ``install`` write) .gitattributes and the drivers' config."""
        from engram.project.git import setup

        return setup(self.root, install=install, command=command)

    @in_project
    def resolve(self) -> list[Resolved]:
        """Rebuild conflicted .engram files from git's three stages (or their markers)."""
        from engram.project.git import resolve

        return resolve(self.here)

    @in_project
    def log(self, ref: str, *, limit: int = 50) -> list[Version]:
        """Return the versions of one memory in the commits reachable from HEAD, newest first."""
        from engram.project.git import log

        return log(self.here, ref, limit=limit)

    # -- sync --------------------------------------------------------------------------------

    def sync(
        self,
        *,
        scope: str = "project",
        remote: str | None = None,
        branch: str | None = None,
        progress: Progress | None = None,
        export: bool = True,
        only_project: str | None = None,
    ) -> SyncReport:
        """Import the sync chunks not applied here, export this clone's changes (and ``remote``).

        ``export=False`` only imports; ``only_project`` exports that project's changes only.
        """
        from engram.sync import exchange
        from engram.sync.gotransfer import GoRoute

        ws = self._scoped(scope)
        # Go engram chunks' personal rows go to the personal store, as an import sends them.
        route = GoRoute(self.here.workspaces, lambda: self.here.workspace("personal"))
        report = exchange.sync(
            ws,
            root=self.root,
            project=self.project,
            remote=remote,
            branch=branch,
            progress=progress,
            route=route,
            export=export,
            only_project=only_project,
        )
        if scope == "project" and self.has_project:
            report.instructions = self.refresh_instructions()
        return report

    def sync_status(self, *, scope: str = "project") -> SyncStatus:
        """Return the chunks, their contributors and what is pending either way."""
        from engram.sync import exchange

        return exchange.sync_status(self._scoped(scope))

    # -- maintenance -------------------------------------------------------------------------

    def reindex(self, *, rebuild: bool = False, progress: Progress | None = None) -> IndexReport:
        """Bring the index up to date (or rebuild it from scratch); return counts."""
        from engram.project.indexing import reindex

        return reindex(self.here, rebuild=rebuild, progress=progress)

    @in_project
    def index_project(
        self,
        *,
        adr: bool = True,
        git: bool = True,
        dry_run: bool = False,
        rebuild: bool = False,
        progress: Progress | None = None,
    ) -> IndexSummary:
        """Create and refresh memories from the project's ADRs and git history; summarise."""
        from engram.project.indexing import index_project

        return index_project(
            self.here, adr=adr, git=git, dry_run=dry_run, rebuild=rebuild, progress=progress
        )

    @in_project
    def doctor(self, *, fix: bool = False) -> list[Finding]:
        """Check the store, its git hygiene, secrets, index drift and agent setups; repair."""
        from engram.hygiene.doctor import run_checks
        from engram.project.git import driver_command

        ws = self.here.ws

        def agents() -> list[tuple[str, str]]:
            from engram.agents.health import agent_problems

            return [(p.severity, p.message) for p in agent_problems(self.root)]

        return run_checks(
            ws.config,
            ws.store,
            ws.index,
            fix=fix,
            driver_command=driver_command(),
            agents=agents,
        )


def version_info() -> dict[str, str]:
    """Return the versions of engram, Python and the main dependencies."""
    out = {"engram": _version("engram-git"), "python": platform.python_version()}
    for name in ("tantivy", "mcp", "dulwich", "typer"):
        out[name] = _version(name)
    return out


def _version(name: str) -> str:
    from importlib import metadata  # slow to import: only `engram version` needs it

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


__all__ = [
    "CorruptStore",
    "Engram",
    "Hit",
    "ImportResult",
    "NotInitialized",
    "SaveResult",
    "Workspace",
    "version_info",
]
