"""Obsidian export: notes, front matter, wikilinks, hubs, incremental runs and the user's files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import frontmatter
import pytest

from engram.errors import InvalidInput
from engram.formats.obsidian import MANIFEST_NAME, export_vault

WIKILINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]*))?\]\]")
OLD = 1_000_000_000  # an mtime long past: a file that keeps it was not rewritten

A = "aaaaaaaa2222222222"
B = "bbbbbbbb3333333333"
C = "cccccccc4444444444"
D = "dddddddd5555555555"


def _mem(id_: str, title: str, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": id_,
        "kind": "decision",
        "title": title,
        "content": f"Content of {title}.",
        "status": "active",
        "project": "ledger",
        "importance": 3,
        "source": "agent",
        "author": "Ada",
        "created_at": "2026-01-10T09:00:00.000Z",
        "updated_at": "2026-01-10T09:00:00.000Z",
        "rev": 1,
    }
    record.update(extra)
    return record


def _tomb(record: dict[str, Any], when: str = "2026-03-01T00:00:00.000Z") -> dict[str, Any]:
    return {
        "id": record["id"],
        "rev": record["rev"] + 1,
        "updated_at": when,
        "deleted_at": when,
        "kind": record["kind"],
        "title": record["title"],
        "created_at": record["created_at"],
    }


def _store() -> list[dict[str, Any]]:
    """A decision that supersedes an older one, a pitfall on a shared file, a deleted memory."""
    old = _mem(B, "Use JSON files for the index", status="superseded", files=["src/index.py"])
    new = _mem(
        A,
        "Use SQLite for the index",
        tags=["db", "index"],
        files=["src/db.py", "src/index.py"],
        links=[{"rel": "supersedes", "to": B}],
        updated_at="2026-02-01T10:00:00.000Z",
        rev=2,
    )
    gone = _mem(D, "Vacuum on every write")
    pitfall = _mem(
        C,
        "WAL files grow without checkpoints",
        kind="pitfall",
        files=["src/db.py"],
        links=[{"rel": "relates", "to": D}, {"rel": "caused_by", "to": A}],
    )
    return [new, old, pitfall, _tomb(gone)]


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _age(root: Path) -> None:
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (OLD, OLD))


def _fresh(root: Path) -> set[str]:
    """Return the files written since ``_age`` (their mtime moved)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.stat().st_mtime != OLD
    }


def _note(vault: Path, id_: str) -> str:
    manifest = json.loads((vault / "engram" / MANIFEST_NAME).read_text())
    path: str = manifest["notes"][id_]["path"]
    return path


def _links(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2) or "") for m in WIKILINK.finditer(text)]


def test_export_writes_notes_with_front_matter_links_and_hubs(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    result = export_vault(_store(), vault)

    assert len(result.written) == 3 and result.removed == [] and result.unchanged == 0
    assert result.written == sorted(result.written)
    assert all(p.startswith("engram/memories/") for p in result.written)
    assert result.hubs == [
        "engram/files/src-db-py.md",
        "engram/files/src-index-py.md",
        "engram/kinds/decision.md",
        "engram/kinds/pitfall.md",
    ]
    assert result.to_dict()["unchanged"] == 0
    # The deleted memory has no note; the three live ones each have theirs.
    notes = sorted((vault / "engram" / "memories").iterdir())
    assert [p.name for p in notes] == [
        f"use-json-files-for-the-index-{B[:8]}.md",
        f"use-sqlite-for-the-index-{A[:8]}.md",
        f"wal-files-grow-without-checkpoints-{C[:8]}.md",
    ]

    post = frontmatter.load(str(vault / _note(vault, A)))
    assert post.metadata == {
        "id": A,
        "kind": "decision",
        "status": "active",
        "aliases": ["Use SQLite for the index"],
        "tags": ["db", "index"],
        "files": ["src/db.py", "src/index.py"],
        "project": "ledger",
        "created": "2026-01-10T09:00:00.000Z",
        "updated": "2026-02-01T10:00:00.000Z",
        "source": "agent",
        "author": "Ada",
        "importance": 3,
        "engram": True,
    }
    assert post.content.startswith("# Use SQLite for the index\n\nContent of Use SQLite")
    assert "## Links" in post.content

    # Every wikilink in every exported file resolves to a note that exists.
    for rel, data in _files(vault).items():
        for target, _ in _links(data.decode()):
            assert (vault / f"{target}.md").is_file(), f"{rel} links to missing {target}"

    a_links = post.content
    b_target = _note(vault, B)[: -len(".md")]
    assert f"- supersedes [[{b_target}|Use JSON files for the index]]" in a_links
    assert "- kind: [[engram/kinds/decision|decision]]" in a_links
    assert "- file: [[engram/files/src-db-py|src/db.py]]" in a_links
    assert "- file: [[engram/files/src-index-py|src/index.py]]" in a_links
    c_text = (vault / _note(vault, C)).read_text()
    assert f"- relates `{D}` (not exported)" in c_text  # the deleted memory: no dead wikilink
    assert f"- caused_by [[{_note(vault, A)[:-3]}|Use SQLite for the index]]" in c_text

    def members(hub: str) -> set[str]:
        return {t for t, _ in _links((vault / "engram" / hub).read_text())}

    a, b, c = (_note(vault, i)[:-3] for i in (A, B, C))
    assert members("kinds/decision.md") == {a, b}
    assert members("kinds/pitfall.md") == {c}
    assert members("files/src-db-py.md") == {a, c}
    assert members("files/src-index-py.md") == {a, b}
    hub = frontmatter.load(str(vault / "engram/files/src-db-py.md"))
    assert hub.metadata == {"engram": True, "hub": "file", "file": "src/db.py"}
    assert hub.content.startswith("# src/db.py\n")


def test_a_second_export_without_changes_rewrites_nothing(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    export_vault(_store(), vault)
    before = _files(vault)
    _age(vault)

    result = export_vault(_store(), vault)

    assert result.written == [] and result.removed == [] and result.hubs == []
    assert result.unchanged == 3
    assert _fresh(vault) == set()
    assert _files(vault) == before


def test_a_changed_memory_rewrites_its_note_and_only_the_hubs_it_affects(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    records = _store()
    export_vault(records, vault)
    _age(vault)

    records[0] = {**records[0], "content": "SQLite, with WAL.", "rev": 3}
    result = export_vault(records, vault)
    a_path = _note(vault, A)
    assert result.written == [a_path] and result.hubs == [] and result.unchanged == 2
    assert _fresh(vault) == {a_path, f"engram/{MANIFEST_NAME}"}
    assert "SQLite, with WAL." in (vault / a_path).read_text()

    # A new title moves the note; the notes and hubs that name it follow, nothing else.
    _age(vault)
    records[0] = {**records[0], "title": "Use SQLite (WAL) for the index", "rev": 4}
    result = export_vault(records, vault)
    new_a = _note(vault, A)
    assert new_a == f"engram/memories/use-sqlite-wal-for-the-index-{A[:8]}.md"
    assert result.removed == [a_path] and not (vault / a_path).exists()
    assert result.written == sorted([new_a, _note(vault, C)])  # C links to A by title
    assert result.hubs == [
        "engram/files/src-db-py.md",
        "engram/files/src-index-py.md",
        "engram/kinds/decision.md",
    ]
    assert result.unchanged == 1
    assert _note(vault, B) not in _fresh(vault)
    assert "engram/kinds/pitfall.md" not in _fresh(vault)


def test_incremental_exports_end_where_a_fresh_export_starts(tmp_path: Path) -> None:
    """After edits, renames, deletes and additions, the vault is byte for byte a fresh export."""
    vault = tmp_path / "vault"
    records = _store()
    steps = [
        lambda rs: [{**rs[0], "title": "SQLite index", "rev": 5}, *rs[1:]],
        lambda rs: [*rs, _mem(D, "Vacuum on every write, again", rev=9, files=["src/db.py"])],
        lambda rs: [rs[0], _tomb(rs[1]), *rs[2:]],
        lambda rs: [{**r, "kind": "pattern"} if r["id"] == C else r for r in rs],
        lambda rs: [r for r in rs if r["id"] != A],
    ]
    export_vault(records, vault)
    for step in steps:
        records = step(records)
        export_vault(records, vault)
        fresh = tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}"
        export_vault(records, fresh)
        assert _files(vault) == _files(fresh)


def test_deleted_memories_lose_their_notes_and_hubs_follow(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    records = _store()
    export_vault(records, vault)
    b_path, c_path = _note(vault, B), _note(vault, C)

    records[1] = _tomb(records[1])  # B deleted: a tombstone
    del records[2]  # C gone from the store altogether
    result = export_vault(records, vault)

    assert result.removed == sorted([b_path, c_path, "engram/kinds/pitfall.md"])
    assert not (vault / b_path).exists() and not (vault / c_path).exists()
    assert not (vault / "engram/kinds/pitfall.md").exists()
    a_text = (vault / _note(vault, A)).read_text()
    assert f"- supersedes `{B}` (not exported)" in a_text
    assert {t for t, _ in _links((vault / "engram/kinds/decision.md").read_text())} == {
        _note(vault, A)[:-3]
    }
    manifest = json.loads((vault / "engram" / MANIFEST_NAME).read_text())
    assert set(manifest["notes"]) == {A}


def test_the_users_own_notes_are_never_touched(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    records = _store()
    a_name = f"use-sqlite-for-the-index-{A[:8]}.md"
    mine = {
        "Ideas.md": b"# my ideas\n",
        "engram/my-notes.md": b"mine, inside the export folder\n",
        f"engram/memories/{a_name}": b"my note that happens to have the name\n",
        "engram/kinds/Decision.md": b"my decision hub (another case)\n",
        "engram/files/src-db-py.md": b"my file notes\n",
    }
    for rel, data in mine.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_bytes(data)

    export_vault(records, vault)
    for rel, data in mine.items():
        assert (vault / rel).read_bytes() == data
    a_path = _note(vault, A)
    assert a_path == f"engram/memories/{a_name[:-3]}-2.md"
    a_text = (vault / a_path).read_text()
    assert "[[engram/kinds/decision-2|decision]]" in a_text
    assert "[[engram/files/src-db-py-2|src/db.py]]" in a_text
    for target, _ in _links(a_text):
        assert (vault / f"{target}.md").is_file()

    # The user edits an exported note: it is theirs now, and the export writes beside it.
    b_path = _note(vault, B)
    (vault / b_path).write_text("my edits to an exported note\n")
    records[1] = {**records[1], "content": "changed in engram", "rev": 2}
    result = export_vault(records, vault)
    assert (vault / b_path).read_text() == "my edits to an exported note\n"
    assert _note(vault, B) == b_path[:-3] + "-2.md"
    assert result.removed == []

    # Everything deleted: every exported note and hub goes, every file of the user's stays.
    result = export_vault([_tomb(r) if "deleted_at" not in r else r for r in records], vault)
    assert len(result.removed) == 3 + 4
    assert _files(vault) == {
        **mine,
        b_path: b"my edits to an exported note\n",
        f"engram/{MANIFEST_NAME}": (vault / "engram" / MANIFEST_NAME).read_bytes(),
    }
    assert json.loads((vault / "engram" / MANIFEST_NAME).read_text())["notes"] == {}


HOSTILE_TITLES = [
    "../../../outside",
    "/etc/passwd",
    'a/b\\c:d*e?f"g<h>i|j',
    "x" * 1000,
    "é" * 300,
    "CON",
    "nul",
    "com1",
    "line\nbreak\x00null\x1bescape",
    ".",
    "..",
    "   ",
    "[[link]] | pipe # hash ^ caret",
]


def test_hostile_titles_files_and_kinds_stay_inside_the_folder(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    records = [
        _mem(
            f"{i:02d}hostile{'z' * 10}",
            title,
            kind="../../kinds" if i == 0 else "decision",
            files=["../../etc/passwd", "/abs/path.py", "C:\\win\\aux.txt", "CON"],
        )
        for i, title in enumerate(HOSTILE_TITLES)
    ]
    export_vault(records, vault)

    assert [p.name for p in tmp_path.iterdir()] == ["vault"]
    assert [p.name for p in vault.iterdir()] == ["engram"]
    reserved = {"con", "prn", "aux", "nul", "com1", "lpt1"}
    written = list((vault / "engram").rglob("*"))
    assert (
        len([p for p in written if p.suffix == ".md"]) == len(HOSTILE_TITLES) + 4 + 2
    )  # 4 file hubs, 2 kind hubs
    for path in written:
        assert path.resolve().is_relative_to((vault / "engram").resolve())
        assert len(path.name.encode()) <= 255
        assert path.name.split(".")[0].lower() not in reserved
        assert not any(ord(ch) < 32 for ch in path.name)
    for i, title in enumerate(HOSTILE_TITLES):
        post = frontmatter.load(str(vault / _note(vault, f"{i:02d}hostile{'z' * 10}")))
        heading = post.content.splitlines()[0]
        assert heading.startswith("# ") and "\x00" not in heading
        assert post.metadata["aliases"][0] == (
            " ".join(title.replace("\x00", " ").replace("\x1b", " ").split()) or records[i]["id"]
        )
        # The title and content are the memory's own markdown; the Links section is ours.
        for target, _ in _links(post.content.split("## Links")[1]):
            assert (vault / f"{target}.md").is_file()


def test_lone_surrogates_and_repeated_files_export_cleanly(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    title = json.loads('"broken \\ud800 title"')
    record = _mem(A, title, files=["src/a.py", "src/a.py"], tags=["x", "x"])
    result = export_vault([record], vault)
    assert result.written == [f"engram/memories/broken-title-{A[:8]}.md"]
    text = (vault / result.written[0]).read_text(encoding="utf-8")
    assert text.count("- file: [[engram/files/src-a-py|src/a.py]]") == 1
    hub = (vault / "engram/files/src-a-py.md").read_text()
    assert hub.count("[[engram/memories/") == 1
    assert frontmatter.loads(text).metadata["files"] == ["src/a.py"]


def test_project_filter_exports_one_project_and_leaves_the_others(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    records = [
        _mem(A, "Ledger decision", project="ledger"),
        _mem(B, "Billing decision", project="billing"),
        _mem(C, "Ledger pitfall", project="Ledger ", kind="pitfall"),
    ]
    result = export_vault(records, vault, project="LEDGER")
    assert result.written == sorted([_note(vault, A), _note(vault, C)])
    assert B not in json.loads((vault / "engram" / MANIFEST_NAME).read_text())["notes"]

    ledger_a = _note(vault, A)
    _age(vault)
    result = export_vault(records[1:2], vault, project="billing")  # A and C not even passed
    assert result.written == [_note(vault, B)] and result.removed == []
    assert (vault / ledger_a).is_file() and ledger_a not in _fresh(vault)
    # The decision hub now lists both projects' decisions.
    hub = (vault / "engram/kinds/decision.md").read_text()
    assert {t for t, _ in _links(hub)} == {ledger_a[:-3], _note(vault, B)[:-3]}


def test_since_exports_the_window_and_leaves_older_notes_as_they_are(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    old = _mem(A, "Old decision", updated_at="2026-01-05T00:00:00.000Z")
    new = _mem(B, "New decision", updated_at="2026-02-10T00:00:00.000Z")
    gone = _mem(C, "Deleted late", updated_at="2026-01-01T00:00:00.000Z")
    result = export_vault([old, new, gone], vault, since="2026-02-01")
    assert result.written == [_note(vault, B)]
    assert A not in json.loads((vault / "engram" / MANIFEST_NAME).read_text())["notes"]

    export_vault([old, new, gone], vault)  # everything
    a_path, c_path = _note(vault, A), _note(vault, C)
    _age(vault)
    edited_old = {**old, "content": "changed, but dated before the window", "rev": 2}
    new2 = {**new, "content": "changed in the window", "updated_at": "2026-02-11T00:00:00.000Z"}
    result = export_vault(
        [edited_old, new2, _tomb(gone, "2026-02-12T00:00:00Z")],
        vault,
        since="2026-02-01T00:00:00Z",
    )
    assert result.written == [_note(vault, B)]
    assert result.removed == [c_path]  # deleted inside the window
    assert a_path not in _fresh(vault)
    # A memory gone without a trace is left alone under --since (its deletion has no date).
    result = export_vault([new2], vault, since="2026-02-01")
    assert result.removed == [] and (vault / a_path).is_file()

    with pytest.raises(InvalidInput):
        export_vault([old], vault, since="last tuesday")


def test_paths_that_leave_the_vault_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "engram").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidInput):
        export_vault(_store(), vault)
    vault2 = tmp_path / "vault2"
    (vault2 / "engram").mkdir(parents=True)
    (vault2 / "engram" / "memories").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidInput):
        export_vault(_store(), vault2)
    assert list(outside.iterdir()) == []
    for folder in ("../escape", "/abs", "", "a/../../b", "bad|name"):
        with pytest.raises(InvalidInput):
            export_vault(_store(), vault2, folder=folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "vault", "vault2"]


def test_a_hand_edited_manifest_never_reaches_other_files(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    victim = tmp_path / "victim.md"
    victim.write_text("precious\n")
    mine = vault / "Ideas.md"
    vault.mkdir()
    mine.write_text("mine\n")
    manifest = {
        "version": 1,
        "notes": {
            D: {"path": "../victim.md", "hash": "x"},
            C: {"path": "engram/../../victim.md", "hash": "x"},
            B: {"path": "Ideas.md", "hash": "x"},
        },
        "hubs": {"kind:x": {"path": "/etc/hosts", "hash": "x"}},
    }
    (vault / "engram").mkdir()
    (vault / "engram" / MANIFEST_NAME).write_text(json.dumps(manifest))
    export_vault([_tomb(_mem(D, "d")), _tomb(_mem(C, "c")), _tomb(_mem(B, "b"))], vault)
    assert victim.read_text() == "precious\n" and mine.read_text() == "mine\n"

    (vault / "engram" / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(InvalidInput) as caught:
        export_vault(_store(), vault)
    assert MANIFEST_NAME in caught.value.message
