"""Record and clone builders shared by the tests of bad input, bounds, doctor and sync."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dulwich.repo import Repo

from engram.service import Engram

STAMP = "2024-05-01T12:00:00.000Z"


def record(rid: str, title: str, rev: int = 1, **extra: Any) -> dict[str, Any]:
    """A minimal valid memory line; ``rev`` N is stamped on 2024-05-0N."""
    return {
        "id": rid,
        "kind": "note",
        "title": title,
        "content": f"text of {title}",
        "created_at": STAMP,
        "updated_at": f"2024-05-0{rev}T12:00:00.000Z",
        "rev": rev,
        **extra,
    }


def clone(root: Path, name: str, remote: Path) -> Engram:
    """An initialised project in a new git repository whose origin is ``remote``."""
    folder = root / name
    repo = Repo.init(str(folder), mkdir=True)
    config = repo.get_config()
    config.set((b"remote", b"origin"), b"url", str(remote).encode())
    config.write_to_path()
    repo.close()
    engram, _ = Engram.init(folder, "ledger")
    return engram
