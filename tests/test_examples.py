"""The example store in examples/.engram/ (used by the demo and by other tests) stays valid."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from engram import config, model

EXAMPLES = Path(__file__).parent.parent / "examples"
ENGRAM_DIR = EXAMPLES / ".engram"
MEMORIES = ENGRAM_DIR / "memories.jsonl"


@pytest.fixture(scope="module")
def raw_lines() -> list[bytes]:
    data = MEMORIES.read_bytes()
    assert data.endswith(b"\n"), "memories.jsonl must end with a newline"
    return data.splitlines(keepends=True)


@pytest.fixture(scope="module")
def records(raw_lines: list[bytes]) -> list[model.Record]:
    return [
        model.parse_line(line, path=str(MEMORIES), lineno=number)
        for number, line in enumerate(raw_lines, start=1)
    ]


@pytest.fixture(scope="module")
def memories(records: list[model.Record]) -> list[model.Record]:
    return [record for record in records if not model.is_tombstone(record)]


def test_every_line_is_canonical(raw_lines: list[bytes], records: list[model.Record]) -> None:
    for line, record in zip(raw_lines, records, strict=True):
        assert model.canonical_line(record) == line, record["id"]
    redumped = b"".join(model.canonical_line(record) for record in records)
    assert redumped == MEMORIES.read_bytes()


def test_sorted_by_unique_id(records: list[model.Record]) -> None:
    ids = [record["id"] for record in records]
    assert ids == sorted(ids)
    assert len(ids) == len(set(ids))


def test_ids_are_random_base32(records: list[model.Record]) -> None:
    alphabet = set("abcdefghijklmnopqrstuvwxyz234567")
    for record in records:
        assert len(record["id"]) == 26 and set(record["id"]) <= alphabet, record["id"]


def test_no_conflict_markers_or_private_tags() -> None:
    text = MEMORIES.read_text(encoding="utf-8")
    assert "<private>" not in text
    assert not any(model.is_conflict_marker(line) for line in MEMORIES.read_bytes().splitlines())


def test_memory_fields_are_well_formed(memories: list[model.Record]) -> None:
    for record in memories:
        rid = record["id"]
        assert record["kind"] in model.KINDS, rid
        assert record["status"] in model.STATUSES, rid
        assert record["scope"] == "project", rid
        assert record["project"] == "ledger-api", rid
        assert 1 <= record["importance"] <= 5, rid
        assert record["title"].strip() and record["content"].strip(), rid
        assert record["tags"] == sorted({tag.lower() for tag in record["tags"]}), rid
        if "files" in record:
            assert record["files"], rid
            assert record["files"] == sorted(record["files"]), rid
            assert all(path == model.normalize_path(path) for path in record["files"]), rid
        assert isinstance(record["rev"], int) and record["rev"] >= 1, rid
        created = model.parse_time(record["created_at"])
        updated = model.parse_time(record["updated_at"])
        assert updated >= created, rid
        assert model.format_time(created) == record["created_at"], rid
        assert model.format_time(updated) == record["updated_at"], rid
        if record["rev"] > 1:
            assert updated > created, rid
        # Re-normalising user-settable fields changes nothing: the file is what a save writes.
        normalized = model.normalize_fields(record, max_content_bytes=1_048_576)
        assert normalized == record, rid


def test_every_link_target_exists(records: list[model.Record]) -> None:
    ids = {record["id"] for record in records}
    links = [(record, link) for record in records for link in record.get("links", [])]
    assert len(links) >= 6
    for record, link in links:
        assert link["rel"] in model.LINK_RELS, record["id"]
        assert link["to"] in ids, f"{record['id']} links to missing {link['to']}"
        assert link["to"] != record["id"]
    for record in records:
        if "links" in record:
            assert record["links"] == model.normalize_links(record["links"]), record["id"]


def test_links_cover_the_relations(records: list[model.Record]) -> None:
    by_id = {record["id"]: record for record in records}
    rels = Counter(link["rel"] for record in records for link in record.get("links", []))
    assert {"supersedes", "relates", "caused_by", "fixes", "contradicts"} <= set(rels)
    for record in records:
        for link in record.get("links", []):
            target = by_id[link["to"]]
            if link["rel"] == "supersedes":
                assert target["status"] == "superseded", target["id"]
            if link["rel"] == "contradicts":
                assert record["status"] == "rejected", record["id"]


def test_size_and_mix_of_kinds(memories: list[model.Record]) -> None:
    assert 20 <= len(memories) <= 40
    kinds = Counter(record["kind"] for record in memories)
    for kind in ("decision", "pitfall", "bugfix", "session", "pattern", "principle"):
        assert kinds[kind] >= 1, kind
    assert kinds["decision"] >= 5
    statuses = {record["status"] for record in memories if record["kind"] == "decision"}
    assert {"active", "superseded", "rejected", "proposed"} <= statuses
    assert sum(1 for record in memories if record.get("session_id")) >= 2
    assert any(record["source"].startswith("adr:") for record in memories)


def test_has_a_tombstone(records: list[model.Record]) -> None:
    tombstones = [record for record in records if model.is_tombstone(record)]
    assert tombstones
    for record in tombstones:
        assert {"id", "rev", "updated_at", "deleted_at"} <= set(record)
        model.parse_time(record["deleted_at"])


def test_has_an_unknown_field(records: list[model.Record]) -> None:
    fields = "kind title content tags files importance status scope project topic_key links"
    known = set(model.VOLATILE) | set(fields.split()) | {"deleted_at"}
    assert any(set(record) - known for record in records)


def test_content_hashes_are_distinct(memories: list[model.Record]) -> None:
    hashes = [model.content_hash(record) for record in memories]
    assert len(hashes) == len(set(hashes))
    keys = [model.dedupe_key(record) for record in memories]
    assert len(keys) == len(set(keys))


def test_utf8_without_escapes() -> None:
    text = MEMORIES.read_text(encoding="utf-8")
    assert "\\u" not in text
    for line in text.splitlines():
        assert json.loads(line)


def test_gitignore() -> None:
    text = (ENGRAM_DIR / ".gitignore").read_text(encoding="utf-8")
    assert text == "index/\nstate/\n.*.tmp\n"


def test_config_loads() -> None:
    loaded = config.load(EXAMPLES)
    assert loaded.project == "ledger-api"
    assert loaded.get("search.backend") == "tantivy"
    text = (ENGRAM_DIR / "config.yaml").read_text(encoding="utf-8")
    assert text == config.CONFIG_TEMPLATE.format(project='"ledger-api"')
