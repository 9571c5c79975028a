"""The terminal UI driven by textual's pilot: real key presses, assertions on what is shown."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("textual")

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Markdown, Static
from textual.widgets._footer import FooterKey

from engram.indexer.plan import hotspots_id
from engram.service import Engram
from engram.tui.app import (
    ConfirmScreen,
    DashboardScreen,
    DetailScreen,
    EngramApp,
    SearchScreen,
    SupersedeScreen,
)

NOW = "2026-11-01T10:00:00Z"


@dataclass
class Ids:
    old: str
    new: str
    candidate: str
    doomed: str
    note: str
    stale_plan: str
    fresh_plan: str
    session: str
    sibling: str


@pytest.fixture
def store(project: Engram) -> Iterator[tuple[Engram, Ids]]:
    """A project with a supersede chain, pitfall candidates, a session and a hotspots memory."""
    e = project
    old = e.remember("Use SQLite FTS for search", "FTS5 was enough at first.", kind="decision")
    new = e.remember(
        "Use Tantivy for ranking",
        "Tantivy ranks **better** than FTS5 on long content.",
        kind="decision",
        tags=["search"],
        links=[f"supersedes:{old.record['id']}"],
    )
    sibling = e.remember(
        "Tokenizer keeps underscores", "Snake case stays one word.", kind="fact", tags=["search"]
    )
    candidate = e.remember(
        "Reverted: flaky retry loop in sync",
        "The retry loop was reverted twice.",
        kind="pitfall",
        status="proposed",
        source="git:abc1234",
    )
    doomed = e.remember(
        "Reverted: cache warmup",
        "Warmup was reverted once.",
        kind="pitfall",
        status="proposed",
        source="git:def5678",
    )
    note = e.remember("Scratch note about lunch", "Nothing important.", kind="note")
    stale_plan = e.remember("Cache nothing", "No caches anywhere.", kind="decision")
    fresh_plan = e.remember("Cache parsed configs", "Configs are cached per run.", kind="decision")
    session = e.remember(
        "Session: moved ranking to Tantivy", "Benchmarked and switched.", kind="session"
    )
    e.import_(
        {
            "memories": [
                {
                    "id": hotspots_id(e.project),
                    "kind": "fact",
                    "title": "Code hotspots",
                    "content": "- engram/service.py",
                    "created_at": NOW,
                    "updated_at": NOW,
                    "rev": 1,
                    "source": "git",
                    "hotspots": [
                        {"path": "engram/service.py", "changes": 42},
                        {"path": "engram/cli.py", "changes": 17},
                    ],
                }
            ]
        }
    )
    ids = Ids(
        *(
            str(r.record["id"])
            for r in (old, new, candidate, doomed, note, stale_plan, fresh_plan, session, sibling)
        )
    )
    yield e, ids


def run(app: EngramApp, scenario: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    """Run the app headless with a scenario of key presses."""

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await scenario(pilot)

    anyio.run(main)


async def until(pilot: Pilot[None], ready: Callable[[], bool], what: str) -> None:
    """Let the app work until ``ready()`` holds (search is debounced, screens mount)."""
    for _ in range(250):
        if ready():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"the screen never showed {what}")


def text(app: EngramApp, selector: str) -> str:
    """Return what a Static on the current screen shows."""
    return str(app.screen.query_one(selector, Static).content)


def column(app: EngramApp, selector: str, index: int = 4) -> list[str]:
    """Return one column (default: the titles) of a table on the current screen."""
    table = app.screen.query_one(selector, DataTable)
    return [str(table.get_row_at(row)[index]) for row in range(table.row_count)]


def footer(app: EngramApp) -> list[str]:
    """Return the key descriptions the footer shows."""
    return [key.description for key in app.screen.query(FooterKey)]


def fresh(root: Path, ref: str) -> dict[str, Any]:
    """Read a memory through a new Engram, as another process would see the store."""
    with Engram.open(root) as engram:
        return dict(engram.get(ref))


async def open_detail(pilot: Pilot[None], app: EngramApp, query: str, title: str) -> None:
    """Search for ``query`` and open the result titled ``title`` with enter."""
    await pilot.press("slash")
    await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search screen")
    app.screen.query_one("#query", Input).value = ""
    await pilot.press(*query)
    await until(pilot, lambda: f"“{query}”" in text(app, "#summary"), f"the search {query!r}")
    assert title in column(app, "#results")
    table = app.screen.query_one("#results", DataTable)
    await pilot.press("down")
    table.move_cursor(row=column(app, "#results").index(title))
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail screen")
    await until(pilot, lambda: text(app, "#title") == title, f"the title {title!r}")


def test_dashboard_shows_counts_hotspots_candidates_and_sessions(
    store: tuple[Engram, Ids],
) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        assert isinstance(app.screen, DashboardScreen)
        counts = text(app, "#counts")
        assert "demo: 10 memories" in counts
        assert "decision 4" in counts and "pitfall 2" in counts and "session 1" in counts
        assert "active 7" in counts and "proposed 2" in counts and "superseded 1" in counts
        hotspots = text(app, "#hotspots")
        assert "engram/service.py  (42 changes)" in hotspots
        assert hotspots.index("service.py") < hotspots.index("cli.py")
        assert sorted(column(app, "#candidates")) == [
            "Reverted: cache warmup",
            "Reverted: flaky retry loop in sync",
        ]
        assert column(app, "#sessions") == ["Session: moved ranking to Tantivy"]
        assert column(app, "#sessions", 1) == [ids.session[:8]]
        # enter on a session row opens it
        app.screen.query_one("#sessions", DataTable).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the session")
        assert text(app, "#title") == "Session: moved ranking to Tantivy"
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)

    run(app, scenario)


def test_search_as_you_type_and_enter_opens_the_memory(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search screen")
        await pilot.press(*"tantivy")
        await until(pilot, lambda: "“tantivy”" in text(app, "#summary"), "the search done")
        assert "Use Tantivy for ranking" in column(app, "#results")
        assert "Scratch note about lunch" not in column(app, "#results")
        assert "tantivy" in text(app, "#summary")
        assert app.screen.query_one("#query", Input).value == "tantivy"
        # the query can change: results follow
        for _ in range(7):
            await pilot.press("backspace")
        await pilot.press(*"lunch")
        await until(
            pilot, lambda: column(app, "#results") == ["Scratch note about lunch"], "the note"
        )
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail screen")
        assert text(app, "#title") == "Scratch note about lunch"
        markdown = app.screen.query_one("#content", Markdown)
        assert markdown.source == "Nothing important."
        assert f"id {ids.note}" in text(app, "#meta")
        # escape returns to the search with the query kept
        await pilot.press("escape")
        assert isinstance(app.screen, SearchScreen)
        assert app.screen.query_one("#query", Input).value == "lunch"

    run(app, scenario)


def test_why_related_and_timeline_lead_to_linked_memories(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "tantivy", "Use Tantivy for ranking")
        assert "better" in app.screen.query_one("#content", Markdown).source
        # why (shown first): the chain names the superseded decision
        assert column(app, "#links") == ["Use SQLite FTS for search"]
        assert column(app, "#links", 0) == ["supersedes"]
        assert column(app, "#links", 1) == [ids.old[:8]]
        await pilot.press("enter")
        await until(pilot, lambda: text(app, "#title") == "Use SQLite FTS for search", "old")
        assert "superseded" in text(app, "#meta")
        assert column(app, "#links", 0) == ["superseded by"]
        await pilot.press("escape")
        await until(pilot, lambda: text(app, "#title") == "Use Tantivy for ranking", "back")
        # related: the fact sharing the tag
        await pilot.press("r")
        assert "Tokenizer keeps underscores" in column(app, "#links")
        assert "tags: search" in column(app, "#links", 0)
        row = column(app, "#links").index("Tokenizer keeps underscores")
        app.screen.query_one("#links", DataTable).move_cursor(row=row)
        await pilot.press("enter")
        await until(pilot, lambda: text(app, "#title") == "Tokenizer keeps underscores", "fact")
        # timeline: the memories saved around it, oldest first
        await pilot.press("t")
        titles = column(app, "#links")
        assert titles.index("Use Tantivy for ranking") < titles.index("Tokenizer keeps underscores")
        cursor = app.screen.query_one("#links", DataTable).cursor_row
        assert titles[cursor] == "Tokenizer keeps underscores"  # the timeline starts here
        app.screen.query_one("#links", DataTable).move_cursor(
            row=titles.index("Use Tantivy for ranking")
        )
        await pilot.press("enter")
        await until(pilot, lambda: text(app, "#title") == "Use Tantivy for ranking", "newer")
        await pilot.press("w")
        assert column(app, "#links") == ["Use SQLite FTS for search"]
        # d leaves the trail for the dashboard
        await pilot.press("d")
        assert isinstance(app.screen, DashboardScreen)

    run(app, scenario)


def test_confirm_and_reject_pitfall_candidates(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "flaky retry", "Reverted: flaky retry loop in sync")
        assert {"Confirm", "Reject", "Archive", "Supersede"} <= set(footer(app))
        await pilot.press("c")
        await until(pilot, lambda: "· active ·" in text(app, "#meta"), "the new status")
        assert any("proposed → active" in n.message for n in app._notifications)
        await open_detail(pilot, app, "cache warmup", "Reverted: cache warmup")
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # cancelled: nothing changes
        assert isinstance(app.screen, DetailScreen)
        assert "· proposed ·" in text(app, "#meta")
        await pilot.press("x")
        await pilot.press("y")
        await until(pilot, lambda: "· rejected ·" in text(app, "#meta"), "rejected")
        # a rejected memory is no candidate: c does nothing now, the footer drops c and x
        await until(pilot, lambda: "Confirm" not in footer(app), "a footer without confirm")
        assert "Reject" not in footer(app) and "Archive" in footer(app)
        await pilot.press("c")
        assert "· rejected ·" in text(app, "#meta")
        await pilot.press("d")
        await until(
            pilot, lambda: column(app, "#candidates") == [], "the dashboard without candidates"
        )

    run(app, scenario)
    assert fresh(engram.root, ids.candidate)["status"] == "active"
    assert fresh(engram.root, ids.doomed)["status"] == "rejected"


def test_archive_asks_first(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "lunch", "Scratch note about lunch")
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        assert "Archive" in str(app.screen.query_one("#question", Static).content)
        await pilot.press("escape")
        assert fresh(engram.root, ids.note)["status"] == "active"
        await pilot.press("a", "y")
        await until(pilot, lambda: "· archived ·" in text(app, "#meta"), "archived")
        assert any("active → archived" in n.message for n in app._notifications)

    run(app, scenario)
    assert fresh(engram.root, ids.note)["status"] == "archived"


def test_supersede_picks_the_older_memory_by_id_prefix(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "configs cached", "Cache parsed configs")
        await pilot.press("s")
        assert isinstance(app.screen, SupersedeScreen)
        await pilot.press(*ids.fresh_plan[:8])  # itself: refused
        preview = str(app.screen.query_one("#preview", Static).content)
        assert "cannot supersede itself" in preview
        await pilot.press("enter")
        assert isinstance(app.screen, SupersedeScreen)
        app.screen.query_one("#target", Input).value = ""
        await pilot.press(*ids.stale_plan[:8])
        await until(
            pilot,
            lambda: "Cache nothing" in str(app.screen.query_one("#preview", Static).content),
            "the picked memory",
        )
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail again")
        assert column(app, "#links") == ["Cache nothing"]
        assert column(app, "#links", 3) == ["superseded"]

    run(app, scenario)
    assert fresh(engram.root, ids.stale_plan)["status"] == "superseded"
    links = fresh(engram.root, ids.fresh_plan)["links"]
    assert {"rel": "supersedes", "to": ids.stale_plan} in links


def test_a_change_that_fails_is_reported_not_raised(store: tuple[Engram, Ids]) -> None:
    engram, ids = store
    app = EngramApp(engram)

    async def scenario(pilot: Pilot[None]) -> None:
        await open_detail(pilot, app, "lunch", "Scratch note about lunch")
        with Engram.open(engram.root) as other:  # another process forgets it meanwhile
            other.forget(ids.note)
        await pilot.press("a", "y")
        await until(pilot, lambda: bool(app._notifications), "a notification")
        # the archive says it changed nothing and why; the detail closes: its memory is gone
        await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the search again")
        shown = {n.title: n for n in app._notifications}
        assert shown["not changed"].severity == "error"
        assert "forgotten" in shown["not changed"].message
        assert "memory gone" in shown
        assert app.is_running
        await until(
            pilot, lambda: "Scratch note about lunch" not in column(app, "#results"), "no note"
        )

    run(app, scenario)
    assert "deleted_at" in fresh_export(engram.root, ids.note)


def fresh_export(root: Path, rid: str) -> dict[str, Any]:
    """Return a memory (tombstones included) from a fresh export."""
    with Engram.open(root) as engram:
        return next(m for m in engram.export().memories if m["id"] == rid)


def test_q_quits(store: tuple[Engram, Ids]) -> None:
    engram, _ = store
    app = EngramApp(engram, ansi=True)

    async def scenario(pilot: Pilot[None]) -> None:
        assert app.theme == "ansi-dark"  # --ansi: the terminal's own colours
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running

    run(app, scenario)
    assert app.return_code == 0


def test_text_from_memories_is_shown_verbatim_never_as_markup(project: Engram) -> None:
    evil = "\x1b]52;c;ZXZpbA==\x07\x1b[2J"  # a clipboard write, a clear screen
    project.remember(f"[bold]Loud[/bold] title [link=x]here[/link]{evil}", f"**Bold** {evil}")
    app = EngramApp(project)
    shown = "[bold]Loud[/bold] title [link=x]here[/link]\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J"

    async def scenario(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"loud")
        await until(pilot, lambda: "“loud”" in text(app, "#summary"), "the search done")
        assert column(app, "#results") == [shown]
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail screen")
        assert text(app, "#title") == shown
        content = app.screen.query_one("#content", Markdown).source
        assert "\x1b" not in content and "\\x1b]52" in content

    run(app, scenario)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_engram_tui_runs_in_a_real_terminal_and_q_quits(store: tuple[Engram, Ids]) -> None:
    import fcntl
    import os
    import select
    import struct
    import termios

    engram, _ = store
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    # The engram command as installed: the CLI runs this adapter's command.
    process = subprocess.Popen(
        [sys.executable, "-m", "engram", "-C", str(engram.root), "tui"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    screen, quit_sent = b"", False
    try:
        for _ in range(600):  # at most a minute on a busy machine
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:  # the terminal closed: the app is gone
                    break
            if not quit_sent and b"Pitfall candidates" in screen:
                os.write(master, b"q")
                quit_sent = True
            if process.poll() is not None:
                break
        assert quit_sent, screen[-2000:]
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    assert b"demo: 10 memories" in screen


def test_the_command_fails_with_a_hint_outside_a_project(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(tmp_path), "tui"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "no .engram/" in done.stderr and "engram init" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_is_registered_and_import_stays_cheap(tmp_path: Path) -> None:
    code = (
        "import sys, engram.tui, engram.__main__ as composition\n"
        "assert 'textual' not in sys.modules, 'textual imported early'\n"
        "app = composition.app\n"
        "print(sorted(c.name or c.callback.__name__ for c in app.registered_commands))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "'tui'" in done.stdout
