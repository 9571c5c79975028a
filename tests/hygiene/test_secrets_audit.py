"""The store's one choke point for secrets, and ``engram doctor``'s scan of every place with text.

Fixture secrets are assembled at run time so this file holds no string a scanner would flag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import InvalidInput
from engram.model import canonical_line
from engram.service import Engram
from engram.store import MemoryStore
from engram.store.redact import REDACTED, Scrubber, scrub_record
from engram.sync.chunks import read_chunk
from engram.sync.gitmerge import merge_driver

AWS = "AKIA" + "Q7ZKX3VBN5MRT2WP"
GITHUB = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
STAMP = "2026-01-01T00:00:00.000Z"


def _record(rid: str, **fields: object) -> dict[str, object]:
    return {
        "id": rid,
        "kind": "note",
        "title": "t",
        "created_at": STAMP,
        "updated_at": STAMP,
        "rev": 1,
        **fields,
    }


def test_scrub_record_reaches_every_string_and_leaves_the_structure() -> None:
    record = _record(
        "abcdefghijklmnopqrstuvwxyz",
        content=f"key {AWS}",
        history=[{"rev": 1, "title": f"old {GITHUB}", "content": "fine"}],
        judgements=[{"score": 0.5, "by": "Ana", "query": f"find {AWS}"}],
        custom={"deep": [[{"x": f"token {GITHUB}"}]], f"name {AWS}": 3},
        deleted_at=STAMP,
    )
    clean, count = scrub_record(record)
    assert count == 5
    text = json.dumps(clean)
    assert AWS not in text and GITHUB not in text
    assert clean["custom"] == {"deep": [[{"x": f"token {REDACTED}"}]], f"name {REDACTED}": 3}
    assert {k: clean[k] for k in ("id", "rev", "created_at", "deleted_at")} == {
        k: record[k] for k in ("id", "rev", "created_at", "deleted_at")
    }
    assert scrub_record(clean) == (clean, 0)


def test_a_record_whose_id_is_a_secret_is_refused(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / ".engram")
    with pytest.raises(InvalidInput, match="looks like a secret"):
        store.put([_record(AWS)])
    assert not store.exists()


def test_put_scrubs_in_place_and_rewrite_scans_only_what_the_file_lacks(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / ".engram", scrubber=Scrubber([r"ACME-\d+"]))
    mine = _record("aaaaaaaaaaaaaaaaaaaaaaaaaa", content=f"ticket ACME-42 and {AWS}")
    store.put([mine])
    assert mine["content"] == f"ticket {REDACTED} and {REDACTED}"  # the caller holds the write
    # A line written by hand (an older tool): rewrite keeps it as it is, byte for byte ...
    old = _record("bbbbbbbbbbbbbbbbbbbbbbbbbb", content=f"hand-written {GITHUB}")
    store.path.write_bytes(store.path.read_bytes() + canonical_line(old))
    new = _record("cccccccccccccccccccccccccc", content=f"new {GITHUB}")
    store.rewrite([dict(mine), dict(old), new])
    data = store.path.read_text()
    assert data.count(GITHUB) == 1 and f"new {REDACTED}" in data
    # ... and doctor's rewrite scans every record.
    store.rewrite(store.read_all(), scrub_all=True)
    assert GITHUB not in store.path.read_text()


def test_merge_driver_scrubs_their_lines_and_keeps_ours_byte_for_byte(tmp_path: Path) -> None:
    ours_line = canonical_line(_record("aaaaaaaaaaaaaaaaaaaaaaaaaa", content=f"ours {AWS}"))
    theirs_line = canonical_line(
        _record("bbbbbbbbbbbbbbbbbbbbbbbbbb", content="theirs", extra={"k": GITHUB})
    )
    base, ours, theirs = (tmp_path / name for name in ("base", "ours", "theirs"))
    base.write_bytes(b"")
    ours.write_bytes(ours_line)  # ours is what this clone already holds: never rescanned
    theirs.write_bytes(theirs_line)
    assert merge_driver(base, ours, theirs, ".engram/memories.jsonl") == 0
    merged = ours.read_bytes()
    assert merged.startswith(ours_line)
    assert GITHUB.encode() not in merged and f'"k":"{REDACTED}"'.encode() in merged


def _raw_line(project: Engram, record: dict[str, object]) -> None:
    path = project.project_ws.store.path
    path.write_bytes(path.read_bytes() + canonical_line(record))


def test_doctor_finds_secrets_in_every_field_and_state_file_and_fix_scrubs_them(
    project: Engram,
) -> None:
    kept = project.remember("a clean memory", "nothing to hide")
    _raw_line(
        project,
        _record(
            "zzzzzzzzzzzzzzzzzzzzzzzzzz",
            content="the title and content are clean",
            history=[{"rev": 1, "title": "old", "content": f"old key {AWS}"}],
            vendor={"note": GITHUB},
        ),
    )
    store = project.project_ws.store
    sessions = store.state_dir / "sessions.json"
    sessions.write_text(
        json.dumps({"version": 1, "sessions": {"s1": {"directory": f"/w {GITHUB}"}}})
    )
    quarantine = store.dir / "quarantine" / "memories-1.jsonl"
    quarantine.parent.mkdir()
    quarantine.write_text(f'{{"broken": "{AWS}"\n')
    other_state = store.state_dir / "notes.txt"
    other_state.write_text(f"token {GITHUB}\n")

    found = [f for f in project.doctor() if f.check == "secrets"]
    messages = "\n".join(f.message for f in found)
    assert "memory zzzzzzzzzzzzzzzzzzzzzzzzzz holds what looks like" in messages
    assert "AWS Access Key" in messages and "GitHub Token" in messages
    assert "sessions.json" in messages and "memories-1.jsonl: line(s) 1" in messages
    assert "notes.txt" in messages and "delete the file" in messages
    assert AWS not in messages and GITHUB not in messages  # findings never repeat a secret

    fixed = [f for f in project.doctor(fix=True) if f.check == "secrets"]
    assert all(f.fixed for f in fixed if "notes.txt" not in f.message)
    for path in (store.path, sessions, quarantine):
        text = path.read_text()
        assert AWS not in text and GITHUB not in text, path
    record = project.get("zzzzzzzzzzzzzzzzzzzzzzzzzz")
    assert record["rev"] == 2 and record["updated_at"] > STAMP  # wins the merge elsewhere
    assert record["vendor"] == {"note": REDACTED}
    assert project.get(kept.record["id"])["rev"] == 1  # a clean memory is not touched
    left = [f.message for f in project.doctor() if f.check == "secrets"]
    assert len(left) == 1 and "notes.txt" in left[0]  # reported, never edited


def test_an_unreadable_line_set_aside_by_doctor_fix_is_scrubbed_first(project: Engram) -> None:
    path = project.project_ws.store.path
    broken = b'{"id": "broken", "title": "deploy key ' + GITHUB.encode() + b" \xff"
    path.write_bytes(path.read_bytes() + broken + b"\n")
    project.doctor(fix=True)
    (kept,) = (path.parent / "quarantine").glob("memories-*.jsonl")
    data = kept.read_bytes()
    assert GITHUB.encode() not in data and REDACTED.encode() in data
    assert data.startswith(b'{"id": "broken", "title": "deploy key ') and b"\xff" in data
    everything = b"".join(p.read_bytes() for p in path.parent.rglob("*") if p.is_file())
    assert GITHUB.encode() not in everything


def test_plain_needles_are_spelled_out_and_gate_the_same_lines() -> None:
    from engram.store import redact as redact_module

    groups = redact_module._rule_groups()
    words = redact_module._needle_words()
    assert len(groups) == len(words)
    spelled = {w for group in words if group for w in group}
    assert {"api_key", "apikey", "db_pass", "dbpass", "hooks.slack.com", "-u "} <= spelled
    for (needle, _, _), group in zip(groups, words, strict=True):
        for word in group or ():
            assert needle is not None and needle.search(word), (needle.pattern, word)
    # A line holding no word of a plain needle is skipped; the results stay those of a full scan.
    text = f"apikey = 'Zx9Qw8Er7Ty6Ui5Op4'\ndb_pass: Zx9Qw8Er7Ty6Ui5Op4\nplain words\n{AWS}"
    assert redact_module._find(text, ()) == redact_module._find(text, (), prefilter=False)


def test_a_redaction_by_doctor_travels_in_the_next_chunk(project: Engram) -> None:
    _raw_line(project, _record("yyyyyyyyyyyyyyyyyyyyyyyyyy", content=f"key {AWS}"))
    assert any(f.check == "secrets" and f.fixed for f in project.doctor(fix=True))
    report = project.sync()
    assert report.exported == 1, report
    (record,) = read_chunk(project.project_ws.store.dir, report.exported_chunk)
    assert record["id"] == "yyyyyyyyyyyyyyyyyyyyyyyyyy" and record["content"] == f"key {REDACTED}"


_PIECES = st.sampled_from(
    ["", " ", "\n", "\n\n", "<private>", "</private>", "password: ", "Zx9Qw8Er7Ty6Ui5Op4", AWS,
     GITHUB, "-----BEGIN RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3t",
     "-----END RSA PRIVATE KEY-----", REDACTED, "://u:", "@h", "token=", "plain words"]
)  # fmt: skip
_TEXT = st.lists(_PIECES, max_size=8).map("".join)


def _nested(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(inner, st.lists(inner, max_size=3), st.dictionaries(_TEXT, inner, max_size=3))


# Two levels of lists and dicts, spelled out (st.recursive's argument check warned at random).
_VALUE = _nested(_nested(st.one_of(_TEXT, st.integers(), st.booleans(), st.none())))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["title", "content", "x", "y", "history"]), _VALUE))
def test_scrubbing_a_record_twice_changes_nothing_more(fields: dict[str, object]) -> None:
    record = _record("abcdefghijklmnopqrstuvwxyz", **fields)
    once, _ = scrub_record(record)
    assert scrub_record(once) == (once, 0)
    assert AWS not in json.dumps(once) and GITHUB not in json.dumps(once)


def test_a_record_nested_past_any_reader_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    deep: object = f"key {AWS}"
    for _ in range(2_000):
        deep = [deep]
    store = MemoryStore(tmp_path / ".engram")
    with pytest.raises(InvalidInput, match="nests more than"):
        store.put([_record("abcdefghijklmnopqrstuvwxyz", custom=deep)])
    assert not store.path.exists() or AWS not in store.path.read_text()


def test_every_manifest_written_is_scrubbed(tmp_path: Path) -> None:
    from engram.sync.chunks import manifest_bytes, merge_manifests, parse_manifest

    entry = {"id": "0" * 32, "created_by": f"laptop {GITHUB}", "created_at": STAMP, "memories": 1}
    theirs = {"version": 2, "chunks": [entry], "note": f"key {AWS}"}
    data = manifest_bytes(merge_manifests({"version": 2, "chunks": []}, theirs))
    assert GITHUB.encode() not in data and AWS.encode() not in data
    assert parse_manifest(data)["chunks"][0]["id"] == "0" * 32


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "engram", "-C", str(root), *args],
        capture_output=True,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize("backend", ["tantivy", "fts5"])
def test_doctor_fix_leaves_no_trace_of_a_secret_in_the_index_files(
    tmp_path: Path, backend: str
) -> None:
    """A secret written by hand, indexed, then redacted by doctor --fix: gone from every byte.

    Before the fix the index's files hold it (SQLite's WAL, the full-text backend); after it
    none does: the rows follow the file, Tantivy keeps no deleted document's terms, and every
    SQLite file was vacuumed with its WAL truncated.
    """
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    Engram.init(root, "demo")[0].close()
    config = root / ".engram" / "config.yaml"
    config.write_text(config.read_text().replace("backend: tantivy", f"backend: {backend}"))
    password = "Zq8" + "hunterXY42"
    secrets = [password, GITHUB[4:], AWS]
    assert _cli(root, "remember", "cache note", "the cache warms up").returncode == 0
    store = root / ".engram" / "memories.jsonl"
    store.write_bytes(
        store.read_bytes()
        + canonical_line(
            _record(
                "zzzzzzzzzzzzzzzzzzzzzzzzzz",
                title="staging creds",
                content=f"mysql://root:{password}@db.internal/app and {GITHUB} and {AWS}",
            )
        )
    )
    searched = _cli(root, "recall", "staging creds", "--json")
    assert searched.returncode == 0 and b"zzzzzzzzzzzzzzzzzzzzzzzzzz" in searched.stdout

    def traces() -> list[str]:
        found = []
        for path in sorted((root / ".engram" / "index").rglob("*")):
            data = path.read_bytes().lower() if path.is_file() else b""
            found += [f"{path.name}: {s[:6]}" for s in secrets if s.lower().encode() in data]
        if backend == "tantivy":
            import tantivy

            searcher = tantivy.Index.open(str(root / ".engram" / "index" / "tantivy")).searcher()
            # A deleted document's terms count here until its segment is gone.
            found += [
                f"tantivy term {s[:6]}"
                for s in secrets
                if searcher.doc_freq("body", s.lower()) or searcher.doc_freq("title", s.lower())
            ]
        return found

    assert traces(), "the test must see the secret in the index before the fix"
    fixed = _cli(root, "doctor", "--fix")
    assert b"fixed" in fixed.stdout, fixed.stdout.decode() + fixed.stderr.decode()
    assert traces() == []
    for secret in secrets:
        assert secret.encode() not in store.read_bytes()
    # The index still answers, with the redacted text.
    again = _cli(root, "recall", "staging creds", "--json")
    assert b"zzzzzzzzzzzzzzzzzzzzzzzzzz" in again.stdout and REDACTED.encode() in again.stdout


@pytest.mark.parametrize(
    ("summary", "secret"),
    [
        ("mysql://root:" + "Pw9hunterXY" + "@host/app", "Pw9hunterXY"),
        ("redis://cache:" + "Rd7hunterXY" + "@redis.internal:6379/0", "Rd7hunterXY"),
        ("ftp://bob:" + "Ft5hunterXY" + "@files.example.com/in", "Ft5hunterXY"),
        ("https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/" + "Wh4k" * 6, "Wh4k" * 6),
    ],
)
def test_a_go_session_title_rebuilt_from_its_summary_keeps_no_secret(
    project: Engram, summary: str, secret: str
) -> None:
    """Go engram's session has no title: engram makes one from the summary's first line."""
    chunk = {
        "sessions": [
            {
                "id": "sess-1",
                "project": "demo",
                "started_at": "2026-01-01 09:00:00",
                "summary": summary,
            }
        ],
        "observations": [],
        "prompts": [],
    }
    result = project.import_go(json.dumps(chunk).encode())
    assert result.added == 1
    (record,) = [r for r in project.project_ws.store.scan().records if r["kind"] == "session"]
    assert record["title"].startswith("Session: ")
    assert secret not in json.dumps(record), record["title"]
    assert REDACTED in record["title"]
