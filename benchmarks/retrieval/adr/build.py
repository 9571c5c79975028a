"""Build the ADR retrieval set's memories.jsonl from real public ADRs, through engram's indexer.

Two steps, both offline once the sources are on disk:

``python benchmarks/retrieval/adr/build.py extract OWNER/NAME=GIT_DIR ...``
    copies each source's ADR files, at the commit pinned in ``SOURCES`` below (and listed in
    SOURCES.md), out of a clone of that repository into ``docs/<set>/``. ``GIT_DIR`` is any
    clone or bare git directory that has the commit.

``python benchmarks/retrieval/adr/build.py [--docs DIR] [--out FILE]``
    puts ``docs/<set>/*.md`` under ``docs/adr/<set>/`` of a scratch git repository, runs
    ``engram init --project adr-set`` there (the path a user takes: init reads the ADR folders
    and mines git), and writes the decision memories it made (``source: adr:...``) to
    ``memories.jsonl``. A memory's id is derived from its ADR's path, so the queries' labels
    survive a rebuild; the time of the run, which init writes as every ``updated_at`` (and as
    the ``created_at`` of an ADR whose date it cannot read), is replaced by the fixed ``STAMP``
    so that the same files give the same bytes. The raw ADRs and memories.jsonl are other
    projects' text and stay out of this repository's commits; queries.jsonl labels them by id.

The scratch repository and its engram home live in a temporary folder, removed afterwards; no
personal store is touched (``ENGRAM_HOME`` points inside it, ``ENGRAM_DAEMON=off``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
PROJECT: Final = "adr-set"
# The build time written into the memories: after every ADR's date (one says 2026-10-27).
STAMP: Final = "2026-11-01T00:00:00.000Z"


@dataclass(frozen=True)
class Source:
    """One public repository the set takes ADRs from."""

    repo: str  # owner/name on GitHub
    commit: str
    folder: str  # the repository's ADR folder
    name: str  # the set's folder under docs/ (and docs/adr/ in the scratch repository)


SOURCES: Final = (
    Source(
        "alphagov/govuk-aws",
        "81ee9f6e91fd8692fbf751ecf980c671c13aa3c0",
        "docs/architecture/decisions",
        "govuk-aws",
    ),
    Source(
        "alphagov/govuk-infrastructure",
        "d9b7454f26061e8af95753fa688cdf3d86a6c3ee",
        "docs/architecture/decisions",
        "govuk-infrastructure",
    ),
    Source(
        "ministryofjustice/cloud-platform",
        "7f879f3af6cd39f8711ec99ee3b4d2163ff54024",
        "architecture-decision-record",
        "cloud-platform",
    ),
)


def _git(git_dir: Path, *args: str) -> bytes:
    """Run git on a git directory and return its output."""
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def extract(pairs: Sequence[str], docs: Path) -> int:
    """Copy each named source's ADR Markdown files at its pinned commit into docs/<set>/."""
    by_repo = {source.repo: source for source in SOURCES}
    for pair in pairs:
        repo, _, where = pair.partition("=")
        if repo not in by_repo or not where:
            print(f"expected OWNER/NAME=GIT_DIR with one of: {', '.join(by_repo)}")
            return 2
        source = by_repo[repo]
        git_dir = Path(where)
        if (git_dir / ".git").is_dir():
            git_dir = git_dir / ".git"
        listing = _git(git_dir, "ls-tree", "--name-only", f"{source.commit}:{source.folder}")
        target = docs / source.name
        target.mkdir(parents=True, exist_ok=True)
        count = 0
        for name in listing.decode("utf-8").splitlines():
            if not name.lower().endswith(".md"):
                continue
            blob = _git(git_dir, "show", f"{source.commit}:{source.folder}/{name}")
            (target / name).write_bytes(blob)
            count += 1
        print(f"{repo}@{source.commit[:12]}: {count} Markdown files -> {target}")
    return 0


def build(docs: Path, out: Path) -> int:
    """Index docs/<set>/*.md in a scratch repository with engram init; write the ADR memories."""
    sets = sorted(path for path in docs.iterdir() if path.is_dir()) if docs.is_dir() else []
    if not sets:
        print(f"no ADR folders under {docs}; run the extract step first (see --help)")
        return 2
    with tempfile.TemporaryDirectory(prefix="engram-adr-set-") as tmp:
        repo = Path(tmp) / PROJECT
        for folder in sets:
            shutil.copytree(folder, repo / "docs" / "adr" / folder.name)
        env = {
            **os.environ,
            "ENGRAM_HOME": str(Path(tmp) / "home"),
            "ENGRAM_DAEMON": "off",
            "GIT_AUTHOR_NAME": "adr-set",
            "GIT_AUTHOR_EMAIL": "adr-set@example.invalid",
            "GIT_COMMITTER_NAME": "adr-set",
            "GIT_COMMITTER_EMAIL": "adr-set@example.invalid",
            "GIT_AUTHOR_DATE": "2025-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2025-01-01T00:00:00Z",
        }
        env.pop("ENGRAM_DIR", None)
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "ADRs"]):
            subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
        engram = [sys.executable, "-m", "engram", "-C", str(repo)]
        done = subprocess.run(
            [*engram, "init", "--project", PROJECT], env=env, capture_output=True, text=True
        )
        print(done.stdout, end="")
        print(done.stderr, end="", file=sys.stderr)
        if done.returncode:
            return done.returncode
        lines = (repo / ".engram" / "memories.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    kept = [record for record in records if str(record.get("source", "")).startswith("adr:")]
    for record in kept:
        if record["created_at"] == record["updated_at"]:  # no date read from the ADR
            record["created_at"] = STAMP
        if record["created_at"] > STAMP:
            print(f"{record['source']}: dated {record['created_at']}, after STAMP; raise STAMP")
            return 1
        record["updated_at"] = STAMP
    kept.sort(key=lambda record: record["id"])
    from engram.model import canonical_line  # the bytes the store writes

    out.write_bytes(b"".join(canonical_line(record) for record in kept))
    print(f"{len(kept)} ADR memories (of {len(records)} written by init) -> {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the extract step or the build step."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["extract"]:
        parser = argparse.ArgumentParser(prog="build.py extract", description=extract.__doc__)
        parser.add_argument("sources", nargs="+", metavar="OWNER/NAME=GIT_DIR")
        parser.add_argument("--docs", type=Path, default=HERE / "docs")
        parsed = parser.parse_args(args[1:])
        return extract(parsed.sources, parsed.docs)
    parser = argparse.ArgumentParser(prog="build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, default=HERE / "docs")
    parser.add_argument("--out", type=Path, default=HERE / "memories.jsonl")
    parsed = parser.parse_args(args)
    return build(parsed.docs, parsed.out)


if __name__ == "__main__":
    sys.exit(main())
