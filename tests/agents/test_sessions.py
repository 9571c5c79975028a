"""Agent sessions end to end: start, end and summaries, prompts, passive capture, the timeline.

Through the service, the CLI (CliRunner) and one real MCP stdio session served with
``--compat go-engram``. Memories saved in one millisecond sort by id, so the timeline tests
sleep a few milliseconds between saves to get an order they can rely on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engram.__main__ import app
from engram.errors import InvalidInput
from engram.service import Engram
from tests.mcp_server.test_mcp import connect, make_project, run

runner = CliRunner()

# A reply with a "## Key Learnings" section: numbered items, one too short, one that wraps.
REPLY_LOGIN = """I fixed the flaky login test and tightened the session cookie handling.

## What I changed

- `src/auth/session.py`: the cookie now sets `SameSite=Lax`.
- `tests/test_login.py`: the fixture freezes the clock.

## Key Learnings

1. **The session cookie** must be set with `SameSite=Lax`, otherwise the OAuth redirect drops it.
2. `freezegun` does not patch `time.monotonic` by default; pass `tick=True` or the retry loop \
spins forever.
3. Too short.
4. The login rate limiter keys on the client IP, so tests behind the proxy share one bucket
   and must reset it between cases.

Let me know if you want me to open a PR.
"""

LOGIN_TITLES = [
    "The session cookie must be set with SameSite=Lax, otherwise the OAuth redirect drops it",
    "freezegun does not patch time.monotonic by default; pass tick=True or the retry loop "
    "spins forever",
    "The login rate limiter keys on the client IP, so tests behind the proxy share one bucket "
    "and must reset it between cases",
]

# A bold "**Learnings:**" line with bullets.
REPLY_MIGRATION = """Done. The migration now runs in one transaction and the tests pass.

**Learnings:**
- SQLite cannot `ALTER TABLE ... DROP COLUMN` before 3.35; the migration rebuilds the table \
instead.
- Foreign keys are off by default in SQLite: every connection must run `PRAGMA foreign_keys=ON`.
"""

MIGRATION_TITLES = [
    "SQLite cannot ALTER TABLE ... DROP COLUMN before 3.35; the migration rebuilds the table "
    "instead",
    "Foreign keys are off by default in SQLite: every connection must run PRAGMA foreign_keys=ON",
]

# Two learnings sections: only the last one counts.
REPLY_CI = """I looked at the failing build on main.

### Learnings (draft)
- This draft section comes first, so the capture must ignore every item in it.

### Key Learnings
* The CI cache key must include the lock file hash, or stale wheels get reused.
"""

CI_TITLE = "The CI cache key must include the lock file hash, or stale wheels get reused"

REPLY_WITHOUT_SECTION = """I renamed the helper and updated its three callers.
Nothing surprising came up; the test suite passes locally.
"""


def titles(engram: Engram, ids: list[str]) -> list[str]:
    return [str(engram.get(rid)["title"]) for rid in ids]


def save_in_order(engram: Engram, numbers: range, session_id: str | None, tag: str) -> list[str]:
    """Save memories numbered ``numbers`` a few ms apart; return their ids in creation order."""
    out = []
    for n in numbers:
        time.sleep(0.003)
        result = engram.remember(
            f"{tag} step {n + 1} of the refactor", f"{tag} body {n + 1}", session_id=session_id
        )
        out.append(result.record["id"])
    return out


# -- lifecycle through the service ---------------------------------------------------------------


def test_start_new_given_and_reopened_session(project: Engram) -> None:
    fresh = project.session_start(directory="/work/app")
    other = project.session_start()
    assert fresh.id != other.id and len(fresh.id) >= 16
    assert fresh.project == "demo" and fresh.directory == "/work/app"
    given = project.session_start("claude-7f3a", directory="/work/app")
    assert given.id == "claude-7f3a"
    time.sleep(0.003)
    project.session_end("claude-7f3a")
    assert "ended_at" in (project.sessions.get("claude-7f3a") or {})
    again = project.session_start("claude-7f3a", directory="/elsewhere")
    assert again.started_at == given.started_at
    assert again.directory == "/elsewhere"
    assert "ended_at" not in again.to_dict()
    with pytest.raises(InvalidInput):
        project.session_start("bad\nid")


def test_memories_and_prompts_join_the_open_session_until_it_ends(project: Engram) -> None:
    before = project.remember("Saved before any session", "no session yet")
    assert before.record.get("session_id") is None
    sid = project.session_start().id
    note = project.remember("Retry the upload three times", "S3 returns 503 under load")
    assert note.record["session_id"] == sid
    prompt = project.save_prompt("Please make the uploader resilient to S3 throttling")
    assert prompt.record["session_id"] == sid
    assert prompt.record["kind"] == "prompt" and prompt.record["source"] == "prompt"
    assert prompt.record["title"] == "Please make the uploader resilient to S3 throttling"
    explicit = project.remember("Other agent's note", "x", session_id="someone-else")
    assert explicit.record["session_id"] == "someone-else"
    project.session_end()
    after = project.remember("Saved after the session ended", "late")
    assert after.record.get("session_id") is None
    late_prompt = project.save_prompt("And one more thing")
    assert late_prompt.record.get("session_id") is None


def test_summary_from_markdown_and_from_fields(project: Engram) -> None:
    sid = project.session_start(directory="/work/app").id
    markdown = (
        "Worked through the auth bugs.\n\n"
        "## Goal\nFix the login redirect loop\n\n"
        "## Discoveries\n- the cookie lacked SameSite\n\n"
        "## Accomplished\n- wrote a draft\n\n"
        "## Relevant files\n- `src/auth/session.py`\n- src/auth/views.py — the redirect\n"
    )
    result = project.session_summary(markdown, accomplished="Fixed the redirect loop")
    record = result.record
    assert result.action == "created"
    assert record["kind"] == "session" and record["source"] == "session"
    assert record["title"] == "Session: Fix the login redirect loop"
    assert record["session_id"] == sid and record["topic_key"] == f"session/{sid}"
    assert record["files"] == ["src/auth/session.py", "src/auth/views.py"]
    content = str(record["content"])
    assert "Fixed the redirect loop" in content and "wrote a draft" not in content
    assert content.startswith("Worked through the auth bugs.")
    assert content.index("## Goal") < content.index("## Discoveries") < content.index("## Acc")
    logged = project.sessions.get(sid)
    assert logged is not None and logged["summary_id"] == record["id"]
    assert record["session"] == {"started_at": logged["started_at"], "directory": "/work/app"}

    fields_only = project.session_summary(
        goal="Speed up the search page",
        next_steps="profile the ranking query",
        relevant_files="- `src/search.py`",
        session_id="fields-session",
    )
    assert fields_only.record["title"] == "Session: Speed up the search page"
    assert fields_only.record["files"] == ["src/search.py"]
    assert fields_only.record["session_id"] == "fields-session"
    assert "## Next steps\nprofile the ranking query" in fields_only.record["content"]


def test_second_summary_revises_and_end_records_ended_at(project: Engram) -> None:
    sid = project.session_start().id
    first = project.session_summary("## Goal\nShip the exporter\n## Accomplished\nhalf of it")
    second = project.session_summary(goal="Ship the exporter, for real")
    assert second.action == "updated" and second.record["id"] == first.record["id"]
    assert second.record["rev"] == 2
    assert second.record["title"] == "Session: Ship the exporter, for real"
    ended = project.session_end(summary="## Goal\nShip the exporter\n## Next steps\nrelease notes")
    assert ended.id == sid and ended.summary_id == first.record["id"]
    logged = project.sessions.get(sid)
    assert logged is not None and logged["ended_at"] == ended.ended_at
    summary = project.get(first.record["id"])
    assert summary["rev"] == 3
    assert summary["session"]["ended_at"] == ended.ended_at
    assert "release notes" in summary["content"]
    sessions = project.recall("", kinds="session", limit=50)
    assert [hit.id for hit in sessions] == [first.record["id"]]
    with pytest.raises(InvalidInput, match="no session to end"):
        project.session_end()


def test_end_without_an_open_session_is_a_clear_error(project: Engram) -> None:
    with pytest.raises(InvalidInput) as caught:
        project.session_end()
    assert "no session to end" in str(caught.value)
    assert "session_start" in (caught.value.hint or "")


def test_revised_summary_files_follow_its_relevant_files(project: Engram) -> None:
    project.session_start()
    project.session_summary("## Goal\nFix login\n## Relevant files\n- `src/auth.py`\n")
    revised = project.session_summary("## Goal\nFix login\n## Accomplished\nnothing to list")
    assert "Relevant files" not in revised.record["content"]
    assert revised.record.get("files", []) == []


def test_summary_and_prompt_errors(project: Engram) -> None:
    with pytest.raises(InvalidInput, match="needs some text"):
        project.session_summary("")
    with pytest.raises(InvalidInput, match="needs some text"):
        project.session_summary("   \n", goal="  ")
    with pytest.raises(InvalidInput, match="unknown summary section mood"):
        project.session_summary("## Goal\nx", mood="tired")
    with pytest.raises(InvalidInput):
        project.save_prompt("  \n ")
    assert project.recall("", limit=10) == []


def test_prompt_secrets_are_redacted(project: Engram) -> None:
    secret_key = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    result = project.save_prompt(
        f"Deploy with password=Hunter2-correct-horse and key {secret_key}\nthen run the smoke test"
    )
    stored = project.get(result.record["id"])
    assert result.redactions >= 2
    assert "Hunter2-correct-horse" not in json.dumps(stored)
    assert secret_key not in json.dumps(stored)
    assert "[REDACTED]" in stored["content"] and "then run the smoke test" in stored["content"]
    raw = (project.root / ".engram" / "memories.jsonl").read_text(encoding="utf-8")
    assert "Hunter2-correct-horse" not in raw and secret_key not in raw


# -- capture ------------------------------------------------------------------------------------


def test_capture_saves_learnings_as_discoveries(project: Engram) -> None:
    sid = project.session_start().id
    login = project.capture(REPLY_LOGIN)
    assert login.extracted == 3 and login.duplicates == [] and login.session_id == sid
    assert [item.title for item in login.saved] == LOGIN_TITLES
    for item in login.saved:
        record = project.get(item.id)
        assert record["kind"] == "discovery" and record["source"] == "capture"
        assert record["status"] == "proposed"  # read out of an answer: a person reviews it
        assert record["capture"]["rule"] == "lesson" and record["capture"]["session"] == sid
        assert record["tags"] == ["capture"] and record["session_id"] == sid
    wrapped = project.get(login.saved[2].id)
    assert wrapped["content"] == LOGIN_TITLES[2] + "."

    migration = project.capture(REPLY_MIGRATION, source="claude-hook", session_id="s-2")
    assert [item.title for item in migration.saved] == MIGRATION_TITLES
    record = project.get(migration.saved[0].id)
    assert record["source"] == "claude-hook" and record["session_id"] == "s-2"

    ci = project.capture(REPLY_CI)
    assert ci.extracted == 1 and [item.title for item in ci.saved] == [CI_TITLE]
    discoveries = project.recall("", kinds="discovery", limit=50)
    assert len(discoveries) == 6
    assert not any("draft" in str(hit.record["title"]) for hit in discoveries)


def test_capture_again_saves_nothing_and_skips_hand_saved(project: Engram) -> None:
    first = project.capture(REPLY_LOGIN)
    store = project.root / ".engram" / "memories.jsonl"
    size = store.stat().st_size
    again = project.capture(REPLY_LOGIN)
    assert again.extracted == 3 and again.saved == []
    assert sorted(item.id for item in again.duplicates) == sorted(item.id for item in first.saved)
    assert store.stat().st_size == size

    decision = project.remember(
        MIGRATION_TITLES[1], "We turn them on in db.connect().", kind="decision"
    )
    mixed = project.capture(REPLY_MIGRATION)
    assert [item.title for item in mixed.saved] == [MIGRATION_TITLES[0]]
    assert mixed.to_dict()["duplicates"] == [
        {"id": decision.record["id"], "title": MIGRATION_TITLES[1]}
    ]
    assert project.get(decision.record["id"])["kind"] == "decision"


def test_a_rejected_learning_is_not_captured_again(project: Engram) -> None:
    first = project.capture(REPLY_LOGIN)
    inbox = project.review()
    assert sorted(item["id"] for item in inbox.to_dict()["items"]) == sorted(
        item.id for item in first.saved
    )
    rejected = first.saved[0].id
    project.review("reject", [rejected])
    assert project.get(rejected)["status"] == "rejected"
    store = project.root / ".engram" / "memories.jsonl"
    size = store.stat().st_size
    for source in ("capture", "claude-hook"):  # another door's source: the key still holds
        again = project.capture(REPLY_LOGIN, source=source)
        assert again.saved == [] and rejected in [item.id for item in again.duplicates]
    assert store.stat().st_size == size
    accepted = first.saved[1].id
    project.review("accept", [accepted])
    assert project.get(accepted)["status"] == "active"


def test_capture_without_a_section_writes_nothing(project: Engram) -> None:
    store = project.root / ".engram" / "memories.jsonl"
    project.remember("Something already known", "so the file is not empty")
    before = store.read_bytes()
    result = project.capture(REPLY_WITHOUT_SECTION)
    assert result.to_dict() == {"extracted": 0, "saved": [], "duplicates": [], "session_id": None}
    assert store.read_bytes() == before


# -- timeline -----------------------------------------------------------------------------------


def test_timeline_in_a_session_and_in_the_project(project: Engram) -> None:
    ids = save_in_order(project, range(3), "sess-a", "A")
    time.sleep(0.003)
    intruder = project.remember("Other session's note", "elsewhere", session_id="sess-b")
    ids += save_in_order(project, range(3, 7), "sess-a", "A")
    assert len(ids) == 7

    data = project.timeline(ids[3], before=2, after=2)
    assert data.scope == "session" and data.session_id == "sess-a"
    assert data.memory.id == ids[3]
    assert [item.id for item in data.before] == ids[1:3]
    assert [item.id for item in data.after] == ids[4:6]
    assert data.earlier == 1 and data.later == 1
    assert [item.title for item in data.before] == [
        "A step 2 of the refactor",
        "A step 3 of the refactor",
    ]

    everything = project.timeline(ids[0], before=10, after=10)
    assert [item.id for item in everything.after] == ids[1:]
    assert everything.before == [] and everything.earlier == 0
    assert everything.later == 0
    for rid in ids:
        around = project.timeline(rid, before=10, after=10)
        seen = {item.id for item in around.before + around.after}
        assert intruder.record["id"] not in seen
    alone = project.timeline(intruder.record["id"])
    assert alone.scope == "session" and alone.before == [] and alone.after == []

    time.sleep(0.003)
    loose = project.remember("A note outside any session", "project chronology")
    time.sleep(0.003)
    later = project.remember("Another loose note", "after it")
    flat = project.timeline(loose.record["id"], before=2, after=2)
    assert flat.scope == "project" and flat.session_id is None
    assert [item.id for item in flat.before] == ids[5:7]
    assert [item.id for item in flat.after] == [later.record["id"]]
    with pytest.raises(InvalidInput):
        project.timeline(ids[0], before=-1)


# -- CLI ----------------------------------------------------------------------------------------


def cli(root: Path, *args: str, input: str | None = None, code: int = 0) -> str:
    result = runner.invoke(app, ["-C", str(root), *args], input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result.stdout if code == 0 else result.stderr


def test_cli_session_prompt_capture_summary_timeline(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    sid = cli(root, "session", "start", "--directory", "/work/app").strip()
    assert len(sid.split()) == 1 and sid
    assert json.loads(cli(root, "session", "start", sid, "--json"))["id"] == sid

    prompt_id = cli(root, "prompt", "-", input="Make the login page faster\nit takes 4 s").strip()
    reply = root / "reply.md"
    reply.write_text(REPLY_LOGIN, encoding="utf-8")
    saved = cli(root, "capture", str(reply)).splitlines()
    assert [line.split("  ", 1)[1] for line in saved] == LOGIN_TITLES
    assert all(line.startswith("proposed ") for line in saved)
    known = cli(root, "capture", input=REPLY_LOGIN).splitlines()
    assert [line.split()[0] for line in known] == ["known"] * 3
    data = json.loads(cli(root, "capture", "--json", input=REPLY_MIGRATION))
    assert data["extracted"] == 2 and len(data["saved"]) == 2 and data["session_id"] == sid
    nothing = cli(root, "capture", "-", input=REPLY_WITHOUT_SECTION)
    assert nothing == ""

    summary_id = cli(
        root, "session", "summary", "--goal", "Faster login", "--accomplished", "cached the JWKS"
    ).strip()
    with Engram.open(root) as engram:
        prompt = engram.get(prompt_id)
        assert prompt["kind"] == "prompt" and prompt["session_id"] == sid
        assert prompt["content"] == "Make the login page faster\nit takes 4 s"
        summary = engram.get(summary_id)
        assert summary["title"] == "Session: Faster login" and summary["session_id"] == sid
        assert "## Accomplished\ncached the JWKS" in summary["content"]
        discovery_ids = [item["id"] for item in data["saved"]]

    lines = cli(root, "timeline", discovery_ids[0], "--before", "2", "--after", "1").splitlines()
    assert lines[0] == f"timeline in session {sid}"
    marked = [n for n, line in enumerate(lines) if line.startswith(">> ")]
    assert len(marked) == 1
    at = marked[0]
    assert "SQLite cannot ALTER TABLE" in lines[at]
    assert LOGIN_TITLES[1] in lines[at - 2] and LOGIN_TITLES[2] in lines[at - 1]
    assert MIGRATION_TITLES[0] not in lines[at + 1] and MIGRATION_TITLES[1] in lines[at + 1]
    assert lines[1].strip().startswith("… ") and lines[-1].strip() == "… 1 later"

    as_json = json.loads(cli(root, "timeline", discovery_ids[0], "-b", "1", "-a", "1", "--json"))
    assert as_json["scope"] == "session" and as_json["memory"]["id"] == discovery_ids[0]
    assert [item["id"] for item in as_json["after"]] == [discovery_ids[1]]

    ended = cli(root, "session", "end").splitlines()
    assert ended == [f"ended {sid}", f"summary: {summary_id}"]
    error = cli(root, "session", "end", code=1)
    assert "no session to end" in error
    ended_json = json.loads(
        cli(
            root, "session", "end", sid, "--summary", "-", "--json", input="## Goal\nFaster login\n"
        )
    )
    assert ended_json["id"] == sid and ended_json["summary_id"] == summary_id
    assert ended_json["summary"]["action"] == "updated"


# -- MCP ----------------------------------------------------------------------------------------


def test_mcp_session_tools_and_go_engram_names(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")

    async def scenario() -> None:
        async with connect(root, "--tools=agent,admin") as client:  # Go's profiles: Go's names
            names = await client.names()
            for name in (
                "mem_timeline",
                "mem_session_start",
                "mem_session_summary",
                "mem_session_end",
                "mem_save_prompt",
                "mem_capture_passive",
            ):
                assert name in names
            started: dict[str, Any] = await client.ok("session_start", {"directory": "/w"})
            sid = started["session_id"]
            assert started["id"] == sid and started["directory"] == "/w"
            note = await client.ok(
                "remember", {"title": "Uploads retry on 503", "content": "S3 throttles bursts"}
            )
            assert note["action"] == "created"
            prompt = await client.ok(
                "save_prompt", {"content": "Use token sk-" + "Zz9" * 12 + " to deploy"}
            )
            assert prompt["action"] == "created" and prompt["session_id"] == sid
            assert prompt["redacted"] >= 1
            captured = await client.ok("capture", {"content": REPLY_LOGIN})
            assert captured["extracted"] == 3 and captured["already_known"] == []
            assert [item["title"] for item in captured["saved"]] == LOGIN_TITLES
            again = await client.ok("capture", {"content": REPLY_LOGIN})
            assert again["saved"] == [] and len(again["already_known"]) == 3
            empty = await client.ok("capture", {"content": REPLY_WITHOUT_SECTION})
            assert empty["extracted"] == 0 and empty["saved"] == [] and empty["hint"]
            summary = await client.ok(
                "session_summary", {"goal": "Harden uploads", "accomplished": "retries"}
            )
            assert summary["action"] == "created" and summary["rev"] == 1
            assert summary["title"] == "Session: Harden uploads" and summary["session_id"] == sid
            revised = await client.ok("session_summary", {"content": "## Goal\nHarden uploads"})
            assert revised["action"] == "updated" and revised["id"] == summary["id"]
            assert revised["rev"] == 2

            line = await client.ok("timeline", {"id": prompt["id"], "before": 1, "after": 1})
            assert line["scope"] == "session" and line["session_id"] == sid
            assert len(line["before"]) == 1 and note["id"][:8] in line["before"][0]
            assert "Uploads retry on 503" in line["before"][0]
            assert prompt["id"][:8] in line["memory"] and "prompt" in line["memory"]
            assert LOGIN_TITLES[0] in line["after"][0]
            assert line["earlier"] == 0 and line["later"] == 3

            # Go's names answer in text, as Go does, and name memories by Go's integer ids
            async def go(name: str, args: dict[str, Any]) -> str:
                result = await client.session.call_tool(name, args)
                assert not result.is_error, result.content
                return str(result.content[0].text)  # type: ignore[union-attr]

            assert await go("mem_session_start", {"id": "go-1"}) == "Session go-1 started."
            go_prompt = await go(
                "mem_save_prompt", {"content": "Migrate the DB", "session_id": "go-1"}
            )
            assert go_prompt.startswith("Prompt saved.\nID: ")
            prompt_id = int(go_prompt.rsplit("ID: ", 1)[1])
            go_capture = await client.ok(
                "mem_capture_passive", {"content": REPLY_MIGRATION, "session_id": "go-1"}
            )
            assert go_capture["extracted"] == 2 and len(go_capture["saved"]) == 2
            go_summary = await go(
                "mem_session_summary",
                {"content": "## Goal\nMigrate the DB", "project": "demo", "session_id": "go-1"},
            )
            assert go_summary.startswith('Session summary saved: "Session: Migrate the DB"')
            go_line = await go(
                "mem_timeline", {"observation_id": prompt_id, "before": 5, "after": 5}
            )
            lines = go_line.splitlines()
            assert lines[0] == f"Timeline around #{prompt_id} (session: go-1):"
            assert lines[1].startswith("→ ") and f"#{prompt_id} (prompt)" in lines[1]
            assert MIGRATION_TITLES[0] in lines[2]
            assert "Session: Migrate the DB" in lines[-1]
            assert "Uploads retry on 503" not in go_line
            assert await go("mem_session_end", {"id": "go-1", "summary": "## Goal\nDone"}) == (
                "Session go-1 ended."
            )
            summary_id = int(go_summary.rsplit("ID: ", 1)[1])
            revised_summary = await go("mem_get_observation", {"id": summary_id})
            assert "Done" in revised_summary  # the end's summary revised the session's one

            ended = await client.ok("session_end", {})
            assert ended["session_id"] == sid and ended["ended_at"]
            error = await client.error("session_end", {})
            assert "no session to end" in error["message"]
            error = await client.error("session_summary", {"content": " "})
            assert "needs some text" in error["message"]

    run(scenario)


def test_relevant_files_comma_separated_become_the_memory_files_on_every_adapter(
    project: Engram,
) -> None:
    from tests.mcp_server.test_mcp import connect, run

    saved = project.session_summary(goal="Fix rounding", relevant_files="src/a.py, src/b.py")
    assert saved.record["files"] == ["src/a.py", "src/b.py"]
    assert "- `src/a.py`\n- `src/b.py`" in saved.record["content"]

    async def scenario() -> None:
        async with connect(project.root) as client:
            await client.ok(
                "session_summary",
                {"goal": "Ship it", "relevant_files": "lib/c.py,lib/d.py", "session_id": "s-2"},
            )

    run(scenario)
    stored = [r for r in project.recall("", kinds="session") if r.record.get("session_id") == "s-2"]
    assert [hit.record["files"] for hit in stored] == [["lib/c.py", "lib/d.py"]]
