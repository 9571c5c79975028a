"""One recall, every door: the CLI, MCP, HTTP, the web page and the daemon give the same answer.

Each door renders the facade's finished hit views (``Engram.recall_views``), so one query over
one store names the same memories in the same order with the same staleness notes and
relevance, whichever door it came in by. The doors are real: ``engram recall --json`` as a
process, an MCP client over stdio to ``engram mcp``, the HTTP app (``/search`` and the web
page's ``/ui/search`` fragment its script fetches), and ``memory_search`` on a daemon process.
Also here: Go engram's "filter by type after ranking" rule, written once in
``engram.operations.compat_go`` and applied by the facade for every Go door.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from fastapi.testclient import TestClient

from engram.http_api import create_app
from engram.operations import compat_go
from engram.service import Engram
from tests.conftest import run_cli
from tests.daemon.test_daemon import Daemon
from tests.mcp_server.test_mcp import connect, run
from tests.project.test_staleness import AUTH_V1, new_repo

QUERY = "token login"
LIMIT = 6


class Answer(NamedTuple):
    """What a door said, reduced to what every door shows: ids, staleness, relevance."""

    ids: list[str]  # whole ids, or the short ids a door shows instead (MCP)
    stale: list[str]  # each hit's staleness, its notes joined by "; " ('' when fresh)
    relevance: list[float | None]  # rounded to 3 places (the web page shows none)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A project where two memories about src/auth.py were saved before it changed twice."""
    root = tmp_path / "doors"
    repo = new_repo(root)
    with Engram.init(root, "doors")[0] as engram:
        engram.remember(
            "Token rotation lives in login",
            "login() issues and rotates the session token.",
            kind="decision",
            files=["src/auth.py"],
        )
        engram.remember(
            "Login tokens expire after an hour",
            "Refresh the token before it expires; login issues a new one.",
            kind="pitfall",
            files=["src/auth.py"],
        )
        engram.remember(
            "The database pool is sized per worker",
            "Each worker opens four connections; a token bucket limits new ones.",
            kind="fact",
            files=["src/db.py"],
        )
        engram.remember("Sessions end at logout", "logout drops the session token.")
        engram.remember(
            "My login shortcut",
            "I keep a token for the staging login in my keychain.",
            scope="personal",
        )
    for n in range(2):
        repo.commit(f"Auth change {n}", {"src/auth.py": AUTH_V1 + f"# change {n}\n".encode()})
    yield root


def _joined(notes: Sequence[str] | str | None) -> str:
    return notes if isinstance(notes, str) else "; ".join(notes or ())


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _full(hits: list[dict[str, Any]]) -> Answer:
    """The answer of a door that shows the whole hit (CLI --json, HTTP /search)."""
    return Answer(
        [hit["id"] for hit in hits],
        [_joined(hit.get("stale")) for hit in hits],
        [_rounded(hit["relevance"]) for hit in hits],
    )


def _compact(hits: list[dict[str, Any]]) -> Answer:
    """The answer of a door that shows the agent's shape (MCP, the daemon)."""
    return Answer(
        [hit["id"] for hit in hits],
        [_joined(hit.get("may_be_stale")) for hit in hits],
        [hit["relevance"] for hit in hits],
    )


def by_cli(root: Path) -> Answer:
    done = run_cli("-C", str(root), "recall", QUERY, "--limit", str(LIMIT), "--json")
    assert done.returncode == 0, done.stderr.decode()
    hits = json.loads(done.stdout)["hits"]
    return _full(hits)


def by_mcp(root: Path) -> Answer:
    found: list[dict[str, Any]] = []

    async def scenario() -> None:
        async with connect(root) as client:
            found.extend((await client.ok("recall", {"query": QUERY, "limit": LIMIT}))["hits"])

    run(scenario)
    return _compact(found)


def by_http(root: Path) -> tuple[Answer, Answer, list[str]]:
    """Return the answers of GET /search and of the web page (and the short ids it shows)."""
    with TestClient(create_app(root), base_url="http://127.0.0.1") as client:
        api = client.get("/search", params={"q": QUERY, "limit": LIMIT})
        assert api.status_code == 200, api.text
        page = client.get("/ui/search", params={"q": QUERY, "limit": str(LIMIT), "fragment": "1"})
        assert page.status_code == 200, page.text
    return _full(api.json()["hits"]), *web_answer(page.text)


@dataclass
class WebHit:
    id: str = ""
    short_id: str = ""
    stale: str = ""


def web_answer(text: str) -> tuple[Answer, list[str]]:
    """Read the hits of the web page's results: link, short id, staleness note, in order."""
    hits: list[WebHit] = []
    for item in re.findall(r'<li class="hit">(.*?)</li>', text, flags=re.DOTALL):
        link = re.search(r'href="/ui/memories/([^"]+)"', item)
        short = re.search(r'<p class="from muted">([^ ]+) ·', item)
        stale = re.search(r'<p class="stale" role="note">(.*?)</p>', item, flags=re.DOTALL)
        assert link and short, item
        note = html.unescape(stale.group(1)) if stale else ""
        hits.append(WebHit(link.group(1), short.group(1), note.removeprefix("may be stale: ")))
    assert all(hit.id.startswith(hit.short_id) for hit in hits)
    answer = Answer([hit.id for hit in hits], [hit.stale for hit in hits], [])
    return answer, [hit.short_id for hit in hits]


def by_daemon(root: Path) -> Answer:
    daemon = Daemon(root, Path(os.environ["HOME"]))
    try:
        with daemon.client() as client:
            found = client.call("memory_search", {"query": QUERY, "limit": LIMIT})
    finally:
        assert daemon.stop() == 0
    return _compact(found["memories"])


def test_one_query_gets_one_answer_through_every_door(store: Path) -> None:
    cli = by_cli(store)
    assert len(cli.ids) >= 4, cli  # enough hits for the order to mean something
    assert any(cli.stale) and not all(cli.stale), cli  # stale and fresh ones both
    assert all("changed in 2 commits" in note for note in cli.stale if note)
    mcp = by_mcp(store)
    api, web, web_shorts = by_http(store)
    daemon = by_daemon(store)

    assert api == cli
    assert daemon == cli
    assert all(rid.startswith(short) for rid, short in zip(cli.ids, mcp.ids, strict=True))
    assert mcp._replace(ids=cli.ids) == cli
    assert (web.ids, web.stale, web_shorts) == (cli.ids, cli.stale, mcp.ids)
    with Engram.open(store) as engram:  # and the facade itself, in this process
        views = engram.recall_views(QUERY, limit=LIMIT)
    assert [view.id for view in views] == cli.ids
    assert [view.short_id for view in views] == mcp.ids
    assert [view.stale_note for view in views] == [
        f"may be stale: {note}" if note else "" for note in cli.stale
    ]


# -- Go engram's search: a type filtered after ranking, prompts left out -------------------------


@dataclass(frozen=True)
class Ranked:
    id: str
    record: dict[str, Any]


def test_after_ranking_pages_over_what_it_kept() -> None:
    kinds = ["prompt", "note", "note", "prompt", "note", "note", "note"]
    hits = [
        Ranked(str(n), {"kind": kind, **({"type": "command"} if n % 2 else {})})
        for n, kind in enumerate(kinds)
    ]
    asked: list[tuple[int, int]] = []

    def rank(limit: int, offset: int) -> list[Ranked]:
        asked.append((limit, offset))
        return hits[offset : offset + limit]

    plain = compat_go.after_ranking(rank, typ=None, limit=2, offset=1)
    assert [hit.id for hit in plain] == ["1", "2"] and asked == [(2, 1)]
    commands = compat_go.after_ranking(rank, typ="command", limit=2, offset=1)
    assert [hit.id for hit in commands] == ["3", "5"]  # 1, 3, 5 are commands; offset 1
    assert asked[-1] == (3 * compat_go.FOREIGN_TYPE_FACTOR, 0)
    observations = compat_go.after_ranking(rank, typ=None, limit=3, offset=1, observations=True)
    assert [hit.id for hit in observations] == ["2", "4", "5"]  # prompts 0 and 3 left out
    both = compat_go.after_ranking(rank, typ="command", limit=5, observations=True)
    assert [hit.id for hit in both] == ["1", "5"]  # 3 is a prompt, of type command


def test_the_facade_applies_gos_rule_with_offset_and_without_prompts(project: Engram) -> None:
    for n in range(4):
        project.remember(f"Run the deploy script {n}", "deploy with make", kind="note")
        project.remember(f"Ran deploy {n}", "make deploy", kind="note", extra={"type": "command"})
    project.save_prompt("please deploy it again")
    every = project.recall("deploy", limit=15)
    assert any(hit.record["kind"] == "prompt" for hit in every)
    commands = [hit.id for hit in every if hit.record.get("type") == "command"]
    paged = project.recall("deploy", limit=2, offset=1, of_type="command")
    assert [hit.id for hit in paged] == commands[1:3]
    observations = [hit.id for hit in every if hit.record["kind"] != "prompt"]
    found = project.recall("deploy", limit=3, observations=True)
    assert [hit.id for hit in found] == observations[:3]
    views = project.recall_views("deploy", limit=2, offset=1, of_type="command")
    assert [view.id for view in views] == commands[1:3]
