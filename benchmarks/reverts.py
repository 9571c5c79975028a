"""Count how engram's history mining reads the reverts of one git repository.

Run ``python benchmarks/reverts.py PATH [--depth N] [--list]`` with PATH a work tree or a bare
git directory. It walks the non-merge commits from HEAD (as ``engram index`` does, up to
``--depth``, default all of them), runs ``scan_history`` over them without a cache, and prints:

- revert subjects: commits whose subject engram reads as ``Revert "…"`` / ``Reapply "…"``
  (a squash merge's ``(#N)`` allowed), split into reverts and reapplies;
- how each was resolved: by its ``This reverts commit <sha>`` line, by its subject (the nearest
  earlier commit with the quoted subject: ``inferred``), or not at all (no candidate, reported);
- the old rule for comparison: the subject pattern engram used before issue 17 (the quote must
  end the line) *and* the body line; the reverts it found are the candidates it made.

Nothing here is asserted: it is a measurement to read, not part of the test suite.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Final

from dulwich.objects import Commit
from dulwich.repo import Repo

from engram.indexer.git import scan_history
from engram.indexer.gitreverts import classify, parse_revert

# The subject pattern engram used before issue 17, kept for the comparison.
OLD_REVERT_SUBJECT: Final = re.compile(r'^Revert\s+"(?P<title>.*)"\s*$')
REVERTS_LINE: Final = re.compile(
    r"^\s*This reverts commit (?P<sha>[0-9a-fA-F]{7,64})\b", re.MULTILINE
)
EVERYTHING: Final = 10**9


def messages(repo: Repo, depth: int) -> dict[str, tuple[str, str]]:
    """Return sha -> (subject, body) of the non-merge commits reachable from HEAD."""
    found: dict[str, tuple[str, str]] = {}
    for entry in repo.get_walker(max_entries=None):
        commit: Commit = entry.commit
        if len(commit.parents) > 1:
            continue
        text = commit.message.decode("utf-8", "replace")
        subject, _, body = text.partition("\n")
        found[commit.id.decode("ascii")] = (subject.strip(), body)
        if len(found) >= depth:
            break
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the revert figures of one repository."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a git work tree or a bare git directory")
    parser.add_argument("--depth", type=int, default=EVERYTHING, help="non-merge commits walked")
    parser.add_argument("--list", action="store_true", help="print the unresolved reverts")
    args = parser.parse_args(argv)

    with Repo(str(args.path)) as repo:
        commits = messages(repo, args.depth)
    started = time.perf_counter()
    scan = scan_history(args.path, depth=min(args.depth, max(1, len(commits))))
    seconds = time.perf_counter() - started

    kinds: dict[str, str] = {}
    by_body: dict[str, int] = {"revert": 0, "reapply": 0}
    old_subjects = old_found = 0
    for sha, (subject, body) in commits.items():
        parsed = parse_revert(subject)
        if parsed is not None:
            kinds[sha] = parsed[0]
            found = classify(subject, body)
            if found is not None and found[1] is not None:
                by_body[parsed[0]] += 1
        if OLD_REVERT_SUBJECT.match(subject):
            old_subjects += 1
            if REVERTS_LINE.search(body):
                old_found += 1
    unresolved = {"revert": 0, "reapply": 0}
    for sha, _ in scan.unresolved:
        unresolved[kinds.get(sha, "revert")] += 1
    total = {kind: sum(1 for value in kinds.values() if value == kind) for kind in by_body}
    reverts = [candidate for candidate in scan.candidates if candidate.kind == "revert"]
    inferred = sum(1 for candidate in reverts if candidate.inferred)
    reapplied = sum(1 for candidate in reverts if candidate.reapplied_by)

    print(f"non-merge commits walked: {scan.commits_walked} (scan {seconds:.1f} s)")
    print(
        f"revert subjects: {len(kinds)} ({total['revert']} reverts, {total['reapply']} reapplies)"
    )
    print(
        f"reverts:   by body line {by_body['revert']}, by subject (inferred) {inferred}, "
        f"unresolved {unresolved['revert']}; candidates made {len(reverts)}"
    )
    print(
        f"reapplies: by body line {by_body['reapply']}, by subject "
        f"{total['reapply'] - by_body['reapply'] - unresolved['reapply']}, "
        f"unresolved {unresolved['reapply']}; reverts marked re-applied {reapplied}"
    )
    print(
        f"old rule: {old_subjects} subjects matched its pattern, {old_found} with the body "
        f"line = {old_found} revert candidates (now {len(reverts)})"
    )
    print(f"problems: {len(scan.problems)}")
    for problem in scan.problems[:3]:
        print(f"  {problem[:160]}")
    if args.list:
        for sha, sought in scan.unresolved:
            print(f"  unresolved {sha[:12]} {kinds.get(sha, '?')}: {sought}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
