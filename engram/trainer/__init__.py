"""The trainer: a subprocess that reads the store and prints insights as JSON Lines.

``protocol`` owns the event types and ``run_trainer`` (the core side: run, parse, time out);
``insights`` owns the analysis (clusters, recurring problems, supersede chains); ``__main__``
is the subprocess entry point (``python -m engram.trainer --store PATH``). The trainer only
reads memories.jsonl; storing insights is the service's job. Nothing here imports the service
or an adapter.
"""

from __future__ import annotations

from engram.trainer.protocol import (
    Artifact,
    Complete,
    Event,
    Insight,
    Metric,
    Progress,
    ProtocolError,
    Recommendation,
    TrainOutcome,
    default_command,
    encode_event,
    parse_event,
    run_trainer,
)

__all__ = [
    "Artifact",
    "Complete",
    "Event",
    "Insight",
    "Metric",
    "Progress",
    "ProtocolError",
    "Recommendation",
    "TrainOutcome",
    "default_command",
    "encode_event",
    "parse_event",
    "run_trainer",
]
