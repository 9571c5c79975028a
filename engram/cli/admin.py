"""The commands that set engram up and look after it: init, index, doctor, setup, version.

They call the facade (or ``engram.agents`` for an agent's settings) and render its reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram.cli.app import JsonOpt, app, echo, emit_json, open_engram, progress, start_of
from engram.cli.options import Values, options
from engram.errors import EngramError, InvalidInput
from engram.operations.admin import DOCTOR
from engram.plural import counted

if TYPE_CHECKING:
    from pathlib import Path

    from engram.project.git import GitSetup
    from engram.project.indexing import IndexSummary


@app.command()
def init(
    ctx: typer.Context,
    project: Annotated[
        str | None, typer.Option(help="Project name (default: folder name).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Create .engram/ here (config.yaml, memories.jsonl, .gitignore), then index ADRs and git."""
    from engram.service import Engram

    engram, created = Engram.init(start_of(ctx), project, git=False)
    with engram:
        root = engram.root
        git = engram.git_setup(install=True)  # what it changes in .gitattributes, .git/config
        if as_json:
            try:
                indexed: dict[str, Any] = engram.index_project().to_dict()
            except EngramError as exc:
                indexed = {"error": exc.to_dict()}
            emit_json(
                {
                    "root": str(root),
                    "project": engram.project,
                    "created": [str(p.relative_to(root)) for p in created],
                    "git": git.to_dict(),
                    "indexed": indexed,
                }
            )
            return
        if created:
            for path in created:
                echo(f"created {path.relative_to(root)}")
        else:
            echo(f"{root / '.engram'} already set up")
        echo(f"project: {engram.project}")
        _git_said(git, root)
        # Day one: read what the project already knows. A failure here never fails init.
        try:
            summary = engram.index_project()
        except EngramError as exc:
            echo(f"warning: indexing skipped: {exc.message}", err=True)
        else:
            for line in _index_summary(summary):
                echo(line)


def _git_said(git: GitSetup, root: Path) -> None:
    """Say what init changed in git's files (.gitattributes, .git/config), or why it did not."""
    for change in git.installed:
        echo(change)
    if not git.repo:
        echo(
            f"warning: {root} is not inside a git repository: its memories are shared with no "
            "one, and no merge driver is set up",
            err=True,
        )
        echo("hint: run `git init` here, then `engram init` again", err=True)


def _index_summary(summary: IndexSummary) -> list[str]:
    """Render what the ADR and git indexers did as lines for a person."""
    lines: list[str] = []
    verb = "would write" if summary.dry_run else "wrote"
    adr = summary.adr
    if adr is not None:
        where = ", ".join(adr.dirs) or "no ADR folder found"
        lines.append(
            f"ADRs ({where}): {adr.found} found, {adr.created} new, {adr.updated} "
            f"updated, {adr.archived} archived, {adr.unchanged} unchanged, "
            f"{len(adr.skipped)} skipped"
        )
        lines += [f"  skipped {item.path}: {item.reason}" for item in adr.skipped]
    git = summary.git
    if git is not None:
        if git.head is None:
            lines.append("git: nothing to mine")
        elif git.unchanged:
            lines.append(f"git: no new commits since {git.head[:10]}")
        else:
            lines.append(
                f"git: {counted(git.commits, 'commit')} walked, "
                f"{counted(len(git.hotspots), 'hotspot')}, "
                f"{counted(git.candidates_new, 'new pitfall candidate')} "
                f"({git.candidates_found} found)"
            )
        lines += [f"  note: {problem}" for problem in git.problems]
    lines.append(f"{verb} {counted(summary.writes, 'memory')}")
    return lines


@app.command()
def index(
    ctx: typer.Context,
    adr: Annotated[bool, typer.Option("--adr", help="Read only the ADRs.")] = False,
    git: Annotated[bool, typer.Option("--git", help="Mine only the git history.")] = False,
    rebuild: Annotated[
        bool,
        typer.Option("--rebuild", help="Rebuild the search index and re-walk the git history."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; write nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Read ADRs and git history into memories, and bring the search index up to date."""
    both = not adr and not git
    update_bar, close_bar = progress("indexing")
    try:
        with open_engram(ctx) as engram:
            search = engram.reindex(rebuild=rebuild, progress=update_bar)
            summary = engram.index_project(
                adr=adr or both,
                git=git or both,
                dry_run=dry_run,
                rebuild=rebuild,
                progress=update_bar,
            )
    finally:
        close_bar()
    if as_json:
        emit_json({"search_index": search.to_dict(), **summary.to_dict()})
        return
    if rebuild:
        echo(f"rebuilt the search index: {counted(search.records, 'record')}")
    else:
        echo(f"search index up to date ({search.changed} changed)")
    for line in _index_summary(summary):
        echo(line)


@app.command()
@options(DOCTOR)
def doctor(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Check the store (parse errors, ids, conflicts, chunks, secrets, index) and agent setups."""
    with open_engram(ctx) as engram:
        findings = engram.doctor(fix=values["fix"])
    if as_json:
        emit_json([finding.to_dict() for finding in findings])
    else:
        for finding in findings:
            mark = "fixed" if finding.fixed else finding.severity
            echo(f"{mark:<8} {finding.check}: {finding.message}")
    if any(f.severity == "error" and not f.fixed for f in findings):
        raise typer.Exit(1)


def _setup_git_hooks(ctx: typer.Context, dry_run: bool, as_json: bool) -> None:
    with open_engram(ctx) as engram:
        done = engram.setup_git_hooks(dry_run=dry_run)
    if as_json:
        emit_json(done.to_dict())
        return
    verb = ("would write" if dry_run else "wrote") if done.changed else "unchanged:"
    echo(f"{verb} {done.path}")
    for note in done.notes:
        echo(f"  {note}")


@app.command()
def setup(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Argument(
            metavar="AGENT",
            help="claude-code, codex, gemini-cli, opencode, cursor or vscode; or git-hooks "
            "(a pre-commit hook running `engram check --staged`).",
        ),
    ] = None,
    user: Annotated[
        bool,
        typer.Option(
            "--user/--project", help="Write the user's own config (HOME) or the project's."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the changes as a diff; write nothing.")
    ] = False,
    list_: Annotated[
        bool, typer.Option("--list", help="Show where engram is set up, for every agent.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Give an agent engram's MCP server, instructions and hooks (a rerun changes nothing)."""
    from engram.agents import setup as agents
    from engram.config import find_repo_root

    if agent == "git-hooks":
        _setup_git_hooks(ctx, dry_run, as_json)
        return
    root = find_repo_root(start_of(ctx))
    if list_:
        _setup_list(agents.status(root), str(root), as_json)
        return
    if agent is None:
        raise InvalidInput(
            "name an agent, or pass --list", hint=f"agents: {', '.join(agents.AGENTS)}"
        )
    result = agents.setup(agent, "user" if user else "project", root=root, dry_run=dry_run)
    if as_json:
        emit_json(result.to_dict())
        return
    for change in result.changes:
        if dry_run and change.diff:
            echo(change.diff, nl=False)
    for change in result.changes:
        action = change.action
        if dry_run and action != "unchanged":
            action = "would create" if action == "created" else "would update"
        echo(f"{action} {change.shown} ({change.kind})", err=dry_run)
    for note in result.notes:
        echo(f"note: {note}", err=True)


def _setup_list(found: list[Any], root: str, as_json: bool) -> None:
    """Print where engram is set up, agent by agent."""
    if as_json:
        emit_json({"root": root, "files": [item.to_dict() for item in found]})
        return
    echo(f"{'agent':<12} {'scope':<8} {'what':<13} {'state':<11} path")
    for item in found:
        detail = f"  ({item.detail})" if item.detail else ""
        echo(
            f"{item.agent:<12} {item.scope:<8} {item.kind:<13} {item.state:<11} "
            f"{item.shown}{detail}"
        )


@app.command()
def version(as_json: JsonOpt = False) -> None:
    """Print the versions of engram, Python and its main libraries."""
    from engram.service import version_info

    info = version_info()
    if as_json:
        emit_json(info)
    else:
        echo(f"engram {info.pop('engram')}")
        for name, value in info.items():
            echo(f"  {name} {value}")
