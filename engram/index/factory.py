"""Open a full-text backend by name: the one place that knows every backend.

``open_backend`` imports the chosen backend only when asked (tantivy is a heavy import), so the
protocol module ``backend.py`` imports no backend and no backend imports this module: there is
no import circle. It must not hold any backend logic itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from engram.errors import ConfigError
from engram.index.backend import SearchIndex

BACKENDS: Final = ("tantivy", "fts5")


def open_backend(
    name: str, folder: Path, field_weights: Mapping[str, float] | None = None
) -> SearchIndex:
    """Open (creating if missing) the named full-text backend inside ``folder``."""
    if name == "tantivy":
        from engram.index.tantivy import TantivyIndex

        return TantivyIndex(folder / "tantivy", field_weights)
    if name == "fts5":
        from engram.index.fts import FtsIndex

        return FtsIndex(folder / "fts.db", field_weights)
    raise ConfigError(
        f"unknown search backend {name!r}; choose one of: {', '.join(BACKENDS)}",
        hint="set search.backend to tantivy or fts5 in .engram/config.yaml",
    )
