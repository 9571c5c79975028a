"""The full-text backends every index test runs on."""

from __future__ import annotations

from typing import Final

BACKENDS: Final = ("tantivy", "fts5")
