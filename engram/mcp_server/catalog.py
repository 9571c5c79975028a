"""The tool catalogue: the native tools and the compatibility rows, and what a server offers.

``tables`` joins the native tools of ``table.py`` with the go-engram and engram-rs rows of
``compat.py`` (built on first use, so importing this module stays cheap); ``select_tools`` and
``resolve_tools`` choose the tools a server offers for a profile, a ``--compat`` and a Go-style
``--tools``. This module imports both, so neither imports the other. It must not import the
mcp SDK nor any other adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

from engram.errors import InvalidInput
from engram.mcp_server.compat import rows
from engram.mcp_server.table import COMPATS, NATIVE, PROFILES, Tool, native_tool
from engram.operations import OPERATIONS


class Tables(NamedTuple):
    """Every tool the server knows: the native ones (also by name) and the compatibility rows."""

    native: tuple[Tool, ...]
    by_name: dict[str, Tool]
    compat: tuple[Tool, ...]


@functools.cache
def tables() -> Tables:
    """Return the tool tables, built on first use (so importing this module stays cheap)."""
    native = tuple(native_tool(OPERATIONS[name]) for name in NATIVE)
    by_name = {tool.name: tool for tool in native}
    return Tables(native, by_name, rows(by_name))


def select_tools(profile: str = "agent", compat: Iterable[str] = ()) -> dict[str, Tool]:
    """Return the tools a server offers for a profile and compatibility sets, by name."""
    if profile not in PROFILES:
        raise InvalidInput(f"unknown tool profile {profile!r}; use one of: {', '.join(PROFILES)}")
    wanted = set(compat)
    unknown = sorted(wanted - set(COMPATS))
    if unknown:
        raise InvalidInput(
            f"unknown --compat {', '.join(unknown)}; use one of: {', '.join(COMPATS)}"
        )
    profiles = {"agent", "admin"} if profile == "all" else {profile}
    table = tables()
    rows = [*table.native, *(tool for tool in table.compat if tool.compat in wanted)]
    return {tool.name: tool for tool in rows if tool.profile in profiles}


def resolve_tools(spec: str, compat: Iterable[str] = ()) -> dict[str, Tool]:
    """Return the tools ``engram mcp --tools SPEC`` offers, the way Go engram reads ``--tools``.

    ``SPEC`` is ``agent``, ``admin`` or ``all``, or a comma list of those and of tool names
    (``agent,admin``; ``mem_save,mem_search``; ``agent,mem_delete``). A profile given here
    offers engram's tools of that profile and go-engram's names of Go's profile of that name
    (Go engram's own setup writes ``engram mcp --tools=agent``, and the agent it sets up
    calls ``mem_save``); ``all`` offers every engram tool and every go-engram name. A tool
    name offers that tool, whatever its profile: engram's or any compatibility name. An empty
    spec is ``all``, as in Go.
    """
    tokens = [token.strip() for token in str(spec).split(",") if token.strip()]
    if not tokens or "all" in tokens:
        return select_tools("all", {*compat, "go-engram"})
    profiles = [token for token in tokens if token in PROFILES]
    wanted = set(compat) | ({"go-engram"} if profiles else set())
    out: dict[str, Tool] = {}
    for profile in profiles:
        out.update(select_tools(profile, wanted))
    table = tables()
    every = {tool.name: tool for tool in (*table.native, *table.compat)}
    unknown = [token for token in tokens if token not in PROFILES and token not in every]
    if unknown:
        raise InvalidInput(
            f"unknown tool or profile in --tools: {', '.join(unknown)}; use agent, admin, all "
            "or tool names (tools/list of `engram mcp --tools all` shows them all)"
        )
    names = {token for token in tokens if token in every}
    chosen = [tool for tool in every.values() if tool.name in names or tool.name in out]
    return {tool.name: tool for tool in chosen}


def tool_names(profile: str = "agent", compat: Iterable[str] = ()) -> list[str]:
    """Return the names ``engram mcp --tools PROFILE --compat …`` registers, in order."""
    return list(select_tools(profile, compat))
