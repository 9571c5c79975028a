"""What a walk's window adds up to: changes counted per path, hotspots, and the ``GitScan``.

This module owns ``Changeset`` (what one commit changed), ``count_changes`` (renames followed,
deletions noted), ``assemble`` (hotspots picked, candidates sorted, reapplies folded into the
reverts they undid) and the sentences for what the walk could not see. It reads no repository
and writes nothing; ``engram.indexer.git`` walks the history and calls in here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from engram.indexer.gitreverts import Candidate, shorten

_UNRESOLVED_SHOWN: Final = 5

# What one commit changed: (added or modified paths, deleted paths, [old, new] renames).
Changeset = tuple[list[str], list[str], list[list[str]]]


@dataclass
class GitScan:
    """What a walk of the history found; ``problems`` says what kept it from seeing more."""

    head: str | None
    commits_walked: int
    changes: dict[str, int]
    hotspots: list[tuple[str, int]]
    candidates: list[Candidate]
    problems: list[str]
    unchanged: bool
    # Reverts whose quoted subject names no earlier commit in the window: (sha, subject sought).
    unresolved: list[tuple[str, str]] = field(default_factory=list)


def count_changes(changesets: Iterable[Changeset]) -> tuple[dict[str, int], set[str]]:
    """Count changes per path over changesets, newest first; return counts and deleted paths."""
    counts: dict[str, int] = {}
    alias: dict[str, str] = {}  # an older name -> the name it was renamed to since
    seen: set[str] = set()
    gone: set[str] = set()
    get = alias.get
    for touched, deleted, renamed in changesets:
        for old, new in renamed:
            name = get(new, new)
            counts[name] = counts.get(name, 0) + 1
            seen.add(name)
            alias[old] = name  # older changes to the old path count on the new one
        for path in touched:
            name = get(path, path)
            counts[name] = counts.get(name, 0) + 1
            seen.add(name)
        for path in deleted:
            name = get(path, path)
            counts[name] = counts.get(name, 0) + 1
            if name not in seen:
                gone.add(name)  # its newest change in the window deleted it
                seen.add(name)
    return counts, gone


def assemble(
    head: str,
    window: Sequence[str],
    counts: dict[str, int],
    gone: set[str],
    candidates: list[Candidate],
    threshold: int,
    problems: list[str],
    unchanged: bool,
    unresolved: list[tuple[str, str]],
) -> GitScan:
    """Put counts and candidates together into a GitScan: hotspots picked, all sorted.

    A reapply is no candidate of its own: it marks the revert it undid as re-applied.
    """
    hotspots = [
        (path, count) for path, count in counts.items() if count >= threshold and path not in gone
    ]
    hotspots.sort(key=lambda item: (-item[1], item[0]))
    candidates.sort(key=lambda candidate: (candidate.date, candidate.sha))
    reapplied: dict[str, str] = {}
    for candidate in candidates:
        if candidate.kind == "reapply" and candidate.reverted_sha is not None:
            reapplied.setdefault(candidate.reverted_sha, candidate.sha)  # the first one
    kept: list[Candidate] = []
    for candidate in candidates:
        if candidate.kind == "reapply":
            continue
        by = reapplied.get(candidate.sha)
        if by is not None and candidate.kind == "revert":
            content = candidate.content + f"\n- re-applied by: {by}"
            candidate = replace(candidate, reapplied_by=by, content=content)
        kept.append(candidate)
    if unresolved:
        problems = [*problems, _unresolved_problem(unresolved, len(window))]
    return GitScan(
        head=head,
        commits_walked=len(window),
        changes=counts,
        hotspots=hotspots,
        candidates=kept,
        problems=problems,
        unchanged=unchanged,
        unresolved=unresolved,
    )


def _unresolved_problem(unresolved: Sequence[tuple[str, str]], walked: int) -> str:
    """Say which reverts named no earlier commit, so that no candidate was made of them."""
    shown = "; ".join(
        f'{sha[:12]} ("{shorten(sought, 80)}")' for sha, sought in unresolved[:_UNRESOLVED_SHOWN]
    )
    more = len(unresolved) - _UNRESOLVED_SHOWN
    return (
        f"{len(unresolved)} revert(s) without a `This reverts commit` line quote a subject no "
        f"earlier commit of the last {walked} has, so no pitfall candidate was made: {shown}"
        + (f"; … {more} more" if more > 0 else "")
        + " (a larger indexer.git_depth may find them)"
    )


def shallow_problem(walked: int) -> str:
    """Say that the window reached a shallow clone's boundary."""
    return (
        f"shallow clone: history stops at {walked} commits; hotspots count only "
        "what is here (run `git fetch --unshallow` for the rest)"
    )
