"""A memory's ids and times: fresh ids, the clock every change is stamped with, RFC 3339.

``now`` is the one clock (``Project.now`` reads it through ``engram.model``); ``change_time`` is
the hybrid logical clock the merge function relies on: a change is stamped after every version
it saw, whatever the machine's clock says. Imports nothing from engram but ``errors``.
"""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta

from engram.errors import InvalidInput


def new_id() -> str:
    """Return a fresh id: 128 random bits in lowercase base32 (26 characters)."""
    return base64.b32encode(os.urandom(16)).decode("ascii").rstrip("=").lower()


def now() -> str:
    """Return the current UTC time as RFC 3339 with milliseconds (``…T…Z``)."""
    return format_time(datetime.now(UTC))


def change_time(*seen: object, stamp: str | None = None) -> str:
    """Return the time to stamp on a change made after seeing ``seen``: a hybrid logical clock.

    ``stamp`` (default: now), unless a time seen is not earlier than it: then 1 ms after the
    latest time seen. A change made after seeing another is therefore always later than it, also
    on a machine whose clock is behind, and the merge function (which orders changes by this
    time) never lets it lose to what it replaced. Seen values that are not times are ignored.
    """
    current = stamp if stamp is not None else now()
    latest: datetime | None = None
    for value in seen:
        if isinstance(value, str) and value:
            try:
                moment = parse_time(value)
            except InvalidInput:
                continue
            latest = moment if latest is None or moment > latest else latest
    if latest is None:
        return current
    try:
        step = latest + timedelta(milliseconds=1)
    except OverflowError:
        return current
    try:
        if parse_time(current) >= step:
            return current
    except InvalidInput:
        pass  # a ``stamp`` that is not a time: the step after what was seen stands
    return format_time(step)


def format_time(moment: datetime) -> str:
    """Render an aware datetime as the RFC 3339 UTC string engram stores."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_time(value: str) -> datetime:
    """Parse an RFC 3339 (or ``YYYY-MM-DD HH:MM:SS`` UTC) string into an aware datetime."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"not an RFC 3339 time: {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
