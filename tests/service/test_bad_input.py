"""Untrusted and broken input, through the service and through the real CLI (README).

A damaged memories.jsonl is reported with file and line and never written over; doctor repairs
it without losing a line; oversized, binary and non-UTF-8 input is refused with a clear error;
any query text is valid; secrets never reach the file.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import CorruptStore, InvalidInput
from engram.model import canonical_line, parse_line
from engram.service import Engram
from engram.store import MemoryStore
from tests.conftest import run_cli
from tests.helpers.records import record


def memories_path(engram: Engram) -> Path:
    return engram.project_ws.store.path


def seeded(engram: Engram) -> list[bytes]:
    """Save three memories; return the file's lines."""
    engram.remember("Payment retries", "Retries use idempotency keys.", kind="decision")
    engram.remember("Ledger rounding", "Round half to even in the ledger.", kind="pitfall")
    engram.remember("Cache tenants", "Cache keys include the tenant id.", kind="pattern")
    return memories_path(engram).read_bytes().splitlines(keepends=True)


def text(output: bytes) -> str:
    return output.decode("utf-8", errors="replace")


def error_lines(stderr: bytes) -> list[str]:
    return [line for line in text(stderr).splitlines() if line]


def assert_error(
    result: subprocess.CompletedProcess[bytes], *fragments: str, hint: str = ""
) -> None:
    """Exit 1, ``error: …`` naming the fragments, a ``hint:`` line, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = error_lines(result.stderr)
    assert lines, "no message on stderr"
    assert lines[0].startswith("error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines
    hints = [line for line in lines if line.startswith("hint: ")]
    assert hints, lines
    assert hint in hints[0]
    assert "Traceback" not in text(result.stderr)


# -- a damaged memories.jsonl -------------------------------------------------------------------


def corrupt_not_json(lines: list[bytes]) -> tuple[bytes, int, str, bytes]:
    bad = b'{"id": "half-written", "kind": "note", "title": "cut off\n'
    return b"".join([lines[0], bad, *lines[1:]]), 2, "not JSON", bad


def corrupt_utf8(lines: list[bytes]) -> tuple[bytes, int, str, bytes]:
    bad = canonical_line(record("zzzzlatin1", "caf\u00e9")).replace(b"caf\xc3\xa9", b"caf\xe9")
    return b"".join([*lines, bad]), 4, "invalid UTF-8", bad


def corrupt_conflict(lines: list[bytes]) -> tuple[bytes, int, str, bytes]:
    ours = parse_line(lines[1], path="m", lineno=2)
    theirs = {**ours, "title": f"{ours['title']}, their side", "updated_at": "2099-01-01T00:00:00Z"}
    data = b"".join(
        [
            lines[0],
            b"<<<<<<< HEAD\n",
            lines[1],
            b"=======\n",
            canonical_line(theirs),
            b">>>>>>> feature\n",
            lines[2],
        ]
    )
    return data, 2, "conflict marker", b""


CORRUPTIONS = {
    "not-json": corrupt_not_json,
    "invalid-utf8": corrupt_utf8,
    "conflict-markers": corrupt_conflict,
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_service_refuses_to_write_a_damaged_file_and_still_reads(
    project: Engram, name: str
) -> None:
    lines = seeded(project)
    data, line, fragment, _ = CORRUPTIONS[name](lines)
    path = memories_path(project)
    path.write_bytes(data)

    with pytest.raises(CorruptStore) as info:
        project.remember("A new memory", "It must not be written.")
    assert f"{path}:{line}:" in info.value.message
    assert fragment in info.value.message
    assert "doctor" in info.value.hint
    assert path.read_bytes() == data

    hits = project.recall("idempotency keys")
    assert [hit.record["title"] for hit in hits][:1] == ["Payment retries"]
    assert any(f"{path}:{line}:" in message for _, message in project.problems())
    findings = project.doctor()
    assert any(f.severity == "error" and f"{path}:{line}:" in f.message for f in findings)
    assert path.read_bytes() == data


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_cli_reports_a_damaged_file_and_doctor_fix_repairs_it(project: Engram, name: str) -> None:
    lines = seeded(project)
    data, line, fragment, bad = CORRUPTIONS[name](lines)
    path = memories_path(project)
    path.write_bytes(data)
    root = project.root

    saved = run_cli("remember", "A new memory", "It must not be written.", cwd=root)
    assert_error(saved, f"memories.jsonl:{line}:", fragment, hint="engram doctor")
    assert saved.stdout == b""
    assert path.read_bytes() == data

    found = run_cli("recall", "tenant cache", cwd=root)
    assert found.returncode == 0, text(found.stderr)
    assert "Cache tenants" in text(found.stdout)
    assert "warning: skipped" in text(found.stderr)
    assert f"memories.jsonl:{line}:" in text(found.stderr)

    checked = run_cli("doctor", cwd=root)
    assert checked.returncode == 1
    assert f"memories.jsonl:{line}:" in text(checked.stdout)
    assert path.read_bytes() == data

    fixed = run_cli("doctor", "--fix", cwd=root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    scan = MemoryStore(path.parent).scan()
    assert not scan.problems
    assert scan.canonical
    titles = {r["title"] for r in scan.records}
    originals = [str(parse_line(raw, path="m", lineno=1)["title"]) for raw in lines]
    quarantined = sorted((path.parent / "quarantine").glob("memories-*.jsonl"))
    assert not list((path.parent / "state").glob("quarantine*"))
    if name == "conflict-markers":
        # Both sides kept: the newer side wins the line, the other side's text is in conflicts.
        assert b"<<<<<<<" not in path.read_bytes()
        assert titles == {originals[0], f"{originals[1]}, their side", originals[2]}
        (merged,) = [r for r in scan.records if r["title"] == f"{originals[1]}, their side"]
        assert [h["title"] for h in merged["conflicts"]] == [originals[1]]
        assert not quarantined
    elif name == "invalid-utf8":
        # Repaired in the committed file: the bad byte marked, the memory kept.
        assert titles == {*originals, "caf\ufffd"}
        assert not quarantined
    else:
        assert titles == set(originals)
        assert len(quarantined) == 1
        assert quarantined[0].read_bytes() == bad

    again = run_cli("doctor", cwd=root)
    assert again.returncode == 0, text(again.stdout)
    saved = run_cli("remember", "A new memory", "Now it is written.", cwd=root)
    assert saved.returncode == 0, text(saved.stderr)


def test_doctor_fix_merges_a_duplicate_id(project: Engram) -> None:
    rid = "dupdupdupdupdupdupdupdup22"
    older = record(rid, "Old title", rev=1)
    newer = record(rid, "New title", rev=2)
    path = memories_path(project)
    path.write_bytes(canonical_line(newer) + canonical_line(older))

    checked = run_cli("doctor", cwd=project.root)
    assert checked.returncode == 1
    assert f"memories.jsonl:2: duplicate id {rid}" in text(checked.stdout)

    fixed = run_cli("doctor", "--fix", cwd=project.root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    (merged,) = MemoryStore(path.parent).read_all()
    assert merged["title"] == "New title"
    assert merged["rev"] == 2
    # Not an earlier version it knows of (no history): kept as a possible concurrent edit.
    assert [h["title"] for h in merged["conflicts"]] == ["Old title"]
    assert project.get(rid[:8])["title"] == "New title"


def test_doctor_fix_resolves_a_diff3_conflict_keeping_both_sides(project: Engram) -> None:
    """A conflict in diff3 style (with the base section) loses neither side's additions."""
    shared = "mmmm" + "a" * 22
    base = record(shared, "Base title", rev=1)
    ours = record(shared, "Our title", rev=2)
    theirs = record(shared, "Their title", rev=3)
    ours_only = record("mmmm" + "b" * 22, "Only on our branch")
    theirs_only = record("mmmm" + "c" * 22, "Only on their branch")
    path = memories_path(project)
    path.write_bytes(
        b"".join(
            [
                b"<<<<<<< ours\n",
                canonical_line(ours),
                canonical_line(ours_only),
                b"||||||| base\n",
                canonical_line(base),
                b"=======\n",
                canonical_line(theirs),
                canonical_line(theirs_only),
                b">>>>>>> theirs\n",
            ]
        )
    )
    findings = project.doctor(fix=True)
    assert any(f.fixed and "conflict marker" in f.message for f in findings)
    scan = MemoryStore(path.parent).scan()
    assert not scan.problems
    assert scan.canonical
    by_id = {r["id"]: r for r in scan.records}
    assert set(by_id) == {shared, ours_only["id"], theirs_only["id"]}
    assert by_id[shared]["title"] == "Their title"
    assert {h["title"] for h in by_id[shared]["conflicts"]} == {"Our title", "Base title"}
    assert not list((path.parent / "quarantine").glob("memories-*.jsonl"))
    # What is left is for a person: the memory keeps the losing texts until someone settles it.
    (left,) = project.doctor()
    assert (left.severity, left.check) == ("warning", "conflicts")
    assert shared in left.message


def test_remember_after_a_hand_edit_without_final_newline_loses_nothing(
    project: Engram,
) -> None:
    # The smallest possible id: every new id sorts after it, so the new line goes at the end.
    hand = record("2" * 26, "Added by hand in an editor that drops the final newline")
    path = memories_path(project)
    path.write_bytes(canonical_line(hand)[:-1])
    saved = project.remember("Saved right after", "By an agent.")
    scan = MemoryStore(path.parent).scan()
    assert not scan.problems, scan.problems[0].message
    assert {r["id"] for r in scan.records} == {hand["id"], saved.record["id"]}


def test_doctor_fix_quarantines_an_object_missing_required_fields(project: Engram) -> None:
    lines = seeded(project)
    path = memories_path(project)
    bad = b'{"id":"zzzzincomplete","title":"no kind, no dates, no rev"}\n'
    path.write_bytes(b"".join([*lines, bad]))
    fixed = run_cli("doctor", "--fix", cwd=project.root)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    assert not MemoryStore(path.parent).scan().problems
    quarantined = sorted((path.parent / "quarantine").glob("memories-*.jsonl"))
    assert [q.read_bytes() for q in quarantined] == [bad]


def test_doctor_fix_survives_a_non_string_id(project: Engram) -> None:
    lines = seeded(project)
    path = memories_path(project)
    bad = canonical_line(record("placeholder", "numeric id")).replace(b'"placeholder"', b"5")
    path.write_bytes(b"".join([*lines, bad]))
    fixed = run_cli("doctor", "--fix", cwd=project.root)
    assert "Traceback" not in text(fixed.stderr)
    assert fixed.returncode == 0, text(fixed.stdout + fixed.stderr)
    assert not MemoryStore(path.parent).scan().problems


# -- oversized, binary and non-UTF-8 input ------------------------------------------------------


def test_ten_megabytes_on_stdin_is_refused_naming_the_limit(project: Engram) -> None:
    seeded(project)
    path = memories_path(project)
    before = path.read_bytes()
    big = b"0123456789abcdef" * (10 * 1024 * 1024 // 16)
    result = run_cli("remember", "Huge", "-", cwd=project.root, stdin=big)
    assert_error(result, "content", "10,485,760 bytes", "limit is 1,048,576")
    assert path.read_bytes() == before


def test_oversized_content_through_the_service(project: Engram) -> None:
    before = memories_path(project).read_bytes()
    with pytest.raises(InvalidInput, match=r"limit is 1,048,576"):
        project.remember("Huge", "x" * (1_048_576 + 1))
    assert memories_path(project).read_bytes() == before


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"binary\x00payload\x00", "binary"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "UTF-8"),
        (b"caf\xe9 latin-1 text", "not valid UTF-8"),
    ],
)
def test_binary_or_non_utf8_stdin_is_refused(
    project: Engram, payload: bytes, fragment: str
) -> None:
    seeded(project)
    path = memories_path(project)
    before = path.read_bytes()
    result = run_cli("remember", "Binary", "-", cwd=project.root, stdin=payload)
    assert_error(result, fragment)
    assert path.read_bytes() == before


def test_nul_in_title_through_the_service(project: Engram) -> None:
    with pytest.raises(InvalidInput, match="title"):
        project.remember("nul\x00title", "content")
    assert memories_path(project).read_bytes() == b""


# -- any query is valid -------------------------------------------------------------------------

HOSTILE = [
    '"',
    '"unbalanced',
    "(",
    "((a) OR",
    "AND OR NOT",
    "NOT",
    "a:b",
    "title:payment",
    "*",
    "ledger*",
    "\\",
    "\\\\ \\",
    "+-!^~",
    "日本語 ☕ ünïcödé",
    "\u202e\u200b\ufeff",
    "x" * 10_240,
    "word " * 2_000,
    "",
]


@pytest.fixture
def seeded_root(project: Engram) -> Path:
    seeded(project)
    project.recall("warm the index up")
    return project.root


def test_hostile_queries_through_the_cli_exit_zero(seeded_root: Path) -> None:
    # Real processes, several at once (also a small test of concurrent readers).
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda q: run_cli("recall", "--json", "--", q, cwd=seeded_root), HOSTILE)
        )
    for query, result in zip(HOSTILE, results, strict=True):
        assert result.returncode == 0, (query[:40], text(result.stderr))
        assert "Traceback" not in text(result.stderr), query[:40]
        document = json.loads(result.stdout)
        assert document["query"] == query
        assert document["count"] == len(document["hits"])
    by_query = dict(zip(HOSTILE, results, strict=True))
    assert json.loads(by_query[""].stdout)["count"] == 3  # no words: browse everything
    assert json.loads(by_query["title:payment"].stdout)["count"] >= 1


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.text(max_size=200))
def test_no_query_text_raises_through_the_service(project: Engram, query: str) -> None:
    if not project.recall("payment"):
        seeded(project)
    hits = project.recall(query, limit=5)
    assert all(hit.record["title"] for hit in hits)


# -- ids, folders, projects ---------------------------------------------------------------------


def test_get_with_an_unknown_id(project: Engram) -> None:
    seeded(project)
    result = run_cli("get", "zzzzzzzz", cwd=project.root)
    assert_error(result, "no memory", "zzzzzzzz", hint="engram recall")


def test_get_with_an_ambiguous_prefix_lists_the_candidates(project: Engram) -> None:
    first, second = "abcd" + "a" * 22, "abcd" + "b" * 22
    project.project_ws.store.put([record(first, "First"), record(second, "Second")])
    result = run_cli("get", "abcd", cwd=project.root)
    assert_error(result, "abcd", first, second, hint="more characters")
    exact = run_cli("get", "abcda", cwd=project.root)
    assert exact.returncode == 0
    assert "First" in text(exact.stdout)


def test_get_with_a_malformed_id(project: Engram) -> None:
    result = run_cli("get", "../../etc/passwd", cwd=project.root)
    assert_error(result, "not a memory id")


def test_minus_c_to_a_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    result = run_cli("-C", str(missing), "recall", "anything", cwd=tmp_path)
    assert_error(result, str(missing), "no such folder")


OUTSIDE_COMMANDS = [
    ("recall", "anything"),
    ("remember", "A title", "content"),
    ("get", "abcd"),
    ("doctor",),
    ("stats",),
    ("forget", "abcd"),
]


def test_commands_outside_a_project_say_engram_init(tmp_path: Path) -> None:
    outside = tmp_path / "plain-folder"
    outside.mkdir()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda args: run_cli(*args, cwd=outside), OUTSIDE_COMMANDS))
    for args, result in zip(OUTSIDE_COMMANDS, results, strict=True):
        try:
            assert_error(result, "no .engram", hint="engram init")
        except AssertionError as exc:
            raise AssertionError(f"engram {' '.join(args)}: {exc}") from exc
    assert not (outside / ".engram").exists()


def test_minus_c_outside_a_project_says_engram_init(tmp_path: Path) -> None:
    result = run_cli("-C", str(tmp_path), "recall", "x", cwd=Path(os.sep))
    assert_error(result, "no .engram", hint="engram init")


# -- secrets never reach the file ---------------------------------------------------------------

AWS_KEY = "AKIAQYLPMN5HFIQR7XYZ"
AWS_SECRET = "q8Zr3nV1xK9pLm2Tb7Yc4Wd6Hf0Js5Ga1Eu8Io3P"


def test_secrets_are_redacted_before_the_service_writes(project: Engram) -> None:
    result = project.remember(
        f"Deploy with {AWS_KEY}",
        f'aws_secret_access_key = "{AWS_SECRET}"\nthe password is <private>hunter2</private>.',
    )
    assert result.redactions >= 3
    data = memories_path(project).read_bytes()
    for secret in (AWS_KEY, AWS_SECRET, "hunter2", "<private>"):
        assert secret.encode() not in data
    assert b"[REDACTED]" in data
    assert AWS_KEY not in json.dumps(project.get(result.record["id"]))


def test_secrets_are_redacted_before_the_cli_writes(project: Engram) -> None:
    content = f"key {AWS_KEY} and <private>x-secret-x</private> done"
    saved = run_cli("remember", "Credentials", "-", cwd=project.root, stdin=content.encode())
    assert saved.returncode == 0, text(saved.stderr)
    assert "redacted" in text(saved.stderr)
    data = memories_path(project).read_bytes()
    assert AWS_KEY.encode() not in data
    assert b"x-secret-x" not in data
    assert b"key [REDACTED] and [REDACTED] done" in data
    # Nothing else under .engram/ holds it either (the index is derived from the redacted text).
    for file in project.root.joinpath(".engram").rglob("*"):
        if file.is_file():
            assert AWS_KEY.encode() not in file.read_bytes(), file
