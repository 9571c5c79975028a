"""`make demo`: engram's main job on the example project, with real output.

Sets up a scratch copy of the example project in .demo/ledger-api (never touching the committed
examples/): two ADRs from examples/docs/adr and a short git history made with dulwich; runs
`engram init` over the team's committed memories (it indexes the ADRs and history), saves a
few new ones, and shows ranked recalls, a file-scoped recall, one memory in full, a check before
an edit, a session (capture, summary, timeline), a memory flagged stale after a commit, the
session-start briefing and the stats.
Each step runs the real `engram` CLI in its own process and prints the command before its
output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = REPO / ".demo" / "ledger-api"


PITFALL = (
    "remember",
    "Refund webhooks can arrive before the charge webhook",
    "Merchants see refund.created before charge.succeeded when the charge webhook is retried."
    " Handlers in webhooks/dispatch.py must tolerate an unknown charge id and retry later.",
    *("--kind", "pitfall", "--tags", "webhooks,ordering", "--files", "webhooks/dispatch.py"),
    *("--importance", "4"),
)


def engram(*args: str, stdin: str | None = None) -> str:
    """Run one engram command in the demo project, echo it and its output, return stdout."""
    shown = " ".join(f'"{a}"' if " " in a or not a else a for a in args)
    print(f"\n$ engram {shown}", flush=True)
    result = subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(WORK), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "ENGRAM_AUTHOR": "demo", "COLUMNS": "100"},
        check=False,
    )
    sys.stdout.write(result.stdout)
    sys.stdout.write(result.stderr)
    sys.stdout.flush()
    if result.returncode != 0:
        raise SystemExit(f"demo step failed: engram {shown} (exit {result.returncode})")
    return result.stdout.strip()


AGENT_REPLY = """\
Done: refunds that arrive before their charge are parked and replayed.

## Key Learnings

1. **Webhook ordering:** the payment provider retries a failed charge webhook for up to three
   days, so a refund for it can arrive days before the charge itself.
2. `webhook_retry` rows must carry the merchant id, or replays cross merchants.
3. Use fakes.
"""


def commit_change() -> None:
    """Commit a change to webhooks/dispatch.py now (a teammate's push, say)."""
    import time

    from dulwich import porcelain

    path = WORK / "webhooks" / "dispatch.py"
    path.write_text("single\nparked refunds replayed in order\n", encoding="utf-8")
    porcelain.add(str(WORK), paths=[str(path)])
    author = b"Sam Lee <sam@ledger.example>"
    stamp = int(time.time()) + 1
    porcelain.commit(
        str(WORK),
        message=b"Replay parked refunds in arrival order",
        author=author,
        committer=author,
        author_timestamp=stamp,
        commit_timestamp=stamp,
        author_timezone=0,
        commit_timezone=0,
    )


def make_history() -> None:
    """Give the scratch project ADRs and a short git history (made with dulwich) to index."""
    from dulwich import porcelain

    shutil.copytree(HERE / "docs", WORK / "docs")
    porcelain.init(str(WORK)).close()
    when = 1_780_000_000
    author = b"Maria Okafor <maria@ledger.example>"

    def commit(message: str, files: dict[str, str]) -> str:
        nonlocal when
        when += 3_600
        for name, text in files.items():
            (WORK / name).parent.mkdir(parents=True, exist_ok=True)
            (WORK / name).write_text(text, encoding="utf-8")
        porcelain.add(str(WORK), paths=[str(WORK / name) for name in files])
        sha = porcelain.commit(
            str(WORK),
            message=message.encode(),
            author=author,
            committer=author,
            author_timestamp=when,
            commit_timestamp=when,
            author_timezone=0,
            commit_timezone=0,
        )
        return sha.decode("ascii")

    adrs = {f"docs/adr/{p.name}": p.read_text("utf-8") for p in (WORK / "docs/adr").iterdir()}
    commit("Record the event encoding decisions", adrs)
    for n in range(9):
        commit(f"Posting: tighten balance check ({n})", {"ledger/posting.py": f"CHECK = {n}\n"})
    pooled = commit("Batch webhook deliveries per merchant", {"webhooks/dispatch.py": "batch\n"})
    commit(
        f'Revert "Batch webhook deliveries per merchant"\n\nThis reverts commit {pooled}.\n',
        {"webhooks/dispatch.py": "single\n"},
    )


def main() -> None:
    """Run the demo from a clean scratch folder."""
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    make_history()
    # The team's memories are already committed with the code.
    (WORK / ".engram").mkdir()
    shutil.copyfile(HERE / ".engram" / "memories.jsonl", WORK / ".engram" / "memories.jsonl")

    print("# 1. Set up engram in the project: it reads the ADRs and mines the git history")
    engram("init", "--project", "ledger-api")

    print("\n# 2. Indexing again changes nothing")
    engram("index")

    print("\n# 3. An agent saves what it learned")
    pitfall = engram(*PITFALL)
    engram(
        "remember",
        "Park out-of-order refund webhooks in a retry queue",
        "dispatch.handle_refund now parks events whose charge is unknown in webhook_retry"
        " with exponential backoff instead of failing with 500.",
        "--kind",
        "bugfix",
        "--tags",
        "webhooks",
        "--files",
        "webhooks/dispatch.py",
        "--link",
        f"fixes:{pitfall[:8]}",
    )
    print("\n# 4. Saving the same thing again only counts it (no duplicate line)")
    engram(*PITFALL)

    print("\n# 5. Ranked recall: decisions and pitfalls first, superseded ones ranked down")
    engram("recall", "idempotency keys", "--limit", "4")
    engram("recall", "why must amounts never be floats?", "--limit", "3")

    print("\n# 6. What do we know about a file before editing it?")
    engram("recall", "--file", "webhooks/dispatch.py", "--limit", "5")
    engram("recall", "event encoding", "--kind", "decision", "--limit", "3")

    print("\n# 7. One memory in full")
    engram("get", pitfall[:8])

    print("\n# 8. Before editing a file: its pitfalls, decisions, hotspot and revert warnings")
    engram("check", "--files", "webhooks/dispatch.py", "--budget", "400")

    print("\n# 9. A session: the agent's learnings are captured, then summarised")
    session = engram("session", "start")
    learned = engram("capture", stdin=AGENT_REPLY).split()[1]
    engram(
        "session",
        "summary",
        "--goal",
        "Make refund webhooks robust to ordering",
        "--accomplished",
        "Out-of-order refunds are parked in webhook_retry and replayed.",
        "--next-steps",
        "Alert when an event stays parked for more than an hour.",
        "--relevant-files",
        "webhooks/dispatch.py",
    )
    engram("session", "end", session)
    engram("timeline", learned[:8])

    print("\n# 10. The code moves on: memories citing a changed file say they may be stale")
    commit_change()
    engram("recall", "out-of-order refund webhooks", "--limit", "2")

    print("\n# 11. What the next session starts with")
    engram("context", "--budget", "800")

    print("\n# 12. Stats")
    engram("stats")
    print(f"\nThe store is a plain file: {WORK / '.engram' / 'memories.jsonl'}")


if __name__ == "__main__":
    main()
