"""Imports from other tools: Go engram exports and chunks, MCP memory JSONL."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import InvalidInput
from engram.formats.common import import_id
from engram.formats.convert import (
    EPOCH,
    MAX_DECOMPRESSED_BYTES,
    convert,
    convert_mcp_memory,
    detect,
    mcp_entity_id,
)
from engram.formats.goimport import convert_go
from engram.model import canonical_line, normalize_fields, parse_line
from engram.sync.merge import merge_record, merge_sets
from tests.helpers.places import FIXTURES

FIXTURES = FIXTURES / "imports"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["id"]: record for record in records}


def natural_obs_key(project: str, session: str, kind: str, title: str, content: str) -> str:
    sha = hashlib.sha256(" ".join(content.split()).casefold().encode()).hexdigest()
    parts = "\x1f".join([project, session, kind, title, sha])
    return "go-engram:obs:" + hashlib.sha256(parts.encode()).hexdigest()


def chunk_file(tmp_path: Path) -> Path:
    """Write the chunk fixture as Go engram does: gzip'd, named by its content's hash."""
    raw = fixture("go-chunk.json")
    path = tmp_path / "chunks" / f"{hashlib.sha256(raw).hexdigest()[:8]}.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(raw, mtime=0))
    return path


# ── Go engram export ─────────────────────────────────────────────────────────────────────────

OBS_A1 = import_id("go-engram:obs:obs-00000000000000a1")
OBS_B2 = import_id("go-engram:obs:obs-00000000000000b2")
OBS_C3 = import_id("go-engram:obs:obs-00000000000000c3")
OBS_F6 = import_id("go-engram:obs:obs-00000000000000f6")
OBS_107 = import_id("go-engram:obs:obs-0000000000000107")
# No sync_id: keyed by what an edit does not change (project, session, creation time, Go id).
OBS_MANUAL = import_id("go-engram:obs:row:\x1fsess-1\x1f2025-02-27T08:00:00.000Z\x1f4")
SESSION_1 = import_id("go-engram:session:sess-1")
PROMPT_1 = import_id("go-engram:prompt:prompt-0000000000000001")

EXPORT_RECORDS = {
    OBS_A1: {
        "id": OBS_A1,
        "kind": "decision",
        "title": "Use SQLite for the index",
        "go": {
            "id": 1,
            "sync_id": "obs-00000000000000a1",
            "project": "Demo App",
            "revision_count": 1,
            "duplicate_count": 1,
            "last_seen_at": "2025-02-28 09:10:00",
            "pinned": False,
        },
        "content": "The index is SQLite; the JSONL file stays the source of truth.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "topic_key": "decision/use-sqlite-for-the-index",
        "tool_name": "mem_save",
        "created_at": "2025-02-28T09:10:00.000Z",
        "updated_at": "2025-02-28T09:10:00.000Z",
        "rev": 1,
    },
    # Two rows share this sync_id: the later updated_at wins (listed first in the file).
    OBS_B2: {
        "id": OBS_B2,
        "kind": "discovery",
        "title": "Go times are UTC without a zone",
        "type": "learning",
        "go": {
            "id": 3,
            "sync_id": "obs-00000000000000b2",
            "project": "Demo App",
            "revision_count": 3,
            "duplicate_count": 3,
            "last_seen_at": "2025-02-28 09:40:00",
        },
        "content": "Go engram writes times as 2006-01-02 15:04:05 in UTC; parse them as UTC.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "duplicate_count": 2,
        "created_at": "2025-02-28T09:15:00.000Z",
        "updated_at": "2025-02-28T09:40:00.000Z",
        "rev": 3,
    },
    # Soft-deleted: a tombstone one rev above the live version, keeping its text.
    OBS_C3: {
        "id": OBS_C3,
        "kind": "bugfix",
        "title": "Fix nil panic in auth middleware",
        "go": {
            "id": 5,
            "sync_id": "obs-00000000000000c3",
            "project": "Demo App",
            "revision_count": 1,
            "duplicate_count": 1,
        },
        "content": "Guard the empty token before reading its claims.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "created_at": "2025-02-28T10:00:00.000Z",
        "updated_at": "2025-02-28T12:00:00.000Z",
        "deleted_at": "2025-02-28T12:00:00.000Z",
        "rev": 2,
    },
    # No sync_id (older Go files), type manual kept as written, no project (it keeps none),
    # RFC 3339 times with an offset.
    OBS_MANUAL: {
        "id": OBS_MANUAL,
        "kind": "note",
        "title": "Run make check before pushing",
        "type": "manual",
        "go": {"id": 4},
        "content": "make check runs ruff, mypy and the tests.",
        "scope": "personal",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "created_at": "2025-02-27T08:00:00.000Z",
        "updated_at": "2025-02-27T08:30:00.250Z",
        "rev": 1,
    },
    OBS_F6: {
        "id": OBS_F6,
        "kind": "session",
        "title": "Session summary: importer",
        "type": "session_summary",
        "go": {
            "id": 8,
            "sync_id": "obs-00000000000000f6",
            "project": "Demo App",
            "revision_count": 1,
        },
        "content": "Goal: import Go engram files.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "created_at": "2025-02-28T11:30:00.000Z",
        "updated_at": "2025-02-28T11:30:00.000Z",
        "rev": 1,
    },
    # A type engram has no kind for ranks as a note and is kept as written.
    OBS_107: {
        "id": OBS_107,
        "kind": "note",
        "title": "Maybe a TUI later",
        "type": "brainstorm",
        "go": {"id": 9, "sync_id": "obs-0000000000000107", "project": "Demo App"},
        "content": "A terminal UI could browse memories.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "created_at": "2025-02-28T11:40:00.000Z",
        "updated_at": "2025-02-28T11:40:00.000Z",
        "rev": 1,
    },
    SESSION_1: {
        "id": SESSION_1,
        "kind": "session",
        "title": "Session: Ship the Go engram importer",
        "go": {"observation_count": 4, "project": "Demo  App"},
        "content": "Ship the Go engram importer\n\nAccomplished: detection and conversion.",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "session": {
            "started_at": "2025-02-28T09:00:00.000Z",
            "ended_at": "2025-02-28T11:30:00.000Z",
            "directory": "/home/ana/demo",
        },
        "created_at": "2025-02-28T09:00:00.000Z",
        "updated_at": "2025-02-28T11:30:00.000Z",
        "rev": 1,
    },
    PROMPT_1: {
        "id": PROMPT_1,
        "kind": "prompt",
        "title": "Add an importer for Go engram exports",
        "go": {"id": 1, "sync_id": "prompt-0000000000000001", "project": "Demo App"},
        "content": "Add an importer for Go engram exports\nwith tests for every format",
        "project": "demo app",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-1",
        "created_at": "2025-02-28T09:05:00.000Z",
        "updated_at": "2025-02-28T09:05:00.000Z",
        "rev": 1,
    },
}
EXPORT_SKIPPED = [
    "observations[5]: no content",
    "observations[6]: not an RFC 3339 time: 'yesterday'",
    "prompts[1]: no content",
    "sessions[1]: session 'sess-2' has no summary and nothing here belongs to it",
]
EXPORT_NOTES = [
    "1 row has no project: kept without one, not filed under this project ('fallback'); "
    "recall in this store still finds them",
    "collapsed 2 rows into 1 memory (rows of one Go identity; the newest kept): "
    "observations[1]+observations[2]",
]


def test_go_export_converts_to_exact_records() -> None:
    result = convert(fixture("go-export.json"), name="go-export.json", project="Fallback")

    assert result.format == "go-engram-export"
    assert by_id(result.records) == EXPORT_RECORDS
    assert [record["id"] for record in result.records] == sorted(EXPORT_RECORDS)
    assert result.skipped == EXPORT_SKIPPED
    assert result.notes == EXPORT_NOTES


def test_go_conversion_is_deterministic_whatever_the_layout() -> None:
    data = fixture("go-export.json")
    first = convert(data, name="a.json", project="Fallback")
    again = convert(data, name="a.json", project="Fallback")
    # The same document re-serialised, keys sorted and rows reversed: the same records.
    document = json.loads(data)
    for array in ("observations", "prompts", "sessions"):
        document[array].reverse()
    relaid = convert(json.dumps(document, sort_keys=True).encode(), name="b", project="Fallback")

    assert again.records == first.records
    assert relaid.records == first.records
    assert [canonical_line(r) for r in relaid.records] == [canonical_line(r) for r in first.records]


def test_converted_records_are_valid_store_lines() -> None:
    records = [
        *convert(fixture("go-export.json"), name="x", project="p").records,
        *convert(fixture("mcp-memory.jsonl"), name="y", project="p").records,
    ]
    for record in records:
        assert parse_line(canonical_line(record), path="t", lineno=1) == record
        assert normalize_fields(record, max_content_bytes=1 << 20) == record


def test_reimport_merges_as_unchanged_and_a_tombstone_outranks_the_live_version() -> None:
    data = fixture("go-export.json")
    first = convert(data, name="x", project="Fallback").records
    second = convert(data, name="x", project="Fallback").records
    merged = merge_sets(first, second)
    assert merged == by_id(first)

    # An older export in which the bug fix was still live: the tombstone wins over it.
    older = json.loads(data)
    for row in older["observations"]:
        if row.get("sync_id") == "obs-00000000000000c3":
            row["deleted_at"] = None
    live = by_id(convert_go(older, project="Fallback").records)[OBS_C3]
    assert "deleted_at" not in live and live["rev"] == 1
    assert merge_record(live, EXPORT_RECORDS[OBS_C3]) == EXPORT_RECORDS[OBS_C3]
    assert merge_record(EXPORT_RECORDS[OBS_C3], live) == EXPORT_RECORDS[OBS_C3]


def test_go_arrays_may_be_null_and_unknown_keys_are_ignored() -> None:
    document = {
        "version": "0.1.0",
        "exported_at": "2025-01-01 00:00:00",
        "sessions": None,
        "observations": None,
        "prompts": None,
        "extra": {"anything": [1, 2]},
    }
    result = convert_go(document, project="demo")
    assert (result.records, result.skipped, result.format) == ([], [], "go-engram-export")


def test_go_rows_that_are_not_objects_are_skipped_by_position() -> None:
    document = {"observations": [7, None], "sessions": "nope", "prompts": []}
    result = convert_go(document, project="demo", fmt="go-engram-chunk")
    assert result.records == []
    assert result.skipped == [
        "observations[0]: not a JSON object",
        "observations[1]: not a JSON object",
        "sessions: not a list",
    ]


@pytest.mark.parametrize(
    ("go_type", "kind"),
    [
        ("decision", "decision"),
        ("architecture", "architecture"),
        ("bugfix", "bugfix"),
        ("pattern", "pattern"),
        ("config", "config"),
        ("discovery", "discovery"),
        ("learning", "discovery"),
        ("manual", "note"),
        ("session_summary", "session"),
        ("Decision", "decision"),
        ("tool_use", "note"),
        ("", "note"),
    ],
)
def test_go_types_map_onto_engram_kinds(go_type: str, kind: str) -> None:
    row = {
        "sync_id": "obs-1",
        "type": go_type,
        "title": "t",
        "content": "c",
        "created_at": "2025-01-01 00:00:00",
    }
    (record,) = convert_go({"observations": [row]}, project="demo").records
    assert record["kind"] == kind
    assert record.get("type") == (None if go_type in ("", kind) else go_type)
    assert record["updated_at"] == record["created_at"] == "2025-01-01T00:00:00.000Z"


# ── Go engram chunk with mutations ───────────────────────────────────────────────────────────

CHUNK_A1 = import_id("go-engram:obs:obs-00000000000001a1")
CHUNK_B2 = import_id("go-engram:obs:obs-00000000000001b2")
CHUNK_C3 = import_id("go-engram:obs:obs-00000000000001c3")
CHUNK_SESSION = import_id("go-engram:session:sess-9")
CHUNK_PROMPT = import_id("go-engram:prompt:prompt-0000000000000009")

CHUNK_RECORDS = {
    # The array row, then an upsert (seq 3) that rewrote its content: rev 2.
    CHUNK_A1: {
        "id": CHUNK_A1,
        "kind": "pattern",
        "title": "Errors carry hints",
        "go": {
            "id": 1,
            "sync_id": "obs-00000000000001a1",
            "revision_count": 2,
            "duplicate_count": 1,
        },
        "content": "Every error carries a hint: the next command to run.",
        "project": "demo",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-9",
        "created_at": "2025-03-02T08:10:00.000Z",
        "updated_at": "2025-03-02T08:20:00.000Z",
        "rev": 2,
    },
    # Created by an upsert (seq 4), soft-deleted by a delete (seq 6).
    CHUNK_B2: {
        "id": CHUNK_B2,
        "kind": "config",
        "title": "Line length 100",
        "go": {"sync_id": "obs-00000000000001b2"},
        "content": "ruff line-length is 100.",
        "project": "demo",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-9",
        "created_at": "2025-03-02T08:30:00.000Z",
        "updated_at": "2025-03-02T09:10:00.000Z",
        "deleted_at": "2025-03-02T09:10:00.000Z",
        "rev": 2,
    },
    # A hard delete of something this chunk never saw: a bare tombstone.
    CHUNK_C3: {
        "id": CHUNK_C3,
        "rev": 2,
        "updated_at": "2025-03-02T09:30:00.000Z",
        "deleted_at": "2025-03-02T09:30:00.000Z",
    },
    # The array row had no summary; the session's end (seq 5) brought one.
    CHUNK_SESSION: {
        "id": CHUNK_SESSION,
        "kind": "session",
        "title": "Session: Wrote the error tree",
        "content": "Wrote the error tree\nNext: the CLI boundary",
        "project": "demo",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-9",
        "session": {
            "started_at": "2025-03-02T08:00:00.000Z",
            "ended_at": "2025-03-02T09:00:00.000Z",
            "directory": "/work/demo",
        },
        "created_at": "2025-03-02T08:00:00.000Z",
        "updated_at": "2025-03-02T09:00:00.000Z",
        "rev": 1,
    },
    CHUNK_PROMPT: {
        "id": CHUNK_PROMPT,
        "kind": "prompt",
        "title": "Write the error tree",
        "go": {"sync_id": "prompt-0000000000000009"},
        "content": "Write the error tree",
        "project": "demo",
        "scope": "project",
        "source": "import:go-engram",
        "session_id": "sess-9",
        "created_at": "2025-03-02T08:05:00.000Z",
        "updated_at": "2025-03-02T08:05:00.000Z",
        "rev": 1,
    },
}


def test_go_chunk_gzipped_applies_its_mutations_in_seq_order(tmp_path: Path) -> None:
    path = chunk_file(tmp_path)
    data = path.read_bytes()

    result = convert(data, name=str(path), project="other")

    assert result.format == "go-engram-chunk"
    assert by_id(result.records) == CHUNK_RECORDS
    assert result.skipped == [
        "mutations[8]: payload is not JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "mutations[6]: relation mutations are not imported",
    ]
    assert convert(data, name=str(path), project="other").records == result.records


def test_go_chunk_mutation_order_is_seq_not_position() -> None:
    document = json.loads(fixture("go-chunk.json"))
    document["mutations"].reverse()
    result = convert_go(document, project="other", fmt="go-engram-chunk")
    assert by_id(result.records) == CHUNK_RECORDS


# ── MCP memory ───────────────────────────────────────────────────────────────────────────────

JOHN = mcp_entity_id("John_Smith")
ANTHROPIC = mcp_entity_id("Anthropic")
UV = mcp_entity_id("Use uv for environments")


def test_mcp_memory_converts_entities_and_relations() -> None:
    result = convert(fixture("mcp-memory.jsonl"), name="memory.jsonl", project="Demo")

    assert result.format == "mcp-memory"
    assert by_id(result.records) == {
        # Two lines for one name merge; the relation becomes a link and a content line.
        JOHN: {
            "id": JOHN,
            "kind": "fact",
            "title": "John_Smith",
            "content": "- Speaks fluent Spanish\n- Graduated in 2019\n- Lives in Madrid\n\n"
            "Relations:\n- works_at → Anthropic",
            "tags": ["person"],
            "links": [{"rel": "relates", "to": ANTHROPIC}],
            "project": "demo",
            "scope": "project",
            "source": "import:mcp-memory",
            "created_at": EPOCH,
            "updated_at": EPOCH,
            "rev": 1,
        },
        ANTHROPIC: {
            "id": ANTHROPIC,
            "kind": "fact",
            "title": "Anthropic",
            "content": "- AI safety company",
            "tags": ["organization"],
            "project": "demo",
            "scope": "project",
            "source": "import:mcp-memory",
            "created_at": EPOCH,
            "updated_at": EPOCH,
            "rev": 1,
        },
        # An entity type that names a kind keeps it.
        UV: {
            "id": UV,
            "kind": "decision",
            "title": "Use uv for environments",
            "content": "- Faster than pip\n- Lock file is committed\n\nRelations:\n"
            "- decided_by → Anthropic",
            "tags": ["decision"],
            "links": [{"rel": "relates", "to": ANTHROPIC}],
            "project": "demo",
            "scope": "project",
            "source": "import:mcp-memory",
            "created_at": EPOCH,
            "updated_at": EPOCH,
            "rev": 1,
        },
    }
    assert result.skipped == [
        "line 6: not JSON (Unterminated string starting at: line 1 column 25 (char 24))",
        "line 5: relation 'John_Smith' knows 'Nobody': no entity named 'Nobody'",
    ]


def test_mcp_memory_stamp_and_stable_ids() -> None:
    data = fixture("mcp-memory.jsonl")
    stamped = convert_mcp_memory(data, project="demo", stamp="2025-04-01 12:00:00")
    again = convert_mcp_memory(data, project="demo", stamp="2025-04-01 12:00:00")

    assert stamped.records == again.records
    assert {r["id"] for r in stamped.records} == {JOHN, ANTHROPIC, UV}
    assert {r["updated_at"] for r in stamped.records} == {"2025-04-01T12:00:00.000Z"}
    # A later stamp (an edited file) wins the merge over the earlier import.
    earlier = by_id(convert_mcp_memory(data, project="demo").records)
    assert merge_record(earlier[JOHN], by_id(stamped.records)[JOHN]) == by_id(stamped.records)[JOHN]


def test_mcp_memory_reports_malformed_items() -> None:
    data = b"\n".join(
        [
            b'{"type":"entity","name":"","entityType":"x","observations":[]}',
            b'{"type":"relation","from":"a"}',
            b'{"type":"note","name":"x"}',
            b"[1, 2]",
            b'{"type":"entity","name":"Plain","observations":["one"]}',
        ]
    )
    result = convert_mcp_memory(data, project="demo")
    assert [r["title"] for r in result.records] == ["Plain"]
    assert result.records[0]["kind"] == "fact"
    assert "tags" not in result.records[0]
    assert result.skipped == [
        "line 1: entity without a name",
        "line 2: relation needs from, to and relationType",
        "line 3: unknown type 'note' (expected entity or relation)",
        "line 4: not a JSON object",
    ]


# ── detect and convert ───────────────────────────────────────────────────────────────────────


def test_detect_names_each_format(tmp_path: Path) -> None:
    export = fixture("go-export.json")
    assert detect(export, "go-export.json") == "go-engram-export"
    assert detect(gzip.compress(export), "go-export.json.gz") == "go-engram-export"
    assert detect(fixture("go-chunk.json"), "a1b2c3d4.jsonl") == "go-engram-chunk"
    assert detect(chunk_file(tmp_path).read_bytes()) == "go-engram-chunk"
    assert detect(b'{"sessions": [], "observations": [], "prompts": []}') == "go-engram-chunk"
    assert detect(fixture("mcp-memory.jsonl"), "memory.jsonl") == "mcp-memory"
    assert detect(b'{"format": "engram", "version": 1, "memories": []}') == "engram"
    assert detect(b'{"version": 1, "memories": []}') == "engram"


@pytest.mark.parametrize(
    "data",
    [
        b"hello\x00world",
        b"",
        b"[1, 2, 3]",
        b'{"name": "not a memory file"}',
        b'{"type": "note"}\n{"type": "other"}\n',
        b"\xff\xfe\xfd",
    ],
)
def test_detect_refuses_unknown_bytes_naming_the_file(data: bytes) -> None:
    with pytest.raises(InvalidInput) as caught:
        detect(data, "notes.bin")
    assert caught.value.message.startswith("notes.bin: not a file engram can import")
    assert "MCP memory" in caught.value.message


def test_gzip_input_has_a_size_limit() -> None:
    bomb = gzip.compress(b" " * (MAX_DECOMPRESSED_BYTES + 1), compresslevel=1)
    assert len(bomb) < MAX_DECOMPRESSED_BYTES // 100
    with pytest.raises(InvalidInput, match=r"big\.gz: decompresses to more than 64 MiB"):
        detect(bomb, "big.gz")


def test_broken_gzip_is_invalid_input() -> None:
    whole = gzip.compress(fixture("go-chunk.json"))
    with pytest.raises(InvalidInput, match=r"cut\.gz: truncated gzip data"):
        detect(whole[: len(whole) // 2], "cut.gz")
    with pytest.raises(InvalidInput, match=r"bad\.gz: not valid gzip data"):
        detect(b"\x1f\x8b" + zlib.compress(b"x" * 50), "bad.gz")


def test_convert_returns_an_engram_export_as_is() -> None:
    memory = {"id": "abc", "kind": "note", "title": "t", "rev": 1, "weird": [1]}
    document = {"format": "engram", "version": 1, "memories": [memory, "junk"]}
    result = convert(json.dumps(document).encode(), name="export.json", project="demo")
    # Every item, "junk" too: the merge skips it, named by its index (memories[1]).
    assert (result.records, result.skipped, result.format) == ([memory, "junk"], [], "engram")


# ── details of the Go conversion ─────────────────────────────────────────────────────────────


def obs_row(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "sync_id": "obs-1",
        "type": "decision",
        "title": "t",
        "content": "c",
        "created_at": "2025-01-01 00:00:00",
        "updated_at": "2025-01-01 00:00:00",
    }
    return {**row, **fields}


@pytest.mark.parametrize(
    ("summary", "title"),
    [
        (
            "## Goal\n\n- Build the importer\n\n## Accomplished\n- done",
            "Session: Build the importer",
        ),
        ("**Goal:** Ship the thing", "Session: Ship the thing"),
        ("Fixed the flaky test", "Session: Fixed the flaky test"),
        ("## Accomplished\n", "Session: sess-x"),
        ("word " * 60, "Session: " + ("word " * 22).strip() + "…"),
    ],
)
def test_go_session_titles_come_from_the_summary(summary: str, title: str) -> None:
    session = {"id": "sess-x", "started_at": "2025-01-01 00:00:00", "summary": summary}
    (record,) = convert_go({"sessions": [session]}, project="demo").records
    assert record["title"] == title
    assert len(record["title"]) <= 120
    assert record["content"] == summary
    assert record["session"] == {"started_at": "2025-01-01T00:00:00.000Z"}


def test_go_file_fields_become_repo_relative_files() -> None:
    row = obs_row(files=["src/a.py", "/etc/passwd", "../out.txt"], path="./docs/b.md")
    (record,) = convert_go({"observations": [row]}, project="demo").records
    assert record["files"] == ["docs/b.md", "src/a.py"]


def test_go_row_failing_validation_is_skipped_with_the_reason() -> None:
    rows = [
        obs_row(content="x" * 50),
        obs_row(sync_id="obs-2", title="y" * 600),
        obs_row(sync_id="obs-3"),
    ]
    result = convert_go({"observations": rows}, project="demo", max_content_bytes=20)
    assert [record["id"] for record in result.records] == [import_id("go-engram:obs:obs-3")]
    assert result.skipped == [
        "observations[0]: field 'content' is 50 bytes; the limit is 20",
        "observations[1]: title is 600 characters; the limit is 500",
    ]


def test_go_hard_delete_drops_the_text_and_outranks_the_row() -> None:
    mutation = {
        "seq": 1,
        "entity": "observation",
        "entity_key": "obs-1",
        "op": "delete",
        "payload": json.dumps({"sync_id": "obs-1", "deleted": True, "hard_delete": True}),
        "occurred_at": "2025-01-02T00:00:00Z",
    }
    document = {"observations": [obs_row(revision_count=4)], "mutations": [mutation]}
    result = convert_go(document, project="demo", fmt="go-engram-chunk")
    assert result.records == [
        {
            "id": import_id("go-engram:obs:obs-1"),
            "rev": 5,
            "updated_at": "2025-01-02T00:00:00.000Z",
            "deleted_at": "2025-01-02T00:00:00.000Z",
        }
    ]


# ── untrusted input never breaks the converter ───────────────────────────────────────────────

SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=12)
# Mostly readable times (in both of Go's forms), sometimes not.
TIMES = st.sampled_from(
    [
        "2025-01-01 00:00:00",
        "2025-01-01T01:02:03Z",
        "2025-01-02 00:00:00",
        "2025-01-01 00:00:00",
        "2025-01-03T00:00:00.5+02:00",
        "2025-01-01 12:00:00",
        "soon",
        7,
    ]
)
GO_KEYS = [
    "id",
    "sync_id",
    "session_id",
    "type",
    "title",
    "content",
    "project",
    "scope",
    "summary",
    "revision_count",
    "duplicate_count",
    "files",
    "hard_delete",
]
WORDS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
JUNK_ROWS = st.dictionaries(
    st.sampled_from(GO_KEYS), SCALARS | TIMES | st.lists(SCALARS, max_size=3), max_size=6
)
PLAUSIBLE_ROWS = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["s1", "s2"]),
        "sync_id": st.sampled_from(["k1", "k2", "k1", ""]),
        "type": st.sampled_from(["decision", "learning", "manual", "odd"]),
        "title": WORDS,
        "content": WORDS,
        "summary": WORDS | st.none(),
        "created_at": TIMES,
        "started_at": TIMES,
    },
    optional={
        "updated_at": TIMES,
        "deleted_at": TIMES | st.none(),
        "revision_count": st.integers(-1, 4) | SCALARS,
        "files": st.lists(WORDS, max_size=3),
        "scope": st.sampled_from(["project", "personal", "team"]),
        "project": WORDS | st.none(),
        "hard_delete": st.booleans(),
    },
)
GO_ROWS = PLAUSIBLE_ROWS | JUNK_ROWS
MUTATIONS = st.fixed_dictionaries(
    {
        "seq": st.integers(0, 5) | SCALARS,
        "entity": st.sampled_from(["observation", "session", "prompt", "relation"]) | SCALARS,
        "entity_key": st.sampled_from(["k1", "k2"]) | SCALARS,
        "op": st.sampled_from(["upsert", "delete", "merge"]),
        "payload": GO_ROWS.map(json.dumps) | SCALARS,
        "occurred_at": TIMES,
    }
)


def assert_valid(records: list[dict[str, Any]]) -> None:
    assert len({record["id"] for record in records}) == len(records)
    for record in records:
        assert parse_line(canonical_line(record), path="t", lineno=1) == record


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    observations=st.lists(GO_ROWS | SCALARS, max_size=4),
    sessions=st.lists(GO_ROWS, max_size=3),
    prompts=st.lists(GO_ROWS, max_size=3),
    mutations=st.lists(MUTATIONS | SCALARS, max_size=5),
)
def test_any_go_document_converts_without_raising(
    observations: list[Any], sessions: list[Any], prompts: list[Any], mutations: list[Any]
) -> None:
    document = {
        "observations": observations,
        "sessions": sessions,
        "prompts": prompts,
        "mutations": mutations,
    }
    first = convert_go(document, project="demo", fmt="go-engram-chunk")
    assert_valid(first.records)
    assert convert_go(json.loads(json.dumps(document)), project="demo").records == first.records


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.binary(max_size=40)
        | GO_ROWS.map(
            lambda row: json.dumps(
                {
                    "type": "entity",
                    "name": str(row.get("title") or "n"),
                    "entityType": row.get("type"),
                    "observations": row.get("files"),
                }
            ).encode()
        ),
        max_size=6,
    )
)
def test_any_mcp_lines_convert_without_raising(lines: list[bytes]) -> None:
    data = b"\n".join(lines)
    result = convert_mcp_memory(data, project="demo")
    assert_valid(result.records)


# ── importing the same thing again changes nothing (issue 17) ──────────────────────────────────


def _sources(tmp_path: Path, project_root: Path) -> dict[str, Path]:
    """One file (or folder) of each format the import takes, written as its tool writes it."""
    folder = tmp_path / "sources"
    folder.mkdir()
    out: dict[str, Path] = {}
    for name in ("go-export.json", "mcp-memory.jsonl"):
        out[name] = folder / name
        out[name].write_bytes(fixture(name))
    out["go-engram-chunk"] = chunk_file(folder)
    # engram's own export, of memories another project saved
    from engram.service import Engram

    other = tmp_path / "other"
    other.mkdir()
    engram, _ = Engram.init(other, "other")
    with engram:
        engram.remember("Cache key", "Include the tenant ID.", kind="pitfall", tags=["cache"])
        engram.remember("Money in cents", "Never floats.", kind="decision")
        export = folder / "engram-export.json"
        export.write_text(json.dumps(engram.export().to_dict()), encoding="utf-8")
    out["engram-export.json"] = export
    out["store folder"] = other  # a store: .engram/ with manifest and chunks after a sync
    with Engram(other) as engram:
        engram.sync()
    return out


@pytest.mark.parametrize(
    "source", ["go-export.json", "mcp-memory.jsonl", "go-engram-chunk", "engram-export.json",
               "store folder"]
)  # fmt: skip
def test_importing_the_same_thing_again_changes_no_byte(tmp_path: Path, source: str) -> None:
    import os

    from engram.service import Engram

    root = tmp_path / "repo"
    root.mkdir()
    engram, _ = Engram.init(root, "demo")
    with engram:
        path = _sources(tmp_path, root)[source]
        first = engram.import_path(path)
        assert first.added > 0, first
        memories = root / ".engram" / "memories.jsonl"
        before = memories.read_bytes()
        again = engram.import_path(path)
        assert (again.added, again.updated) == (0, 0), again
        assert again.unchanged == first.added + first.updated
        assert memories.read_bytes() == before
        # The file touched (a copy, a checkout): same records, still nothing changes.
        target = path if path.is_file() else path / ".engram" / "memories.jsonl"
        stat = target.stat()
        os.utime(target, (stat.st_atime + 3600, stat.st_mtime + 3600))
        touched = engram.import_path(path)
        assert (touched.added, touched.updated) == (0, 0), touched
        assert memories.read_bytes() == before
