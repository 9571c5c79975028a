"""The trainer: its JSON Lines protocol, the real trainer over a real store, and fake trainers
that crash, print garbage or hang, run as real subprocesses."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from engram.model import canonical_line
from engram.trainer import (
    Artifact,
    Complete,
    Event,
    Insight,
    Metric,
    Progress,
    ProtocolError,
    Recommendation,
    default_command,
    encode_event,
    parse_event,
    run_trainer,
)
from engram.trainer.insights import insight_id, train

# -- protocol ----------------------------------------------------------------------------------

EVENTS: list[Event] = [
    Progress("cluster", 42.5),
    Progress("load", 0),
    Insight(
        id="0123456789abcdef",
        context="3 memories about sqlite",
        action="Treat sqlite as one theme — «ünïcode» too",
        result="Titles: a; b; c",
        insight_type="cluster",
        tags=["db", "sqlite"],
        source_ids=["a1", "b2", "c3"],
    ),
    Insight("x", "c", "a", "r", "lineage", [], ["only"]),
    Recommendation("a1", "merge", "near-identical"),
    Recommendation("b2", "archive", "superseded by c3"),
    Metric("memories_read", 10),
    Metric("seconds_load", 0.125),
    Artifact("index/trainer.bin", 0),
    Complete(3, 1.5),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_round_trip(event: Event) -> None:
    line = encode_event(event)
    assert "\n" not in line
    obj = json.loads(line)
    assert list(obj) == sorted(obj)  # keys sorted
    assert obj["type"] == type(event).__name__.lower()
    assert parse_event(line, 1) == event
    assert encode_event(parse_event(line, 1)) == line


BAD: list[tuple[str, str]] = [
    ("not json {", "not JSON"),
    ('["progress"]', "JSON object"),
    ('{"stage":"x","percent":1}', "'type'"),
    ('{"type":"telemetry","x":1}', "'type'"),
    ('{"type":"progress","stage":"x"}', "'percent'"),
    ('{"type":"progress","stage":"x","percent":"50"}', "'percent'"),
    ('{"type":"progress","stage":"x","percent":150}', "'percent'"),
    ('{"type":"progress","stage":"x","percent":NaN}', "not JSON"),
    ('{"type":"progress","stage":"x","percent":5,"eta":3}', "'eta'"),
    ('{"type":"progress","stage":7,"percent":5}', "'stage'"),
    ('{"type":"metric","name":"n","value":true}', "'value'"),
    ('{"type":"artifact","path":"p","size_bytes":-1}', "'size_bytes'"),
    ('{"type":"artifact","path":"p","size_bytes":1.5}', "'size_bytes'"),
    ('{"type":"complete","insights_generated":1}', "'duration_secs'"),
    ('{"type":"recommendation","target_id":"a","action":"burn","reasoning":"r"}', "'action'"),
    (
        '{"type":"insight","id":"i","context":"c","action":"a","result":"r",'
        '"insight_type":"cluster","tags":[],"source_ids":[]}',
        "'source_ids'",
    ),
    (
        '{"type":"insight","id":"i","context":"c","action":"a","result":"r",'
        '"insight_type":"vibes","tags":[],"source_ids":["s"]}',
        "'insight_type'",
    ),
    (
        '{"type":"insight","id":"i","context":"c","action":"a","result":"r",'
        '"insight_type":"cluster","tags":[1],"source_ids":["s"]}',
        "'tags'",
    ),
    ('{"type":"complete","insights_generated":1,"duration_secs":1} trailing', "not JSON"),
]


@pytest.mark.parametrize(("line", "named"), BAD)
def test_parse_errors_name_line_field_and_text(line: str, named: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_event(line, 7)
    error = caught.value
    assert error.line == 7
    assert error.text == line[:200]
    assert "line 7" in error.message
    assert named in error.message
    assert line[:30] in error.message


def test_parse_error_clips_long_text() -> None:
    line = "x" * 5000
    with pytest.raises(ProtocolError) as caught:
        parse_event(line, 1)
    assert len(caught.value.text) == 200
    assert len(caught.value.message) < 400


# -- a realistic store -------------------------------------------------------------------------


def rec(
    rid: str, kind: str, title: str, content: str, created: str, **extra: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": rid,
        "kind": kind,
        "title": title,
        "content": content,
        "created_at": f"{created}T10:00:00.000Z",
        "updated_at": f"{created}T10:00:00.000Z",
        "rev": 1,
        "status": "active",
    }
    record.update(extra)
    return record


def realistic_records() -> list[dict[str, Any]]:
    sqlite = (
        "Set PRAGMA journal_mode=WAL and busy_timeout on every sqlite connection, or "
        "concurrent writers fail with database is locked"
    )
    records = [
        # Cluster by text: four memories about sqlite WAL locking, two of them near-identical.
        rec("sq01", "pitfall", "sqlite database is locked", sqlite, "2026-01-05"),
        rec("sq02", "pitfall", "sqlite database is locked", sqlite + ".", "2026-02-01"),
        rec(
            "sq03",
            "discovery",
            "WAL journal_mode fixes sqlite locked errors",
            "Concurrent writers fail with database is locked unless sqlite uses WAL "
            "journal_mode and a busy_timeout",
            "2026-01-20",
        ),
        rec(
            "sq04",
            "pattern",
            "Open sqlite connections with WAL and busy_timeout",
            "Every sqlite connection sets journal_mode WAL and busy_timeout so concurrent "
            "writers wait instead of failing with database is locked",
            "2026-01-22",
        ),
        # The same text, but kinds that are never clustered, and a deleted copy.
        rec("ss01", "session", "sqlite database is locked", sqlite, "2026-01-06"),
        rec("in01", "insight", "sqlite database is locked", sqlite, "2026-01-06"),
        {
            "id": "zz99",
            "rev": 2,
            "updated_at": "2026-01-07T00:00:00.000Z",
            "deleted_at": "2026-01-07T00:00:00.000Z",
        },
        # Cluster by shared files (two of them), texts unrelated.
        rec(
            "ix01",
            "decision",
            "Ranking weights live in one table",
            "Keep kind weights together so tuning touches one place",
            "2026-01-10",
            files=["engram/index/db.py", "engram/index/ranking.py"],
        ),
        rec(
            "ix02",
            "fact",
            "Tantivy tokenizer splits on punctuation",
            "Hyphenated identifiers become two terms",
            "2026-01-11",
            files=["engram/index/db.py", "engram/index/ranking.py", "engram/index/tantivy.py"],
        ),
        rec(
            "ix03",
            "architecture",
            "Index rebuild is incremental",
            "Rows are keyed by id and content hash; unchanged memories are skipped",
            "2026-01-12",
            files=["engram/index/ranking.py", "engram/index/db.py"],
        ),
        # Cluster by shared tags (two of them), texts unrelated.
        rec(
            "au01",
            "decision",
            "Tokens expire after an hour",
            "Refresh quietly in the background",
            "2026-01-13",
            tags=["auth", "oauth"],
        ),
        rec(
            "au02",
            "principle",
            "Never log bearer headers",
            "Redact them at the client boundary",
            "2026-01-14",
            tags=["auth", "logging", "oauth"],
        ),
        rec(
            "au03",
            "config",
            "Callback port is 8765",
            "Registered with the provider console",
            "2026-01-15",
            tags=["oauth", "auth"],
        ),
        # Recurring problems: three pitfalls/bugfixes on one file over three weeks.
        rec(
            "rm01",
            "pitfall",
            "Push rejected without a message",
            "Dulwich returns ref status per ref; check each",
            "2026-02-02",
            files=["engram/sync/remote.py"],
            tags=["sync"],
        ),
        rec(
            "rm02",
            "bugfix",
            "Fetch hung on an empty remote",
            "Guard the pack negotiation when the remote has no refs",
            "2026-02-11",
            files=["engram/sync/remote.py"],
            tags=["sync"],
        ),
        rec(
            "rm03",
            "pitfall",
            "Credentials prompt blocked the daemon",
            "Disable interactive askpass in background sync",
            "2026-02-25",
            files=["engram/sync/remote.py"],
            tags=["sync"],
        ),
        # Three bug fixes on one file, all in the same week: not recurring.
        rec(
            "cl01",
            "bugfix",
            "Help text typo",
            "Fixed wording",
            "2026-03-02",
            files=["engram/cli.py"],
        ),
        rec(
            "cl02",
            "bugfix",
            "Exit status on bad id",
            "Now 2",
            "2026-03-03",
            files=["engram/cli.py"],
        ),
        rec(
            "cl03",
            "bugfix",
            "Colour off in pipes",
            "Detect a tty",
            "2026-03-04",
            files=["engram/cli.py"],
        ),
        # A supersede chain of four: ch04 → ch03 → ch02 → ch01; ch03 is still active.
        rec(
            "ch01",
            "decision",
            "Cache recall results in memory",
            "Per process dict",
            "2025-10-01",
            status="superseded",
        ),
        rec(
            "ch02",
            "decision",
            "Cache recall results on disk",
            "Pickle files in state",
            "2025-11-01",
            status="superseded",
            links=[{"rel": "supersedes", "to": "ch01"}],
        ),
        rec(
            "ch03",
            "decision",
            "Cache recall results in sqlite",
            "A table in the index",
            "2025-12-01",
            links=[{"rel": "supersedes", "to": "ch02"}],
        ),
        rec(
            "ch04",
            "decision",
            "Do not cache recall results",
            "The index is fast enough",
            "2026-01-01",
            links=[{"rel": "supersedes", "to": "ch03"}],
        ),
        # A chain of two is not an insight.
        rec("tw01", "decision", "Tabs", "For indentation", "2025-06-01", status="superseded"),
        rec(
            "tw02",
            "decision",
            "Spaces",
            "Four of them",
            "2025-07-01",
            links=[{"rel": "supersedes", "to": "tw01"}],
        ),
    ]
    # Unrelated noise: no words, tags or files in common with anything.
    for number in range(20):
        words = " ".join(f"w{number}x{k}" for k in range(8))
        records.append(rec(f"no{number:02d}", "note", f"t{number}q {words}", words, "2026-01-01"))
    return records


def write_store(folder: Path, records: list[dict[str, Any]], garbage: bytes = b"") -> Path:
    engram_dir = folder / ".engram"
    engram_dir.mkdir(parents=True)
    lines = [canonical_line(r) for r in sorted(records, key=lambda r: r["id"])]
    (engram_dir / "memories.jsonl").write_bytes(b"".join(lines) + garbage)
    return engram_dir


EXPECTED = {
    ("cluster", ("sq01", "sq02", "sq03", "sq04")),
    ("cluster", ("ix01", "ix02", "ix03")),
    ("cluster", ("au01", "au02", "au03")),
    ("temporal", ("rm01", "rm02", "rm03")),
    ("lineage", ("ch01", "ch02", "ch03", "ch04")),
}


def test_real_trainer_over_a_realistic_store(tmp_path: Path) -> None:
    engram_dir = write_store(tmp_path, realistic_records(), garbage=b"{not a memory\n")
    before = (engram_dir / "memories.jsonl").read_bytes()
    seen: list[Event] = []
    outcome = run_trainer(default_command(engram_dir), timeout=120, on_event=seen.append)
    assert outcome.problems == []
    assert outcome.ok, outcome
    assert seen == outcome.events
    found = {(i.insight_type, tuple(i.source_ids)) for i in outcome.insights}
    assert found == EXPECTED
    for insight in outcome.insights:
        assert insight.id == insight_id(insight.insight_type, insight.source_ids)
    by_type = {i.insight_type + i.source_ids[0]: i for i in outcome.insights}
    assert (
        by_type["clusterix01"].context
        == "3 memories about engram/index/db.py, engram/index/ranking.py"
    )
    assert by_type["clusterau01"].context == "3 memories about auth, oauth"
    assert by_type["clusterau01"].tags == ["auth", "oauth"]
    assert "sqlite" in by_type["clustersq01"].context
    assert "sqlite database is locked" in by_type["clustersq01"].result
    temporal = by_type["temporalrm01"]
    assert temporal.context == "recurring problems in engram/sync/remote.py"
    assert "2026-02-02, 2026-02-11, 2026-02-25" in temporal.result
    lineage = by_type["lineagech01"]
    assert lineage.context == "decision about Do not cache recall results revised 3 times"
    assert (
        lineage.result.index("ch01") < lineage.result.index("ch02") < lineage.result.index("ch04")
    )
    assert {(r.action, r.target_id) for r in outcome.recommendations} == {
        ("merge", "sq01"),  # the oldest of the two near-identical copies
        ("archive", "ch03"),  # superseded by ch04 but still active
    }
    assert outcome.metrics["memories_read"] == len(realistic_records())
    assert outcome.metrics["bad_lines"] == 1
    assert outcome.metrics["clusters"] == 3
    assert outcome.complete is not None and outcome.complete.insights_generated == 5
    # Progress arrives first, in stage order, and never goes backwards.
    progress = [e for e in seen if isinstance(e, Progress)]
    assert [p.stage for p in progress] == ["load", "cluster", "temporal", "lineage", "done"]
    assert [p.percent for p in progress] == sorted(p.percent for p in progress)
    assert isinstance(seen[0], Progress) and isinstance(seen[-1], Complete)
    assert outcome.artifacts == []
    assert (engram_dir / "memories.jsonl").read_bytes() == before  # read-only
    assert sorted(p.name for p in engram_dir.iterdir()) == ["memories.jsonl"]


def test_training_is_deterministic_and_respects_limits(tmp_path: Path) -> None:
    engram_dir = write_store(tmp_path, realistic_records())

    def stable(**options: int) -> list[Event]:
        events: list[Event] = []
        train(engram_dir, events.append, **options)
        return [
            e
            for e in events
            if not isinstance(e, Complete)
            and not (isinstance(e, Metric) and e.name.startswith("seconds_"))
        ]

    first = stable()
    assert first == stable()
    limited = [e for e in stable(max_insights=4) if isinstance(e, Insight)]
    # The types take turns (lineage, temporal, cluster), each strongest first.
    assert [(i.insight_type, len(i.source_ids)) for i in limited] == [
        ("lineage", 4),
        ("temporal", 3),
        ("cluster", 4),
        ("cluster", 3),
    ]
    tied = [insight_id("cluster", [f"{p}0{n}" for n in (1, 2, 3)]) for p in ("au", "ix")]
    assert limited[3].id == min(tied)  # equal strength: the smaller insight id first
    wider = [e for e in stable(min_cluster=4) if isinstance(e, Insight)]
    assert {tuple(i.source_ids) for i in wider if i.insight_type == "cluster"} == {
        ("sq01", "sq02", "sq03", "sq04")
    }


def test_trainer_reports_a_missing_store(tmp_path: Path) -> None:
    outcome = run_trainer(default_command(tmp_path / "nowhere"), timeout=60)
    assert not outcome.ok
    assert outcome.returncode == 2
    assert "no engram store" in outcome.problems[0]


# -- fake trainers -----------------------------------------------------------------------------


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return [sys.executable, str(path)]


PRELUDE = """
import json, os, subprocess, sys, time
def say(obj):
    print(json.dumps(obj), flush=True)
"""


def gone(pid: int) -> bool:
    """Tell whether a process no longer runs (absent, or a zombie waiting for init)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def eventually_gone(pid: int) -> bool:
    for _ in range(200):
        if gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_crash_mid_stream_is_reported(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "crash",
        PRELUDE
        + """
say({"type": "progress", "stage": "load", "percent": 0})
say({"type": "metric", "name": "memories_read", "value": 12})
try:
    raise RuntimeError("model file is corrupt")
except RuntimeError:
    import traceback
    traceback.print_exc()
    sys.exit(3)
""",
    )
    seen: list[Event] = []
    outcome = run_trainer(command, timeout=60, on_event=seen.append)
    assert not outcome.ok
    assert outcome.returncode == 3
    assert seen == [Progress("load", 0), Metric("memories_read", 12)]
    assert outcome.complete is None
    [problem] = outcome.problems
    assert "exited with status 3 after 2 line(s)" in problem
    assert "RuntimeError: model file is corrupt" in problem
    assert outcome.pid is not None and gone(outcome.pid)


def test_garbage_line_is_reported_with_number_and_text(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "garbage",
        PRELUDE
        + """
say({"type": "progress", "stage": "load", "percent": 0})
say({"type": "progress", "stage": "cluster", "percent": 50})
print("Loading model weights... done", flush=True)
say({"type": "progress", "stage": "oops", "percent": 250})
say({"type": "complete", "insights_generated": 0, "duration_secs": 0.1})
""",
    )
    outcome = run_trainer(command, timeout=60)
    assert outcome.returncode == 0 and outcome.complete is not None
    assert not outcome.ok
    assert len(outcome.problems) == 2
    assert "line 3" in outcome.problems[0]
    assert "Loading model weights... done" in outcome.problems[0]
    assert "line 4" in outcome.problems[1] and "'percent'" in outcome.problems[1]
    assert [e.stage for e in outcome.events if isinstance(e, Progress)] == ["load", "cluster"]


def test_hang_is_killed_with_its_whole_process_group(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "hang",
        PRELUDE
        + """
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
say({"type": "progress", "stage": f"child {child.pid}", "percent": 1})
time.sleep(30)
""",
    )
    outcome = run_trainer(command, timeout=1)
    assert not outcome.ok
    assert outcome.returncode is None
    assert any("did not finish within 1 s" in p for p in outcome.problems)
    [first] = outcome.events
    assert isinstance(first, Progress)
    child = int(first.stage.split()[1])
    assert outcome.pid is not None and gone(outcome.pid)
    assert eventually_gone(child)


def test_exit_zero_without_complete_and_miscounted_complete(tmp_path: Path) -> None:
    silent = script(tmp_path, "silent", PRELUDE + 'say({"type":"metric","name":"n","value":1})\n')
    outcome = run_trainer(silent, timeout=60)
    assert outcome.returncode == 0 and not outcome.ok
    assert "without a complete event" in outcome.problems[0]
    liar = script(
        tmp_path,
        "liar",
        PRELUDE + 'say({"type":"complete","insights_generated":2,"duration_secs":0})\n',
    )
    outcome = run_trainer(liar, timeout=60)
    assert not outcome.ok
    assert "counts 2 insight(s) but 0 arrived" in outcome.problems[0]


def test_oversized_line_and_unstartable_command(tmp_path: Path) -> None:
    big = script(
        tmp_path,
        "big",
        PRELUDE
        + """
print("x" * 5000, flush=True)
say({"type": "complete", "insights_generated": 0, "duration_secs": 0})
""",
    )
    outcome = run_trainer(big, timeout=60, max_line_bytes=1000)
    assert not outcome.ok
    assert outcome.complete is not None  # the line after the long one is still read
    assert "line 1 is longer than 1,000 bytes" in outcome.problems[0]
    missing = run_trainer([str(tmp_path / "no-such-trainer")], timeout=5)
    assert not missing.ok and missing.returncode is None
    assert "could not be started" in missing.problems[0]


def test_on_event_failure_still_reaps_the_trainer(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        "chatty",
        PRELUDE
        + """
say({"type": "progress", "stage": f"pid {os.getpid()}", "percent": 0})
time.sleep(30)
""",
    )
    pids: list[int] = []

    def boom(event: Event) -> None:
        assert isinstance(event, Progress)
        pids.append(int(event.stage.split()[1]))
        raise KeyboardInterrupt  # e.g. the user pressed Ctrl-C during the progress bar

    with pytest.raises(KeyboardInterrupt):
        run_trainer(command, timeout=60, on_event=boom)
    [pid] = pids
    assert gone(pid)
