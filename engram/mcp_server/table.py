"""The tool table: the native tools of each profile, derived from the operations' declarations.

A ``Tool`` is one name the server offers: a native tool (one per operation in
``engram.operations.OPERATIONS`` an agent may call, with its input schema derived from the
declaration), or a compatibility row of go-engram or engram-rs mapped onto a native handler
(``compat.py``). ``Call`` is one tool call in progress: its tool and the answer's budget.

Building the table is deferred to first use (``tables``), so importing this module stays cheap.
It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from engram.errors import InvalidInput
from engram.operations import OPERATIONS, Operation
from engram.operations.params import Param
from engram.operations.spec import check_arguments
from engram.paging import Budget, estimate_tokens

PROFILES: Final = ("agent", "admin", "all")
COMPATS: Final = ("go-engram", "engram-rs")

# The native tools, in the order the server lists them: every operation an agent may call.
NATIVE: Final = (
    "remember", "recall", "get", "update", "suggest_topic_key", "stats", "context", "why",
    "check", "related", "timeline", "session_start", "session_summary", "session_end",
    "save_prompt", "capture", "judge", "pin", "unpin", "consolidate_preview", "insights",
    "forget", "export",
    "import", "consolidate", "consolidate_apply", "train", "insights_delete", "merge_projects",
    "sync", "reindex", "doctor",
)  # fmt: skip

Args = dict[str, Any]
Shape = Callable[[dict[str, Any]], dict[str, Any]]


class Tool(NamedTuple):
    """One name the server offers: a native tool, or another tool's name mapped onto one.

    A compatibility row names its ``target`` (the native handler), how its arguments map onto
    the target's (``rename``, then ``convert``), and how the target's answer is reshaped into the
    other tool's (``shape``). Its profile is its target's unless given.
    """

    name: str
    description: str
    params: tuple[Param, ...]
    profile: str
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    target: str = ""
    compat: str = ""
    rename: Mapping[str, str] = MappingProxyType({})
    convert: Callable[[Args], Args] | None = None
    shape: Shape | None = None

    @property
    def handler(self) -> str:
        return self.target or self.name

    def input_schema(self) -> dict[str, Any]:
        """Return the JSON schema of this tool's arguments."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def arguments(self, raw: Mapping[str, Any] | None) -> Args:
        """Check raw call arguments and return the target handler's arguments."""
        out = check_arguments(self.name, self.params, raw)
        out = {self.rename.get(key, key): value for key, value in out.items()}
        return self.convert(out) if self.convert is not None else out


class Call(Budget):
    """One tool call in progress: its tool, the budget in characters, the answer's shape."""

    def __init__(self, tool: Tool, budget: int) -> None:
        super().__init__(budget, name=tool.name, shape=tool.shape)
        self.tool = tool

    def over(self, text: str) -> None:
        """Log an answer over the budget (it is sent marked as truncated)."""
        import logging  # imported only when something goes wrong

        logging.getLogger("engram.mcp").warning(
            "%s: %d-token answer over the budget", self.tool.name, estimate_tokens(text)
        )


def native_tool(op: Operation) -> Tool:
    """Return the tool of a declared operation."""
    return Tool(
        op.name,
        op.description,
        op.params_for("mcp"),
        op.profile,
        read_only=op.read_only,
        destructive=op.destructive,
        idempotent=op.idempotent,
    )


class Tables(NamedTuple):
    """Every tool the server knows: the native ones (also by name) and the compatibility rows."""

    native: tuple[Tool, ...]
    by_name: dict[str, Tool]
    compat: tuple[Tool, ...]


@functools.cache
def tables() -> Tables:
    """Return the tool tables, built on first use (so importing this module stays cheap)."""
    from engram.mcp_server.compat import rows

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
