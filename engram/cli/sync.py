"""The commands that move memories between stores: sync, export, import, resolve, log, diff …

Also the git merge and diff drivers and obsidian-export. They call the facade and render its
reports; an export goes to the file the user names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from engram.cli.app import (
    JsonOpt,
    app,
    echo,
    emit_json,
    offer_driver,
    open_engram,
    progress,
    read_stdin,
)
from engram.cli.options import Values, options
from engram.errors import InvalidInput
from engram.operations.admin import EXPORT, INSTRUCTION_FORMATS, PLATFORMS, SYNC
from engram.operations.compat_go import own_project
from engram.plural import counted

if TYPE_CHECKING:
    from engram.service import Engram
    from engram.sync.exchange import SyncReport, SyncStatus
    from engram.sync.gitdiff import FieldChange, MemoryDiff


@app.command("obsidian-export")
def obsidian_export(
    ctx: typer.Context,
    vault: Annotated[Path, typer.Option("--vault", help="The Obsidian vault folder.")],
    project: Annotated[str | None, typer.Option(help="Only this project's memories.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only memories updated since (YYYY-MM-DD or RFC 3339).")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep exporting when the store changes (Ctrl-C stops).")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Export memories as Obsidian notes (front matter, wikilinks, hubs per kind and file)."""
    import time

    with open_engram(ctx) as engram:
        while True:
            result = engram.obsidian_export(vault, project=project, since=since)
            if as_json:
                emit_json(result.to_dict())
            else:
                echo(
                    f"{vault}: {counted(len(result.written), 'note')} written, "
                    f"{len(result.removed)} removed, {result.unchanged} unchanged"
                )
            if not watch:
                return
            signature = engram.project_ws.store.signature()
            while engram.project_ws.store.signature() == signature:
                time.sleep(1.0)


@app.command("export")
@options(EXPORT)
def export_(
    ctx: typer.Context,
    file: Annotated[Path | None, typer.Argument(help="Write here (default: stdout).")] = None,
    *,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="engram|go-engram|" + "|".join(INSTRUCTION_FORMATS),
            help="engram (default): engram's own JSON. go-engram: the file Go engram's "
            "`engram import` reads (its types and fields as imported; no hard deletes). "
            "agents-md, claude-md, cursor-rules, kiro-steering, cline: the pinned and "
            "important decisions, pitfalls and principles as a marked block of AGENTS.md, "
            "CLAUDE.md, .cursor/rules/engram.mdc, .kiro/steering/engram.md or "
            "memory-bank/systemPatterns.md at the repository root; text outside the block is "
            "never touched.",
        ),
    ] = "engram",
    to: Annotated[
        Path | None,
        typer.Option("--to", help="With an instruction format: write the block into this file."),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget", min=100, help="With an instruction format: tokens the block may take."
        ),
    ] = None,
    values: Values,
) -> None:
    """Export every memory and tombstone as engram's JSON (stdout or FILE)."""
    if fmt in INSTRUCTION_FORMATS:
        if file is not None:
            raise InvalidInput(
                f"--format {fmt} writes into its own file", hint=f"use --to {file} instead of FILE"
            )
        with open_engram(ctx) as engram:
            done = engram.export_instructions(fmt, to=to, budget=budget)
        state = "written" if done.created else ("updated" if done.changed else "unchanged")
        left = f", {done.left_out} left out by the budget" if done.left_out else ""
        echo(f"{done.path}: {state} ({counted(done.memories, 'memory')}{left})")
        return
    if to is not None or budget is not None:
        raise InvalidInput("--to and --budget go with an instruction format (e.g. agents-md)")
    if fmt not in ("engram", "go-engram"):
        raise InvalidInput(
            f"unknown export format {fmt!r}",
            hint="use engram, go-engram or one of: " + ", ".join(INSTRUCTION_FORMATS),
        )
    with open_engram(ctx) as engram:
        if fmt == "go-engram":
            document: Any = engram.export_go(scope=values["scope"])
        else:
            document = engram.export(scope=values["scope"])
    text = json.dumps(document.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if file is None or str(file) == "-":
        echo(text, nl=False)
    else:
        file.write_text(text, encoding="utf-8")
        what = "Go engram row" if fmt == "go-engram" else "record"
        echo(f"exported {counted(document.count, what)} to {file}", err=True)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE|DIR",
            help="An engram export, a Go engram export or chunk, an MCP memory JSONL file, "
            "plain rows of {title, content, kind, tags, files} (JSON Lines, a JSON array or "
            '{"memories": [...]}), a folder of Markdown notes (basic-memory, an Obsidian '
            "vault), a folder with manifest.json and chunks/, or - for stdin. With --from: "
            "the platform's folder, if not where it keeps it.",
        ),
    ] = None,
    platform: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="|".join(PLATFORMS),
            help="Another agent's own memory, each file a proposed memory for `engram review`: "
            "Claude Code's auto memory, Codex's memories, Cursor's rules, Cline's memory bank, "
            "Serena's memories or Kiro's steering files.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge another store's memories into this one (format detected; same merge as git)."""
    if platform is None and source is None:
        raise typer.BadParameter("give FILE|DIR, or --from PLATFORM", param_hint="FILE|DIR")
    update_bar, close_bar = progress("importing")
    try:
        with open_engram(ctx) as engram:
            if platform is not None:
                result = engram.import_platform(platform, folder=source, progress=update_bar)
            elif str(source) == "-":
                from engram.model import MAX_DOCUMENT_DEPTH, loads

                text = read_stdin()
                try:
                    document = loads(text, what="stdin", max_depth=MAX_DOCUMENT_DEPTH)
                except ValueError as exc:
                    raise InvalidInput(f"stdin: not valid JSON: {exc}") from exc
                result = engram.import_(document, progress=update_bar)
            else:
                assert source is not None
                result = engram.import_path(source, progress=update_bar)
    finally:
        close_bar()
    if as_json:
        emit_json(result.to_dict())
        return
    echo(
        f"{result.format}: added {result.added}, updated {result.updated}, "
        f"unchanged {result.unchanged}, skipped {len(result.errors)}"
    )
    _left_out(result.errors, getattr(result, "notes", []))


FIRST_SKIPPED: Final = 10  # how many skipped items an import names before it only counts


def _left_out(errors: list[str], notes: list[str]) -> None:
    """Print (to stderr) how many items an import skipped, the first few in order, its notes.

    In order of file, then line or index (``notes.jsonl:3`` before ``notes.jsonl:12``), so that
    the first ones shown are the first ones to fix.
    """
    first = sorted(errors, key=_in_order)[:FIRST_SKIPPED]
    if len(errors) > FIRST_SKIPPED:
        echo(f"skipped {counted(len(errors), 'item')}; the first {len(first)}:", err=True)
    for error in first:
        echo(f"skipped {error}", err=True)
    if len(errors) > FIRST_SKIPPED:
        more = len(errors) - len(first)
        echo(f"… and {more} more (--json lists every one)", err=True)
    for note in notes:
        echo(f"note: {note}", err=True)


def _in_order(error: str) -> list[tuple[int, str]]:
    """Sort key of a skipped item's sentence: its numbers (line, index) compared as numbers."""
    return [(int(part), "") if part.isdigit() else (0, part) for part in re.split(r"(\d+)", error)]


@app.command()
@options(SYNC)
def sync(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Share memories: import others' sync chunks, export this clone's changes as one."""
    from engram.sync.exchange import SyncStatus  # loaded by the sync itself

    scope = "personal" if values["personal"] else "project"
    _go_flags(values)
    update_bar, close_bar = progress("importing chunks")
    try:
        with open_engram(ctx) as engram:
            report = _sync(engram, values, scope, update_bar)
    finally:
        close_bar()
    if as_json:
        emit_json(report.to_dict())
        return
    if isinstance(report, SyncStatus):
        _pending(report)
    else:
        _exchanged(report, import_only=values["import_only"])
    for problem in report.problems:
        echo(f"warning: {problem}", err=True)


def _sync(engram: Engram, values: Values, scope: str, bar: Any) -> SyncReport | SyncStatus:
    """Run the sync (or only report on it) and say when this clone lacks the merge driver."""
    report: SyncReport | SyncStatus
    if values["status"]:
        report = engram.sync_status(scope=scope)
    else:
        report = engram.sync(
            scope=scope,
            remote=values["remote"],
            branch=values["branch"],
            progress=bar,
            export=not values["import_only"],
            only_project=_only_project(engram, values),
        )
    if scope == "project":
        offer_driver(engram)
    return report


def _go_flags(values: Values) -> None:
    """Refuse Go engram's sync flags where they contradict each other or engram's own."""
    if values["import_only"] and values["remote"]:
        raise InvalidInput(
            "--import only reads the chunks in this clone; it does not go with --remote",
            hint="run `engram sync --import`, or `engram sync --remote NAME` to exchange both ways",
        )
    project = values["project"]
    if project is not None and not project.strip():
        raise InvalidInput("--project: no project name given", hint="pass --project NAME")
    if values["all_projects"] and project is not None:
        raise InvalidInput(
            f"--all and --project {project!r} contradict each other",
            hint="--all exports every project's changes, --project only one: give one of them",
        )


def _only_project(engram: Engram, values: Values) -> str | None:
    """Return the project whose changes alone are exported (None: every project's)."""
    project = values["project"]
    if project is None or values["all_projects"]:
        return None
    # Go's default project is the folder's base name: it names this project too.
    named = own_project(project, project=engram.project, root=engram.root)
    return engram.project if named is None else named


def _pending(report: SyncStatus) -> None:
    """Print what ``sync --status`` found: chunks, contributors and what is pending."""
    echo(
        f"{report.scope} store: {counted(report.chunks, 'chunk')} "
        f"({counted(report.memories_in_chunks, 'memory version')}), clone {report.clone_id[:8]}"
    )
    for who, count in report.contributors.items():
        echo(f"  {who}: {count}")
    echo(
        f"pending: {counted(len(report.pending_import), 'chunk')} to import, "
        f"{counted(report.pending_export, 'changed memory', 'changed memories')} to export"
    )


def _exchanged(report: SyncReport, *, import_only: bool = False) -> None:
    """Print what a sync imported, exported and exchanged with the remote."""
    imported = report.imported
    echo(
        f"imported {counted(len(report.imported_chunks), 'chunk')} (added {imported.added}, "
        f"updated {imported.updated}, unchanged {imported.unchanged}, "
        f"skipped {len(imported.errors)})"
    )
    _left_out(imported.errors, imported.notes)
    for rewritten in report.rewritten:
        echo(rewritten.sentence())
    if report.exported_chunk:
        echo(f"exported {counted(report.exported, 'memory')} as chunk {report.exported_chunk}")
    elif import_only:
        echo("import only (--import): no chunk written")
    else:
        echo("nothing to export")
    far = report.remote
    if far:
        pulled = far.pulled.memories
        echo(
            f"{far.url} ({far.branch}): pulled {pulled.added} new and "
            f"{counted(pulled.updated, 'changed memory', 'changed memories')}, "
            f"pushed {far.head[:10]}"
        )
        for lock in far.cleared_locks:
            echo(f"removed stale lock file {lock} (a killed engram sync left it)", err=True)
    for block in report.instructions:
        if block.changed:
            echo(f"{block.path}: engram's block {'written' if block.created else 'updated'}")


@app.command("merge-driver", hidden=True)
def merge_driver(
    base: Annotated[Path, typer.Argument(help="%O: the common ancestor's version.")],
    ours: Annotated[Path, typer.Argument(help="%A: our version; the result is written here.")],
    theirs: Annotated[Path, typer.Argument(help="%B: their version.")],
    pathname: Annotated[str, typer.Argument(help="%P: the file's path in the repo.")] = "",
) -> None:
    """git merge driver for .engram files (installed by `engram init`): exit 0 when merged."""
    from engram.service import Engram

    raise typer.Exit(Engram.merge_driver(base, ours, theirs, pathname))


@app.command("textconv", hidden=True)
def textconv(
    path: Annotated[str, typer.Argument(metavar="FILE", help="A memories.jsonl version.")],
) -> None:
    """git diff driver for memories.jsonl (installed by `engram init`): print readable blocks."""
    from engram.service import Engram

    raise typer.Exit(Engram.textconv([path]))


@app.command()
def diff(
    ctx: typer.Context,
    revisions: Annotated[
        str | None,
        typer.Argument(
            metavar="A..B",
            help="Two revisions A..B, or A alone (A against the working tree); "
            "default: HEAD against the working tree.",
        ),
    ] = None,
    personal: Annotated[
        bool,
        typer.Option("--personal", help="The personal store (ENGRAM_HOME as a git repository)."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List memories added, changed (field by field) and forgotten between two versions."""
    with open_engram(ctx) as engram:
        found = engram.diff(revisions, scope="personal" if personal else "project")
    for problem in found.problems:
        echo(f"warning: skipped {problem.message}", err=True)
    if as_json:
        emit_json(found.to_dict())
        return
    _print_diff(found)


_MARKS = {"added": "+", "changed": "~", "forgotten": "-"}
_CLIP = 100  # characters of a one-line value shown before and after


def _print_diff(found: MemoryDiff) -> None:
    """Render a MemoryDiff for a person: a summary line, then one line per memory."""
    counts = ", ".join(
        f"{found.count(change)} {change}" for change in ("added", "changed", "forgotten")
    )
    echo(f"{found.old} → {found.new} ({found.path}): {counts}")
    if not found.changes:
        echo("no memory changed")
    for item in found.changes:
        how = f" ({item.how})" if item.how else ""
        title = item.title.replace("\n", " ")
        echo(f"{_MARKS[item.change]} {item.id[:8]}  {item.kind or '-':<12} {title}{how}")
        for change in item.fields:
            for line in _field_lines(change):
                echo(f"    {line}")


def _short(value: Any) -> str:
    """Return a field's value on one clipped line (lists joined, absent as (none))."""
    if value is None:
        return "(none)"
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        text = ", ".join(value) or "(empty)"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"


def _field_lines(change: FieldChange) -> list[str]:
    """Render one field's change: old → new, or a compact line diff of a long text."""
    from engram.sync.gitdiff import text_diff

    old, new = change.old, change.new
    if change.field == "history" and isinstance(old, list | None) and isinstance(new, list):
        from engram.sync.gitdiff import earlier

        return [f"history: {earlier(old or [])} → {earlier(new)}"]
    texts = isinstance(old, str | None) and isinstance(new, str | None)
    if texts and any("\n" in (value or "") for value in (old, new)):
        return [f"{change.field}:", *("  " + line for line in text_diff(old or "", new or ""))]
    if texts and max(len(old or ""), len(new or "")) > _CLIP // 2:
        return [f"{change.field}:", f"  was: {_short(old)}", f"  now: {_short(new)}"]
    return [f"{change.field}: {_short(old)} → {_short(new)}"]


@app.command("review-pr")
def review_pr(
    ctx: typer.Context,
    spec: Annotated[str, typer.Argument(metavar="BASE..HEAD", help="The range of commits.")],
    as_json: JsonOpt = False,
) -> None:
    """Print Markdown for a pull request: its memory changes and the pitfalls about its files."""
    with open_engram(ctx) as engram:
        review = engram.review_pr(spec)
    if as_json:
        emit_json(review.to_dict())
    else:
        echo(review.markdown, nl=False)


@app.command()
def resolve(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Repair .engram/ files a merge left conflicted, from git's three versions, and stage them."""
    with open_engram(ctx) as engram:
        resolved = engram.resolve()
    if as_json:
        emit_json([item.to_dict() for item in resolved])
        return
    if not resolved:
        echo("nothing to resolve")
    for item in resolved:
        echo(
            f"resolved {item.path}: {counted(item.records, 'entry')}, "
            f"{counted(item.conflicts, 'memory')} {'keeps' if item.conflicts == 1 else 'keep'} "
            "a concurrent edit (engram doctor lists them)"
        )


@app.command()
def log(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Most versions.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Show the history of one memory across commits: each version with commit, author, date."""
    with open_engram(ctx) as engram:
        versions = engram.log(ref, limit=limit)
    if as_json:
        emit_json([version.to_dict() for version in versions])
        return
    if not versions:
        echo("no committed version of this memory (commit .engram/ to start its log)")
    for version in versions:
        record = version.record or {}
        title = record.get("title", "")
        rev = f" rev {record['rev']}" if record.get("rev") is not None else ""
        echo(
            f"{version.commit[:10]}  {version.date[:16].replace('T', ' ')}  "
            f"{version.author}  {version.change}{rev}  {title}"
        )
        echo(f"            {version.message}")
