"""The textual app of ``engram tui``: dashboard, search, memory detail, review inbox, tidy-up.

It owns the screens and their keys; every read and write goes through one open
``engram.service.Engram`` (the facade), so the store's invariants stay the facade's business.
Text from memories is untrusted: it is shown as plain text (never parsed as textual markup),
with its control characters made visible (engram.terminal), and only a memory's content is
rendered as Markdown. The UI is keyboard-only (no mouse
needed, so it works over SSH) and uses theme colours only, so ``NO_COLOR`` and the ``--ansi``
theme apply everywhere. It must not import the other adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import rich.text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Header, Input, Label, Markdown, Static

from engram.errors import EngramError
from engram.model import files_of, importance_of, links_of, rev_of, scope_of, status_of, tags_of
from engram.operations.views import is_candidate, supersede_warning
from engram.plural import counted
from engram.service import Engram
from engram.terminal import visible

if TYPE_CHECKING:
    from engram.service import Lineage, Neighbour, Stats, Timeline


class Text(rich.text.Text):
    """A rich Text whose control characters are shown (``\\x1b``), never sent to the terminal."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(visible(text), *args, **kwargs)


SHORT = 8  # id characters shown in tables
SEARCH_LIMIT = 50
DEBOUNCE = 0.15  # seconds between the last key typed and the search

Row = tuple[str, Mapping[str, Any]]  # (relation label, memory summary with id/kind/status/title)


def short(rid: object) -> str:
    """Return the first characters of an id, as tables show it."""
    return str(rid)[:SHORT]


def counts_text(stats: Stats) -> str:
    """Return the dashboard's counts: memories by kind and by status over every store."""
    total = 0
    by_kind: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for store in stats.stores:
        total += store.memories
        for key, value in store.by_kind.items():
            by_kind[key] = by_kind.get(key, 0) + value
        for key, value in store.by_status.items():
            by_status[key] = by_status.get(key, 0) + value

    def line(counts: Mapping[str, int]) -> str:
        ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return " · ".join(f"{key} {value}" for key, value in ordered) or "none"

    stores = [f"{store.scope} {store.memories}" for store in stats.stores]
    where = f" ({' · '.join(stores)})" if len(stores) > 1 else ""
    return "\n".join(
        [
            f"Project {stats.project}: {counted(total, 'memory')}{where}",
            f"By kind:   {line(by_kind)}",
            f"By status: {line(by_status)}",
        ]
    )


def hotspots_text(record: Mapping[str, Any] | None, limit: int = 10) -> str:
    """Return the code hotspots a hotspots memory lists, most changed first."""
    if record is None or status_of(record) in ("archived", "rejected"):
        return "No hotspots yet (engram index --git finds them)."
    spots = [s for s in record.get("hotspots") or [] if isinstance(s, Mapping)]
    if not spots:
        return "No hotspots yet (engram index --git finds them)."
    lines = [f"{s.get('path', '')}  ({_changes(s.get('changes'))})" for s in spots[:limit]]
    if len(spots) > limit:
        lines.append(f"… and {len(spots) - limit} more")
    return "\n".join(lines)


def _changes(count: object) -> str:
    return counted(count, "change") if isinstance(count, int) else f"{count or '?'} changes"


def why_rows(lineage: Lineage) -> list[Row]:
    """Return the memories a lineage names: supersede chains first, then other links."""
    rows: list[Row] = []
    for entry in lineage.supersedes:
        depth = entry.depth
        rows.append(("supersedes" if depth == 1 else f"supersedes (×{depth})", entry.to_dict()))
    for entry in lineage.superseded_by:
        depth = entry.depth
        label = "superseded by" if depth == 1 else f"superseded by (×{depth})"
        rows.append((label, entry.to_dict()))
    for link in lineage.links_out:
        if link.rel != "supersedes":  # already in the chain above
            rows.append((link.rel, link.to_dict()))
    for link in lineage.links_in:
        if link.rel != "supersedes":
            rows.append((f"{link.rel} (in)", link.to_dict()))
    return rows


def related_rows(related: Iterable[Neighbour]) -> list[Row]:
    """Return a memory's neighbours with the reasons they are related."""
    return [(item.reason or "related", item.to_dict()) for item in related]


def timeline_rows(timeline: Timeline) -> list[Row]:
    """Return the memories around one, oldest first, the memory itself marked."""
    rows: list[Row] = [
        (f"before {str(item.created_at)[:16]}", item.to_dict()) for item in timeline.before
    ]
    memory = timeline.memory
    rows.append((f"this {str(memory.created_at)[:16]}", memory.to_dict()))
    for item in timeline.after:
        rows.append((f"after {str(item.created_at)[:16]}", item.to_dict()))
    return rows


def meta_text(record: Mapping[str, Any], stale: list[str]) -> str:
    """Return a memory's fields below its title: ids, tags, files, provenance, staleness."""
    lines = [
        f"id {record.get('id', '')} · {record.get('kind', '')} · {status_of(record)}"
        f" · importance {importance_of(record)} · rev {rev_of(record)}",
        f"tags: {', '.join(map(str, tags_of(record))) or '-'}",
        f"files: {', '.join(map(str, files_of(record))) or '-'}",
        f"source: {record.get('source') or '-'} · author: {record.get('author') or '-'}"
        f" · project: {record.get('project') or '-'} ({scope_of(record)})",
        f"created {record.get('created_at', '')} · updated {record.get('updated_at', '')}",
    ]
    if record.get("session_id"):
        lines.append(f"session: {record['session_id']}")
    if record.get("topic_key"):
        lines.append(f"topic: {record['topic_key']}")
    history = record.get("history") or []
    if history:
        lines.append(f"history: {len(history)} earlier version{'s' if len(history) > 1 else ''}")
    if stale:
        lines.append("may be stale: " + "; ".join(stale))
    return "\n".join(lines)


def fill(table: DataTable[Any], rows: Iterable[Row]) -> list[str]:
    """Replace a table's rows (relation, id, kind, status, title); return the ids in order."""
    table.clear()
    ids: list[str] = []
    for label, item in rows:
        rid = str(item.get("id", ""))
        cells = (label, short(rid), item.get("kind", ""), status_of(item))
        table.add_row(
            *(Text(str(cell)) for cell in cells),
            Text(str(item.get("title", ""))),
            key=str(len(ids)),
        )
        ids.append(rid)
    return ids


def memory_table(table_id: str, first: str = "") -> DataTable[Any]:
    """Return an empty table of memories with a first column named ``first``."""
    table: DataTable[Any] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
    table.add_columns(first, "id", "kind", "status", "title")
    return table


class MemoryScreen(Screen[None]):
    """A screen whose tables list memories: enter on a row opens the memory."""

    def __init__(self) -> None:
        super().__init__()
        self.row_ids: dict[str, list[str]] = {}

    @property
    def tui(self) -> EngramApp:
        """The running EngramApp (its Engram, its debounce, its way to open memories)."""
        app = self.app
        assert isinstance(app, EngramApp)
        return app

    def selected(self, table: DataTable[Any]) -> str | None:
        """Return the id under a table's cursor."""
        ids = self.row_ids.get(table.id or "", [])
        if not ids or not 0 <= table.cursor_row < len(ids):
            return None
        return ids[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        ids = self.row_ids.get(event.data_table.id or "", [])
        index = int(str(event.row_key.value))
        if 0 <= index < len(ids):
            self.tui.open_memory(ids[index])


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question before a change (y confirms; n or escape cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.question), id="question")
            yield Label("y: yes   n / escape: no")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class SupersedeScreen(ModalScreen[str | None]):
    """Pick the memory the current one supersedes: by id prefix, or by search (Enter applies).

    Typed words that are no memory's id search the memories as the search screen does; ↓ moves
    into the results, and Enter takes the highlighted one. Picking an active memory while the
    current one is archived, superseded or rejected asks first.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("down", "results", "Results", show=False),
    ]

    def __init__(self, engram: Engram, current: Mapping[str, Any]) -> None:
        super().__init__()
        self.engram = engram
        self.current = current
        self.target: str | None = None
        self.found: dict[str, Mapping[str, Any]] = {}  # id → record, of the results shown
        self.row_ids: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(
                Text(f"Which memory does “{self.current.get('title', '')}” supersede?"),
                id="question",
            )
            yield Input(placeholder="id, id prefix, or words to search", id="target")
            yield memory_table("candidates", "score")
            yield Static("", id="preview")
            yield Label("enter: supersede it   ↓: the results   escape: cancel")

    def on_input_changed(self, event: Input.Changed) -> None:
        typed = event.value.strip()
        table = self.query_one("#candidates", DataTable)
        self.found = {}
        self.row_ids = fill(table, [])
        self.pick(None)
        if not typed:
            return
        try:
            record = self.engram.get(typed)
        except EngramError as exc:
            missed = exc.message
        else:
            self.found = {str(record["id"]): record}
            self.row_ids = fill(table, [("id", record)])
            self.pick(str(record["id"]))
            return
        try:
            hits = self.engram.recall(typed, limit=10)
        except EngramError as exc:
            self.show(exc.message)
            return
        rows = [hit for hit in hits if hit.record.get("id") != self.current.get("id")]
        self.found = {str(hit.record["id"]): hit.record for hit in rows}
        self.row_ids = fill(table, ((f"{hit.score:.2f}", hit.record) for hit in rows))
        if self.row_ids:
            self.pick(self.row_ids[0])
        else:
            self.show(f"{missed}; no memory matches these words either")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        index = event.cursor_row
        if 0 <= index < len(self.row_ids):
            self.pick(self.row_ids[index])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.apply()

    def show(self, message: str) -> None:
        self.query_one("#preview", Static).update(Text(message))

    def pick(self, rid: str | None) -> None:
        """Make ``rid`` the memory to supersede and say what would happen (None: no pick)."""
        self.target = None
        if rid is None:
            self.show("")
            return
        record = self.found[rid]
        if rid == self.current.get("id"):
            self.show("that is this memory: a memory cannot supersede itself")
            return
        self.target = rid
        said = (
            f"{short(rid)} {record.get('kind', '')} “{record.get('title', '')}” "
            f"({status_of(record)}) will become superseded"
        )
        warning = supersede_warning(self.current, record)
        self.show(f"{said}\nwarning: {warning}" if warning else said)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply()

    def apply(self) -> None:
        """Supersede the picked memory; ask first when the warning applies."""
        target = self.target
        if target is None:
            self.notify(
                "type the id (or a unique prefix) of another memory, or words to find it",
                severity="warning",
            )
            return
        warning = supersede_warning(self.current, self.found[target])
        if not warning:
            self.dismiss(target)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(target)

        self.app.push_screen(ConfirmScreen(f"Warning: {warning}. Supersede it anyway?"), answered)

    def action_results(self) -> None:
        table = self.query_one("#candidates", DataTable)
        if table.row_count:
            table.focus()

    def action_cancel(self) -> None:
        self.dismiss(None)


class DashboardScreen(MemoryScreen):
    """Counts by kind and status, code hotspots, pitfall candidates and recent sessions."""

    def __init__(self) -> None:
        super().__init__()

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Label("Memories", classes="heading")
            yield Static("", id="counts")
            yield Label("Code hotspots", classes="heading")
            yield Static("", id="hotspots")
            yield Label(
                "Pitfall candidates (enter opens, then c confirms, x rejects)", classes="heading"
            )
            yield memory_table("candidates", "source")
            yield Label("Recent sessions (tab moves between the lists)", classes="heading")
            yield memory_table("sessions", "created")
        yield Footer()

    def on_screen_resume(self, _: events.ScreenResume) -> None:
        self.tui.guard(self.reload)
        if not isinstance(self.focused, DataTable):
            self.focus_lists()

    def focus_lists(self) -> None:
        """Focus the first list that has rows (candidates, else sessions): enter opens its row."""
        for table in self.query(DataTable):
            if table.row_count:
                table.focus()
                return
        self.query_one("#candidates", DataTable).focus()

    def reload(self) -> None:
        """Read the counts, hotspots, candidates and sessions again."""
        engram = self.tui.engram
        self.query_one("#counts", Static).update(Text(counts_text(engram.stats())))
        self.query_one("#hotspots", Static).update(Text(hotspots_text(engram.hotspots())))
        found = engram.recall("", kinds="pitfall", statuses="proposed", limit=SEARCH_LIMIT)
        candidates = [hit.record for hit in found if is_candidate(hit.record)]
        self.row_ids["candidates"] = fill(
            self.query_one("#candidates", DataTable),
            ((str(r.get("source", "")), r) for r in candidates),
        )
        sessions = [hit.record for hit in engram.recall("", kinds="session", limit=15)]
        sessions.sort(key=lambda r: str(r.get("created_at") or ""), reverse=True)
        self.row_ids["sessions"] = fill(
            self.query_one("#sessions", DataTable),
            ((str(r.get("created_at", ""))[:16], r) for r in sessions[:5]),
        )


class SearchScreen(MemoryScreen):
    """Search as you type; enter (or a row) opens the memory."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("down", "results", "Results", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._timer: Timer | None = None
        self.searched: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="search memories (any words)", id="query")
        yield Static("", id="summary")
        yield memory_table("results", "score")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#query", Input).focus()
        self.tui.guard(self.search)

    def on_screen_resume(self, _: events.ScreenResume) -> None:
        if self.searched is not None:
            self.tui.guard(self.search)  # an action on a memory may have changed the results

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(self.tui.debounce, lambda: self.tui.guard(self.search))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.tui.guard(self.search)
        table = self.query_one("#results", DataTable)
        rid = self.selected(table)
        if rid is not None:
            self.tui.open_memory(rid)

    def search(self) -> None:
        """Run the query in the input now and show the hits."""
        self._timer = None
        query = self.query_one("#query", Input).value
        hits = self.tui.engram.recall(query, limit=SEARCH_LIMIT)
        self.searched = query
        table = self.query_one("#results", DataTable)
        self.row_ids["results"] = fill(table, ((f"{hit.score:.2f}", hit.record) for hit in hits))
        what = f"for “{query.strip()}”" if query.strip() else "(best first, no query)"
        self.query_one("#summary", Static).update(
            Text(
                f"{counted(len(hits), 'result')} {what}"
                " · enter opens the highlighted one, ↓ moves into the list"
            )
        )

    def action_results(self) -> None:
        self.query_one("#results", DataTable).focus()

    def action_back(self) -> None:
        self.app.pop_screen()


class ReviewScreen(MemoryScreen):
    """The review inbox: memories proposed from sessions, oldest first, to accept or reject."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("y", "verdict('accept')", "Accept"),
        Binding("x", "verdict('reject')", "Reject"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Label("Proposed, not reviewed (y accepts, x rejects, enter opens)", classes="heading")
        yield Static("", id="summary")
        yield memory_table("inbox", "source")
        yield Footer()

    def on_mount(self) -> None:
        self.tui.guard(self.reload)
        self.query_one("#inbox", DataTable).focus()

    def on_screen_resume(self, _: events.ScreenResume) -> None:
        self.tui.guard(self.reload)

    def reload(self) -> None:
        """Read the inbox again."""
        review = self.tui.engram.review()
        table = self.query_one("#inbox", DataTable)
        self.row_ids["inbox"] = fill(table, ((str(r.get("source", "")), r) for r in review.items))
        summary = f"{counted(review.left, 'proposed memory')} waiting for review"
        self.query_one("#summary", Static).update(Text(summary))

    def action_verdict(self, verdict: str) -> None:
        rid = self.selected(self.query_one("#inbox", DataTable))
        if rid is None:
            return

        def judge() -> None:
            (record,) = self.tui.engram.review(verdict, [rid]).items
            done = "Accepted" if verdict == "accept" else "Rejected"
            self.app.notify(visible(f"{done}: {record.get('title', '')}"), markup=False)
            self.reload()

        self.tui.guard(judge)

    def action_back(self) -> None:
        self.app.pop_screen()


class DetailScreen(MemoryScreen):
    """One memory: fields, content, and its why / related / timeline links to follow."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("w", "links('why')", "Why"),
        Binding("r", "links('related')", "Related"),
        Binding("t", "links('timeline')", "Timeline"),
        Binding("c", "confirm", "Confirm"),
        Binding("x", "reject", "Reject"),
        Binding("a", "archive", "Archive"),
        Binding("s", "supersede", "Supersede"),
        Binding("pageup", "scroll_body(-1)", "Scroll up", show=False),
        Binding("pagedown", "scroll_body(1)", "Scroll down", show=False),
    ]

    def __init__(self, rid: str) -> None:
        super().__init__()
        self.rid = rid
        self.record: dict[str, Any] = {}
        self.mode = "why"

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="body"):
            yield Static("", id="title")
            yield Static("", id="meta")
            yield Markdown("", id="content")
        yield Label("", id="links-heading", classes="heading")
        yield memory_table("links", "relation")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#links", DataTable).focus()

    def on_screen_resume(self, _: events.ScreenResume) -> None:
        self.tui.guard(self.reload)

    def reload(self) -> None:
        """Read the memory and its links again (after a change, or on coming back)."""
        engram = self.tui.engram
        try:
            self.record = dict(engram.get(self.rid))
        except EngramError as exc:
            self.notify(visible(exc.message), title="memory gone", severity="error", markup=False)
            self.app.pop_screen()
            return
        record = self.record
        self.query_one("#title", Static).update(Text(str(record.get("title", "")), style="bold"))
        self.query_one("#meta", Static).update(Text(meta_text(record, engram.stale(record))))
        content = visible(str(record.get("content") or "_(no content)_"))
        self.query_one("#content", Markdown).update(content)
        self.show_links(self.mode)
        self.refresh_bindings()

    def show_links(self, mode: str) -> None:
        """Fill the links table with the memory's lineage, neighbours or timeline."""
        engram = self.tui.engram
        self.mode = mode
        if mode == "related":
            rows = related_rows(engram.related(self.rid, limit=20))
            heading = "Related (w why · t timeline; enter opens)"
        elif mode == "timeline":
            timeline = engram.timeline(self.rid, before=10, after=10)
            rows = timeline_rows(timeline)
            where = f"session {timeline.session_id}" if timeline.session_id else "project"
            heading = f"Timeline in the {where} (w why · r related; enter opens)"
        else:
            rows = why_rows(engram.why(self.rid))
            heading = "Why: supersedes, superseded by, links (r related · t timeline; enter opens)"
        if not rows:
            heading += " — nothing here"
        self.query_one("#links-heading", Label).update(Text(heading))
        table = self.query_one("#links", DataTable)
        self.row_ids["links"] = fill(table, rows)
        if mode == "timeline" and self.rid in self.row_ids["links"]:
            table.move_cursor(row=self.row_ids["links"].index(self.rid))  # start at this memory

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Keys that do not apply to this memory leave the footer (it is narrow enough).
        if action in ("confirm", "reject"):
            return is_candidate(self.record)
        if action == "archive":
            return self.record.get("status") != "archived"
        if action == "links":  # the key of the list shown would show it again
            return parameters[:1] != (self.mode,)
        return True

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll_body(self, direction: int) -> None:
        body = self.query_one("#body", VerticalScroll)
        if direction < 0:
            body.scroll_page_up()
        else:
            body.scroll_page_down()

    def action_links(self, mode: str) -> None:
        self.tui.guard(lambda: self.show_links(mode))
        self.query_one("#links", DataTable).focus()
        self.refresh_bindings()

    def action_confirm(self) -> None:
        self.change_status("active", "Confirmed")

    def action_reject(self) -> None:
        self.ask(f"Reject the pitfall candidate “{self.record.get('title', '')}”?", "rejected")

    def action_archive(self) -> None:
        self.ask(f"Archive “{self.record.get('title', '')}”?", "archived")

    def ask(self, question: str, status: str) -> None:
        """Change the status after the user says yes."""
        verb = {"rejected": "Rejected", "archived": "Archived"}[status]

        def answered(yes: bool | None) -> None:
            if yes:
                self.change_status(status, verb)

        self.app.push_screen(ConfirmScreen(question), answered)

    def change_status(self, status: str, verb: str) -> None:
        """Set the memory's status, then say what changed and show it."""
        before = status_of(self.record)
        self.act(
            lambda: self.tui.engram.update(self.rid, status=status),
            f"{verb} {short(self.rid)}: status {before} → {status}",
        )

    def action_supersede(self) -> None:
        def picked(target: str | None) -> None:
            if target is None:
                return
            links = [dict(link) for link in links_of(self.record)]
            links.append({"rel": "supersedes", "to": target})
            self.act(
                lambda: self.tui.engram.update(self.rid, links=links),
                f"{short(self.rid)} supersedes {short(target)}: {short(target)} is now superseded",
            )

        self.app.push_screen(SupersedeScreen(self.tui.engram, self.record), picked)

    def act(self, change: Callable[[], object], done: str) -> None:
        """Run a change through the facade; report an error instead of crashing."""
        try:
            change()
        except EngramError as exc:
            message = f"{exc.message}\n{exc.hint}" if exc.hint else exc.message
            self.notify(visible(message), title="not changed", severity="error", markup=False)
            return
        self.reload()
        self.notify(visible(done), markup=False)


class EngramApp(App[None]):
    """Browse, search and tidy one project's memories (built on an open Engram)."""

    TITLE = "engram"
    CSS = """
    .heading { text-style: bold; margin-top: 1; }
    #counts, #hotspots { padding-left: 2; }
    DataTable { height: auto; max-height: 14; }
    #results { height: 1fr; max-height: 100%; }
    #body { height: 1fr; }
    #title { text-style: bold; padding: 0 1; }
    #meta { padding: 0 1; color: $text-muted; }
    #links { height: auto; max-height: 12; }
    ConfirmScreen, SupersedeScreen { align: center middle; }
    #dialog { width: 72; height: auto; border: round $primary; padding: 1 2; background: $surface; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("slash", "search", "Search"),
        Binding("d", "dashboard", "Dashboard"),
        Binding("v", "review", "Review"),
    ]

    def __init__(self, engram: Engram, *, ansi: bool = False, debounce: float = DEBOUNCE) -> None:
        super().__init__()
        self.engram = engram
        self.debounce = debounce
        self.ansi = ansi

    def on_mount(self) -> None:
        if self.ansi:
            self.theme = "ansi-dark"
        self.sub_title = self.engram.project
        self.push_screen(DashboardScreen())

    def _blocked(self) -> bool:
        """Say whether a dialog is open (app keys wait until it is answered)."""
        return isinstance(self.screen, ModalScreen)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # A key the footer shows must do something where it is shown: none waits for a dialog,
        # d is not offered on the dashboard, nor / while the search box has the keys.
        if action in ("search", "dashboard", "review") and self._blocked():
            return False
        if action == "review":
            return not isinstance(self.screen, ReviewScreen) and self.engram.has_project
        if action == "dashboard":
            return not isinstance(self.screen, DashboardScreen)
        if action == "search":
            return not isinstance(self.screen.focused, Input)
        return True

    def on_descendant_focus(self, _: events.DescendantFocus) -> None:
        self.refresh_bindings()  # what / and the screen's keys do depends on the focus

    def action_search(self) -> None:
        if self._blocked():
            return
        if any(isinstance(screen, SearchScreen) for screen in self.screen_stack):
            while not isinstance(self.screen, SearchScreen):
                self.pop_screen()
            self.screen.query_one("#query", Input).focus()
            return
        self.push_screen(SearchScreen())

    def action_review(self) -> None:
        if self._blocked() or isinstance(self.screen, ReviewScreen):
            return
        self.push_screen(ReviewScreen())

    def action_dashboard(self) -> None:
        if self._blocked():
            return
        while not isinstance(self.screen, DashboardScreen):
            self.pop_screen()

    def guard(self, read: Callable[[], object]) -> None:
        """Run a read of the store; show an error as a notification instead of crashing."""
        try:
            read()
        except EngramError as exc:
            message = f"{exc.message}\n{exc.hint}" if exc.hint else exc.message
            self.notify(visible(message), title="engram", severity="error", markup=False)

    def open_memory(self, rid: str) -> None:
        """Show one memory's detail screen on top of the current one."""
        self.push_screen(DetailScreen(rid))
