"""consolidate/ is memory hygiene's pure steps: find groups to tidy, recommend, plan the writes.

Three steps that ``engram.hygiene`` wires as preview → analysis → apply (issue 7):

- ``find_groups`` (``groups``) reads live records and returns candidate ``Group``\\ s: exact and
  near duplicates, superseded memories still active, pitfalls about deleted files, dangling
  links, memories whose anchored files changed a lot, and memories judged outdated or wrong.
- ``recommend`` (``decide``) turns each group into a ``Recommendation``: the group's proposed
  action by deterministic heuristics, or the decision of an LLM callable (``llm_command`` adapts
  a configured command) with a fallback to the heuristic whenever its answer is unusable.
- ``plan_changes`` (``plans``) returns the full new versions of the records to write. Nothing is
  lost: a merge writes one new memory that ``supersedes`` the others (their text untouched,
  status superseded), archive is a status, delete is a soft tombstone that keeps the text.
  Applying the same plan twice changes nothing.

``shapes`` holds ``Group`` and ``Recommendation`` and the record readers the steps share;
``plans`` holds ``Plan`` (the recommendations, as a person reviews them) and ``Applied`` (what
applying one changed). This package does no store I/O and never writes files:
``engram.hygiene`` reads the records, calls these functions and writes what ``plan_changes``
returns through the store. It runs the one configured LLM command as a subprocess (no shell)
and nothing else. This ``__init__`` only re-exports.
"""

from __future__ import annotations

from engram.hygiene.consolidate.decide import (
    LLM_CONTENT_CHARS,
    LLM_OUTPUT_BYTES,
    llm_command,
    recommend,
)
from engram.hygiene.consolidate.groups import (
    FILE_BOUND_KINDS,
    NO_DEDUPE_KINDS,
    STALE_MIN_COMMITS,
    find_groups,
)
from engram.hygiene.consolidate.plans import (
    PLAN_VERSION,
    Applied,
    Plan,
    make_plan,
    merged_id,
    plan_changes,
    read_plan,
)
from engram.hygiene.consolidate.shapes import (
    ACTIONS,
    CURRENT_STATUSES,
    DECIDERS,
    GROUP_KINDS,
    Group,
    Recommendation,
    best_of,
)

__all__ = [
    "ACTIONS",
    "CURRENT_STATUSES",
    "DECIDERS",
    "FILE_BOUND_KINDS",
    "GROUP_KINDS",
    "LLM_CONTENT_CHARS",
    "LLM_OUTPUT_BYTES",
    "NO_DEDUPE_KINDS",
    "PLAN_VERSION",
    "STALE_MIN_COMMITS",
    "Applied",
    "Group",
    "Plan",
    "Recommendation",
    "best_of",
    "find_groups",
    "llm_command",
    "make_plan",
    "merged_id",
    "plan_changes",
    "read_plan",
    "recommend",
]
