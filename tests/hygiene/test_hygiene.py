"""Hygiene through the facade, the CLI and a real MCP session: judge, consolidate, train.

The only stand-in is the language model: the MCP client's sampling callback and a fake
`consolidate.llm_command` script answer in its place (a remote LLM cannot exist here).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from engram.config import personal_dir, set_value
from engram.model import canonical_line
from engram.service import Engram
from tests.conftest import run_cli

PITFALL = (
    "Refund webhooks can arrive before the charge webhook",
    "Handlers in webhooks/dispatch.py must tolerate an unknown charge id and retry later.",
)


@pytest.fixture
def messy(tmp_path: Path) -> Iterator[tuple[Engram, dict[str, Any]]]:
    """A store with the mess hygiene is for: 9 copies, a stale decision, an orphan, a dead file."""
    root = tmp_path / "messy"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ledger.py").write_text("BALANCE = 0\n", encoding="utf-8")
    engram, _ = Engram.init(root, "ledger")
    store = engram.project_ws.store
    stamp = "2026-05-01T10:00:00.000Z"
    records: list[dict[str, Any]] = []
    copies = []
    for n in range(9):
        title = PITFALL[0] if n % 2 else PITFALL[0].upper()
        rid = f"dup{n:02d}" + "a" * 21
        copies.append(rid)
        records.append(
            {
                "id": rid,
                "kind": "pitfall",
                "title": title,
                "content": PITFALL[1] + ("  " if n % 3 else ""),
                "importance": 3 + (n == 4),
                "status": "active",
                "scope": "project",
                "project": "ledger",
                "created_at": stamp,
                "updated_at": stamp,
                "rev": 1,
            }
        )
    old = "old00" + "b" * 21
    new = "new00" + "b" * 21
    records.append(
        {
            "id": old,
            "kind": "decision",
            "title": "Store amounts as floats",
            "content": "Simple and fast.",
            "status": "active",
            "importance": 3,
            "scope": "project",
            "project": "ledger",
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
    )
    records.append(
        {
            "id": new,
            "kind": "decision",
            "title": "Store amounts as integer cents",
            "content": "Floats lose cents.",
            "status": "active",
            "importance": 4,
            "scope": "project",
            "project": "ledger",
            "links": [{"rel": "supersedes", "to": old}],
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
    )
    orphan = "orph0" + "c" * 21
    records.append(
        {
            "id": orphan,
            "kind": "fact",
            "title": "The ledger balances per currency",
            "content": "See the posting rules.",
            "status": "active",
            "importance": 3,
            "scope": "project",
            "project": "ledger",
            "links": [{"rel": "relates", "to": "gone0" + "d" * 21}, {"rel": "relates", "to": new}],
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
    )
    dead = "dead0" + "e" * 21
    records.append(
        {
            "id": dead,
            "kind": "pitfall",
            "title": "The legacy importer drops the last CSV row",
            "content": "Fixed by reading to EOF.",
            "files": ["src/legacy_import.py"],
            "status": "active",
            "importance": 3,
            "scope": "project",
            "project": "ledger",
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
    )
    keep = engram.remember(
        "Posting rules live in src/ledger.py", "Every transaction balances.", files="src/ledger.py"
    ).record
    store.put(records)
    ids = {"copies": copies, "old": old, "new": new, "orphan": orphan, "dead": dead}
    ids["keep"] = keep["id"]
    with engram:
        yield engram, ids


def _texts(engram: Engram) -> list[bytes]:
    return [canonical_line(r) for r in engram.project_ws.store.read_all()]


def test_consolidation_finds_each_mess_and_applies_without_loss(
    messy: tuple[Engram, dict[str, Any]],
) -> None:
    engram, ids = messy
    groups = {g.kind: g for g in engram.consolidate_preview()}
    assert sorted(groups["duplicate"].ids) == sorted(ids["copies"])
    assert groups["duplicate"].action == "merge"
    assert groups["superseded_active"].ids == [ids["old"]]
    assert groups["superseded_active"].action == "archive"
    assert groups["orphan"].ids == [ids["orphan"]]
    assert groups["deleted_file"].ids == [ids["dead"]]
    assert all(ids["keep"] not in g.ids for g in groups.values())

    dry = engram.consolidate_apply(dry_run=True)
    assert dry.changed > 0
    before = engram.project_ws.store.path.read_bytes()
    assert engram.project_ws.store.path.read_bytes() == before  # a dry run writes nothing

    applied = engram.consolidate_apply()
    assert applied.changed == dry.changed
    merged = [c for c in applied.changes if c.get("source") == "consolidate"]
    assert len(merged) == 1
    merged_id = merged[0]["id"]
    memory = engram.get(merged_id)
    assert {link["to"] for link in memory["links"]} == set(ids["copies"])
    for rid in ids["copies"]:
        copy = engram.get(rid)
        assert copy["status"] == "superseded" and copy["content"].startswith(PITFALL[1])
    assert engram.get(ids["old"])["status"] == "archived"
    assert engram.get(ids["dead"])["status"] == "archived"
    orphan = engram.get(ids["orphan"])
    assert orphan["links"] == [{"rel": "relates", "to": ids["new"]}]  # only the dangling link
    # The merged memory leads recall; nothing of the copies' text is gone.
    assert engram.recall("refund webhooks charge")[0].id == merged_id
    # Applying again changes nothing.
    again = engram.consolidate_apply()
    assert again.changed == 0
    assert {g.kind for g in engram.consolidate_preview()} <= {"stale"}


def test_llm_command_decides_and_a_broken_one_falls_back(
    messy: tuple[Engram, dict[str, Any]], tmp_path: Path
) -> None:
    engram, _ = messy
    script = tmp_path / "fake_llm.py"
    script.write_text(
        "import json, sys\n"
        "request = json.load(sys.stdin)\n"
        "group = request['group']\n"
        "print(json.dumps({'action': 'keep', 'target': None,"
        " 'reasoning': 'fake model keeps ' + group['kind']}))\n",
        encoding="utf-8",
    )
    # The user's own settings (ENGRAM_HOME): a committed config never runs a command.
    home = personal_dir()
    home.mkdir(parents=True, exist_ok=True)
    set_value(home, "consolidate.llm_command", f"{sys.executable} {script}")
    with Engram.open(engram.root) as fresh:
        plan = fresh.consolidate()
    decided = {r.group.kind: r for r in plan.recommendations}
    assert decided["duplicate"].decided_by == "llm"
    assert decided["duplicate"].action == "keep"
    assert "fake model keeps duplicate" in decided["duplicate"].reasoning
    script.write_text("import sys\nsys.exit(3)\n", encoding="utf-8")
    with Engram.open(engram.root) as fresh:
        plan = fresh.consolidate()
    assert all(r.decided_by == "heuristic" for r in plan.recommendations)
    assert {r.action for r in plan.recommendations} >= {"merge", "archive"}


def test_judgements_move_ranking_and_outdated_is_proposed_for_archiving(
    project: Engram,
) -> None:
    first = project.remember("Cache invalidation by version keys", "bump on deploy").record
    second = project.remember("Cache invalidation by TTL", "expire after 5 minutes").record
    order = [hit.id for hit in project.recall("cache invalidation")]
    low, high = (order[1], order[0])
    project.judge(low, verdict="useful", reason="saved an outage")
    project.judge(high, verdict="wrong", reason="we stopped doing this")
    assert [hit.id for hit in project.recall("cache invalidation")] == [low, high]
    judged = project.get(high)["judgements"][-1]
    assert (judged["verdict"], judged["score"], judged["reason"]) == (
        "wrong",
        0.0,
        "we stopped doing this",
    )
    project.judge(first["id"], verdict="outdated")
    kinds = {g.kind: g for g in project.consolidate_preview()}
    outdated = [g for g in project.consolidate_preview() if g.kind == "outdated"]
    assert {rid for g in outdated for rid in g.ids} >= {first["id"]}
    assert "outdated" in kinds
    heuristic = project.judge(second["id"], query="cache ttl expire")["judgements"][-1]
    assert heuristic["heuristic"] is True and 0.0 <= heuristic["score"] <= 1.0
    with pytest.raises(Exception, match="verdict"):
        project.judge(second["id"], verdict="great")
    with pytest.raises(Exception, match="score"):
        project.judge(second["id"], score=1.5)


def _seed_for_training(engram: Engram) -> list[str]:
    ids = []
    for n in range(4):
        ids.append(
            engram.remember(
                f"Webhook retry storm number {n}",
                "Retries in webhooks/dispatch.py without jitter overload merchants.",
                kind="pitfall",
                tags=["webhooks", "retries"],
                files=["webhooks/dispatch.py", "webhooks/retry.py"],
            ).record["id"]
        )
    return ids


def test_training_stores_insights_and_a_failing_trainer_changes_nothing(
    project: Engram, tmp_path: Path
) -> None:
    sources = _seed_for_training(project)
    report = project.train(timeout=60)
    assert report.ok, report.problems
    assert report.insights, report
    insight = project.get(report.insights[0])
    assert insight["kind"] == "insight"
    assert {link["rel"] for link in insight["links"]} == {"derived_from"}
    assert {link["to"] for link in insight["links"]} <= set(sources)
    # Training again rewrites nothing new.
    assert project.train(timeout=60).written == 0
    listed = project.insights()
    assert [r["id"] for r in listed] == report.insights[: len(listed)] or listed
    deleted = project.delete_insight(insight["id"])
    assert deleted.get("deleted_at")
    assert insight["id"] not in {r["id"] for r in project.insights()}
    assert insight["id"] not in project.train(timeout=60).insights  # stays deleted

    before = project.project_ws.store.path.read_bytes()
    crash = tmp_path / "crash.py"
    crash.write_text(
        "import json, sys\n"
        "print(json.dumps({'type': 'progress', 'stage': 'load', 'percent': 0}), flush=True)\n"
        "raise SystemExit(3)\n",
        encoding="utf-8",
    )
    failed = project.train(timeout=30, command=[sys.executable, str(crash)])
    assert not failed.ok and failed.problems
    garbage = tmp_path / "garbage.py"
    garbage.write_text("print('hello, not json')\n", encoding="utf-8")
    bad = project.train(timeout=30, command=[sys.executable, str(garbage)])
    assert not bad.ok and "line 1" in " ".join(bad.problems)
    assert project.project_ws.store.path.read_bytes() == before


def test_hygiene_through_the_cli(messy: tuple[Engram, dict[str, Any]], tmp_path: Path) -> None:
    engram, ids = messy
    root = engram.root
    preview = run_cli("consolidate", "--preview", "--json", cwd=root)
    assert preview.returncode == 0, preview.stderr
    assert {g["kind"] for g in json.loads(preview.stdout)["groups"]} >= {"duplicate", "orphan"}
    plan_file = tmp_path / "plan.json"
    made = run_cli("consolidate", "--out", str(plan_file), cwd=root)
    assert made.returncode == 0 and plan_file.exists()
    dry = run_cli("consolidate", "--plan", str(plan_file), "--dry-run", cwd=root)
    assert "would change" in dry.stdout.decode()
    done = run_cli("consolidate", "--plan", str(plan_file), "--json", cwd=root)
    assert json.loads(done.stdout)["changed"] > 0
    again = run_cli("consolidate", "--plan", str(plan_file), "--json", cwd=root)
    assert json.loads(again.stdout)["changed"] == 0
    bad = tmp_path / "bad-plan.json"
    bad.write_text('{"version": 1, "recommendations": [{"action": "explode"}]}', "utf-8")
    refused = run_cli("consolidate", "--plan", str(bad), cwd=root)
    assert refused.returncode == 1 and "error:" in refused.stderr.decode()
    judged = run_cli("judge", ids["keep"][:8], "--verdict", "useful", "--reason", "true", cwd=root)
    assert judged.returncode == 0 and "judged useful" in judged.stdout.decode()
    trained = run_cli("train", "--json", cwd=root)
    assert trained.returncode == 0, trained.stderr
    listed = run_cli("insights", "list", cwd=root)
    assert listed.returncode == 0


def test_mcp_consolidate_asks_the_clients_model_by_sampling(
    messy: tuple[Engram, dict[str, Any]],
) -> None:
    """The client's sampling callback stands in for the model a real agent would bring."""
    engram, _ = messy
    asked: list[dict[str, Any]] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        content = params.messages[0].content
        request = json.loads(getattr(content, "text", "{}"))
        asked.append(request)
        answer = {"action": "keep", "target": None, "reasoning": "the model keeps it"}
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=json.dumps(answer)),
            model="stand-in",
        )

    async def scenario() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "engram", "-C", str(engram.root), "mcp", "--tools", "all"],
        )
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, sampling_callback=sampling) as session,
        ):
            await session.initialize()
            result = await session.call_tool("consolidate", {})
            assert not result.is_error, result.content
            plan = json.loads(result.content[0].text)  # type: ignore[union-attr]
            assert plan["recommendations"]
            assert {r["decided_by"] for r in plan["recommendations"]} == {"llm"}
            judged = await session.call_tool(
                "judge", {"id": plan["recommendations"][0]["group"]["ids"][0], "verdict": "useful"}
            )
            assert not judged.is_error

    anyio.run(scenario)
    assert asked and {"group", "memories", "actions"} <= set(asked[0])


def test_saving_a_near_duplicate_names_the_memory_it_repeats(project: Engram) -> None:
    """Where the embedding model is loaded (a server), a save reports what it nearly repeats."""
    from engram.index import semantic

    if not semantic.available():
        pytest.skip("the embedding model (engram-git[semantic]) is not installed")
    first = project.remember(
        "Store user sessions in Postgres",
        "Sessions live in Postgres, not in Redis.",
        kind="decision",
    ).record
    project.recall("sessions")  # a search loads the model, as in a long-lived server
    again = project.remember(
        "Keep user sessions in Postgres",
        "Session state lives in Postgres rather than Redis.",
        kind="decision",
    )
    assert again.action == "created" and again.similar == [first["id"]]
    other = project.remember("Release notes are Markdown", "One file per version.", kind="decision")
    assert other.similar == []
