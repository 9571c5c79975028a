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

Three sets, reported apart and together: "tuned" (the sixteen sessions the rules were written
with in view); "adjusted" (the ten ``h-*`` sessions, written and labelled after the rules,
before the rules first ran on them: precision 0.20 and recall 0.17 then; the rules were then
adjusted on them); "fresh" (the ten ``f-*`` sessions, written and labelled after that
adjustment, before the rules ran on them: the estimate for sessions the rules were not shaped
on); "real" (the two ``r-*`` sessions per agent that the real agent programs ran against a
scripted fake model, transcripts as the programs wrote them). ``--show`` prints every
proposal with the label it answered, if any.
"""

from __future__ import annotations

import argparse
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


SETS = ("tuned", "adjusted", "fresh", "real")  # by name: h- adjusted, f- fresh, r- real


def set_of(name: str) -> str:
    """Return the set a session belongs to, by its name."""
    return {"h-": "adjusted", "f-": "fresh", "r-": "real"}.get(name[:2], "tuned")


def score(
    agent: str, labels: dict[str, list[dict[str, Any]]], show: bool, cwds: dict[str, str]
) -> dict[str, dict[str, int]]:
    """Capture every transcript of one agent into a scratch store; tally each set."""
    keys = ("proposals", "right", "labels", "found", "quiet", "quiet_props", "again", "sessions")
    tally = {name: dict.fromkeys(keys, 0) for name in SETS}
    paths = sorted((HERE / "transcripts" / agent).glob("*.jsonl"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "app"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        engram, _ = Engram.init(root, "app")
        with engram:
            for path in paths:
                row = tally[set_of(path.stem)]
                wanted = labels[path.stem]
                cwd = cwds.get(path.stem, CWD)  # where the session ran, if its file does not say
                got = capture_transcript(engram.here, str(path), agent=agent, cwd=cwd)
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
                            f"  {agent} {path.stem}: {record['kind']} {record['title']!r} "
                            f"{record.get('files')} -> {mark}"
                        )
                if show:
                    for label in open_labels:
                        print(f"  {agent} {path.stem}: MISSED {label['note']}")
                row["found"] += len(wanted) - len(open_labels)
            for path in paths:
                row = tally[set_of(path.stem)]
                cwd = cwds.get(path.stem, CWD)
                again = capture_transcript(engram.here, str(path), agent=agent, cwd=cwd)
                row["again"] += len(again.proposed)
    return tally


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
    rows = {agent: score(agent, labels, args.show, data["real_cwd"][agent]) for agent in AGENTS}
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
            print(line(agent, row))
        total = {key: sum(row[key] for row in picked.values()) for key in row}
        print(line("all agents", total))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
