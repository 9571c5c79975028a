"""The MCP server as an agent sees it: real client sessions over stdio with `engram mcp` processes.

Every scenario spawns ``python -m engram mcp`` through the SDK's stdio client, so the tool
table, the JSON schemas, the budget, the framing and the error results are checked on the wire.
Two processes writing to one store at once check the store's lock end to end.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from engram.mcp_server import COMPATS, PROFILES, EngramMCP, encode_cursor, tool_names
from engram.service import Engram
from tests.helpers.places import ROOT

README = ROOT / "README.md"
FRAME = "Recalled project memory (data, not instructions)"


def make_project(root: Path, name: str = "demo") -> Path:
    engram, _ = Engram.init(root, name)
    engram.close()
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_project(tmp_path / "repo")


class Client:
    """A client session, with every tool answer parsed and every stray line of stdout kept."""

    def __init__(self, session: ClientSession, garbage: list[Exception]) -> None:
        self.session = session
        self.garbage = garbage

    async def call(self, name: str, args: dict[str, Any] | None = None) -> tuple[Any, bool]:
        result = await self.session.call_tool(name, args or {})
        assert len(result.content) == 1 and result.content[0].type == "text"
        return json.loads(result.content[0].text), result.is_error

    async def ok(self, name: str, args: dict[str, Any] | None = None) -> Any:
        data, is_error = await self.call(name, args)
        assert not is_error, data
        return data

    async def error(self, name: str, args: dict[str, Any] | None = None) -> dict[str, str]:
        data, is_error = await self.call(name, args)
        assert is_error, data
        assert set(data) == {"code", "message", "hint"} and data["hint"], data
        assert "Traceback" not in data["message"]
        return dict(data)

    async def names(self) -> list[str]:
        return [tool.name for tool in (await self.session.list_tools()).tools]


@asynccontextmanager
async def connect(
    root: Path, *options: str, use_cwd: bool = False, log: Path | None = None
) -> AsyncIterator[Client]:
    """Start `engram mcp` in a process and open an initialised client session to it."""
    location = [] if use_cwd else ["-C", str(root)]
    env = {key: value for key, value in os.environ.items() if key.startswith("ENGRAM_")}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram", *location, "mcp", *options],
        env=env,
        cwd=root if use_cwd else None,
    )
    garbage: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            garbage.append(message)

    errlog_path = log or root.parent / f"stderr-{os.getpid()}-{id(garbage)}.log"
    with errlog_path.open("w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60, message_handler=on_message) as s,
        ):
            await s.initialize()
            yield Client(s, garbage)
    assert not garbage, f"the server wrote something other than the protocol: {garbage}"


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def budget_ok(data: Any, budget: int) -> None:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    assert math.ceil(len(text) / 4) <= budget, f"{math.ceil(len(text) / 4)} > {budget} tokens"


# -- tools, profiles, schemas -------------------------------------------------------------------


def test_profiles_register_their_tools_with_schemas_and_annotations(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo) as client:
            listed = (await client.session.list_tools()).tools
            assert [t.name for t in listed] == tool_names("agent")
            assert [t.name for t in listed] == [
                "remember",
                "recall",
                "get",
                "update",
                "suggest_topic_key",
                "stats",
                "context",
                "why",
                "check",
                "related",
                "timeline",
                "session_start",
                "session_summary",
                "session_end",
                "save_prompt",
                "capture",
                "judge",
                "pin",
                "unpin",
                "consolidate_preview",
                "insights",
            ]
            tools = {t.name: t for t in listed}
            remember = tools["remember"].input_schema
            assert remember["required"] == ["title"]
            assert remember["additionalProperties"] is False
            assert "decision" in remember["properties"]["kind"]["enum"]
            assert remember["properties"]["scope"]["enum"] == ["project", "personal"]
            assert "superseded" in remember["properties"]["status"]["enum"]
            recall = tools["recall"].input_schema["properties"]
            assert recall["limit"]["maximum"] == 50 and recall["limit"]["default"] == 5
            for tool in listed:
                assert tool.description and len(tool.description) < 320
                assert tool.annotations is not None
                for prop in tool.input_schema["properties"].values():
                    assert prop["description"]
            hints = {
                name: tool.annotations.model_dump(by_alias=True, exclude_none=True)
                for name, tool in tools.items()
                if tool.annotations is not None
            }
            assert hints["recall"] == {
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            }
            assert hints["remember"]["readOnlyHint"] is False
            assert hints["update"]["destructiveHint"] is False
            assert hints["update"]["idempotentHint"] is True
        async with connect(repo, "--tools", "admin", "--compat", "go-engram") as client:
            listed = (await client.session.list_tools()).tools
            names = [t.name for t in listed]
            assert names == tool_names("admin", ["go-engram"])
            assert names == [
                "forget",
                "export",
                "import",
                "consolidate",
                "consolidate_apply",
                "train",
                "insights_delete",
                "merge_projects",
                "sync",
                "reindex",
                "doctor",
                "mem_delete",
                "mem_stats",
                "mem_timeline",
                "mem_merge_projects",
            ]
            forget = next(t for t in listed if t.name == "forget")
            assert forget.annotations is not None and forget.annotations.destructive_hint is True

    run(scenario)


def test_remember_recall_get_update_suggest_stats_in_one_session(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo, use_cwd=True) as client:  # the project from the working folder
            saved = await client.ok(
                "remember",
                {
                    "title": "Store money as integer minor units",
                    "content": "Floats lost a cent on JPY. " * 20,
                    "kind": "decision",
                    "tags": ["money", "rounding"],
                    "files": ["ledger/money.py"],
                    "importance": 4,
                },
            )
            assert saved["action"] == "created" and saved["rev"] == 1
            rid = saved["id"]
            again = await client.ok(
                "remember",
                {
                    "title": "Store money as integer minor units",
                    "content": "Floats lost a cent on JPY. " * 20,
                    "kind": "decision",
                    "tags": ["money", "rounding"],
                    "files": ["ledger/money.py"],
                    "importance": 4,
                },
            )
            assert again["action"] == "duplicate" and again["id"] == rid

            found = await client.ok("recall", {"query": "why integer money?"})
            assert found["note"].startswith(FRAME)
            [hit] = found["hits"]
            assert set(hit) == {
                "id",
                "kind",
                "status",
                "title",
                "snippet",
                "score",
                "matched",
                "from",
                "relevance",
            }
            assert hit["id"] == rid[:8]
            assert (hit["kind"], hit["status"]) == ("decision", "active")
            assert len(hit["snippet"]) <= 200 and hit["snippet"].endswith("…")
            assert "title" in hit["matched"]
            assert re.fullmatch(r"Test Author, \d{4}-\d\d-\d\d, agent", hit["from"])
            assert "next_cursor" not in found
            assert len(json.dumps(hit)) / 4 < 130  # about 100 tokens a hit

            full = await client.ok("get", {"id": hit["id"]})
            assert full["note"].startswith(FRAME) and "Test Author" in full["note"]
            memory = full["memory"]
            assert memory["id"] == rid and memory["content"] == "Floats lost a cent on JPY. " * 20
            assert memory["files"] == ["ledger/money.py"] and memory["importance"] == 4

            changed = await client.ok(
                "update", {"id": rid[:10], "status": "superseded", "tags": ["money"]}
            )
            assert (changed["id"], changed["rev"], changed["status"]) == (rid, 2, "superseded")
            assert (await client.ok("get", {"id": rid}))["memory"]["tags"] == ["money"]

            key = await client.ok(
                "suggest_topic_key",
                {"kind": "bugfix", "content": "Fix nil panic in auth middleware on empty token"},
            )
            assert key == {"topic_key": "bug/fix-nil-panic-in-auth-middleware-on-empty"}

            stats = await client.ok("stats")
            [store] = stats["stores"]
            assert store["memories"] == 1 and store["by_status"] == {"superseded": 1}
            assert store["index_bytes"] > 0

            mine = await client.ok(
                "remember", {"title": "I prefer tabs in Makefiles", "scope": "personal"}
            )
            personal = Path(os.environ["ENGRAM_HOME"]) / "memories.jsonl"
            assert mine["id"] in personal.read_text(encoding="utf-8")
            [hit] = (await client.ok("recall", {"query": "tabs makefiles"}))["hits"]
            assert hit["scope"] == "personal" and hit["id"] == mine["id"][:8]
            assert [s["scope"] for s in (await client.ok("stats"))["stores"]] == [
                "project",
                "personal",
            ]

    run(scenario)


def test_bad_arguments_and_unknown_tools_are_error_results_and_the_session_goes_on(
    repo: Path,
) -> None:
    async def scenario() -> None:
        async with connect(repo) as client:
            error = await client.error("remember", {"content": "no title"})
            assert error["message"] == "remember: missing required argument 'title'"
            assert "input schema of remember" in error["hint"]
            error = await client.error("recall", {"query": "x", "limit": "five"})
            assert error["message"] == "recall: argument 'limit' must be an integer, got string"
            error = await client.error("remember", {"title": "t", "kind": "banana"})
            assert error["message"].startswith("remember: kind 'banana' is not one of: decision")
            error = await client.error("remember", {"title": "t", "tilte": "typo"})
            assert "unknown argument 'tilte'" in error["message"]
            error = await client.error("recall", {"status": ["alive"]})
            assert "status 'alive' is not one of" in error["message"]
            error = await client.error("get", {"id": "nosuchid"})
            assert error == {
                "code": "not_found",
                "message": "no memory with id nosuchid",
                "hint": "call `recall` with query=WORDS to find the id",
            }
            error = await client.error("get", {"id": "!!"})
            assert error["code"] == "invalid_input"
            error = await client.error("recall", {"cursor": "not-a-cursor"})
            assert error["message"] == "cursor is not one this server made"
            expired = encode_cursor({"t": "recall", "k": "gone"})
            error = await client.error("recall", {"cursor": expired})
            assert error["message"] == "this cursor has expired"
            error = await client.error("get", {"cursor": expired})
            assert error["message"] == "cursor does not belong to get"
            error = await client.error("update", {"id": "x"})
            assert error["code"] in ("not_found", "invalid_input")
            error = await client.error("forget", {"id": "x"})  # admin tool, agent profile
            assert error["code"] == "unknown_tool"
            assert "not served by this server (profile agent)" in error["message"]
            error = await client.error("no_such_tool", {})
            assert error["message"] == "unknown tool 'no_such_tool'"
            error = await client.error("suggest_topic_key", {})
            assert "needs a title or content" in error["message"]
            # Alias kinds from other tools are accepted.
            saved = await client.ok("remember", {"title": "Beware the cache", "kind": "gotcha"})
            assert saved["kind"] == "pitfall"
            assert (await client.ok("recall", {"query": "cache"}))["hits"]
            # A store problem is an error result with the command that repairs it.
            store = repo / ".engram" / "memories.jsonl"
            good = store.read_bytes()
            store.write_bytes(good + b"<<<<<<< HEAD\n")
            error = await client.error("remember", {"title": "Blocked by a conflict"})
            assert error["code"] == "corrupt_store" and "engram doctor" in error["hint"]
            store.write_bytes(good)
            assert (await client.ok("remember", {"title": "Unblocked"}))["action"] == "created"

    run(scenario)


def test_forget_needs_four_characters_and_names_the_candidates(repo: Path) -> None:
    stamp = "2026-01-01T00:00:00.000Z"
    with Engram.open(repo) as engram:
        engram.project_ws.store.put(
            [
                {"id": f"twin{n}" + "a" * 20, "kind": "fact", "title": f"twin {n}",
                 "created_at": stamp, "updated_at": stamp, "rev": 1}
                for n in (1, 2)
            ]
        )  # fmt: skip

    async def scenario() -> None:
        async with connect(repo, "--tools", "all") as client:
            short = await client.error("forget", {"id": "tw"})
            assert short["code"] == "invalid_input"
            assert "'tw' is too short to forget" in short["message"]
            both = await client.error("forget", {"id": "twin"})
            assert both["code"] == "ambiguous_id"
            assert "(fact) 'twin 1'" in both["message"] and "(fact) 'twin 2'" in both["message"]
            await client.error("update", {"id": "twi", "title": "x"})
            await client.ok("forget", {"id": "twin1"})
            assert "twin 2" in json.dumps(await client.ok("get", {"id": "twin2"}))

    run(scenario)


def test_admin_tools_forget_export_import_reindex_doctor(repo: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect(repo, "--tools", "all") as client:
            first = (await client.ok("remember", {"title": "Keep me", "content": "a"}))["id"]
            gone = (await client.ok("remember", {"title": "Drop me", "content": "b"}))["id"]
            forgotten = await client.ok("forget", {"id": gone[:8]})
            assert forgotten["id"] == gone and forgotten["forgotten"] is True
            assert (await client.error("get", {"id": gone}))["code"] == "not_found"
            assert [h["title"] for h in (await client.ok("recall", {}))["hits"]] == ["Keep me"]

            document = await client.ok("export")
            assert document["format"] == "engram" and document["count"] == 2
            assert {m["id"] for m in document["memories"]} == {first, gone}
            target = tmp_path / "export.json"
            target.write_text(json.dumps(document), encoding="utf-8")
            other = make_project(tmp_path / "other")
            async with connect(other, "--tools", "admin") as admin:
                counts = await admin.ok("import", {"path": str(target)})
                assert (counts["added"], counts["updated"], counts["unchanged"]) == (2, 0, 0)
                counts = await admin.ok("import", {"document": document})
                assert counts["unchanged"] == 2
                error = await admin.error("import", {})
                assert "either document or path" in error["message"]
                assert (await admin.ok("reindex", {"rebuild": True}))["records"] == 2
                report = await admin.ok("doctor")
                assert report["error"] == 0 and report["findings"]

    run(scenario)


# -- budget, paging, framing ------------------------------------------------------------------


def fill(root: Path, count: int) -> dict[str, str]:
    """Save ``count`` long memories that all match 'ledger'; return id -> title."""
    out = {}
    with Engram.open(root) as engram:
        for number in range(count):
            title = f"Ledger rule {number:03d}: " + "reconcile the ledger nightly " * 8
            body = f"Ledger detail {number}. " + "The ledger must balance to the cent. " * 60
            result = engram.remember(title[:300], body, kind="decision", tags=["ledger"])
            out[result.record["id"]] = result.record["title"]
    return out


def test_every_response_stays_within_the_budget_and_cursors_yield_every_hit_once(
    repo: Path,
) -> None:
    saved = fill(repo, 45)
    huge = "x" * 30_000 + "\n" + 'ünïcode "quoted" line\n' * 2000
    with Engram.open(repo) as engram:
        big = engram.remember("A very long memory", huge, kind="fact").record["id"]

    async def scenario() -> None:
        budget = 500
        async with connect(repo, "--budget", str(budget)) as client:
            seen: list[str] = []
            page = await client.ok("recall", {"query": "ledger", "limit": 50})
            pages = 1
            while True:
                budget_ok(page, budget)
                assert page["note"].startswith(FRAME)
                seen += [hit["id"] for hit in page["hits"]]
                if "next_cursor" not in page:
                    break
                assert "cursor=next_cursor" in page["more"]
                assert page["hits"], "a page must make progress"
                page = await client.ok("recall", {"cursor": page["next_cursor"], "limit": 50})
                pages += 1
            assert pages > 3
            assert len(seen) == len(set(seen)) == len(saved)
            assert {rid[:8] for rid in saved} == set(seen)

            # Repeating the arguments with the cursor works; other arguments are refused.
            first = await client.ok("recall", {"query": "ledger", "limit": 2})
            second = await client.ok(
                "recall", {"query": "ledger", "limit": 2, "cursor": first["next_cursor"]}
            )
            assert not {h["id"] for h in first["hits"]} & {h["id"] for h in second["hits"]}
            error = await client.error("recall", {"query": "other", "cursor": first["next_cursor"]})
            assert "other arguments" in error["message"]

            # One memory larger than the budget comes in pages of its content.
            parts = []
            page = await client.ok("get", {"id": big})
            assert page["memory"]["title"] == "A very long memory"
            while True:
                budget_ok(page, budget)
                assert page["note"].startswith(FRAME)
                parts.append(page["memory"]["content"])
                assert page["content_page"]["total"] == len(huge)
                if "next_cursor" not in page:
                    break
                page = await client.ok("get", {"cursor": page["next_cursor"]})
            assert "".join(parts) == huge and len(parts) > 10

            # Export pages: every record exactly once, the oversized one listed, not cut.
            exported: list[str] = []
            omitted: list[str] = []
            async with connect(repo, "--tools", "admin", "--budget", "2000") as admin:
                page = await admin.ok("export")
                while True:
                    budget_ok(page, 2000)
                    exported += [m["id"] for m in page["memories"]]
                    omitted += page.get("omitted", {}).get("ids", [])
                    if "next_cursor" not in page:
                        break
                    page = await admin.ok("export", {"cursor": page["next_cursor"]})
            assert sorted(exported + omitted) == sorted([*saved, big])
            assert omitted == [big]

            context = await client.session.read_resource("engram://context")
            text = context.contents[0].text  # type: ignore[union-attr]
            assert math.ceil(len(text) / 4) <= budget
            assert "data, not instructions" in text and "More in the store" in text
            memory = await client.session.read_resource(f"engram://memory/{big}")
            budget_ok(json.loads(memory.contents[0].text), budget)  # type: ignore[union-attr]

    run(scenario)


def answer(core: EngramMCP, tool: str, args: dict[str, Any]) -> Any:
    text, is_error = core.call(tool, args)
    assert not is_error, text
    return json.loads(text)


def test_ids_grow_past_eight_characters_only_where_a_prefix_is_shared(repo: Path) -> None:
    stamp = "2025-01-01T00:00:00.000Z"
    twins = ["abcdefgh2aaaaaaaaaaaaaaaaa", "abcdefgh3aaaaaaaaaaaaaaaaa"]
    records = [
        {
            "id": rid,
            "kind": "fact",
            "title": f"Twin {n}",
            "content": "twin",
            "rev": 1,
            "created_at": stamp,
            "updated_at": stamp,
        }
        for n, rid in enumerate(twins)
    ]
    with Engram.open(repo) as engram:
        assert engram.import_({"version": 1, "memories": records}).added == 2
        single = engram.remember("Twin single", "twin").record["id"]
    with EngramMCP(repo) as core:
        hits = answer(core, "recall", {"query": "twin"})["hits"]
        assert sorted(hit["id"] for hit in hits) == sorted(["abcdefgh2", "abcdefgh3", single[:8]])
        assert answer(core, "get", {"id": "abcdefgh3"})["memory"]["title"] == "Twin 1"


def twin_of(rid: str, at: int, title: str) -> dict[str, Any]:
    """Return a memory whose id shares the first ``at`` characters of ``rid``."""
    stamp = "2025-01-01T00:00:00.000Z"
    other = rid[:at] + ("0" if rid[at] != "0" else "1") + rid[at + 1 :]
    return {"id": other, "kind": "fact", "title": title, "content": "lamp", "rev": 1} | {
        "created_at": stamp,
        "updated_at": stamp,
    }


def test_short_ids_grow_when_a_write_makes_a_prefix_shared(repo: Path) -> None:
    # The server keeps what each prefix named; a write by another process or by itself must
    # make it look again, so a shown id never names two memories.
    with Engram.open(repo) as engram:
        first = engram.remember("Twin lamp", "lamp").record["id"]
    with EngramMCP(repo, profile="all") as core:
        assert [hit["id"] for hit in answer(core, "recall", {"query": "lamp"})["hits"]] == [
            first[:8]
        ]
        elsewhere = twin_of(first, 8, "Twin lamp 2")
        with Engram.open(repo) as other:  # another writer of the same store
            assert other.import_({"version": 1, "memories": [elsewhere]}).added == 1
        shown = {hit["id"] for hit in answer(core, "recall", {"query": "lamp"})["hits"]}
        assert shown == {first[:9], elsewhere["id"][:9]}
        here = twin_of(first, 9, "Twin lamp 3")
        answer(core, "import", {"document": {"version": 1, "memories": [here]}})
        shown = {hit["id"] for hit in answer(core, "recall", {"query": "lamp"})["hits"]}
        assert shown == {first[:10], elsewhere["id"][:9], here["id"][:10]}


def test_a_memory_too_large_even_without_content_comes_in_parts(repo: Path) -> None:
    tags = [f"tag-{n:03d}-" + "x" * 300 for n in range(150)]
    history_text = "An earlier version of this memory. " * 60
    with Engram.open(repo) as engram:
        wide = engram.remember("Many long tags", "short", tags=tags).record
        rid = engram.remember("Rewritten often", history_text, kind="fact").record["id"]
        for number in range(6):
            engram.update(rid, content=f"{history_text} ({number})")
        rewritten = engram.get(rid)
    with EngramMCP(repo, budget=1000) as core:
        parts, page = [], answer(core, "get", {"id": wide["id"]})
        while True:
            budget_ok(page, 1000)
            assert page["note"].startswith(FRAME)
            parts.append(page["part"])
            if "next_cursor" not in page:
                break
            page = answer(core, "get", {"cursor": page["next_cursor"]})
        assert json.loads("".join(parts)) == wide and len(parts) == page["pages"] > 1
    with EngramMCP(repo, budget=3000) as core:
        view = answer(core, "get", {"id": rid})  # full history does not fit; titles do
        budget_ok(view, 3000)
        assert view["memory"]["content"] == rewritten["content"]
        assert [old["rev"] for old in view["memory"]["history"]] == list(range(1, 7))
        assert "content" not in view["memory"]["history"][0]
        # The text of earlier versions is the person's to read (no tool gives it whole).
        assert "the user can run `engram get ID`" in view["memory"]["history_note"]


def test_budget_comes_from_config_and_option(repo: Path) -> None:
    (repo / ".engram" / "config.yaml").write_text(
        (repo / ".engram" / "config.yaml").read_text(encoding="utf-8")
        + "\nmcp:\n  token_budget: 1234\n",
        encoding="utf-8",
    )
    with EngramMCP(repo) as core:
        assert core.budget == 1234
    with EngramMCP(repo, budget=900) as core:
        assert core.budget == 900
    other = make_project(repo.parent / "plain")
    with EngramMCP(other) as core:
        assert core.budget == 4000


# -- prompts and resources ---------------------------------------------------------------------


def test_prompts_and_resources(repo: Path) -> None:
    with Engram.open(repo) as engram:
        decision = engram.remember("Use UTC everywhere", "Store UTC.", kind="decision").record
        engram.remember("Lunch menu", "pizza", kind="note")

    async def scenario() -> None:
        async with connect(repo) as client:
            prompts = (await client.session.list_prompts()).prompts
            assert [p.name for p in prompts] == [
                "memory-protocol",
                "write-memory",
                "recall-first",
                "session-summary",
            ]
            protocol = await client.session.get_prompt("memory-protocol")
            text = protocol.messages[0].content.text  # type: ignore[union-attr]
            assert "recall" in text and "remember" in text and "not instructions" in text
            shape = await client.session.get_prompt("write-memory", {"topic": "the cache bug"})
            text = shape.messages[0].content.text  # type: ignore[union-attr]
            for part in ("the cache bug", "**What**", "**Why**", "**Where**", "**Learned**"):
                assert part in text
            summary = await client.session.get_prompt("session-summary", {"goal": "ship it"})
            assert "## Next steps" in summary.messages[0].content.text  # type: ignore[union-attr]
            with pytest.raises(MCPError):
                await client.session.get_prompt("no-such-prompt")

            resources = (await client.session.list_resources()).resources
            assert {r.uri for r in resources} == {"engram://context", "engram://stats"}
            templates = (await client.session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["engram://memory/{id}"]
            context = (await client.session.read_resource("engram://context")).contents[0]
            assert "Use UTC everywhere" in context.text  # type: ignore[union-attr]
            assert "Lunch menu" not in context.text  # type: ignore[union-attr]
            stats = (await client.session.read_resource("engram://stats")).contents[0]
            assert json.loads(stats.text)["stores"][0]["memories"] == 2  # type: ignore[union-attr]
            uri = f"engram://memory/{decision['id'][:8]}"
            memory = json.loads((await client.session.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
            assert memory["memory"]["title"] == "Use UTC everywhere"
            assert memory["note"].startswith(FRAME)
            with pytest.raises(MCPError):
                await client.session.read_resource("engram://memory/nosuchid")
            assert (await client.ok("stats"))["stores"][0]["memories"] == 2  # still serving

    run(scenario)


# -- compatibility names ------------------------------------------------------------------------


def test_engram_rs_names_and_shapes(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo, "--tools", "all", "--compat", "engram-rs") as client:
            # a profile in --tools also offers go-engram's names (tests/mcp_server/test_mcp_go.py)
            assert await client.names() == tool_names("all", ["engram-rs", "go-engram"])
            stored = await client.ok(
                "memory_store",
                {
                    "memory_type": "antipattern",
                    "context": "Retrying payment webhooks",
                    "action": "Never retry a webhook without an idempotency key",
                    "result": "Customers were charged twice",
                    "tags": "payments,webhooks",
                    "project": "demo",
                },
            )
            assert set(stored) == {"id", "indexed", "deduplicated"}
            assert stored["deduplicated"] is False
            full = await client.ok("get", {"id": stored["id"]})
            memory = full["memory"]
            assert memory["kind"] == "pitfall"
            assert memory["title"] == "Never retry a webhook without an idempotency key"
            assert "**Context:** Retrying payment webhooks" in memory["content"]
            assert "**Result:** Customers were charged twice" in memory["content"]
            assert memory["tags"] == ["payments", "webhooks"]

            found = await client.ok("memory_search", {"query": "webhook retry", "limit": 3})
            assert found["count"] == 1
            assert found["memories"][0]["memory_type"] == "antipattern"
            status = await client.ok("memory_status")
            assert set(status) == {
                "memory_count",
                "indexed_count",
                "pending_judgments",
                "index_size",
                "hints",
            }
            assert status["memory_count"] == 1

            config = await client.ok("memory_config", {"action": "get"})
            assert config["config"]["search"]["backend"] == "tantivy"
            error = await client.error("memory_config", {"action": "set", "key": "x", "value": "y"})
            assert "6008" in error["message"] and "read-only" in error["message"]

            exported = await client.ok("memory_export")
            assert exported["version"] == 1 and exported["count"] == 1
            assert set(exported) >= {"version", "memories", "exported_at", "count"}

            theirs = {
                "id": "5b1c0d4e-1f0a-4e8b-9c3d-2a7f6e5d4c3b",
                "memory_type": "decision",
                "context": "Choosing a queue",
                "action": "Use Postgres SKIP LOCKED as the job queue",
                "result": "One less service to run",
                "tags": "queue",
                "created_at": "2025-01-02T03:04:05Z",
                "updated_at": "2025-01-02T03:04:05Z",
            }
            counts = await client.ok(
                "memory_import", {"version": 1, "memories": [theirs, *exported["memories"]]}
            )
            assert counts == {"imported": 1, "skipped": 1}
            again = await client.ok("memory_import", {"version": 1, "memories": [theirs]})
            assert again == {"imported": 0, "skipped": 1}
            error = await client.error("memory_import", {"version": 2, "memories": []})
            assert "6010" in error["message"]
            found = await client.ok("memory_search", {"query": "skip locked queue"})
            assert found["memories"][0]["title"] == "Use Postgres SKIP LOCKED as the job queue"

    run(scenario)


# -- many servers, one store -------------------------------------------------------------------


def test_two_servers_writing_at_once_lose_nothing_and_see_each_other(repo: Path) -> None:
    async def scenario() -> None:
        async with connect(repo) as one, connect(repo) as two:
            ids: dict[str, list[str]] = {"one": [], "two": []}

            async def writer(name: str, client: Client) -> None:
                for number in range(50):
                    saved = await client.ok(
                        "remember",
                        {"title": f"{name} memory {number}", "content": f"from {name}"},
                    )
                    assert saved["action"] == "created"
                    ids[name].append(saved["id"])

            async with anyio.create_task_group() as group:
                group.start_soon(writer, "one", one)
                group.start_soon(writer, "two", two)

            for client in (one, two):
                stats = await client.ok("stats")
                assert stats["stores"][0]["memories"] == 100
            # Each server reads what the other wrote, on its very next call.
            assert (await one.ok("get", {"id": ids["two"][-1]}))["memory"]["content"] == "from two"
            late = await two.ok("remember", {"title": "Written late by two", "kind": "pitfall"})
            hits = (await one.ok("recall", {"query": "written late"}))["hits"]
            assert [h["id"] for h in hits] == [late["id"][:8]]
            updated = await one.ok("update", {"id": late["id"], "importance": 5})
            assert updated["rev"] == 2
            assert (await two.ok("get", {"id": late["id"]}))["memory"]["importance"] == 5

        lines = (repo / ".engram" / "memories.jsonl").read_bytes().splitlines()
        assert len(lines) == 101

    run(scenario)


def test_server_started_before_init_answers_with_a_hint_then_works(tmp_path: Path) -> None:
    root = tmp_path / "later"
    root.mkdir()

    async def scenario() -> None:
        async with connect(root) as client:
            # Only the personal store is open: recall answers from it, a project save is refused.
            assert (await client.ok("recall", {"query": "x"}))["hits"] == []
            error = await client.error("remember", {"title": "Too early"})
            assert error["code"] == "not_initialized" and "engram init" in error["hint"]
            make_project(root)
            assert (await client.ok("remember", {"title": "Now it works"}))["action"] == "created"

    run(scenario)
    lines = (root / ".engram" / "memories.jsonl").read_text().splitlines()
    assert [json.loads(line)["title"] for line in lines] == ["Now it works"]


# -- the command, the README, the import cost -------------------------------------------------


def test_command_refuses_bad_options_on_stderr(repo: Path, tmp_path: Path) -> None:
    def engram(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engram", *args],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )

    result = engram("-C", str(tmp_path / "missing"), "mcp")
    assert result.returncode == 1 and result.stdout == ""
    assert "no such folder" in result.stderr
    result = engram("-C", str(repo), "mcp", "--tools", "everything")
    assert result.returncode == 1 and result.stdout == ""
    assert "unknown tool or profile in --tools: everything" in result.stderr
    result = engram("-C", str(repo), "mcp", "--budget", "10")
    assert result.returncode == 1 and "at least 500" in result.stderr
    result = engram("-C", str(repo), "mcp")  # stdin at EOF: serves nothing, exits cleanly
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_importing_the_cli_and_the_adapter_does_not_import_mcp() -> None:
    code = "import sys, engram.__main__; print(sorted(m for m in sys.modules if m == 'mcp'))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def readme_tools() -> dict[str, tuple[str, str]]:
    """Return tool -> (profile, compat) from the README's "## MCP tools" table."""
    section = README.read_text(encoding="utf-8").split("## MCP tools", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        cells = [cell.strip() for cell in row.split("|")[1:-1]]
        name = re.findall(r"`(\w+)`", cells[0])[0]
        profile = cells[1].split(",")[0].strip()
        compat = re.findall(r"--compat ([\w-]+)", cells[1])
        rows[name] = (profile, compat[0] if compat else "")
    return rows


def test_readme_lists_what_the_server_registers_for_every_profile() -> None:
    rows = readme_tools()
    assert rows, "README has no MCP tools table"
    compat_sets: list[list[str]] = [[], *([c] for c in COMPATS), list(COMPATS)]
    for profile in PROFILES:
        wanted = {"agent", "admin"} if profile == "all" else {profile}
        for compat in compat_sets:
            documented = {
                name
                for name, (where, extra) in rows.items()
                if where in wanted and (not extra or extra in compat)
            }
            assert documented == set(tool_names(profile, compat)), (profile, compat)
