"""Go engram's command lines run against engram: save, search, context, sync, timeline, serve.

Each test runs the real ``engram`` command (``python -m engram``) in a real git repository,
with the flags Go engram's CLI takes (cmd/engram/main.go): ``save TITLE MSG --type --project
--scope --topic``, ``search QUERY --type --project --limit``, ``context PROJECT``, ``sync
--import | --all | --project P``, ``timeline ID --before --after``, ``serve PORT``, ``--version``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engram.model import go_int_id
from tests.conftest import run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def engram(root: Path, *args: str) -> tuple[int, str, str]:
    done = run_cli(*args, cwd=root)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def ok(root: Path, *args: str) -> str:
    code, out, err = engram(root, *args)
    assert code == 0, (args, out, err)
    return out


def search(root: Path, *args: str) -> list[dict[str, Any]]:
    return [hit["memory"] for hit in json.loads(ok(root, "search", *args, "--json"))["hits"]]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A git repository in a folder named shop, set up as engram's project shop."""
    root = tmp_path / "shop"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    ok(root, "init", "--project", "shop")
    return root


def chunk_texts(root: Path) -> list[str]:
    folder = root / ".engram" / "chunks"
    files = sorted(folder.glob("*.jsonl.gz")) if folder.is_dir() else []
    return [gzip.decompress(path.read_bytes()).decode() for path in files]


def test_save_with_every_go_flag_is_found_by_search_with_go_filters(shop: Path) -> None:
    saved = ok(
        shop,
        "save",
        "Run the suite with make test",
        "make test runs pytest with warnings as errors",
        "--type",
        "command",
        "--project",
        "shop",
        "--topic",
        "cmd/test",
        "--scope",
        "project",
    ).strip()
    ok(shop, "save", "The suite lives in tests/", "suite layout: flat files", "--type", "decision")
    for number in range(3):
        ok(shop, "save", f"suite command {number}", "make suite", "--type", "command")

    hits = search(shop, "suite", "--type", "command", "--project", "shop", "--limit", "10")
    assert len(hits) == 4
    assert {hit["type"] for hit in hits} == {"command"}  # Go's type kept as written
    first = next(hit for hit in hits if hit["id"] == saved)
    assert (first["kind"], first["topic_key"], first["project"], first["scope"]) == (
        "note",
        "cmd/test",
        "shop",
        "project",
    )
    assert len(search(shop, "suite", "--type", "command", "--limit", "2")) == 2
    decisions = search(shop, "suite", "--type", "decision", "--project", "shop")
    assert [hit["title"] for hit in decisions] == ["The suite lives in tests/"]
    assert "type" not in decisions[0]  # a kind engram knows is only the kind
    assert search(shop, "suite", "--type", "command", "--project", "elsewhere") == []

    # The same --topic updates that memory, as Go's topic key does.
    code, out, err = engram(
        shop, "save", "Run the suite: make test", "now with -x", "--topic", "cmd/test"
    )
    assert (code, out.strip()) == (0, saved)
    assert "updated the memory with topic key cmd/test (rev 2)" in err

    # Go's plain-text search lists the same memory.
    out = ok(shop, "search", "make test", "--type", "command", "--limit", "1")
    assert out.splitlines()[0].startswith(f" 1. {saved[:8]}  note         Run the suite: make test")


def test_save_scope_personal_goes_to_the_personal_store(shop: Path) -> None:
    rid = ok(
        shop, "save", "I prefer tabs", "my own habit", "--scope", "personal", "--type", "preference"
    )
    personal = Path(os.environ["ENGRAM_HOME"]) / "memories.jsonl"
    assert rid.strip() in personal.read_text(encoding="utf-8")
    assert rid.strip() not in (shop / ".engram" / "memories.jsonl").read_text(encoding="utf-8")
    hits = search(shop, "tabs", "--type", "preference")
    assert [(hit["scope"], hit["kind"]) for hit in hits] == [("personal", "preference")]


def test_context_project_is_this_repository_or_a_clear_error(shop: Path) -> None:
    ok(shop, "save", "Money is integer cents", "never floats", "--type", "decision")
    plain = ok(shop, "context")
    assert "Money is integer cents" in plain
    assert ok(shop, "context", "shop") == plain
    assert ok(shop, "context", "Shop") == plain  # names compare as engram compares them
    code, out, err = engram(shop, "context", "billing")
    assert (code, out) == (1, "")
    assert "error: PROJECT 'billing' is not this repository's project ('shop')" in err
    assert "engram -C PATH context" in err


def test_context_project_may_be_the_folder_name_go_plugins_send(tmp_path: Path) -> None:
    root = tmp_path / "web-client"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    ok(root, "init", "--project", "storefront")
    assert ok(root, "context", "web-client") == ok(root, "context")


def test_sync_import_all_and_project_as_go_means_them(shop: Path, tmp_path: Path) -> None:
    ok(shop, "save", "Shop decision", "ours", "--type", "decision")
    ok(shop, "save", "Billing note", "theirs", "--project", "billing")

    # --import only imports: no chunk is written, the changes stay pending.
    out = ok(shop, "sync", "--import")
    assert out.splitlines()[-1] == "import only (--import): no chunk written"
    assert chunk_texts(shop) == []
    assert "2 changed memories to export" in ok(shop, "sync", "--status")

    # --project exports that project's changes only; the rest wait.
    out = ok(shop, "sync", "--project", "shop")
    assert "exported 1 memory as chunk" in out
    [text] = chunk_texts(shop)
    assert "Shop decision" in text and "Billing note" not in text
    assert "1 changed memory to export" in ok(shop, "sync", "--status")

    # --all exports every project's changes.
    assert "exported 1 memory as chunk" in ok(shop, "sync", "--all")
    assert sum("Billing note" in text for text in chunk_texts(shop)) == 1
    assert "nothing to export" in ok(shop, "sync", "--all")

    # Another clone with the chunks only: --import brings both memories in, writes no chunk.
    other = tmp_path / "other" / "shop"
    other.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    ok(other, "init", "--project", "shop")
    shutil.copytree(shop / ".engram" / "chunks", other / ".engram" / "chunks")
    shutil.copy(shop / ".engram" / "manifest.json", other / ".engram" / "manifest.json")
    before = sorted(p.name for p in (other / ".engram" / "chunks").iterdir())
    out = ok(other, "sync", "--import")
    assert out.splitlines()[0].startswith("imported 2 chunks (added 2,")
    assert sorted(p.name for p in (other / ".engram" / "chunks").iterdir()) == before
    assert {hit["title"] for hit in search(other, "", "--all-projects")} == {
        "Shop decision",
        "Billing note",
    }
    assert ok(other, "sync", "--import").splitlines()[0].startswith("imported 0 chunks")


def test_timeline_takes_go_integer_ids(shop: Path) -> None:
    first = ok(shop, "save", "Step one", "first").strip()
    ok(shop, "save", "Step two", "second")
    out = ok(shop, "timeline", str(go_int_id(first)), "--before", "2", "--after", "2")
    lines = out.splitlines()
    assert lines[0] == "timeline in project (no session)"
    assert lines[1].startswith(">> ") and lines[1].endswith("Step one")
    assert lines[2].endswith("Step two")
    assert ok(shop, "get", str(go_int_id(first))).startswith(first)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("search", "x", "--limit", "abc"), "'--limit'"),
        (("search", "x", "--type", "t" * 300), "--type: type is 300 characters long"),
        (("save", "t", "m", "--type", "t" * 300), "--type: type is 300 characters long"),
        (("save", "t", "m", "--type", "decision", "--kind", "pitfall"), "--type 'decision'"),
        (("save", "t", "m", "--topic", "a", "--topic-key", "b"), "--topic 'a' and --topic-key"),
        (("save", "t", "m", "--scope", "team"), "scope"),
        (("search", "x", "--type", "decision", "--kind", "pitfall"), "--type 'decision'"),
        (("sync", "--all", "--project", "shop"), "--all and --project 'shop'"),
        (("sync", "--import", "--remote", "origin"), "--import only reads"),
        (("sync", "--project", " "), "--project: no project name given"),
        (("serve", "70000"), "'PORT'"),
        (("serve", "8080", "--port", "8081"), "PORT 8080 and --port 8081 differ"),
    ],
)
def test_bad_go_flag_values_are_refused_naming_the_flag(
    shop: Path, args: tuple[str, ...], named: str
) -> None:
    code, out, err = engram(shop, *args)
    assert code != 0 and out == ""
    assert named in err, err


def test_version_flags(shop: Path) -> None:
    for flag in ("--version", "-v"):
        out = ok(shop, flag)
        assert out.startswith("engram ") and len(out.splitlines()) == 1
        assert out == ok(shop, "version").splitlines()[0] + "\n"
