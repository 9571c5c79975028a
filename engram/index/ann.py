"""An approximate nearest-neighbour graph over the rows of the live embeddings (usearch HNSW).

``matrix.nearest`` scans every vector of a store, which at 100k memories costs more than the
whole keyword search. ``Graph`` is an HNSW graph (the ``usearch`` package, the semantic extra)
whose keys are the rows of ``matrix.VectorState``: a search walks it to a few hundred
candidates, whose cosines ``nearest`` then computes exactly from the float32 rows, so the graph
only chooses candidates and never decides a score. The vectors are stored in the graph as
8-bit integers (a unit vector's parts lie in -1..1): a quarter of the memory, and the walk is
faster; the exact re-scoring makes up for the rounding.

The state changes the graph as it changes its rows (``put``, ``drop``, ``move``): one write
costs one insertion, never a rebuild. Under ``EXACT_BELOW`` rows the exact scan is faster than
the walk, and the graph is neither built nor used. Building a graph of ``BACKGROUND_FROM`` rows
or more takes seconds (about half a minute at 100k on two busy cores), so it is built in a
thread of its own (``Building``) from a snapshot of the rows while searches scan every vector,
as a smaller store's do; the changes of the rows meanwhile are noted and replayed onto it when
it is taken. ``vectorcache.py`` saves the graph beside the matrix it describes and maps it back
(``load``); a file that is missing or unreadable is
rebuilt from the rows, which says so in the log.

The interface with the embedding model is only this: a float32 row of dimension ``d`` per
record, unit length (``semantic.Embedder.embed``). Which model makes the rows is not this
module's business, and a graph built for another dimension is refused at ``load``.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

__all__ = ["BACKGROUND_FROM", "EXACT_BELOW", "Building", "Graph", "available", "candidates_wanted"]

log = logging.getLogger("engram.index")

PACKAGE: Final = "usearch"
# Rows under which the exact scan answers as fast as the graph or faster, and finds more of the
# exact neighbours (benchmarks/bench_core.py's corpus at 10k: the scan over the leading
# dimensions about as long as a walk of the graph; at 100k, the walk many times faster).
EXACT_BELOW: Final = 16_384
# The graph's shape: edges per node, and the breadth of the search while inserting and while
# querying (usearch's names). More of any is slower and finds more of the exact neighbours.
CONNECTIVITY: Final = 16
EXPANSION_ADD: Final = 64
EXPANSION_SEARCH: Final = 64
# Threads a build adds rows on (usearch: 0 for every core). Here every core builds a 16k graph
# 1.7x as fast as one; the inserts racing each other left 1 row in 3,000 that no walk reached
# (20,000 clustered synthetic rows), where one thread left none.
BUILD_THREADS: int = 0
# A graph of fewer rows builds in milliseconds, in the thread that needs it; from this many on,
# in the background (``Building``).
BACKGROUND_FROM: Final = 4_096
# Candidates asked of the graph: this many times the pool a recall wants, at least MIN_WALK.
OVERSAMPLE: Final = 8
MIN_WALK: Final = 160


@functools.cache
def available() -> bool:
    """Tell whether the graph library is installed (no import; asked once per process: a
    search asks on every call, and finding the package took tens of microseconds)."""
    try:
        return importlib.util.find_spec(PACKAGE) is not None
    except (ImportError, ValueError):
        return False


def candidates_wanted(pool: int, rows: int) -> int:
    """Return how many candidates to ask of the graph for a pool of ``pool`` rows."""
    return min(rows, max(pool * OVERSAMPLE, MIN_WALK))


def _index_class() -> Any:
    from usearch.index import Index

    return Index


class Graph:
    """An HNSW graph whose keys are the rows of one ``VectorState``."""

    def __init__(self, index: Any, *, mapped: bool = False) -> None:
        self._index = index
        self._mapped = mapped  # a read-only view of a saved file: copied on the first change
        # A server's threads may search while one of them writes: a change and a walk never
        # overlap.
        self._lock = threading.Lock()

    @classmethod
    def build(cls, matrix: Any) -> Graph:
        """Return a graph of every row of ``matrix`` (float32, unit rows), keyed by row."""
        import numpy as np

        rows, dim = matrix.shape
        index = _index_class()(
            ndim=int(dim),
            metric="ip",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        if rows:
            index.add(
                np.arange(rows, dtype=np.uint64),
                np.ascontiguousarray(matrix, dtype=np.float32),
                threads=BUILD_THREADS,
            )
        return cls(index)

    @classmethod
    def load(cls, path: Path, rows: int, dim: int) -> Graph | None:
        """Return the graph saved at ``path`` if it holds exactly rows 0..rows-1 of vectors of
        ``dim``, mapped read-only; None (and a line in the log) when it is unreadable."""
        if not path.exists():
            return None
        try:
            index = _index_class().restore(str(path), view=True)
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning(
                "the nearest-neighbour graph %s is unreadable (%s): rebuilding it", path, exc
            )
            return None
        if index is None or int(index.ndim) != dim or len(index) != rows:
            log.warning(
                "the nearest-neighbour graph %s does not match its %d vectors: rebuilding it",
                path,
                rows,
            )
            return None
        index.expansion_search = EXPANSION_SEARCH  # a saved graph does not keep it
        return cls(index, mapped=True)

    def save(self, path: Path) -> None:
        """Write the graph to ``path`` (the caller replaces the file in one rename)."""
        with self._lock:
            self._index.save(str(path))

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[int]:
        """Return the rows the graph holds, in increasing order."""
        return sorted(int(key) for key in self._index.keys)

    def vector(self, row: int) -> Any:
        """Return the vector the graph holds for ``row`` (float32, as quantized), or None."""
        import numpy as np

        with self._lock:
            if row not in self._index:
                return None
            return np.asarray(self._index.get(row, dtype=np.float32), dtype=np.float32)

    def _own(self) -> Any:
        """Return the graph, copied into memory first if it is a view of a file."""
        if self._mapped:
            self._index = self._index.copy()
            self._mapped = False
        return self._index

    def put(self, row: int, vector: Any) -> None:
        """Set the vector of ``row`` (added, or replaced if the row has one)."""
        with self._lock:
            index = self._own()
            if row in index:
                index.remove(row)
            index.add(row, vector, threads=1)

    def drop(self, row: int) -> None:
        """Remove ``row`` (nothing if it is not there)."""
        with self._lock:
            index = self._own()
            if row in index:
                index.remove(row)

    def move(self, source: int, target: int) -> None:
        """Give the vector of row ``source`` the key ``target`` (which must be free)."""
        with self._lock:
            self._own().rename(source, target)

    def search(self, probe: Any, count: int) -> Any:
        """Return the rows (numpy intp) of up to ``count`` vectors nearest ``probe``, roughly."""
        import numpy as np

        with self._lock:
            if count <= 0 or not len(self._index):
                return np.array([], dtype=np.intp)
            found = self._index.search(probe, count, threads=1)
        return np.asarray(found.keys, dtype=np.intp)


Change = tuple[str, int, int, Any]  # ("put" | "drop" | "move", row, target row, vector)


class Building:
    """A graph being built from a snapshot of the rows in a background thread.

    The rows go on changing meanwhile: ``put``, ``drop`` and ``move`` note each change, and
    ``take`` replays them onto the built graph, in order, so that it then holds the rows as
    they are. Once taken, a change goes straight to the graph (a writer that found no graph
    yet and a search taking it may cross). ``saved``, if given, is called with the graph of
    the snapshot in the building thread, before any change is replayed (to save it as the file
    of those rows). A build that fails says so in the log; searches then keep scanning. The
    thread is not a daemon: a one-shot process (``engram recall``) gives its answer, then
    finishes the build and saves it before it exits, so the next process maps the graph. A
    process that must leave promptly (``engram mcp`` asked to exit) ends with ``os._exit``,
    which abandons a build under way: its graph is saved only if it was finished.
    """

    def __init__(self, matrix: Any, saved: Callable[[Graph], object] | None = None) -> None:
        self._lock = threading.Lock()
        self._changes: list[Change] = []
        self._built: Graph | None = None
        self._taken: Graph | None = None
        self.failed = False
        self._finished = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(matrix, saved), name="engram-graph", daemon=False
        )
        self._thread.start()

    def _run(self, matrix: Any, saved: Callable[[Graph], object] | None) -> None:
        try:
            graph = Graph.build(matrix)
            if saved is not None:
                saved(graph)
        except (OSError, RuntimeError, ValueError, MemoryError) as exc:
            log.warning(
                "building the nearest-neighbour graph failed (%s): searches scan every vector",
                exc,
            )
            self.failed = True
        else:
            self._built = graph
        finally:
            self._finished.set()

    def ready(self) -> bool:
        """Tell whether the build has ended (built or failed)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the build to end; return whether it has."""
        return self._finished.wait(timeout)

    def _note(self, change: Change) -> None:
        with self._lock:
            if self._taken is None:
                self._changes.append(change)
                return
            graph = self._taken
        _replay(graph, change)

    def put(self, row: int, vector: Any) -> None:
        """Note that ``row`` has the vector ``vector`` now."""
        self._note(("put", row, row, vector))

    def drop(self, row: int) -> None:
        """Note that ``row`` was removed."""
        self._note(("drop", row, row, None))

    def move(self, source: int, target: int) -> None:
        """Note that the vector of row ``source`` moved to row ``target``."""
        self._note(("move", source, target, None))

    def take(self) -> Graph | None:
        """Return the built graph with every change since the snapshot replayed onto it;
        None while it is being built, or when the build failed."""
        if not self._finished.is_set():
            return None
        with self._lock:
            if self._taken is None and self._built is not None:
                for change in self._changes:
                    _replay(self._built, change)
                self._changes = []
                self._taken = self._built
            return self._taken


def _replay(graph: Graph, change: Change) -> None:
    what, row, target, vector = change
    if what == "put":
        graph.put(row, vector)
    elif what == "drop":
        graph.drop(row)
    else:
        graph.move(row, target)
