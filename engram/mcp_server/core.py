"""What ``engram mcp`` serves, without the SDK: ``EngramMCP`` and its one error boundary.

``EngramMCP`` is plain synchronous Python over ``engram.service.Engram``: it opens the project
on first use (the working folder's, else the first of the client's roots that lies in one,
else the personal store alone, which answers what needs a project in words for the person),
picks the tools of its profile and compatibility sets (``table``), holds the response budget
and the recall cursors (``engram.mcp_server.paging.Pages``), and dispatches each call to
the handler registered for the tool's target (``tools``). ``call`` is the error boundary:
every failure becomes an MCP error result with a message and a hint, and the server keeps
serving. Inside it, advice renders in this server's words (``engram.operations.advice``):
"call `get` with id=ID", never a CLI command line but for what only the person can run.
``read`` serves the resources, ``prompt`` the prompts.

It must not import the mcp SDK (``server`` does), nor another adapter, nor write to stdout.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from engram.config import ENGRAM_DIR, find_root
from engram.errors import ConfigError, EngramError, InvalidInput, NotFound, NotInitialized
from engram.mcp_server.catalog import resolve_tools, select_tools
from engram.mcp_server.paging import CHARS_PER_TOKEN, Pages, dumps
from engram.mcp_server.prompts import render_prompt
from engram.mcp_server.resources import read_resource
from engram.mcp_server.table import COMPATS, Call
from engram.mcp_server.tools import HANDLERS
from engram.operations import advice

if TYPE_CHECKING:
    import logging

    from engram.service import Engram

DEFAULT_BUDGET: Final = 4000  # tokens per response
MIN_BUDGET: Final = 500


def logger() -> logging.Logger:
    """Return this adapter's logger (logging is imported only when something goes wrong)."""
    import logging

    return logging.getLogger("engram.mcp")


class _UnknownTool(EngramError):
    code = "unknown_tool"
    hint = "tools/list shows the tools this server offers (the user's MCP settings choose more)"


def root_paths(uris: Iterable[str]) -> list[Path]:
    """Return the local folders of the client's roots (``file://`` URIs), in order."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    out = []
    for uri in uris:
        parts = urlsplit(str(uri))
        if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path:
            out.append(Path(url2pathname(parts.path)))
    return out


def project_root(folders: Iterable[Path]) -> Path | None:
    """Return the project (the folder holding .engram/) of the first folder inside one."""
    for folder in folders:
        with contextlib.suppress(NotInitialized, OSError):
            return find_root(folder)
    return None


class EngramMCP:
    """What ``engram mcp`` serves, over the facade: tools, resources and prompts.

    The project is opened on first use: the working folder's, else the first of the client's
    roots (``use_roots``) that lies in one, else the personal store alone. A server started
    before ``engram init`` serves the personal store, answers what needs a project with words
    for the person, and opens the project once it exists. Every call refreshes the index from
    memories.jsonl first (the facade does), so writes by other server processes are seen.
    """

    def __init__(
        self,
        start: Path | None = None,
        *,
        profile: str = "agent",
        compat: Iterable[str] = (),
        budget: int | None = None,
        tools: str | None = None,
    ) -> None:
        self.start = start
        self.profile = profile if tools is None else tools
        self.compat = tuple(compat)
        # ``tools``: a --tools spec as Go engram reads it (catalog.resolve_tools)
        self.tools = (
            select_tools(profile, self.compat)
            if tools is None
            else resolve_tools(tools, self.compat)
        )
        missing = sorted({tool.handler for tool in self.tools.values()} - set(HANDLERS))
        if missing:
            raise RuntimeError(f"tools without a handler: {', '.join(missing)}")
        if budget is not None and budget < MIN_BUDGET:
            raise InvalidInput(f"--budget must be at least {MIN_BUDGET} tokens, got {budget}")
        self._budget_option = budget
        # Advice in answers names this server's tools (and the person's commands for the rest).
        self.surface = advice.Tools(name for name, tool in self.tools.items() if not tool.compat)
        self._engram: Engram | None = None
        self._roots: list[Path] | None = None  # the client's roots; None: not asked (yet)
        self._here: Path | None = None  # the project of the working folder, when last looked
        self.pages = Pages()
        # Set by the server around a call when the client can sample (consolidation's LLM).
        self.sampler: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def engram(self) -> Engram:
        """Return the open project (or the personal store alone), opening it on first use.

        While only the personal store is open, a project that has appeared since (``engram
        init`` in the working folder or a root) is opened instead.
        """
        if self._engram is not None and not self._engram.has_project and self.project_root():
            self.close()
        if self._engram is None:
            from engram.service import Engram

            root = self.project_root()
            self._engram = Engram(root) if root else Engram.personal_only(self.start)
        return self._engram

    def project_root(self) -> Path | None:
        """Return the project to serve: the working folder's, else the first root's (or None)."""
        return project_root([self.start or Path.cwd(), *(self._roots or [])])

    def project_source(self) -> tuple[str, Path | None]:
        """Say how the project served was found: working_directory, client_roots or none."""
        here = project_root([self.start or Path.cwd()])
        if here is not None:
            return "working_directory", here
        root = self.project_root()
        return ("client_roots", root) if root is not None else ("none", None)

    def wants_roots(self) -> bool:
        """Tell whether the client's roots are needed (and not known): no project here.

        Asked before every call: while the project found here keeps its .engram/, one stat
        answers instead of a walk up from the working folder.
        """
        if self._roots is not None:
            return False
        if self._here is not None and (self._here / ENGRAM_DIR).is_dir():
            return False
        self._here = project_root([self.start or Path.cwd()])
        return self._here is None

    def use_roots(self, uris: Iterable[str]) -> None:
        """Take the client's roots (``file://`` URIs); a project they name is opened next."""
        roots = root_paths(uris)
        if roots != self._roots and self._engram is not None:
            current = self._engram.root if self._engram.has_project else None
            if project_root([self.start or Path.cwd(), *roots]) != current:
                self.close()
        self._roots = roots

    def roots_changed(self) -> None:
        """Forget the client's roots: they are asked again before the next call."""
        self._roots = None

    def close(self) -> None:
        """Release the project's index files."""
        if self._engram is not None:
            self._engram.close()
            self._engram = None

    def __enter__(self) -> EngramMCP:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def budget(self) -> int:
        """Return the most tokens one response may take (option, config, default)."""
        if self._budget_option is not None:
            return self._budget_option
        try:
            value = self.engram.config.get("mcp.token_budget")
        except ConfigError:
            return DEFAULT_BUDGET
        if isinstance(value, bool) or not isinstance(value, int) or value < MIN_BUDGET:
            raise ConfigError(
                f"mcp.token_budget must be a whole number of tokens >= {MIN_BUDGET}, got {value!r}"
            )
        return value

    # -- the error boundary ------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> tuple[str, bool]:
        """Run one tool call; return (text, is_error). Never raises.

        Advice in the answer (hints, notes, footers) names tools and their parameters.
        """
        with advice.using(self.surface):
            return self._call(name, arguments)

    def _call(self, name: str, arguments: Mapping[str, Any] | None) -> tuple[str, bool]:
        tool = self.tools.get(name)
        try:
            if tool is None:
                raise _UnknownTool(self._unknown_tool(name))
            args = tool.arguments(arguments)
            call = Call(tool, self.budget * CHARS_PER_TOKEN)
            return HANDLERS[tool.handler](self, args, call), False
        except EngramError as exc:
            return dumps(self._error(exc, name)), True
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            error = {
                "code": "os_error",
                "message": f"{name}: {exc.strerror or exc}{where}",
                "hint": "check the path and its permissions; "
                + advice.render("`engram doctor` checks the store"),
            }
            return dumps(error), True
        except Exception as exc:  # the boundary: a bug must not end the session
            logger().exception("tool %s failed", name)
            error = {
                "code": "internal",
                "message": f"{name} failed: {type(exc).__name__}: {exc}",
                "hint": "this is a bug in engram; the server's stderr log has the details",
            }
            return dumps(error), True

    def _error(self, exc: EngramError, name: str) -> dict[str, str]:
        out = exc.to_dict()
        if isinstance(exc, NotInitialized) and exc.hint == NotInitialized.hint:
            from engram.service import NO_PROJECT_HINT

            out["hint"] = NO_PROJECT_HINT  # the person's words: an agent relays them
        if isinstance(exc, InvalidInput) and exc.hint == InvalidInput.hint:
            out["hint"] = f"check the arguments against the input schema of {name} (tools/list)"
        return {key: advice.render(value) for key, value in out.items()}

    def _unknown_tool(self, name: str) -> str:
        elsewhere = [t.name for t in select_tools("all", COMPATS).values() if t.name == name]
        if elsewhere:
            return (
                f"tool {name!r} is not served by this server (profile {self.profile}"
                f"{', compat ' + ', '.join(self.compat) if self.compat else ''})"
            )
        return f"unknown tool {name!r}"

    # -- what the handlers share ---------------------------------------------------------------

    def record(self, ref: str | int, changing: str = "") -> dict[str, Any]:
        """Return the memory ``ref`` names: an id or unique prefix, or a Go integer id.

        An integer (or, from a Go engram name, a string of digits) is a Go engram id: the id
        a memory imported from Go carries, else the one derived from its engram id
        (``engram.model.go_int_id``). A string of digits that names no Go id is then tried as
        an engram id prefix. ``changing`` names the change about to be made: an engram
        prefix needs 4+ characters.
        """
        if isinstance(ref, bool):
            raise InvalidInput(f"not a memory id: {ref!r}")
        if isinstance(ref, int):
            return self.engram.by_go_id(ref)
        if isinstance(ref, str) and ref.strip().isdigit() and len(ref.strip()) <= 20:
            with contextlib.suppress(NotFound):
                return self.engram.by_go_id(int(ref.strip()))
        return self.engram.target(ref, changing) if changing else self.engram.get(ref)

    # -- resources and prompts -----------------------------------------------------------------

    def read(self, uri: str) -> tuple[str, str]:
        """Return (text, mime type) of an engram:// resource; raise EngramError if it fails."""
        with advice.using(self.surface):
            try:
                return read_resource(self, uri)
            except EngramError as exc:
                exc.hint = self.hint(exc)  # the SDK's wiring sends it as it is
                raise

    def prompt(self, name: str, arguments: Mapping[str, str] | None) -> tuple[str, str]:
        """Return (description, text) of a built-in prompt; raise NotFound for another name."""
        return render_prompt(name, arguments)

    def hint(self, exc: EngramError) -> str:
        """Return an error's hint in this server's words (tools, not commands)."""
        return advice.render(exc.hint, self.surface)
