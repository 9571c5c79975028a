"""Memory hygiene over an opened project: consolidation, the trainer's insights.

It wires the pure steps of ``engram.hygiene.consolidate`` to the project's store (preview the
groups, recommend an action per group, apply a plan under the lock), runs the trainer
(``engram.trainer``) and stores its insights as ``insight`` memories derived from their
sources (a ``Training`` says what a run did), and lists and forgets them. Writes go through
``Workspace.write``; the logic of grouping, recommending and planning stays in
``engram.hygiene.consolidate``. It must not import the service or an adapter.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engram import config as config_mod
from engram.errors import InvalidInput
from engram.model import Record, is_tombstone, normalize_fields
from engram.operations import advice
from engram.project.memories import forget, revise

if TYPE_CHECKING:
    from engram.hygiene.consolidate import Applied, Group, Plan
    from engram.project import Project
    from engram.trainer.protocol import Insight, Recommendation, TrainOutcome
    from engram.workspace import Workspace

__all__ = [
    "Training",
    "apply_plan",
    "delete_insight",
    "groups",
    "insight_id",
    "insights",
    "plan",
    "train",
]

Decide = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Training:
    """One trainer run: whether it worked, its problems, metrics and advice, the insights kept."""

    ok: bool
    problems: list[str]
    metrics: dict[str, float]
    recommendations: list[Recommendation]  # for consolidation, not applied
    insights: list[str] = field(default_factory=list)  # ids of the insight memories kept
    written: int | None = None  # memories written; None when the run failed

    def to_dict(self) -> dict[str, Any]:
        """Return the run as JSON-ready data (``written`` only when the run worked)."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "problems": self.problems,
            "metrics": self.metrics,
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
            "insights": self.insights,
        }
        if self.written is not None:
            out["written"] = self.written
        return out


def groups(here: Project) -> list[Group]:
    """Return the candidate groups for consolidation among the project's memories."""
    from engram.hygiene.consolidate import find_groups

    ws = here.ws
    records = ws.index.all_records(include_deleted=True)
    root = here.root.resolve()

    def exists(path: str) -> bool:
        target = (root / path).resolve()
        return target.is_relative_to(root) and target.exists()

    stale = here.stale_many(records)
    return find_groups(
        records,
        exists=functools.cache(exists),  # many memories cite the same files
        stale=lambda record: stale.get(str(record.get("id", "")), []),
        near_threshold=float(ws.config.number("consolidate.near_threshold")),
        neighbours=ws.index,
    )


def plan(
    here: Project,
    *,
    chosen: Sequence[Group | Mapping[str, Any]] | None = None,
    llm: Decide | None = None,
) -> Plan:
    """Return a consolidation plan: a recommendation (merge, archive, delete, keep) per group.

    ``chosen`` are the groups to decide (default: ``groups``), as groups or as their JSON.
    ``llm`` decides each group when given (the MCP client's sampling, say); else the user's
    ``consolidate.llm_command`` (ENGRAM_HOME or the environment: never a committed config,
    whose command is ignored and named under ``warnings``); else the heuristics.
    """
    from engram.hygiene.consolidate import Group, llm_command, make_plan, recommend

    ws = here.ws
    found = (
        [g if isinstance(g, Group) else Group.from_dict(g) for g in chosen]
        if chosen is not None
        else groups(here)
    )
    if llm is None:
        command = str(ws.config.get("consolidate.llm_command") or "").strip()
        if command:
            timeout = float(ws.config.number("consolidate.llm_timeout_seconds"))
            llm = llm_command(command, timeout=timeout)
    records = ws.index.get_many(sorted({rid for g in found for rid in g.ids}))
    out = make_plan(recommend(found, records, llm=llm), created_at=here.now())
    out.warnings = ws.config.warnings("consolidate.")
    return out


def apply_plan(
    here: Project, chosen: Plan | Mapping[str, Any] | None = None, *, dry_run: bool = False
) -> Applied:
    """Apply a consolidation plan (default: a fresh one); nothing is lost, twice is a no-op.

    A merge writes one memory that supersedes the group (their text kept, status superseded);
    archive is a status; delete is a tombstone. ``dry_run`` returns the exact changes without
    writing them.
    """
    from engram.hygiene.consolidate import Applied, plan_changes, read_plan

    ws = here.ws
    fresh = plan(here) if chosen is None else None
    recommendations = fresh.recommendations if fresh is not None else read_plan(chosen)
    author = config_mod.git_user_name(here.root)
    with ws.store.lock():
        # The whole store, tombstones included: dangling links are told apart from live
        # ones, and a merged memory an earlier run wrote is recognised.
        records = {str(r["id"]): r for r in ws.index.all_records(include_deleted=True)}
        changes = plan_changes(recommendations, records, stamp=here.now(), author=author)
        if changes and not dry_run:
            ws.write(changes)
    warnings = fresh.warnings if fresh is not None else []
    return Applied(dry_run, len(recommendations), changes, warnings=warnings)


def train(
    here: Project,
    *,
    timeout: float | None = None,
    on_event: Callable[[Any], None] | None = None,
    command: Sequence[str] | None = None,
) -> Training:
    """Run the trainer; store its insights as ``insight`` memories derived from their sources.

    A trainer that crashes, hangs or prints garbage changes nothing: its problems come back.
    Recommendations are returned for consolidation, not applied.
    """
    from engram.trainer.protocol import default_command, run_trainer

    ws = here.ws
    if timeout is None:
        timeout = float(ws.config.number("trainer.timeout_seconds"))
    argv = list(command) if command is not None else default_command(ws.store.dir)
    outcome = run_trainer(argv, timeout=timeout, on_event=on_event)
    report = Training(outcome.ok, outcome.problems, outcome.metrics, outcome.recommendations)
    if not outcome.ok:
        return report
    with ws.store.lock():
        writes, report.insights = _insight_writes(here, ws, outcome, here.now())
        if writes:
            ws.write(writes, journal=True)
    report.written = len(writes)
    return report


def _insight_writes(
    here: Project, ws: Workspace, outcome: TrainOutcome, stamp: str
) -> tuple[list[Record], list[str]]:
    """Return the insight memories to write and the ids of every insight kept (under the lock)."""
    known = ws.index.get_many([insight_id(i.id) for i in outcome.insights])
    live = set(ws.index.get_many(sorted({s for i in outcome.insights for s in i.source_ids})))
    max_bytes = int(ws.config.number("store.max_content_bytes"))
    writes: list[Record] = []
    kept: list[str] = []
    for insight in outcome.insights:
        sources = [rid for rid in insight.source_ids if rid in live]
        if not sources:
            continue
        rid = insight_id(insight.id)
        fields = normalize_fields(
            _insight_fields(insight, sources, here.name), max_content_bytes=max_bytes
        )
        ws.scrub(fields)
        current = known.get(rid)
        if current is not None:
            if is_tombstone(current):
                continue  # deleted by a person: the trainer does not bring it back
            revised = revise(ws, current, fields, stamp)
            if revised is not current:
                writes.append(revised)
        else:
            writes.append({**fields, "id": rid, "created_at": stamp, "updated_at": stamp, "rev": 1})
        kept.append(rid)
    return writes, kept


def _insight_fields(insight: Insight, sources: Sequence[str], project: str) -> Record:
    """Return the fields of the memory an insight becomes, before normalising."""
    parts = (
        ("Context", insight.context),
        ("Insight", insight.action),
        ("Evidence", insight.result),
    )
    return {
        "kind": "insight",
        "title": insight.action[:200] or insight.context[:200],
        "content": "\n\n".join(f"**{name}:** {text}" for name, text in parts if text),
        "tags": sorted({*insight.tags, insight.insight_type}),
        "links": [{"rel": "derived_from", "to": src} for src in sources],
        "source": "trainer",
        "project": project,
        "scope": "project",
        "importance": 3,
        "status": "active",
        "insight_type": insight.insight_type,
        "insight_id": insight.id,
    }


def insights(here: Project) -> list[Record]:
    """Return the live insight memories, newest first."""
    hits = here.recall("", kinds="insight", scopes="project", limit=10_000)
    records = [hit.record for hit in hits]
    records.sort(key=lambda r: (str(r.get("updated_at", "")), str(r["id"])), reverse=True)
    return records


def delete_insight(here: Project, ref: str) -> Record:
    """Forget an insight memory (a tombstone: a later training does not bring it back)."""
    record = here.locate(ref, changing="delete")[1]
    if record.get("kind") != "insight":
        raise InvalidInput(
            f"memory {record['id']} is a {record.get('kind')}, not an insight",
            hint=f"{advice.cmd('insights')} shows the insights",
        )
    return forget(here, record["id"])


def insight_id(trainer_id: str) -> str:
    """Return the memory id of a trainer insight (stable: re-training updates it)."""
    digest = hashlib.sha256(f"insight:{trainer_id}".encode()).digest()[:16]
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()
