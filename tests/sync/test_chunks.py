"""Sync chunks, the manifest and the per-clone sync state (engram.sync.chunks).

Every hostile or broken input is refused with an error naming the file, and every failure leaves
the files already stored byte for byte as they were.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import CorruptStore, InvalidInput
from engram.model import canonical_line, parse_line
from engram.store.redact import default_scrubber
from engram.sync import chunkform, chunks
from engram.sync.chunks import (
    CHUNKS,
    MANIFEST,
    ChunkEntry,
    ChunkError,
    SyncState,
    chunk_id,
    list_chunks,
    manifest_bytes,
    merge_manifests,
    parse_manifest,
    read_chunk,
    read_manifest,
    write_chunk,
)

STAMP = "2026-01-02T03:04:05.000Z"


def memory(ident: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": ident,
        "kind": "decision",
        "title": f"title of {ident}",
        "content": "body",
        "created_at": STAMP,
        "updated_at": STAMP,
        "rev": 1,
        **extra,
    }


def tombstone(ident: str) -> dict[str, Any]:
    return {"id": ident, "rev": 3, "updated_at": STAMP, "deleted_at": STAMP}


RECORDS = [
    memory("zz9", title="Ünïcödé — 日本語 ✓", content="naïve café"),
    tombstone("aa1"),
    memory("mm5", x_unknown={"nested": [1, 2, {"k": None}]}, big=2**70),
]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file below root (lock files aside) with its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and not path.name.endswith(".lock"):
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def put_chunk(engram_dir: Path, name: str, payload: bytes) -> Path:
    """Store raw bytes as chunks/<name>.jsonl.gz (a hand-made, possibly hostile chunk)."""
    folder = engram_dir / CHUNKS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl.gz"
    path.write_bytes(payload)
    return path


def jsonl_chunk(engram_dir: Path, data: bytes) -> str:
    """Store uncompressed JSONL as a correctly named chunk; return its id."""
    ident = chunk_id(data)
    put_chunk(engram_dir, ident, gzip.compress(data, mtime=0))
    return ident


@pytest.fixture
def engram_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "repo" / ".engram"
    folder.mkdir(parents=True)
    return folder


# ── write and read ────────────────────────────────────────────────────────────


def test_round_trip_keeps_tombstones_unknown_fields_and_unicode(engram_dir: Path) -> None:
    entry = write_chunk(engram_dir, RECORDS, created_by="clone-a", created_at=STAMP)
    assert entry is not None
    assert entry == ChunkEntry(entry.id, "clone-a", STAMP, 3)
    assert read_chunk(engram_dir, entry.id) == sorted(RECORDS, key=lambda r: r["id"])
    raw = gzip.decompress((engram_dir / CHUNKS / f"{entry.id}.jsonl.gz").read_bytes())
    # ONE canonical JSON object (sorted keys, raw UTF-8, one line), named by the hash of
    # exactly these bytes; engram's records sorted by id under "engram".
    document = json.loads(raw)
    assert document["engram"] == {"records": sorted(RECORDS, key=lambda r: r["id"]), "version": 1}
    assert (
        raw
        == (
            json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        ).encode()
    )
    assert "日本語".encode() in raw
    assert entry.id == hashlib.sha256(raw).hexdigest()[:32]
    assert read_manifest(engram_dir) == [entry]
    manifest = json.loads((engram_dir / MANIFEST).read_text("utf-8"))
    assert manifest == {"version": 2, "chunks": [entry.to_dict()]}
    assert manifest["chunks"][0]["sessions"] == 1 and manifest["chunks"][0]["prompts"] == 0


def test_same_records_give_the_same_id_and_bytes(tmp_path: Path) -> None:
    one, two = tmp_path / "one" / ".engram", tmp_path / "two" / ".engram"
    first = write_chunk(one, RECORDS, created_by="a", created_at=STAMP)
    second = write_chunk(two, list(reversed(RECORDS)), created_by="a", created_at=STAMP)
    assert first is not None and second is not None and first.id == second.id
    assert snapshot(one) == snapshot(two)


def test_writing_an_existing_chunk_again_changes_nothing(engram_dir: Path) -> None:
    entry = write_chunk(engram_dir, RECORDS, created_by="a", created_at=STAMP)
    before = snapshot(engram_dir)
    again = write_chunk(engram_dir, RECORDS, created_by="b", created_at="2030-01-01T00:00:00.000Z")
    assert again == entry  # the stored entry, not a new one
    assert snapshot(engram_dir) == before


def test_nothing_to_write_is_none(engram_dir: Path) -> None:
    assert write_chunk(engram_dir, [], created_by="a", created_at=STAMP) is None
    assert not (engram_dir / MANIFEST).exists()
    assert not (engram_dir / CHUNKS).exists()


def test_a_record_a_reader_would_refuse_is_not_exported(engram_dir: Path) -> None:
    with pytest.raises(InvalidInput, match="missing required"):
        write_chunk(engram_dir, [{"id": "x1", "rev": 1}], created_by="a", created_at=STAMP)
    with pytest.raises(InvalidInput, match="without a string id"):
        write_chunk(engram_dir, [{"title": "no id"}], created_by="a", created_at=STAMP)
    assert snapshot(engram_dir) == {}


def test_manifest_updated_in_its_own_layout_and_unknown_keys_kept(engram_dir: Path) -> None:
    go_id = "0badc0de"
    (engram_dir / MANIFEST).write_text(
        json.dumps(
            {
                "version": 1,
                "note": "kept",
                "chunks": [
                    {
                        "id": go_id,
                        "created_by": "go",
                        "created_at": "2025-01-01 00:00:00",
                        "sessions": 2,
                        "memories": 5,
                        "prompts": 1,
                    }
                ],
            }
        )
    )
    ids = []
    for n in range(4):
        entry = write_chunk(engram_dir, [memory(f"id{n}")], created_by="me", created_at=STAMP)
        assert entry is not None
        ids.append(entry.id)
    text = (engram_dir / MANIFEST).read_text("utf-8")
    manifest = json.loads(text)
    assert manifest["note"] == "kept"
    assert manifest["version"] == 1  # the file's version stays: a sync changes no line
    assert list(manifest) == ["version", "note", "chunks"]  # the file's key order
    assert sorted(c["id"] for c in manifest["chunks"]) == sorted([go_id, *ids])
    # The existing entry first, the new ones after it in the order they were written.
    assert [c["id"] for c in manifest["chunks"]] == [go_id, *ids]
    go_entry = next(c for c in manifest["chunks"] if c["id"] == go_id)
    assert go_entry["sessions"] == 2 and go_entry["prompts"] == 1  # unknown entry keys
    assert [e.id for e in read_manifest(engram_dir)] == sorted([go_id, *ids])
    # One line per entry (the file had its entries inline): a new chunk is a one-line diff.
    assert sum(1 for line in text.splitlines() if '"id":' in line) == 5
    assert manifest_bytes(manifest) != text.encode("utf-8")  # not re-sorted canonically


def test_malformed_manifest_is_refused_and_nothing_is_written(engram_dir: Path) -> None:
    for bad, reason in [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"chunks": {"a": 1}}', '"chunks" must be a list'),
        (b'{"version": "two", "chunks": []}', '"version" must be an integer'),
        (b'{"chunks": []}\xff', "manifest.json"),
    ]:
        (engram_dir / MANIFEST).write_bytes(bad)
        before = snapshot(engram_dir)
        with pytest.raises(ChunkError, match=reason) as caught:
            read_manifest(engram_dir)
        assert "manifest.json" in caught.value.message
        with pytest.raises(ChunkError):
            write_chunk(engram_dir, RECORDS, created_by="a", created_at=STAMP)
        assert snapshot(engram_dir) == before
        _, problems = list_chunks(engram_dir)
        assert any("manifest.json" in p for p in problems)
    assert isinstance(ChunkError("x"), CorruptStore)


def test_missing_manifest_is_empty(engram_dir: Path) -> None:
    assert read_manifest(engram_dir) == []
    assert list_chunks(engram_dir) == ([], [])


# ── list_chunks ───────────────────────────────────────────────────────────────


def test_a_chunk_file_missing_from_the_manifest_is_listed(engram_dir: Path) -> None:
    listed = write_chunk(engram_dir, [memory("a1")], created_by="me", created_at=STAMP)
    loose = jsonl_chunk(engram_dir, canonical_line(memory("b2")))
    entries, problems = list_chunks(engram_dir)
    assert listed is not None
    assert entries == sorted([listed, ChunkEntry(loose, "", "", 0)], key=lambda e: e.id)
    assert problems == []
    assert read_chunk(engram_dir, loose) == [memory("b2")]


def test_a_manifest_entry_without_its_file_is_a_problem(engram_dir: Path) -> None:
    entry = write_chunk(engram_dir, [memory("a1")], created_by="me", created_at=STAMP)
    assert entry is not None
    (engram_dir / CHUNKS / f"{entry.id}.jsonl.gz").unlink()
    entries, problems = list_chunks(engram_dir)
    assert entries == []
    assert len(problems) == 1
    assert entry.id in problems[0] and "missing" in problems[0]
    with pytest.raises(ChunkError, match="no such chunk file"):
        read_chunk(engram_dir, entry.id)


def test_hostile_manifest_ids_are_refused_one_by_one(engram_dir: Path) -> None:
    good = write_chunk(engram_dir, [memory("a1")], created_by="me", created_at=STAMP)
    assert good is not None
    secret = engram_dir.parent / "secret.jsonl.gz"
    secret.write_bytes(b"do not read")
    hostile = ["../../etc/passwd", "/abs", "a/b", "../secret", "ABCDEF12", "", 42, None]
    manifest = json.loads((engram_dir / MANIFEST).read_text("utf-8"))
    manifest["chunks"] += [{"id": h, "created_by": "x"} for h in hostile] + ["not an object"]
    (engram_dir / MANIFEST).write_text(json.dumps(manifest))
    before = snapshot(engram_dir.parent)
    assert read_manifest(engram_dir) == [good]
    entries, problems = list_chunks(engram_dir)
    assert entries == [good]
    assert len(problems) == len(hostile) + 1
    for h in ["../../etc/passwd", "/abs", "a/b", "../secret"]:
        assert any(repr(h) in p for p in problems)
        with pytest.raises(ChunkError, match="not a chunk id"):
            read_chunk(engram_dir, h)
    assert snapshot(engram_dir.parent) == before


def test_a_symlinked_chunk_is_refused(engram_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.gz"
    data = chunkform.render([memory("s1")], default_scrubber()).data
    outside.write_bytes(gzip.compress(data, mtime=0))  # even a valid chunk behind the link
    ident = chunk_id(data)
    (engram_dir / CHUNKS).mkdir()
    (engram_dir / CHUNKS / f"{ident}.jsonl.gz").symlink_to(outside)
    before = snapshot(tmp_path)
    entries, problems = list_chunks(engram_dir)
    assert entries == []
    assert problems and "symbolic link" in problems[0] and ident in problems[0]
    with pytest.raises(ChunkError, match="symbolic link"):
        read_chunk(engram_dir, ident)
    with pytest.raises(ChunkError, match="not a regular file"):
        write_chunk(engram_dir, [memory("s1")], created_by="a", created_at=STAMP)
    assert snapshot(tmp_path) == before


def test_a_symlinked_chunks_folder_is_refused(engram_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data = canonical_line(memory("s1"))
    (elsewhere / f"{chunk_id(data)}.jsonl.gz").write_bytes(gzip.compress(data, mtime=0))
    (engram_dir / CHUNKS).symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(tmp_path)
    entries, problems = list_chunks(engram_dir)
    assert entries == [] and "symbolic link" in problems[0]
    with pytest.raises(ChunkError, match="symbolic link"):
        read_chunk(engram_dir, chunk_id(data))
    with pytest.raises(ChunkError, match="symbolic link"):
        write_chunk(engram_dir, [memory("s2")], created_by="a", created_at=STAMP)
    assert snapshot(tmp_path) == before


def test_non_files_and_foreign_names_in_chunks_are_problems(engram_dir: Path) -> None:
    folder = engram_dir / CHUNKS
    folder.mkdir()
    (folder / ("ab" * 16 + ".jsonl.gz")).mkdir()
    fifo = folder / ("cd" * 16 + ".jsonl.gz")
    os.mkfifo(fifo)
    (folder / "README.md").write_text("hi")
    (folder / ".abc.jsonl.gz.tmp").write_bytes(b"half a write")  # skipped silently
    entries, problems = list_chunks(engram_dir)
    assert entries == []
    assert len(problems) == 3
    assert any("README.md" in p for p in problems)
    assert sum("not a regular file" in p for p in problems) == 2
    for ident in ("ab" * 16, "cd" * 16):  # a FIFO must not block the reader
        with pytest.raises(ChunkError, match="not a regular file"):
            read_chunk(engram_dir, ident)


# ── hostile and broken chunk content ──────────────────────────────────────────


def gzip_bomb(path: Path, megabytes: int) -> None:
    """Write a valid gzip file of ``megabytes`` MiB of zeros, fast and small in memory.

    After a full flush the deflate state is reset, so every further MiB of zeros compresses
    to the same bytes: the body is one block repeated (about 1 KiB per MiB).
    """
    block = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    repeat = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH) == repeat
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(block, crc)
    with path.open("wb") as handle:
        handle.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip header, mtime 0
        handle.write(first)
        for _ in range(megabytes - 1):
            handle.write(repeat)
        handle.write(packer.flush())
        handle.write(struct.pack("<LL", crc, (megabytes << 20) & 0xFFFFFFFF))


def test_a_gzip_bomb_is_refused_without_inflating_it(
    engram_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ident = "ab" * 16
    (engram_dir / CHUNKS).mkdir()
    path = engram_dir / CHUNKS / f"{ident}.jsonl.gz"
    gzip_bomb(path, 200)  # 200 MiB of zeros in about 200 KiB
    assert path.stat().st_size < 300 * 1024
    before = snapshot(engram_dir)

    produced = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, wbits: int) -> None:
            self.inner = real(wbits)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self.inner.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    limit = 2 * 1024 * 1024
    monkeypatch.setattr(chunks, "MAX_CHUNK_BYTES", limit)
    monkeypatch.setattr(chunks.zlib, "decompressobj", Counting)
    with pytest.raises(ChunkError, match=f"more than the limit of {limit} bytes") as caught:
        read_chunk(engram_dir, ident)
    assert "gzip bomb" in caught.value.message and ident in caught.value.message
    assert limit < sum(produced) <= limit + 1  # stopped at the limit, not at 200 MB
    assert snapshot(engram_dir) == before


def test_the_default_limits_are_the_documented_ones() -> None:
    assert chunks.MAX_CHUNK_BYTES == 64 * 1024 * 1024
    assert chunks.MAX_COMPRESSED_BYTES == 16 * 1024 * 1024


def test_a_compressed_file_over_the_limit_is_refused(
    engram_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ident = jsonl_chunk(engram_dir, os.urandom(4096).hex().encode())
    monkeypatch.setattr(chunks, "MAX_COMPRESSED_BYTES", 1024)
    with pytest.raises(ChunkError, match="over the limit of 1024 bytes"):
        read_chunk(engram_dir, ident)


def test_content_that_does_not_match_its_id_is_refused(engram_dir: Path) -> None:
    entry = write_chunk(engram_dir, [memory("a1")], created_by="me", created_at=STAMP)
    assert entry is not None
    # A teammate's chunk with one record altered, recompressed under the original name.
    forged = gzip.compress(canonical_line(memory("a1", title="forged")), mtime=0)
    (engram_dir / CHUNKS / f"{entry.id}.jsonl.gz").write_bytes(forged)
    # And a genuine chunk stored under another name.
    other = "0" * 32
    put_chunk(engram_dir, other, gzip.compress(canonical_line(memory("a1")), mtime=0))
    before = snapshot(engram_dir)
    for ident in (entry.id, other):
        with pytest.raises(ChunkError, match="not to its name") as caught:
            read_chunk(engram_dir, ident)
        assert f"chunks/{ident}.jsonl.gz" in caught.value.message
    assert snapshot(engram_dir) == before


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (lambda good: good[: len(good) // 2], "truncated"),
        (lambda good: good[:-4], "truncated"),
        (lambda good: b"not gzip at all", "not valid gzip"),
        (lambda good: b"", "empty file"),
        (lambda good: good + b"trailing junk", "not valid gzip"),
    ],
    ids=["half", "no-trailer", "garbage", "empty", "trailing-junk"],
)
def test_broken_gzip_is_refused(engram_dir: Path, payload: Any, reason: str) -> None:
    good = gzip.compress(b"".join(canonical_line(memory(f"r{n}")) for n in range(50)), mtime=0)
    ident = "ef" * 16
    put_chunk(engram_dir, ident, payload(good))
    before = snapshot(engram_dir)
    with pytest.raises(ChunkError, match=reason) as caught:
        read_chunk(engram_dir, ident)
    assert f"chunks/{ident}.jsonl.gz" in caught.value.message
    assert snapshot(engram_dir) == before


def test_several_gzip_members_are_one_chunk(engram_dir: Path) -> None:
    one, two = canonical_line(memory("a1")), canonical_line(memory("b2"))
    ident = chunk_id(one + two)
    put_chunk(engram_dir, ident, gzip.compress(one, mtime=0) + gzip.compress(two, mtime=0))
    assert read_chunk(engram_dir, ident) == [memory("a1"), memory("b2")]


def test_a_malformed_line_names_file_and_line(engram_dir: Path) -> None:
    ident = jsonl_chunk(engram_dir, canonical_line(memory("a1")) + b'{"id": broken\n')
    before = snapshot(engram_dir)
    with pytest.raises(ChunkError) as caught:
        read_chunk(engram_dir, ident)
    assert caught.value.message.startswith(f"chunks/{ident}.jsonl.gz:2: not JSON")
    assert caught.value.line == 2
    assert snapshot(engram_dir) == before


def test_a_line_without_required_fields_names_file_and_line(engram_dir: Path) -> None:
    ident = jsonl_chunk(engram_dir, canonical_line(memory("a1")) + b'{"id":"x"}\n')
    with pytest.raises(ChunkError, match=f"chunks/{ident}.jsonl.gz:2: missing required"):
        read_chunk(engram_dir, ident)


def test_non_utf8_is_refused(engram_dir: Path) -> None:
    line = canonical_line(memory("a1")).replace(b"body", b"b\xffdy")
    ident = jsonl_chunk(engram_dir, line)
    before = snapshot(engram_dir)
    with pytest.raises(ChunkError, match=f"chunks/{ident}.jsonl.gz:1: invalid UTF-8"):
        read_chunk(engram_dir, ident)
    assert snapshot(engram_dir) == before


# ── Go engram chunks ──────────────────────────────────────────────────────────

GO_CHUNK: dict[str, Any] = {
    "sessions": None,
    "observations": [
        {
            "sync_id": "obs-1",
            "session_id": "s-1",
            "type": "decision",
            "title": "Use SQLite",
            "content": "why — ñ",
            "project": "demo",
            "scope": "project",
            "created_at": "2025-03-04 05:06:07",
        }
    ],
    "prompts": None,
    "mutations": [
        {
            "seq": 7,
            "entity": "observation",
            "entity_key": "obs-1",
            "op": "upsert",
            "payload": '{"title":"Use SQLite"}',
            "occurred_at": "2025-03-04 05:06:07",
        }
    ],
}


def test_a_go_engram_chunk_is_returned_as_its_object(engram_dir: Path) -> None:
    raw = json.dumps(GO_CHUNK, separators=(",", ":")).encode()
    ident = hashlib.sha256(raw).hexdigest()[:8]  # Go engram's chunk id
    put_chunk(engram_dir, ident, gzip.compress(raw))
    (engram_dir / MANIFEST).write_text(
        json.dumps(
            {
                "version": 1,
                "chunks": [
                    {
                        "id": ident,
                        "created_by": "alan",
                        "created_at": "2025-03-04T05:06:07Z",
                        "sessions": 0,
                        "memories": 1,
                        "prompts": 0,
                    }
                ],
            },
            indent=2,
        )
    )
    assert read_chunk(engram_dir, ident) == GO_CHUNK
    entries, problems = list_chunks(engram_dir)
    assert entries == [ChunkEntry(ident, "alan", "2025-03-04T05:06:07Z", 1)]
    assert problems == []


def test_a_go_chunk_with_a_wrong_field_type_is_refused(engram_dir: Path) -> None:
    ident = "1234abcd"
    put_chunk(engram_dir, ident, gzip.compress(b'{"sessions": [], "observations": "oops"}'))
    with pytest.raises(ChunkError, match='"observations" must be a list'):
        read_chunk(engram_dir, ident)


# ── merge_manifests ───────────────────────────────────────────────────────────

_ids = st.sampled_from(["0a0a0a0a", "1b1b1b1b", "2c2c2c2c", "3d3d3d3d" * 8])
_entries = st.fixed_dictionaries(
    {"id": _ids, "created_by": st.sampled_from(["a", "b"]), "memories": st.integers(0, 3)},
    optional={"extra": st.sampled_from(["x", "ÿ"])},
)
_manifests = st.fixed_dictionaries(
    {"version": st.sampled_from([1, 2]), "chunks": st.lists(_entries, max_size=5)},
    optional={"note": st.sampled_from(["n1", "n2"])},
)


@settings(max_examples=100, deadline=None)
@given(_manifests, _manifests, _manifests)
def test_merge_manifests_is_a_set_union(
    a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]
) -> None:
    ab = merge_manifests(a, b)
    assert ab == merge_manifests(b, a)
    assert merge_manifests(ab, c) == merge_manifests(a, merge_manifests(b, c))
    assert merge_manifests(ab, ab) == ab
    assert merge_manifests(ab, a) == ab
    ids = [e["id"] for e in ab["chunks"]]
    assert ids == sorted({e["id"] for e in a["chunks"] + b["chunks"]})
    assert ab["version"] == max(a["version"], b["version"])
    # The rendered bytes parse back to the same manifest.
    assert parse_manifest(manifest_bytes(ab)) == ab


def test_merge_manifests_drops_unsafe_entries_and_refuses_malformed() -> None:
    a = {"version": 2, "chunks": [{"id": "../x"}, {"id": "aaaaaaaa", "memories": 1}]}
    b = {"version": 2, "chunks": [{"id": "aaaaaaaa", "memories": 2}]}
    merged = merge_manifests(a, b)
    assert merged["chunks"] == [{"id": "aaaaaaaa", "memories": 2}]
    with pytest.raises(ChunkError, match="must be a list"):
        merge_manifests(a, {"chunks": "nope"})


# ── SyncState ─────────────────────────────────────────────────────────────────


def test_sync_state_clone_id_is_stable_and_applied_persists(engram_dir: Path) -> None:
    first = SyncState(engram_dir)
    clone = first.clone_id
    assert clone and SyncState(engram_dir).clone_id == clone  # saved on first use
    first.mark_applied(["aaaaaaaa", "bbbbbbbb"])
    first.set("cursor", {"seq": 3, "at": STAMP})
    assert SyncState(engram_dir).applied == frozenset()  # not before save
    first.save()
    again = SyncState(engram_dir)
    assert again.clone_id == clone
    assert again.applied == {"aaaaaaaa", "bbbbbbbb"}
    assert again.get("cursor") == {"seq": 3, "at": STAMP}
    assert again.get("unset") is None
    assert again.problems == []


def test_sync_state_saves_merge_with_other_processes(engram_dir: Path) -> None:
    one, two = SyncState(engram_dir), SyncState(engram_dir)
    assert one.clone_id == two.clone_id
    one.mark_applied(["11111111"])
    one.set("a", 1)
    two.mark_applied(["22222222"])
    two.set("b", 2)
    one.save()
    two.save()
    final = SyncState(engram_dir)
    assert final.applied == {"11111111", "22222222"}
    assert (final.get("a"), final.get("b")) == (1, 2)


def test_sync_state_refuses_non_json_values(engram_dir: Path) -> None:
    with pytest.raises(InvalidInput, match="not JSON"):
        SyncState(engram_dir).set("cursor", {1, 2})


@pytest.mark.parametrize(
    "bad",
    [b"{torn", b"[]", b'{"clone_id": 5, "applied": [], "values": {}}', b"\xff\xfe"],
    ids=["torn", "list", "bad-clone", "not-utf8"],
)
def test_a_corrupt_sync_state_is_set_aside(engram_dir: Path, bad: bytes) -> None:
    path = engram_dir / "state" / "sync.json"
    path.parent.mkdir()
    path.write_bytes(bad)
    state = SyncState(engram_dir)
    assert len(state.problems) == 1
    assert "sync.json" in state.problems[0] and "sync.json.corrupt" in state.problems[0]
    assert (engram_dir / "state" / "sync.json.corrupt").read_bytes() == bad  # never lost
    assert state.applied == frozenset()
    clone = state.clone_id
    state.save()
    assert SyncState(engram_dir).clone_id == clone
    assert SyncState(engram_dir).problems == []


def test_chunk_lines_parse_as_store_lines(engram_dir: Path) -> None:
    """A chunk's records are exactly what memories.jsonl would hold for them."""
    entry = write_chunk(engram_dir, RECORDS, created_by="a", created_at=STAMP)
    assert entry is not None
    raw = gzip.decompress((engram_dir / CHUNKS / f"{entry.id}.jsonl.gz").read_bytes())
    items = json.loads(raw)["engram"]["records"]
    parsed = [parse_line(canonical_line(item), path="x", lineno=n) for n, item in enumerate(items)]
    assert parsed == read_chunk(engram_dir, entry.id)


def test_a_symlinked_manifest_is_refused(engram_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"version": 2, "chunks": [{"id": "aaaaaaaa"}]}')
    (engram_dir / MANIFEST).symlink_to(outside)
    before = snapshot(tmp_path)
    with pytest.raises(ChunkError, match=r"manifest\.json: is a symbolic link"):
        read_manifest(engram_dir)
    with pytest.raises(ChunkError, match="symbolic link"):
        write_chunk(engram_dir, RECORDS, created_by="a", created_at=STAMP)
    assert snapshot(tmp_path) == before
    assert (engram_dir / MANIFEST).is_symlink()


def test_duplicate_manifest_entries_collapse_deterministically(engram_dir: Path) -> None:
    one = {"id": "aaaaaaaa", "created_by": "a", "memories": 1}
    two = {"id": "aaaaaaaa", "created_by": "b", "memories": 1}
    for order in ([one, two], [two, one]):
        (engram_dir / MANIFEST).write_text(json.dumps({"version": 2, "chunks": order}))
        assert [e.created_by for e in read_manifest(engram_dir)] == ["b"]


WRITER = """
import sys
from pathlib import Path
from engram.sync.chunks import write_chunk
folder, tag = Path(sys.argv[1]), sys.argv[2]
for n in range(8):
    record = {"id": f"{tag}{n}", "kind": "fact", "title": "t", "created_at": "x",
              "updated_at": "x", "rev": 1}
    write_chunk(folder, [record], created_by=tag, created_at="x")
"""


def test_concurrent_writers_lose_no_manifest_entry(engram_dir: Path) -> None:
    import subprocess
    import sys

    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(engram_dir), tag])
        for tag in ("p", "q", "r")
    ]
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0]
    entries, problems = list_chunks(engram_dir)
    assert problems == []
    assert len(read_manifest(engram_dir)) == len(entries) == 24
    ids = []
    for entry in entries:
        records = read_chunk(engram_dir, entry.id)
        assert isinstance(records, list)
        ids += [r["id"] for r in records]
    assert sorted(ids) == sorted(f"{tag}{n}" for tag in "pqr" for n in range(8))
