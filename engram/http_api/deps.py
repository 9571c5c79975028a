"""What every router takes: the facade (one call at a time, in a worker thread), path parameters.

The facade is synchronous: every call runs in a worker thread under one lock, so the store and
its index see one call at a time however many requests are in flight, and the advice in answers
names operations and their fields (``engram.operations.advice``). ``saved`` and
``next_offset`` shape the two results several routers return alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

from fastapi import Depends, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from engram.http_api.models import SaveOut
from engram.operations import advice

if TYPE_CHECKING:
    from engram.service import Engram, SaveResult

T = TypeVar("T")

ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"  # as engram.model checks ids
CREATED: Final[dict[int | str, dict[str, Any]]] = {
    200: {"model": SaveOut, "description": "An existing memory was updated"}
}


class Facade:
    """The one opened Engram the routes call, and the lock that makes them take turns."""

    def __init__(self, engram: Engram, version: str) -> None:
        self.engram = engram
        self.version = version
        self._lock = threading.Lock()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a facade call in a worker thread, one at a time."""

        def run() -> T:
            # Advice in answers names operations and their fields, not CLI command lines.
            with self._lock, advice.using(advice.OPERATION_NAMES):
                return fn(*args, **kwargs)

        return await run_in_threadpool(run)


def _facade(request: Request) -> Facade:
    facade: Facade = request.app.state.facade
    return facade


Api = Annotated[Facade, Depends(_facade)]
Id = Annotated[
    str,
    Path(
        description="a memory id or a unique prefix of one",
        min_length=1,
        max_length=128,
        pattern=ID_PATTERN,
    ),
]
SessionPath = Annotated[str, Path(description="a session's id", min_length=1, max_length=200)]


def saved(result: SaveResult, response: Response) -> dict[str, Any]:
    """Return a save's result: 201 with its location when created, else 200."""
    out = result.to_dict()
    if result.action != "created":
        response.status_code = 200
    else:
        response.headers["location"] = f"/memories/{out['id']}"
    return out


def next_offset(hits: Sequence[Any], limit: int, offset: int) -> int | None:
    """Return the offset of the next page, or None when this page is not full."""
    # A full page may be the last one: the next is then empty. Asking the index for one more
    # than the page would tell, but its top-k ranking depends on k, and a page must hold what
    # `engram recall --limit` shows.
    return offset + limit if limit and len(hits) >= limit else None
