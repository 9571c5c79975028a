"""Whether the agents engram is set up in can run it: ``engram doctor``'s agent checks.

``agent_problems`` reads every agent's files that ``engram setup`` writes (both scopes) and
names each one whose engram MCP server entry or hooks start a program that is not found on
this PATH or is not executable, and the hooks Codex skips because the person has not trusted
them (or trusted an earlier version: Codex keeps a hash of each hook, computed here the way
Codex 0.171 computes it, which a test holds against hashes Codex itself reported).
Feature layer: reads files, prints nothing.
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engram.agents.hookspec import HOOKS
from engram.agents.setup import (
    AGENTS,
    SCOPES,
    SERVER,
    Target,
    agent_targets,
    codex_home,
    find_hook,
    markers,
    parse_json,
    read_text,
    shown_path,
)
from engram.errors import ConfigError
from engram.jsonc import Document

IMPORT_TIMEOUT: Final = 30.0  # seconds `python -c "import engram"` may take (a loaded machine)

# -- Codex's hook trust --------------------------------------------------------------------------

# Codex's names for its hook events in a trust key (its ``hook_event_key_label``).
CODEX_LABELS: Final = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
_CODEX_NO_MATCHER: Final = ("UserPromptSubmit", "Stop")  # Codex drops their matcher


def codex_hook_hash(
    native: str,
    matcher: str | None,
    command: str,
    timeout: int | None,
    *,
    run_async: bool = False,
    status_message: str | None = None,
) -> str:
    """Return the hash Codex trusts a command hook by (``sha256:`` and 64 hex digits).

    As Codex computes it: the hook's normalized identity (the event's label, the matcher,
    the one handler with its timeout made explicit: 600 s by default, SessionEnd's held to
    1-3 s) as JSON with sorted keys and no spaces, hashed with SHA-256.
    """
    import hashlib

    if native == "SessionEnd":
        seconds = min(max(timeout or 1, 1), 3)
    else:
        seconds = max(600 if timeout is None else timeout, 1)
    handler: dict[str, Any] = {
        "type": "command",
        "command": command,
        "timeout": seconds,
        "async": run_async,
    }
    if status_message is not None:
        handler["statusMessage"] = status_message
    identity: dict[str, Any] = {"event_name": CODEX_LABELS.get(native, native), "hooks": [handler]}
    if matcher is not None and native not in _CODEX_NO_MATCHER:
        identity["matcher"] = matcher
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CodexTrust:
    """Codex's trust in engram's hooks of one hooks.json: which are trusted, and which not."""

    hooks: Path
    trusted: list[str]
    untrusted: list[str]  # never trusted
    modified: list[str]  # trusted once, changed since (an upgrade of engram)
    disabled: list[str]


def codex_trust(hooks: Path, config: Path) -> CodexTrust | None:
    """Read which of engram's hooks in ``hooks`` Codex trusts (None: none of engram's there).

    Codex keys each hook by the hooks file's absolute path, the event's label and the
    hook's place (``PATH:pre_tool_use:0:0``) in ``[hooks.state]`` of the user's config.toml,
    with the hash of the hook it trusted.
    """
    import tomllib

    text = read_text(hooks)
    if text is None:
        return None
    doc = parse_json(hooks, text)
    states: dict[str, Any] = {}
    raw = read_text(config)
    if raw:
        try:
            state = tomllib.loads(raw).get("hooks", {}).get("state", {})
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"{config}: {exc}", hint=f"fix {config}, then run `engram doctor` again"
            ) from exc
        states = state if isinstance(state, dict) else {}
    sources = dict.fromkeys([str(hooks.absolute()), str(hooks.resolve())])
    found = CodexTrust(hooks, [], [], [], [])
    any_ours = False
    for spec in (s for s in HOOKS if s.agent == "codex"):
        where = find_hook(doc, spec.native, markers(spec))
        if where is None:
            continue
        any_ours = True
        g, h = where
        group = doc.get(["hooks", spec.native, g])
        hook = group["hooks"][h]
        timeout = hook.get("timeout", hook.get("timeoutSec"))
        current = codex_hook_hash(
            spec.native,
            group.get("matcher"),
            str(hook.get("command", "")),
            timeout if isinstance(timeout, int) else None,
            run_async=hook.get("async") is True,
            status_message=hook.get("statusMessage"),
        )
        label = CODEX_LABELS.get(spec.native, spec.native)
        entry = next(
            (
                states[key]
                for key in (f"{source}:{label}:{g}:{h}" for source in sources)
                if isinstance(states.get(key), dict)
            ),
            None,
        )
        name = f"{spec.native} ({spec.event})"
        if entry is None or not entry.get("trusted_hash"):
            found.untrusted.append(name)
        elif entry.get("trusted_hash") != current:
            found.modified.append(name)
        elif entry.get("enabled") is False:
            found.disabled.append(name)
        else:
            found.trusted.append(name)
    return found if any_ours else None


# -- can the agents start engram? ------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One reason an agent's engram setup does not work: ``error`` or ``warning``."""

    severity: str
    agent: str
    message: str


def agent_problems(root: Path, *, home: Path | None = None) -> list[Problem]:
    """Name every agent whose engram hooks or MCP entry cannot run, and Codex's untrusted hooks.

    A command cannot run when its program is not found on this PATH or is not executable
    (an agent started from elsewhere may have another PATH: the message says which).
    """
    home = home or Path.home()
    root = root.resolve()
    problems: list[Problem] = []
    for agent in AGENTS:
        for scope in SCOPES:
            targets, _ = agent_targets(agent, scope, root, home)
            for target in targets:
                try:
                    text = read_text(target.path)
                    if text is None or not target.present(text):
                        continue
                    programs = _programs(target, text)
                except ConfigError:
                    continue  # `engram setup --list` reports a file that does not parse
                shown = shown_path(target.path, scope, root, home)
                what = "MCP server entry" if target.kind == "mcp" else "hooks"
                for launcher in programs:
                    if not runs(launcher):
                        problems.append(
                            Problem(
                                "warning",
                                agent,
                                f"{agent}: the {what} in {shown} cannot run: "
                                f"`{shlex.join(launcher)}` {_why(launcher)} here (install engram "
                                "where the agent finds it, or run `engram setup "
                                f"{agent}{' --user' if scope == 'user' else ''}` again from "
                                "an environment where it is installed)",
                            )
                        )
            if agent == "codex":
                problems += _codex_problems(scope, root, home)
    return problems


def _codex_problems(scope: str, root: Path, home: Path) -> list[Problem]:
    codex = codex_home(home)
    hooks = root / ".codex" / "hooks.json" if scope == "project" else codex / "hooks.json"
    try:
        trust = codex_trust(hooks, codex / "config.toml")
    except ConfigError as exc:
        return [Problem("warning", "codex", f"codex: {exc.message}")]
    if trust is None:
        return []
    shown = shown_path(hooks, scope, root, home)
    out = []
    if trust.untrusted:
        out.append(
            Problem(
                "warning",
                "codex",
                f"codex: {len(trust.untrusted)} of engram's hooks in {shown} are not trusted "
                f"({', '.join(trust.untrusted)}), so Codex skips them without a word: start "
                '`codex` in this project and answer "Hooks need review" with "Trust all and '
                'continue" (or trust them in /hooks); `codex exec` never asks',
            )
        )
    if trust.modified:
        out.append(
            Problem(
                "warning",
                "codex",
                f"codex: {len(trust.modified)} of engram's hooks in {shown} changed since you "
                f"trusted them ({', '.join(trust.modified)}: an engram setup rewrote them), so "
                'Codex skips them: start `codex` in this project and trust them again ("Trust '
                'all and continue", or /hooks)',
            )
        )
    if trust.disabled:
        out.append(
            Problem(
                "warning",
                "codex",
                f"codex: engram's hooks in {shown} are turned off in Codex "
                f"({', '.join(trust.disabled)}): turn them on again in /hooks",
            )
        )
    return out


def _programs(target: Target, text: str) -> list[tuple[str, ...]]:
    """Return how an engram part of a file starts engram (its MCP command, its hooks').

    Each is the program, with ``-m engram`` when it is a Python interpreter running engram.
    """
    if target.kind == "mcp":
        if target.path.suffix == ".toml":
            import tomllib

            entry = tomllib.loads(text).get("mcp_servers", {}).get(SERVER, {})
        else:
            doc = parse_json(target.path, text)
            entry = next(
                (
                    value
                    for key in ("mcpServers", "mcp", "servers")
                    if isinstance(value := doc.get([key, SERVER]), dict)
                ),
                {},
            )
        command = entry.get("command") if isinstance(entry, dict) else None
        args = entry.get("args") if isinstance(entry, dict) else None
        argv = command if isinstance(command, list) else [command, *(args or [])]
        argv = [str(word) for word in argv if word is not None]
        return [_launcher(argv)] if argv and argv[0] else []
    if target.kind == "hooks" and target.path.suffix == ".js":
        start = text.find("const ENGRAM = ")
        if start < 0:
            return []
        line = text[start + len("const ENGRAM = ") : text.find("\n", start)].rstrip(";")
        argv = json.loads(line)
        return [_launcher([str(word) for word in argv])] if argv else []
    if target.kind == "hooks":
        programs = []
        for spec in HOOKS:
            marker = f"hook {spec.agent} {spec.event}"
            for command in _hook_commands(parse_json(target.path, text)):
                if marker in command:
                    tail = command.rsplit("; ", 1)[-1]
                    try:
                        argv = shlex.split(tail)
                    except ValueError:
                        continue
                    if argv:
                        programs.append(_launcher(argv))
        return list(dict.fromkeys(programs))
    return []


def _hook_commands(doc: Document) -> list[str]:
    """Return every hook command of a settings file (grouped or Cursor's flat lists)."""
    found: list[str] = []
    hooks = doc.get(["hooks"])
    if not isinstance(hooks, dict):
        return found
    for entries in hooks.values():
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            inner = entry.get("hooks")
            for hook in [entry, *(inner if isinstance(inner, list) else [])]:
                if isinstance(hook, dict) and isinstance(hook.get("command"), str):
                    found.append(hook["command"])
    return found


def _launcher(argv: list[str]) -> tuple[str, ...]:
    """Return the part of a command line that starts engram (``python -m engram``, or one)."""
    return tuple(argv[:3]) if argv[1:3] == ["-m", "engram"] else (argv[0],)


def runs(launcher: tuple[str, ...]) -> bool:
    """Tell whether ``launcher`` starts engram here: found and executable, engram importable."""
    if shutil.which(launcher[0]) is None:
        return False
    if len(launcher) == 1:
        return True
    import subprocess

    try:
        done = subprocess.run(
            [launcher[0], "-c", "import engram"],
            capture_output=True,
            timeout=IMPORT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _why(launcher: tuple[str, ...]) -> str:
    if len(launcher) > 1 and shutil.which(launcher[0]) is not None:
        return "cannot import engram"
    return "is not found on PATH or not executable"
