"""`engram export --format agents-md|…`: the memory as a marked block of agents' instruction files.

Real projects and the real command line: the block holds the pinned and important decisions,
pitfalls and principles; the text around it survives byte for byte; a second run changes
nothing; damaged markers, links and FIFOs are refused with nothing written; `engram sync`
keeps the configured files current.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engram.errors import InvalidInput
from engram.formats.instructions import (
    BEGIN,
    END,
    FORMATS,
    compile_block,
    find_block,
    selected,
    splice,
    strip_block,
)
from engram.operations.admin import INSTRUCTION_FORMATS
from engram.service import Engram
from tests.conftest import run_cli


def _stocked(project: Engram) -> Engram:
    project.remember(
        "Never divide amounts with /",
        "Amounts are integer cents; float division lost a cent in refunds.",
        kind="pitfall",
        files=["ledger/money.py"],
        importance=5,
    )
    project.remember(
        "Money is stored in integer cents",
        "Every amount is an int of cents.",
        kind="decision",
        importance=4,
    )
    project.remember("Small rule", "Tabs are fine in Makefiles.", kind="principle", importance=2)
    pinned = project.remember("Pinned principle", "Ask before deleting data.", kind="principle")
    project.pin(pinned.record["id"])
    project.remember("A plain note", "Nothing to export here.", kind="note", importance=5)
    draft = project.remember(
        "A proposed pitfall", "Not reviewed yet.", kind="pitfall", importance=5
    )
    project.update(draft.record["id"], status="proposed")
    return project


def test_the_declared_formats_are_the_targets() -> None:
    assert tuple(FORMATS) == INSTRUCTION_FORMATS


def test_the_block_holds_pinned_and_important_decisions_pitfalls_and_principles(
    project: Engram,
) -> None:
    _stocked(project)
    records = project.project_ws.index.all_records()
    titles = [r["title"] for r in selected(records)]
    assert titles == [
        "Pinned principle",
        "Never divide amounts with /",
        "Money is stored in integer cents",
    ]
    block, count, left = compile_block("agents-md", records)
    assert (count, left) == (3, 0)
    assert block.startswith(BEGIN) and block.endswith(END)
    assert "`ledger/money.py`" in block
    assert "A proposed pitfall" not in block and "A plain note" not in block
    assert "Small rule" not in block
    assert (
        block.index("### Pitfalls") < block.index("### Decisions") < block.index("### Principles")
    )


def test_the_budget_keeps_the_most_important_and_says_what_it_left_out(project: Engram) -> None:
    for n in range(40):
        project.remember(
            f"Pitfall number {n:02d}", "word " * 60, kind="pitfall", importance=4 + (n % 2)
        )
    records = project.project_ws.index.all_records()
    block, count, left = compile_block("agents-md", records, budget=300)
    assert count + left == 40 and left > 0
    assert len(block) <= 300 * 4
    assert f"{left} more left out to stay within 300 tokens" in block
    shown = [line for line in block.splitlines() if line.startswith("- **")]
    assert all("Pitfall number" in line for line in shown)
    # importance 5 (odd numbers) come first
    assert all(int(line.split()[3][:2]) % 2 == 1 for line in shown)


def test_text_outside_the_block_survives_byte_for_byte(tmp_path: Path) -> None:
    before = "# Agents\r\n\r\nRun `make test`.\r\n"
    after = "\r\n## Later\r\nkept\r\n"
    old = before + f"{BEGIN} old -->\r\nstale\r\n{END}" + after
    new = splice(old, f"{BEGIN} x -->\nfresh\n{END}", shown="AGENTS.md")
    assert new == before + f"{BEGIN} x -->\r\nfresh\r\n{END}" + after
    assert splice(new, f"{BEGIN} x -->\nfresh\n{END}", shown="AGENTS.md") == new
    appended = splice("# Mine\nno newline at end", f"{BEGIN} -->\n{END}", shown="AGENTS.md")
    assert appended == f"# Mine\nno newline at end\n\n{BEGIN} -->\n{END}\n"
    assert strip_block(old) == before + after


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (f"a\n{BEGIN} -->\nx\n{END}\n{BEGIN} -->\ny\n{END}\n", 5, "a second engram export block"),
        (f"a\n{END}\n", 2, "ends here but never begins"),
        (f"a\nb\n{BEGIN} -->\nx\n", 3, "begins here but never ends"),
    ],
)
def test_damaged_markers_are_named_with_their_line(text: str, line: int, words: str) -> None:
    with pytest.raises(InvalidInput, match=f"AGENTS.md:{line}: .*{words}"):
        find_block(text, "AGENTS.md")


@pytest.mark.parametrize("fmt", INSTRUCTION_FORMATS)
def test_each_format_through_the_cli_is_idempotent_and_keeps_the_users_text(
    project: Engram, fmt: str
) -> None:
    _stocked(project)
    root = project.root
    target = root / FORMATS[fmt].path
    target.parent.mkdir(parents=True, exist_ok=True)
    mine = "# Written by a person\n\nKeep this line exactly.  \n"
    target.write_bytes(mine.encode())
    first = run_cli("-C", str(root), "export", "--format", fmt)
    assert first.returncode == 0, first.stderr
    assert f"{FORMATS[fmt].path}: updated (3 memories)" in first.stdout.decode()
    text = target.read_text()
    assert text.startswith(mine)
    assert "Never divide amounts with /" in text
    once = target.read_bytes()
    second = run_cli("-C", str(root), "export", "--format", fmt)
    assert second.returncode == 0, second.stderr
    assert "unchanged" in second.stdout.decode()
    assert target.read_bytes() == once
    # an edit outside the block, then a new memory: only the block changes
    target.write_bytes(once.replace(b"Keep this line", b"Keep THIS line"))
    project.remember("Deploys need the flag", "Set DEPLOY=1.", kind="decision", importance=5)
    assert run_cli("-C", str(root), "export", "--format", fmt).returncode == 0
    final = target.read_text()
    assert final.startswith(mine.replace("Keep this line", "Keep THIS line"))
    assert "Deploys need the flag" in final


def test_new_cursor_and_kiro_files_get_their_front_matter(project: Engram) -> None:
    _stocked(project)
    for fmt, first_lines in (
        ("cursor-rules", ["---", "description: "]),
        ("kiro-steering", ["---", "inclusion: always", "---"]),
    ):
        done = project.export_instructions(fmt)
        assert done.created and done.memories == 3
        lines = (project.root / FORMATS[fmt].path).read_text().splitlines()
        assert [line[: len(want)] for line, want in zip(lines, first_lines, strict=False)] == [
            *first_lines
        ]
    rule = (project.root / ".cursor/rules/engram.mdc").read_text()
    assert "alwaysApply: true" in rule


def test_damaged_block_writes_nothing_and_names_the_line(project: Engram) -> None:
    _stocked(project)
    agents = project.root / "AGENTS.md"
    damaged = f"# Mine\n{BEGIN} -->\nhalf a block\n"
    agents.write_text(damaged)
    out = run_cli("-C", str(project.root), "export", "--format", "agents-md")
    assert out.returncode != 0
    assert "AGENTS.md:2: the engram export block begins here but never ends" in out.stderr.decode()
    assert agents.read_text() == damaged


def test_a_committed_link_or_fifo_in_the_files_place_is_refused(
    project: Engram, tmp_path: Path
) -> None:
    _stocked(project)
    outside = tmp_path / "victim.txt"
    outside.write_text("precious\n")
    (project.root / "CLAUDE.md").symlink_to(outside)
    with pytest.raises(InvalidInput, match=r"CLAUDE\.md: is a symbolic link"):
        project.export_instructions("claude-md")
    assert outside.read_text() == "precious\n"
    os.mkfifo(project.root / "AGENTS.md")
    with pytest.raises(InvalidInput, match=r"AGENTS\.md: is a named pipe"):
        project.export_instructions("agents-md")
    (project.root / ".kiro").symlink_to(tmp_path)
    with pytest.raises(InvalidInput, match="leads outside the repository"):
        project.export_instructions("kiro-steering")
    assert not (tmp_path / "steering").exists()


def test_to_writes_elsewhere_and_file_argument_is_refused(project: Engram, tmp_path: Path) -> None:
    _stocked(project)
    elsewhere = tmp_path / "notes" / "RULES.md"
    elsewhere.parent.mkdir()
    done = run_cli(
        "-C", str(project.root), "export", "--format", "claude-md", "--to", str(elsewhere)
    )
    assert done.returncode == 0, done.stderr
    assert "Pinned principle" in elsewhere.read_text()
    assert not (project.root / "CLAUDE.md").exists()
    wrong = run_cli("-C", str(project.root), "export", "--format", "claude-md", "out.md")
    assert wrong.returncode != 0 and "use --to out.md" in wrong.stderr.decode()


def test_personal_memories_never_reach_a_committed_file(project: Engram) -> None:
    _stocked(project)
    project.remember(
        "My own shortcut", "Only mine.", kind="principle", importance=5, scope="personal"
    )
    project.export_instructions("agents-md")
    assert "My own shortcut" not in (project.root / "AGENTS.md").read_text()


def test_sync_keeps_the_configured_files_current(project: Engram) -> None:
    _stocked(project)
    root = project.root
    config = root / ".engram" / "config.yaml"
    text = config.read_text()
    assert "\n  formats: []\n" in text  # the template says what the setting is for
    config.write_text(text.replace("\n  formats: []\n", "\n  formats: [agents-md, cline]\n"))
    first = run_cli("-C", str(root), "sync", "--json")
    assert first.returncode == 0, first.stderr
    blocks = json.loads(first.stdout)["instructions"]
    assert [(b["path"], b["changed"]) for b in blocks] == [
        ("AGENTS.md", True),
        ("memory-bank/systemPatterns.md", True),
    ]
    assert "Never divide amounts with /" in (root / "AGENTS.md").read_text()
    project.remember("Cache keys carry the version", "v2 keys.", kind="decision", importance=4)
    second = run_cli("-C", str(root), "sync")
    assert second.returncode == 0, second.stderr
    assert "AGENTS.md: engram's block updated" in second.stdout.decode()
    assert "Cache keys carry the version" in (root / "AGENTS.md").read_text()
    third = run_cli("-C", str(root), "sync", "--json")
    assert [b["changed"] for b in json.loads(third.stdout)["instructions"]] == [False, False]
