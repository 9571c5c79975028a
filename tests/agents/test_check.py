"""`engram check` before an edit: file matches, hotspots, reverts, superseded decisions, budget."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pytest

from engram.agents.briefing import estimate_tokens
from engram.agents.check import Finding, Findings, is_candidate, pack_check
from engram.config import personal_dir
from engram.index.query import file_matches
from engram.indexer.plan import adr_id, hotspots_id
from engram.model import Record, canonical_line
from engram.project import Project
from engram.service import Engram
from tests.conftest import run_cli
from tests.indexer.test_index_command import build_history, commit
from tests.mcp_server.test_mcp import connect, make_project, run


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    """A git repo with superseded ADRs, a hotspot changed 9 times and a revert, indexed."""
    root = build_history(tmp_path / "svc")
    engram, _ = Engram.init(root, "svc")
    with engram:
        engram.index_project()
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "repo")


def save(root: Path, title: str, kind: str, files: list[str]) -> str:
    with Engram.open(root) as engram:
        return engram.remember(title, "body", kind=kind, files=files).record["id"]


def ids(result: Findings) -> list[str]:
    return [f.id for f in result.findings]


def test_exact_folder_and_glob_matches(project: Path) -> None:
    exact = save(project, "Never log the raw token", "pitfall", ["src/auth/token.py"])
    folder = save(project, "Auth goes through one middleware", "decision", ["src/auth"])
    glob = save(project, "Tests mock the clock", "pitfall", ["src/**/*_clock.py"])
    other = save(project, "Billing rounds half-even", "decision", ["src/billing.py"])
    with Engram.open(project) as engram:
        token = ids(engram.check(["src/auth/token.py"]))
        assert exact in token and folder in token and other not in token
        # Active pitfalls come before active decisions.
        assert token.index(exact) < token.index(folder)
        assert glob in ids(engram.check("src/time/fake_clock.py"))
        both = ids(engram.check("src/auth/token.py,src/billing.py"))
        assert {exact, folder, other} <= set(both)
        text = engram.check(["src/auth/token.py"]).text
        assert exact[:8] in text and "Never log the raw token" in text


def test_hotspot_revert_candidate_and_superseded_decision(indexed: Path) -> None:
    with Engram.open(indexed) as engram:
        result = engram.check(["app/sessions.py"])
        reasons = {f.reason: f for f in result.findings}
        assert reasons["hotspot"].id == hotspots_id("svc")
        assert "app/sessions.py changed 9 times in the last 12 commits" in result.text
        assert reasons["decision"].id == adr_id("docs/adr/0002-keep-sessions-in-postgres.md")
        old = reasons["superseded"]
        assert old.id == adr_id("docs/adr/0001-keep-sessions-in-redis.md")
        assert "superseded by" in old.note
        assert engram.short_ids([reasons["decision"].id])[reasons["decision"].id] in (old.note)
        worker = engram.check(["app/worker.py"])
        assert [f.reason for f in worker.findings] == ["candidate"]
        assert "revert" in worker.findings[0].note


def test_text_adds_recall_hits(indexed: Path) -> None:
    with Engram.open(indexed) as engram:
        plain = engram.check(["README.md"])
        assert plain.findings == []
        planned = engram.check(["README.md"], text="connection pool in the worker")
        assert [f.reason for f in planned.findings][:1] == ["recall"]


def test_never_over_budget(indexed: Path) -> None:
    for n in range(20):
        save(indexed, f"Sessions pitfall number {n} " + "x" * 80, "pitfall", ["app"])
    with Engram.open(indexed) as engram:
        for budget in (0, 10, 30, 60, 100, 200, 400, 800, 3000):
            result = engram.check(["app/sessions.py"], text="sessions", budget=budget)
            assert estimate_tokens(result.text) <= budget
            assert result.tokens <= budget
        small = engram.check(["app/sessions.py"], budget=100)
        assert small.left_out > 0 and small.findings


def test_cli_empty_answer_exit_zero_and_json(project: Path) -> None:
    done = run_cli("-C", str(project), "check", "--files", "nowhere/file.py")
    assert done.returncode == 0, done.stderr
    assert "nothing known" in done.stdout.decode()
    rid = save(project, "Keep the parser pure", "decision", ["src/parse.py"])
    done = run_cli(
        "-C", str(project), "check", "-f", "src/parse.py", "-f", "x.py", "--budget", "200", "--json"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [f["id"] for f in data["findings"]] == [rid] and data["tokens"] <= 200


def test_mcp_check_through_a_stdio_session(project: Path) -> None:
    rid = save(project, "Never log the raw token", "pitfall", ["src/auth/*.py"])

    async def scenario() -> None:
        async with connect(project) as client:
            data = await client.ok("check", {"files": ["src/auth/token.py"]})
            assert [f["short_id"] for f in data["findings"]] == [rid[:8]]
            assert "Never log the raw token" in data["text"]
            empty = await client.ok("check", {"files": ["docs/x.md"], "text": "zzz"})
            assert empty["findings"] == [] and "nothing known" in empty["text"]

    run(scenario)


# -- the files index against every citing memory read and ranked (the check before it) ---------

APP_FILES: Final = (
    "app/billing.py",
    "app/models.py",
    "app/queue.py",
    "app/auth/token.py",
    "app/auth/session.py",
)
CITED: Final = (*APP_FILES, "app/sessions.py", "app/worker.py", "app/auth", "app/*.py", "docs/x.md")


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def version(path: str, number: int) -> str:
    return f"# {path}, version {number}\n"


def memory(rng: random.Random, first: Mapping[str, str]) -> dict[str, Any]:
    """Return one synthetic memory citing the app's files (odd importances among them)."""
    rid = base64.b32encode(rng.getrandbits(128).to_bytes(16, "big")).decode().rstrip("=")
    kind = rng.choice(["pitfall"] * 3 + ["decision"] * 3 + ["bugfix", "pattern", "fact", "note"])
    status = rng.choice(["active"] * 6 + ["superseded", "rejected", "archived", "proposed"])
    day = rng.randrange(1, 28)
    record: dict[str, Any] = {
        "id": rid.lower(),
        "kind": kind,
        "status": status,
        "title": f"{kind} {rng.randrange(10**6)} " + "words " * rng.randrange(1, 16),
        "content": "body",
        "files": sorted(rng.sample(CITED, rng.choice([1, 1, 2, 3]))),
        "importance": rng.choice([1, 2, 3, 3, 3, 4, 5, 5, "5", 0, 4.5]),
        "author": rng.choice(["Ada", "Grace", "Linus"]),
        "source": rng.choice(["agent", "cli"]),
        "created_at": f"2023-0{rng.randrange(1, 10)}-{day:02d}T10:00:00.000Z",
        "updated_at": f"2023-10-{day:02d}T10:00:00.000Z",
        "rev": 1,
        "scope": "project",
        "project": "svc",
    }
    if rng.random() < 0.1:
        del record["importance"]
    if rng.random() < 0.05:
        del record["status"]
    if kind == "pitfall" and status == "proposed" and rng.random() < 0.7:
        record["tags"] = [rng.choice(["revert", "fix-again"])]
        record["source"] = f"git:{rng.getrandbits(160):040x}"
    anchored = [path for path in record["files"] if path in first]
    if anchored and rng.random() < 0.6:
        record["anchors"] = [{"path": path, "blob": first[path]} for path in anchored]
    return record


def write_memories(folder: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Add records to a store's memories.jsonl as a hand edit would, keeping it canonical."""
    path = folder / "memories.jsonl"
    old = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    lines = sorted(canonical_line(record) for record in [*old, *records])
    path.write_bytes(b"".join(lines))


@pytest.fixture
def crowded(tmp_path: Path) -> Path:
    """The indexed history plus 300 memories citing app/ (stale anchors among them)."""
    root = build_history(tmp_path / "svc")
    commit(root, "Add the app", {path: version(path, 1) for path in APP_FILES}, 1_700_001_000)
    first = {path: blob_id(version(path, 1).encode()) for path in APP_FILES}
    engram, _ = Engram.init(root, "svc")
    with engram:
        engram.index_project()
        engram.remember(
            "Personal billing habit", "body", files=["app/billing.py"], scope="personal"
        )
    changed = {path: version(path, 2) for path in APP_FILES[:3]}
    commit(root, "Change the app", changed, 1_700_002_000)
    rng = random.Random(16)
    records = [memory(rng, first) for _ in range(300)]
    superseded = [r for r in records if r.get("status") == "superseded"]
    later = [r for r in records if r.get("status") == "active" and r["kind"] == "decision"]
    for old, new in zip(superseded, later, strict=False):
        new.setdefault("links", []).append({"rel": "supersedes", "to": old["id"]})
    write_memories(root / ".engram", records)
    # The personal store holds a copy of one project memory: the project's is the one shown.
    write_memories(personal_dir(), [{**records[0], "scope": "personal"}])
    return root


def previous_check(
    here: Project, files: Sequence[str], *, text: str = "", budget: int | None = None
) -> Findings:
    """Check as it was done before the files index: every citing memory read and ranked."""
    budget = int(here.config.number("check.budget")) if budget is None else budget
    wanted = here.repo_paths(files)
    records: list[Record] = []
    superseded_by: dict[str, list[str]] = {}
    for ws in here.workspaces():
        found = ws.index.get_many(ws.index.ids_for_files(wanted))
        for rid in sorted(found):
            records.append(found[rid])
            if found[rid].get("status") == "superseded":
                links = ws.index.linked_to(rid)
                superseded_by[rid] = [src for src, rel in links if rel == "supersedes"]
    hotspots = here.hotspots() if wanted else None
    hits = [hit.record for hit in here.recall(text, limit=5)] if text else []
    findings = previous_gather(wanted, records, hotspots, superseded_by, hits)
    by_id = {str(record["id"]): record for record in [*records, *hits]}
    known = {rid for ids in superseded_by.values() for rid in ids}
    shorts = here.short_ids([*[f.id for f in findings], *known])

    def short(rid: str) -> str:
        return shorts[rid] if rid in shorts else here.short_ids([rid])[rid]

    def decorate(finding: Finding) -> Finding:
        finding.note = re.sub(
            r"\b[a-z2-7]{26}\b",
            lambda m: short(m.group()) if m.group() in by_id or m.group() in known else m.group(),
            finding.note,
        )
        stale = here.stale(by_id.get(finding.id, {}))
        if stale:
            finding.stale = list(stale)
            finding.note = f"{finding.note}; may be stale: {'; '.join(stale)}"
        return finding

    return pack_check(wanted, findings, budget=budget, short_id=short, decorate=decorate)


def previous_gather(
    wanted: Sequence[str],
    records: Sequence[Record],
    hotspots: Mapping[str, Any] | None,
    superseded_by: Mapping[str, Sequence[str]],
    hits: Sequence[Record],
) -> list[Finding]:
    """Every finding, sorted by reason then importance, as check ranked them before."""
    ranked: list[tuple[tuple[int, float], Finding]] = []
    seen: set[str] = set()
    reverts: dict[str, int] = {}
    hotspot_id = str(hotspots["id"]) if hotspots else ""
    rank = {"pitfall": 0, "decision": 1, "candidate": 3, "memory": 4, "superseded": 5}

    def add(reason: str, record: Record, note: str, order: float) -> Finding:
        status = str(record.get("status") or "active")
        finding = Finding(reason, str(record["id"]), record.get("kind"), status, note)
        finding.record = record
        ranked.append(((rank.get(reason, 6), order), finding))
        return finding

    for record in records:
        rid = str(record["id"])
        matched = [w for w in wanted if any(file_matches(p, w) for p in record.get("files", []))]
        if rid in seen or rid == hotspot_id or not matched:
            continue
        seen.add(rid)
        status, kind = str(record.get("status") or "active"), str(record.get("kind") or "note")
        weight, about = -float(record.get("importance") or 3), ", ".join(matched)
        tags = {str(tag).lower() for tag in record.get("tags") or []}
        if is_candidate(record):
            reverts.update({p: reverts.get(p, 0) + 1 for p in matched if "revert" in tags})
            what = "revert" if "revert" in tags else "fixed again"
            add("candidate", record, f"candidate pitfall from a {what} touching {about}", weight)
        elif status == "active" and kind in ("pitfall", "decision"):
            add(kind, record, f"about {about}", weight)
        elif status == "superseded":
            by = ", ".join(superseded_by.get(rid, [])) or "a later memory"
            add("superseded", record, f"superseded by {by}, still cites {about}", weight)
        elif status == "active":
            add("memory", record, f"about {about}", weight)
    for spot in (hotspots or {}).get("hotspots") or []:
        path, changes = str(spot["path"]), int(spot["changes"])
        if hotspots is not None and any(file_matches(path, w) for w in wanted):
            window = re.search(r"in the last (\d+)", str(hotspots.get("content")))
            span = f" in the last {window.group(1)} commits" if window else " in the mined window"
            note = f"hotspot: {path} changed {changes} times{span}"
            if reverts.get(path):
                note += f", reverted {reverts[path]} times"
            status = str(hotspots.get("status") or "active")
            finding = Finding("hotspot", hotspot_id, hotspots.get("kind"), status, note)
            finding.record, finding.path, finding.changes = hotspots, path, changes
            ranked.append(((2, -float(changes)), finding))
    for number, record in enumerate(hits):
        if record["id"] not in seen and record["id"] != hotspot_id:
            seen.add(record["id"])
            add("recall", record, "relevant to the plan", float(number))
    ranked.sort(key=lambda item: item[0])
    return [finding for _, finding in ranked]


CHECKED: Final = (
    (["app"], "", None),
    (["app"], "", 100),
    (["app"], "", 300),
    (["app"], "", 500),
    (["app"], "", 1200),
    (["app"], "", 3000),
    (["app"], "", 40_000),
    (["app"], "", 0),
    (["app/billing.py"], "", None),
    (["app/billing.py"], "sessions pool worker", None),
    (["app/*.py"], "", None),
    (["**/token.py", "docs"], "", 1500),
    (["app/sessions.py"], "redis", 400),
    (["nowhere.py"], "postgres", None),
)


@pytest.mark.parametrize(("files", "text", "budget"), CHECKED)
def test_same_findings_as_reading_every_citing_memory(
    crowded: Path, files: list[str], text: str, budget: int | None
) -> None:
    with Engram.open(crowded) as engram:
        expected = previous_check(engram.here, files, text=text, budget=budget).to_dict()
        assert engram.check(files, text=text, budget=budget).to_dict() == expected
        # And again, with the records the first answers read kept in memory.
        assert engram.check(files, text=text, budget=budget).to_dict() == expected


def test_crowded_store_exercises_every_reason_and_the_cut(crowded: Path) -> None:
    with Engram.open(crowded) as engram:
        whole = engram.check(["app"], budget=40_000)
        reasons = [f.reason for f in whole.findings]
        assert whole.left_out == 0 and len(whole.findings) > 150
        assert reasons == sorted(
            reasons,
            key=["pitfall", "decision", "hotspot", "candidate", "memory", "superseded"].index,
        )
        assert set(reasons) == {
            "pitfall",
            "decision",
            "hotspot",
            "candidate",
            "memory",
            "superseded",
        }
        assert any(f.stale for f in whole.findings) and any(not f.stale for f in whole.findings)
        assert any(
            "superseded by" in f.note and "a later memory" not in f.note for f in whole.findings
        )
        cuts = [engram.check(["app"], budget=budget) for budget in (300, 500, 800, 1200)]
        for cut in cuts:
            assert cut.left_out == len(whole.findings) - len(cut.findings) > 100
            assert f"{len(whole.findings)} findings." in cut.text.splitlines()[0]
            shown = [f.id for f in cut.findings]
            assert shown == [f.id for f in whole.findings if f.id in shown]
        # The footer is shown when it fits, which some of these budgets leave room for.
        assert any(
            f"({cut.left_out} more left out for the token budget" in cut.text for cut in cuts
        )


def test_cli_json_matches_reading_every_citing_memory(crowded: Path) -> None:
    done = run_cli("-C", str(crowded), "check", "-f", "app/*.py", "-f", "app/auth", "--json")
    assert done.returncode == 0, done.stderr
    with Engram.open(crowded) as engram:
        expected = previous_check(engram.here, ["app/*.py", "app/auth"]).to_dict()
    assert json.loads(done.stdout) == expected
    done = run_cli("-C", str(crowded), "check", "-f", "app", "--budget", "300")
    assert done.returncode == 0, done.stderr
    with Engram.open(crowded) as engram:
        assert done.stdout.decode() == previous_check(engram.here, ["app"], budget=300).text + "\n"


def test_the_files_index_follows_updates_forgets_and_a_rebuild(crowded: Path) -> None:
    with Engram.open(crowded) as engram:
        first = engram.check(["app"]).findings
        top, second, third = first[0].id, first[1].id, first[2].id
        engram.update(top, status="archived")  # no longer a finding
        engram.update(third, importance=1, files=["docs/x.md"])  # no longer cites app/
        engram.forget(second)
        memo = engram.remember(
            "Pool the billing client",
            "body",
            kind="pitfall",
            importance=5,
            files=["app/billing.py", "app/queue.py"],
        )
        for args in (["app"], ["app/billing.py"], ["app/*.py"]):
            expected = previous_check(engram.here, args).to_dict()
            assert engram.check(args).to_dict() == expected
        shown = [f.id for f in engram.check(["app"]).findings]
        assert memo.record["id"] in shown and not {top, second, third} & set(shown)
        engram.reindex(rebuild=True)
        for args in (["app"], ["app/billing.py"], ["**/token.py"]):
            assert engram.check(args).to_dict() == previous_check(engram.here, args).to_dict()


def test_a_check_pages_through_the_files_index_and_reads_only_what_it_shows(
    crowded: Path,
) -> None:
    with Engram.open(crowded) as engram:
        engram.reindex()
        db = engram.here.ws.index.records.db
        statements: list[str] = []
        db.set_trace_callback(statements.append)
        try:
            result = engram.check(["app"])
        finally:
            db.set_trace_callback(None)
        on_files = [sql for sql in statements if "FROM files" in sql]
        assert on_files
        for sql in on_files:
            plan = " | ".join(str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + sql))
            if "id IN" in sql:  # a few ids looked up (recall hits, candidates of another store)
                assert "SEARCH files USING INDEX files_id" in plan, (sql, plan)
            elif "path IN" in sql:  # counts and pages: the index alone, no row of the table
                assert "SEARCH files USING COVERING INDEX files_cite" in plan, (sql, plan)
            else:  # the cited paths, read once while the store is unchanged
                assert plan == "SCAN files USING COVERING INDEX files_cite", (sql, plan)
        read = {
            rid
            for sql in statements
            if sql.startswith("SELECT id, json FROM records")
            for rid in re.findall(r"'([a-z2-7]{26})'", sql)
        }
        # Of the 200 and more findings, the page the budget draws from and the candidates.
        assert result.left_out > 150 and len(read) < 60
        assert {f.id for f in result.findings} <= read
