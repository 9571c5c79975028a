"""The guards written once (issue 29), each shown to hold through every caller that uses it.

One bounded gunzip (``engram.fileio.gunzip``: sync chunks, imported files, the secret scan of
quarantined files), one bounded JSON reader (``engram.model.jsonlimits``: the manifest, the sync
state, imported documents), one closing base (``engram.fileio.Closing``: the daemon client and
both full-text indexes) and the record's accessors, whose ``MemoryRecord`` lets mypy see a
misspelt key. Every refusal names the file it refused.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest

from engram.daemon.protocol import Client
from engram.errors import IndexError_, InputTooLarge, InvalidInput
from engram.fileio import Closing, gunzip
from engram.formats import convert
from engram.hygiene import secrets_audit
from engram.index.fts import FtsIndex
from engram.model import (
    fields_of,
    files_of,
    importance_of,
    kind_of,
    links_of,
    rev_of,
    scope_of,
    status_of,
    tags_of,
)
from engram.service import Engram
from engram.sync import chunks, manifest
from engram.sync.chunks import store_chunk, verify_chunk_file
from engram.sync.manifest import read_manifest
from engram.sync.syncfiles import ChunkError
from engram.sync.syncstate import SyncState
from tests.sync.test_chunks import gzip_bomb

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
AWS = "AKIA" + "Q7ZKX3VBN5MRT2WP"


def count_inflation(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the size of every piece any gzip inflater produces from now on."""
    produced: list[int] = []
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

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    return produced


def memories_of(project: Engram) -> bytes:
    path = project.project_ws.store.path
    return path.read_bytes() if path.exists() else b""


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# -- the one bounded gunzip ---------------------------------------------------------------------


def test_gunzip_stops_a_bomb_one_byte_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bomb.gz"
    gzip_bomb(path, 40)  # 40 MiB of zeros in about 40 KiB
    produced = count_inflation(monkeypatch)
    with pytest.raises(
        InputTooLarge, match=r"^bomb\.gz: decompresses to more than 1 MiB"
    ) as caught:
        gunzip(path.read_bytes(), name="bomb.gz", limit=MIB, hint="try a smaller file")
    assert "gzip bomb" in caught.value.message and caught.value.hint == "try a smaller file"
    assert sum(produced) == MIB + 1  # never inflated further


def test_gunzip_reads_every_member_up_to_the_limit_and_refuses_anything_else() -> None:
    one, two = gzip.compress(b"one "), gzip.compress(b"two")
    assert gunzip(one + two, name="x.gz", limit=7) == b"one two"  # exactly the limit
    with pytest.raises(InputTooLarge, match="more than the limit of 6 bytes"):
        gunzip(one + two, name="x.gz", limit=6)
    broken = [
        (b"", "empty file"),
        (one[:-3], "truncated gzip data"),
        (one + b"junk", "not valid gzip data"),
        (b"plain text", "not valid gzip data"),
    ]
    for data, words in broken:
        with pytest.raises(InvalidInput, match=words) as caught:
            gunzip(data, name="x.gz", limit=100)
        assert caught.value.message.startswith("x.gz: ")


def test_a_fetched_chunk_that_is_a_bomb_is_refused_and_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engram_dir = tmp_path / ".engram"
    engram_dir.mkdir()
    gzip_bomb(tmp_path / "bomb.gz", 8)
    raw = (tmp_path / "bomb.gz").read_bytes()
    monkeypatch.setattr(chunks, "MAX_CHUNK_BYTES", MIB)
    produced = count_inflation(monkeypatch)
    ident = "cd" * 16
    name = f"remote chunks/{ident}.jsonl.gz"
    with pytest.raises(ChunkError, match="gzip bomb") as caught:
        verify_chunk_file(ident, raw, name=name)
    assert caught.value.message.startswith(name) and caught.value.path == name
    with pytest.raises(ChunkError, match="gzip bomb"):
        store_chunk(engram_dir, ident, raw, name=name)
    assert not (engram_dir / "chunks" / f"{ident}.jsonl.gz").exists()
    assert max(produced) <= MIB + 1


def test_an_imported_bomb_is_refused_naming_the_file(
    project: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "go-export.json.gz"
    gzip_bomb(path, 8)
    monkeypatch.setattr(convert, "MAX_DECOMPRESSED_BYTES", MIB)
    produced = count_inflation(monkeypatch)
    before = memories_of(project)
    with pytest.raises(InputTooLarge, match="decompresses to more than 1 MiB") as caught:
        project.import_path(path)
    assert "go-export.json.gz" in caught.value.message
    assert caught.value.hint == "split the export into smaller files"
    # the routes that sniff a file (plain rows, Go engram, the rest) each stop at the limit
    assert max(produced) <= MIB + 1 and sum(produced) <= 3 * (MIB + 1)
    assert memories_of(project) == before


def test_doctor_scans_quarantined_gzip_within_the_limit_and_skips_a_bomb(
    project: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = project.project_ws.store.dir / "quarantine"
    folder.mkdir()
    gzip_bomb(folder / "bomb.jsonl.gz", 8)
    (folder / "kept.jsonl.gz").write_bytes(gzip.compress(f'{{"key": "{AWS}"}}\n'.encode()))
    monkeypatch.setattr(secrets_audit, "_MAX_SCAN_BYTES", MIB)
    produced = count_inflation(monkeypatch)
    found = [f.message for f in project.doctor() if f.check == "secrets"]
    assert any("kept.jsonl.gz: line(s) 1 hold AWS Access Key" in m for m in found), found
    assert not any("bomb.jsonl.gz" in m for m in found)  # set aside already: not read
    assert max(produced) <= MIB + 1 and sum(produced) <= 2 * (MIB + 1)
    assert all(AWS not in m for m in found)


# -- the one bounded JSON reader ----------------------------------------------------------------


def test_a_manifest_too_deep_or_too_big_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engram_dir = tmp_path / ".engram"
    engram_dir.mkdir()
    path = engram_dir / "manifest.json"
    path.write_text('{"version": 2, "chunks": [], "x": ' + nested(200) + "}")
    with pytest.raises(ChunkError, match=r"^manifest\.json: JSON nested deeper than 64 levels"):
        read_manifest(engram_dir)
    entries, problems = chunks.list_chunks(engram_dir)
    assert entries == [] and any(p.startswith("manifest.json: JSON nested") for p in problems)
    path.write_text(json.dumps({"version": 2, "chunks": [], "pad": "x" * 200}))
    monkeypatch.setattr(manifest, "MAX_MANIFEST_BYTES", 100)
    with pytest.raises(ChunkError, match=r"^manifest\.json: \d+ bytes is over the limit of 100"):
        read_manifest(engram_dir)


def test_a_sync_state_too_deep_is_set_aside_naming_it(tmp_path: Path) -> None:
    engram_dir = tmp_path / ".engram"
    (engram_dir / "state").mkdir(parents=True)
    deep = '{"version": 1, "clone_id": "c1", "applied": [], "values": {"v": ' + nested(100) + "}}"
    (engram_dir / "state" / "sync.json").write_text(deep)
    state = SyncState(engram_dir)
    (problem,) = state.problems
    assert problem.startswith("state/sync.json was unreadable (state/sync.json: JSON nested")
    assert (engram_dir / "state" / "sync.json.corrupt").read_text() == deep
    assert state.clone_id != "c1"  # started afresh


def test_an_imported_document_too_deep_is_refused_naming_the_file(
    project: Engram, tmp_path: Path
) -> None:
    path = tmp_path / "export.json"
    path.write_text('{"format": "engram", "memories": [], "x": ' + nested(300) + "}")
    before = memories_of(project)
    with pytest.raises(InvalidInput, match=r"JSON nested deeper than 256 levels") as caught:
        project.import_path(path)
    assert "export.json" in caught.value.message
    assert memories_of(project) == before


# -- the one closing base -----------------------------------------------------------------------


def test_what_holds_something_open_closes_through_the_one_base(tmp_path: Path) -> None:
    assert issubclass(Client, Closing) and issubclass(FtsIndex, Closing)
    with FtsIndex(tmp_path / "fts.db") as index:
        assert index.count() == 0
    with pytest.raises(IndexError_, match="is closed"):
        index.count()
    index.close()  # twice is fine
    with pytest.raises(TypeError, match="abstract"):
        Closing()  # type: ignore[abstract]


def test_the_tantivy_index_closes_through_the_one_base(tmp_path: Path) -> None:
    pytest.importorskip("tantivy")
    from engram.index.tantivy import TantivyIndex

    with TantivyIndex(tmp_path / "tantivy") as index:
        assert index.ids() == set()
    with pytest.raises(IndexError_):
        index.ids()


# -- the record's type and its defaults ---------------------------------------------------------


def test_each_default_is_read_through_its_accessor() -> None:
    empty: dict[str, Any] = {}
    assert (status_of(empty), scope_of(empty), kind_of(empty)) == ("active", "project", "note")
    assert (importance_of(empty), rev_of(empty)) == (3, 1)
    assert tags_of(empty) == files_of(empty) == [] and links_of(empty) == []
    blank = {"status": "", "scope": None, "kind": "", "importance": "high", "rev": "x"}
    assert (status_of(blank), scope_of(blank), kind_of(blank)) == ("active", "project", "note")
    assert (importance_of(blank), rev_of(blank)) == (3, 1)
    record = {"status": "archived", "importance": 5, "rev": 4, "tags": ["a"], "odd": 1}
    assert (status_of(record), importance_of(record), rev_of(record)) == ("archived", 5, 4)
    assert tags_of(record) is record["tags"]  # the record's own list, not a copy
    assert fields_of(record) is record and fields_of(record).get("status") == "archived"


def test_mypy_sees_a_misspelt_field_and_allows_the_rest(tmp_path: Path) -> None:
    source = tmp_path / "reader.py"
    source.write_text(
        textwrap.dedent(
            """\
            from typing import Any

            from engram.model import Record, fields_of, status_of


            def read(record: Record) -> tuple[str, Any, str]:
                known = fields_of(record)
                record["vendor_field"] = 1  # a Record is a dict: unknown fields stay allowed
                return known["title"], known["stauts"], status_of(record)
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), source],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, run.stdout
    assert 'reader.py:9: error: TypedDict "MemoryRecord" has no key "stauts"' in errors[0]
