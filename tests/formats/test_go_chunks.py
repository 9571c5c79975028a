"""Sync chunks a mixed team shares (issue 17): Go engram reads engram's, engram reads Go's.

Go engram reads every chunk the manifest lists as ONE JSON object and stops its whole import on
the first that does not parse; engram's older chunks (JSON Lines) broke it. ``tests.helpers.
gosync`` models Go's reader and writer from its struct definitions; everything else is real:
files on disk, real git repositories, the CLI in a subprocess.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engram.formats.goimport import id_hex
from engram.model import canonical_line, new_id
from engram.service import Engram
from engram.sync.chunks import CHUNKS, MANIFEST, SUFFIX, chunk_id, read_chunk, write_chunk
from tests.conftest import run_cli
from tests.helpers.gosync import CHUNK, GoError, GoStore, unmarshal

STAMP = "2026-01-02T03:04:05.000Z"
LATER = "2026-01-03T03:04:05.000Z"


def memory(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": new_id(),
        "kind": "decision",
        "title": title,
        "content": f"why: {title}",
        "project": "demo",
        "scope": "project",
        "created_at": STAMP,
        "updated_at": STAMP,
        "rev": 1,
        **extra,
    }


def sync_id(record: dict[str, Any]) -> str:
    return f"obs-{id_hex(record['id'])}"


def chunk_file(engram_dir: Path, ident: str) -> Path:
    return engram_dir / CHUNKS / f"{ident}{SUFFIX}"


def _rich() -> list[dict[str, Any]]:
    return [
        memory(
            "Ünïcödé — 日本語 ✓ <b>&</b>",
            content='naïve café 🎉\nline two\ttab \\ "quoted"',
            tags=["naïve", "日本"],
            files=["src/ünï.py"],
            links=[{"rel": "relates", "to": "x" * 26}],
            anchors=[{"path": "src/ünï.py", "blob": "ab" * 20}],
            topic_key="decision/unicode",
            type="design",
            x_unknown={"nested": [1, 2, {"k": None}], "big": 2**70, "float": 1.5},
            duplicate_count=2,
            rev=3,
        )
    ]


CASES: dict[str, Any] = {
    "no-go-rows": lambda: [
        memory("A Go session", kind="session", source="import:go-engram", session={"id": "s"}),
        memory("A Go row without sync_id", source="import:go-engram", go={"id": 4}),
    ],
    "one": lambda: [memory("Only one")],
    "two": lambda: [memory("First"), memory("Second")],
    "many": lambda: [memory(f"Memory {n}", session_id=f"s{n % 3}") for n in range(60)],
    "personal": lambda: [memory("Mine", scope="personal"), memory("Ours")],
    "unicode": _rich,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_go_reads_every_chunk_engram_writes_and_engram_reads_it_back(
    tmp_path: Path, case: str
) -> None:
    engram_dir = tmp_path / ".engram"
    records = CASES[case]()
    entry = write_chunk(engram_dir, records, created_by="Ana", created_at=STAMP)
    assert entry is not None

    raw = gzip.decompress(chunk_file(engram_dir, entry.id).read_bytes())
    chunk = unmarshal(raw, CHUNK)  # ONE value, every field of Go's type
    go = GoStore()
    assert go.sync_import(engram_dir) == 1
    ours = [r for r in records if r.get("source") != "import:go-engram"]
    assert len(chunk["observations"]) == len(ours)
    assert sorted(go.live()) == sorted(sync_id(r) for r in ours)
    for record in ours:
        row = go.live()[sync_id(record)]
        assert (row["title"], row["content"]) == (record["title"], record["content"])
        assert row["type"] == record.get("type", record["kind"])
        assert (row["project"], row["scope"]) == ("demo", record["scope"])
        assert row["created_at"] == "2026-01-02 03:04:05"
    manifest = json.loads((engram_dir / MANIFEST).read_text("utf-8"))
    assert manifest["version"] == 2
    assert manifest["chunks"][0]["sessions"] == len(chunk["sessions"])

    # engram reads its own records back, every field as written.
    assert read_chunk(engram_dir, entry.id) == sorted(records, key=lambda r: r["id"])


def test_tombstones_reach_go_as_deletes(tmp_path: Path) -> None:
    engram_dir = tmp_path / ".engram"
    soft, hard, kept = memory("Soft"), memory("Hard"), memory("Kept")
    write_chunk(engram_dir, [soft, hard, kept], created_by="Ana", created_at=STAMP)
    go = GoStore()
    go.sync_import(engram_dir)
    assert len(go.live()) == 3
    forgotten = [
        {**soft, "deleted_at": LATER, "updated_at": LATER, "rev": 2},
        {"id": hard["id"], "rev": 2, "updated_at": LATER, "deleted_at": LATER},  # no text
    ]
    entry = write_chunk(engram_dir, forgotten, created_by="Ana", created_at=LATER)
    assert entry is not None
    rows = unmarshal(gzip.decompress(chunk_file(engram_dir, entry.id).read_bytes()), CHUNK)
    assert {r["deleted_at"] for r in rows["observations"]} == {"2026-01-03 03:04:05"}
    assert rows["sessions"] == []  # a delete names no session Go must have
    go.sync_import(engram_dir)
    assert sorted(go.live()) == [sync_id(kept)]
    assert read_chunk(engram_dir, entry.id) == sorted(forgotten, key=lambda r: r["id"])


def _legacy_chunk(engram_dir: Path, records: list[dict[str, Any]]) -> str:
    """Write a chunk exactly as engram wrote them before: gzip'd JSON Lines, listed."""
    data = b"".join(sorted(canonical_line(r) for r in records))
    ident = chunk_id(data)
    chunk_file(engram_dir, ident).parent.mkdir(parents=True, exist_ok=True)
    chunk_file(engram_dir, ident).write_bytes(gzip.compress(data, mtime=0))
    path = engram_dir / MANIFEST
    manifest = json.loads(path.read_text("utf-8")) if path.exists() else {"chunks": []}
    manifest["version"] = 2
    manifest["chunks"].append(
        {"id": ident, "created_by": "Old Ana", "created_at": STAMP, "memories": len(records)}
    )
    path.write_text(json.dumps(manifest, indent=2), "utf-8")
    return ident


def test_the_old_json_lines_chunks_are_what_broke_go(tmp_path: Path) -> None:
    one, two = tmp_path / "one" / ".engram", tmp_path / "two" / ".engram"
    _legacy_chunk(two, [memory("First"), memory("Second")])
    with pytest.raises(GoError, match="Extra data"):  # Go: invalid character '{' after ...
        GoStore().sync_import(two)
    _legacy_chunk(one, [memory("Alone")])
    go = GoStore()
    assert go.sync_import(one) == 1 and go.observations == {}  # imported as empty: lost


def _go_session() -> dict[str, Any]:
    return {
        "id": "go-s1",
        "project": "demo",
        "directory": "/home/gopher/demo",
        "started_at": "2026-03-04 05:06:07",
    }


def _go_row(sync: str, title: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": 7,
        "sync_id": sync,
        "session_id": "go-s1",
        "type": "command",
        "title": title,
        "content": f"Go saved: {title}",
        "project": "demo",
        "scope": "project",
        "revision_count": 1,
        "duplicate_count": 1,
        "created_at": "2026-03-04 05:06:07",
        "updated_at": "2026-03-04 05:06:07",
        **extra,
    }


def _open_clone(tmp_path: Path, name: str) -> Engram:
    root = tmp_path / name
    root.mkdir()
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    engram, _ = Engram.init(root, "demo")
    return engram


def test_sync_rewrites_legacy_chunks_go_reads_all_and_clones_agree(tmp_path: Path) -> None:
    a = _open_clone(tmp_path, "a")
    b = _open_clone(tmp_path, "b")
    try:
        engram_dir = a.project_ws.store.dir
        old = [memory("Old first"), memory("Old second")]
        legacy = _legacy_chunk(engram_dir, old)
        go_chunk = GoStore().sync_export(
            engram_dir, sessions=[_go_session()], observations=[_go_row("obs-go1", "Go's own")]
        )
        for name in (f"{legacy}{SUFFIX}", f"{go_chunk}{SUFFIX}"):  # b applies the old files
            (b.project_ws.store.dir / CHUNKS).mkdir(exist_ok=True)
            shutil.copyfile(engram_dir / CHUNKS / name, b.project_ws.store.dir / CHUNKS / name)
        shutil.copyfile(engram_dir / MANIFEST, b.project_ws.store.dir / MANIFEST)
        with pytest.raises(GoError):
            GoStore().sync_import(engram_dir)  # the legacy chunk stops Go's whole import
        a.remember("A's own", "written on a")

        synced = run_cli("sync", cwd=a.root)
        out = synced.stdout.decode()
        assert synced.returncode == 0, out + synced.stderr.decode()
        said = re.search(
            rf"{CHUNKS}/{legacy}{SUFFIX} \(older engram JSON Lines, which Go engram cannot read\)"
            rf" rewritten as {CHUNKS}/([0-9a-f]{{32}}){SUFFIX} \(2 memories\)",
            out,
        )
        assert said, out
        new = said.group(1)
        assert new in {e["id"] for e in _entries(engram_dir)}
        assert not chunk_file(engram_dir, legacy).exists()
        assert legacy not in {e["id"] for e in _entries(engram_dir)}

        go = GoStore()
        assert go.sync_import(engram_dir) == len(_entries(engram_dir))  # every chunk parses
        titles = {row["title"] for row in go.live().values()}
        assert titles == {"Old first", "Old second", "A's own", "Go's own"}

        # b applied the old chunk (as an older engram would have): the rewritten one, the
        # same chunk on both clones (named by its content), changes nothing there.
        first = b.sync()
        assert first.problems == [] and first.imported.added == 3
        assert [r.new for r in first.rewritten] == [new]
        _forget_applied(b, [new])
        before = b.project_ws.store.path.read_bytes()
        again = b.sync()
        assert again.problems == [] and again.imported_chunks == [new]
        assert (again.imported.added, again.imported.updated, again.imported.unchanged) == (0, 0, 2)
        assert b.project_ws.store.path.read_bytes() == before

        _carry(a, b)
        assert b.sync().imported.added == 1  # A's own
        _carry(b, a)
        a.sync()
        assert a.project_ws.store.path.read_bytes() == b.project_ws.store.path.read_bytes()
        assert {e["id"] for e in _entries(engram_dir)} == {
            e["id"] for e in _entries(b.project_ws.store.dir)
        }
    finally:
        a.close()
        b.close()


def _entries(engram_dir: Path) -> list[dict[str, Any]]:
    return list(json.loads((engram_dir / MANIFEST).read_text("utf-8"))["chunks"])


def _forget_applied(engram: Engram, ids: list[str]) -> None:
    """Make a clone forget it applied these chunks (as one that applied only the old ones)."""
    path = engram.project_ws.store.dir / "state" / "sync.json"
    state = json.loads(path.read_text("utf-8"))
    assert set(ids) <= set(state["applied"])
    state["applied"] = [i for i in state["applied"] if i not in ids]
    path.write_text(json.dumps(state), "utf-8")


def _carry(src: Engram, dst: Engram) -> None:
    """Copy the chunks and the manifest entries one clone has and another lacks (a git pull)."""
    source, target = src.project_ws.store.dir, dst.project_ws.store.dir
    for path in (source / CHUNKS).glob(f"*{SUFFIX}"):
        if not (target / CHUNKS / path.name).exists():
            shutil.copyfile(path, target / CHUNKS / path.name)
    theirs = {e["id"]: e for e in _entries(source)}
    mine = json.loads((target / MANIFEST).read_text("utf-8"))
    known = {e["id"] for e in mine["chunks"]}
    mine["chunks"] += [e for i, e in theirs.items() if i not in known]
    (target / MANIFEST).write_text(json.dumps(mine, indent=2), "utf-8")


def test_each_tool_sees_the_others_memories_in_one_repo(project: Engram) -> None:
    engram_dir = project.project_ws.store.dir
    ours = [project.remember(t, f"engram: {t}").record for t in ("Use SQLite", "Pin deps")]
    assert project.sync().problems == []
    go = GoStore()
    go.sync_import(engram_dir)
    assert sorted(go.live()) == sorted(sync_id(r) for r in ours)

    # Go saves a memory and syncs: its chunk, with a mutations journal, and its manifest.
    row = _go_row("obs-1a2b3c4d5e6f7a8b", "Run make bench before merging")
    mutation = {
        "seq": 1,
        "target_key": "cloud",
        "entity": "observation",
        "entity_key": row["sync_id"],
        "op": "upsert",
        "payload": json.dumps(row),
        "source": "local",
        "project": "demo",
        "occurred_at": "2026-03-04 05:06:07",
    }
    go.sync_export(engram_dir, sessions=[_go_session()], observations=[row], mutations=[mutation])
    manifest = json.loads((engram_dir / MANIFEST).read_text("utf-8"))
    assert manifest["version"] == 2  # Go's ownership mode; engram never lowers it

    report = project.sync()  # after Go rewrote the manifest through its own struct
    assert report.problems == [] and report.imported.added == 1
    (mine,) = [r for r in project.project_ws.store.read_all() if r["title"] == row["title"]]
    assert mine.get("type") == "command"
    assert len(report.imported_chunks) == 1  # engram's own chunk is not applied twice

    # engram edits Go's memory and forgets one of its own; Go sees both, duplicating nothing.
    project.update(mine["id"], title="Run make bench before every merge")
    project.forget(ours[0]["id"])
    assert project.sync().problems == []
    go.sync_import(engram_dir)
    assert sorted(go.live()) == sorted([row["sync_id"], sync_id(ours[1])])
    assert go.live()[row["sync_id"]]["title"] == "Run make bench before every merge"
    assert go.observations[sync_id(ours[0])]["deleted_at"]
    assert go.sessions["go-s1"]["directory"] == "/home/gopher/demo"  # never overwritten
    assert not project.sync().imported_chunks  # nothing new either way


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"observations": [{"id": "7"}]}', "int64"),
        (b'{"observations": [{"id": 7.5}]}', "int64"),
        (b'{"observations": [{"id": 9223372036854775808}]}', "out of range"),
        (b'{"observations": [{"title": 3}]}', "string"),
        (b'{"observations": {"a": 1}}', "slice"),
        (b'{"sessions": []}\n{"sessions": []}\n', "Extra data"),
        (b'[{"sessions": []}]', "Go value"),
    ],
)
def test_the_go_model_refuses_what_go_refuses(data: bytes, reason: str) -> None:
    with pytest.raises(GoError, match=reason):
        unmarshal(data, CHUNK)
    # ... and accepts what Go accepts: nulls, unknown keys, keys in another case.
    loose = b'{"Sessions": null, "observations": [{"ID": 1, "tool_name": null}], "x": {"y": [1]}}'
    assert unmarshal(loose, CHUNK) == {
        "sessions": None,
        "observations": [{"id": 1, "tool_name": None}],
    }


def test_a_legacy_chunk_is_rewritten_scrubbed(project: Engram) -> None:
    """The rewrite goes through the chunk writer: a secret an older clone committed goes too."""
    engram_dir = project.project_ws.store.dir
    key = "sk-ant-" + "a1B2" * 8
    legacy = _legacy_chunk(engram_dir, [memory("Deploy key", content=f"use {key}")])
    report = project.sync()
    (rewritten,) = report.rewritten
    assert rewritten.old == legacy and rewritten.new and rewritten.memories == 1
    raw = gzip.decompress(chunk_file(engram_dir, rewritten.new).read_bytes())
    assert key.encode() not in raw and b"Deploy key" in raw
    assert report.to_dict()["rewritten"] == [rewritten.to_dict()]


def test_sync_reports_left_out_rows_routes_personal_ones_and_edits_update(
    project: Engram,
) -> None:
    """`engram sync` of Go chunks: skipped rows and notes said, personal rows to ENGRAM_HOME."""
    engram_dir = project.project_ws.store.dir
    go = GoStore()
    bare = {"id": "go-s9", "project": "demo", "started_at": "2026-03-04 05:06:07"}
    shared = {**_go_row("obs-aaaa1111", "Pin the Go toolchain"), "id": 11}
    mine = {**_go_row("obs-bbbb2222", "My editor keybindings", scope="personal"), "id": 12}
    old = {**_go_row("", "An old row without sync_id"), "id": 31}
    del old["sync_id"]
    first = go.sync_export(
        engram_dir, sessions=[_go_session(), bare], observations=[shared, mine, old]
    )

    synced = run_cli("sync", cwd=project.root)
    out, err = synced.stdout.decode(), synced.stderr.decode()
    assert synced.returncode == 0, out + err
    # Three rows saved in one second of one session are three memories (ids 11, 12, 31).
    assert re.search(r"imported 1 chunk \(added 3, updated 0, unchanged 0, skipped 2\)", out), out
    name = f"{CHUNKS}/{first}{SUFFIX}"
    assert f"skipped {name}: " in err and "session 'go-s9' has no summary" in err, err
    assert "session 'go-s1' has no summary, so it is no memory" in err, err
    assert "note: 1 row of scope personal went to the personal store" in err, err

    committed = project.project_ws.store.path.read_text("utf-8")
    assert "Pin the Go toolchain" in committed and "An old row without sync_id" in committed
    assert "keybindings" not in committed  # a personal row never reaches the project's git
    personal = project.personal()
    assert personal is not None
    assert [r["title"] for r in personal.store.read_all()] == ["My editor keybindings"]

    # Go edits two rows (the old one now with the random sync_id an upgrade gives it) and
    # syncs again: engram updates both memories, forks none, and moves none between stores.
    edited = {
        **shared,
        "title": "Pin the Go toolchain to 1.23",
        "updated_at": "2026-03-05 00:00:00",
    }
    upgraded = {**old, "sync_id": "obs-cccc3333", "content": "Go saved: now with sync_id"}
    upgraded["updated_at"] = "2026-03-05 00:00:00"
    personal_edit = {**mine, "content": "vim, always", "updated_at": "2026-03-05 00:00:00"}
    go.sync_export(
        engram_dir, sessions=[_go_session()], observations=[edited, upgraded, personal_edit]
    )
    report = project.sync()
    assert report.problems == []
    assert (report.imported.added, report.imported.updated) == (0, 3), report.imported.to_dict()
    assert report.imported.personal == 1
    live = [r for r in project.project_ws.store.read_all() if not r.get("deleted")]
    assert sorted(r["title"] for r in live) == [
        "An old row without sync_id",
        "Pin the Go toolchain to 1.23",
    ]
    assert [r["content"] for r in personal.store.read_all()] == ["vim, always"]
    as_json = run_cli("sync", "--json", cwd=project.root)
    assert json.loads(as_json.stdout)["imported"]["notes"] == []  # nothing new: nothing said
