"""Hostile lines cost linear time and are one bad line each (issue 28, an attacking review).

A 1 MB line of escaped quotes (``"\\"\\"\\"…[[[``) made the depth scan restart at every quote:
an hour of CPU for every command that read the file. A lone surrogate escape (``\\ud800``) or
bytes that are not UTF-8 in one line made every command crash with a traceback. Each is now a
bad line named by file and line: reads skip it, writes refuse to touch the file, imports and
sync skip that record and apply the rest, and ``engram doctor --fix`` repairs the line in place.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.model import MAX_JSON_DEPTH, canonical_line, json_depth_exceeded
from engram.service import Engram
from engram.sync.chunks import chunk_id
from tests.conftest import run_cli
from tests.helpers.places import FIXTURES, ROOT
from tests.helpers.records import record

# 1 MB of escaped quotes after an opening quote, then more brackets than the depth limit: the
# shape that made the old scan quadratic (about an hour per read at this size).
HOSTILE = b'"' + b'\\"' * (512 * 1024) + b"[" * 70
# Linear work on this line takes well under a second; the quadratic scan took an hour. The
# margin covers a loaded machine, never the old behaviour.
LINEAR = 90


def _reference_depth(text: bytes, limit: int) -> int | None:
    """The depth scan written the obvious way, byte by byte: the offset past ``limit``."""
    depth = 0
    inside = escaped = False
    for offset, byte in enumerate(text):
        char = bytes([byte])
        if inside:
            if escaped:
                escaped = False
            elif char == b"\\":
                escaped = True
            elif char == b'"':
                inside = False
        elif char == b'"':
            inside = True
        elif char in b"[{":
            depth += 1
            if depth > limit:
                return offset
        elif char in b"]}" and depth:
            depth -= 1
    return None


_PIECES = st.one_of(
    st.sampled_from(["[", "]", "{", "}", ",", ":", "1", " "]),
    st.text(alphabet='ab[]{}"\\', max_size=6).map(json.dumps),  # a closed JSON string
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_PIECES, max_size=40),
    st.sampled_from(["", '"', '"ab\\', '"[[\\"[[']),  # a string left open at the end
    st.integers(min_value=0, max_value=6),
)
def test_the_depth_scan_agrees_with_a_byte_by_byte_scan(
    pieces: list[str], tail: str, limit: int
) -> None:
    text = ("".join(pieces) + tail).encode()
    assert json_depth_exceeded(text, limit) == _reference_depth(text, limit)


def test_escaped_quotes_never_restart_the_scan(tmp_path: Path) -> None:
    """The scan reads each byte a bounded number of times: the hostile line in a subprocess."""
    (tmp_path / "line").write_bytes(HOSTILE)
    probe = (
        "import sys\n"
        "from engram.model import json_depth_exceeded\n"
        "from engram.daemon.protocol import decode_request\n"
        "line = open(sys.argv[1], 'rb').read()\n"
        "deep = line[:-70] + b'\"' + line[-70:]\n"  # the string closed: now too deep
        "print(json_depth_exceeded(line), json_depth_exceeded(deep))\n"
        "print(decode_request(line).message)\n"
        "print(decode_request(deep).message)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "line")],
        capture_output=True,
        text=True,
        timeout=LINEAR,
        check=True,
    )
    first, malformed, deep = done.stdout.splitlines()
    assert first == f"None {len(HOSTILE) - 70 + 1 + MAX_JSON_DEPTH}"
    assert malformed.startswith("request is not valid JSON: Unterminated string")
    assert deep == (
        f"request is nested deeper than {MAX_JSON_DEPTH} levels "
        f"(at byte {len(HOSTILE) - 70 + 1 + MAX_JSON_DEPTH})"
    )


def _store(tmp_path: Path) -> tuple[Path, Path, list[bytes]]:
    """A project whose memories.jsonl holds two good memories; return root, file, lines."""
    root = tmp_path / "p"
    engram, _ = Engram.init(root, "ledger")
    with engram:
        engram.project_ws.store.put(
            [record("aaaaaaaa", "first hello"), record("cccccccc", "third hello")]
        )
    path = root / ".engram" / "memories.jsonl"
    return root, path, path.read_bytes().splitlines(keepends=True)


def test_a_hostile_megabyte_line_is_one_bad_line_for_recall_and_doctor(tmp_path: Path) -> None:
    root, path, lines = _store(tmp_path)
    path.write_bytes(lines[0] + HOSTILE + b"\n" + lines[1])
    for command in (["recall", "hello"], ["doctor"]):
        done = subprocess.run(
            [sys.executable, "-m", "engram", "-C", str(root), *command],
            capture_output=True,
            text=True,
            timeout=LINEAR,
        )
        said = done.stdout + done.stderr
        assert "memories.jsonl:2: not JSON: Unterminated string" in said, command
        assert "Traceback" not in said
        if command[0] == "recall":  # the other lines are served
            assert "first hello" in said and "third hello" in said


# A lone surrogate escape in a memory's text; bytes that are not UTF-8 in an id.
SURROGATE = ("surrogate", b'"text of first hello"', b'"text \\ud800 of first hello"')
BAD_BYTES = ("bytes", b'"id":"aaaaaaaa"', b'"id":"\xff\xfeaaaaaa"')


@pytest.mark.parametrize("case", [SURROGATE, BAD_BYTES], ids=lambda case: case[0])
def test_a_line_that_is_not_unicode_is_one_bad_line_for_every_command(
    tmp_path: Path, case: tuple[str, bytes, bytes]
) -> None:
    _name, good, bad = case
    root, path, lines = _store(tmp_path)
    assert good in lines[0]
    hostile = lines[0].replace(good, bad) + lines[1]
    path.write_bytes(hostile)
    why = "not valid Unicode" if case is SURROGATE else "invalid UTF-8 at byte"

    def engram(*args: str) -> tuple[int, str]:
        done = run_cli("-C", str(root), *args)
        said = (done.stdout + done.stderr).decode("utf-8", "replace")
        assert "Traceback" not in said, args
        return done.returncode, said

    # Reads skip the line, name it, and say what to run; the rest is served. Each one as the
    # first command after the line arrived (a fresh clone: no index yet), which meets it.
    for args in (["recall", "hello"], ["stats"], ["context"], ["get", "cccccccc"]):
        shutil.rmtree(root / ".engram" / "index", ignore_errors=True)
        code, said = engram(*args)
        assert code == 0, (args, said)
        assert "memories.jsonl:1: " in said and why in said, args
        assert "engram doctor --fix" in said, args
    assert "third hello" in engram("recall", "hello")[1]
    assert engram("get", "aaaaaaaa")[0] != 0  # not readable: not served as a memory
    # Writes (and an export, which would lose the line) refuse, naming it; nothing is lost.
    for args in (["remember", "fourth", "more text"], ["export"]):
        code, said = engram(*args)
        assert code != 0 and "memories.jsonl:1: " in said and why in said, args
        assert "engram doctor --fix" in said, args
    code, said = engram("doctor")
    assert code != 0 and "memories.jsonl:1: " in said and why in said
    assert path.read_bytes() == hostile
    # doctor --fix repairs just that line and says what it did; the other stays byte for byte.
    code, said = engram("doctor", "--fix")
    assert code == 0, said
    fixed = path.read_bytes().splitlines(keepends=True)
    assert lines[1] in fixed
    if case is SURROGATE:
        assert "replaced 1 lone surrogate escape(s) with U+FFFD" in said
        assert fixed == [lines[0].replace(good, '"text \ufffd of first hello"'.encode()), lines[1]]
    else:  # the id is gone: the line is set aside in quarantine/, not guessed
        assert "moved 1 unreadable line(s)" in said
        assert fixed == [lines[1]]
        quarantined = list((root / ".engram" / "quarantine").glob("*.jsonl"))
        assert [q.read_bytes() for q in quarantined] == [lines[0].replace(good, bad)]
    code, said = engram("doctor")
    assert code == 0 and "memories.jsonl:1" not in said, said
    assert engram("remember", "fourth", "more text")[0] == 0


def _teammate_chunk(tmp_path: Path, form: str = "object") -> tuple[str, bytes]:
    """A teammate's real chunk, one of whose two records then gets a lone surrogate escape.

    ``form``: ``object`` as engram writes chunks now, ``lines`` as older engram wrote them
    (JSON Lines of records, still read).
    """
    mate, _ = Engram.init(tmp_path / "mate", "ledger")
    with mate:
        mate.remember("Teammate good note", "applies")
        mate.remember("Teammate bad note", "poisoned text")
        mate.sync()
    (made,) = (mate.root / ".engram" / "chunks").glob("*.jsonl.gz")
    data = gzip.decompress(made.read_bytes())
    if form == "lines":
        records = json.loads(data)["engram"]["records"]
        data = b"".join(canonical_line(item) for item in records)
    assert data.count(b"poisoned text") >= 1
    data = data.replace(b"poisoned text", b"poisoned \\ud800 text")
    return chunk_id(data), gzip.compress(data)


@pytest.mark.parametrize("form", ["object", "lines"])
def test_a_surrogate_in_a_teammates_chunk_skips_that_record_and_sync_goes_on(
    tmp_path: Path, form: str
) -> None:
    chunk, raw = _teammate_chunk(tmp_path, form)
    root = tmp_path / "me"
    mine, _ = Engram.init(root, "ledger")
    mine.close()
    assert run_cli("-C", str(root), "remember", "My own note", "local").returncode == 0
    (root / ".engram" / "chunks").mkdir(exist_ok=True)
    (root / ".engram" / "chunks" / f"{chunk}.jsonl.gz").write_bytes(raw)
    for _ in range(2):  # and every later sync as well
        done = run_cli("-C", str(root), "sync")
        said = (done.stdout + done.stderr).decode()
        assert done.returncode == 0, said
        assert "Traceback" not in said
    with Engram.open(root) as engram:
        titles = {r["title"] for r in engram.project_ws.store.read_all()}
    assert titles == {"My own note", "Teammate good note"}
    # Local changes were exported: a chunk of this clone's holds "My own note".
    assert [
        path
        for path in (root / ".engram" / "chunks").glob("*.jsonl.gz")
        if b"My own note" in gzip.decompress(path.read_bytes())
    ]


def test_a_surrogate_in_the_first_sync_names_the_chunk_and_record(tmp_path: Path) -> None:
    chunk, raw = _teammate_chunk(tmp_path)
    root = tmp_path / "me"
    Engram.init(root, "ledger")[0].close()
    (root / ".engram" / "chunks").mkdir(exist_ok=True)
    (root / ".engram" / "chunks" / f"{chunk}.jsonl.gz").write_bytes(raw)
    done = run_cli("-C", str(root), "sync")
    said = (done.stdout + done.stderr).decode()
    assert done.returncode == 0, said
    assert f"chunks/{chunk}.jsonl.gz:" in said
    assert "\\ud800, a lone surrogate escape, which is not valid Unicode; record skipped" in said


def test_imports_skip_and_name_a_row_holding_a_surrogate(tmp_path: Path) -> None:
    root = tmp_path / "p"
    Engram.init(root, "ledger")[0].close()
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"title":"plain good row","content":"fine"}\n'
        '{"title":"plain bad row","content":"x \\ud800 y"}\n'
    )
    go = json.loads((FIXTURES / "imports" / "go-export.json").read_text())
    go["observations"][0]["content"] = "bad \ud800 text"
    bad_title = go["observations"][0]["title"]
    good_title = go["observations"][1]["title"]
    export = tmp_path / "go-export.json"
    export.write_text(json.dumps(go))  # json escapes the surrogate: \ud800 in the file
    assert b"\\ud800" in export.read_bytes()
    mine = json.loads(canonical_line(record("dddddddd", "engram good row")))
    theirs = json.loads(canonical_line(record("eeeeeeee", "engram bad row")))
    theirs["content"] = "\udc00"
    dump = tmp_path / "engram-export.json"
    dump.write_text(json.dumps({"format": "engram", "version": 1, "memories": [mine, theirs]}))
    for source, skipped in (
        (rows, f"{rows}:2: text holds \\ud800"),
        (export, "observations[0]: text holds \\ud800"),
        (dump, f"{dump}: memories[1]: text holds \\udc00"),
    ):
        done = run_cli("-C", str(root), "import", str(source))
        said = (done.stdout + done.stderr).decode()
        assert done.returncode == 0, said
        assert "Traceback" not in said
        assert skipped in said and "which is not valid Unicode" in said, said
    with Engram.open(root) as engram:
        titles = {r["title"] for r in engram.project_ws.store.read_all()}
    assert {"plain good row", good_title, "engram good row"} <= titles
    assert not {"plain bad row", bad_title, "engram bad row"} & titles


def test_the_bench_runs(tmp_path: Path) -> None:
    """benchmarks/bench_input.py prints its figures (small size: it must run, not time)."""
    bench = ROOT / "benchmarks" / "bench_input.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--kib", "64"],
        capture_output=True,
        text=True,
        timeout=LINEAR,
        check=True,
    )
    assert "escaped quotes, string left open" in done.stdout
    assert "x plain parse" in done.stdout
