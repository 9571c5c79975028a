"""Go engram compatibility: Go's arguments mapped onto engram's operations, written once.

Go engram's clients reach engram two ways: its MCP tool names (``engram mcp --compat
go-engram``) and its HTTP routes (``engram serve --compat go-engram``). Both adapters map a
Go observation's fields onto the facade with these functions, so a save, an update or a search
means the same through either: a Go type through ``engram.model.kind_and_type`` (``command``
or a user's own type is kept as written), ``observation`` as an alias of ``content``, a scope
that cannot move a memory between stores refused with the same words. Go's rows going out are
``engram.formats.goexport``'s (``go_observation``, ``go_prompt``), the ones its export writes.

Go's search rule lives here too (``after_ranking``): a type engram does not rank by is kept
from a longer ranked list, and Go's prompts (its other table) are left out of a search of its
observations. The facade applies it (``Engram.recall(of_type=…, observations=True)``), so the
CLI's ``--type``, Go's ``mem_search`` and Go's ``GET /search`` page the same way.

Plain data in, plain data out: no facade, no adapter, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from engram.errors import InvalidInput
from engram.model import go_id_of, kind_and_type, normalize_project, type_of
from engram.operations.memory import DEFAULT_KIND, DEFAULT_SCOPE

__all__ = [
    "FOREIGN_TYPE_FACTOR",
    "GO_OTHER_TABLES",
    "after_ranking",
    "observation_draft",
    "own_project",
    "search_filters",
    "update_changes",
    "with_go_ids",
]

Args = Mapping[str, Any]
FOREIGN_TYPE_FACTOR: Final = 5  # a type engram does not rank by is filtered after ranking
# Kinds Go engram keeps in tables of their own, which a search of its observations never reads.
GO_OTHER_TABLES: Final = frozenset({"prompt"})
# Fields of an observation engram keeps as written, beside the ones it has a place for.
_KEPT: Final = ("tool_name",)


class _Ranked(Protocol):
    """A ranked hit: what ``after_ranking`` reads of it."""

    @property
    def record(self) -> Mapping[str, Any]: ...


_H = TypeVar("_H", bound=_Ranked)


class _Item(Protocol):
    """A briefing line: the memory's id and the prefix the briefing shows."""

    @property
    def id(self) -> str: ...

    @property
    def short_id(self) -> str: ...


def own_project(name: object, *, project: str, root: Path | None) -> str | None:
    """Return the project a Go client named, or None when it names the project served.

    Go's plugins name the project by their folder's base name; engram's project may be named
    otherwise (config.yaml, the git remote). Either name, or none, is the project served.
    """
    text = " ".join(str(name or "").split())
    if not text:
        return None
    wanted = normalize_project(text)
    served = {normalize_project(project)}
    if root is not None:
        served.add(normalize_project(root.name))
    return None if wanted in served else text


def observation_draft(args: Args, *, project: str | None) -> tuple[str, str, dict[str, Any]]:
    """Return (title, content, the rest of ``remember``'s fields) of a Go observation."""
    content = args.get("content")
    if content is None:
        content = args.get("observation")
    kind, typ = kind_and_type(args.get("type"), default=DEFAULT_KIND)
    extra: dict[str, Any] = {"type": typ} if typ else {}
    for key in _KEPT:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            extra[key] = value.strip()
    draft: dict[str, Any] = {
        "kind": kind,
        "scope": args.get("scope") or DEFAULT_SCOPE,
        "topic_key": args.get("topic_key") or None,
        "session_id": args.get("session_id") or None,
        "project": project,
        "source": "agent",
        "extra": extra or None,
    }
    return str(args.get("title") or ""), str(content or ""), draft


def update_changes(
    current: Mapping[str, Any], args: Args, *, project: str | None, hint: str
) -> dict[str, Any]:
    """Return the changes a Go update makes to ``current``; refuse moving it between stores.

    ``project`` is the project the update moves it to (None: it stays); ``hint`` says, in the
    caller's words, how to move a memory to the other store instead.
    """
    changes = {
        key: args[key] for key in ("title", "content", "topic_key") if args.get(key) is not None
    }
    if project:
        changes["project"] = project
    if args.get("type"):
        kind, typ = kind_and_type(args["type"], default=DEFAULT_KIND)
        changes["kind"] = kind
        if typ or current.get("type"):
            changes["type"] = typ or kind
    scope = args.get("scope")
    here = current.get("scope", DEFAULT_SCOPE)
    if scope is not None and scope != here:
        raise InvalidInput(
            f"scope: memory {go_id_of(current)} is in the {here} store; an update cannot move "
            "it to another",
            hint=hint,
        )
    return changes


def search_filters(args: Args, *, project: str | None) -> tuple[dict[str, Any], str | None]:
    """Return the recall filters of a Go search, and the type to keep when engram has no kind.

    A type engram ranks as a kind filters the index; another (``command``) is kept as
    written, and the caller keeps the hits of that type (``of_type``) from a longer list.
    """
    filters: dict[str, Any] = {}
    written = str(args.get("type") or "").strip()
    kind, typ = kind_and_type(written, default=DEFAULT_KIND) if written else ("", None)
    if kind and not typ:
        filters["kinds"] = kind
    if args.get("scope"):
        filters["scopes"] = args["scope"]
    if args.get("all_projects"):
        filters["all_projects"] = True
    elif project:
        filters["projects"] = project
    return filters, typ


def after_ranking(
    rank: Callable[[int, int], Sequence[_H]],
    *,
    typ: str | None,
    limit: int,
    offset: int = 0,
    observations: bool = False,
) -> list[_H]:
    """Return the page ``offset``..``offset + limit`` of a ranking, filtered after ranking.

    ``rank(limit, offset)`` ranks as engram does. ``typ``: keep only hits of that type (one
    engram does not rank by, as ``search_filters`` returns it); ``observations``: leave out Go's
    other tables (``GO_OTHER_TABLES``: prompts). Either filter reads ``FOREIGN_TYPE_FACTOR``
    times the hits up to the page's end and pages over what it kept; with neither, the ranking
    is paged as it is.
    """
    if not typ and not observations:
        return list(rank(limit, offset))
    wanted = (offset + limit) * FOREIGN_TYPE_FACTOR
    kept = [
        hit
        for hit in rank(wanted, 0)
        if (not typ or type_of(hit.record) == typ)
        and not (observations and hit.record.get("kind") in GO_OTHER_TABLES)
    ]
    return kept[offset : offset + limit]


def with_go_ids(text: str, items: Sequence[_Item], records: Sequence[Mapping[str, Any]]) -> str:
    """Return a briefing's text naming each memory by its Go id instead of its short id."""
    for item, record in zip(items, records, strict=False):
        if item.id == record.get("id"):
            text = text.replace(f"- {item.short_id} ", f"- #{go_id_of(record)} ", 1)
    return text
