"""The commands on memories: remember, recall, get, why, related, update, forget, judge …

(and stats, timeline). Each command's options come from its operation's declaration
(``options``); the command calls the facade and renders the result (hits through
``engram.operations.views``), nothing more. Aliases (save, search, show, delete) are the same
commands under a second name.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram.cli.app import (
    JsonOpt,
    app,
    echo,
    emit_json,
    offer_driver,
    open_engram,
    read_stdin,
    rich_text,
    stdin_has_data,
    stdout_console,
    warn_problems,
)
from engram.cli.options import REQUIRED, Values, options
from engram.errors import InvalidInput, NotFound
from engram.model import kind_and_type, normalize_kind
from engram.operations.memory import (
    FORGET,
    GET,
    JUDGE,
    PIN,
    RECALL,
    RELATED,
    REMEMBER,
    TIMELINE,
    UNPIN,
    UPDATE,
    WHY,
)
from engram.operations.views import stale_note
from engram.plural import counted

if TYPE_CHECKING:
    from engram.service import Engram, Summary, TimelineEntry

STDIN = "'-' or a pipe reads standard input."


@app.command()
@options(REMEMBER, content={"note": STDIN})
def remember(
    ctx: typer.Context,
    values: Values,
    source: Annotated[str, typer.Option(help="Where it came from.")] = "cli",
    as_json: JsonOpt = False,
) -> None:
    """Save a memory and print its id (an identical recent save only counts)."""
    content = values["content"]
    if content == "-" or (content is None and stdin_has_data()):
        content = read_stdin()
    fields = values.keywords("title", "content", "type", "topic")
    fields.update(_go_save_fields(values))
    with open_engram(ctx) as engram:
        result = engram.remember(values["title"], content or "", source=source, **fields)
        offer_driver(engram)
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    if as_json:
        emit_json(result.to_dict())
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


app.command("save", help="Alias of remember (Go engram's save: TITLE MSG, --type, --topic).")(
    remember
)


def _go_type(written: str, *, default: str = "note") -> tuple[str, str | None]:
    """Return Go engram's --type as a kind and the type kept as written (None: the kind)."""
    try:
        return kind_and_type(written, default=default)
    except InvalidInput as exc:
        raise InvalidInput(f"--type: {exc.message}", hint=exc.hint) from exc


def _go_save_fields(values: Values) -> dict[str, Any]:
    """Return the fields Go engram's save flags set: --type as kind and type, --topic."""
    out: dict[str, Any] = {}
    topic = values["topic"]
    if topic is not None:
        if values["topic_key"] not in (None, topic):
            raise InvalidInput(
                f"--topic {topic!r} and --topic-key {values['topic_key']!r} differ",
                hint="--topic is Go engram's name for --topic-key: give one of them",
            )
        out["topic_key"] = topic
    written = values["type"]
    if written is not None:
        chosen = values["kind"] if values["kind"] not in (None, "note") else "note"
        kind, typ = _go_type(written, default=chosen)
        if typ is None and chosen != "note" and kind != normalize_kind(chosen):
            raise InvalidInput(
                f"--type {written!r} and --kind {chosen!r} name different kinds",
                hint="give one of them (--type is Go engram's name)",
            )
        out["kind"] = kind
        if typ is not None:
            out["extra"] = {"type": typ}
    return out


@app.command()
@options(RECALL)
def recall(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Search memories, best first (ranked by how well they match, status, age)."""
    query, offset, limit = values["query"] or "", values["offset"], values["limit"]
    filters = values.filters()
    typ = _type_filter(values["type"], filters)
    with open_engram(ctx) as engram:
        views = engram.recall_views(query, **filters, limit=limit, offset=offset, of_type=typ)
        warn_problems(engram)
    if as_json:
        emit_json({"query": query, "count": len(views), "hits": [view.full() for view in views]})
        return
    if not views:
        echo("no memories match", err=True)
        return
    for number, view in enumerate(views, start=offset + 1):
        flag = "" if view.status == "active" else f" [{view.status}]"
        echo(
            f"{number:>2}. {view.short_id}  {view.memory.get('kind', ''):<12} "
            f"{view.memory.get('title', '')}{flag}  ({view.score:.2f})"
        )
        if view.snippet:
            echo(f"    {view.snippet}")
        if view.stale:
            echo(f"    {view.stale_note}")


app.command("search", help="Alias of recall (Go engram's search: --type, --project, --limit).")(
    recall
)


def _type_filter(written: str | None, filters: dict[str, Any]) -> str | None:
    """Apply Go engram's --type: a kind joins the kind filter; return any other type (or None).

    The other type is filtered after ranking, by the facade (``recall_views(of_type=…)``).
    """
    if written is None or not written.strip():
        return None
    kind, typ = _go_type(written)
    if typ is not None:
        return typ
    if filters.get("kinds"):
        raise InvalidInput(
            f"--type {written!r} and --kind both filter by kind",
            hint="give one of them (--type is Go engram's name)",
        )
    filters["kinds"] = [kind]
    return None


@app.command()
@options(GET, id=REQUIRED)
def get(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Show one memory in full."""
    with open_engram(ctx) as engram:
        record = engram.get(_go_ref(engram, values["id"]))
        stale = engram.stale(record)
        warn_problems(engram)
    if as_json:
        emit_json({**record, "stale": stale} if stale else record)
        return
    echo(f"{record['id']}  {record.get('kind', '')}  [{record.get('status', 'active')}]")
    if stale:
        echo(stale_note(stale))
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
    origin = ", ".join(
        f"{key} {record[key]}" for key in ("source", "author", "session_id") if record.get(key)
    )
    if origin:
        echo(f"from: {origin}")
    echo(
        f"created {record.get('created_at')}  updated {record.get('updated_at')}  "
        f"rev {record.get('rev')}"
    )
    if record.get("duplicate_count"):
        echo(f"saved again {record['duplicate_count']} time(s)")
    _history(record)


app.command("show", help="Alias of get.")(get)


def _go_ref(engram: Engram, ref: str) -> str:
    """Return the id a reference names: Go engram's integer id (`timeline 455`), else ``ref``.

    A string of digits that names no Go id stays an engram id prefix, as the MCP names read it.
    """
    text = ref.strip()
    if text.isdigit() and len(text) <= 20:
        with contextlib.suppress(NotFound):
            return str(engram.by_go_id(int(text))["id"])
    return ref


def _history(record: dict[str, Any]) -> None:
    """Print a memory's earlier versions and the concurrent edits a merge kept of it."""
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


def _line(item: Summary) -> str:
    return f"{item.id}  {item.kind}  [{item.status}]  {item.title}"


@app.command()
@options(WHY, id=REQUIRED)
def why(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Show why a memory exists: what it supersedes, what superseded it, links, provenance."""
    with open_engram(ctx) as engram:
        data = engram.why(values["id"])
    if as_json:
        emit_json(data.to_dict())
        return
    echo(_line(data.memory))
    if data.stale:
        echo(stale_note(data.stale))
    for label, chain in (("supersedes", data.supersedes), ("superseded by", data.superseded_by)):
        if chain:
            echo(f"{label}:")
            for entry in chain:
                echo("  " * entry.depth + _line(entry))
    for label, links in (("links out", data.links_out), ("links in", data.links_in)):
        if links:
            echo(f"{label}:")
            for link in links:
                echo(f"  {link.rel}  {_line(link)}")
    origin = data.provenance
    parts = [
        f"{key} {origin[key]}" for key in ("source", "session_id", "author") if origin.get(key)
    ]
    parts += [f"{key} {origin[key]}" for key in ("created_at", "updated_at") if origin.get(key)]
    echo("from: " + (", ".join(parts) or "unknown origin"))
    if data.history:
        echo(f"earlier versions: {data.history}")
    for judgement in data.judgements:
        echo(f"judgement: {json.dumps(judgement, ensure_ascii=False, sort_keys=True)}")
    for note in data.dangling:
        echo(f"dangling link: {note.source} {note.rel} {note.to} (no such memory)")
    for cycle in data.cycles:
        echo("cycle: " + " -> ".join(cycle))


@app.command()
@options(RELATED, id=REQUIRED)
def related(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """List a memory's neighbours by links, shared files and shared tags, best first."""
    with open_engram(ctx) as engram:
        items = engram.related(values["id"], limit=values["limit"])
    if as_json:
        emit_json([item.to_dict() for item in items])
        return
    if not items:
        echo("no related memories")
    for item in items:
        echo(f"{item.score:5.1f}  {_line(item)}")
        echo(f"       {item.reason}")


@app.command()
@options(UPDATE, content={"note": "'-' reads standard input."})
def update(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Change fields of a memory (rev+1; the earlier text stays retrievable)."""
    changes = values.keywords("id")
    if changes.get("content") == "-":
        changes["content"] = read_stdin()
    with open_engram(ctx) as engram:
        record = engram.update(values["id"], **changes)
    if as_json:
        emit_json(record)
    else:
        echo(f"{record['id']} rev {record['rev']}")


@app.command()
@options(FORGET)
def forget(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Delete a memory; a tombstone stays so the delete reaches other clones."""
    hard = values["hard"]
    with open_engram(ctx) as engram:
        record = engram.forget(values["id"], hard=hard)
    if as_json:
        emit_json(record)
    else:
        how = "hard-deleted (text dropped)" if hard else "forgotten (tombstone kept)"
        echo(f"{record['id']} {how}")


app.command("delete", help="Alias of forget.")(forget)


@app.command()
@options(PIN)
def pin(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Pin a memory: every session briefing shows it first, within its budget."""
    with open_engram(ctx) as engram:
        record = engram.pin(values["id"])
    if as_json:
        emit_json(record)
    else:
        echo(f"{record['id']} pinned: every briefing shows it first")


@app.command()
@options(UNPIN)
def unpin(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Unpin a memory: the briefing ranks it like any other again."""
    with open_engram(ctx) as engram:
        record = engram.unpin(values["id"])
    if as_json:
        emit_json(record)
    else:
        echo(f"{record['id']} unpinned")


@app.command()
def stats(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Count memories by kind, status, scope and project."""
    with open_engram(ctx) as engram:
        data = engram.stats()
        warn_problems(engram)
    if as_json:
        emit_json(data.to_dict())
        return
    from rich.table import Table

    console = stdout_console()
    for store in data.stores:
        console.print(
            f"[bold]{rich_text(store.scope)} store[/] {rich_text(store.path)} "
            f"({store.file_bytes:,} bytes, backend {rich_text(store.backend)})"
        )
        console.print(
            f"  {counted(store.memories, 'memory')}, {counted(store.tombstones, 'tombstone')}, "
            f"{counted(store.links, 'link')}, {store.indexed} in the full-text index"
        )
        kinds = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        kinds.add_column("kind")
        kinds.add_column("count", justify="right")
        for name, count in store.by_kind.items():
            kinds.add_row(rich_text(name), str(count))
        console.print(kinds)
        statuses = ", ".join(f"{rich_text(k)} {v}" for k, v in store.by_status.items())
        console.print(f"  status: {statuses}")
        if store.top_tags:
            console.print(
                "  top tags: "
                + ", ".join(f"{rich_text(k)} ({v})" for k, v in store.top_tags.items())
            )


@app.command()
@options(TIMELINE, id=REQUIRED)
def timeline(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Show what happened before and after a memory in its session (else its project)."""
    with open_engram(ctx) as engram:
        ref = _go_ref(engram, values["id"])
        data = engram.timeline(ref, before=values["before"], after=values["after"])
        shorts = engram.short_ids([item.id for item in [data.memory, *data.before, *data.after]])
    if as_json:
        emit_json(data.to_dict())
        return
    where = f"session {data.session_id}" if data.scope == "session" else "project (no session)"
    echo(f"timeline in {where}")
    if data.earlier:
        echo(f"   … {data.earlier} earlier")
    for item in data.before:
        echo(f"   {_timeline_line(item, shorts)}")
    echo(f">> {_timeline_line(data.memory, shorts)}")
    for item in data.after:
        echo(f"   {_timeline_line(item, shorts)}")
    if data.later:
        echo(f"   … {data.later} later")


def _timeline_line(item: TimelineEntry, shorts: dict[str, str]) -> str:
    stamp = str(item.created_at)[:16].replace("T", " ")
    return f"{stamp}  {shorts.get(item.id, item.id)}  {item.kind:<10} {item.title}"


@app.command()
@options(JUDGE, id=REQUIRED)
def judge(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
    """Judge a memory: useful ones rank up, wrong ones down; outdated ones get archived later."""
    with open_engram(ctx) as engram:
        record = engram.judge(values["id"], **values.keywords("id"))
    if as_json:
        emit_json(record)
        return
    latest = record["judgements"][-1]
    how = latest.get("verdict") or ("heuristic" if latest.get("heuristic") else "score")
    echo(
        f"{record['id']}: judged {how} ({latest['score']:.2f}); "
        f"{len(record['judgements'])} judgement(s)"
    )
