"""List parameters take one comma-separated string on every adapter, split in one place.

Agents send ``files="a.py, b.py"`` as often as ``files=["a.py", "b.py"]``; people type
``--files a.py,b.py`` as often as ``--files a.py --files b.py``. ``Param.check`` and the
adapters' own readings all go through ``params.split``: MCP (a real session), HTTP (a JSON body
string, ``?tag=a,b`` and a repeated ``?tag=``), the socket daemon (a real process) and the CLI
(processes, through the fast path and through typer) save and filter the same items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram.errors import InvalidInput
from engram.operations import OPERATIONS
from engram.operations.memory import RECALL
from engram.operations.params import Param, split
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import connect, run


def test_split_is_the_one_reading_of_a_list() -> None:
    assert split("a.py, b.py") == ["a.py", "b.py"]
    assert split("a,b,,  ,c ") == ["a", "b", "c"]
    assert split(["a,b", " c ", ""]) == ["a", "b", "c"]
    assert split("") == [] and split([]) == []
    kinds = RECALL.param("kind")
    assert kinds.check("decision, Pitfall", "recall") == ["decision", "pitfall"]
    assert kinds.check(["decision,antipattern"], "recall") == ["decision", "antipattern"]
    with pytest.raises(InvalidInput, match="kind 'banana' is not one of"):
        kinds.check("decision, banana", "recall")
    with pytest.raises(InvalidInput, match="an array of strings \\(or one comma-separated"):
        kinds.check(7, "recall")


def test_every_list_parameter_advertises_both_forms() -> None:
    lists = [p for op in OPERATIONS.values() for p in op.params if p.type == "strings"]
    assert {p.name for p in lists} >= {"files", "tags", "kind", "status", "author", "links"}
    for param in lists:
        schema = param.schema()
        assert schema["type"] == ["array", "string"] and schema["items"]["type"] == "string"
    assert Param("x", "objects", "x").schema()["type"] == "array"


def _kinds(hits: list[dict[str, Any]]) -> set[str]:
    return {str(hit.get("kind") or hit.get("memory", {}).get("kind")) for hit in hits}


def test_mcp_takes_comma_separated_lists(project: Engram) -> None:
    root = project.root
    project.remember("Nightly job", "runs at two", kind="fact")

    async def scenario() -> None:
        async with connect(root) as client:
            saved = await client.ok(
                "remember",
                {
                    "title": "Round half to even",
                    "kind": "decision",
                    "tags": "Billing, money",
                    "files": "src/money.py, src/tax.py",
                },
            )
            await client.ok(
                "remember", {"title": "Floats drift", "kind": "pitfall", "files": "src/tax.py"}
            )
            both = await client.ok("recall", {"query": "", "kind": "decision, pitfall"})
            assert _kinds(both["hits"]) == {"decision", "pitfall"}
            tagged = await client.ok("recall", {"query": "", "tags": "money,nothing"})
            assert [hit["id"] for hit in tagged["hits"]] == [saved["id"][:8]]
            checked = await client.ok("check", {"files": "src/money.py, src/tax.py"})
            assert checked["text"].startswith("check src/money.py, src/tax.py: 2 findings")
            await client.ok("update", {"id": saved["id"], "tags": "rounding,billing"})

    run(scenario)
    record = project.get(project.recall("half to even")[0].id)
    assert sorted(record["tags"]) == ["billing", "rounding"]
    assert record["files"] == ["src/money.py", "src/tax.py"]


def test_http_takes_comma_separated_lists_in_bodies_and_queries(project: Engram) -> None:
    from fastapi.testclient import TestClient

    from engram.http_api import create_app

    app = create_app(project.root)
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:
            body = {"title": "Round half to even", "kind": "decision", "tags": "billing, money"}
            made = client.post("/memories", json={**body, "files": "src/money.py,src/tax.py"})
            assert made.status_code == 201, made.text
            memory = made.json()["memory"]
            assert (memory["tags"], memory["files"]) == (
                ["billing", "money"],
                ["src/money.py", "src/tax.py"],
            )
            pit = {"title": "Floats drift", "kind": "pitfall", "tags": ["money"]}
            assert client.post("/memories", json=pit).status_code == 201
            assert client.post("/memories", json={"title": "Other", "kind": "fact"}).is_success

            def listed(query: str) -> set[str]:
                response = client.get(f"/memories?{query}")
                assert response.status_code == 200, response.text
                return _kinds(response.json()["memories"])

            assert listed("kind=decision,pitfall") == {"decision", "pitfall"}
            assert listed("kind=decision&kind=pitfall") == {"decision", "pitfall"}
            assert listed("kind=decision, pitfall&tag=money") == {"decision", "pitfall"}
            checked = client.post("/check", json={"files": "src/money.py, src/tax.py"})
            assert checked.status_code == 200, checked.text
            assert checked.json()["files"] == ["src/money.py", "src/tax.py"]
    finally:
        app.state.engram.close()


def test_the_daemon_takes_comma_separated_lists(tmp_path: Path) -> None:
    from tests.daemon.test_daemon import Daemon

    root = tmp_path / "repo"
    root.mkdir()
    with Engram.init(root, "demo")[0] as engram:
        engram.remember("Lock before the write", "or lose it", kind="pitfall")
        engram.remember("Write with a lock", "always", kind="decision")
        engram.remember("Disk is local", "ssd", kind="fact")
    daemon = Daemon(root, tmp_path / "home")
    try:
        with daemon.client() as client:
            found = client.call("memory_search", {"query": "", "kind": "pitfall, decision"})
    finally:
        assert daemon.stop() == 0
    assert {hit["kind"] for hit in found["memories"]} == {"pitfall", "decision"}


def test_the_cli_takes_comma_separated_and_repeated_options(project: Engram) -> None:
    root = str(project.root)

    def engram(*args: str) -> str:
        done = run_cli("-C", root, *args)
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode()

    engram("remember", "Round half to even", "-k", "decision", "--files", "src/money.py,src/tax.py")
    engram("remember", "Floats drift", "-k", "pitfall", "--files", "src/tax.py", "-t", "a,b")
    engram("remember", "Other", "-k", "fact", "--tags", "c", "--tags", "d, e")
    by_title = {hit.record["title"]: hit.record for hit in project.recall("")}
    assert by_title["Round half to even"]["files"] == ["src/money.py", "src/tax.py"]
    assert by_title["Floats drift"]["tags"] == ["a", "b"]
    assert by_title["Other"]["tags"] == ["c", "d", "e"]
    for kinds in (["--kind", "decision,pitfall"], ["-k", "decision", "-k", "pitfall"]):
        found = json.loads(engram("recall", *kinds, "--json"))  # the fast path
        assert _kinds(found["hits"]) == {"decision", "pitfall"}, kinds
    checked = engram("check", "--files", "src/money.py, src/tax.py")
    assert checked.startswith("engram check src/money.py, src/tax.py: 2 findings")
    merged = engram("update", by_title["Other"]["id"][:8], "--tags", "x,y", "--json")
    assert json.loads(merged)["tags"] == ["x", "y"]  # through typer
