"""Go engram both ways (issue 17): its files in without forks or losses, engram's out to it.

The Go documents here are shaped as Go engram's own code writes them (its Export and sync
chunks: field names, int ids, "YYYY-MM-DD HH:MM:SS" UTC times, v1.7 rows without sync_id, newer
rows with sync_id and a mutations journal), written for these tests. ``go_import`` decodes an
export the way Go's structs do and checks what its Import needs.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from engram.formats.common import import_id
from engram.formats.goimport import id_hex
from engram.model import go_int_id
from engram.service import Engram
from engram.sync.transfer import merge_in
from tests.conftest import run_cli

# ── Go's side ────────────────────────────────────────────────────────────────────────────────

GO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")


class GoRefused(Exception):
    """What Go engram's json decoding or its Import would fail on."""


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""  # json null into a Go string leaves it empty
    if not isinstance(value, str):
        raise GoRefused(f"json: cannot unmarshal {type(value).__name__} into string {where}")
    return value


def _pointer(value: Any, where: str) -> str | None:
    return None if value is None else _string(value, where)


def _int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise GoRefused(f"json: cannot unmarshal {type(value).__name__} into int64 {where}")
    return value


def _go_time(value: str | None, where: str) -> None:
    if value and not GO_TIME.match(value):
        raise GoRefused(f"{where}: {value!r} is not Go's time format")


def go_import(text: str) -> dict[str, list[dict[str, Any]]]:
    """Decode an export as Go's ExportData and apply its Import's constraints."""
    data = json.loads(text)
    _string(data.get("version"), "ExportData.version")
    _go_time(_string(data.get("exported_at"), "ExportData.exported_at"), "exported_at")
    sessions = []
    for row in data.get("sessions") or []:
        session = {
            "id": _string(row.get("id"), "Session.id"),
            "project": _string(row.get("project"), "Session.project"),
            "directory": _string(row.get("directory"), "Session.directory"),
            "started_at": _string(row.get("started_at"), "Session.started_at"),
            "ended_at": _pointer(row.get("ended_at"), "Session.ended_at"),
            "summary": _pointer(row.get("summary"), "Session.summary"),
        }
        _go_time(session["started_at"], "started_at")
        _go_time(session["ended_at"], "ended_at")
        sessions.append(session)
    observations = []
    for row in data.get("observations") or []:
        obs = {
            "id": _int(row.get("id"), "Observation.id"),
            "sync_id": _string(row.get("sync_id"), "Observation.sync_id"),
            "session_id": _string(row.get("session_id"), "Observation.session_id"),
            "type": _string(row.get("type"), "Observation.type"),
            "title": _string(row.get("title"), "Observation.title"),
            "content": _string(row.get("content"), "Observation.content"),
            "tool_name": _pointer(row.get("tool_name"), "Observation.tool_name"),
            "project": _pointer(row.get("project"), "Observation.project"),
            "scope": _string(row.get("scope"), "Observation.scope"),
            "topic_key": _pointer(row.get("topic_key"), "Observation.topic_key"),
            "revision_count": _int(row.get("revision_count"), "Observation.revision_count"),
            "duplicate_count": _int(row.get("duplicate_count"), "Observation.duplicate_count"),
            "last_seen_at": _pointer(row.get("last_seen_at"), "Observation.last_seen_at"),
            "review_after": _pointer(row.get("review_after"), "Observation.review_after"),
            "created_at": _string(row.get("created_at"), "Observation.created_at"),
            "updated_at": _string(row.get("updated_at"), "Observation.updated_at"),
            "deleted_at": _pointer(row.get("deleted_at"), "Observation.deleted_at"),
        }
        for key in ("created_at", "updated_at", "deleted_at", "last_seen_at"):
            _go_time(obs[key], key)
        if not obs["type"] or not obs["title"]:
            raise GoRefused(f"observation {obs['id']}: type and title are NOT NULL")
        observations.append(obs)
    prompts = []
    for row in data.get("prompts") or []:
        prompt = {
            "id": _int(row.get("id"), "Prompt.id"),
            "sync_id": _string(row.get("sync_id"), "Prompt.sync_id"),
            "session_id": _string(row.get("session_id"), "Prompt.session_id"),
            "content": _string(row.get("content"), "Prompt.content"),
            "project": _string(row.get("project"), "Prompt.project"),
            "created_at": _string(row.get("created_at"), "Prompt.created_at"),
        }
        _go_time(prompt["created_at"], "created_at")
        prompts.append(prompt)
    known = {session["id"] for session in sessions}
    for row in observations + prompts:
        if row["session_id"] not in known:  # FOREIGN KEY (session_id) REFERENCES sessions(id)
            raise GoRefused(f"FOREIGN KEY constraint failed: session {row['session_id']!r}")
    return {"sessions": sessions, "observations": observations, "prompts": prompts}


def session(sid: str, summary: str | None = "Worked on the importer", **fields: Any) -> Any:
    row: dict[str, Any] = {
        "id": sid,
        "project": "demo",
        "directory": "/home/ana/demo",
        "started_at": "2025-04-01 09:00:00",
        "ended_at": "2025-04-01 11:00:00",
    }
    if summary is not None:
        row["summary"] = summary
    return {**row, **fields}


def old_obs(number: int, title: str, content: str, **fields: Any) -> dict[str, Any]:
    """An observation as Go engram v1.7 exports it: no sync_id."""
    row: dict[str, Any] = {
        "id": number,
        "session_id": "sess-1",
        "type": "decision",
        "title": title,
        "content": content,
        "tool_name": "mem_save",
        "project": "demo",
        "scope": "project",
        "revision_count": 1,
        "duplicate_count": 1,
        "last_seen_at": f"2025-04-01 09:{number:02d}:00",
        "created_at": f"2025-04-01 09:{number:02d}:00",
        "updated_at": f"2025-04-01 09:{number:02d}:00",
    }
    return {**row, **fields}


def new_obs(number: int, sync_id: str, title: str, content: str, **fields: Any) -> dict[str, Any]:
    """An observation as newer Go engram exports it: sync_id after id."""
    row = old_obs(number, title, content, **fields)
    return {"id": row.pop("id"), "sync_id": sync_id, **row}


def export_doc(observations: list[Any], **arrays: Any) -> dict[str, Any]:
    return {
        "version": "0.1.0",
        "exported_at": "2025-04-02 08:00:00",
        "sessions": arrays.get("sessions", [session("sess-1")]),
        "observations": observations,
        "prompts": arrays.get("prompts", []),
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def write_chunk(folder: Path, document: dict[str, Any]) -> Path:
    """A Go sync chunk: one gzip'd JSON object named by the first 8 hex of its sha256."""
    raw = json.dumps(document).encode()
    path = folder / f"{hashlib.sha256(raw).hexdigest()[:8]}.jsonl.gz"
    path.write_bytes(gzip.compress(raw, mtime=0))
    return path


def live(engram: Engram) -> list[dict[str, Any]]:
    return [r for r in engram.project_ws.store.read_all() if not r.get("deleted_at")]


def by_title(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["title"]: record for record in records}


# ── identities: edits and upgrades fork nothing ──────────────────────────────────────────────


def test_a_patch_then_a_re_export_updates_the_memory_instead_of_forking(
    project: Engram, tmp_path: Path
) -> None:
    rows = [
        old_obs(1, "Use SQLite", "The index is SQLite."),
        old_obs(2, "Auth model", "Sessions are JWTs.", topic_key="architecture/auth-model"),
    ]
    first = project.import_path(write(tmp_path / "v1.json", export_doc(rows)))
    assert (first.added, first.updated) == (3, 0)  # two observations and the session

    # Go: PATCH /observations/1 rewrites the content; a save with the topic key rewrites #2.
    rows[0].update(content="The index is SQLite with FTS5.", revision_count=2)
    rows[0]["updated_at"] = "2025-04-01 10:00:00"
    rows[1].update(title="Auth model v2", content="Sessions are opaque tokens.", revision_count=2)
    rows[1]["updated_at"] = "2025-04-01 10:05:00"
    second = project.import_path(write(tmp_path / "v2.json", export_doc(rows)))

    assert (second.added, second.updated, second.unchanged) == (0, 2, 1)
    memories = by_title(live(project))
    assert sorted(memories) == ["Auth model v2", "Session: Worked on the importer", "Use SQLite"]
    assert memories["Use SQLite"]["content"] == "The index is SQLite with FTS5."
    assert memories["Use SQLite"]["go"]["revision_count"] == 2


def test_an_upgrade_that_fills_random_sync_ids_duplicates_nothing(
    project: Engram, tmp_path: Path
) -> None:
    rows = [old_obs(n, f"Memory {n}", f"Body {n}.") for n in (1, 2, 3)]
    project.import_path(write(tmp_path / "old.json", export_doc(rows)))
    before = {r["title"]: r["id"] for r in live(project)}

    # The upgraded Go fills in random sync_ids; its export carries them, same rows otherwise.
    upgraded = [
        new_obs(row["id"], f"obs-{n:016x}", row["title"], row["content"])
        for n, row in zip((0x9F3A, 0x11, 0x7E7E), rows, strict=True)
    ]
    result = project.import_path(write(tmp_path / "new.json", export_doc(upgraded)))
    assert result.added == 0
    assert {r["title"]: r["id"] for r in live(project)} == before
    assert by_title(live(project))["Memory 2"]["go"]["sync_id"] == "obs-0000000000000011"

    # Its next sync chunk edits one of them through the journal (payload: no Go id at all).
    payload = {
        "sync_id": "obs-0000000000000011",
        "session_id": "sess-1",
        "type": "decision",
        "title": "Memory 2",
        "content": "Body 2, edited after the upgrade.",
        "project": "demo",
        "scope": "project",
        "revision_count": 2,
        "duplicate_count": 1,
        "created_at": "2025-04-01 09:02:00",
        "updated_at": "2025-04-01 12:00:00",
    }
    chunk = {
        "sessions": [],
        "observations": [],
        "prompts": [],
        "mutations": [
            {
                "seq": 41,
                "target_key": "local",
                "entity": "observation",
                "entity_key": "obs-0000000000000011",
                "op": "upsert",
                "payload": json.dumps(payload),
                "source": "local",
                "project": "demo",
                "occurred_at": "2025-04-01 12:00:00",
            }
        ],
    }
    folder = tmp_path / "chunks"
    folder.mkdir()
    edited = project.import_path(write_chunk(folder, chunk))
    assert (edited.added, edited.updated) == (0, 1)
    assert by_title(live(project))["Memory 2"]["content"] == "Body 2, edited after the upgrade."
    assert {r["title"]: r["id"] for r in live(project)} == before


def test_records_an_older_engram_imported_by_content_hash_are_found(
    project: Engram, tmp_path: Path
) -> None:
    # What engram wrote before stable identities: ids hashed from project, session, type,
    # title and content; no "go" field.
    def legacy_id(title: str, content: str) -> str:
        sha = hashlib.sha256(" ".join(content.split()).casefold().encode()).hexdigest()
        key = "\x1f".join(["demo", "sess-1", "decision", title, sha])
        return import_id("go-engram:obs:" + hashlib.sha256(key.encode()).hexdigest())

    old = [
        {
            "id": legacy_id(f"Memory {n}", f"Body {n}."),
            "kind": "decision",
            "title": f"Memory {n}",
            "content": f"Body {n}.",
            "project": "demo",
            "scope": "project",
            "source": "import:go-engram",
            "session_id": "sess-1",
            "created_at": f"2025-04-01T09:0{n}:00.000Z",
            "updated_at": f"2025-04-01T09:0{n}:00.000Z",
            "rev": 1,
        }
        for n in (1, 2)
    ]
    merge_in(project.project_ws, old)
    rows = [
        new_obs(1, "obs-00000000000000aa", "Memory 1", "Body 1."),  # the upgrade
        old_obs(2, "Memory 2", "Body 2, edited in Go.", updated_at="2025-04-01 10:00:00"),
    ]
    result = project.import_path(write(tmp_path / "later.json", export_doc(rows)))
    assert result.added == 1  # the session only
    assert {r["id"] for r in live(project) if r["kind"] == "decision"} == {o["id"] for o in old}


# ── fields and rows: nothing lost, everything reported ───────────────────────────────────────

GO_TYPES = ("command", "file_change", "passive", "manual", "my_own_type", "decision")


def test_go_types_are_kept_and_go_back_out_unchanged(project: Engram, tmp_path: Path) -> None:
    rows = [
        new_obs(n, f"obs-{n:016x}", f"A {kind} row", f"Body of {kind}.", type=kind)
        for n, kind in enumerate(GO_TYPES, start=1)
    ]
    project.import_path(write(tmp_path / "types.json", export_doc(rows)))
    kinds = {r["title"]: (r["kind"], r.get("type")) for r in live(project)}
    assert kinds["A command row"] == ("note", "command")
    assert kinds["A decision row"] == ("decision", None)
    assert kinds["A my_own_type row"] == ("note", "my_own_type")

    out = go_import(json.dumps(project.export_go().to_dict()))
    assert {o["title"]: o["type"] for o in out["observations"]} == {
        f"A {kind} row": kind for kind in GO_TYPES
    }


def test_a_summary_less_session_is_reported_where_it_is(project: Engram, tmp_path: Path) -> None:
    document = export_doc(
        [old_obs(1, "Kept", "Its session has no summary.", session_id="sess-bare")],
        sessions=[
            session("sess-1"),
            session("sess-bare", summary=None),
            session("sess-empty", None),
        ],
    )
    result = project.import_path(write(tmp_path / "bare.json", document))
    assert result.errors == [
        "sessions[1]: session 'sess-bare' has no summary, so it is no memory; its row is kept "
        "on its 1 observations and prompts here for export --format go-engram",
        "sessions[2]: session 'sess-empty' has no summary and nothing here belongs to it",
    ]
    # Exported back, Go gets the session row as it had it (its foreign key needs it).
    out = go_import(json.dumps(project.export_go().to_dict()))
    bare = next(s for s in out["sessions"] if s["id"] == "sess-bare")
    assert (bare["directory"], bare["started_at"]) == ("/home/ana/demo", "2025-04-01 09:00:00")


def test_personal_rows_go_to_the_personal_store(project: Engram, tmp_path: Path) -> None:
    rows = [
        old_obs(1, "Team rule", "Run make check."),
        old_obs(2, "My editor", "I use helix.", scope="personal", type="preference"),
    ]
    result = project.import_path(write(tmp_path / "scopes.json", export_doc(rows)))
    assert result.personal == 1  # type: ignore[attr-defined]
    assert any("scope personal went to the personal store" in n for n in result.notes)  # type: ignore[attr-defined]
    personal = project.personal()
    assert personal is not None
    assert [r["title"] for r in personal.store.read_all()] == ["My editor"]
    assert "My editor" not in by_title(live(project))
    again = project.import_path(write(tmp_path / "scopes.json", export_doc(rows)))
    assert (again.added, again.updated) == (0, 0)


def test_identical_rows_collapse_and_the_import_says_so(tmp_path: Path, project: Engram) -> None:
    row = new_obs(1, "obs-00000000000000c1", "Same", "Same body.")
    document = export_doc([row, dict(row), dict(row, id=7)])
    path = write(tmp_path / "same.json", document)
    done = run_cli("import", str(path), cwd=project.root)
    assert done.returncode == 0, done.stderr
    assert b"added 2" in done.stdout  # the observation and the session
    assert (
        b"note: collapsed 3 rows into 1 memory (rows of one Go identity; the newest kept): "
        b"observations[0]+observations[1]+observations[2]" in done.stderr
    )


def test_rows_without_a_project_keep_none_and_the_import_says_so(
    project: Engram, tmp_path: Path
) -> None:
    row = old_obs(1, "Nowhere", "No project.")
    del row["project"]
    result = project.import_path(write(tmp_path / "np.json", export_doc([row])))
    assert "project" not in by_title(live(project))["Nowhere"]
    assert result.notes[0].startswith("1 row has no project: kept without one")  # type: ignore[attr-defined]


# ── engram's own memories carried through Go ─────────────────────────────────────────────────


def test_engram_memories_carried_back_keep_their_richer_fields(
    project: Engram, tmp_path: Path
) -> None:
    saved = project.remember(
        "Retry with backoff", "Use exponential backoff.", kind="pattern", tags=["net"]
    ).record
    (row,) = go_import(json.dumps(project.export_go().to_dict()))["observations"]
    assert row["sync_id"] == f"obs-{id_hex(saved['id'])}"
    assert row["id"] == go_int_id(saved["id"])  # the number Go's MCP names show for it

    carried = {**row, "id": 12}  # Go gave it its own number
    same = project.import_path(write(tmp_path / "same.json", export_doc([carried])))
    assert same.added == 1 and same.updated == 0  # only Go's session is new

    edited = {
        **carried,
        "title": "Retry with jittered backoff",
        "updated_at": "2999-01-01 00:00:00",
    }
    result = project.import_path(write(tmp_path / "edited.json", export_doc([edited])))
    assert result.updated == 1
    memory = project.get(saved["id"])
    assert (memory["title"], memory["tags"], memory["rev"]) == (
        "Retry with jittered backoff",
        ["net"],
        saved["rev"] + 1,
    )
    older = {**carried, "title": "An older title", "updated_at": "2000-01-01 00:00:00"}
    stale = project.import_path(write(tmp_path / "older.json", export_doc([older])))
    assert stale.updated == 0 and project.get(saved["id"])["title"] == memory["title"]


def test_a_carried_memory_missing_here_is_created_under_its_own_id(
    project: Engram, tmp_path: Path
) -> None:
    record_id = "a" * 26
    row = new_obs(3, f"obs-{id_hex(record_id)}", "From a clone", "Only Go had it.")
    project.import_path(write(tmp_path / "clone.json", export_doc([row])))
    assert project.get(record_id)["title"] == "From a clone"


# ── export --format go-engram ────────────────────────────────────────────────────────────────


def test_export_go_engram_is_what_go_import_accepts(project: Engram, tmp_path: Path) -> None:
    project.remember("No session here", "engram memories may have none.", kind="decision")
    project.remember("Personal one", "global", scope="personal")
    out = tmp_path / "go.json"
    done = run_cli("export", "--format", "go-engram", str(out), cwd=project.root)
    assert done.returncode == 0, done.stderr
    decoded = go_import(out.read_text(encoding="utf-8"))
    raw = json.loads(out.read_text(encoding="utf-8"))
    assert raw["version"] == "0.1.0"
    assert [o["title"] for o in decoded["observations"]] == ["No session here"]
    (obs,) = decoded["observations"]
    assert obs["type"] == "decision" and obs["scope"] == "project" and obs["id"] > 0
    personal = run_cli("export", "--format", "go-engram", "--scope", "personal", cwd=project.root)
    assert [o["title"] for o in go_import(personal.stdout.decode())["observations"]] == [
        "Personal one"
    ]
    refused = run_cli("export", "--format", "yaml", cwd=project.root)
    assert refused.returncode != 0 and b"unknown export format 'yaml'" in refused.stderr


def test_go_model_refuses_what_go_refuses() -> None:
    with pytest.raises(GoRefused, match="into string"):
        go_import(json.dumps({"version": 1}))
    with pytest.raises(GoRefused, match="into int64"):
        go_import(json.dumps({"observations": [{"id": "7"}]}))
    with pytest.raises(GoRefused, match="FOREIGN KEY"):
        go_import(json.dumps({"observations": [old_obs(1, "t", "c")]}))


def test_go_to_engram_to_go_keeps_every_field(project: Engram, tmp_path: Path) -> None:
    rows = [
        new_obs(
            1,
            "obs-0123456789abcdef",
            "Pin the Go version",
            "go 1.22 in go.mod.",
            type="config",
            topic_key="config/go-version",
            review_after="2025-10-01 00:00:00",
            revision_count=4,
            duplicate_count=2,
        ),
        new_obs(2, "obs-00000000000000f2", "Ran tests", "go test ./...", type="command"),
        new_obs(
            3,
            "obs-00000000000000f3",
            "Removed",
            "soft-deleted in Go",
            type="file_change",
            tool_name=None,
            deleted_at="2025-04-01 10:00:00",
            updated_at="2025-04-01 10:00:00",
        ),
    ]
    del rows[2]["tool_name"]
    prompts = [
        {
            "id": 5,
            "sync_id": "prompt-00000000000000a5",
            "session_id": "sess-1",
            "content": "pin the go version",
            "project": "demo",
            "created_at": "2025-04-01 09:00:30",
        }
    ]
    document = export_doc(rows, prompts=prompts)
    project.import_path(write(tmp_path / "in.json", document))
    back = project.export_go().to_dict()
    go_import(json.dumps(back))
    assert back["observations"] == rows
    assert back["prompts"] == prompts
    assert back["sessions"] == document["sessions"]


def test_a_session_exported_for_go_comes_back_onto_its_summary(
    project: Engram, tmp_path: Path
) -> None:
    """export --format go-engram, then import of that file: no second session memory."""
    project.session_start("s1", directory=str(project.root))
    project.remember("Use SQLite", "It is embedded.", kind="decision", session_id="s1")
    project.session_end("s1", summary="## Goal\nPick a database\n\n## Accomplished\nSQLite")
    out = tmp_path / "go.json"
    assert run_cli("export", "--format", "go-engram", str(out), cwd=project.root).returncode == 0
    (session,) = json.loads(out.read_text("utf-8"))["sessions"]
    assert session["id"] == "s1" and "SQLite" in session["summary"]
    before = project.project_ws.store.path.read_bytes()
    for _ in range(2):
        done = run_cli("import", str(out), cwd=project.root)
        assert done.returncode == 0, done.stderr
        assert b"added 0, updated 0, unchanged 2, skipped 0" in done.stdout, done.stdout
    assert project.project_ws.store.path.read_bytes() == before
    # A Go clone's newer summary of that session revises engram's summary memory.
    newer = {**session, "summary": "## Goal\nPick a database\n\n## Accomplished\nSQLite, WAL on"}
    newer["ended_at"] = "2999-01-01 00:00:00"
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"version": "0.1.0", "sessions": [newer]}), "utf-8")
    assert b"updated 1" in run_cli("import", str(later), cwd=project.root).stdout
    sessions = [r for r in project.project_ws.store.read_all() if r.get("kind") == "session"]
    assert len(sessions) == 1 and "WAL on" in sessions[0]["content"]
