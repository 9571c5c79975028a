"""One opened .engram/ folder: its settings, canonical store and derived index, kept in step.

``Workspace`` is what every feature that writes memories works on: the service facade holds one
for the project and one for the personal store (``scope=personal``), and the sync exchange
(``engram.sync.exchange``) merges into one. ``Workspace.write`` is the one write path of
records: the store writes them (scrubbed, under its lock) and the same records are applied to
the index, so the index learns of its own process's writes without reading the file again;
ids are journalled as this clone's changes for the next export.

This module opens, writes and closes; it decides nothing about what to write, and it must not
import the service or an adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engram import config as config_mod
from engram.index.db import Index
from engram.index.ranking import Weights
from engram.model import Record
from engram.store import MemoryStore

if TYPE_CHECKING:
    from engram.store.redact import Scrubber

__all__ = ["Workspace", "make_scrubber"]


@dataclass
class Workspace:
    """One .engram/ folder: its settings, canonical store and derived index."""

    config: config_mod.Config
    store: MemoryStore
    index: Index
    scope: str

    @classmethod
    def open(cls, root: Path, engram_dir: Path, scope: str) -> Workspace:
        """Open the store and index of an existing .engram/ folder."""
        from engram.store.local import refuse_links

        refuse_links(engram_dir)  # before the config cache, locks or index land in state/
        cfg = config_mod.load(root, engram_dir)
        timeout = cfg.number("store.lock_timeout_seconds")
        store = MemoryStore(
            engram_dir, lock_timeout=timeout, scrubber=functools.partial(make_scrubber, cfg)
        )
        search = cfg.get("search")
        index = Index(
            store,
            backend=str(search["backend"]),
            field_weights={str(k): float(v) for k, v in dict(search["field_weights"]).items()},
            weights=Weights.from_settings(search),
            lock_timeout=timeout,
        )
        return cls(config=cfg, store=store, index=index, scope=scope)

    def close(self) -> None:
        """Release the index's files."""
        self.index.close()

    def write(self, records: Sequence[Record], *, journal: bool = True) -> None:
        """Write records to the store and the index; journal them as this clone's changes."""
        known = self.index.meta("file_sig")
        base, signature = self.store.put_onto(records)
        # Spliced onto a file the index had not seen (git replaced it after the refresh): the
        # index takes these records but not the file's signature, so the next refresh reads
        # the file and picks up what git brought.
        self.index.apply(records, signature if base == known else "")
        if journal and records:
            self.journal(str(r["id"]) for r in records)

    def journal(self, ids: Iterable[str]) -> None:
        """Note memories as changed by this clone, for the next export (call under the lock)."""
        from engram.store.journal import ChangeJournal

        ChangeJournal(self.store.state_dir).append(ids)

    def scrub(self, fields: Record) -> int:
        """Redact secrets in every field, in place, with the store's scrubber; return the count.

        The store scrubs every record it writes anyway; scrubbing first gives the count a save
        reports and lets a dedupe key or a merge see the text that will be stored.
        """
        clean, count = self.store.scrubber.record(fields)
        if count:
            fields.clear()
            fields.update(clean)
            if isinstance(fields.get("tags"), list):
                fields["tags"] = sorted({str(tag) for tag in fields["tags"]})
        return count


def make_scrubber(cfg: config_mod.Config) -> Scrubber:
    """Return the scrubber every write of a store goes through, with the user's extra patterns.

    Without any, the process's default one: imports scrub with it too, and share what it knows.
    """
    from engram.store.redact import Scrubber, default_scrubber

    patterns = [str(p) for p in cfg.get("redact.extra_patterns") or []]
    return Scrubber(patterns) if patterns else default_scrubber()
