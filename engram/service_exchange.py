"""The facade's half that moves memories in and out: export, import, git, sync.

``Engram`` (``engram.service``) inherits these operations from ``Exchange``, so they are called
as every other facade operation is (``engram.export()``, ``engram.sync()``); they live here to
keep the facade's module short. Like the rest of the facade, each is one call into the feature
that does the work, and nothing here prints or imports an adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from engram import config as config_mod
from engram.errors import ConfigError, InvalidInput
from engram.project import Project
from engram.sync import transfer
from engram.sync.transfer import ImportResult
from engram.workspace import Workspace

if TYPE_CHECKING:
    from engram.formats.goexport import GoExport
    from engram.formats.instructions import BlockWrite
    from engram.project.git import GitSetup
    from engram.sync.exchange import SyncReport, SyncStatus
    from engram.sync.gitdiff import MemoryDiff
    from engram.sync.gitlog import Version
    from engram.sync.gitresolve import Resolved
    from engram.sync.transfer import ExportDocument

__all__ = ["Exchange", "in_project"]

Progress = Callable[[int, int], None]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_project(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark an operation that needs a project's store (refused where only the personal is open)."""
    what = method.__name__.strip("_").replace("_", " ")

    @functools.wraps(method)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        here = getattr(args[0], "here", None) if args else None
        if isinstance(here, Project):
            here.require_project(what)
        return method(*args, **kwargs)

    return guarded


class Exchange:
    """Export, import, git and sync operations of the facade (``engram.service.Engram``)."""

    if TYPE_CHECKING:  # what the facade provides, as these operations use it
        here: Project

        @property
        def root(self) -> Path: ...

        @property
        def project(self) -> str: ...

        @property
        def project_ws(self) -> Workspace: ...

        @property
        def config(self) -> config_mod.Config: ...

        @property
        def has_project(self) -> bool: ...

        def _scoped(self, scope: str) -> Workspace: ...

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
