"""Canonical files under .engram/: the only writer of memories.jsonl and its companions.

``MemoryStore`` owns memories.jsonl (sorted canonical lines, spliced atomic writes under a
cross-process lock); ``init_layout`` lays out a new .engram/ folder; ``redact`` scrubs secrets
before anything reaches disk. Nothing here knows about the index, the service or any adapter.
"""

from __future__ import annotations

from pathlib import Path

from engram.config import write_template
from engram.fileio import read_own
from engram.model import line_id
from engram.store.files import GITIGNORE, missing_ignores
from engram.store.jsonl import MEMORIES, MemoryStore, Problem, Scan

__all__ = ["GITIGNORE", "MEMORIES", "MemoryStore", "Problem", "Scan", "init_layout", "line_id"]


def init_layout(engram_dir: Path, project: str) -> list[Path]:
    """Create .engram/ with config.yaml, an empty memories.jsonl and .gitignore; keep existing."""
    created: list[Path] = []
    engram_dir.mkdir(parents=True, exist_ok=True)
    config_path = engram_dir / "config.yaml"
    if not config_path.exists() and not (engram_dir / "config.json").exists():
        write_template(engram_dir, project)
        created.append(config_path)
    memories = engram_dir / MEMORIES
    if not memories.exists():
        memories.touch()
        created.append(memories)
    ignore = engram_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text(GITIGNORE, encoding="utf-8")
        created.append(ignore)
    else:
        text = read_own(ignore)[0].decode("utf-8")
        missing = missing_ignores(text)
        if missing:
            ignore.write_text(text.rstrip("\n") + "\n" + "\n".join(missing) + "\n", "utf-8")
            created.append(ignore)
    return created
