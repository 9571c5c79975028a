"""Go engram's MCP surface, as an agent set up by Go's own setup meets it: real stdio sessions.

Go's setup starts ``engram mcp --tools=agent``; its agent calls ``mem_save`` with a title and a
type such as ``command``, reads text answers and names observations by integers. Every scenario
spawns ``python -m engram mcp`` with those flags and checks the tool list, the required fields,
the text answers and the integer ids on the wire.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from dulwich import porcelain
from mcp.types import Tool

from engram.mcp_server import tool_names
from engram.model import go_id_of, go_int_id, new_id
from engram.service import Engram
from tests.mcp_server.test_mcp import Client, connect, make_project, run

GO_AGENT = {
    "mem_save",
    "mem_search",
    "mem_context",
    "mem_session_summary",
    "mem_session_start",
    "mem_session_end",
    "mem_get_observation",
    "mem_suggest_topic_key",
    "mem_capture_passive",
    "mem_save_prompt",
    "mem_update",
    "mem_current_project",
    "mem_judge",
    "mem_compare",
    "mem_doctor",
    "mem_review",
    "mem_pin",
    "mem_unpin",
}
GO_ADMIN = {"mem_delete", "mem_stats", "mem_timeline", "mem_merge_projects"}


async def text(client: Client, name: str, args: dict[str, Any] | None = None) -> str:
    """Call a tool that answers in text, as Go's do; fail on an error result."""
    result = await client.session.call_tool(name, args or {})
    assert len(result.content) == 1 and result.content[0].type == "text"
    assert not result.is_error, result.content[0].text
    return result.content[0].text


async def go_names(client: Client) -> set[str]:
    return {name for name in await client.names() if name.startswith("mem_")}


def saved_id(answer: str) -> int:
    """Return the integer id of a "Memory saved … ID: N" answer."""
    found = re.search(r"^ID: (\d+)$", answer, flags=re.MULTILINE)
    assert found, answer
    return int(found.group(1))


def test_go_profiles_serve_go_names_with_gos_required_fields(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "repo")

    async def scenario() -> None:
        async with connect(repo) as client:  # no --tools: engram's own names only
            assert await go_names(client) == set()
        async with connect(repo, "--tools=agent") as client:  # what Go's setup writes
            listed: dict[str, Tool] = {t.name: t for t in (await client.session.list_tools()).tools}
            assert {n for n in listed if n.startswith("mem_")} == GO_AGENT
            assert {"remember", "recall", "context", "pin"} <= set(listed)  # engram's alongside
            assert "forget" not in listed and "mem_delete" not in listed
            required = {name: listed[name].input_schema["required"] for name in GO_AGENT}
            assert required["mem_save"] == ["title"]
            assert required["mem_session_summary"] == ["content"]
            assert required["mem_session_start"] == ["id"]
            assert required["mem_get_observation"] == ["id"]
            assert required["mem_judge"] == ["judgment_id", "relation"]
            assert set(required["mem_compare"]) == {
                "memory_id_a",
                "memory_id_b",
                "relation",
                "confidence",
                "reasoning",
            }
            assert required["mem_review"] == ["action"]
            assert required["mem_current_project"] == []
            save = listed["mem_save"].input_schema["properties"]
            assert {"observation", "capture_prompt", "project_choice_reason", "recovery_token"} <= (
                set(save)
            )
            search = listed["mem_search"].input_schema["properties"]
            assert {"all_projects", "match_mode", "response_format"} <= set(search)
            context = listed["mem_context"].input_schema["properties"]
            assert {"compact", "max_bytes"} <= set(context)
            get = listed["mem_get_observation"].input_schema["properties"]
            assert {"include_history", "history_cursor"} <= set(get)
            assert listed["mem_pin"].annotations is not None
            assert listed["mem_pin"].annotations.read_only_hint is False
        async with connect(repo, "--tools=agent,admin") as client:
            names = set(await client.names())
            assert {n for n in names if n.startswith("mem_")} == GO_AGENT | GO_ADMIN
            assert {"forget", "doctor", "remember"} <= names
        async with connect(repo, "--tools=admin") as client:
            assert await go_names(client) == GO_ADMIN
        async with connect(repo, "--tools=all") as client:
            assert await go_names(client) == GO_AGENT | GO_ADMIN
            assert await client.names() == tool_names("all", ["go-engram"])
        async with connect(repo, "--tools=mem_save,mem_search") as client:
            assert await client.names() == ["mem_save", "mem_search"]

    run(scenario)


def test_an_agent_set_up_by_go_saves_searches_and_reads_by_integer_id(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    porcelain.init(str(root)).close()
    (root / "src/auth.py").write_bytes(b"def login(user):\n    return issue_token(user)\n")
    porcelain.add(str(root), paths=[str(root / "src/auth.py")])
    porcelain.commit(str(root), message=b"auth", author=b"Dev <d@example.com>")
    engram, _ = Engram.init(root, "demo")
    engram.close()

    async def scenario() -> None:
        async with connect(root, "--tools=agent,admin") as client:
            answer = await text(client, "mem_save", {"title": "Run make bench", "type": "command"})
            assert answer.startswith('Memory saved: "Run make bench" (command)')
            assert "Suggested topic_key: " in answer
            bench = saved_id(answer)
            stored = (root / ".engram" / "memories.jsonl").read_text(encoding="utf-8")
            record = json.loads(stored.splitlines()[0])
            assert record["type"] == "command" and record["kind"] == "note"
            assert go_int_id(record["id"]) == bench

            found = await text(client, "mem_search", {"query": "make bench", "type": "command"})
            assert found.startswith("Found 1 memories")
            assert f"#{bench} (command) Run make bench" in found
            assert (await text(client, "mem_search", {"query": "bench", "type": "decision"})) == (
                'No memories found for: "bench"'
            )
            for ref in (bench, str(bench), record["id"][:8]):
                full = await text(client, "mem_get_observation", {"id": ref})
                assert full.startswith(f"#{bench} (command) Run make bench"), ref
            missing = await client.error("mem_get_observation", {"id": 12345})
            assert missing["code"] == "not_found" and "12345" in missing["message"]

            updated = await text(
                client, "mem_update", {"id": bench, "title": "Run make bench before merging"}
            )
            assert updated == f'Memory updated: #{bench} "Run make bench before merging" (rev 2)'
            history = await text(
                client, "mem_get_observation", {"id": bench, "include_history": True}
            )
            assert "History (1 earlier versions, newest first):" in history
            assert "- rev 1 " in history and ": Run make bench\n" in history

            utc = saved_id(
                await text(
                    client,
                    "mem_save",
                    {
                        "title": "Use UTC everywhere",
                        "observation": "Times in UTC.",
                        "type": "decision",
                    },
                )
            )
            old = saved_id(
                await text(client, "mem_save", {"title": "Use local time", "type": "decision"})
            )
            compared = await text(
                client,
                "mem_compare",
                {
                    "memory_id_a": utc,
                    "memory_id_b": old,
                    "relation": "supersedes",
                    "confidence": 0.9,
                    "reasoning": "UTC replaced local time",
                    "model": "test-model",
                },
            )
            assert compared == (
                f"Recorded: #{utc} supersedes #{old} (link supersedes; #{old} is now superseded)."
            )
            why = await client.ok("why", {"id": str(utc)})
            assert [item["title"] for item in why["supersedes"]] == ["Use local time"]
            judged = await text(
                client,
                "mem_judge",
                {"judgment_id": f"rel-{utc}-{bench}", "relation": "not_conflict"},
            )
            assert judged == f"Recorded: #{utc} and #{bench} do not conflict (nothing stored)."
            judged = await text(
                client,
                "mem_judge",
                {"judgment_id": f"rel-{bench}-{utc}", "relation": "related", "reason": "both ops"},
            )
            assert judged == f"Recorded: #{bench} related #{utc} (link relates)."
            bad = await client.error("mem_judge", {"judgment_id": "rel-x", "relation": "related"})
            assert "rel-<id>-<id>" in bad["message"]

            project = json.loads(await text(client, "mem_current_project"))
            assert project["project"] == "demo"
            assert project["project_source"] == "working_directory"
            assert Path(project["project_path"]) == root
            assert "demo" in project["available_projects"]

            doctor = await text(client, "mem_doctor")
            assert doctor.startswith("engram doctor: 0 error(s)")

            # review: a memory whose cited file changed since it was written
            cited = await client.ok(
                "remember",
                {"title": "Login issues tokens", "kind": "fact", "files": ["src/auth.py"]},
            )
            (root / "src/auth.py").write_bytes(b"def login(user):\n    return None\n")
            listed = await text(client, "mem_review", {"action": "list"})
            auth = go_int_id(cited["id"])
            assert listed.startswith("1 memories to review")
            assert f"#{auth} (fact) Login issues tokens: src/auth.py" in listed
            marked = await text(client, "mem_review", {"action": "mark_reviewed", "id": auth})
            assert marked.startswith(f"Marked reviewed: #{auth}")
            again = await text(client, "mem_review", {"action": "list"})
            assert again.startswith("Nothing to review"), again

            timeline = await text(client, "mem_timeline", {"observation_id": bench})
            assert "→ " in timeline and f"#{bench} (command)" in timeline
            deleted = await text(client, "mem_delete", {"id": str(old), "hard_delete": True})
            assert deleted.startswith(f"Memory #{old} permanently deleted")
            gone = await client.error("mem_get_observation", {"id": old})
            assert gone["code"] == "not_found"

    run(scenario)


def test_pinned_memories_come_first_in_every_briefing(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "repo")
    with Engram(repo) as engram:
        for n in range(30):
            engram.remember(f"Decision number {n} about caching", kind="decision", importance=5)
        note = engram.remember("Release checklist lives in docs/release.md", kind="note").record

    async def scenario() -> None:
        async with connect(repo, "--tools=agent") as client:
            before = await text(client, "mem_context", {"limit": 5})
            assert "Release checklist" not in before and "## Pinned" not in before
            pinned = await text(client, "mem_pin", {"id": go_int_id(note["id"])})
            assert pinned.startswith(f"Pinned #{go_int_id(note['id'])} (note) Release checklist")
            for answer in (
                await text(client, "mem_context", {"limit": 5}),
                (await client.ok("context", {"budget": 300}))["briefing"],
            ):
                sections = re.findall(r"^## (.+)$", answer, flags=re.MULTILINE)
                assert sections[0] == "Pinned", answer
                assert "Release checklist lives in docs/release.md" in answer
            go_context = await text(client, "mem_context", {"limit": 5})
            assert f"- #{go_int_id(note['id'])} " in go_context  # Go's ids in Go's briefing
            compact = await text(client, "mem_context", {"limit": 5, "compact": True})
            assert "Release checklist" in compact and len(compact) < len(go_context)
            await text(client, "mem_unpin", {"id": str(go_int_id(note["id"]))})
            assert "## Pinned" not in await text(client, "mem_context", {"limit": 5})
            native = await client.ok("pin", {"id": note["id"][:8]})
            assert native == {"id": note["id"], "pinned": True, "rev": 4}
            assert (await client.ok("unpin", {"id": note["id"]}))["pinned"] is False

    run(scenario)


def test_cli_pin_and_unpin(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "repo")
    with Engram(repo) as engram:
        record = engram.remember("Never deploy on Fridays", kind="principle").record

    def engram_cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "engram", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout

    assert engram_cli("pin", record["id"][:8]).startswith(f"{record['id']} pinned")
    briefing = engram_cli("context")
    assert re.findall(r"^## (.+)$", briefing, flags=re.MULTILINE)[0] == "Pinned"
    assert json.loads(engram_cli("pin", record["id"], "--json"))["rev"] == 2  # already pinned
    assert engram_cli("unpin", record["id"]).strip() == f"{record['id']} unpinned"
    assert "## Pinned" not in engram_cli("context")


def test_a_memory_imported_from_go_keeps_its_go_id(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "repo")
    with Engram(repo) as engram:
        imported = engram.remember(
            "Auth uses JWT",
            "**What**: tokens",
            kind="decision",
            # as the Go import keeps a row's fields: its id, its pin, its review date
            extra={"go": {"id": 455, "pinned": 1, "review_after": "2020-01-31 09:00:00"}},
        ).record
    assert go_id_of(imported) == 455

    async def scenario() -> None:
        async with connect(repo, "--tools=agent") as client:
            full = await text(client, "mem_get_observation", {"id": 455})
            assert full.startswith("#455 (decision) Auth uses JWT")
            found = await text(client, "mem_search", {"query": "jwt"})
            assert "#455 (decision) Auth uses JWT" in found
            rows = json.loads(
                await text(client, "mem_search", {"query": "jwt", "response_format": "json"})
            )
            assert rows["results"][0]["id"] == 455
            assert rows["results"][0]["sync_id"] == imported["id"]
            briefing = await text(client, "mem_context")
            assert re.findall(r"^## (.+)$", briefing, flags=re.MULTILINE)[0] == "Pinned"
            assert "- #455 " in briefing
            due = await text(client, "mem_review", {"action": "list"})
            assert (
                "#455 (decision) Auth uses JWT: its review date 2020-01-31 09:00:00 passed" in due
            )
            await text(client, "mem_review", {"action": "mark_reviewed", "observation_id": 455})
            assert (await text(client, "mem_review", {"action": "list"})).startswith("Nothing")
            await text(client, "mem_unpin", {"id": 455})
            assert "## Pinned" not in await text(client, "mem_context")

    run(scenario)


def test_go_int_id_is_stable_and_fits_gos_int64() -> None:
    rid = new_id()
    number = go_int_id(rid)
    assert number == go_int_id(rid) == go_int_id(rid.upper())
    assert 0 <= number < 2**60
    hex32 = "0123456789abcdef0123456789abcdef"
    assert go_int_id(hex32) == int(hex32[:15], 16)
    assert go_id_of({"id": rid}) == number
    assert go_id_of({"id": rid, "go": {"id": "77"}}) == 77
    assert go_int_id("go-engram:obs:x") == go_int_id("go-engram:obs:x")


def test_unknown_tools_entries_are_refused_with_the_choices(tmp_path: Path) -> None:
    repo = make_project(tmp_path / "repo")
    done = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(repo), "mcp", "--tools=agent,mem_nope"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "unknown tool or profile in --tools: mem_nope" in done.stderr
