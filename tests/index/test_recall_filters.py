"""recall's --since/--until/--author filters, over a store whose memories were written by hand.

The filters are declared once (engram/operations) and read by the index (Query.build); these
tests drive them through the facade, and through every adapter once the declaration offers them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.errors import InvalidInput
from engram.index.query import Query
from engram.model import canonical_line
from engram.service import Engram
from tests.conftest import run_cli
from tests.helpers.records import record

DAY = 86400.0


def _stamp(days_ago: float) -> str:
    moment = datetime.fromtimestamp(time.time() - days_ago * DAY, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _write(root: Path, *records: dict[str, object]) -> None:
    path = root / ".engram" / "memories.jsonl"
    lines = sorted(canonical_line(r) for r in records)
    path.write_bytes(b"".join(lines))


@pytest.fixture
def store(project: Engram) -> Engram:
    """Four memories about caching: by two authors, changed 1, 10, 40 and 400 days ago."""
    _write(
        project.root,
        record("aaaa1111", "Cache the rates table", author="Ana Lopez", updated_at=_stamp(1)),
        record("bbbb2222", "Cache eviction is LRU", author="ben", updated_at=_stamp(10)),
        record("cccc3333", "Cache keys carry the tenant", author="Ana Lopez",
               updated_at=_stamp(40)),
        record("dddd4444", "Cache warmed at boot", author="Ben", updated_at="2024-05-03T09:00:00Z"),
    )  # fmt: skip
    return project


def _ids(engram: Engram, query: str = "cache", **filters: object) -> list[str]:
    return sorted(hit.id for hit in engram.recall(query, limit=20, **filters))


def test_since_and_until_take_ages_dates_and_times(store: Engram) -> None:
    assert _ids(store, since="7d") == ["aaaa1111"]
    assert _ids(store, since="2w") == ["aaaa1111", "bbbb2222"]
    assert _ids(store, since="3m") == ["aaaa1111", "bbbb2222", "cccc3333"]
    assert _ids(store, until="30d") == ["cccc3333", "dddd4444"]
    assert _ids(store, since="2w", until="5d") == ["bbbb2222"]
    # a date alone covers its whole day, on either side
    assert _ids(store, since="2024-05-03", until="2024-05-03") == ["dddd4444"]
    assert _ids(store, until="2024-05-02") == []
    assert _ids(store, since="2024-05-03T09:00:01Z", until="2024-05-04T00:00:00+00:00") == []
    # browsing (no words) filters the same way
    assert _ids(store, "", since="7d") == ["aaaa1111"]


def test_author_is_any_of_the_names_in_any_case(store: Engram) -> None:
    assert _ids(store, authors="ana lopez") == ["aaaa1111", "cccc3333"]
    assert _ids(store, authors=["BEN"]) == ["bbbb2222", "dddd4444"]
    assert _ids(store, authors="ben,ana lopez") == ["aaaa1111", "bbbb2222", "cccc3333", "dddd4444"]
    assert _ids(store, authors="nobody") == []
    # filters combine with AND, also with the other filters
    assert _ids(store, authors="ben", since="1y") == ["bbbb2222"]
    assert _ids(store, authors="ben", files="nowhere.py") == []


def test_an_edit_moves_a_memory_into_the_window(store: Engram) -> None:
    assert _ids(store, since="7d") == ["aaaa1111"]
    store.update("cccc3333", title="Cache keys carry the tenant and the region")
    assert _ids(store, since="7d") == ["aaaa1111", "cccc3333"]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"since": "yesterday"}, "since 'yesterday' is not a date"),
        ({"until": "2026-13-45"}, "until '2026-13-45' is not a date"),
        ({"since": ["7d", "2w"]}, "since takes one date, got 2"),
        ({"sinse": "7d"}, "recall has no filter sinse"),
    ],
)
def test_bad_filters_are_refused_by_name(filters: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Query.build("cache", **filters)


# -- every adapter offers the declared filters ----------------------------------------------------


def test_the_cli_takes_them_on_the_fast_path_and_through_typer(store: Engram) -> None:
    from typer.testing import CliRunner

    from engram.__main__ import app

    args = ["recall", "cache", "--since", "2w", "--author", "BEN", "--json"]
    fast = run_cli(*args, cwd=store.root)  # a process: main() parses recall itself
    assert fast.returncode == 0, fast.stderr
    typed = CliRunner().invoke(app, ["-C", str(store.root), *args])
    assert typed.exit_code == 0, typed.output
    for out in (fast.stdout.decode(), typed.stdout):
        assert [hit["id"] for hit in json.loads(out)["hits"]] == ["bbbb2222"]
        assert all(0 <= hit["relevance"] <= 1 for hit in json.loads(out)["hits"])
    bad = run_cli("recall", "cache", "--until", "someday", cwd=store.root)
    assert bad.returncode != 0 and "until 'someday' is not a date" in bad.stderr.decode()
    assert "--since" in CliRunner().invoke(app, ["recall", "--help"]).stdout


def test_mcp_recall_takes_them_and_its_schema_says_so(store: Engram) -> None:
    from tests.mcp_server.test_mcp import connect, run

    async def scenario() -> None:
        async with connect(store.root) as client:
            tools = (await client.session.list_tools()).tools
            schema = next(tool.input_schema for tool in tools if tool.name == "recall")
            assert {"since", "until", "author"} <= set(schema["properties"])
            data = await client.ok("recall", {"query": "cache", "until": "30d", "author": "ben"})
            assert [hit["id"] for hit in data["hits"]] == ["dddd4444"]
            assert 0 <= data["hits"][0]["relevance"] <= 1
            error = await client.error("recall", {"query": "cache", "since": "soon"})
            assert "since 'soon' is not a date" in error["message"]

    run(scenario)


def test_http_search_and_listing_take_them(store: Engram) -> None:
    from fastapi.testclient import TestClient

    from engram.http_api import create_app

    with TestClient(create_app(store.root), base_url="http://127.0.0.1") as client:
        found = client.get("/search", params={"q": "cache", "since": "7d"})
        assert found.status_code == 200, found.text
        assert [hit["id"] for hit in found.json()["hits"]] == ["aaaa1111"]
        assert 0 <= found.json()["hits"][0]["relevance"] <= 1
        listed = client.get("/memories", params=[("author", "ben"), ("author", "Ana Lopez")])
        assert len(listed.json()["memories"]) == 4
        listed = client.get("/memories", params={"author": "ana lopez", "until": "30d"})
        assert [m["id"] for m in listed.json()["memories"]] == ["cccc3333"]
        bad = client.get("/search", params={"q": "cache", "since": "nope"})
        assert bad.status_code == 422 and "since 'nope' is not a date" in bad.text


def test_the_daemon_search_takes_them(store: Engram) -> None:
    from engram.daemon import protocol as rpc
    from engram.daemon.server import dispatch

    answer = json.loads(
        dispatch(store, rpc.Request(1, "memory_search", {"query": "cache", "since": "2w"}))
    )
    assert answer["ok"], answer
    assert sorted(hit["id"] for hit in answer["data"]["memories"]) == ["aaaa1111", "bbbb2222"]
    refused = json.loads(
        dispatch(store, rpc.Request(2, "memory_search", {"query": "cache", "author": 7}))
    )
    assert (
        refused["error"]["code"] == rpc.INVALID_PARAMS and "'author'" in refused["error"]["message"]
    )
