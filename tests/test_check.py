"""`engram check` before an edit: file matches, hotspots, reverts, superseded decisions, budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram.check import Findings
from engram.context import estimate_tokens
from engram.indexer.plan import adr_id, hotspots_id
from engram.service import Engram
from tests.conftest import run_cli
from tests.test_index_command import build_history
from tests.test_mcp import connect, make_project, run


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """A git repo with superseded ADRs, a hotspot changed 9 times and a revert, indexed."""
    root = build_history(tmp_path / "svc")
    engram, _ = Engram.init(root, "svc")
    with engram:
        engram.index_project()
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "repo")


def save(root: Path, title: str, kind: str, files: list[str]) -> str:
    with Engram.open(root) as engram:
        return engram.remember(title, "body", kind=kind, files=files).record["id"]


def ids(result: Findings) -> list[str]:
    return [f.id for f in result.findings]


def test_exact_folder_and_glob_matches(project: Path) -> None:
    exact = save(project, "Never log the raw token", "pitfall", ["src/auth/token.py"])
    folder = save(project, "Auth goes through one middleware", "decision", ["src/auth"])
    glob = save(project, "Tests mock the clock", "pitfall", ["src/**/*_clock.py"])
    other = save(project, "Billing rounds half-even", "decision", ["src/billing.py"])
    with Engram.open(project) as engram:
        token = ids(engram.check(["src/auth/token.py"]))
        assert exact in token and folder in token and other not in token
        # Active pitfalls come before active decisions.
        assert token.index(exact) < token.index(folder)
        assert glob in ids(engram.check("src/time/fake_clock.py"))
        both = ids(engram.check("src/auth/token.py,src/billing.py"))
        assert {exact, folder, other} <= set(both)
        text = engram.check(["src/auth/token.py"]).text
        assert exact[:8] in text and "Never log the raw token" in text


def test_hotspot_revert_candidate_and_superseded_decision(indexed: Path) -> None:
    with Engram.open(indexed) as engram:
        result = engram.check(["app/sessions.py"])
        reasons = {f.reason: f for f in result.findings}
        assert reasons["hotspot"].id == hotspots_id("svc")
        assert "app/sessions.py changed 9 times in the last 12 commits" in result.text
        assert reasons["decision"].id == adr_id("docs/adr/0002-keep-sessions-in-postgres.md")
        old = reasons["superseded"]
        assert old.id == adr_id("docs/adr/0001-keep-sessions-in-redis.md")
        assert "superseded by" in old.note
        assert engram.short_ids([reasons["decision"].id])[reasons["decision"].id] in (old.note)
        worker = engram.check(["app/worker.py"])
        assert [f.reason for f in worker.findings] == ["candidate"]
        assert "revert" in worker.findings[0].note


def test_text_adds_recall_hits(indexed: Path) -> None:
    with Engram.open(indexed) as engram:
        plain = engram.check(["README.md"])
        assert plain.findings == []
        planned = engram.check(["README.md"], text="connection pool in the worker")
        assert [f.reason for f in planned.findings][:1] == ["recall"]


def test_never_over_budget(indexed: Path) -> None:
    for n in range(20):
        save(indexed, f"Sessions pitfall number {n} " + "x" * 80, "pitfall", ["app"])
    with Engram.open(indexed) as engram:
        for budget in (0, 10, 30, 60, 100, 200, 400, 800, 3000):
            result = engram.check(["app/sessions.py"], text="sessions", budget=budget)
            assert estimate_tokens(result.text) <= budget
            assert result.tokens <= budget
        small = engram.check(["app/sessions.py"], budget=100)
        assert small.left_out > 0 and small.findings


def test_cli_empty_answer_exit_zero_and_json(project: Path) -> None:
    done = run_cli("-C", str(project), "check", "--files", "nowhere/file.py")
    assert done.returncode == 0, done.stderr
    assert "nothing known" in done.stdout.decode()
    rid = save(project, "Keep the parser pure", "decision", ["src/parse.py"])
    done = run_cli(
        "-C", str(project), "check", "-f", "src/parse.py", "-f", "x.py", "--budget", "200", "--json"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [f["id"] for f in data["findings"]] == [rid] and data["tokens"] <= 200


def test_mcp_check_through_a_stdio_session(project: Path) -> None:
    rid = save(project, "Never log the raw token", "pitfall", ["src/auth/*.py"])

    async def scenario() -> None:
        async with connect(project) as client:
            data = await client.ok("check", {"files": ["src/auth/token.py"]})
            assert [f["short_id"] for f in data["findings"]] == [rid[:8]]
            assert "Never log the raw token" in data["text"]
            empty = await client.ok("check", {"files": ["docs/x.md"], "text": "zzz"})
            assert empty["findings"] == [] and "nothing known" in empty["text"]

    run(scenario)
