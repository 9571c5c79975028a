"""engram import of the plain shapes people have (issue 17): rows of notes and Markdown folders.

Every test runs the real ``engram`` command in a real git repository: JSON Lines, a JSON array,
``{"memories": [...]}``, a one-line JSON document, a basic-memory folder and an Obsidian vault
are imported twice (the second import changes no byte of memories.jsonl) and found by
``engram recall``; bad items are reported with their file and line or index and the rest
imports.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli


def engram(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli(*args, cwd=root)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = engram(root, "init")
    assert done.returncode == 0, done.stderr
    return root


def memories(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".engram" / "memories.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def import_twice(root: Path, source: str) -> tuple[dict[str, Any], str]:
    """Import ``source`` twice; the second changes no byte. Return the first result, stderr."""
    first = engram(root, "import", source, "--json")
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    before = (root / ".engram" / "memories.jsonl").read_bytes()
    again = engram(root, "import", source, "--json")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (second["added"], second["updated"]) == (0, 0), second
    assert second["unchanged"] == result["added"]
    assert (root / ".engram" / "memories.jsonl").read_bytes() == before
    text = engram(root, "import", source)  # the words a person reads
    return result, text.stderr.decode()


def recalled(root: Path, query: str) -> list[str]:
    done = engram(root, "recall", query, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    hits = data["hits"] if isinstance(data, dict) else data
    return [hit["title"] for hit in hits]


# ── rows ─────────────────────────────────────────────────────────────────────────────────────


def test_json_lines_import_with_the_bad_row_named_by_its_line(repo: Path) -> None:
    (repo / "notes.jsonl").write_text(
        '{"title": "Money in cents", "content": "Never floats for money.", "kind": "decision",'
        ' "tags": ["money"], "files": ["ledger/money.py"]}\n'
        '{"text": "Cache keys must include the tenant id", "type": "pitfall",'
        ' "created_at": "2024-03-01T10:00:00Z"}\n'
        '{"kind": "fact", "tags": ["empty"]}\n',
        encoding="utf-8",
    )
    result, errors = import_twice(repo, "notes.jsonl")
    assert (result["format"], result["added"], result["skipped"]) == ("plain", 2, 1)
    assert result["errors"] == ["notes.jsonl:3: missing title and content"]
    assert "skipped notes.jsonl:3: missing title and content" in errors
    by_title = {m["title"]: m for m in memories(repo)}
    money = by_title["Money in cents"]
    assert (money["kind"], money["tags"], money["files"]) == (
        "decision",
        ["money"],
        ["ledger/money.py"],
    )
    cache = by_title["Cache keys must include the tenant id"]
    assert cache["kind"] == "pitfall"
    assert cache["content"] == "Cache keys must include the tenant id"
    assert cache["created_at"] == "2024-03-01T10:00:00.000Z"
    # A row without times takes the file's modification time, not the clock's.
    mtime = os.stat(repo / "notes.jsonl").st_mtime
    stamp = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert money["created_at"].startswith(stamp)
    assert recalled(repo, "tenant") == ["Cache keys must include the tenant id"]
    # Touched (a copy, a checkout): the same rows, nothing changes.
    before = (repo / ".engram" / "memories.jsonl").read_bytes()
    os.utime(repo / "notes.jsonl", (mtime + 3600, mtime + 3600))
    touched = json.loads(engram(repo, "import", "notes.jsonl", "--json").stdout)
    assert (touched["added"], touched["updated"]) == (0, 0)
    assert (repo / ".engram" / "memories.jsonl").read_bytes() == before


def test_a_json_array_imports(repo: Path) -> None:
    rows = [
        {"title": "Deploy on Tuesdays", "body": "Never on Fridays.", "tags": "ops, release"},
        {"title": "Retry the flaky test", "content": "test_upload retries twice.", "id": 7},
    ]
    (repo / "notes.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    result, _ = import_twice(repo, "notes.json")
    assert (result["format"], result["added"], result["skipped"]) == ("plain", 2, 0)
    deploy = next(m for m in memories(repo) if m["title"] == "Deploy on Tuesdays")
    assert (deploy["content"], deploy["tags"]) == ("Never on Fridays.", ["ops", "release"])
    assert recalled(repo, "Fridays") == ["Deploy on Tuesdays"]


def test_a_memories_object_imports_and_a_personal_row_goes_home(repo: Path) -> None:
    document = {
        "memories": [
            {"title": "Use pnpm", "content": "Not npm.", "project": "repo", "date": "2024-05-02"},
            {"title": "I like tabs", "content": "Mine only.", "scope": "personal"},
        ]
    }
    (repo / "memories.json").write_text(json.dumps(document), encoding="utf-8")
    result, errors = import_twice(repo, "memories.json")
    assert (result["format"], result["added"], result["personal"]) == ("plain", 2, 1)
    assert "personal store" in errors
    [pnpm] = memories(repo)
    assert (pnpm["title"], pnpm["created_at"]) == ("Use pnpm", "2024-05-02T00:00:00.000Z")
    home = Path(os.environ["ENGRAM_HOME"]) / "memories.jsonl"
    assert [json.loads(line)["title"] for line in home.read_text().splitlines()] == ["I like tabs"]
    assert recalled(repo, "pnpm") == ["Use pnpm"]


def test_a_one_line_document_names_the_bad_record_by_its_index(repo: Path) -> None:
    rows: list[Any] = [{"title": f"note {n}", "content": f"body {n}"} for n in range(30)]
    rows[20] = {"tags": ["nothing"]}
    rows[25] = "not a row"
    (repo / "memories.json").write_text(json.dumps({"records": rows}), encoding="utf-8")
    result, errors = import_twice(repo, "memories.json")
    assert (result["added"], result["skipped"]) == (28, 2)
    assert result["errors"] == [
        "memories.json: records[20]: missing title and content",
        "memories.json: records[25]: not a JSON object",
    ]
    assert ":1:" not in errors  # never a line number that a one-line document cannot mean


# ── Markdown folders ─────────────────────────────────────────────────────────────────────────


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_basic_memory_folder_imports(repo: Path, tmp_path: Path) -> None:
    notes = tmp_path / "basic-memory"
    write(
        notes / "coffee-brewing-methods.md",
        "---\ntitle: Coffee Brewing Methods\ntype: note\ntags: [coffee, brewing]\n"
        "permalink: coffee-brewing-methods\n---\n\n# Coffee Brewing Methods\n\n"
        "## Observations\n- [method] Pour over gives more clarity #technique\n\n"
        "## Relations\n- relates_to [[Coffee Bean Origins]]\n",
    )
    write(
        notes / "decisions" / "db" / "use-sqlite.md",
        "---\ntitle: Use SQLite\ntype: decision\ntags:\n- storage\n"
        "permalink: decisions/use-sqlite\ncreated: 2024-01-05\n---\n\nOne file, no server.\n",
    )
    write(notes / "decisions" / "image.png", "not a note")
    result, _ = import_twice(repo, str(notes))
    assert (result["format"], result["added"], result["skipped"]) == ("markdown", 2, 0)
    by_title = {m["title"]: m for m in memories(repo)}
    coffee = by_title["Coffee Brewing Methods"]
    assert coffee["kind"] == "note"
    assert coffee["tags"] == ["brewing", "coffee", "technique"]
    assert coffee["content"].startswith("## Observations")  # the repeated title left out
    assert "[[Coffee Bean Origins]]" in coffee["content"]
    assert coffee["imported"]["permalink"] == "coffee-brewing-methods"
    sqlite = by_title["Use SQLite"]
    assert (sqlite["kind"], sqlite["created_at"]) == ("decision", "2024-01-05T00:00:00.000Z")
    assert sqlite["imported"]["path"] == "decisions/db/use-sqlite.md"
    # The permalink is the note's identity: moved, it is the same memory.
    (notes / "decisions" / "db" / "use-sqlite.md").rename(notes / "use-sqlite.md")
    moved = json.loads(engram(repo, "import", str(notes), "--json").stdout)
    assert (moved["added"], moved["updated"], moved["unchanged"]) == (0, 1, 1)
    assert recalled(repo, "server") == ["Use SQLite"]


def test_an_obsidian_vault_imports(repo: Path, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / ".obsidian" / "app.json", "{}")
    write(vault / ".obsidian" / "plugins" / "x.md", "# not a note")
    write(vault / ".trash" / "old.md", "# thrown away")
    write(
        vault / "Projects" / "Auth rewrite.md",
        "Tokens move to [[Session store|sessions]] #security #project/auth\n\n"
        "```\n#not-a-tag in code\n```\nSee https://example.com/a#frag and `#inline`.\n",
    )
    write(vault / "Daily" / "2024-05-01.md", "---\ntags: daily\naliases: [May Day]\n---\nQuiet.")
    write(vault / "attachment.pdf", "%PDF")
    result, _ = import_twice(repo, str(vault))
    assert (result["format"], result["added"], result["skipped"]) == ("obsidian", 2, 0)
    by_title = {m["title"]: m for m in memories(repo)}
    assert set(by_title) == {"Auth rewrite", "2024-05-01"}
    auth = by_title["Auth rewrite"]
    assert auth["tags"] == ["project/auth", "security"]
    assert auth["content"].startswith("Tokens move to [[Session store|sessions]]")
    assert by_title["2024-05-01"]["tags"] == ["daily"]
    assert by_title["2024-05-01"]["imported"]["aliases"] == ["May Day"]
    assert recalled(repo, "tokens") == ["Auth rewrite"]


def test_a_documentation_folder_takes_each_pages_heading_as_its_title(
    repo: Path, tmp_path: Path
) -> None:
    """A docs/ folder (no front matter, no vault): a page's `# Heading` is its title."""
    docs = tmp_path / "docs"
    write(docs / "tutorial" / "options-autocompletion.md", "# CLI Option autocompletion\n\nTab.")
    write(docs / "release-notes.md", "Latest changes, newest first.\n\n## 0.9\n")
    write(docs / "vault-like.md", "---\ntitle: From front matter\n---\n# Other heading\nText.")
    result, _ = import_twice(repo, str(docs))
    assert (result["format"], result["added"]) == ("markdown", 3)
    by_title = {m["title"]: m["content"] for m in memories(repo)}
    assert by_title == {
        "CLI Option autocompletion": "Tab.",
        "release-notes": "Latest changes, newest first.\n\n## 0.9",
        "From front matter": "# Other heading\nText.",
    }


def test_a_broken_front_matter_names_its_file_and_the_rest_imports(
    repo: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    write(notes / "good.md", "---\ntitle: Good note\n---\nFine.\n")
    write(notes / "sub" / "bad.md", "---\ntitle: Bad\ntags: [unclosed\n---\nBody.\n")
    result, errors = import_twice(repo, str(notes))
    assert (result["added"], result["skipped"]) == (1, 1)
    [problem] = result["errors"]
    assert problem.startswith(f"{notes}/sub/bad.md:")
    assert "broken YAML front matter" in problem
    assert f"skipped {notes}/sub/bad.md:" in errors
    assert recalled(repo, "fine") == ["Good note"]


def test_engrams_own_vault_is_recognised(repo: Path, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write(vault / "mine.md", "My own note about #deploys.")
    assert engram(repo, "remember", "Ship small", "Small PRs merge faster.").returncode == 0
    exported = engram(repo, "obsidian-export", "--vault", str(vault))
    assert exported.returncode == 0, exported.stderr
    result, errors = import_twice(repo, str(vault))
    assert (result["format"], result["added"], result["skipped"]) == ("markdown", 1, 0)
    assert "written by engram obsidian-export left out" in errors
    assert sorted(m["title"] for m in memories(repo)) == ["Ship small", "mine"]


def test_a_folder_without_notes_or_chunks_is_refused(repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    write(empty / "readme.txt", "nothing here")
    done = engram(repo, "import", str(empty))
    assert done.returncode != 0
    assert f"{empty}: no .md notes, manifest.json or chunks/ to import" in done.stderr.decode()
