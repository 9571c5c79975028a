"""`engram import --from PLATFORM`: other agents' own memory files as proposed memories.

Each platform's files are written where that agent keeps them (Claude Code's slug folder under
a fake HOME, CODEX_HOME, the repository's .cursor/, memory-bank/, .serena/, .kiro/), imported by
the real command line, and imported again: the store does not change by a byte. engram's own
export block is never imported back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engram.formats.platforms import PLATFORMS, claude_slug, folder_of
from engram.operations.admin import PLATFORMS as DECLARED
from engram.service import Engram
from tests.conftest import run_cli


def _memories(root: Path) -> list[dict[str, object]]:
    lines = (root / ".engram" / "memories.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _import_twice(root: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    first = run_cli("-C", str(root), "import", *args, "--json", env=env)
    assert first.returncode == 0, first.stderr
    store = (root / ".engram" / "memories.jsonl").read_bytes()
    again = run_cli("-C", str(root), "import", *args, "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["added"] == 0
    assert (root / ".engram" / "memories.jsonl").read_bytes() == store  # byte-identical
    result: dict[str, object] = json.loads(first.stdout)
    return result


def test_the_declared_platforms_are_the_folders() -> None:
    assert tuple(PLATFORMS) == DECLARED


def test_claude_codes_slug_is_its_folder_name() -> None:
    assert claude_slug(Path("/home/ana/src/my_app.v2")) == "-home-ana-src-my-app-v2"


def test_claude_code_auto_memory(project: Engram) -> None:
    root = project.root
    home = Path(os.environ["HOME"])
    folder = folder_of("claude-code", root.resolve(), home)
    assert folder is not None
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(
        "- [Testing](feedback_testing.md) — run the integration tests against a real database\n"
    )
    (folder / "feedback_testing.md").write_text(
        "---\nname: Integration tests hit a real database\n"
        "description: never mock the database in integration tests\ntype: feedback\n---\n\n"
        "We got burned when mocked tests passed and the migration failed in production.\n"
    )
    result = _import_twice(root, "--from", "claude-code")
    assert (result["format"], result["added"]) == ("claude-code", 2)
    by_source = {m["source"]: m for m in _memories(root)}
    topic = by_source["import:claude-code:feedback_testing.md"]
    assert topic["title"] == "Integration tests hit a real database"
    assert topic["status"] == "proposed"
    assert topic["kind"] == "preference"
    assert "claude-code" in topic["tags"]  # type: ignore[operator]
    assert "migration failed in production" in str(topic["content"])
    assert by_source["import:claude-code:MEMORY.md"]["status"] == "proposed"


def test_codex_memories_under_codex_home(project: Engram, tmp_path: Path) -> None:
    codex = tmp_path / "codex-home"
    (codex / "memories" / "ad_hoc_notes").mkdir(parents=True)
    (codex / "memories" / "memory_summary.md").write_text(
        "# Memory summary\n\n## User preferences\n- Prefers uv over pip.\n"
    )
    (codex / "memories" / "ad_hoc_notes" / "2026-12-01T10-00-00-ports.md").write_text(
        "The dev server must use port 8123; 8000 is taken by the proxy.\n"
    )
    result = _import_twice(project.root, "--from", "codex", env={"CODEX_HOME": str(codex)})
    assert result["added"] == 2
    sources = sorted(str(m["source"]) for m in _memories(project.root))
    assert sources == [
        "import:codex:ad_hoc_notes/2026-12-01T10-00-00-ports.md",
        "import:codex:memory_summary.md",
    ]


def test_cursor_rules_with_globs_and_engrams_own_rule_left_out(project: Engram) -> None:
    root = project.root
    project.remember("Pinned one", "Keep it.", kind="pitfall", importance=5)
    project.export_instructions("cursor-rules")  # engram's own .cursor/rules/engram.mdc
    rules = root / ".cursor" / "rules"
    (rules / "database.mdc").write_text(
        "---\ndescription: Database access rules\nglobs: src/db/**/*.py, migrations/*.sql\n"
        "alwaysApply: false\n---\n\nUse the session from db.session(); never open engines.\n"
    )
    result = _import_twice(root, "--from", "cursor")
    assert result["added"] == 1
    assert any("engram's own export block left out" in n for n in result["notes"])  # type: ignore[union-attr]
    rule = next(m for m in _memories(root) if m.get("source") == "import:cursor:database.mdc")
    assert rule["title"] == "Database access rules"
    assert rule["kind"] == "principle"
    assert rule["files"] == ["migrations/*.sql", "src/db/**/*.py"] or rule["files"] == [
        "src/db/**/*.py",
        "migrations/*.sql",
    ]
    assert rule["status"] == "proposed"


def test_an_exported_block_inside_a_users_file_is_cut_out(project: Engram) -> None:
    root = project.root
    project.remember("Never deploy on Fridays", "Nobody is around.", kind="decision", importance=5)
    bank = root / "memory-bank"
    bank.mkdir()
    (bank / "systemPatterns.md").write_text("# System patterns\n\nEvents go through the bus.\n")
    project.export_instructions("cline")  # appends engram's block to the user's file
    (bank / "techContext.md").write_text("# Tech context\n\nPython 3.11, Postgres 16.\n")
    result = _import_twice(root, "--from", "cline")
    assert result["added"] == 2
    patterns = next(
        m for m in _memories(root) if m.get("source") == "import:cline:systemPatterns.md"
    )
    assert "Events go through the bus." in str(patterns["content"])
    assert "Never deploy on Fridays" not in str(patterns["content"])


def test_serena_and_kiro(project: Engram) -> None:
    root = project.root
    (root / ".serena" / "memories").mkdir(parents=True)
    (root / ".serena" / "memories" / "suggested_commands.md").write_text(
        "Run `make test` before committing.\n"
    )
    (root / ".kiro" / "steering").mkdir(parents=True)
    (root / ".kiro" / "steering" / "api.md").write_text(
        "---\ninclusion: fileMatch\nfileMatchPattern: 'api/**/*.ts'\n---\n\n"
        "# API style\n\nEvery handler validates its input with zod.\n"
    )
    assert _import_twice(root, "--from", "serena")["added"] == 1
    assert _import_twice(root, "--from", "kiro")["added"] == 1
    steering = next(m for m in _memories(root) if m.get("source") == "import:kiro:api.md")
    assert (steering["title"], steering["files"], steering["kind"]) == (
        "API style",
        ["api/**/*.ts"],
        "principle",
    )


def test_bad_platform_missing_folder_and_a_fifo(project: Engram) -> None:
    root = project.root
    wrong = run_cli("-C", str(root), "import", "--from", "notepad")
    assert wrong.returncode != 0 and "unknown platform 'notepad'" in wrong.stderr.decode()
    missing = run_cli("-C", str(root), "import", "--from", "serena")
    assert missing.returncode != 0 and "no Serena's memories" in missing.stderr.decode()
    neither = run_cli("-C", str(root), "import")
    assert neither.returncode != 0 and "--from PLATFORM" in neither.stderr.decode()
    (root / "memory-bank").mkdir()
    os.mkfifo(root / "memory-bank" / "pipe.md")
    (root / "memory-bank" / "progress.md").write_text("Half of the API is ported.\n")
    done = run_cli("-C", str(root), "import", "--from", "cline", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["added"] == 1
    assert any("pipe.md" in e and "named pipe" in e for e in result["errors"])


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_every_platform_has_a_folder(name: str, tmp_path: Path) -> None:
    assert folder_of(name, tmp_path / "repo", tmp_path / "home") is not None
