"""The trainer's JSON Lines protocol, and the core side that runs a trainer and reads it.

A trainer is a subprocess that prints one JSON object per line, each with a ``type``:
``progress``, ``insight``, ``recommendation``, ``metric``, ``artifact`` and, last, ``complete``.
``parse_event`` reads one line strictly (unknown types, missing, ill-typed or extra fields are
errors naming the line); ``encode_event`` writes one. ``run_trainer`` runs a trainer with a
wall-clock timeout in its own process group and never raises for the trainer's misbehaviour: a
crash, a hang or a garbage line lands in ``TrainOutcome.problems`` and makes ``ok`` false, so
the caller changes nothing.

This module stores nothing and knows nothing of the service or any adapter.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, cast

from engram.errors import InvalidInput
from engram.model import check_json_limits

InsightType = Literal["cluster", "temporal", "lineage"]
RecommendationAction = Literal["merge", "archive", "delete", "keep"]
INSIGHT_TYPES: Final = ("cluster", "temporal", "lineage")
RECOMMENDATION_ACTIONS: Final = ("merge", "archive", "delete", "keep")

_CLIP: Final = 200
_STDERR_TAIL: Final = 8192
_MAX_PROBLEMS: Final = 20


@dataclass(frozen=True)
class Progress:
    """How far the trainer is: a stage name and a percentage (0–100)."""

    stage: str
    percent: float


@dataclass(frozen=True)
class Insight:
    """One insight drawn from ``source_ids``; ``id`` is stable across re-training."""

    id: str
    context: str
    action: str
    result: str
    insight_type: InsightType
    tags: list[str]
    source_ids: list[str]


@dataclass(frozen=True)
class Recommendation:
    """A suggestion for consolidation: do ``action`` to memory ``target_id``."""

    target_id: str
    action: RecommendationAction
    reasoning: str


@dataclass(frozen=True)
class Metric:
    """A named number the trainer measured."""

    name: str
    value: float


@dataclass(frozen=True)
class Artifact:
    """A file the trainer wrote."""

    path: str
    size_bytes: int


@dataclass(frozen=True)
class Complete:
    """The last event of a successful run."""

    insights_generated: int
    duration_secs: float


Event: TypeAlias = Progress | Insight | Recommendation | Metric | Artifact | Complete

_TYPES: Final[dict[str, type[Any]]] = {
    "progress": Progress,
    "insight": Insight,
    "recommendation": Recommendation,
    "metric": Metric,
    "artifact": Artifact,
    "complete": Complete,
}
_NAMES: Final = {cls: name for name, cls in _TYPES.items()}


class ProtocolError(InvalidInput):
    """A trainer line that is not a valid event; ``line`` is 1-based, ``text`` clipped."""

    def __init__(self, message: str, *, line: int, text: str) -> None:
        super().__init__(
            f"trainer output line {line}: {message}: {clip(text)!r}",
            hint="the trainer printed something outside its protocol; nothing was changed",
        )
        self.line = line
        self.text = clip(text)


def clip(text: str, limit: int = _CLIP) -> str:
    """Return text cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _check(obj: Mapping[str, Any], kind: str, lineno: int, text: str) -> None:
    """Check the fields of one event object, raising ProtocolError naming the bad field."""

    def fail(message: str) -> ProtocolError:
        return ProtocolError(message, line=lineno, text=text)

    cls = _TYPES[kind]
    expected = set(cls.__dataclass_fields__)
    extra = sorted(set(obj) - expected - {"type"})
    if extra:
        raise fail(f"{kind} event has unknown field(s) {', '.join(map(repr, extra))}")
    for name in sorted(expected):
        if name not in obj:
            raise fail(f"{kind} event is missing field {name!r}")
    for name in sorted(expected):
        value = obj[name]
        if name in ("percent", "value", "duration_secs"):
            ok = _is_number(value)
            want = "a finite number"
            if ok and name == "percent":
                ok, want = 0 <= value <= 100, "a number from 0 to 100"
            elif ok and name == "duration_secs":
                ok, want = value >= 0, "a number ≥ 0"
        elif name in ("size_bytes", "insights_generated"):
            ok, want = _is_int(value) and value >= 0, "an integer ≥ 0"
        elif name == "tags":
            ok, want = _is_str_list(value), "a list of strings"
        elif name == "source_ids":
            ok, want = _is_str_list(value) and bool(value), "a non-empty list of strings"
        elif name == "insight_type":
            ok, want = value in INSIGHT_TYPES, f"one of {', '.join(INSIGHT_TYPES)}"
        elif name == "action" and kind == "recommendation":
            ok, want = (
                value in RECOMMENDATION_ACTIONS,
                f"one of {', '.join(RECOMMENDATION_ACTIONS)}",
            )
        else:
            ok, want = isinstance(value, str), "a string"
        if not ok:
            raise fail(f"{kind} field {name!r} must be {want}, got {json.dumps(value)[:60]}")


def parse_event(line: str, lineno: int) -> Event:
    """Parse one line of trainer output strictly, raising ProtocolError naming line and field."""
    try:
        check_json_limits(line, what="the line")  # json.loads recurses per level
        obj = json.loads(line, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ProtocolError(f"not JSON ({exc})", line=lineno, text=line) from exc
    if not isinstance(obj, dict):
        raise ProtocolError(
            f"expected a JSON object, got {type(obj).__name__}", line=lineno, text=line
        )
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in _TYPES:
        raise ProtocolError(
            f"field 'type' must be one of {', '.join(_TYPES)}, got {json.dumps(kind)[:60]}",
            line=lineno,
            text=line,
        )
    _check(obj, kind, lineno, line)
    fields = {name: value for name, value in obj.items() if name != "type"}
    for name in ("tags", "source_ids"):
        if name in fields:
            fields[name] = list(fields[name])
    return cast(Event, _TYPES[kind](**fields))


def encode_event(event: Event) -> str:
    """Return one event as a compact JSON line (keys sorted, no newline)."""
    obj: dict[str, Any] = {"type": _NAMES[type(event)]}
    obj.update({name: getattr(event, name) for name in type(event).__dataclass_fields__})
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


# -- running a trainer -----------------------------------------------------------------------


@dataclass
class TrainOutcome:
    """Everything one trainer run produced, and every way it misbehaved."""

    events: list[Event] = field(default_factory=list)
    insights: list[Insight] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Artifact] = field(default_factory=list)
    complete: Complete | None = None
    returncode: int | None = None
    problems: list[str] = field(default_factory=list)
    pid: int | None = None

    @property
    def ok(self) -> bool:
        """Tell whether the run finished cleanly: complete, exit status 0, no problems."""
        return self.complete is not None and self.returncode == 0 and not self.problems

    def _add(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, Insight):
            self.insights.append(event)
        elif isinstance(event, Recommendation):
            self.recommendations.append(event)
        elif isinstance(event, Metric):
            self.metrics[event.name] = float(event.value)
        elif isinstance(event, Artifact):
            self.artifacts.append(event)
        elif isinstance(event, Complete):
            self.complete = event


def default_command(engram_dir: Path) -> list[str]:
    """Return the command that runs engram's own trainer over a store."""
    return [sys.executable, "-m", "engram.trainer", "--store", str(engram_dir)]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the trainer and everything it started (it leads its own process group)."""
    if hasattr(os, "killpg"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _read_lines(stream: Any, out: queue.Queue[bytes | None], limit: int) -> None:
    """Feed stdout lines into ``out`` (None at the end); cut lines longer than ``limit``."""
    try:
        while True:
            line: bytes = stream.readline(limit + 1)
            if not line:
                break
            if len(line) > limit and not line.endswith(b"\n"):
                # Too long: pass on the head marked as cut, and drop the rest of the line.
                rest = line
                while rest and not rest.endswith(b"\n"):
                    rest = stream.readline(limit + 1)
                out.put(line[:limit] + b"\x00CUT")
                continue
            out.put(line)
    except (OSError, ValueError):
        pass  # the pipe closed under us (the trainer was killed): this reader ends
    finally:
        out.put(None)


def _read_tail(stream: Any, tail: bytearray) -> None:
    """Keep the last few kilobytes of stderr: enough to show a traceback's end."""
    try:
        while chunk := stream.read1(65536):
            tail.extend(chunk)
            if len(tail) > _STDERR_TAIL:
                del tail[: len(tail) - _STDERR_TAIL]
    except (OSError, ValueError):
        pass  # the pipe closed under us (the trainer was killed): keep what was read


def _stderr_tail(tail: bytearray) -> str:
    text = bytes(tail).decode("utf-8", "replace").strip()
    lines = text.splitlines()[-6:]
    return clip(" | ".join(line.strip() for line in lines if line.strip()), 600)


def run_trainer(
    command: Sequence[str],
    *,
    timeout: float = 300.0,
    on_event: Callable[[Event], None] | None = None,
    max_line_bytes: int = 1 << 20,
) -> TrainOutcome:
    """Run a trainer, parse its events as they arrive, and report every misbehaviour."""
    outcome = TrainOutcome()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:
        outcome.problems.append(f"the trainer could not be started ({' '.join(command)}): {exc}")
        return outcome
    outcome.pid = proc.pid
    lines: queue.Queue[bytes | None] = queue.Queue()
    tail = bytearray()
    readers = [
        threading.Thread(
            target=_read_lines, args=(proc.stdout, lines, max_line_bytes), daemon=True
        ),
        threading.Thread(target=_read_tail, args=(proc.stderr, tail), daemon=True),
    ]
    for reader in readers:
        reader.start()
    events = _Events(outcome, max_line_bytes, on_event)
    try:
        timed_out = not events.drain(lines, deadline=started + timeout)
        if not timed_out:
            try:
                proc.wait(timeout=max(started + timeout - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        # Always reap the whole group: a hung trainer, or helpers a finished one left behind.
        _kill_group(proc)
        proc.wait()
        for reader in readers:
            reader.join(timeout=2.0)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    events.finish()
    if timed_out:
        outcome.returncode = None
        outcome.problems.append(
            f"the trainer did not finish within {timeout:g} s and was killed after "
            f"{events.lineno} line(s)"
        )
        return outcome
    _report_exit(outcome, proc.returncode, events.lineno, tail)
    return outcome


class _Events:
    """The trainer's stdout read line by line into an outcome, each bad line a problem."""

    def __init__(
        self,
        outcome: TrainOutcome,
        max_line_bytes: int,
        on_event: Callable[[Event], None] | None,
    ) -> None:
        self.outcome = outcome
        self.max_line_bytes = max_line_bytes
        self.on_event = on_event
        self.lineno = 0
        self.problems = 0

    def problem(self, message: str) -> None:
        """Note a bad line (the first ``_MAX_PROBLEMS`` are listed, the rest counted)."""
        self.problems += 1
        if self.problems <= _MAX_PROBLEMS:
            self.outcome.problems.append(message)

    def drain(self, lines: queue.Queue[bytes | None], *, deadline: float) -> bool:
        """Take lines until stdout closes (True) or the deadline passes (False)."""
        while True:
            try:
                raw = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                return False
            if raw is None:
                return True
            self.take(raw)

    def take(self, raw: bytes) -> None:
        """Parse one line into an event and add it, or note what is wrong with it."""
        self.lineno += 1
        lineno = self.lineno
        if raw.endswith(b"\x00CUT"):
            text = raw[:-4].decode("utf-8", "replace")
            self.problem(
                f"line {lineno} is longer than {self.max_line_bytes:,} bytes: {clip(text)!r}"
            )
            return
        try:
            text = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            self.problem(
                f"line {lineno} is not UTF-8 (byte {exc.start}): "
                f"{clip(raw.decode('utf-8', 'replace').rstrip())!r}"
            )
            return
        if not text.strip():
            return  # a blank line carries nothing; tolerated
        try:
            event = parse_event(text, lineno)
        except ProtocolError as exc:
            self.problem(exc.message)
            return
        outcome = self.outcome
        if outcome.complete is not None:
            self.problem(f"line {lineno} comes after the complete event: {clip(text)!r}")
            return
        if isinstance(event, Insight) and any(i.id == event.id for i in outcome.insights):
            self.problem(f"line {lineno} repeats insight id {event.id}: {clip(text)!r}")
            return
        outcome._add(event)
        if self.on_event is not None:
            self.on_event(event)

    def finish(self) -> None:
        """Count the bad lines not listed."""
        if self.problems > _MAX_PROBLEMS:
            self.outcome.problems.append(
                f"and {self.problems - _MAX_PROBLEMS} more bad line(s) not listed"
            )


def _report_exit(outcome: TrainOutcome, returncode: int, lineno: int, tail: bytearray) -> None:
    """Note how a trainer that ended in time ended: its status, a missing or wrong complete."""
    outcome.returncode = returncode
    if returncode != 0:
        how = (
            f"was killed by signal {-returncode}"
            if returncode < 0
            else f"exited with status {returncode}"
        )
        stderr = _stderr_tail(tail)
        outcome.problems.append(
            f"the trainer {how} after {lineno} line(s)"
            + (f"; stderr ends: {stderr}" if stderr else "; it wrote nothing to stderr")
        )
    elif outcome.complete is None:
        outcome.problems.append(
            f"the trainer exited after {lineno} line(s) without a complete event"
        )
    if outcome.complete is not None and outcome.complete.insights_generated != len(
        outcome.insights
    ):
        outcome.problems.append(
            f"the complete event counts {outcome.complete.insights_generated} insight(s) "
            f"but {len(outcome.insights)} arrived"
        )
