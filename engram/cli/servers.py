"""The commands other adapters serve: mcp, daemon, serve, tui and hook, declared here, run there.

typer lives in the CLI only, so the CLI declares these commands' options and runs each through
the function the composition root names for it ("module:function", see ``add_adapters``),
imported only when the command runs: ``engram check`` loads no other adapter, and the adapters
never import each other. tests/cli/test_cli.py checks these declarations against the adapters' own
names and defaults.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram.agents.hookspec import HOOK_AGENTS, HOOKS
from engram.cli.app import app, echo, start_of
from engram.errors import InvalidInput

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

MCP_BUDGET = 4000  # engram.mcp_server.DEFAULT_BUDGET
HTTP_HOST = "127.0.0.1"  # engram.http_api.DEFAULT_HOST
HTTP_PORT = 7437  # engram.http_api.DEFAULT_PORT
HTTP_TOKEN_ENV = "ENGRAM_HTTP_TOKEN"  # engram.http_api.TOKEN_ENV
HTTP_PORT_ENV = "ENGRAM_PORT"  # engram.http_api.PORT_ENV
_RUNNERS: dict[str, str] = {}


def _runner(command: str) -> Callable[..., Any]:
    """Import and return the function that serves ``command`` (named by add_adapters)."""
    import importlib

    module, _, function = _RUNNERS[command].partition(":")
    runner: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return runner


def _root_of(ctx: typer.Context) -> Path:
    from engram.config import find_root

    directory = (ctx.obj or {}).get("dir")
    return find_root(Path(directory) if directory is not None else None)


class ToolProfile(enum.StrEnum):
    agent = "agent"
    admin = "admin"
    all = "all"


class CompatNames(enum.StrEnum):
    go_engram = "go-engram"
    engram_rs = "engram-rs"


class RouteCompat(enum.StrEnum):
    go_engram = "go-engram"


def mcp_command(
    ctx: typer.Context,
    tools: Annotated[
        str | None,
        typer.Option(
            "--tools",
            metavar="agent|admin|all|NAMES",
            help="Tool profile: agent (everyday tools, the default), admin (forget and "
            "maintenance), all, or as Go engram reads it a comma list of profiles and tool "
            "names (agent,admin; mem_save,mem_search). A profile given here also offers "
            "go-engram's names of Go's profile (Go's setup writes --tools=agent).",
        ),
    ] = None,
    compat: Annotated[
        list[CompatNames] | None,
        typer.Option(
            "--compat",
            metavar="go-engram|engram-rs",
            help="Also offer another memory tool's names and parameters (repeatable).",
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            metavar="TOKENS",
            help="Most tokens in one response (default: mcp.token_budget in config.yaml, "
            f"else {MCP_BUDGET}).",
        ),
    ] = None,
) -> None:
    """Serve this project's memory to coding agents over MCP (stdio)."""
    names = [c.value for c in compat or []]
    _runner("mcp")(
        start_of(ctx), profile=ToolProfile.agent.value, compat=names, budget=budget, tools=tools
    )


def daemon_command(
    ctx: typer.Context,
    socket: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Listen here (default .engram/state/engram.sock, or a short path for deep "
            "folders).",
        ),
    ] = None,
    idle: Annotated[
        float | None,
        typer.Option(
            "--idle",
            help="Leave after this many seconds without a request (default: serve until stopped).",
            min=0.001,
        ),
    ] = None,
    on_first_use: Annotated[
        bool,
        typer.Option(
            "--on-first-use",
            help="Started by a command or hook on first use: leave when the setting "
            "daemon.auto is false.",
        ),
    ] = False,
) -> None:
    """Serve this store over a Unix socket (newline-delimited JSON, engram-rs methods)."""
    from engram.config import ENGRAM_DIR
    from engram.daemon.protocol import socket_path

    root = _root_of(ctx)
    where = socket or socket_path(root / ENGRAM_DIR)

    def ready() -> None:
        echo(f"engram daemon listening on {where} (Ctrl-C stops it)", err=True)

    _runner("daemon")(root, socket, ready=ready, idle=idle, first_use=on_first_use)


def serve_command(
    ctx: typer.Context,
    port_given: Annotated[
        int | None,
        typer.Argument(
            metavar="PORT",
            help="The port as Go engram's `serve PORT` gives it (same as --port).",
            min=0,
            max=65535,
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help=f"TCP port to listen on (default {HTTP_PORT}; with --compat go-engram, "
            f"{HTTP_PORT_ENV} when set, as Go engram's plugins read it).",
            min=0,
            max=65535,
            show_default=False,
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(help=f"Address to bind; other than loopback needs {HTTP_TOKEN_ENV} set."),
    ] = HTTP_HOST,
    compat: Annotated[
        list[RouteCompat] | None,
        typer.Option(
            "--compat",
            metavar="go-engram",
            help="Also serve Go engram's HTTP routes (its Claude Code and OpenCode plugins "
            "call them): /sessions, /observations, /prompts, /timeline and more. Where a "
            "path is also engram's (/health, /search, /context, /stats, /export, /import, "
            "POST /sessions, POST /prompts), Go's shape is served there. Not given: the "
            "project's serve.compat setting.",
        ),
    ] = None,
) -> None:
    """Serve this project's memory over HTTP: a web page at /, REST + OpenAPI at /docs."""

    def ready(url: str) -> None:
        echo(
            f"engram serving {url} (web page at {url}/, API docs at {url}/docs; Ctrl-C stops it)",
            err=True,
        )

    if port_given is not None:
        if port not in (None, port_given):
            raise InvalidInput(f"PORT {port_given} and --port {port} differ", hint="give one")
        port = port_given
    names = [c.value for c in compat or []]
    _runner("serve")(start_of(ctx), host=host, port=port, ready=ready, compat=names)


def tui_command(
    ctx: typer.Context,
    ansi: Annotated[
        bool,
        typer.Option(
            "--ansi",
            help="Draw with the terminal's own 16 colours (for terminals with odd palettes).",
        ),
    ] = False,
) -> None:
    """Browse, search and tidy the project's memories in a terminal UI (needs engram-git[tui])."""
    _runner("tui")(_root_of(ctx), ansi=ansi)


_HOOK_AGENTS = ", ".join(HOOK_AGENTS)
_HOOK_EVENTS = ", ".join(dict.fromkeys(spec.event for spec in HOOKS))


def hook_command(
    agent: Annotated[str, typer.Argument(help=f"The agent running the hook: {_HOOK_AGENTS}.")],
    event: Annotated[
        str,
        typer.Argument(
            help=f"One of {_HOOK_EVENTS} (each agent has the ones `engram setup` installs; "
            "see the README's Hooks table)."
        ),
    ],
) -> None:
    """Answer an agent's hook: read its JSON payload on stdin, print what the agent reads."""
    _runner("hook")(agent, event)


ADAPTER_COMMANDS: dict[str, Callable[..., None]] = {
    "mcp": mcp_command,
    "daemon": daemon_command,
    "serve": serve_command,
    "tui": tui_command,
    "hook": hook_command,
}


def add_adapters(runners: Mapping[str, str]) -> None:
    """Add the commands of ``runners`` (name -> "module:function" that serves it) to the app."""
    for name, target in runners.items():
        if name not in _RUNNERS:
            app.command(name)(ADAPTER_COMMANDS[name])
        _RUNNERS[name] = target
