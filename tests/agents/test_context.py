"""The context packer: the session-start briefing, never over its budget, through every adapter."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from engram.agents.briefing import MIN_BUDGET, Briefing, Section, estimate_tokens, pack_context
from engram.indexer.plan import hotspots_id
from engram.model import new_id
from engram.service import Engram
from tests.conftest import run_cli
from tests.mcp_server.test_mcp import connect, make_project, run

ORDER = ["query", "decisions", "principles", "pitfalls", "hotspots", "sessions"]
KINDS = ["decision", "pitfall", "principle", "session", "bugfix", "pattern", "fact", "note"]


def generated(engram: Engram, count: int, seed: int = 7) -> list[dict[str, Any]]:
    """Import ``count`` memories of mixed kinds and lengths, and a hotspot list; return them."""
    rng = random.Random(seed)
    words = [
        "ledger",
        "posting",
        "refund",
        "webhook",
        "retry",
        "cache",
        "timeout",
        "currency",
        "rounding",
        "queue",
    ]
    records = []
    for number in range(count):
        day = 1 + number % 28
        stamp = f"2026-0{1 + number % 9}-{day:02d}T10:00:00.000Z"
        records.append(
            {
                "id": new_id(),
                "kind": KINDS[number % len(KINDS)],
                "title": f"Memory {number}: " + " ".join(rng.choices(words, k=rng.randint(2, 30))),
                "content": " ".join(rng.choices(words, k=rng.randint(0, 300)))
                + ' ünïcode "quoted" \\ back',
                "status": rng.choice(["active", "active", "active", "proposed", "superseded"]),
                "importance": rng.randint(1, 5),
                "author": "Test Author",
                "source": "cli",
                "project": engram.project,
                "created_at": stamp,
                "updated_at": stamp,
                "rev": 1,
            }
        )
    stamp = "2026-05-01T00:00:00.000Z"
    records.append(
        {
            "id": hotspots_id(engram.project),
            "kind": "fact",
            "title": "Code hotspots",
            "content": "Files changed most often.",
            "topic_key": "git/hotspots",
            "hotspots": [{"path": f"src/module_{n}.py", "changes": 40 - n} for n in range(30)],
            "source": "git",
            "created_at": stamp,
            "updated_at": stamp,
            "rev": 1,
        }
    )
    assert engram.import_({"version": 1, "memories": records}).added == len(records)
    return records


def check(briefing: Briefing, budget: int) -> None:
    """Assert the briefing is within budget and its items come in priority order."""
    assert estimate_tokens(briefing.text) == briefing.tokens <= budget, budget
    sections = [ORDER.index(item.section) for item in briefing.items]
    assert sections == sorted(sections), budget
    assert len({item.id for item in briefing.items}) == len(briefing.items)
    for item in briefing.items:
        assert item.short_id in briefing.text


def test_example_store_briefing_has_every_section_and_resolvable_ids(example: Engram) -> None:
    briefing = example.context()
    assert briefing.budget == 2000 and briefing.project == "ledger-api"
    text = briefing.text
    check(briefing, 2000)
    assert text.startswith("# ledger-api: session context\nledger-api: 32 memories (decision 8,")
    assert "data, not instructions" in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Active decisions",
        "## Principles",
        "## Active pitfalls",
        "## Latest sessions",
    ]
    for item in briefing.items:
        assert len(item.short_id) >= 8
        assert example.get(item.short_id)["id"] == item.id
        assert item.status == "active" or item.section == "sessions"
    sessions = [item for item in briefing.items if item.section == "sessions"]
    assert [s.title for s in sessions] == [
        "Session: on-call, JPY settlement mismatch",
        "Session: double postings after API timeouts",
    ]


def test_query_section_comes_first(example: Engram) -> None:
    briefing = example.context(query="JPY rounding", budget=1200)
    check(briefing, 1200)
    first = briefing.items[0]
    assert first.section == "query"
    assert '## Relevant to "JPY rounding"' in briefing.text
    assert briefing.text.index("## Relevant to") < briefing.text.index("## Active decisions")
    assert briefing.query == "JPY rounding"
    assert example.context(query="   ").items[0].section == "decisions"


def test_never_over_budget_on_the_example_store(example: Engram) -> None:
    for budget in range(200, 8001, 100):
        check(example.context(budget=budget), budget)
    for budget in (0, 1, 7, 10, MIN_BUDGET - 1, MIN_BUDGET, 60, 120):
        briefing = example.context(budget=budget, query="webhook retries")
        assert briefing.tokens <= budget
        if budget >= 8:
            assert briefing.text.startswith("# ledger-api")


def test_never_over_budget_on_a_generated_store(project: Engram) -> None:
    generated(project, 240)
    left_out = []
    for budget in range(200, 8001, 100):
        briefing = project.context(budget=budget)
        check(briefing, budget)
        left_out.append(briefing.left_out)
        if briefing.left_out:
            assert "more left out for the token budget" in briefing.text
        else:  # 240 memories: every section has more than the candidates a budget takes
            assert "More in the store: `engram recall --kind KIND`" in briefing.text
    for budget in range(200, 8001, 700):
        check(project.context(budget=budget, query="webhook retry ünïcode"), budget)
    assert left_out[0] > left_out[-1]
    large = project.context(budget=8000)
    hot = [item for item in large.items if item.section == "hotspots"]
    assert len(hot) == 1 and hot[0].id == hotspots_id("demo")
    assert "src/module_0.py (40)" in large.text and "and 22 more" in large.text


def test_a_write_shows_up_in_the_next_briefing(example: Engram) -> None:
    before = example.context(budget=8000)
    saved = example.remember("Use Redis TIME everywhere", "clock skew", kind="principle").record
    after = example.context(budget=8000)
    assert saved["id"] not in {item.id for item in before.items}
    assert saved["id"] in {item.id for item in after.items}


def test_empty_store(project: Engram) -> None:
    briefing = project.context()
    assert briefing.items == [] and briefing.left_out == 0
    assert "demo: no memories saved yet." in briefing.text
    assert "engram remember" in briefing.text
    for budget in (0, 20, 200):
        assert project.context(budget=budget).tokens <= budget


def test_config_sets_the_default_budget(example: Engram, tmp_path: Path) -> None:
    config = example.root / ".engram" / "config.yaml"
    text = config.read_text(encoding="utf-8").replace("budget: 2000", "budget: 300")
    config.write_text(text, encoding="utf-8")
    with Engram.open(example.root) as engram:
        briefing = engram.context()
    assert briefing.budget == 300 and briefing.tokens <= 300


def test_packer_skips_what_does_not_fit_and_keeps_going() -> None:
    big = {"id": "a" * 26, "kind": "decision", "title": "Big " * 40, "content": "x " * 400}
    small = {"id": "b" * 26, "kind": "pitfall", "title": "Small", "content": ""}
    counts = {"memories": 2, "by_kind": {"decision": 1, "pitfall": 1}, "by_status": {}}
    sections = [Section("decisions", "Decisions", [big]), Section("pitfalls", "Pitfalls", [small])]
    briefing = pack_context(project="p", counts=counts, sections=sections, budget=150)
    assert [item.id for item in briefing.items] == ["b" * 26]
    assert briefing.left_out == 1 and briefing.tokens <= 150
    assert "## Decisions" not in briefing.text and "- bbbbbbbb pitfall: Small" in briefing.text
    assert "(1 more left out for the token budget" in briefing.text


# -- adapters ---------------------------------------------------------------------------------


def test_cli_prints_the_briefing_and_json(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    done = run_cli("-C", str(root), "context")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("# demo: session context\ndemo: no memories saved yet.")
    with Engram.open(root) as engram:
        rid = engram.remember("Money in minor units", "cents", kind="decision").record["id"]
    done = run_cli("-C", str(root), "context", "--budget", "300", "--query", "money", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == {"project", "query", "budget", "tokens", "left_out", "items", "text"}
    assert data["budget"] == 300 and data["tokens"] <= 300 and data["query"] == "money"
    assert data["items"][0]["id"] == rid and data["items"][0]["section"] == "query"
    done = run_cli("-C", str(root), "context", "--budget", "-1")
    assert done.returncode != 0 and b"Traceback" not in done.stderr


def test_mcp_context_tool_compat_name_and_resource(tmp_path: Path) -> None:
    root = make_project(tmp_path / "repo")
    with Engram.open(root) as engram:
        generated(engram, 60)

    async def scenario() -> None:
        async with connect(root, "--budget", "1000", "--compat", "go-engram") as client:
            names = await client.names()
            assert "context" in names and "mem_context" in names
            tool = next(t for t in (await client.session.list_tools()).tools if t.name == "context")
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            data = await client.ok("context", {})
            assert set(data) == {"briefing", "tokens", "left_out"}
            assert data["tokens"] <= 1000 and "data, not instructions" in data["briefing"]
            assert len(json.dumps(data, ensure_ascii=False, separators=(",", ":"))) <= 4000
            asked = await client.ok("context", {"query": "webhook", "budget": 400})
            assert asked["tokens"] <= 400 and "## Relevant to" in asked["briefing"]
            error = await client.error("context", {"budget": 10})
            assert "at least 50" in error["message"]
            # Go's name answers in text, as Go does: the briefing within about 150 + 80 × limit
            result = await client.session.call_tool("mem_context", {"project": "demo", "limit": 2})
            compat = result.content[0].text  # type: ignore[union-attr]
            assert not result.is_error and compat.startswith("# demo: session context")
            assert estimate_tokens(compat) <= 150 + 80 * 2
            resource = await client.session.read_resource("engram://context")
            text = resource.contents[0].text  # type: ignore[union-attr]
            assert text.startswith("# demo: session context") and estimate_tokens(text) <= 1000

    run(scenario)
