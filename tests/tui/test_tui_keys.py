"""The terminal UI's keys, pressed for real: the footer's keys work, typed text stays text.

Driven by textual's pilot over a real project (the fixture of tests/tui/test_tui.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

pytest.importorskip("textual")

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static
from textual.widgets._footer import FooterKey

from engram.service import Engram
from engram.tui.app import (
    ConfirmScreen,
    DashboardScreen,
    DetailScreen,
    EngramApp,
    SearchScreen,
    SupersedeScreen,
)
from tests.tui.test_tui import Ids, column, fresh, open_detail, run, store, text, until

__all__ = ["store"]  # the fixture, shared with tests/tui/test_tui.py

Setup = Callable[[Pilot[None], EngramApp, Ids], Awaitable[None]]


async def on_dashboard(pilot: Pilot[None], app: EngramApp, ids: Ids) -> None:
    await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "the dashboard")


async def in_the_search_box(pilot: Pilot[None], app: EngramApp, ids: Ids) -> None:
    await pilot.press("slash")
    await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search screen")
    await pilot.press(*"tantivy")
    await until(pilot, lambda: "“tantivy”" in text(app, "#summary"), "the results")


async def in_the_results(pilot: Pilot[None], app: EngramApp, ids: Ids) -> None:
    await in_the_search_box(pilot, app, ids)
    await pilot.press("down")
    await until(pilot, lambda: isinstance(app.focused, DataTable), "the results focused")


async def on_a_memory(pilot: Pilot[None], app: EngramApp, ids: Ids) -> None:
    await open_detail(pilot, app, "configs cached", "Cache parsed configs")


async def on_a_candidate(pilot: Pilot[None], app: EngramApp, ids: Ids) -> None:
    await open_detail(pilot, app, "retry loop", "Reverted: flaky retry loop in sync")


SETUPS: dict[str, Setup] = {
    "dashboard": on_dashboard,
    "search box": in_the_search_box,
    "search results": in_the_results,
    "memory": on_a_memory,
    "candidate": on_a_candidate,
}


def state(app: EngramApp) -> tuple[object, ...]:
    """What a key could change: the screens, the focus, what is shown, the notifications."""
    shown = tuple(str(widget.content) for widget in app.screen.query(Static))
    tables = tuple(
        tuple(column(app, f"#{table.id}")) for table in app.screen.query(DataTable) if table.id
    )
    focused = app.focused.id if app.focused is not None else None
    stack = tuple(type(screen).__name__ for screen in app.screen_stack)
    return stack, focused, shown, tables, len(app._notifications)


def keys_of(app: EngramApp) -> list[tuple[str, str]]:
    return [(key.key, key.description) for key in app.screen.query(FooterKey)]


def footer_keys(engram: Engram, setup: Setup, ids: Ids) -> list[tuple[str, str]]:
    app = EngramApp(engram, debounce=0.01)
    found: list[tuple[str, str]] = []

    async def scenario(pilot: Pilot[None]) -> None:
        await setup(pilot, app, ids)
        await pilot.pause()
        found.extend(keys_of(app))

    run(app, scenario)
    return found


@pytest.mark.parametrize("where", sorted(SETUPS))
def test_every_key_the_footer_shows_does_something_there(
    store: tuple[Engram, Ids], where: str
) -> None:
    engram, ids = store
    shown = footer_keys(engram, SETUPS[where], ids)
    assert shown, where
    if where == "dashboard":
        assert "d" not in dict(shown)  # it would take you where you are
    if where == "search box":
        assert "slash" not in dict(shown)  # the box has the keys: / is typed
    if where == "candidate":
        assert {"c", "x"} <= set(dict(shown))
    if where in ("memory", "candidate"):
        assert "w" not in dict(shown) and {"r", "t"} <= set(dict(shown))  # why is shown
    # c (confirm) changes the store at once: last, so the keys before find the candidate.
    for key, description in sorted(shown, key=lambda pair: pair[0] == "c"):
        press(engram, ids, where, key, description)


def press(engram: Engram, ids: Ids, where: str, key: str, description: str) -> None:
    """Open a fresh app, go to ``where``, press ``key``; fail unless something changed."""
    app = EngramApp(engram, debounce=0.01)

    async def scenario(pilot: Pilot[None]) -> None:
        await SETUPS[where](pilot, app, ids)
        await pilot.pause()
        before = state(app)
        await pilot.press(key)
        for _ in range(100):
            await pilot.pause(0.02)
            if app._exit_renderables or app.return_code is not None or state(app) != before:
                return
        raise AssertionError(f"{where}: {key} ({description}) did nothing")

    run(app, scenario)


BINDING_LETTERS = "qdwrtcxasyn/"  # every key a screen, a dialog or the app binds to a letter


def test_typing_in_the_search_box_never_presses_a_screen_key(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram, debounce=0.01)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search screen")
        box = app.screen.query_one("#query", Input)
        await pilot.press(*BINDING_LETTERS)
        await pilot.pause(0.1)
        assert box.value == BINDING_LETTERS
        assert isinstance(app.screen, SearchScreen) and app.focused is box
        assert [type(s).__name__ for s in app.screen_stack][-2:] == [
            "DashboardScreen",
            "SearchScreen",
        ]
        assert app.return_code is None and not app._notifications
        await until(pilot, lambda: BINDING_LETTERS in text(app, "#summary"), "the search")
        # In the supersede dialog's box too: nothing is confirmed, nothing quits.
        box.value = "configs cached"
        await until(pilot, lambda: "“configs cached”" in text(app, "#summary"), "the search")
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the memory")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SupersedeScreen), "the dialog")
        target = app.screen.query_one("#target", Input)
        await pilot.press(*BINDING_LETTERS)
        await pilot.pause(0.1)
        assert target.value == BINDING_LETTERS and isinstance(app.screen, SupersedeScreen)
        assert app.return_code is None

    run(app, scenario)
    assert fresh(engram.root, ids.fresh_plan).get("links") in (None, [])


def test_the_dashboard_lists_take_the_focus_they_advertise(store: tuple[Engram, Ids]) -> None:
    engram, _ = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "the dashboard")
        candidates = app.screen.query_one("#candidates", DataTable)
        assert app.focused is candidates  # "enter opens, then c confirms, x rejects"
        first = column(app, "#candidates")[candidates.cursor_row]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the candidate")
        assert text(app, "#title") == first
        await pilot.press("c")  # confirm, as the heading says
        await until(pilot, lambda: "· active ·" in text(app, "#meta"), "the confirmed one")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "the dashboard")
        assert first not in column(app, "#candidates")
        assert isinstance(app.focused, DataTable)
        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#sessions", DataTable)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the session")
        assert text(app, "#title") == "Session: moved ranking to Tantivy"

    run(app, scenario)


def test_a_dashboard_without_candidates_focuses_the_sessions(project: Engram) -> None:
    project.remember("Session: one", "done", kind="session")
    app = EngramApp(project)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "the dashboard")
        assert app.focused is app.screen.query_one("#sessions", DataTable)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the session")

    run(app, scenario)


def preview(app: EngramApp) -> str:
    return str(app.screen.query_one("#preview", Static).content)


def test_supersede_finds_the_memory_by_search(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram, debounce=0.01)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "configs cached", "Cache parsed configs")
        await pilot.press("s")
        assert isinstance(app.screen, SupersedeScreen)
        await pilot.press(*"cache")
        await until(pilot, lambda: "Cache nothing" in column(app, "#candidates"), "the hits")
        assert "Cache parsed configs" not in column(app, "#candidates")  # not itself
        assert "will become superseded" in preview(app) and "warning" not in preview(app)
        # ↓ into the results, onto another hit: that one is picked
        await pilot.press(*" lunch")
        await until(pilot, lambda: len(column(app, "#candidates")) >= 2, "two hits")
        hits = column(app, "#candidates")
        await pilot.press("down")
        table = app.screen.query_one("#candidates", DataTable)
        assert app.focused is table
        table.move_cursor(row=hits.index("Cache nothing"))
        await until(pilot, lambda: "“Cache nothing”" in preview(app), "the pick")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the memory again")
        assert column(app, "#links") == ["Cache nothing"]
        assert column(app, "#links", 3) == ["superseded"]

    run(app, scenario)
    assert fresh(engram.root, ids.stale_plan)["status"] == "superseded"


def test_supersede_warns_before_an_archived_memory_supersedes_an_active_one(
    store: tuple[Engram, Ids],
) -> None:
    engram, ids = store
    engram.update(ids.note, status="archived")
    app = EngramApp(engram, debounce=0.01)

    async def scenario(pilot: Pilot[None]) -> None:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), "the dashboard")
        app.open_memory(ids.note)
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the archived note")
        await pilot.press("s")
        await pilot.press(*ids.fresh_plan[:8])
        await until(pilot, lambda: "warning: this memory is archived" in preview(app), "warning")
        assert "“Cache parsed configs” is active" in preview(app)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, SupersedeScreen), "the dialog")
        assert fresh(engram.root, ids.fresh_plan)["status"] == "active"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the note again")

    run(app, scenario)
    assert fresh(engram.root, ids.fresh_plan)["status"] == "superseded"
    # An active memory superseding another: no warning, no question.
    assert fresh(engram.root, ids.new)["status"] == "active"
