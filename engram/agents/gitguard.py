"""The memory at git's doors: ``engram check --staged`` and ``engram review-pr BASE..HEAD``.

``check_staged`` is what the pre-commit hook runs: the findings of ``engram check`` for the
staged files, and the blockers (``engram.sync.gitguard``) that fail the commit.
``review_range`` renders the Markdown a CI job posts on a pull request: the memories the range
adds, changes or forgets (the readable diff of ``.engram/memories.jsonl``), and the pitfalls and
decisions about the files the range changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.agents.check import Findings, check_files
from engram.sync.gitguard import (
    Blocker,
    blocking_pitfalls,
    range_files,
    reverts_back,
    staged_files,
)

if TYPE_CHECKING:
    from engram.model import Record
    from engram.project import Project
    from engram.sync.gitdiff import MemoryDiff

__all__ = ["PullRequestReview", "StagedCheck", "check_staged", "review_range"]

STORE_PREFIX: Final = ".engram/"
MAX_FILES_SHOWN: Final = 200  # a range changing more files checks the first ones, says so


@dataclass
class StagedCheck:
    """What the memory says about a commit about to be made, and what blocks it."""

    findings: Findings
    blockers: list[Blocker] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.findings.files,
            "findings": self.findings.to_dict(),
            "blockers": [b.to_dict() for b in self.blockers],
        }


@dataclass
class PullRequestReview:
    """The memory's comment on a range of commits."""

    range: str
    files: list[str]
    diff: MemoryDiff
    findings: Findings | None
    markdown: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "range": self.range,
            "files": self.files,
            "memory_changes": self.diff.to_dict(),
            "findings": self.findings.to_dict() if self.findings is not None else None,
            "markdown": self.markdown,
        }


def _citing(here: Project, files: list[str]) -> list[Record]:
    """Return the memories of every store that cite one of ``files`` (exact, folder, glob)."""
    found: list[Record] = []
    if not files:
        return found
    for ws in here.workspaces():
        ws.index.refresh()
        records = ws.index.records
        paths = records.matching_paths(files)
        if paths:
            found += records.get_many(sorted(records.citing_ids(paths))).values()
    return found


def check_staged(here: Project, *, budget: int | None = None) -> StagedCheck:
    """Return the findings for the staged files and the blockers of the commit."""
    staged = staged_files(here.root)
    files = [path for path in staged if not path.startswith(STORE_PREFIX)]
    # The staged change is the one being committed: it makes no memory about the file stale.
    findings = check_files(here, files, budget=budget, own_edits=files)
    records = _citing(here, files)
    blockers = blocking_pitfalls(records, files)
    blockers += reverts_back(here.root, records, {p: staged[p] for p in files})
    return StagedCheck(findings, blockers)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _render(spec: str, files: list[str], diff: MemoryDiff, findings: Findings | None) -> str:
    lines = [f"### engram: the memory on `{spec}`", ""]
    if diff.changes:
        lines += [
            f"**Memory changes** ({diff.count('added')} added, {diff.count('changed')} changed, "
            f"{diff.count('forgotten')} forgotten):",
            "",
            "| change | kind | memory | fields |",
            "| --- | --- | --- | --- |",
        ]
        for change in diff.changes:
            fields = ", ".join(f.field for f in change.fields) if change.change == "changed" else ""
            lines.append(
                f"| {change.change} | {change.kind} | {_cell(change.title)} "
                f"(`{change.id[:12]}`) | {_cell(fields)} |"
            )
        lines.append("")
    else:
        lines += ["No memory changes in this range.", ""]
    if diff.problems:
        lines += [f"{len(diff.problems)} line(s) of memories.jsonl did not parse.", ""]
    shown = [f for f in (findings.findings if findings else []) if f.reason in _ABOUT]
    if shown:
        lines += [f"**What the memory knows about the {len(files)} changed file(s):**", ""]
        for item in shown:
            lines.append(
                f"- **{_ABOUT[item.reason]}**: {_cell(item.title)} (`{item.id[:12]}`)"
                + (f" — {_cell(item.note)}" if item.note else "")
            )
        lines.append("")
    elif files:
        lines += [f"No pitfalls or decisions about the {len(files)} changed file(s).", ""]
    return "\n".join(lines).rstrip() + "\n"


_ABOUT: Final = {
    "pitfall": "Pitfall",
    "decision": "Decision",
    "candidate": "Reverted before",
    "superseded": "Superseded decision",
}


def review_range(here: Project, spec: str, store_file: Path) -> PullRequestReview:
    """Return the pull-request comment for ``spec`` (BASE..HEAD)."""
    from engram.project.git import diff

    files = [f for f in range_files(here.root, spec) if not f.startswith(STORE_PREFIX)]
    memory = diff(store_file, spec)
    findings = check_files(here, files[:MAX_FILES_SHOWN]) if files else None
    return PullRequestReview(spec, files, memory, findings, _render(spec, files, memory, findings))
