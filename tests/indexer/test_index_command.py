"""`engram index` / `engram init` end to end: ADRs and a real git history become memories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engram.__main__ import app
from engram.indexer.plan import adr_id, candidate_id, hotspots_id
from engram.service import Engram

ADR_1 = """# 1. Keep sessions in Redis

## Status

Superseded by [ADR-0002](0002-keep-sessions-in-postgres.md)

## Context

Sessions must survive a deploy.

## Decision

Store sessions in Redis with a 24 h TTL, see `app/sessions.py`.

## Consequences

One more service to run.
"""

ADR_2 = """# 2. Keep sessions in Postgres

## Status

Accepted

## Context

Redis lost sessions on failover.

## Decision

Sessions are rows in Postgres, written in `app/sessions.py`.

## Consequences

No Redis for sessions.
"""


def commit(root: Path, message: str, files: dict[str, str], when: int) -> str:
    """Write files and commit them with dulwich; return the commit sha."""
    from dulwich import porcelain

    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    porcelain.add(str(root), paths=[str(root / name) for name in files])
    sha = porcelain.commit(
        str(root),
        message=message.encode(),
        author=b"Dev One <dev@example.com>",
        committer=b"Dev One <dev@example.com>",
        author_timestamp=when,
        commit_timestamp=when,
        author_timezone=0,
        commit_timezone=0,
    )
    return sha.decode("ascii")


def build_history(root: Path) -> Path:
    """Make ``root`` a git repository with ADRs, a hotspot changed 9 times, and a revert."""
    from dulwich import porcelain

    root.mkdir()
    porcelain.init(str(root)).close()
    when = 1_700_000_000
    commit(
        root,
        "Add ADRs",
        {
            "docs/adr/0001-keep-sessions-in-redis.md": ADR_1,
            "docs/adr/0002-keep-sessions-in-postgres.md": ADR_2,
        },
        when,
    )
    for n in range(9):
        when += 60
        commit(root, f"Tune sessions {n}", {"app/sessions.py": f"TTL = {n}\n"}, when)
    when += 60
    pooled = commit(root, "Use a connection pool in the worker", {"app/worker.py": "pool\n"}, when)
    when += 60
    commit(
        root,
        f'Revert "Use a connection pool in the worker"\n\nThis reverts commit {pooled}.\n',
        {"app/worker.py": "no pool\n"},
        when,
    )
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with ADRs, a hotspot changed 9 times, and a revert."""
    return build_history(tmp_path / "svc")


def test_index_turns_adrs_and_history_into_memories(repo: Path) -> None:
    engram, _ = Engram.init(repo, "svc")
    with engram:
        summary = engram.index_project()
        assert summary.adr is not None and summary.git is not None
        assert summary.adr.found == 2 and summary.adr.created == 2
        old = engram.get(adr_id("docs/adr/0001-keep-sessions-in-redis.md"))
        new = engram.get(adr_id("docs/adr/0002-keep-sessions-in-postgres.md"))
        assert old["status"] == "superseded" and new["status"] == "active"
        assert new["kind"] == "decision" and new["source"].startswith("adr:docs/adr/0002")
        assert {"rel": "supersedes", "to": old["id"]} in new["links"]
        assert "app/sessions.py" in new["files"]
        hot = engram.get(hotspots_id("svc"))
        assert hot["hotspots"][0] == {"path": "app/sessions.py", "changes": 9}
        assert hot["topic_key"] == "git/hotspots"
        assert summary.git.commits == 12
        candidates = [
            hit.record
            for hit in engram.recall("", kinds=["pitfall"], statuses=["proposed"], limit=20)
        ]
        assert len(candidates) == 1
        candidate = candidates[0]
        assert candidate["source"].startswith("git:") and candidate["files"] == ["app/worker.py"]
        assert candidate["id"] == candidate_id(candidate["source"][4:])
        # The decision ranks first for a question about it.
        assert engram.recall("where do sessions live")[0].id == new["id"]


def test_reindex_is_idempotent_and_follows_edits(repo: Path) -> None:
    engram, _ = Engram.init(repo, "svc")
    with engram:
        engram.index_project()
        before = engram.project_ws.store.path.read_bytes()
        again = engram.index_project()
        assert again.writes == 0 and again.git is not None and again.git.unchanged
        assert engram.project_ws.store.path.read_bytes() == before
        # A person confirms the candidate: re-indexing must not undo it.
        (candidate,) = engram.recall("", kinds=["pitfall"], limit=5)
        engram.update(candidate.id, status="active")
        path2 = repo / "docs/adr/0002-keep-sessions-in-postgres.md"
        path2.write_text(ADR_2.replace("Redis lost sessions", "Redis dropped sessions"), "utf-8")
        (repo / "docs/adr/0001-keep-sessions-in-redis.md").unlink()
        summary = engram.index_project()
        assert summary.adr is not None
        assert (summary.adr.updated, summary.adr.archived) == (1, 1)
        edited = engram.get(adr_id(str(path2.relative_to(repo))))
        assert edited["rev"] == 2 and "dropped" in edited["content"]
        assert "lost" in edited["history"][-1]["content"]
        gone = engram.get(adr_id("docs/adr/0001-keep-sessions-in-redis.md"))
        assert gone["status"] == "archived"
        assert engram.get(candidate.id)["status"] == "active"


def test_dry_run_writes_nothing(repo: Path) -> None:
    engram, _ = Engram.init(repo, "svc")
    with engram:
        engram.project_ws.store.path.write_bytes(b"")
        summary = engram.index_project(dry_run=True)
        assert summary.writes > 0
        assert engram.project_ws.store.path.read_bytes() == b""


def test_cli_init_and_index_outside_git(tmp_path: Path) -> None:
    runner = CliRunner()
    plain = tmp_path / "plain"
    plain.mkdir()
    result = runner.invoke(app, ["-C", str(plain), "init"])
    assert result.exit_code == 0, result.output
    assert "git: nothing to mine" in result.stdout
    assert "note: not a git repository" in result.stdout
    result = runner.invoke(app, ["-C", str(plain), "index", "--git", "--json"])
    data = json.loads(result.stdout)
    assert data["git"]["head"] is None and data["git"]["problems"]
    assert "adr" not in data


def test_cli_index_summary(repo: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["-C", str(repo), "init"])
    assert result.exit_code == 0, result.output
    assert "ADRs (docs/adr): 2 found, 2 new" in result.stdout
    assert "git: 12 commits walked, 1 hotspot, 1 new pitfall candidate " in result.stdout
    result = runner.invoke(app, ["-C", str(repo), "index"])
    assert "git: no new commits since" in result.stdout
    assert result.stdout.rstrip().endswith("wrote 0 memories")
    result = runner.invoke(app, ["-C", str(repo), "index", "--dry-run"])
    assert result.stdout.rstrip().endswith("would write 0 memories")


def test_an_adr_superseded_by_another_is_superseded_even_if_it_says_accepted(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / "docs/adr").mkdir(parents=True)
    (root / "docs/adr/0001-use-rest.md").write_text(
        "# 1. Use REST\n\n## Status\n\nAccepted\n\n## Decision\n\nREST everywhere.\n", "utf-8"
    )
    (root / "docs/adr/0002-use-grpc.md").write_text(
        "# 2. Use gRPC\n\n## Status\n\nAccepted\n\nSupersedes [ADR-0001](0001-use-rest.md)\n\n"
        "## Decision\n\ngRPC between services.\n",
        "utf-8",
    )
    engram, _ = Engram.init(root, "p")
    with engram:
        engram.index_project(git=False)
        assert engram.get(adr_id("docs/adr/0001-use-rest.md"))["status"] == "superseded"
        grpc = engram.get(adr_id("docs/adr/0002-use-grpc.md"))
        assert grpc["status"] == "active"
        assert grpc["links"] == [{"rel": "supersedes", "to": adr_id("docs/adr/0001-use-rest.md")}]
