"""The tool table: the native tools of each profile, derived from the operations' declarations.

A ``Tool`` is one name the server offers: a native tool (one per operation in
``engram.operations.OPERATIONS`` an agent may call, with its input schema derived from the
declaration), or a compatibility row of go-engram or engram-rs mapped onto a native handler
(``compat.py``). ``Call`` is one tool call in progress: its tool and the answer's budget.

The catalogue that joins the native tools and the compatibility rows, and chooses what a
server offers, is ``catalog.py``. It must not import the mcp SDK nor any other adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from engram.mcp_server.paging import Budget, estimate_tokens
from engram.operations import Operation
from engram.operations.params import Param
from engram.operations.spec import check_arguments

PROFILES: Final = ("agent", "admin", "all")
COMPATS: Final = ("go-engram", "engram-rs")

# The native tools, in the order the server lists them: every operation an agent may call.
NATIVE: Final = (
    "remember", "recall", "get", "update", "suggest_topic_key", "stats", "context", "why",
    "check", "related", "timeline", "session_start", "session_summary", "session_end",
    "save_prompt", "capture", "review", "judge", "pin", "unpin", "consolidate_preview", "insights",
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
