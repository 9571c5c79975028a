"""Deciding each consolidation group: the heuristic's action, or an LLM's when it is usable.

``recommend`` asks the ``llm`` callable (the MCP client's sampling, or ``llm_command``: the
user's configured command, run as a subprocess without a shell, JSON on stdin, one JSON object
out) about each group and checks its answer against the group; any failure falls back to the
group's proposed action, with the reason noted. Nothing else runs; nothing is written.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from engram.errors import InvalidInput
from engram.hygiene.consolidate.shapes import (
    ACTIONS,
    Group,
    Recommendation,
    importance_of,
    status_of,
)
from engram.model import loads

__all__ = ["LLM_CONTENT_CHARS", "LLM_OUTPUT_BYTES", "llm_command", "recommend"]

LLM_CONTENT_CHARS: Final = 2000
LLM_OUTPUT_BYTES: Final = 1_000_000


def _heuristic(group: Group, note: str = "") -> Recommendation:
    reasoning = group.reason if not note else f"{group.reason} ({note})"
    target = group.keep if group.action == "merge" else None
    if group.action == "merge" and target is None:
        target = group.ids[0]
    return Recommendation(
        group=group,
        action=group.action,
        target=target,
        reasoning=reasoning,
        decided_by="heuristic",
    )


def _llm_request(group: Group, records: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    memories = []
    for memory_id in group.ids:
        record = records.get(memory_id)
        if record is None:
            continue
        content = str(record.get("content") or "")
        memories.append(
            {
                "id": memory_id,
                "kind": record.get("kind"),
                "title": record.get("title"),
                "content": content[:LLM_CONTENT_CHARS],
                "status": status_of(record),
                "importance": importance_of(record),
                "judgements": list(record.get("judgements") or []),
            }
        )
    return {"group": group.to_dict(), "memories": memories, "actions": list(ACTIONS)}


def _llm_decision(group: Group, answer: Any) -> Recommendation:
    """Check an LLM answer against the group; raise InvalidInput saying what is wrong."""
    if not isinstance(answer, Mapping):
        raise InvalidInput(f"the answer is not an object but {type(answer).__name__}")
    action = answer.get("action")
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}")
    target = answer.get("target")
    if target is not None and target not in group.ids:
        raise InvalidInput(f"target {target!r} is not in the group")
    if action == "merge":
        if len(group.ids) < 2:
            raise InvalidInput("merge needs two or more memories")
        target = target or group.keep or group.ids[0]
    else:
        target = None
    reasoning = answer.get("reasoning")
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise InvalidInput("reasoning is missing")
    return Recommendation(
        group=group, action=action, target=target, reasoning=reasoning.strip(), decided_by="llm"
    )


def recommend(
    groups: Sequence[Group],
    records: Mapping[str, Mapping[str, Any]],
    *,
    llm: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[Recommendation]:
    """Decide each group: the LLM's answer when usable, else the group's proposed action."""
    out: list[Recommendation] = []
    for group in groups:
        if llm is None:
            out.append(_heuristic(group))
            continue
        try:
            out.append(_llm_decision(group, llm(_llm_request(group, records))))
        except Exception as exc:  # any failure of the LLM falls back; never crash consolidation
            message = exc.message if isinstance(exc, InvalidInput) else f"{type(exc).__name__}"
            detail = message if isinstance(exc, InvalidInput) else f"{message}: {exc}"
            out.append(_heuristic(group, f"heuristic: the LLM answer was unusable: {detail}"))
    return out


def llm_command(
    command: str, *, timeout: float = 60.0
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Return a callable that asks ``command`` (JSON request on stdin, one JSON object out)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidInput(f"consolidate.llm_command {command!r} does not parse: {exc}") from exc
    if not argv:
        raise InvalidInput("consolidate.llm_command is empty")

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        hint = (
            "fix consolidate.llm_command in $ENGRAM_HOME/config.yaml or "
            "$ENGRAM_CONSOLIDATE_LLM_COMMAND; heuristics are used meanwhile"
        )
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(request, ensure_ascii=False).encode("utf-8"),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InvalidInput(
                f"LLM command {command!r} did not answer within {timeout:g} s", hint=hint
            ) from exc
        except OSError as exc:
            raise InvalidInput(
                f"LLM command {command!r} could not start: {exc.strerror or exc}", hint=hint
            ) from exc
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace").strip()[-300:]
            raise InvalidInput(
                f"LLM command {command!r} exited with status {done.returncode}"
                + (f": {tail}" if tail else ""),
                hint=hint,
            )
        if len(done.stdout) > LLM_OUTPUT_BYTES:
            raise InvalidInput(f"LLM command {command!r} printed more than 1 MB", hint=hint)
        text = done.stdout.decode("utf-8", "replace").strip()
        try:
            answer = loads(text, what=f"LLM command {command!r}")
        except ValueError as exc:
            raise InvalidInput(
                f"LLM command {command!r} did not print one JSON object: {exc}; "
                f"it printed {text[:120]!r}",
                hint=hint,
            ) from exc
        if not isinstance(answer, dict):
            raise InvalidInput(
                f"LLM command {command!r} printed JSON {type(answer).__name__}, not an object",
                hint=hint,
            )
        return answer

    return ask
