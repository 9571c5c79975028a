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
records; a recall with no hits returns ``[]``. ``recall_views`` returns a recall's hits finished
(``engram.operations.views.HitView``: short id, staleness, matched fields, relevance), which
every door renders as it is. The result types the adapters name are handed out here too (the
``X as X`` imports), so an adapter imports the facade, not the module behind it. Errors are
``EngramError``s with a hint. Nothing here imports typer, rich, mcp or an HTTP framework, and
nothing here prints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, Unpack

from engram import config as config_mod
from engram import project as project_mod
from engram.errors import CorruptStore, InvalidInput, NotInitialized
from engram.index.query import Hit
from engram.model import Record, normalize_project
from engram.operations import compat_go
from engram.operations.views import ID_CHARS, HitView, hit_views
from engram.project import NO_PROJECT_HINT, Project, memories
from engram.project.memories import Draft, SaveResult
from engram.service_exchange import Exchange, in_project
from engram.store import init_layout
from engram.sync.transfer import ImportResult
from engram.workspace import Workspace

if TYPE_CHECKING:  # ``X as X``: result types the facade hands its adapters
    from engram.agents.briefing import Briefing as Briefing
    from engram.agents.briefing import StandingCache
    from engram.agents.check import Findings as Findings
    from engram.agents.gitguard import PullRequestReview, StagedCheck
    from engram.agents.hookspec import HookSpec
    from engram.agents.inbox import Captured, Review
    from engram.agents.payload import Event
    from engram.agents.session import Capture, Session
    from engram.formats.obsidian import ExportResult
    from engram.hygiene.consolidate import Applied as Applied
    from engram.hygiene.consolidate import Group, Plan
    from engram.hygiene.curate import Training
    from engram.hygiene.finding import Finding
    from engram.project.git import GitSetup as GitSetup
    from engram.project.graph import Lineage as Lineage
    from engram.project.graph import Neighbour as Neighbour
    from engram.project.graph import Summary as Summary
    from engram.project.graph import Timeline as Timeline
    from engram.project.graph import TimelineEntry as TimelineEntry
    from engram.project.indexing import IndexReport
    from engram.project.indexing import IndexSummary as IndexSummary
    from engram.project.indexing import Stats as Stats
    from engram.project.names import ProjectInfo, ProjectMerge, ProjectPrune, VariantGroup
    from engram.store.sessions import SessionLog
    from engram.sync.exchange import SyncReport as SyncReport
    from engram.sync.exchange import SyncStatus as SyncStatus
    from engram.sync.gitdiff import FieldChange as FieldChange
    from engram.sync.gitdiff import MemoryDiff as MemoryDiff
    from engram.sync.gitguard import HookInstall

Progress = Callable[[int, int], None]
_P = ParamSpec("_P")
_R = TypeVar("_R")


class Engram(Exchange):
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
        self,
        query: str = "",
        *,
        limit: int = 10,
        offset: int = 0,
        of_type: str | None = None,
        observations: bool = False,
        **filters: Any,
    ) -> list[Hit]:
        """Return ranked memories for any text (best first; filters combine with AND).

        ``filters`` are the recall filters engram.operations declares, by their Query field
        (``kinds``, ``tags``, ``files`` …); the index reads them (``Query.build``). ``of_type``
        keeps a type engram does not rank by (Go's ``command``), ``observations`` leaves out
        Go engram's other tables (prompts): both filter after ranking, by Go's one rule
        (``compat_go.after_ranking``), and page over what they kept.
        """

        def rank(count: int, start: int) -> list[Hit]:
            return self.here.recall(query, limit=count, offset=start, **filters)

        return compat_go.after_ranking(
            rank, typ=of_type, limit=limit, offset=offset, observations=observations
        )

    def recall_views(
        self,
        query: str = "",
        *,
        limit: int = 10,
        offset: int = 0,
        of_type: str | None = None,
        observations: bool = False,
        **filters: Any,
    ) -> list[HitView]:
        """Return a recall's hits as every door shows them: ``recall``, finished.

        Each view carries its short id (``ID_CHARS`` or longer where that names two memories),
        why it may be stale, the fields the query matched and its relevance; an adapter only
        renders them, so one query answers the same through the CLI, MCP, HTTP, the web page
        and the daemon.
        """
        hits = self.recall(
            query,
            limit=limit,
            offset=offset,
            of_type=of_type,
            observations=observations,
            **filters,
        )
        return self.views(hits)

    def views(self, hits: Sequence[Hit]) -> list[HitView]:
        """Return the views of ranked hits, finished as ``recall_views`` finishes them.

        For an adapter that picks its hits from a longer ranking (MCP's next page leaves out
        what earlier pages showed) before they are worked out.
        """
        return hit_views(
            hits,
            short_ids=self.here.short_ids((hit.id for hit in hits), ID_CHARS),
            stale=self.here.stale_many(hit.record for hit in hits),
        )

    def hotspots(self) -> Record | None:
        """Return the project's "Code hotspots" memory (None: none, forgotten or put aside)."""
        return self.here.hotspots() if self.has_project else None

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
        """Propose the learnings of an agent's output (its last "Key Learnings" section)."""
        from engram.agents import session

        return session.capture(
            self.here, text, session_id=session_id, project=project, source=source
        )

    @in_project
    def review(
        self, action: str = "list", ids: Sequence[str] | None = None, **options: Any
    ) -> Review:
        """List proposed memories (oldest first), or accept, reject or merge them.

        ``options``: ``every`` (all of them), ``title`` and ``content`` (accept), ``into``
        (merge), ``limit`` (list): see ``engram.agents.inbox.review``.
        """
        from engram.agents import inbox

        return inbox.review(self.here, action, list(ids or []), **options)

    @in_project
    def capture_transcript(
        self, path: str, *, agent: str = "", session_id: str | None = None
    ) -> Captured:
        """Propose memories from an agent's transcript file; save the new ones as proposed."""
        from engram.agents import inbox

        return inbox.capture_transcript(self.here, path, agent=agent, session_id=session_id)

    def timeline(self, ref: str, *, before: int = 5, after: int = 5) -> Timeline:
        """Return what happened before and after a memory, oldest first."""
        from engram.project.graph import timeline

        return timeline(self.here, ref, before=before, after=after)

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
    import platform  # not at the top: every hook imports this module, and platform costs ~10 ms

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
    "NO_PROJECT_HINT",
    "CorruptStore",
    "Engram",
    "Hit",
    "HitView",
    "ImportResult",
    "NotInitialized",
    "SaveResult",
    "Workspace",
    "version_info",
]
