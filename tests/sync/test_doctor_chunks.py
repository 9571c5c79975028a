"""``engram doctor`` on the sync chunks and the manifest, and ``--fix`` keeping committed data
in the committed store: each defect is found, named and, where it can be, repaired in place;
what cannot be read is moved to the committed ``quarantine/``, never deleted or hidden in
git-ignored ``state/``.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import zlib
from pathlib import Path

from engram.hygiene.finding import Finding
from engram.model import canonical_line
from engram.service import Engram
from engram.store import MemoryStore
from engram.sync.chunks import CHUNKS, MANIFEST, SUFFIX, chunk_id, read_manifest, write_chunk
from tests.conftest import run_cli
from tests.helpers.records import STAMP, record
from tests.sync.test_chunks import gzip_bomb


def text(output: bytes) -> str:
    return output.decode("utf-8", errors="replace")


def store_dir(engram: Engram) -> Path:
    return engram.project_ws.store.dir


def chunk_file(engram_dir: Path, ident: str) -> Path:
    return engram_dir / CHUNKS / f"{ident}{SUFFIX}"


def exported(engram_dir: Path, *titles: str) -> str:
    """Write a chunk with one record per title through the real writer; return its id."""
    records = [record(f"{n:04d}" + "x" * 22, title) for n, title in enumerate(titles)]
    entry = write_chunk(engram_dir, records, created_by="Teammate", created_at=STAMP)
    assert entry is not None
    return entry.id


def about(findings: list[Finding], check: str) -> list[Finding]:
    return [f for f in findings if f.check == check]


def test_a_sound_store_with_chunks_has_nothing_to_report(project: Engram) -> None:
    exported(store_dir(project), "One", "Two")
    findings = project.doctor()
    assert [(f.severity, f.check) for f in findings] == [("ok", "all")], findings


def test_unlisted_chunks_are_relisted_and_missing_files_dropped(project: Engram) -> None:
    engram_dir = store_dir(project)
    listed = exported(engram_dir, "Listed")
    lost = exported(engram_dir, "Lost")
    loose = exported(engram_dir, "Loose one", "Loose two")
    manifest = json.loads((engram_dir / MANIFEST).read_text("utf-8"))
    manifest["chunks"] = [c for c in manifest["chunks"] if c["id"] != loose]
    (engram_dir / MANIFEST).write_text(json.dumps(manifest), "utf-8")
    chunk_file(engram_dir, lost).unlink()

    found = about(project.doctor(), "manifest")
    messages = [f.message for f in found]
    assert f"{CHUNKS}/{loose}{SUFFIX} is not listed in {MANIFEST}" in messages
    assert f"{MANIFEST} lists chunk {lost}, whose file is missing" in messages
    assert not any(f.fixed for f in found)

    fixed = project.doctor(fix=True)
    assert all(f.fixed for f in about(fixed, "manifest"))
    entries = {e.id: e for e in read_manifest(engram_dir)}
    assert set(entries) == {listed, loose}
    assert entries[listed].created_by == "Teammate"  # a known entry is kept as it was
    assert entries[loose].memories == 2  # counted from the chunk itself
    assert not about(project.doctor(), "manifest")


def test_a_torn_manifest_is_rebuilt_from_the_chunks_folder(project: Engram) -> None:
    engram_dir = store_dir(project)
    first, second = exported(engram_dir, "First"), exported(engram_dir, "Second")
    whole = (engram_dir / MANIFEST).read_bytes()
    (engram_dir / MANIFEST).write_bytes(whole[: len(whole) // 2])  # a crash mid-write

    (error,) = about(project.doctor(), "manifest")
    assert error.severity == "error" and error.message.startswith(f"{MANIFEST}: not JSON")

    checked = run_cli("doctor", "--fix", cwd=project.root)
    assert checked.returncode == 0, text(checked.stdout + checked.stderr)
    assert f"{MANIFEST} rewritten from {CHUNKS}/ (2 chunks listed)" in text(checked.stdout)
    assert {e.id for e in read_manifest(engram_dir)} == {first, second}
    assert [(f.severity, f.check) for f in project.doctor()] == [("ok", "all")]


def test_an_unreadable_chunk_is_moved_to_the_committed_quarantine(project: Engram) -> None:
    engram_dir = store_dir(project)
    kept = exported(engram_dir, "Still applies")
    bomb = "ab" * 16
    gzip_bomb(chunk_file(engram_dir, bomb), 70)  # inflates past the 64 MiB a chunk may hold
    torn = "cd" * 16
    chunk_file(engram_dir, torn).write_bytes(chunk_file(engram_dir, kept).read_bytes()[:-9])
    bomb_bytes = chunk_file(engram_dir, bomb).read_bytes()

    errors = {f.message for f in about(project.doctor(), "chunks") if f.severity == "error"}
    assert any(bomb in m and "gzip bomb" in m for m in errors), errors
    assert any(torn in m and "truncated" in m for m in errors), errors
    synced = json.loads(run_cli("sync", "--json", cwd=project.root).stdout)
    assert any("gzip bomb" in p for p in synced["problems"])  # sync refuses it too

    fixed = project.doctor(fix=True)
    moved = [f.message for f in fixed if f.fixed and "moved to quarantine/chunks/" in f.message]
    assert len(moved) == 2, [f.message for f in fixed]
    aside = engram_dir / "quarantine" / CHUNKS / f"{bomb}{SUFFIX}"
    assert aside.read_bytes() == bomb_bytes  # not inflated, not deleted: byte for byte
    assert not chunk_file(engram_dir, bomb).exists()
    assert {e.id for e in read_manifest(engram_dir)} == {kept}
    ignored = subprocess.run(["git", "check-ignore", "-q", str(aside)], cwd=project.root)
    assert ignored.returncode == 1  # committed with the store
    assert not [f for f in project.doctor() if f.severity == "error"]


def test_a_misnamed_chunk_is_renamed_to_its_content_hash(project: Engram) -> None:
    engram_dir = store_dir(project)
    data = canonical_line(record("mmmm" + "m" * 22, "Renamed, not lost"))
    wrong = "ef" * 16
    chunk_file(engram_dir, wrong).parent.mkdir(exist_ok=True)
    chunk_file(engram_dir, wrong).write_bytes(zlib.compress(data, 9, 16 + zlib.MAX_WBITS))

    (error,) = [f for f in about(project.doctor(), "chunks") if f.severity == "error"]
    assert f"{wrong}{SUFFIX}: content hashes to {chunk_id(data)}" in error.message

    project.doctor(fix=True)
    assert not chunk_file(engram_dir, wrong).exists()
    assert chunk_file(engram_dir, chunk_id(data)).exists()
    assert {e.id for e in read_manifest(engram_dir)} == {chunk_id(data)}
    project.sync()
    assert project.get("mmmm")["title"] == "Renamed, not lost"


def test_a_chunk_with_one_bad_record_is_reported_and_left_to_apply(project: Engram) -> None:
    engram_dir = store_dir(project)
    good = record("gggg" + "g" * 22, "Good record")
    bad = {"id": "hhhh", "title": "no kind, no dates"}
    document = {
        "engram": {"records": [good, bad], "version": 1},
        "observations": [],
        "prompts": [],
        "sessions": [],
    }
    data = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    ident = chunk_id(data)
    (engram_dir / CHUNKS).mkdir(exist_ok=True)
    chunk_file(engram_dir, ident).write_bytes(zlib.compress(data, 9, 16 + zlib.MAX_WBITS))

    fixed = project.doctor(fix=True)
    (warning,) = [f for f in about(fixed, "chunks") if "missing required" in f.message]
    assert warning.message.startswith(f"{CHUNKS}/{ident}{SUFFIX}:2: missing required")
    assert chunk_file(engram_dir, ident).exists()  # the rest of it still applies
    assert ident in {e.id for e in read_manifest(engram_dir)}  # and it is listed now
    project.sync()
    assert project.get("gggg")["title"] == "Good record"


def test_a_legacy_chunk_is_flagged_and_rewritten_with_its_bad_line_kept(project: Engram) -> None:
    """An older engram chunk (JSON Lines) breaks Go engram's sync: doctor --fix rewrites it."""
    engram_dir = store_dir(project)
    good = canonical_line(record("gggg" + "g" * 22, "Good record"))
    bad = b'{"id":"hhhh","title":"no kind, no dates"}\n'
    data = b"".join(sorted([good, bad]))
    ident = chunk_id(data)
    (engram_dir / CHUNKS).mkdir(exist_ok=True)
    packed = zlib.compress(data, 9, 16 + zlib.MAX_WBITS)
    chunk_file(engram_dir, ident).write_bytes(packed)

    (flag,) = [f for f in about(project.doctor(), "chunks") if "older engram" in f.message]
    assert flag.severity == "warning" and ident in flag.message and not flag.fixed

    fixed = run_cli("doctor", "--fix", cwd=project.root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    (new,) = [e.id for e in read_manifest(engram_dir)]
    assert new != ident and not chunk_file(engram_dir, ident).exists()
    assert f"rewritten as {CHUNKS}/{new}{SUFFIX} (1 memories)" in text(fixed.stdout)
    aside = engram_dir / "quarantine" / CHUNKS / f"{ident}{SUFFIX}"
    assert aside.read_bytes() == packed  # the line no reader accepts is kept, committed
    assert json.loads(gzip.decompress(chunk_file(engram_dir, new).read_bytes()))["engram"]
    assert not [f for f in project.doctor() if "older engram" in f.message]
    project.sync()
    assert project.get("gggg")["title"] == "Good record"


# -- doctor --fix keeps committed lines in the committed file ---------------------------------


def test_doctor_fix_repairs_bom_crlf_and_bad_byte_lines_in_place(project: Engram) -> None:
    path = project.project_ws.store.path
    plain = record("aaaa" + "a" * 22, "Plain")
    bom = record("bbbb" + "b" * 22, "Saved by an editor that writes a BOM")
    crlf = record("cccc" + "c" * 22, "Saved with CRLF")
    latin = record("dddd" + "d" * 22, "Caf\u00e9 in Latin-1")
    broken = b'{"id": "eeee", "title": "cut off\n'
    path.write_bytes(
        b"\xef\xbb\xbf"
        + canonical_line(plain)  # the BOM sits on the first line
        + canonical_line(bom).replace(b"{", b"\xef\xbb\xbf{", 1)
        + canonical_line(crlf)[:-1]
        + b"\r\n"
        + canonical_line(latin).replace("\u00e9".encode(), b"\xe9")
        + broken
    )

    checked = run_cli("doctor", cwd=project.root)
    assert checked.returncode == 1
    for line in (1, 2, 4, 5):
        assert f"{path}:{line}:" in text(checked.stdout), text(checked.stdout)

    fixed = run_cli("doctor", "--fix", cwd=project.root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    out = text(fixed.stdout)
    assert f"{path}:1: memory {plain['id']} repaired in place (removed a UTF-8 byte order" in out
    assert f"{path}:4: memory {latin['id']} repaired in place (replaced 2 invalid" in out
    scan = MemoryStore(path.parent).scan()
    assert not scan.problems and scan.canonical
    titles = {r["id"]: r["title"] for r in scan.records}
    assert titles == {
        plain["id"]: "Plain",
        bom["id"]: bom["title"],
        crlf["id"]: "Saved with CRLF",
        latin["id"]: "Caf\ufffd in Latin-1",  # marked, not guessed
    }
    # The one line nothing could read is committed, not hidden in git-ignored state/.
    (kept,) = (path.parent / "quarantine").glob("memories-*.jsonl")
    assert kept.read_bytes() == broken
    assert not list((path.parent / "state").glob("quarantine*"))
    again = run_cli("doctor", cwd=project.root)
    assert again.returncode == 0
    assert "quarantine" in text(again.stdout)  # and doctor keeps pointing at it
