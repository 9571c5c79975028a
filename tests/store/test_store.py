"""MemoryStore: spliced atomic writes keep memories.jsonl sorted and canonical (README)."""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.errors import CorruptStore, InvalidInput, LockTimeout, StoreChanged
from engram.model import canonical_line, new_id, parse_line
from engram.store import MemoryStore
from engram.store.atomic import current_umask

STAMP = "2024-05-01T12:00:00.000Z"


def record(rid: str, title: str = "a memory", **extra: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "kind": "note",
        "title": title,
        "content": f"content of {title}",
        "created_at": STAMP,
        "updated_at": STAMP,
        "rev": 1,
        **extra,
    }


def expected_bytes(model: dict[str, dict[str, Any]]) -> bytes:
    return b"".join(canonical_line(model[rid]) for rid in sorted(model))


def store_in(folder: Path) -> MemoryStore:
    return MemoryStore(folder / ".engram")


def raw_lines(store: MemoryStore) -> list[bytes]:
    return store.path.read_bytes().splitlines(keepends=True)


# -- splicing against a dict model --------------------------------------------------------------

titles = st.text(max_size=30)
batch = st.lists(
    st.tuples(st.integers(min_value=0, max_value=10**9), titles, st.booleans()),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=8))
def test_random_puts_match_a_dict_model(batches: list[list[tuple[int, str, bool]]]) -> None:
    """Every write leaves exactly the bytes of the model: sorted, canonical, nothing lost."""
    with tempfile.TemporaryDirectory() as tmp:
        store = store_in(Path(tmp))
        model: dict[str, dict[str, Any]] = {}
        for number, items in enumerate(batches):
            writes: dict[str, dict[str, Any]] = {}
            for pick, title, replace in items:
                known = sorted(model)
                if replace and known:
                    rid = known[pick % len(known)]
                    new = {**model[rid], "title": title, "rev": model[rid]["rev"] + 1}
                else:
                    rid = f"{pick:09d}{number}"  # spread over the key space, not appended
                    new = record(rid, title, batch=number)
                writes[rid] = new
            store.put(list(writes.values()))
            model.update(writes)
            data = store.path.read_bytes()
            assert data == expected_bytes(model)
            scan = store.scan()
            assert scan.canonical
            assert not scan.problems


def test_seeded_random_inserts_and_replacements() -> None:
    rng = random.Random(20240501)
    with tempfile.TemporaryDirectory() as tmp:
        store = store_in(Path(tmp))
        model: dict[str, dict[str, Any]] = {}
        for step in range(300):
            if model and rng.random() < 0.4:
                rid = rng.choice(sorted(model))
                new = {**model[rid], "title": f"edited at {step}", "rev": model[rid]["rev"] + 1}
            else:
                rid = new_id()
                new = record(rid, f"new at {step} ünïcødé")
            store.put([new])
            model[rid] = new
        assert store.path.read_bytes() == expected_bytes(model)
        assert store.read_all() == [model[rid] for rid in sorted(model)]


def test_batch_put_writes_once_and_keeps_order(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    first = [record(new_id(), f"first {i}") for i in range(20)]
    store.put(first)
    signature = store.signature()
    second = [record(new_id(), f"second {i}") for i in range(20)]
    changed = {**first[3], "title": "changed", "rev": 2}
    before = store.signature()
    store.put([*second, changed])
    assert store.signature() != before
    model = {r["id"]: r for r in [*first, *second]}
    model[changed["id"]] = changed
    assert store.path.read_bytes() == expected_bytes(model)
    assert signature == before


def test_put_of_the_same_id_twice_in_one_batch_keeps_the_last(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    rid = new_id()
    store.put([record(rid, "one"), record(rid, "two")])
    assert [r["title"] for r in store.read_all()] == ["two"]


def test_replacing_a_record_changes_exactly_one_line(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    records = [record(new_id(), f"memory {i}") for i in range(50)]
    store.put(records)
    old = raw_lines(store)
    target = records[17]
    store.put([{**target, "title": "rewritten", "rev": 2}])
    new = raw_lines(store)
    assert len(new) == len(old)
    changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    assert len(changed) == 1
    (index,) = changed
    assert parse_line(new[index], path="m", lineno=index + 1)["id"] == target["id"]
    assert b"rewritten" in new[index]


def test_writing_the_same_state_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    records = [record(new_id(), f"memory {i}") for i in range(10)]
    store.put(records)
    first = store.path.read_bytes()
    store.put(records[3:6])
    assert store.path.read_bytes() == first
    store.rewrite(list(reversed(records)))
    assert store.path.read_bytes() == first


def test_tombstones_stay_in_the_file(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    live = record(new_id(), "to be forgotten")
    other = record(new_id(), "stays")
    store.put([live, other])
    tombstone = {"id": live["id"], "rev": 2, "updated_at": STAMP, "deleted_at": STAMP}
    store.put([tombstone])
    lines = raw_lines(store)
    assert len(lines) == 2
    assert canonical_line(tombstone) in lines
    assert tombstone in store.read_all()
    # A later write elsewhere keeps the tombstone line as it is.
    store.put([record(new_id(), "later")])
    assert canonical_line(tombstone) in raw_lines(store)


def test_put_refuses_records_missing_required_fields(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id())])
    before = store.path.read_bytes()
    with pytest.raises(InvalidInput, match="kind"):
        store.put([{"id": new_id(), "title": "t", "created_at": STAMP, "updated_at": STAMP}])
    with pytest.raises(InvalidInput, match="rev"):
        store.put([{"id": new_id(), "updated_at": STAMP, "deleted_at": STAMP}])
    assert store.path.read_bytes() == before


def test_unknown_fields_survive_put_and_read(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    extra = {
        "x-tool": {"nested": [1, 2.5, None, True, {"deep": "ü"}], "id": "not-the-id"},
        "zzz": [],
        "a_first": "sorted before everything",
    }
    original = record(new_id(), "with extras", **extra)
    store.put([original])
    store.put([record(new_id(), "neighbour")])
    (found,) = [r for r in store.read_all() if r["id"] == original["id"]]
    assert found == original
    # A nested "id" must not confuse the binary search on the next write.
    store.put([{**original, "rev": 2}])
    assert [r["rev"] for r in store.read_all() if r["id"] == original["id"]] == [2]
    assert store.scan().canonical


# -- files changed behind the store's back ------------------------------------------------------


def test_hand_edited_unsorted_file_is_rewritten_canonically(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.dir.mkdir(parents=True)
    records = [record(new_id(), f"hand {i} — ü") for i in range(6)]
    messy = [
        json.dumps(r, indent=None, ensure_ascii=True)  # spaces, \u escapes, unsorted keys
        for r in reversed(sorted(records, key=lambda r: r["id"]))
    ]
    store.path.write_text("\n".join(messy) + "\n\n", encoding="utf-8")
    scan = store.scan()
    assert not scan.problems
    assert not scan.canonical
    added = record(new_id(), "added after the hand edit")
    store.put([added])
    model = {r["id"]: r for r in [*records, added]}
    assert store.path.read_bytes() == expected_bytes(model)
    assert store.scan().canonical


def test_file_without_final_newline_is_repaired_on_write(tmp_path: Path) -> None:
    """A hand edit that drops the final newline must not glue the next record onto it."""
    store = store_in(tmp_path)
    first = record("m" + new_id()[1:], "first")
    store.dir.mkdir(parents=True)
    store.path.write_bytes(canonical_line(first)[:-1])
    second = record("z" + new_id()[1:], "second")  # sorts after: spliced in after the last line
    store.put([second])
    scan = store.scan()
    assert not scan.problems, scan.problems[0].message
    assert store.path.read_bytes() == expected_bytes({r["id"]: r for r in (first, second)})


def test_missing_final_newline_is_not_canonical(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.dir.mkdir(parents=True)
    store.path.write_bytes(canonical_line(record(new_id()))[:-1])
    assert not store.scan().canonical


def test_crlf_file_is_rewritten_with_lf_on_write(tmp_path: Path) -> None:
    """A checkout with core.autocrlf turns every newline into CRLF; a write must undo it."""
    store = store_in(tmp_path)
    records = [record(new_id(), f"crlf {i}") for i in range(5)]
    store.dir.mkdir(parents=True)
    store.path.write_bytes(expected_bytes({r["id"]: r for r in records}).replace(b"\n", b"\r\n"))
    added = record(new_id(), "added")
    store.put([added])
    assert store.path.read_bytes() == expected_bytes({r["id"]: r for r in [*records, added]})


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (b"this is not json\n", "not JSON"),
        (b'{"id": "broken", "title": "\xff\xfe"}\n', "invalid UTF-8"),
        (b"<<<<<<< HEAD\n", "conflict marker"),
        (b'{"id": "half-written", "kind": "no\n', "not JSON"),
    ],
)
def test_put_on_a_bad_line_raises_and_changes_nothing(
    tmp_path: Path, bad: bytes, fragment: str
) -> None:
    store = store_in(tmp_path)
    records = sorted((record(new_id(), f"m{i}") for i in range(4)), key=lambda r: r["id"])
    store.put(records)
    lines = raw_lines(store)
    data = b"".join([*lines[:2], bad, *lines[2:]])
    store.path.write_bytes(data)
    with pytest.raises(CorruptStore) as info:
        store.put([record(new_id(), "must not be written")])
    message = info.value.message
    assert f"{store.path}:3:" in message
    assert fragment in message
    assert info.value.line == 3
    assert info.value.hint
    assert store.path.read_bytes() == data
    # Still refused on a second try: the bad file is never trusted.
    with pytest.raises(CorruptStore):
        store.put([record(new_id(), "nor this")])
    assert store.path.read_bytes() == data


def test_put_on_a_duplicate_id_raises_and_changes_nothing(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    rid = new_id()
    data = canonical_line(record(rid, "one")) + canonical_line(record(rid, "two", rev=2))
    store.dir.mkdir(parents=True)
    store.path.write_bytes(data)
    with pytest.raises(CorruptStore, match=rf"memories.jsonl:2: duplicate id {rid}"):
        store.put([record(new_id())])
    assert store.path.read_bytes() == data


def test_scan_reports_every_problem_with_its_line(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    ids = sorted(new_id() for _ in range(4))
    good = [canonical_line(record(rid)) for rid in ids]
    data = b"".join(
        [
            good[0],  # 1
            b"{not json}\n",  # 2
            good[1],  # 3
            b'{"id":"x","title":"\xc3\x28"}\n',  # 4 invalid UTF-8
            b"<<<<<<< ours\n",  # 5
            good[2],  # 6
            b"=======\n",  # 7
            canonical_line(record(ids[2], "their side", rev=2)),  # 8 duplicate of line 6
            b">>>>>>> theirs\n",  # 9
            b"[1, 2, 3]\n",  # 10
            b'{"id":"only-an-id"}\n',  # 11
            good[3],  # 12
        ]
    )
    store.dir.mkdir(parents=True)
    store.path.write_bytes(data)
    scan = store.scan()
    assert [p.line for p in scan.problems] == [2, 4, 5, 7, 8, 9, 10, 11]
    for problem in scan.problems:
        assert problem.message.startswith(f"{store.path}:{problem.line}: ")
        assert problem.raw == data.splitlines(keepends=True)[problem.line - 1]
    assert "duplicate id" in scan.problems[4].message
    assert "first on line 6" in scan.problems[4].message
    assert [r["id"] for r in scan.records] == ids
    assert not scan.canonical
    with pytest.raises(CorruptStore, match=r"\(and 7 more\)"):
        store.read_all()


# -- atomicity and bookkeeping ------------------------------------------------------------------


def test_stale_temp_file_is_removed_on_the_next_locked_write(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id(), "first")])
    stale = store.dir / ".memories.k2j4h5.tmp"
    stale.write_bytes(b'{"id":"half-a-li')
    unrelated = store.dir / "notes.tmp"
    unrelated.write_bytes(b"not ours")
    store.put([record(new_id(), "second")])
    assert not stale.exists()
    assert unrelated.exists()
    assert len(store.read_all()) == 2
    assert not list(store.dir.glob(".memories.*.tmp"))


def test_signature_changes_on_every_write(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    assert store.signature() == "missing"
    seen = [store.signature()]
    same = record(new_id(), "same every time")
    for step in range(20):
        # Half the writes leave identical bytes: the signature must change all the same.
        returned = store.put([same if step % 2 else record(new_id(), f"step {step}")])
        assert returned == store.signature()
        seen.append(returned)
    assert len(set(seen)) == len(seen)


def test_write_keeps_the_file_mode(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id())])
    assert store.path.stat().st_mode & 0o777 == 0o666 & ~current_umask()
    os.chmod(store.path, 0o664)
    store.put([record(new_id())])
    assert store.path.stat().st_mode & 0o777 == 0o664


def test_rewrite_refuses_the_same_id_twice(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    rid = new_id()
    with pytest.raises(InvalidInput):
        store.rewrite([record(rid), record(rid, "again")])
    assert not store.exists()


@pytest.mark.parametrize("umask", [0o077, 0o002])
def test_new_files_honour_the_umask_and_existing_files_keep_their_mode(
    tmp_path: Path, umask: int
) -> None:
    """Real processes under a umask: new files get 0o666 & ~umask, old ones keep their mode."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)

    def engram(*args: str) -> None:
        command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "engram", *args))
        done = subprocess.run(
            ["sh", "-c", f"umask {umask:03o} && {command}"],
            cwd=root,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()

    engram("init")
    folder = root / ".engram"
    (folder / "memories.jsonl").unlink()  # the store's own writer makes it anew
    engram("remember", "umask probe", "a memory written under a umask")
    engram("sync")
    new_files = [folder / "memories.jsonl", folder / "manifest.json", folder / "state/sync.json"]
    new_files += list((folder / "chunks").glob("*.jsonl.gz"))
    assert len(new_files) == 4
    for path in new_files:
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    for path in (folder / "memories.jsonl", folder / "manifest.json"):
        os.chmod(path, 0o640)
    engram("remember", "second probe", "another memory, replacing the files")
    engram("sync")
    assert len(list((folder / "chunks").glob("*.jsonl.gz"))) == 2
    for path in (folder / "memories.jsonl", folder / "manifest.json"):
        assert path.stat().st_mode & 0o777 == 0o640, path


def test_current_umask_reads_without_changing_it(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by the read
    finally:
        os.umask(old)


def test_rewrite_built_from_an_older_file_raises_store_changed(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id(), "first")])
    _, seen = store.read_bytes()
    store.put([record(new_id(), "pulled meanwhile")])  # e.g. git replaced the file
    before = store.path.read_bytes()
    with pytest.raises(StoreChanged):
        store.rewrite([record(new_id(), "built from the first read")], expect=seen)
    assert store.path.read_bytes() == before
    _, current = store.read_bytes()
    store.rewrite([record(new_id(), "built from a fresh read")], expect=current)
    assert len(store.read_all()) == 1


def test_a_file_changed_after_this_process_wrote_it_is_checked_again(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id(), "first")])
    with store.path.open("ab") as handle:
        handle.write(b"not json\n")  # a hand edit behind the store's back
    with pytest.raises(CorruptStore):
        store.put([record(new_id(), "second")])
    assert store.path.read_bytes().endswith(b"not json\n")


def test_store_sig_holds_exactly_the_last_signature(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id(), "first")])
    sig = store.state_dir / "store.sig"
    sig.write_text("9" * 80, encoding="ascii")  # longer than any signature: cut to length
    other = store_in(tmp_path)  # another process: it knows only what store.sig says
    other.put([record(new_id(), "second")])
    assert sig.read_text(encoding="ascii") == other.signature()
    store.put([record(new_id(), "third")])
    assert sig.read_text(encoding="ascii") == store.signature()
    assert len(store.read_all()) == 3


HOLD_THE_LOCK = """
import sys
from pathlib import Path
from engram.store import MemoryStore
with MemoryStore(Path(sys.argv[1])).lock():
    print("held", flush=True)
    sys.stdin.read()
"""


def test_the_lock_keeps_out_another_process_until_it_lets_go(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.put([record(new_id(), "first")])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(store.dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        waiting = MemoryStore(store.dir, lock_timeout=0.2)
        with pytest.raises(LockTimeout, match=r"within 0\.2s") as caught:
            waiting.put([record(new_id(), "refused")])
        assert str(store.path) in caught.value.message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    waiting.put([record(new_id(), "after the other let go")])
    assert len(store.read_all()) == 2


def test_the_lock_keeps_out_other_threads_and_nests_in_one(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / ".engram", lock_timeout=0.2)
    held, done = threading.Event(), threading.Event()
    outcome: list[str] = []

    def first() -> None:
        with store.lock(), store.lock():  # nested holds in one thread are free
            held.set()
            done.wait(30)

    def second() -> None:
        try:
            with MemoryStore(store.dir, lock_timeout=0.2).lock():
                outcome.append("locked")
        except LockTimeout:
            outcome.append("timed out")
        try:
            with store.lock():  # the same lock object, from another thread
                outcome.append("locked")
        except LockTimeout:
            outcome.append("timed out")

    holder = threading.Thread(target=first)
    holder.start()
    assert held.wait(30)
    other = threading.Thread(target=second)
    other.start()
    other.join(30)
    done.set()
    holder.join(30)
    assert outcome == ["timed out", "timed out"]
    with store.lock():
        store.put([record(new_id(), "once both let go")])
    assert len(store.read_all()) == 1


def test_a_put_waits_for_a_file_being_written_in_place(tmp_path: Path) -> None:
    """git checkout writes memories.jsonl in place: truncated first, then its new bytes.

    A put that reads the file in between sees an empty file, which parses. It must not write
    its one record onto that: another process (a real one, as git is) truncates the file,
    holds it open a moment, then writes the new content; the put starts while it is empty.
    """
    store = store_in(tmp_path)
    ids = sorted(new_id() for _ in range(30))
    store.put([record(rid, f"memory {n}") for n, rid in enumerate(ids)])
    content = store.path.read_bytes()
    truncated = tmp_path / "truncated"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, pathlib\n"
            "path, flag = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
            "data = sys.stdin.buffer.read()\n"
            "with path.open('r+b') as handle:\n"
            "    handle.truncate(0); handle.flush()\n"
            "    flag.touch()\n"
            "    time.sleep(0.01)\n"
            "    handle.write(data)\n",
            str(store.path),
            str(truncated),
        ],
        stdin=subprocess.PIPE,
    )
    assert writer.stdin is not None
    writer.stdin.write(content)
    writer.stdin.close()
    while not truncated.exists():
        time.sleep(0.0005)
    added = new_id()
    store.put([record(added, "saved during the checkout")])
    assert writer.wait(timeout=30) == 0
    kept = {json.loads(line)["id"] for line in store.path.read_bytes().splitlines()}
    assert set(ids) <= kept, f"{len(set(ids) - kept)} memories lost"
    assert added in kept
