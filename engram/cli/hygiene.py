"""The commands that tidy the memory: consolidate, train, insights list/delete, projects.

They call the facade and render its answers; the trainer's progress is drawn on a terminal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram.cli.app import (
    JsonOpt,
    app,
    echo,
    emit_json,
    group,
    open_engram,
    progress,
    table,
)
from engram.cli.options import Values, options
from engram.errors import InvalidInput
from engram.operations.admin import INSIGHTS_DELETE, TRAIN
from engram.plural import counted

if TYPE_CHECKING:
    from engram.service import Applied


def _read_json_file(path: Path) -> Any:
    try:
        from engram.model import MAX_DOCUMENT_DEPTH, loads

        return loads(path.read_text(encoding="utf-8"), what=str(path), max_depth=MAX_DOCUMENT_DEPTH)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: not valid JSON: {exc}") from exc


@app.command()
def consolidate(
    ctx: typer.Context,
    preview: Annotated[
        bool, typer.Option("--preview", help="Only list the candidate groups and why.")
    ] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="Apply the recommendations (or those of --plan).")
    ] = False,
    plan: Annotated[
        Path | None, typer.Option("--plan", help="A plan file written by --out, to apply.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the plan (recommendations) to this file.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --apply: show the exact changes, write none.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Tidy the memory: duplicates, superseded, orphaned, stale and outdated memories."""
    with open_engram(ctx) as engram:
        if preview:
            groups = engram.consolidate_preview()
            if as_json:
                emit_json({"groups": [group.to_dict() for group in groups]})
                return
            if not groups:
                echo("nothing to consolidate")
            for group in groups:
                echo(f"{group.kind:<18} {group.action:<8} {', '.join(group.ids)}")
                echo(f"    {group.reason}")
            return
        if apply or plan is not None:
            document = _read_json_file(plan) if plan is not None else None
            _applied(engram.consolidate_apply(document, dry_run=dry_run), dry_run, as_json)
            return
        document = engram.consolidate()
    for warning in document.warnings:
        echo(f"warning: {warning}", err=True)
    if out is not None:
        text = json.dumps(document.to_dict(), indent=2, ensure_ascii=False)
        out.write_text(text + "\n", "utf-8")
    if as_json:
        emit_json(document.to_dict())
        return
    if not document.recommendations:
        echo("nothing to consolidate")
    for item in document.recommendations:
        target = f" into {item.target}" if item.target else ""
        echo(f"{item.action}{target}: {', '.join(item.group.ids)}  ({item.decided_by})")
        echo(f"    {item.reasoning}")
    if out is not None:
        echo(f"plan written to {out}: apply it with engram consolidate --plan {out}")


def _applied(result: Applied, dry_run: bool, as_json: bool) -> None:
    """Print what applying a consolidation plan changed (or would change)."""
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(result.to_dict())
        return
    verb = "would change" if dry_run else "changed"
    echo(f"{verb} {counted(result.changed, 'memory')} ({counted(result.recommendations, 'group')})")
    for change in result.changes:
        state = "deleted" if change.get("deleted_at") else change.get("status", "active")
        echo(f"  {change['id']}  {state:<10} {change.get('title', '')}")


@app.command()
@options(TRAIN)
def train(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Run the trainer: insights from clusters, recurring pitfalls and long supersede chains."""
    bar_update, bar_close = progress("training")

    def on_event(event: Any) -> None:
        percent = getattr(event, "percent", None)
        if bar_update is not None and isinstance(percent, int | float):
            bar_update(int(percent), 100)

    try:
        with open_engram(ctx) as engram:
            report = engram.train(timeout=values["timeout"], on_event=on_event)
    finally:
        bar_close()
    if as_json:
        emit_json(report.to_dict())
    else:
        echo(
            f"{counted(len(report.insights), 'insight')} ({report.written or 0} new or changed), "
            f"{counted(len(report.recommendations), 'recommendation')} for consolidation"
        )
    for problem in report.problems:
        echo(f"error: {problem}", err=True)
    if not report.ok:
        echo("hint: the trainer failed, so nothing was changed", err=True)
        raise typer.Exit(1)


insights_app = group("insights", "List or delete the trainer's insights.")


@insights_app.command("list")
def insights_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the insights, newest first."""
    with open_engram(ctx) as engram:
        records = engram.insights()
    if as_json:
        emit_json(records)
        return
    if not records:
        echo("no insights yet: run engram train")
    for record in records:
        sources = len(record.get("links") or [])
        echo(f"{record['id'][:8]}  {record.get('title', '')}  ({sources} sources)")


@insights_app.command("delete")
@options(INSIGHTS_DELETE)
def insights_delete(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Delete an insight (a later training does not bring it back)."""
    with open_engram(ctx) as engram:
        record = engram.delete_insight(values["id"])
    if as_json:
        emit_json(record)
    else:
        echo(f"deleted {record['id']}")


projects_app = group("projects", "List, tidy and merge the projects memories belong to.")


@projects_app.command("list")
def projects_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List projects: memories, sessions and last activity (project and personal stores)."""
    with open_engram(ctx) as engram:
        rows = engram.projects()
    if as_json:
        emit_json([row.to_dict() for row in rows])
        return
    if not rows:
        echo("no memories yet")
        return
    table(
        ["project", "memories", "sessions", "last activity", "stores"],
        [
            [
                row.name or "(none)",
                str(row.memories),
                str(row.sessions),
                str(row.last_activity)[:16].replace("T", " "),
                ", ".join(row.scopes),
            ]
            for row in rows
        ],
    )


@projects_app.command("consolidate")
def projects_consolidate(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show the names that would be merged.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Merge without asking.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge project names that are variants of one another (case, separators, typos)."""
    with open_engram(ctx) as engram:
        groups = engram.projects_variants()
        done = []
        for item in groups:
            sources = [name for name in item.names if name != item.into]
            ask = not (yes or dry_run or as_json)
            if ask and not sys.stdin.isatty():
                ask, dry = False, True
            else:
                dry = dry_run or (as_json and not yes)
            if ask:
                dry = not typer.confirm(f"merge {', '.join(sources)} into {item.into}?")
            done.append(engram.projects_merge(sources, item.into, dry_run=dry))
    if as_json:
        emit_json(
            {
                "groups": [item.to_dict() for item in groups],
                "merges": [merge.to_dict() for merge in done],
            }
        )
        return
    if not groups:
        echo("no project names look alike")
    for merge in done:
        verb = "would merge" if merge.dry_run else "merged"
        count = sum(merge.moved.values())
        echo(f"{verb} {', '.join(merge.sources)} into {merge.into} ({counted(count, 'memory')})")


@projects_app.command("prune")
def projects_prune(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show them.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget projects with no memories left (their sessions in this clone's log)."""
    with open_engram(ctx) as engram:
        result = engram.projects_prune(dry_run=dry_run)
    if as_json:
        emit_json(result.to_dict())
        return
    if not result.pruned:
        echo("no project without memories")
    verb = "would prune" if dry_run else "pruned"
    for name in result.pruned:
        echo(f"{verb} {name}")


@projects_app.command("merge")
def projects_merge(
    ctx: typer.Context,
    names: Annotated[
        list[str],
        typer.Argument(metavar="FROM... INTO", help="Projects to merge, then the target."),
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Move every memory of the FROM projects to INTO (both stores; rev+1 each)."""
    if len(names) < 2:
        raise InvalidInput("give at least one project to merge and the project to merge into")
    with open_engram(ctx) as engram:
        result = engram.projects_merge(names[:-1], names[-1], dry_run=dry_run)
    if as_json:
        emit_json(result.to_dict())
        return
    verb = "would move" if dry_run else "moved"
    count = sum(result.moved.values())
    echo(f"{verb} {counted(count, 'memory')} from {', '.join(result.sources)} to {result.into}")
