"""engram.store.files: the store's writes of chunks, the manifest and state files."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.errors import UnsafePath
from engram.store import files


@pytest.mark.parametrize("name", ["", "../escape.jsonl.gz", "a/b.jsonl.gz", ".hidden", "a\\b", "."])
def test_a_name_that_is_not_one_plain_file_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafePath):
        files.write_chunk(tmp_path, name, b"x")
    with pytest.raises(UnsafePath):
        files.write_state(tmp_path / "state", name, b"x")
    assert not (tmp_path.parent / "escape.jsonl.gz").exists()


def test_chunks_and_state_folders_are_made_and_written_whole(tmp_path: Path) -> None:
    path = files.write_chunk(tmp_path, "ab12cd34.jsonl.gz", b"chunk")
    assert path == tmp_path / "chunks" / "ab12cd34.jsonl.gz" and path.read_bytes() == b"chunk"
    files.write_manifest(tmp_path, b"{}\n")
    assert (tmp_path / "manifest.json").read_bytes() == b"{}\n"
    state = tmp_path / "state"
    files.write_state(state, "sync.json", b"{}\n")
    files.write_cache(state, "cache.json", b"[]")
    assert sorted(p.name for p in state.iterdir()) == ["cache.json", "sync.json"]  # no temp files
    assert files.remove_chunk(tmp_path, "ab12cd34.jsonl.gz")
    assert not files.remove_chunk(tmp_path, "ab12cd34.jsonl.gz")


def test_a_chunks_folder_that_is_a_link_is_not_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    store = tmp_path / "store"
    store.mkdir()
    (store / "chunks").symlink_to(elsewhere)
    with pytest.raises(UnsafePath):
        files.write_chunk(store, "ab12cd34.jsonl.gz", b"chunk")
    assert list(elsewhere.iterdir()) == []


def test_a_state_file_set_aside_is_kept_under_its_new_name(tmp_path: Path) -> None:
    state = tmp_path / "state"
    files.write_state(state, "sync.json", b"torn")
    moved = files.set_aside_state(state, "sync.json", "sync.json.corrupt")
    assert moved == state / "sync.json.corrupt" and moved.read_bytes() == b"torn"
    assert not (state / "sync.json").exists()
    assert files.set_aside_state(state, "sync.json", "sync.json.corrupt") is None
    assert files.remove_state(state, "sync.json.corrupt")
