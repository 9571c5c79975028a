"""Score offline capture on the labelled transcripts: precision, recall, proposals when quiet.

Run ``python benchmarks/capture/run.py``. Each transcript under ``transcripts/<agent>/`` goes
through ``engram.agents.inbox.capture_transcript``, the entry point the stop, subagent-stop,
pre-compact and session-end hooks call, into a scratch store (one per agent, made with
``Engram.init`` in a temporary git repository), exactly as a hook would. The proposals are
then held to ``labels.json`` (written by hand before the extractor ran): a proposal answers a
label when its kind is one of the label's kinds and it names one of the label's files or
contains one of its words; each label is answered once. Printed, per agent and overall:

- precision: proposals that answer a label / all proposals;
- recall: labels answered / all labels;
- proposals per uneventful session (sessions with no label; the aim is none);
- proposed again: what a second capture of every transcript saves anew (the aim is none: a
  hook fires at every stop and reads the whole transcript again).

Five sets, reported apart and together: "tuned" (the sixteen sessions the rules were written
with in view); "adjusted" (the ten ``h-*`` sessions, written and labelled after the rules,
before the rules first ran on them: precision 0.20 and recall 0.17 then; the rules were then
adjusted on them); "fresh" (the ten ``f-*`` sessions, written and labelled after that
adjustment, before the rules ran on them: the estimate for sessions the rules were not shaped
on); "real" (``r-bugfix`` and ``r-quiet``: the first two sessions the real agent programs ran
against a scripted fake model, transcripts as the programs wrote them); "runs" (the other
``r-*`` sessions, ``.jsonl.gz``: the 48 scripted sessions of ``real_scenarios.py`` that
``real.py`` ran through the real programs, labelled before the rules first ran on them). The
real programs' transcripts name the folders they ran in by fixed placeholders (the repository
is ``/home/dev/work/app``, as for the scripted renderings). ``--show`` prints every proposal
with the label it answered, if any.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from engram.agents.inbox import capture_transcript  # noqa: E402
from engram.service import Engram  # noqa: E402

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode")
CWD = "/home/dev/work/app"  # the folder the scripted sessions ran in (make.py)


def answers(record: dict[str, Any], label: dict[str, Any]) -> bool:
    """Tell whether a proposed memory answers a hand-written label."""
    if record.get("kind") not in label["kinds"]:
        return False
    files = set(record.get("files") or [])
    if files & set(label["files"]):
        return True
    text = f"{record.get('title', '')}\n{record.get('content', '')}".lower()
    return any(word.lower() in text for word in label["words"])


SETS = ("tuned", "adjusted", "fresh", "real", "runs")  # by name: h-, f-, r-bugfix/r-quiet, r-
FIRST_REAL = ("r-bugfix", "r-quiet")


def set_of(name: str) -> str:
    """Return the set a session belongs to, by its name."""
    if name.startswith("r-"):
        return "real" if name in FIRST_REAL else "runs"
    return {"h-": "adjusted", "f-": "fresh"}.get(name[:2], "tuned")


def sessions(agent: str) -> list[tuple[str, Path]]:
    """Return each transcript of an agent's set (name, file), by name."""
    folder = HERE / "transcripts" / agent
    found = [*folder.glob("*.jsonl"), *folder.glob("*.jsonl.gz")]
    return sorted((path.name.split(".")[0], path) for path in found)


def plain(path: Path, tmp: Path) -> str:
    """Return a path to the transcript as the agent left it (a .gz one unpacked into tmp)."""
    if path.suffix != ".gz":
        return str(path)
    out = tmp / path.parent.name / path.name.removesuffix(".gz")
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return str(out)


def score(
    agent: str, labels: dict[str, list[dict[str, Any]]], show: bool
) -> dict[str, dict[str, int]]:
    """Capture every transcript of one agent into scratch stores; tally each set.

    The "runs" set gets a store of its own: a store proposes nothing it holds already, so
    sessions of one set about the same thing as another's (an lru_cache undone in both) would
    otherwise take each other's proposals. The older sets share one, as they always have.
    """
    keys = ("proposals", "right", "labels", "found", "quiet", "quiet_props", "again", "sessions")
    tally = {name: dict.fromkeys(keys, 0) for name in SETS}
    with tempfile.TemporaryDirectory() as tmp:
        paths = [(name, plain(path, Path(tmp))) for name, path in sessions(agent)]
        for group in ("before", "runs"):
            picked = [(n, p) for n, p in paths if (set_of(n) == "runs") == (group == "runs")]
            root = Path(tmp) / group / "app"
            root.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            engram, _ = Engram.init(root, "app")
            with engram:
                for name, path in picked:
                    capture(engram, agent, name, path, labels[name], tally[set_of(name)], show)
                for name, path in picked:
                    again = capture_transcript(engram.here, path, agent=agent, cwd=CWD)
                    tally[set_of(name)]["again"] += len(again.proposed)
    return tally


def capture(
    engram: Engram,
    agent: str,
    name: str,
    path: str,
    wanted: list[dict[str, Any]],
    row: dict[str, int],
    show: bool,
) -> None:
    """Capture one transcript as a hook would; hold its proposals to its labels."""
    # CWD: where the session ran, if its file does not say
    got = capture_transcript(engram.here, path, agent=agent, cwd=CWD)
    records = [engram.get(item.id) for item in got.proposed]
    open_labels = list(wanted)
    row["sessions"] += 1
    row["proposals"] += len(records)
    row["labels"] += len(wanted)
    if not wanted:
        row["quiet"] += 1
        row["quiet_props"] += len(records)
    for record in records:
        hit = next((lab for lab in open_labels if answers(record, lab)), None)
        if hit is not None:
            open_labels.remove(hit)
            row["right"] += 1
        if show:
            mark = f"answers: {hit['note']}" if hit else "NO LABEL"
            print(
                f"  {agent} {name}: {record['kind']} {record['title']!r} "
                f"{record.get('files')} -> {mark}"
            )
    if show:
        for label in open_labels:
            print(f"  {agent} {name}: MISSED {label['note']}")
    row["found"] += len(wanted) - len(open_labels)


def line(name: str, row: dict[str, int]) -> str:
    precision = row["right"] / row["proposals"] if row["proposals"] else 1.0
    recall = row["found"] / row["labels"] if row["labels"] else 1.0
    quiet = row["quiet_props"] / row["quiet"] if row["quiet"] else 0.0
    return (
        f"{name:<12} {row['sessions']:>8} {row['labels']:>6} {row['proposals']:>9} "
        f"{precision:>9.2f} {recall:>7.2f} {row['quiet']:>6} {quiet:>9.2f} {row['again']:>5}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="print every proposal")
    args = parser.parse_args(argv)
    data = json.loads((HERE / "labels.json").read_text(encoding="utf-8"))
    labels = {**data["sessions"], **data["held_out"], **data["fresh"], **data["real"]}
    rows = {agent: score(agent, labels, args.show) for agent in AGENTS}
    for name in (*SETS, "all"):
        print(f"\n{name}")
        print(
            f"{'agent':<12} {'sessions':>8} {'labels':>6} {'proposals':>9} {'precision':>9} "
            f"{'recall':>7} {'quiet':>6} {'per quiet':>9} {'again':>5}"
        )
        picked = {
            agent: (
                {key: sum(row[s][key] for s in SETS) for key in row[SETS[0]]}
                if name == "all"
                else row[name]
            )
            for agent, row in rows.items()
        }
        for agent, row in picked.items():
            if row["sessions"]:  # an agent the set has no transcripts of (OpenCode's runs)
                print(line(agent, row))
        total = {key: sum(row[key] for row in picked.values()) for key in row}
        print(line("all agents", total))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
