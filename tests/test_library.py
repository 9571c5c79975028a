"""The library API as docs/library.md shows it: examples/library.py run as a user runs it.

The example runs in its own interpreter over a real git repository in ``tmp_path``; what it
saved is then read back by the real ``engram`` command, so the library and the CLI agree.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import engram

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "library.py"
PAGE = ROOT / "docs" / "library.md"


def test_the_example_runs_and_the_cli_reads_what_it_saved(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(folder)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"created 3 files in {folder / '.engram'}"
    assert re.fullmatch(r"created [a-z2-7]{26}", lines[1]), lines[1]
    recalled = [line for line in lines if line.startswith("recall ")]
    assert len(recalled) == 2 and all("  " in line for line in recalled)
    assert "pitfall Never divide amounts with /" in lines
    assert "check: 2 findings" in lines
    assert "context: 2 items" in lines
    saved_id = lines[1].split()[1]
    shown = subprocess.run(
        [sys.executable, "-m", "engram", "get", saved_id[:8], "--json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["title"] == "Store money as integer minor units"
    assert record["project"] == "ledger" and record["importance"] == 4


def test_the_page_names_the_calls_the_example_makes() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert "from engram import Engram" in page and "examples/library.py" in page
    for call in ("Engram.init", "Engram.open", "remember(", "recall(", "check(", "context("):
        assert call in page, call
        assert call in EXAMPLE.read_text(encoding="utf-8"), call
    assert "close()" in page and "with Engram.open" in page
    assert engram.Engram.__name__ == "Engram"
