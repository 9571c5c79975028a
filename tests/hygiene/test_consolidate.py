"""Consolidation on a seeded messy store: groups found, recommendations, LLM fallbacks, plans."""

from __future__ import annotations

import json
import random
import re
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import InvalidInput
from engram.hygiene.consolidate import (
    ACTIONS,
    GROUP_KINDS,
    Group,
    Recommendation,
    find_groups,
    llm_command,
    make_plan,
    merged_id,
    plan_changes,
    read_plan,
    recommend,
)
from engram.model import Record, canonical_line, is_tombstone, normalize_fields
from engram.store import MemoryStore

STAMP = "2026-11-29T12:00:00.000Z"
DUP_TITLE = "Do not call time.sleep in async handlers"
DUP_TEXT = (
    "time.sleep blocks the whole event loop, so every request on the worker stalls. "
    "Use `await asyncio.sleep(...)` instead; the retry helper in api/retry.py got this wrong."
)
DUP_IDS = [f"dup{n}" for n in range(9)]
DELETED = "src/legacy/payment_v1.py"
UNRELATED = {"note-standup", "principle-small-prs", "sess-1", "sess-2", "pit-glob", "dec-new"}


def memory(memory_id: str, kind: str, title: str, content: str, **extra: Any) -> Record:
    """Return a stored-looking memory record."""
    record: Record = {
        "id": memory_id,
        "kind": kind,
        "title": title,
        "content": content,
        "status": "active",
        "importance": 3,
        "scope": "project",
        "project": "shop",
        "created_at": "2026-03-01T09:00:00.000Z",
        "updated_at": "2026-03-01T09:00:00.000Z",
        "rev": 1,
    }
    record.update(extra)
    return record


def messy() -> list[Record]:
    """Return a store with one of each problem consolidation looks for, and some innocents."""
    records = []
    for n, memory_id in enumerate(DUP_IDS):
        title, text = DUP_TITLE, DUP_TEXT
        if n % 3 == 1:  # the same words in other case and spacing
            title, text = title.upper(), text.replace(" ", "  ").replace("; ", ";\n")
        records.append(
            memory(
                memory_id,
                "pitfall",
                title,
                text,
                importance=5 if memory_id == "dup3" else 3,
                tags=["async", f"seen-{n}"],
                links=[{"rel": "relates", "to": "principle-small-prs" if n == 0 else "dup0"}],
                updated_at=f"2026-03-0{n + 1}T09:00:00.000Z",
            )
        )
    records += [
        memory(
            "near-a",
            "pitfall",
            "Never store money as float",
            "Floating point cannot represent 0.10 exactly; keep amounts in integer cents (or "
            "Decimal) and format them only at the edge of the system.",
        ),
        memory(
            "near-b",
            "pitfall",
            "Never store money amounts as floats",
            "Floating point cannot represent 0.10 exactly, so keep amounts in integer cents (or "
            "Decimal) and format them only at the edge of the system.",
        ),
        memory("dec-old", "decision", "Public API is REST", "We expose REST with JSON bodies."),
        memory(
            "dec-new",
            "decision",
            "Public API moves to GraphQL",
            "Clients asked for field selection; REST stays for webhooks only.",
            links=[{"rel": "supersedes", "to": "dec-old"}],
        ),
        memory(
            "fact-orphan",
            "fact",
            "Payments run on a separate queue",
            "The payments worker reads the `payments` queue only.",
            links=[
                {"rel": "relates", "to": "dec-new"},
                {"rel": "relates", "to": "ghost0123"},
                {"rel": "caused_by", "to": "gone1"},
            ],
        ),
        memory(
            "pit-deleted",
            "pitfall",
            "payment_v1 rounds refunds twice",
            "refund() in the v1 module rounds before and after tax.",
            files=[DELETED],
        ),
        memory(
            "pit-glob",
            "pitfall",
            "Generated clients must not be edited",
            "Regenerate with `make clients`; hand edits are lost.",
            files=["src/clients/**/*.py"],
        ),
        memory(
            "pat-stale",
            "pattern",
            "Settings are read through load_settings()",
            "Never read os.environ directly; src/a.py has the one loader.",
            anchors=[{"path": "src/a.py", "blob": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}],
        ),
        memory(
            "fact-old",
            "fact",
            "CI runs on Python 3.9",
            "The matrix pins 3.9.",
            judgements=[
                {"score": 0.9, "verdict": "useful", "by": "ana", "at": "2026-01-01T00:00:00Z"},
                {
                    "score": 0.1,
                    "verdict": "outdated",
                    "reason": "CI moved to 3.12",
                    "by": "bo",
                    "at": "2026-05-01T00:00:00Z",
                },
            ],
        ),
        memory(
            "fact-wrong",
            "fact",
            "The cache is write-through",
            "Writes go to Redis and Postgres in one call.",
            judgements=[{"score": 0.0, "verdict": "wrong", "by": "cy", "at": "2026-05-02T00:00Z"}],
        ),
        memory("note-standup", "note", "Standup moved to 10:00", "From next Monday."),
        memory("principle-small-prs", "principle", "Small pull requests", "Under 400 lines."),
        memory("sess-1", "session", "Session summary", "Worked on refunds."),
        memory("sess-2", "session", "Session summary", "Worked on refunds."),
        {"id": "gone1", "rev": 3, "updated_at": STAMP, "deleted_at": STAMP},
    ]
    return records


def exists(path: str) -> bool:
    return path != DELETED


def stale(record: Mapping[str, Any]) -> list[str]:
    if record["id"] == "pat-stale":
        return ["src/a.py changed in 5 commits since it was written"]
    if record["id"] == "note-standup":  # too few commits to matter
        return ["docs/team.md changed in 2 commits since it was written"]
    return []


def by_id(records: list[Record]) -> dict[str, Record]:
    return {r["id"]: r for r in records}


def test_find_groups_finds_each_problem_with_the_right_action() -> None:
    groups = find_groups(messy(), exists=exists, stale=stale)
    summary = [(g.kind, g.ids, g.action) for g in groups]
    assert summary == [
        ("duplicate", DUP_IDS, "merge"),
        ("near_duplicate", ["near-a", "near-b"], "merge"),
        ("superseded_active", ["dec-old"], "archive"),
        ("deleted_file", ["pit-deleted"], "archive"),
        ("orphan", ["fact-orphan"], "keep"),
        ("stale", ["pat-stale"], "keep"),
        ("outdated", ["fact-old"], "archive"),
        ("outdated", ["fact-wrong"], "delete"),
    ]
    duplicate, near, superseded, deleted, orphan, stale_group, outdated, _ = groups
    assert duplicate.keep == "dup3"  # the most important copy leads
    assert duplicate.reason.startswith("9 pitfall memories have the same title and text")
    assert near.keep in near.ids and 0.88 <= near.score <= 1  # the same words, stemmed
    assert "dec-new" in superseded.reason
    assert DELETED in deleted.reason
    assert (
        "ghost0123, gone1 (deleted)" in orphan.reason and "drop the dangling links" in orphan.reason
    )
    assert "dec-new" not in orphan.reason  # a link to a live memory is fine
    assert "src/a.py changed in 5 commits" in stale_group.reason
    assert "CI moved to 3.12" in outdated.reason
    touched = {memory_id for group in groups for memory_id in group.ids}
    assert not touched & UNRELATED


def test_find_groups_is_deterministic_and_ignores_order() -> None:
    records = messy()
    first = find_groups(records, exists=exists, stale=stale)
    random.Random(5).shuffle(records)
    assert [g.to_dict() for g in find_groups(records, exists=exists, stale=stale)] == [
        g.to_dict() for g in first
    ]


def test_find_groups_details() -> None:
    records = messy()
    # A stale memory whose anchored files are all gone is archived rather than kept.
    gone = find_groups(
        [r for r in records if r["id"] == "pat-stale"],
        exists=exists,
        stale=lambda r: ["src/a.py was deleted since it was written"],
    )
    assert [(g.kind, g.action) for g in gone] == [("stale", "archive")]
    # A link by unique prefix resolves; archived memories are not grouped again.
    for record in records:
        if record["id"] == "fact-orphan":
            record["links"] = [{"rel": "relates", "to": "dec-n"}]
        if record["id"] in ("dec-old", "pit-deleted"):
            record["status"] = "archived"
    kinds = [g.kind for g in find_groups(records, exists=exists)]
    assert "orphan" not in kinds and "superseded_active" not in kinds
    assert "deleted_file" not in kinds and "stale" not in kinds  # no stale callback given
    # A tighter threshold drops the near pair but keeps the exact duplicates. (The pair has
    # the same words once stemmed: a word more makes it less than alike at 0.99.)
    for record in records:
        if record["id"] == "near-b":
            record["content"] += " Always."
    kinds = [g.kind for g in find_groups(records, exists=exists)]
    assert "near_duplicate" in kinds
    kinds = [g.kind for g in find_groups(records, exists=exists, near_threshold=0.99)]
    assert "near_duplicate" not in kinds and "duplicate" in kinds
    # With no comparisons allowed, near duplicates go unfound; exact ones never need any.
    kinds = [g.kind for g in find_groups(records, exists=exists, max_pairs=0)]
    assert "near_duplicate" not in kinds and "duplicate" in kinds
    with pytest.raises(InvalidInput, match="near_threshold"):
        find_groups(records, exists=exists, near_threshold=0)


def test_near_duplicates_join_in_one_group_and_skip_duplicate_members() -> None:
    records = [
        memory("a1", "pattern", "Retry with exponential backoff", "Start at 100 ms, cap at 30 s."),
        memory("a2", "pattern", "Retry with exponential back-off", "Start at 100 ms, cap at 30s."),
        memory("a3", "pattern", "Retry with exponential backoff!", "Start at 100ms, cap at 30 s."),
        memory("b1", "pattern", "Retry with exponential backoff", "Start at 100 ms, cap at 30 s."),
        memory("c1", "bugfix", "Retry with exponential backoff", "Start at 100 ms, cap at 30 s."),
    ]
    groups = find_groups(records, exists=exists)
    assert [(g.kind, g.ids) for g in groups] == [
        ("duplicate", ["a1", "b1"]),
        ("near_duplicate", ["a2", "a3"]),  # other kinds (c1) and duplicate members never join
    ]
    assert groups[1].score == min(groups[1].score, 1.0) and groups[1].score >= 0.88


def test_recommend_heuristics_follow_each_group() -> None:
    records = messy()
    groups = find_groups(records, exists=exists, stale=stale)
    recs = recommend(groups, by_id(records))
    assert [r.action for r in recs] == [g.action for g in groups]
    assert {r.decided_by for r in recs} == {"heuristic"}
    assert recs[0].target == "dup3"
    assert all(r.target is None for r in recs if r.action != "merge")
    assert all(r.reasoning == g.reason for r, g in zip(recs, groups, strict=True))


def test_recommend_with_an_llm_and_each_way_it_can_fail() -> None:
    records = messy()
    for record in records[:9]:
        record["content"] += " " + "x" * 5000
    groups = find_groups(records, exists=exists, stale=stale)[:2]
    seen: list[dict[str, Any]] = []

    def valid(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"action": "merge", "target": request["group"]["ids"][-1], "reasoning": "newest"}

    recs = recommend(groups, by_id(records), llm=valid)
    assert [(r.action, r.target, r.decided_by) for r in recs] == [
        ("merge", "dup8", "llm"),
        ("merge", "near-b", "llm"),
    ]
    assert seen[0]["actions"] == list(ACTIONS)
    assert len(seen[0]["memories"]) == 9
    assert len(seen[0]["memories"][0]["content"]) == 2000  # clipped
    assert set(seen[0]["memories"][0]) == {
        "id",
        "kind",
        "title",
        "content",
        "status",
        "importance",
        "judgements",
    }

    def outside(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "merge", "target": "dec-new", "reasoning": "looks best"}

    def malformed(request: dict[str, Any]) -> Any:
        return ["merge"]

    def unknown(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "shred", "target": None, "reasoning": "x"}

    def raising(request: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("model overloaded")

    for llm, why in [
        (outside, "target 'dec-new' is not in the group"),
        (malformed, "not an object"),
        (unknown, "unknown action 'shred'"),
        (raising, "RuntimeError: model overloaded"),
    ]:
        recs = recommend(groups, by_id(records), llm=llm)
        assert [(r.action, r.target, r.decided_by) for r in recs] == [
            ("merge", "dup3", "heuristic"),
            ("merge", groups[1].keep, "heuristic"),
        ], why
        assert why in recs[0].reasoning


def write_script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return f"{sys.executable} {path}"


def test_llm_command_runs_a_real_process(tmp_path: Path) -> None:
    """A tiny Python script stands in for a remote LLM behind `consolidate.llm_command`."""
    decide = write_script(
        tmp_path,
        "decide.py",
        """
        import json, sys
        request = json.load(sys.stdin)
        ids = request["group"]["ids"]
        print(json.dumps({"action": "archive", "target": None,
                          "reasoning": f"{len(ids)} memories, {len(request['memories'])} shown"}))
        """,
    )
    records = messy()
    groups = find_groups(records, exists=exists, stale=stale)
    recs = recommend(groups[:1], by_id(records), llm=llm_command(decide))
    assert recs[0].to_dict() == {
        "group": groups[0].to_dict(),
        "action": "archive",
        "target": None,
        "reasoning": "9 memories, 9 shown",
        "decided_by": "llm",
    }

    failing = write_script(tmp_path, "fail.py", "import sys\nsys.exit('no API key')\n")
    slow = write_script(tmp_path, "slow.py", "import time\ntime.sleep(30)\n")
    garbage = write_script(tmp_path, "garbage.py", "print('Sure! Here is my answer: merge')\n")
    listing = write_script(tmp_path, "list.py", "print('[1, 2]')\n")
    cases = [
        (failing, "exited with status 1: no API key"),
        (slow, "did not answer within 0.5 s"),
        (garbage, "did not print one JSON object"),
        (listing, "printed JSON list, not an object"),
        (f"{tmp_path}/missing-llm", "could not start"),
    ]
    for command, why in cases:
        ask = llm_command(command, timeout=0.5)
        with pytest.raises(InvalidInput) as info:
            ask({"group": groups[0].to_dict()})
        assert command in info.value.message and why in info.value.message
        recs = recommend(groups[:1], by_id(records), llm=ask)
        assert recs[0].decided_by == "heuristic" and why in recs[0].reasoning
    with pytest.raises(InvalidInput, match="empty"):
        llm_command("   ")


def apply(store: MemoryStore, changes: list[Record]) -> list[Record]:
    if changes:
        store.put(changes)
    return store.read_all()


def test_plan_changes_merge_keeps_every_text_and_applies_once(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / ".engram")
    before = apply(store, messy())
    groups = find_groups(before, exists=exists, stale=stale)
    recs = recommend(groups[:1], by_id(before))
    changes = plan_changes(recs, by_id(before), stamp=STAMP, author="Consolidator")
    new_id = merged_id(DUP_IDS)
    assert re.fullmatch(r"[a-z2-7]{26}", new_id)
    assert [c["id"] for c in changes] == sorted([*DUP_IDS, new_id])
    merged = by_id(changes)[new_id]
    lead = by_id(before)["dup3"]
    assert merged["title"] == lead["title"] and merged["kind"] == "pitfall"
    assert merged["content"].startswith(lead["content"] + "\n\n## Merged from\n\n")
    for original in (r for r in before if r["id"] in DUP_IDS):
        assert original["content"].strip() in merged["content"]
        assert original["title"] in merged["title"] + "\n" + merged["content"]
    assert merged["links"] == [  # each member's other links are kept, links inside dropped
        {"rel": "relates", "to": "principle-small-prs"},
        *({"rel": "supersedes", "to": m} for m in DUP_IDS),
    ]
    assert merged["tags"] == sorted({"async", *(f"seen-{n}" for n in range(9))})
    assert merged["importance"] == 5 and merged["rev"] == 1 and merged["source"] == "consolidate"
    assert merged["author"] == "Consolidator" and merged["created_at"] == STAMP
    assert normalize_fields(merged, max_content_bytes=1_000_000) == merged  # a valid memory
    for member in DUP_IDS:
        old, new = by_id(before)[member], by_id(changes)[member]
        assert new == {**old, "status": "superseded", "rev": 2, "updated_at": STAMP}

    after = apply(store, changes)
    assert len(after) == len(before) + 1
    assert plan_changes(recs, by_id(after), stamp="2026-12-01T00:00:00.000Z", author="x") == []
    # The groups found after the merge no longer list the duplicates.
    assert "duplicate" not in [g.kind for g in find_groups(after, exists=exists)]


def test_plan_changes_for_every_action(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / ".engram")
    before = apply(store, messy())
    recs = recommend(find_groups(before, exists=exists, stale=stale), by_id(before))
    changes = by_id(plan_changes(recs, by_id(before), stamp=STAMP, author="c"))
    old = by_id(before)
    assert changes["dec-old"] == {
        **old["dec-old"],
        "status": "archived",
        "rev": 2,
        "updated_at": STAMP,
    }
    assert changes["pit-deleted"]["status"] == "archived"
    assert changes["fact-old"]["status"] == "archived"
    wrong = changes["fact-wrong"]
    assert is_tombstone(wrong) and wrong["content"] == old["fact-wrong"]["content"]
    assert wrong["rev"] == 2 and wrong["deleted_at"] == STAMP
    assert changes["fact-orphan"]["links"] == [{"rel": "relates", "to": "dec-new"}]
    assert changes["fact-orphan"]["rev"] == 2
    assert "pat-stale" not in changes  # keep: nothing to write
    assert not set(changes) & UNRELATED
    for record in changes.values():
        canonical_line(record)  # writable as a canonical line

    after = apply(store, list(changes.values()))
    assert plan_changes(recs, by_id(after), stamp="2026-12-01T00:00:00.000Z", author="c") == []


def test_orphan_links_dropped_are_only_those_the_reason_names() -> None:
    records = messy()
    orphan = next(g for g in find_groups(records, exists=exists) if g.kind == "orphan")
    keep = Recommendation(orphan, "keep", None, orphan.reason, "heuristic")
    # Given only the plan's own ids (as a service may), the live link to dec-new survives.
    subset = {r["id"]: r for r in records if r["id"] == "fact-orphan"}
    (change,) = plan_changes([keep], subset, stamp=STAMP, author="c")
    assert change["links"] == [{"rel": "relates", "to": "dec-new"}]
    # A target that came back since the plan was made (a sync brought it) is kept.
    back = memory("ghost0123", "fact", "Back again", "Synced from another clone.")
    (change,) = plan_changes([keep], {**subset, "ghost0123": back}, stamp=STAMP, author="c")
    assert [link["to"] for link in change["links"]] == ["dec-new", "ghost0123"]
    # A reason edited not to name the targets drops nothing.
    edited = Group("orphan", ["fact-orphan"], "fact-orphan has odd links; keep it.", "keep")
    quiet = Recommendation(edited, "keep", None, edited.reason, "heuristic")
    assert plan_changes([quiet], subset, stamp=STAMP, author="c") == []


def test_plan_changes_skips_what_was_deleted_since() -> None:
    records = by_id(messy())
    group = Group("duplicate", ["dup0", "dup1"], "two copies", "merge", keep="dup0")
    rec = Recommendation(group, "merge", "dup0", "two copies", "heuristic")
    del records["dup1"]
    assert plan_changes([rec], records, stamp=STAMP, author="c") == []
    archive = Recommendation(
        Group("outdated", ["nope", "gone1"], "old", "archive"), "archive", None, "old"
    )
    assert plan_changes([archive], records, stamp=STAMP, author="c") == []


GROUPS = find_groups(messy(), exists=exists, stale=stale)


@st.composite
def plans(draw: st.DrawFn) -> list[Recommendation]:
    """Draw any valid plan over the messy store's groups: actions, order and repeats at will."""
    recs = []
    for group in draw(st.lists(st.sampled_from(GROUPS), max_size=8)):
        actions = ACTIONS if len(group.ids) > 1 else ACTIONS[1:]
        action = draw(st.sampled_from(actions))
        target = draw(st.sampled_from(group.ids)) if action == "merge" else None
        recs.append(Recommendation(group, action, target, "drawn", "llm"))
    return recs


@settings(max_examples=60, deadline=None)
@given(plans())
def test_any_plan_applies_once_and_loses_no_text(recs: list[Recommendation]) -> None:
    records = by_id(messy())
    changes = plan_changes(recs, records, stamp=STAMP, author="c")
    for change in changes:
        old = records.get(change["id"])
        if old is None:  # a merged memory: every member's text is in it
            assert change["source"] == "consolidate" and change["rev"] == 1
            continue
        assert change["rev"] == old["rev"] + 1 and change["updated_at"] == STAMP
        assert (change.get("title"), change.get("content")) == (old["title"], old["content"])
    assert [c["id"] for c in changes] == sorted({c["id"] for c in changes})
    after = {**records, **by_id(changes)}
    assert plan_changes(recs, after, stamp="2026-12-01T00:00:00.000Z", author="c") == []


def test_plans_round_trip_and_bad_plans_are_refused() -> None:
    records = messy()
    recs = recommend(find_groups(records, exists=exists, stale=stale), by_id(records))
    plan = make_plan(recs, created_at=STAMP)
    assert plan.version == 1 and plan.created_at == STAMP
    text = json.dumps(plan.to_dict())
    assert read_plan(text) == recs
    assert read_plan(json.loads(text)) == recs
    assert {g.kind for g in (r.group for r in recs)} <= set(GROUP_KINDS)

    def broken(path: str, value: Any) -> dict[str, Any]:
        raw = json.loads(text)
        node = raw
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
        return raw

    cases = [
        (broken("version", 2), "plan version must be 1"),
        (broken("recommendations", {}), "'recommendations' must be a list"),
        (broken("recommendations.1.action", "burn"), r"recommendations\[1\]\.action"),
        (broken("recommendations.0.target", "fact-old"), r"recommendations\[0\]\.target"),
        (broken("recommendations.2.target", "dec-old"), r"recommendations\[2\]\.target"),
        (broken("recommendations.3.group.kind", "weird"), r"recommendations\[3\]\.group\.kind"),
        (broken("recommendations.3.group.ids", []), r"recommendations\[3\]\.group\.ids"),
        (broken("recommendations.4.group.ids", ["../x"]), r"recommendations\[4\]\.group\.ids\[0\]"),
        (broken("recommendations.0.group.keep", "zzz"), r"recommendations\[0\]\.group\.keep"),
        (broken("recommendations.0.group.score", 7), r"recommendations\[0\]\.group\.score"),
        (broken("recommendations.0.reasoning", None), r"recommendations\[0\]\.reasoning"),
        (broken("recommendations.0.decided_by", "oracle"), r"recommendations\[0\]\.decided_by"),
        (broken("recommendations.5", "merge"), r"recommendations\[5\] must be an object"),
        ("{not json", "not JSON"),
        ([], "a plan must be an object"),
    ]
    for raw, message in cases:
        with pytest.raises(InvalidInput, match=message):
            read_plan(raw)


def test_without_an_index_every_pair_of_a_block_is_compared() -> None:
    """find_groups without ``neighbours`` (no index) judges every pair of a block; with an
    index, tests/hygiene/test_consolidate_pairing.py."""
    rng = random.Random(11)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(4000)
    ]
    kinds = ["decision", "pitfall", "pattern", "fact"]
    records = [
        memory(
            f"m{n:05d}",
            kinds[n % 4],
            " ".join(rng.choices(words, k=6)),
            " ".join(rng.choices(words, k=rng.randint(20, 60))),
        )
        for n in range(800)
    ]
    planted = []
    for n in range(0, 800, 80):
        twin = dict(records[n], id=f"t{n:05d}")
        twin["content"] = twin["content"][:-10] + " and more"  # an edited copy
        records.append(twin)
        planted.append(sorted([records[n]["id"], twin["id"]]))
    groups = find_groups(records, exists=exists)
    assert [g.ids for g in groups if g.kind == "near_duplicate"] == sorted(planted)
    assert [g for g in groups if g.kind != "near_duplicate"] == []
    # The budget bounds the pairs judged: a few are not enough for all.
    few = find_groups(records, exists=exists, max_pairs=1000)
    assert len([g for g in few if g.kind == "near_duplicate"]) < len(planted)
