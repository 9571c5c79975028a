"""engram as a library: open a project's memory, remember, recall, check, brief, close.

Run it with a folder (it is created, made a git repository and given a .engram/ store), or with
none to use a temporary folder:

    python examples/library.py [FOLDER]

docs/library.md explains each call; tests/test_library.py runs this file.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from engram import Engram


def main(folder: Path) -> None:
    """Set up a project in ``folder`` and use its memory as an agent would."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    engram, created = Engram.init(folder, project="ledger")  # .engram/ and the git drivers
    engram.close()
    print(f"created {len(created)} files in {folder / '.engram'}")

    with Engram.open(folder) as memory:  # any folder inside the project finds it
        saved = memory.remember(
            "Store money as integer minor units",
            "Floats lost a cent on JPY refunds; amounts are ints of the currency's minor unit.",
            kind="decision",
            tags=["money", "rounding"],
            files=["ledger/money.py"],
            importance=4,
        )
        print(f"{saved.action} {saved.record['id']}")
        memory.remember(
            "Never divide amounts with /",
            "Use divmod on minor units; / turns cents into floats.",
            kind="pitfall",
            files=["ledger/money.py"],
        )

        for hit in memory.recall("why not floats for amounts?", limit=5):
            print(f"recall  {hit.score:.2f}  {hit.record['kind']:<9} {hit.record['title']}")
        for hit in memory.recall(kinds="pitfall", files="ledger/money.py"):
            print(f"pitfall {hit.record['title']}")

        findings = memory.check(["ledger/money.py"])  # before editing the file
        print(f"check: {len(findings.findings)} findings")
        print(findings.text)

        briefing = memory.context(budget=600)  # what a session starts with
        print(f"context: {len(briefing.items)} items")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as scratch:
            main(Path(scratch) / "ledger")
