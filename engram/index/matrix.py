"""The live embeddings of one index as one matrix, changed in place by writes, and found by cosine.

``VectorState`` holds one unit row per live record (``matrix``), the leading ``HEAD_DIMS`` of
each re-normalised and transposed (``head``, the cheap first scan of ``nearest``) and, made on
first use, integer codes of the filter columns. A write changes it in place (``put``,
``remove``): rows live in buffers with spare room, so adding one costs one row, not a copy of
the matrix, and a removal moves the last row into the hole. A state memory-mapped from the
saved cache (``vectorcache.py``) is copied into such buffers on its first change only. From
``ann.EXACT_BELOW`` rows on, a nearest-neighbour graph of the rows (``ann.Graph``) follows
every change too, and ``nearest`` walks it instead of scanning every row; a big one is built in
the background (``ann.Building``), and until it is there ``nearest`` scans, as under the
threshold.
``nearest`` finds the rows nearest one vector; ``nearest_among`` the nearest others of each
of a set of rows (consolidation's near-duplicate candidates).

It knows nothing of SQLite, files or records: ``vectors.py`` decides what the rows are.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from engram.index import ann
from engram.index.ann import Building, Graph

__all__ = [
    "COLUMNS",
    "HEAD_DIMS",
    "HEAD_MARGIN",
    "HEAD_POOL",
    "NEAREST_SLICE",
    "VectorState",
    "head_of",
    "nearest",
    "nearest_among",
    "scan_candidates",
]

# Semantic candidates are found on the leading dimensions of the vectors (see ``nearest``).
HEAD_DIMS: Final = 128
HEAD_MARGIN: Final = 0.1
HEAD_POOL: Final = 8
COLUMNS: Final = ("kind", "status", "scope", "project")
NEAREST_SLICE: Final = 512  # rows compared at once by nearest_among
DENSE_SHARE: Final = 8  # ... which sorts every cosine over the floor unless there are more per row
FOUND_KEPT: Final = 512  # probes whose nearest rows a state keeps (``VectorState.found``)
_SPARE: Final = 64  # rows of room added on top of a quarter more, when the buffers fill up


def head_of(matrix: Any) -> Any:
    """Return the leading dimensions of unit rows, re-normalised and transposed (dims, rows).

    The model is trained so that leading dimensions carry most of the meaning: a scan over
    them finds the candidates, whose exact cosines are then computed on all dimensions.
    """
    import numpy as np

    head = matrix[:, :HEAD_DIMS]
    norms = np.linalg.norm(head, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray((head / norms).T)


class VectorState:
    """The live records' embeddings: one row each, with codes of the filter columns."""

    def __init__(self, ids: list[str], matrix: Any, head: Any, graph: Graph | None = None) -> None:
        self.ids = ids
        self.rows = {rid: n for n, rid in enumerate(ids)}
        self._matrix = matrix  # numpy float32 (capacity, dim); rows past len(ids) are free
        self._head = head  # numpy float32 (HEAD_DIMS, capacity)
        self._owned = False  # the buffers are this state's own (not a read-only map)
        # The nearest-neighbour graph of the rows (``ann.py``), keyed by row: made when a
        # search first needs it (``graph_for_search``), then changed with every row; a big
        # one is built in the background (``_building``) and taken once it is there.
        self.graph = graph
        self._building: Building | None = None
        # Filter columns, made on first use: name -> (value -> code, int32 code per row).
        self.columns: dict[str, tuple[dict[str, int], Any]] = {}
        # What ``nearest`` found for a probe with no filter, until the rows or the way they are
        # searched change: a warm process is asked the same queries again (a hook's, an
        # agent's), and the scan of every row is most of a hybrid recall under 16k memories.
        self._found: dict[tuple[bytes, float, int], tuple[Any, Any]] = {}
        # Counts the changes of the rows, so that what a search found while a write changed
        # them (a server's threads) is not kept (``keep_found``).
        self.version = 0
        self._found_lock = threading.Lock()

    @property
    def matrix(self) -> Any:
        """The rows in use: numpy float32 (len(ids), dim), unit length."""
        return self._matrix[: len(self.ids)]

    @property
    def head(self) -> Any:
        """The leading dimensions of the rows in use: numpy float32 (HEAD_DIMS, len(ids))."""
        return self._head[:, : len(self.ids)]

    @property
    def dim(self) -> int:
        """The length of one vector."""
        return int(self._matrix.shape[1])

    def _room(self, extra: int) -> None:
        """Make the buffers this state's own, with room for ``extra`` more rows."""
        import numpy as np

        used = len(self.ids)
        if self._owned and used + extra <= self._matrix.shape[0]:
            return
        capacity = max(used + extra, used + used // 4 + _SPARE)
        matrix = np.empty((capacity, self.dim), dtype=np.float32)
        matrix[:used] = self._matrix[:used]
        head = np.empty((self._head.shape[0], capacity), dtype=np.float32)
        head[:, :used] = self._head[:, :used]
        self._matrix, self._head, self._owned = matrix, head, True

    def put(self, rows: Sequence[tuple[str, Any, Mapping[str, str]]]) -> None:
        """Add or replace rows: (id, unit vector, the record's filter column values)."""
        if not rows:
            return
        import numpy as np

        self._changed()
        self._room(sum(1 for rid, _, _ in rows if rid not in self.rows))
        vectors = np.asarray([vector for _, vector, _ in rows], dtype=np.float32)
        heads = head_of(vectors)
        for n, (rid, _, values) in enumerate(rows):
            at = self.rows.get(rid)
            if at is None:
                at = len(self.ids)
                self.rows[rid] = at
                self.ids.append(rid)
            self._matrix[at] = vectors[n]
            self._head[:, at] = heads[:, n]
            self._set_codes(at, values)
            if self.graph is not None:
                self.graph.put(at, vectors[n])
            elif self._building is not None:
                self._building.put(at, vectors[n])

    def relabel(self, rows: Sequence[tuple[str, Mapping[str, str]]]) -> None:
        """Note new filter column values of rows whose vector stays (a status change)."""
        for rid, values in rows:
            at = self.rows.get(rid)
            if at is not None:
                self._set_codes(at, values)

    def _set_codes(self, at: int, values: Mapping[str, str]) -> None:
        import numpy as np

        for name, (codes, column) in list(self.columns.items()):
            code = codes.setdefault(str(values.get(name, "")), len(codes))
            if at >= len(column):
                column = np.concatenate([column, np.zeros(at + 1 - len(column), np.int32)])
            column[at] = code
            self.columns[name] = (codes, column)

    def remove(self, ids: Sequence[str]) -> None:
        """Drop the rows of these ids (the last row moves into each hole)."""
        for rid in ids:
            at = self.rows.pop(rid, None)
            if at is None:
                continue
            self._changed()
            self._room(0)
            last = len(self.ids) - 1
            follower = self.graph if self.graph is not None else self._building
            if follower is not None:
                follower.drop(at)
                if at != last:
                    follower.move(last, at)
            if at != last:
                moved = self.ids[last]
                self.ids[at] = moved
                self.rows[moved] = at
                self._matrix[at] = self._matrix[last]
                self._head[:, at] = self._head[:, last]
                for _, column in self.columns.values():
                    column[at] = column[last]
            self.ids.pop()
            for name, (codes, column) in list(self.columns.items()):
                self.columns[name] = (codes, column[:last])

    def graph_for_search(self, saved: Callable[[Graph], object] | None = None) -> Graph | None:
        """Return the nearest-neighbour graph when a search should walk it (``EXACT_BELOW``
        rows or more, and the library installed), or None: the search scans.

        The first call builds it from the rows: under ``ann.BACKGROUND_FROM`` rows here and
        now; from there on in the background (``ann.Building``), and None is returned until
        it is built. ``saved``, if given, is called with the graph of the rows as they are at
        this call (to save it with them), in the building thread for a background build.
        """
        if len(self.ids) < ann.EXACT_BELOW or not ann.available():
            return None
        if self.graph is None:
            if self._building is None:
                if len(self.ids) < ann.BACKGROUND_FROM:
                    self.graph = Graph.build(self.matrix)
                    if saved is not None:
                        saved(self.graph)
                    return self.graph
                # A read-only map never changes under the thread (a change copies it first).
                rows = self.matrix if not self._owned else self.matrix.copy()
                self._building = Building(rows, saved)
            self._take()
        return self.graph

    def _take(self) -> None:
        building = self._building
        if building is None or not building.ready():
            return
        self.graph = building.take()
        if self.graph is not None:
            self._building = None
            self._changed()  # found by the scan: the graph may find others
        # (a failed build stays: this state does not try again, and searches go on scanning)

    def graph_built(self, timeout: float | None = None) -> Graph | None:
        """Wait up to ``timeout`` seconds for a graph being built in the background; return
        the graph (None: there is none, it failed, or it is still being built)."""
        if self.graph is None and self._building is not None:
            self._building.wait(timeout)
            self._take()
        return self.graph

    def found(self, key: tuple[bytes, float, int]) -> tuple[Any, Any] | None:
        """Return what ``nearest`` found for ``key`` (probe bytes, floor, pool) with the rows
        as they are, or None."""
        return self._found.get(key)

    def keep_found(
        self, key: tuple[bytes, float, int], found: tuple[Any, Any], version: int
    ) -> None:
        """Keep what ``nearest`` found for ``key`` (read-only arrays) until the rows change,
        if they are still as they were at ``version`` (when it began looking)."""
        for array in found:
            array.setflags(write=False)
        with self._found_lock:
            if version != self.version:
                return
            if len(self._found) >= FOUND_KEPT:
                self._found.clear()
            self._found[key] = found

    def _changed(self) -> None:
        with self._found_lock:
            self.version += 1
            self._found.clear()

    def column(self, name: str, values: Mapping[str, str]) -> tuple[dict[str, int], Any]:
        """Return (value -> code, int32 code per row) of a filter column, made once from
        ``values`` (id -> value of the live records)."""
        if name not in self.columns:
            import numpy as np

            codes: dict[str, int] = {}
            column = np.fromiter(
                (codes.setdefault(str(values.get(rid, "")), len(codes)) for rid in self.ids),
                dtype=np.int32,
                count=len(self.ids),
            )
            self.columns[name] = (codes, column)
        return self.columns[name]


def nearest(probe: Any, state: VectorState, mask: Any, floor: float, pool: int) -> tuple[Any, Any]:
    """Return (rows, exact cosines) of up to ``pool`` vectors nearest ``probe``, over ``floor``.

    ``mask`` (booleans per row, or None) keeps only the rows the filters allow. A store of
    ``ann.EXACT_BELOW`` rows or more walks the nearest-neighbour graph to a few hundred
    candidates (``graph_candidates``); a smaller one, or a filter the graph's candidates do
    not fill the pool with, scans the leading dimensions of every row (``scan_candidates``).
    Either way the candidates' cosines are computed exactly on every dimension. Without a
    filter, what was found is kept by the state until its rows (or the way it searches them)
    change, and the same probe is answered from there (read-only arrays).
    """
    import numpy as np

    probe = np.asarray(probe, dtype=np.float32)
    if not state.ids or not probe.any():
        return np.array([], dtype=np.intp), np.array([], dtype=np.float32)
    key = None
    if mask is None:
        key = (probe.tobytes(), float(floor), int(pool))
        known = state.found(key)
        if known is not None:
            return known
    version = state.version
    found = _nearest(probe, state, mask, floor, pool)
    if key is not None:
        state.keep_found(key, found, version)
    return found


def _nearest(probe: Any, state: VectorState, mask: Any, floor: float, pool: int) -> tuple[Any, Any]:
    rows = graph_candidates(probe, state, mask, pool)
    if rows is not None:
        found = _best(probe, state, rows, floor, pool)
        if mask is None or len(found[0]) >= pool:
            return found
    return _best(probe, state, scan_candidates(probe, state, mask, floor, pool), floor, pool)


def graph_candidates(probe: Any, state: VectorState, mask: Any, pool: int) -> Any:
    """Return candidate rows from the graph, or None when the store is searched by a scan.

    With a filter, the graph is asked for as many more candidates as the filter leaves out,
    and a filter that leaves fewer than ``EXACT_BELOW`` rows has them all as candidates.
    """
    import numpy as np

    graph = state.graph_for_search()
    if graph is None:
        return None
    total = len(state.ids)
    wanted = ann.candidates_wanted(pool, total)
    if mask is None:
        return graph.search(probe, wanted)
    allowed = int(np.count_nonzero(mask))
    if allowed < ann.EXACT_BELOW:
        return np.flatnonzero(mask)
    rows = graph.search(probe, min(total, wanted * -(-total // allowed)))
    return rows[mask[rows]]


def scan_candidates(probe: Any, state: VectorState, mask: Any, floor: float, pool: int) -> Any:
    """Return candidate rows from a scan of every row's leading dimensions.

    ``HEAD_MARGIN`` of slack under the floor (on the benchmark set no pair over the floor lost
    more than 0.07 there), and at most ``HEAD_POOL`` times the pool, best first.
    """
    import numpy as np

    head = probe[:HEAD_DIMS]
    norm = float(np.linalg.norm(head))
    if norm == 0:
        return np.array([], dtype=np.intp)
    rough = (head / norm) @ state.head
    if mask is not None:
        rough = np.where(mask, rough, -np.inf)
    rows = np.flatnonzero(rough >= floor - HEAD_MARGIN)
    if len(rows) > pool * HEAD_POOL:
        rows = rows[np.argpartition(-rough[rows], pool * HEAD_POOL - 1)[: pool * HEAD_POOL]]
    return rows


def _best(probe: Any, state: VectorState, rows: Any, floor: float, pool: int) -> tuple[Any, Any]:
    """Return (rows, exact cosines) of the best ``pool`` of ``rows`` at or over ``floor``."""
    import numpy as np

    rows = np.asarray(rows, dtype=np.intp)
    exact = state.matrix[rows] @ probe
    keep = exact >= floor
    rows, exact = rows[keep], exact[keep]
    if len(rows) > pool:
        best = np.argpartition(-exact, pool - 1)[:pool]
        rows, exact = rows[best], exact[best]
    return rows, exact


def nearest_among(
    state: VectorState, rows: Sequence[int], limit: int, floor: float
) -> list[list[tuple[int, float]]]:
    """Return, for each of ``rows``, up to ``limit`` (row, cosine >= floor) of the other rows
    among ``rows`` nearest it, nearest first (ties by row).

    Exact cosines, ``NEAREST_SLICE`` rows at a time against all of them, so that the product
    stays small however many rows are asked about. Only the cosines over ``floor`` are sorted:
    with a floor as high as near duplicates have, they are few.
    """
    import numpy as np

    out: list[list[tuple[int, float]]] = [[] for _ in rows]
    if limit <= 0 or len(rows) < 2:
        return out
    picked = np.asarray(rows, dtype=np.intp)
    vectors = state.matrix[picked]
    for start in range(0, len(rows), NEAREST_SLICE):
        cosines = vectors[start : start + NEAREST_SLICE] @ vectors.T
        span = np.arange(cosines.shape[0])
        cosines[span, span + start] = -np.inf  # a row is not its own neighbour
        over = cosines >= floor
        if np.count_nonzero(over) > DENSE_SHARE * limit * over.shape[0]:
            # Many pairs over the floor (a block of look-alikes): only each row's best (and
            # whatever ties with the last of them) are sorted.
            keep = min(limit, len(rows) - 1)
            kth = np.partition(cosines, -keep, axis=1)[:, -keep]
            over &= cosines >= kth[:, None]
        near, other = np.nonzero(over)
        found = cosines[near, other]
        order = np.lexsort((other, -found, near))  # by row, nearest first, ties by row
        near, other, found = near[order], other[order], found[order]
        best_rows = np.arange(len(near)) - np.searchsorted(near, near) < limit
        for at, neighbour, cosine in zip(
            (near[best_rows] + start).tolist(),
            picked[other[best_rows]].tolist(),
            found[best_rows].tolist(),
            strict=True,
        ):
            out[at].append((neighbour, cosine))
    return out
