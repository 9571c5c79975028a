"""Reverts as real repositories write them (issue 17): histories replayed from fixtures.

tests/fixtures/history/*.json hold, for four public repositories that squash-merge (psf/black,
encode/httpx, pydantic/pydantic, astral-sh/uv), the subjects and revert lines of every revert
and reapply on their first-parent history and of every commit those name, and what each undid
as ``extract.py`` worked it out from the repository itself (``how``: by the body's ``This
reverts commit`` line, or by the quoted subject). Each history is replayed as a real git
repository in tmp_path (new commits, the body lines pointing at the replayed shas) and engram's
history scan must find the same thing: every revert with its target, marked inferred exactly
when only the subject named it, and every reapply on the revert it undid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram.indexer.git import scan_history
from tests.helpers.places import FIXTURES
from tests.indexer.test_indexer_git import History

FIXTURES = FIXTURES / "history"
NAMES = sorted(path.stem for path in FIXTURES.glob("*.json"))


def replay(history: History, fixture: dict[str, Any]) -> dict[str, str]:
    """Commit the fixture's commits in order; return each original sha's replayed sha."""
    new: dict[str, str] = {}
    history.commit("Initial", {"README.md": b"start\n"})
    for number, commit in enumerate(fixture["commits"]):
        lines = []
        for line in commit["lines"]:
            for old, sha in new.items():
                line = line.replace(old, sha)
            lines.append(line)
        message = commit["subject"] + ("\n\n" + "\n".join(lines) + "\n" if lines else "\n")
        files = commit["files"] or ["CHANGELOG.md"]
        changes: dict[str, bytes | None] = {
            str(path): f"{commit['sha']} {number}\n".encode() for path in files
        }
        new[commit["sha"]] = history.commit(message, changes)
    return new


def test_the_fixtures_cover_what_the_issue_names() -> None:
    """Squash-merged reverts with and without a body line, a reapply and a revert of a revert."""
    assert NAMES == ["astral-sh-uv", "encode-httpx", "psf-black", "pydantic-pydantic"]
    expected = [e for name in NAMES for e in load(name)["expected"]]
    subjects = {c["sha"]: c["subject"] for n in NAMES for c in load(n)["commits"]}
    assert sum(e["how"] == "subject" for e in expected) >= 30  # no "This reverts commit"
    assert sum(e["how"] == "body" for e in expected) >= 30
    assert sum(e["kind"] == "reapply" for e in expected) >= 2
    assert any(subjects[e["commit"]].startswith('Revert "Revert "') for e in expected)
    assert any(subjects[e["commit"]].endswith(')" (#4893)') is False for e in expected)


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))
    return data


@pytest.mark.parametrize("name", NAMES)
def test_every_revert_of_a_real_history_is_found(tmp_path: Path, name: str) -> None:
    fixture = load(name)
    history = History(tmp_path / "repo")
    try:
        new = replay(history, fixture)
        result = scan_history(history.root, depth=len(fixture["commits"]) + 1)
    finally:
        history.close()
    found = {candidate.sha: candidate for candidate in result.candidates}
    subjects = {c["sha"]: c["subject"] for c in fixture["commits"]}
    # A reapply, or a revert of a revert, brings the change back: it marks the revert it undid.
    undoing = [e for e in fixture["expected"] if reapplies(e, subjects)]
    reapplied = {new[e["target"]]: new[e["commit"]] for e in undoing}
    for entry in fixture["expected"]:
        sha, what = new[entry["commit"]], subjects[entry["commit"]]
        if entry in undoing:
            assert sha not in found, what  # no pitfall of its own
            continue
        if entry["target"] is None:
            assert sha not in found, what  # names no commit there is: nothing to say
            continue
        assert sha in found, f"{what!r} was not seen as a revert"
        candidate = found[sha]
        assert candidate.kind == "revert", what
        assert candidate.reverted_sha == new[entry["target"]], what
        assert candidate.inferred is (entry["how"] == "subject"), what
        assert candidate.reapplied_by == reapplied.get(sha), what
    reverts = [e for e in fixture["expected"] if e["target"] and e not in undoing]
    assert len(found) == len(reverts)  # and nothing else of these histories is a revert


def reapplies(entry: dict[str, Any], subjects: dict[str, str]) -> bool:
    """Say whether a fixture's revert or reapply brings back a change a revert took out."""
    if entry["kind"] == "reapply":
        return True
    return entry["target"] is not None and subjects[entry["target"]].startswith('Revert "')
