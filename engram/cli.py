"""The ``engram`` command line: a typer adapter over ``engram.service.Engram``.

One error boundary (``EngramGroup.invoke``) turns every ``EngramError`` into a message and a
hint on stderr and a non-zero exit; no traceback reaches a user. Every command that prints data
takes ``--json``. Heavy modules (the service and its index, rich) are imported inside the
commands that need them, so ``engram --help`` starts fast. This module must not be imported by
the core.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import ArgumentInfo, ParameterInfo

from engram.errors import EngramError, InvalidInput
from engram.terminal import json_c1, visible

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from engram.index.query import Hit
    from engram.service import Engram

SNIPPET_CHARS = 200


def safe(text: str) -> str:
    """Return text with every control character but newline and tab shown as \\xNN."""
    return visible(text)


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print one message of the CLI, control characters made visible (see ``safe``)."""
    typer.echo(safe(str(message)), err=err, nl=nl)


def _rich(text: object) -> str:
    """Return text for a rich console: control characters visible, markup taken literally."""
    from rich.markup import escape

    return escape(safe(str(text)))


@contextlib.contextmanager
def _boundary() -> Iterator[None]:
    """The CLI's one error boundary: message and hint on stderr, non-zero exit, no traceback."""
    try:
        yield
    except EngramError as exc:
        _fail(exc.message, exc.hint)
    except BrokenPipeError:
        # The reader went away (e.g. `engram recall x | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(141) from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}", "check the path and its permissions")
    except KeyboardInterrupt:
        echo("interrupted", err=True)
        raise typer.Exit(130) from None


class EngramGroup(TyperGroup):
    """The command group with engram's one error boundary."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        with _boundary():
            return super().invoke(ctx)


def _fail(message: str, hint: str = "") -> NoReturn:
    echo(f"error: {message}", err=True)
    if hint:
        echo(f"hint: {hint}", err=True)
    raise typer.Exit(1)


app = typer.Typer(
    cls=EngramGroup,
    name="engram",
    help="Git-native, file-first memory for AI coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ListOpt = Annotated[
    list[str] | None,
    typer.Option(help="Comma-separated values; the option may also be repeated."),
]


@app.callback()
def _root(
    ctx: typer.Context,
    directory: Annotated[
        Path | None,
        typer.Option(
            "-C", help="Run as if engram was started in PATH (like git -C).", metavar="PATH"
        ),
    ] = None,
) -> None:
    """Git-native, file-first memory for AI coding agents."""
    ctx.obj = {"dir": directory}


def _start(ctx: typer.Context) -> Path | None:
    directory = (ctx.obj or {}).get("dir")
    if directory is not None and not Path(directory).is_dir():
        raise InvalidInput(f"-C {directory}: no such folder")
    return Path(directory) if directory is not None else None


def _open(ctx: typer.Context) -> Engram:
    from engram.service import Engram

    return Engram.open(_start(ctx))


def _emit_json(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    typer.echo(json_c1(text))


def _warn_problems(engram: Engram) -> None:
    problems = engram.problems()
    for _, message in problems[:3]:
        echo(f"warning: skipped {message}", err=True)
    if problems:
        echo(
            "hint: run `engram doctor` for the full list, `engram doctor --fix` to repair", err=True
        )


def _offer_driver(engram: Engram) -> None:
    """Say so when this clone lacks the merge driver its .gitattributes asks for (a fresh clone)."""
    setup = engram.git_setup()
    if setup["repo"] and setup["attributes"] and not setup["driver"]:
        echo(
            "hint: git merges of .engram/ need the engram merge driver, which this clone does not "
            "have yet: run `engram doctor --fix` to install it",
            err=True,
        )


def _table(headers: list[str], rows: list[list[str]]) -> None:
    """Print rows as a rich table (plain columns when stdout is not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*(_rich(cell) for cell in row))
    Console().print(table)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"standard input is not valid UTF-8 (byte {exc.start})") from exc


def _stdin_has_data() -> bool:
    """Tell whether stdin is a pipe or file with something to read now (never blocks)."""
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return False
        import select

        ready, _, _ = select.select([sys.stdin], [], [], 0)
        return bool(ready)
    except (OSError, ValueError):
        return False


def _progress(label: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """Return a (callback, close) pair drawing a rich progress bar on a terminal."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import Progress

    bar = Progress(transient=True)
    bar.start()
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update, bar.stop


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"


def _hit_dict(hit: Hit) -> dict[str, Any]:
    record = hit.record
    return {
        "id": hit.id,
        "score": hit.score,
        "kind": record.get("kind"),
        "status": record.get("status", "active"),
        "title": record.get("title"),
        "snippet": _snippet(str(record.get("content", ""))),
        "matched": hit.matched,
        "memory": record,
    }


# -- commands ---------------------------------------------------------------------------------


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

    engram, created = Engram.init(_start(ctx), project)
    with engram:
        root = engram.root
        if as_json:
            try:
                indexed: dict[str, Any] = engram.index_project()
            except EngramError as exc:
                indexed = {"error": exc.to_dict()}
            _emit_json(
                {
                    "root": str(root),
                    "project": engram.project,
                    "created": [str(p.relative_to(root)) for p in created],
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
        # Day one: read what the project already knows. A failure here never fails init.
        try:
            summary = engram.index_project()
        except EngramError as exc:
            echo(f"warning: indexing skipped: {exc.message}", err=True)
        else:
            for line in _index_summary(summary):
                echo(line)


def _remember(
    ctx: typer.Context,
    title: str,
    content: str | None,
    kind: str,
    tags: list[str] | None,
    files: list[str] | None,
    importance: int,
    topic_key: str | None,
    scope: str,
    link: list[str] | None,
    status: str,
    source: str,
    session: str | None,
    as_json: bool,
) -> None:
    if content == "-" or (content is None and _stdin_has_data()):
        content = _read_stdin()
    with _open(ctx) as engram:
        result = engram.remember(
            title,
            content or "",
            kind=kind,
            tags=tags,
            files=files,
            importance=importance,
            topic_key=topic_key,
            scope=scope,
            links=link or [],
            status=status,
            source=source,
            session_id=session,
        )
        _offer_driver(engram)
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    if as_json:
        _emit_json(result.to_dict())
        return
    echo(result.record["id"])
    if result.action == "duplicate":
        echo(f"already saved: duplicate_count is now {result.record['duplicate_count']}", err=True)
    elif result.action == "updated":
        echo(
            f"updated the memory with topic key {result.record.get('topic_key')} "
            f"(rev {result.record['rev']})",
            err=True,
        )
    if result.redactions:
        echo(f"redacted {result.redactions} secret(s) before saving", err=True)
    for rid in result.superseded:
        echo(f"marked {rid} as superseded", err=True)


KindOpt = Annotated[
    str,
    typer.Option(
        "--kind",
        "-k",
        help="decision, pitfall, bugfix, pattern, "
        "principle, architecture, fact, note, … (aliases work).",
    ),
]


@app.command()
def remember(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="Short summary.")],
    content: Annotated[
        str | None, typer.Argument(help="Full text (markdown); '-' or a pipe reads standard input.")
    ] = None,
    kind: KindOpt = "note",
    tags: Annotated[
        list[str] | None, typer.Option("--tags", "-t", help="Tags, comma-separated or repeated.")
    ] = None,
    files: Annotated[
        list[str] | None,
        typer.Option("--files", "-f", help="Repo-relative paths or globs it is about."),
    ] = None,
    importance: Annotated[int, typer.Option("--importance", "-i", min=1, max=5, help="1–5.")] = 3,
    topic_key: Annotated[
        str | None, typer.Option(help="Stable key: a later save with it updates this memory.")
    ] = None,
    scope: Annotated[str, typer.Option(help="project, or personal (ENGRAM_HOME).")] = "project",
    link: Annotated[
        list[str] | None, typer.Option(help="REL:ID, e.g. supersedes:7f3k; repeatable.")
    ] = None,
    status: Annotated[
        str, typer.Option(help="active, proposed, rejected, superseded, archived.")
    ] = "active",
    source: Annotated[str, typer.Option(help="Where it came from.")] = "cli",
    session: Annotated[str | None, typer.Option(help="Session id that wrote it.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Save a memory and print its id (an identical recent save only counts)."""
    _remember(
        ctx,
        title,
        content,
        kind,
        tags,
        files,
        importance,
        topic_key,
        scope,
        link,
        status,
        source,
        session,
        as_json,
    )


app.command("save", help="Alias of remember.")(remember)


def _recall(
    start: Path | None,
    query: str,
    kind: list[str] | None,
    tag: list[str] | None,
    file: list[str] | None,
    status: list[str] | None,
    scope: list[str] | None,
    project: list[str] | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    from engram.service import Engram

    with Engram.open(start) as engram:
        hits = engram.recall(
            query,
            kinds=kind,
            tags=tag,
            files=file,
            statuses=status,
            scopes=scope,
            projects=project,
            limit=limit,
            offset=offset,
        )
        found = engram.stale_many(hit.record for hit in hits)
        stale = {hit.id: found.get(hit.id, []) for hit in hits}
        _warn_problems(engram)
    if as_json:
        rows = [
            {**_hit_dict(h), "stale": stale[h.id]} if stale[h.id] else _hit_dict(h) for h in hits
        ]
        _emit_json({"query": query, "count": len(hits), "hits": rows})
        return
    if not hits:
        echo("no memories match", err=True)
        return
    for number, hit in enumerate(hits, start=offset + 1):
        record = hit.record
        status_text = record.get("status", "active")
        flag = "" if status_text == "active" else f" [{status_text}]"
        echo(
            f"{number:>2}. {hit.id[:8]}  {record.get('kind', ''):<12} "
            f"{record.get('title', '')}{flag}  ({hit.score:.2f})"
        )
        snippet = _snippet(str(record.get("content", "")))
        if snippet:
            echo(f"    {snippet}")
        if stale[hit.id]:
            echo(f"    may be stale: {'; '.join(stale[hit.id])}")


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Any words; no query syntax to get wrong.")] = "",
    kind: Annotated[
        list[str] | None, typer.Option("--kind", "-k", help="Only these kinds.")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", "-t", help="Only with a tag.")] = None,
    file: Annotated[
        list[str] | None,
        typer.Option("--file", "-f", help="Only about these paths (exact, folder or glob)."),
    ] = None,
    status: Annotated[list[str] | None, typer.Option(help="Only these statuses.")] = None,
    scope: Annotated[list[str] | None, typer.Option(help="project and/or personal.")] = None,
    project: Annotated[list[str] | None, typer.Option(help="Only these projects.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many.")] = 10,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many (paging).")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Search memories, best first (ranked by relevance, kind, importance, status, age)."""
    _recall(_start(ctx), query, kind, tag, file, status, scope, project, limit, offset, as_json)


app.command("search", help="Alias of recall.")(recall)


def _show(ctx: typer.Context, ref: str, as_json: bool) -> None:
    with _open(ctx) as engram:
        record = engram.get(ref)
        stale = engram.stale(record)
    if as_json:
        _emit_json({**record, "stale": stale} if stale else record)
        return
    echo(f"{record['id']}  {record.get('kind', '')}  [{record.get('status', 'active')}]")
    if stale:
        echo(f"may be stale: {'; '.join(stale)}")
    echo(f"# {record.get('title', '')}")
    if record.get("content"):
        echo("")
        echo(str(record["content"]))
    echo("")
    for label in ("tags", "files"):
        if record.get(label):
            echo(f"{label}: {', '.join(record[label])}")
    for link in record.get("links", []) or []:
        echo(f"link: {link.get('rel')} {link.get('to')}")
    echo(
        f"importance: {record.get('importance', 3)}  scope: {record.get('scope', 'project')}"
        f"  project: {record.get('project', '')}"
    )
    provenance = ", ".join(
        f"{key} {record[key]}" for key in ("source", "author", "session_id") if record.get(key)
    )
    if provenance:
        echo(f"from: {provenance}")
    echo(
        f"created {record.get('created_at')}  updated {record.get('updated_at')}  "
        f"rev {record.get('rev')}"
    )
    if record.get("duplicate_count"):
        echo(f"saved again {record['duplicate_count']} time(s)")
    for old in record.get("history", []) or []:
        if "deleted_at" in old:  # a forget a later edit overrode, settled by an update
            echo(f"forgotten on another clone at {old.get('deleted_at')}, kept since")
            continue
        echo(f"earlier (rev {old.get('rev')}, {old.get('updated_at')}): {old.get('title')}")
    for lost in record.get("conflicts", []) or []:  # what a merge kept from the losing side
        if "deleted_at" in lost:
            echo(
                f"forgotten on another clone at {lost.get('deleted_at')}, then brought back by "
                f"a later edit: `engram forget {str(record['id'])[:8]}` forgets it again"
            )
            continue
        by = f", {lost['author']}" if lost.get("author") else ""
        echo(
            f"concurrent edit that lost a merge (rev {lost.get('rev')}, {lost.get('updated_at')}"
            f"{by}): {lost.get('title', '')}"
        )
        if lost.get("content"):
            echo("\n".join(f"    {line}" for line in str(lost["content"]).splitlines()))


@app.command()
def get(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    as_json: JsonOpt = False,
) -> None:
    """Show one memory in full."""
    _show(ctx, ref, as_json)


app.command("show", help="Alias of get.")(get)


def _line(item: dict[str, Any]) -> str:
    return (
        f"{item['id']}  {item.get('kind', '')}  [{item.get('status', 'active')}]  {item['title']}"
    )


@app.command()
def why(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    as_json: JsonOpt = False,
) -> None:
    """Show why a memory exists: what it supersedes, what superseded it, links, provenance."""
    with _open(ctx) as engram:
        data = engram.why(ref)
    if as_json:
        _emit_json(data)
        return
    echo(_line(data["memory"]))
    if data.get("stale"):
        echo(f"may be stale: {'; '.join(data['stale'])}")
    for label, key in (("supersedes", "supersedes"), ("superseded by", "superseded_by")):
        if data[key]:
            echo(f"{label}:")
            for item in data[key]:
                echo("  " * item["depth"] + _line(item))
    for label, key in (("links out", "links_out"), ("links in", "links_in")):
        if data[key]:
            echo(f"{label}:")
            for item in data[key]:
                echo(f"  {item['rel']}  {_line(item)}")
    origin = data["provenance"]
    parts = [
        f"{key} {origin[key]}" for key in ("source", "session_id", "author") if origin.get(key)
    ]
    parts += [f"{key} {origin[key]}" for key in ("created_at", "updated_at") if origin.get(key)]
    echo("from: " + (", ".join(parts) or "unknown origin"))
    if data["history"]:
        echo(f"earlier versions: {data['history']}")
    for judgement in data["judgements"]:
        echo(f"judgement: {json.dumps(judgement, ensure_ascii=False, sort_keys=True)}")
    for note in data["dangling"]:
        echo(f"dangling link: {note['from']} {note['rel']} {note['to']} (no such memory)")
    for cycle in data["cycles"]:
        echo("cycle: " + " -> ".join(cycle))


@app.command()
def related(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="Most neighbours.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """List a memory's neighbours by links, shared files and shared tags, best first."""
    with _open(ctx) as engram:
        items = engram.related(ref, limit=limit)
    if as_json:
        _emit_json(items)
        return
    if not items:
        echo("no related memories")
    for item in items:
        echo(f"{item['score']:5.1f}  {_line(item)}")
        echo(f"       {item['reason']}")


@app.command()
def update(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="ID", help="Full id or a unique prefix of 4+ characters.")
    ],
    title: Annotated[str | None, typer.Option(help="New title.")] = None,
    content: Annotated[str | None, typer.Option(help="New content; '-' reads stdin.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", "-k")] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tags", "-t", help="Replace the tags.")
    ] = None,
    files: Annotated[
        list[str] | None, typer.Option("--files", "-f", help="Replace the files.")
    ] = None,
    importance: Annotated[int | None, typer.Option("--importance", "-i", min=1, max=5)] = None,
    status: Annotated[str | None, typer.Option()] = None,
    topic_key: Annotated[str | None, typer.Option()] = None,
    link: Annotated[
        list[str] | None, typer.Option(help="Replace links: REL:ID, repeatable.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Change fields of a memory (rev+1; the earlier text stays retrievable)."""
    if content == "-":
        content = _read_stdin()
    with _open(ctx) as engram:
        record = engram.update(
            ref,
            title=title,
            content=content,
            kind=kind,
            tags=tags,
            files=files,
            importance=importance,
            status=status,
            topic_key=topic_key,
            links=link,
        )
    if as_json:
        _emit_json(record)
    else:
        echo(f"{record['id']} rev {record['rev']}")


def _forget(ctx: typer.Context, ref: str, hard: bool, as_json: bool) -> None:
    with _open(ctx) as engram:
        record = engram.forget(ref, hard=hard)
    if as_json:
        _emit_json(record)
    else:
        how = "hard-deleted (text dropped)" if hard else "forgotten (tombstone kept)"
        echo(f"{record['id']} {how}")


@app.command()
def forget(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="ID", help="Full id or a unique prefix of 4+ characters.")
    ],
    hard: Annotated[bool, typer.Option("--hard", help="Also drop the text from the file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a memory; a tombstone stays so the delete reaches other clones."""
    _forget(ctx, ref, hard, as_json)


app.command("delete", help="Alias of forget.")(forget)


@app.command()
def stats(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Count memories by kind, status, scope and project."""
    with _open(ctx) as engram:
        data = engram.stats()
    if as_json:
        _emit_json(data)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for store in data["stores"]:
        console.print(
            f"[bold]{_rich(store['scope'])} store[/] {_rich(store['path'])} "
            f"({store['file_bytes']:,} bytes, backend {_rich(store['backend'])})"
        )
        console.print(
            f"  {store['memories']} memories, {store['tombstones']} tombstones, "
            f"{store['links']} links, {store['indexed']} in the full-text index"
        )
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("kind")
        table.add_column("count", justify="right")
        for name, count in store["by_kind"].items():
            table.add_row(_rich(name), str(count))
        console.print(table)
        statuses = ", ".join(f"{_rich(k)} {v}" for k, v in store["by_status"].items())
        console.print(f"  status: {statuses}")
        if store["top_tags"]:
            console.print(
                "  top tags: "
                + ", ".join(f"{_rich(k)} ({v})" for k, v in store["top_tags"].items())
            )


@app.command()
def context(
    ctx: typer.Context,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            min=0,
            help="Most tokens (characters / 4) in the briefing (default: context.budget, 2000).",
        ),
    ] = None,
    query: Annotated[
        str, typer.Option("--query", "-q", help="Also list the memories most relevant to this.")
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Print the session-start briefing: overview, decisions, pitfalls, hotspots, sessions."""
    with _open(ctx) as engram:
        briefing = engram.context(budget=budget, query=query)
    if as_json:
        _emit_json(briefing)
    else:
        echo(briefing["text"])


@app.command()
def check(
    ctx: typer.Context,
    files: Annotated[
        list[str] | None,
        typer.Option(
            "--files", "-f", help="Paths about to be edited, comma-separated or repeated."
        ),
    ] = None,
    text: Annotated[
        str, typer.Option("--text", help="The plan: also list the memories most relevant to it.")
    ] = "",
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=0, help="Most tokens (characters / 4) in the answer (800)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check before editing: pitfalls, decisions, hotspots and reverts that bear on these files."""
    with _open(ctx) as engram:
        result = engram.check(files or [], text=text, budget=budget)
    if as_json:
        _emit_json(result)
    else:
        echo(result["text"])


@app.command()
def timeline(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    before: Annotated[int, typer.Option("--before", "-b", min=0, help="Memories before it.")] = 5,
    after: Annotated[int, typer.Option("--after", "-a", min=0, help="Memories after it.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Show what happened before and after a memory in its session (else its project)."""
    with _open(ctx) as engram:
        data = engram.timeline(ref, before=before, after=after)
        shorts = engram.short_ids(
            [data["memory"]["id"], *(item["id"] for item in data["before"] + data["after"])]
        )
    if as_json:
        _emit_json(data)
        return
    where = (
        f"session {data['session_id']}" if data["scope"] == "session" else "project (no session)"
    )
    echo(f"timeline in {where}")
    if data["earlier"]:
        echo(f"   … {data['earlier']} earlier")
    for item in data["before"]:
        echo(f"   {_timeline_line(item, shorts)}")
    echo(f">> {_timeline_line(data['memory'], shorts)}")
    for item in data["after"]:
        echo(f"   {_timeline_line(item, shorts)}")
    if data["later"]:
        echo(f"   … {data['later']} later")


def _timeline_line(item: dict[str, Any], shorts: dict[str, str]) -> str:
    stamp = str(item.get("created_at", ""))[:16].replace("T", " ")
    return f"{stamp}  {shorts.get(item['id'], item['id'])}  {item['kind']:<10} {item['title']}"


def _text_arg(value: str | None, what: str) -> str:
    """Return an argument's text; '-', or nothing while stdin is not a terminal, reads stdin."""
    piped = sys.stdin is not None and not sys.stdin.isatty()
    if value == "-" or (value is None and piped):
        return _read_stdin()
    if value is None:
        raise InvalidInput(f"no {what} given", hint=f"pass the {what}, or pipe it in with '-'")
    return value


SessionOpt = Annotated[
    str | None,
    typer.Option("--session", "-s", help="Session id (default: the open session, if any)."),
]

session_app = typer.Typer(
    cls=EngramGroup,
    help="Start and end agent sessions and save their summaries.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(session_app, name="session")


@session_app.command("start")
def session_start(
    ctx: typer.Context,
    session_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Session id (default: a new one).")
    ] = None,
    directory: Annotated[
        str, typer.Option("--directory", "-d", help="The folder the agent works in.")
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Start a session (or reopen one) and print its id."""
    with _open(ctx) as engram:
        session = engram.session_start(session_id, directory=directory or os.getcwd())
    if as_json:
        _emit_json(session)
    else:
        echo(session["id"])


@session_app.command("end")
def session_end(
    ctx: typer.Context,
    session_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="Session id (default: the open one).")
    ] = None,
    summary: Annotated[
        str | None,
        typer.Option("--summary", help="Save this summary of the session ('-' reads stdin)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """End a session, saving its summary if given."""
    if summary == "-":
        summary = _read_stdin()
    with _open(ctx) as engram:
        session = engram.session_end(session_id, summary=summary or "")
    if as_json:
        _emit_json(session)
        return
    echo(f"ended {session['id']}")
    if session.get("summary_id"):
        echo(f"summary: {session['summary_id']}")


@session_app.command("summary")
def session_summary(
    ctx: typer.Context,
    content: Annotated[
        str | None,
        typer.Argument(help="Markdown with ## Goal, ## Accomplished … ('-' or a pipe: stdin)."),
    ] = None,
    session: SessionOpt = None,
    goal: Annotated[str | None, typer.Option(help="What the session set out to do.")] = None,
    instructions: Annotated[str | None, typer.Option(help="What the user asked for.")] = None,
    discoveries: Annotated[str | None, typer.Option(help="What was learned.")] = None,
    accomplished: Annotated[str | None, typer.Option(help="What got done.")] = None,
    next_steps: Annotated[str | None, typer.Option(help="What is left to do.")] = None,
    relevant_files: Annotated[
        str | None, typer.Option(help="Files that matter, one per line or comma-separated.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Save a session summary (Goal, Instructions, Discoveries, Accomplished, Next steps, Files)."""
    sections = {
        "goal": goal,
        "instructions": instructions,
        "discoveries": discoveries,
        "accomplished": accomplished,
        "next_steps": next_steps,
        "relevant_files": _file_list(relevant_files),
    }
    if content == "-" or (content is None and _stdin_has_data()):
        content = _read_stdin()
    with _open(ctx) as engram:
        result = engram.session_summary(content or "", session_id=session, **sections)
    if as_json:
        _emit_json(result.to_dict())
        return
    echo(result.record["id"])
    if result.action == "updated":
        echo(f"updated the summary of session {result.record.get('session_id')}", err=True)


def _file_list(value: str | None) -> str | None:
    if value is None:
        return None
    items = [part.strip() for line in value.splitlines() for part in line.split(",")]
    return "\n".join(f"- `{item}`" for item in items if item)


@app.command("prompt")
def prompt(
    ctx: typer.Context,
    text: Annotated[
        str | None, typer.Argument(help="The user's prompt ('-' or a pipe reads stdin).")
    ] = None,
    session: SessionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Save a user's prompt (kind prompt, secrets redacted) and print its id."""
    content = _text_arg(text, "prompt")
    with _open(ctx) as engram:
        result = engram.save_prompt(content, session_id=session)
    if as_json:
        _emit_json(result.to_dict())
    else:
        echo(result.record["id"])


@app.command()
def capture(
    ctx: typer.Context,
    file: Annotated[
        Path | None, typer.Argument(help="A file with the agent's output (default: stdin).")
    ] = None,
    session: SessionOpt = None,
    source: Annotated[str, typer.Option(help="Where the text came from.")] = "capture",
    as_json: JsonOpt = False,
) -> None:
    """Save the learnings of an agent's output (its last "Key Learnings" section)."""
    if file is None or str(file) == "-":
        text = _text_arg("-" if file else None, "agent output")
    else:
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise InvalidInput(f"{file}: cannot read: {exc.strerror or exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{file}: not UTF-8 text (byte {exc.start})") from exc
    with _open(ctx) as engram:
        result = engram.capture(text, session_id=session, source=source)
    if as_json:
        _emit_json(result)
        return
    if not result["extracted"]:
        echo('no "Key Learnings" section found: nothing saved', err=True)
        return
    for item in result["saved"]:
        echo(f"saved {item['id']}  {item['title']}")
    for item in result["duplicates"]:
        echo(f"known {item['id']}  {item['title']}")


@app.command()
def judge(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="ID", help="Full id or a unique prefix of 4+ characters.")
    ],
    score: Annotated[
        float | None, typer.Option(min=0.0, max=1.0, help="How useful it was, 0 to 1.")
    ] = None,
    verdict: Annotated[
        str | None, typer.Option(help="useful, outdated or wrong (outdated proposes archiving).")
    ] = None,
    reason: Annotated[str, typer.Option(help="Why, in a sentence.")] = "",
    query: Annotated[
        str, typer.Option(help="The search that surfaced it (scores it when no score is given).")
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """Judge a memory: useful ones rank up, wrong ones down; outdated ones get archived later."""
    with _open(ctx) as engram:
        record = engram.judge(ref, score=score, verdict=verdict, reason=reason, query=query)
    if as_json:
        _emit_json(record)
        return
    latest = record["judgements"][-1]
    how = latest.get("verdict") or ("heuristic" if latest.get("heuristic") else "score")
    echo(
        f"{record['id']}: judged {how} ({latest['score']:.2f}); "
        f"{len(record['judgements'])} judgement(s)"
    )


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
    with _open(ctx) as engram:
        if preview:
            groups = engram.consolidate_preview()
            if as_json:
                _emit_json({"groups": groups})
                return
            if not groups:
                echo("nothing to consolidate")
            for group in groups:
                echo(f"{group['kind']:<18} {group['action']:<8} {', '.join(group['ids'])}")
                echo(f"    {group['reason']}")
            return
        if apply or plan is not None:
            document = _read_json_file(plan) if plan is not None else None
            result = engram.consolidate_apply(document, dry_run=dry_run)
            for warning in result.get("warnings", []):
                echo(f"warning: {warning}", err=True)
            if as_json:
                _emit_json(result)
                return
            verb = "would change" if dry_run else "changed"
            echo(f"{verb} {result['changed']} memories ({result['recommendations']} groups)")
            for change in result["changes"]:
                state = "deleted" if change.get("deleted_at") else change.get("status", "active")
                echo(f"  {change['id']}  {state:<10} {change.get('title', '')}")
            return
        document = engram.consolidate()
    for warning in document.get("warnings", []):
        echo(f"warning: {warning}", err=True)
    if out is not None:
        out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if as_json:
        _emit_json(document)
        return
    recommendations = document["recommendations"]
    if not recommendations:
        echo("nothing to consolidate")
    for item in recommendations:
        group = item["group"]
        target = f" into {item['target']}" if item.get("target") else ""
        echo(f"{item['action']}{target}: {', '.join(group['ids'])}  ({item['decided_by']})")
        echo(f"    {item['reasoning']}")
    if out is not None:
        echo(f"plan written to {out}: apply it with engram consolidate --plan {out}")


@app.command()
def train(
    ctx: typer.Context,
    timeout: Annotated[
        float | None, typer.Option(min=1.0, help="Seconds before the trainer is stopped.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the trainer: insights from clusters, recurring pitfalls and long supersede chains."""
    bar_update, bar_close = _progress("training")

    def on_event(event: Any) -> None:
        percent = getattr(event, "percent", None)
        if bar_update is not None and isinstance(percent, int | float):
            bar_update(int(percent), 100)

    try:
        with _open(ctx) as engram:
            report = engram.train(timeout=timeout, on_event=on_event)
    finally:
        bar_close()
    if as_json:
        _emit_json(report)
    else:
        echo(
            f"{len(report['insights'])} insights ({report.get('written', 0)} new or changed), "
            f"{len(report['recommendations'])} recommendations for consolidation"
        )
    for problem in report["problems"]:
        echo(f"error: {problem}", err=True)
    if not report["ok"]:
        echo("hint: the trainer failed, so nothing was changed", err=True)
        raise typer.Exit(1)


insights_app = typer.Typer(
    cls=EngramGroup,
    help="List or delete the trainer's insights.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(insights_app, name="insights")


@insights_app.command("list")
def insights_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List the insights, newest first."""
    with _open(ctx) as engram:
        records = engram.insights()
    if as_json:
        _emit_json(records)
        return
    if not records:
        echo("no insights yet: run engram train")
    for record in records:
        sources = len(record.get("links") or [])
        echo(f"{record['id'][:8]}  {record.get('title', '')}  ({sources} sources)")


@insights_app.command("delete")
def insights_delete(
    ctx: typer.Context,
    ref: Annotated[
        str, typer.Argument(metavar="ID", help="The insight's id, or 4+ characters of it.")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Delete an insight (a later training does not bring it back)."""
    with _open(ctx) as engram:
        record = engram.delete_insight(ref)
    if as_json:
        _emit_json(record)
    else:
        echo(f"deleted {record['id']}")


projects_app = typer.Typer(
    cls=EngramGroup,
    help="List, tidy and merge the projects memories belong to.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(projects_app, name="projects")


@projects_app.command("list")
def projects_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List projects: memories, sessions and last activity (project and personal stores)."""
    with _open(ctx) as engram:
        rows = engram.projects()
    if as_json:
        _emit_json(rows)
        return
    if not rows:
        echo("no memories yet")
        return
    _table(
        ["project", "memories", "sessions", "last activity", "stores"],
        [
            [
                row["name"] or "(none)",
                str(row["memories"]),
                str(row["sessions"]),
                str(row["last_activity"])[:16].replace("T", " "),
                ", ".join(row["scopes"]),
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
    with _open(ctx) as engram:
        groups = engram.projects_variants()
        done = []
        for group in groups:
            sources = [name for name in group["names"] if name != group["into"]]
            ask = not (yes or dry_run or as_json)
            if ask and not sys.stdin.isatty():
                ask, dry = False, True
            else:
                dry = dry_run or (as_json and not yes)
            if ask:
                dry = not typer.confirm(f"merge {', '.join(sources)} into {group['into']}?")
            done.append(engram.projects_merge(sources, group["into"], dry_run=dry))
    if as_json:
        _emit_json({"groups": groups, "merges": done})
        return
    if not groups:
        echo("no project names look alike")
    for merge in done:
        verb = "would merge" if merge["dry_run"] else "merged"
        count = sum(merge["moved"].values())
        echo(f"{verb} {', '.join(merge['from'])} into {merge['into']} ({count} memories)")


@projects_app.command("prune")
def projects_prune(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show them.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Forget projects with no memories left (their sessions in this clone's log)."""
    with _open(ctx) as engram:
        result = engram.projects_prune(dry_run=dry_run)
    if as_json:
        _emit_json(result)
        return
    if not result["pruned"]:
        echo("no project without memories")
    verb = "would prune" if dry_run else "pruned"
    for name in result["pruned"]:
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
    with _open(ctx) as engram:
        result = engram.projects_merge(names[:-1], names[-1], dry_run=dry_run)
    if as_json:
        _emit_json(result)
        return
    verb = "would move" if dry_run else "moved"
    count = sum(result["moved"].values())
    echo(f"{verb} {count} memories from {', '.join(result['from'])} to {result['into']}")


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

    with _open(ctx) as engram:
        while True:
            result = engram.obsidian_export(vault, project=project, since=since)
            if as_json:
                _emit_json(result)
            else:
                echo(
                    f"{vault}: {len(result['written'])} notes written, "
                    f"{len(result['removed'])} removed, {result['unchanged']} unchanged"
                )
            if not watch:
                return
            signature = engram.project_ws.store.signature()
            while engram.project_ws.store.signature() == signature:
                time.sleep(1.0)


@app.command("export")
def export_(
    ctx: typer.Context,
    file: Annotated[Path | None, typer.Argument(help="Write here (default: stdout).")] = None,
    scope: Annotated[str, typer.Option(help="project or personal.")] = "project",
) -> None:
    """Export every memory and tombstone as engram's JSON (stdout or FILE)."""
    with _open(ctx) as engram:
        document = engram.export(scope=scope)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if file is None or str(file) == "-":
        echo(text, nl=False)
    else:
        file.write_text(text, encoding="utf-8")
        echo(f"exported {document['count']} records to {file}", err=True)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(
            metavar="FILE|DIR",
            help="An engram export, a Go engram export or chunk, an MCP memory JSONL file, "
            "a folder with manifest.json and chunks/, or - for stdin.",
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Merge another store's memories into this one (format detected; same merge as git)."""
    update_bar, close_bar = _progress("importing")
    try:
        with _open(ctx) as engram:
            if str(source) == "-":
                text = _read_stdin()
                from engram.model import MAX_DOCUMENT_DEPTH, loads

                try:
                    document = loads(text, what="stdin", max_depth=MAX_DOCUMENT_DEPTH)
                except ValueError as exc:
                    raise InvalidInput(f"stdin: not valid JSON: {exc}") from exc
                result = engram.import_(document, progress=update_bar)
            else:
                result = engram.import_path(source, progress=update_bar)
    finally:
        close_bar()
    if as_json:
        _emit_json(result.to_dict())
        return
    echo(
        f"{result.format}: added {result.added}, updated {result.updated}, "
        f"unchanged {result.unchanged}, skipped {len(result.errors)}"
    )
    for error in result.errors[:20]:
        echo(f"skipped {error}", err=True)
    if len(result.errors) > 20:
        echo(f"… and {len(result.errors) - 20} more skipped", err=True)


@app.command()
def sync(
    ctx: typer.Context,
    remote: Annotated[
        str | None,
        typer.Option(help="Also fetch, merge and push the store's branch on this git remote."),
    ] = None,
    branch: Annotated[
        str | None, typer.Option(help="The branch that carries the store (engram-memories).")
    ] = None,
    personal: Annotated[
        bool, typer.Option("--personal", help="Sync the personal store (ENGRAM_HOME).")
    ] = False,
    status: Annotated[
        bool, typer.Option("--status", help="Show chunks, contributors and what is pending.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Share memories: import others' sync chunks, export this clone's changes as one."""
    scope = "personal" if personal else "project"
    update_bar, close_bar = _progress("importing chunks")
    try:
        with _open(ctx) as engram:
            if status:
                report = engram.sync_status(scope=scope)
            else:
                report = engram.sync(scope=scope, remote=remote, branch=branch, progress=update_bar)
            if scope == "project":
                _offer_driver(engram)
    finally:
        close_bar()
    if as_json:
        _emit_json(report)
        return
    if status:
        echo(
            f"{report['scope']} store: {report['chunks']} chunks "
            f"({report['memories_in_chunks']} memory versions), clone {report['clone_id'][:8]}"
        )
        for who, count in report["contributors"].items():
            echo(f"  {who}: {count}")
        echo(
            f"pending: {len(report['pending_import'])} chunks to import, "
            f"{report['pending_export']} changed memories to export"
        )
    else:
        imported = report["imported"]
        echo(
            f"imported {len(report['imported_chunks'])} chunks (added {imported['added']}, "
            f"updated {imported['updated']}, unchanged {imported['unchanged']})"
        )
        if report["exported_chunk"]:
            echo(f"exported {report['exported']} memories as chunk {report['exported_chunk']}")
        else:
            echo("nothing to export")
        far = report.get("remote")
        if far:
            pulled = far["pulled"]["memories"]
            echo(
                f"{far['url']} ({far['branch']}): pulled {pulled['added']} new and "
                f"{pulled['updated']} changed memories, pushed {far['head'][:10]}"
            )
            for lock in far.get("cleared_locks") or []:
                echo(f"removed stale lock file {lock} (a killed engram sync left it)", err=True)
    for problem in report["problems"]:
        echo(f"warning: {problem}", err=True)


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


@app.command()
def resolve(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Repair .engram/ files a merge left conflicted, from git's three versions, and stage them."""
    with _open(ctx) as engram:
        resolved = engram.resolve()
    if as_json:
        _emit_json(resolved)
        return
    if not resolved:
        echo("nothing to resolve")
    for item in resolved:
        echo(
            f"resolved {item['path']}: {item['records']} entries, "
            f"{item['conflicts']} memories keep a concurrent edit (engram doctor lists them)"
        )


@app.command()
def log(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="ID", help="Full id or unique prefix.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Most versions.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Show the history of one memory across commits: each version with commit, author, date."""
    with _open(ctx) as engram:
        versions = engram.log(ref, limit=limit)
    if as_json:
        _emit_json(versions)
        return
    if not versions:
        echo("no committed version of this memory (commit .engram/ to start its log)")
    for version in versions:
        record = version.get("record") or {}
        title = record.get("title", "")
        rev = f" rev {record['rev']}" if record.get("rev") is not None else ""
        echo(
            f"{version['commit'][:10]}  {version['date'][:16].replace('T', ' ')}  "
            f"{version['author']}  {version['change']}{rev}  {title}"
        )
        echo(f"            {version['message']}")


def _index_summary(summary: dict[str, Any]) -> list[str]:
    """Render what the ADR and git indexers did as lines for a person."""
    lines: list[str] = []
    verb = "would write" if summary.get("dry_run") else "wrote"
    adr = summary.get("adr")
    if adr is not None:
        where = ", ".join(adr["dirs"]) or "no ADR folder found"
        lines.append(
            f"ADRs ({where}): {adr['found']} found, {adr['created']} new, {adr['updated']} "
            f"updated, {adr['archived']} archived, {adr['unchanged']} unchanged, "
            f"{len(adr['skipped'])} skipped"
        )
        lines += [f"  skipped {item['path']}: {item['reason']}" for item in adr["skipped"]]
    git = summary.get("git")
    if git is not None:
        if git["head"] is None:
            lines.append("git: nothing to mine")
        elif git["unchanged"]:
            lines.append(f"git: no new commits since {git['head'][:10]}")
        else:
            lines.append(
                f"git: {git['commits']} commits walked, {len(git['hotspots'])} hotspots, "
                f"{git['candidates_new']} new pitfall candidates "
                f"({git['candidates_found']} found)"
            )
        lines += [f"  note: {problem}" for problem in git["problems"]]
    lines.append(f"{verb} {summary.get('writes', 0)} memories")
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
    update_bar, close_bar = _progress("indexing")
    try:
        with _open(ctx) as engram:
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
        _emit_json({"search_index": search, **summary})
        return
    if rebuild:
        echo(f"rebuilt the search index: {search['records']} records")
    else:
        echo(f"search index up to date ({search['changed']} changed)")
    for line in _index_summary(summary):
        echo(line)


@app.command()
def doctor(
    ctx: typer.Context,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what can be repaired safely.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the store: parse errors, duplicate ids, conflict markers, chunks, secrets, index."""
    with _open(ctx) as engram:
        findings = engram.doctor(fix=fix)
    if as_json:
        _emit_json([finding.to_dict() for finding in findings])
    else:
        for finding in findings:
            mark = "fixed" if finding.fixed else finding.severity
            echo(f"{mark:<8} {finding.check}: {finding.message}")
    if any(f.severity == "error" and not f.fixed for f in findings):
        raise typer.Exit(1)


@app.command()
def setup(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Argument(
            metavar="AGENT", help="claude-code, codex, gemini-cli, opencode, cursor or vscode."
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
    from engram import agents
    from engram.config import find_repo_root

    root = find_repo_root(_start(ctx))
    if list_:
        found = agents.status(root)
        if as_json:
            _emit_json({"root": str(root), "files": [item.to_dict() for item in found]})
            return
        echo(f"{'agent':<12} {'scope':<8} {'what':<13} {'state':<11} path")
        for item in found:
            detail = f"  ({item.detail})" if item.detail else ""
            echo(
                f"{item.agent:<12} {item.scope:<8} {item.kind:<13} {item.state:<11} "
                f"{item.shown}{detail}"
            )
        return
    if agent is None:
        raise InvalidInput(
            "name an agent, or pass --list", hint=f"agents: {', '.join(agents.AGENTS)}"
        )
    result = agents.setup(agent, "user" if user else "project", root=root, dry_run=dry_run)
    if as_json:
        _emit_json(result.to_dict())
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


@app.command()
def version(as_json: JsonOpt = False) -> None:
    """Print the versions of engram, Python and its main libraries."""
    from engram.service import version_info

    info = version_info()
    if as_json:
        _emit_json(info)
    else:
        echo(f"engram {info.pop('engram')}")
        for name, value in info.items():
            echo(f"  {name} {value}")


# -- the commands other adapters serve ---------------------------------------------------------
# The CLI declares their options (typer lives here only) and runs each through the function the
# composition root names for it ("module:function", see add_adapters), imported only when the
# command runs: `engram check` loads no other adapter, and the adapters never import each other.
# tests/test_cli.py checks these declarations against the adapters' own names and defaults.

MCP_BUDGET = 4000  # engram.mcp_server.DEFAULT_BUDGET
HTTP_HOST = "127.0.0.1"  # engram.http_api.DEFAULT_HOST
HTTP_PORT = 7437  # engram.http_api.DEFAULT_PORT
HTTP_TOKEN_ENV = "ENGRAM_HTTP_TOKEN"  # engram.http_api.TOKEN_ENV
_RUNNERS: dict[str, str] = {}


def _runner(command: str) -> Callable[..., Any]:
    """Import and return the function that serves ``command`` (named by add_adapters)."""
    import importlib

    module, _, function = _RUNNERS[command].partition(":")
    runner: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return runner


def _root_of(ctx: typer.Context) -> Path:
    from engram.config import find_root

    directory = (ctx.obj or {}).get("dir")
    return find_root(Path(directory) if directory is not None else None)


class ToolProfile(enum.StrEnum):
    agent = "agent"
    admin = "admin"
    all = "all"


class CompatNames(enum.StrEnum):
    go_engram = "go-engram"
    engram_rs = "engram-rs"


def mcp_command(
    ctx: typer.Context,
    tools: Annotated[
        ToolProfile,
        typer.Option(
            "--tools",
            help="Tool profile: agent (everyday tools), admin (forget and maintenance) or all.",
        ),
    ] = ToolProfile.agent,
    compat: Annotated[
        list[CompatNames] | None,
        typer.Option(
            "--compat",
            metavar="go-engram|engram-rs",
            help="Also offer another memory tool's names and parameters (repeatable).",
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            help="Most tokens in one response (default: mcp.token_budget in config.yaml, "
            f"else {MCP_BUDGET}).",
        ),
    ] = None,
) -> None:
    """Serve this project's memory to coding agents over MCP (stdio)."""
    names = [c.value for c in compat or []]
    _runner("mcp")(_start(ctx), profile=tools.value, compat=names, budget=budget)


def daemon_command(
    ctx: typer.Context,
    socket: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Listen here (default .engram/state/engram.sock, or a short path for deep "
            "folders).",
        ),
    ] = None,
) -> None:
    """Serve this store over a Unix socket (newline-delimited JSON, engram-rs methods)."""
    from engram.config import ENGRAM_DIR
    from engram.rpc import socket_path

    root = _root_of(ctx)
    where = socket or socket_path(root / ENGRAM_DIR)

    def ready() -> None:
        echo(f"engram daemon listening on {where} (Ctrl-C stops it)", err=True)

    _runner("daemon")(root, socket, ready=ready)


def serve_command(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(help="TCP port to listen on.", min=0, max=65535)] = (
        HTTP_PORT
    ),
    host: Annotated[
        str,
        typer.Option(help=f"Address to bind; other than loopback needs {HTTP_TOKEN_ENV} set."),
    ] = HTTP_HOST,
) -> None:
    """Serve this project's memory over HTTP (REST + OpenAPI at /docs)."""

    def ready(url: str) -> None:
        echo(f"engram serving {url} (API docs at {url}/docs; Ctrl-C stops it)", err=True)

    _runner("serve")(_start(ctx), host=host, port=port, ready=ready)


def tui_command(
    ctx: typer.Context,
    ansi: Annotated[
        bool,
        typer.Option(
            "--ansi",
            help="Draw with the terminal's own 16 colours (for terminals with odd palettes).",
        ),
    ] = False,
) -> None:
    """Browse, search and tidy the project's memories in a terminal UI (needs engram-git[tui])."""
    _runner("tui")(_root_of(ctx), ansi=ansi)


ADAPTER_COMMANDS: dict[str, Callable[..., None]] = {
    "mcp": mcp_command,
    "daemon": daemon_command,
    "serve": serve_command,
    "tui": tui_command,
}


def add_adapters(runners: Mapping[str, str]) -> None:
    """Add the commands of ``runners`` (name -> "module:function" that serves it) to the app."""
    for name, target in runners.items():
        if name not in _RUNNERS:
            app.command(name)(ADAPTER_COMMANDS[name])
        _RUNNERS[name] = target


# -- the fast path -----------------------------------------------------------------------------
# `engram recall`, `check` and `context` are what agents and hooks run most, often as a fresh
# process. typer 0.29 builds a pydantic validator for every parameter of a command it runs,
# which costs more than the command itself; so main() parses a plain command line of these
# commands itself, reading their options from the typer declarations above (names, defaults,
# limits), calls the command, and hands anything else (help, unknown options, bad values) to
# typer. tests/test_cli.py checks that both accept the same options and print the same output.

FAST_COMMANDS = ("recall", "search", "check", "context")


@dataclass(frozen=True)
class _Slot:
    """One parameter of a fast command: its keyword, what it holds, its default and limits."""

    keyword: str
    kind: str  # flag, text, number or list
    default: Any
    minimum: float | None = None
    maximum: float | None = None


_KINDS: dict[Any, str] = {
    bool: "flag", str: "text", int: "number", int | None: "number", list[str] | None: "list",
}  # fmt: skip


def _plain(info: ParameterInfo) -> bool:
    """Tell whether a typer parameter does nothing the fast path would have to copy."""
    return (
        info.callback is None
        and info.parser is None
        and info.envvar is None
        and info.default_factory is None
        and info.expose_value
        and not info.is_eager
        and not info.clamp
        and not getattr(info, "prompt", False)
        and not getattr(info, "count", False)
        and getattr(info, "flag_value", None) is None
    )


class _Shape(NamedTuple):
    """What the fast path reads of a command: its function, context keyword, options, argument."""

    function: Callable[..., Any]
    context: str
    options: dict[str, _Slot]
    argument: _Slot | None


def _function(command: str) -> Callable[..., Any] | None:
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        if name == command:
            return info.callback
    return None


def _shape(command: str) -> _Shape | None:
    """Return how to call a fast command from its typer declaration, or None if it is not plain."""
    import inspect
    from typing import get_args, get_origin, get_type_hints

    function = _function(command) if command in FAST_COMMANDS else None
    if function is None:
        return None
    hints = get_type_hints(function, include_extras=True)
    context, options, argument = "", {}, None
    for name, parameter in inspect.signature(function).parameters.items():
        hint = hints[name]
        if hint is typer.Context:
            context = name
            continue
        if get_origin(hint) is not Annotated:
            return None
        base, info = get_args(hint)[:2]
        kind = _KINDS.get(base)
        if kind is None or not isinstance(info, ParameterInfo) or not _plain(info):
            return None
        slot = _Slot(name, kind, parameter.default, info.min, info.max)
        if isinstance(info, ArgumentInfo):
            if kind != "text" or argument is not None or parameter.default is parameter.empty:
                return None
            argument = slot
            continue
        # In Annotated[…, typer.Option("--name", "-n")] typer reads the first name as `default`.
        first = [info.default] if isinstance(info.default, str) else []
        names = [*first, *(info.param_decls or ())] or (
            [] if kind == "flag" else ["--" + name.replace("_", "-")]
        )
        if not names or any("/" in n or not n.startswith("-") for n in names):
            return None  # a flag's --x/--no-x, a renamed keyword: typer's own business
        options.update(dict.fromkeys(names, slot))
    return _Shape(function, context, options, argument) if context else None


def fast_options(command: str) -> set[str] | None:
    """Return the options the fast path reads for ``command``, or None if it leaves it to typer."""
    shape = _shape(command)
    return set(shape.options) if shape else None


def _number(text: str, slot: _Slot) -> int | None:
    if not (text.isascii() and text.isdigit()):
        return None  # signs, spaces, other digits: typer decides
    value = int(text)
    low = slot.minimum if slot.minimum is not None else value
    high = slot.maximum if slot.maximum is not None else value
    return value if low <= value <= high else None


def fast_command(argv: list[str]) -> tuple[Callable[..., Any], dict[str, Any]] | None:
    """Parse a plain `[-C PATH] recall|search|check|context …` line, or None to leave it to typer.

    Returns the command's function and its keyword arguments, the context among them.
    """
    args = list(argv)
    start: str | None = None
    if args[:1] == ["-C"] and len(args) >= 2:
        start, args = args[1], args[2:]
    shape = _shape(args[0]) if args else None
    if shape is None:
        return None
    options, argument = shape.options, shape.argument
    given: dict[str, Any] = {}
    words: list[str] = []
    rest = args[1:]
    position = 0
    while position < len(rest):
        token = rest[position]
        position += 1
        if token == "--":
            words.extend(rest[position:])
            break
        if not token.startswith("-") or len(token) == 1:
            words.append(token)
            continue
        name, has_value, inline = token.partition("=")
        inline_value = has_value and name.startswith("--")
        slot = options.get(name if inline_value else token)
        if slot is None or (slot.kind == "flag" and inline_value):
            return None  # --help, unknown options, --json=…: typer explains
        if slot.kind == "flag":
            given[slot.keyword] = True
            continue
        if not inline_value:
            if position == len(rest):
                return None
            inline, position = rest[position], position + 1
        if slot.kind == "list":
            given.setdefault(slot.keyword, []).append(inline)
        elif slot.kind == "number":
            number = _number(inline, slot)
            if number is None:
                return None
            given[slot.keyword] = number
        else:
            given[slot.keyword] = inline
    if len(words) > (1 if argument else 0):
        return None
    if argument is not None and words:
        given[argument.keyword] = words[0]
    kwargs = {slot.keyword: slot.default for slot in options.values()}
    if argument is not None:
        kwargs[argument.keyword] = argument.default
    kwargs.update(given)
    command = TyperCommand(args[0])
    kwargs[shape.context] = typer.Context(command, obj={"dir": Path(start) if start else None})
    return shape.function, kwargs


def main() -> None:
    """Run the CLI (the ``engram`` console script)."""
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    fast = fast_command(sys.argv[1:])
    if fast is None:
        app()
        return
    function, kwargs = fast
    try:
        with _boundary():
            function(**kwargs)
    except typer.Exit as exit_:
        raise SystemExit(exit_.exit_code) from None
