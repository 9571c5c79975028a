"""How each real agent is driven: its command, its fake model protocol, its tools' names and shapes.

The tool names and argument shapes are the ones each program lists in its first request to the
fake model (the ``tools`` of the recorded body), at the versions ``.ci/agents`` pins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.agents import harness
from tests.agents.harness import Project

OLD_LINE = "    return round(amount_cents * percent / 100)"


def new_line(tag: str) -> str:
    return f"    return (amount_cents * percent + 50) // 100  # {tag}"


def codex_trusted_hooks(hooks: Path) -> str:
    """Return the ``[hooks.state]`` tables Codex writes when the person trusts every hook.

    What "Trust all and continue" in Codex's hooks review stores, keyed by the hooks file's
    path, the event's label and the hook's place, with the hash engram's doctor computes the
    way Codex does (a wrong hash leaves the hooks untrusted, and these tests fail).
    """
    from engram.agents.health import CODEX_LABELS, codex_hook_hash

    if not hooks.exists():
        return ""
    tables = []
    for native, groups in json.loads(hooks.read_text(encoding="utf-8"))["hooks"].items():
        label = CODEX_LABELS.get(native, native)
        for g, group in enumerate(groups):
            for h, hook in enumerate(group["hooks"]):
                digest = codex_hook_hash(
                    native, group.get("matcher"), hook["command"], hook.get("timeout")
                )
                key = f"{hooks}:{label}:{g}:{h}"
                tables.append(f'[hooks.state.{json.dumps(key)}]\ntrusted_hash = "{digest}"\n')
    return "\n" + "\n".join(tables)


@dataclass(frozen=True)
class Agent:
    """One agent program as the suite drives it."""

    name: str
    main_tool: str  # the file-reading tool: a request listing it is the agent's main loop
    engram_tool_prefix: str  # how engram's MCP tools are named in the model's tool list

    def read(self, project: Project) -> dict[str, Any]:
        path = str(project.root / "src" / "billing.py")
        return {
            "claude-code": {"call": "Read", "args": {"file_path": path}},
            "codex": {"call": "exec_command", "args": {"cmd": "cat src/billing.py"}},
            "gemini-cli": {"call": "read_file", "args": {"file_path": path}},
            "opencode": {"call": "read", "args": {"filePath": path}},
        }[self.name]

    def edit(self, project: Project, tag: str) -> dict[str, Any]:
        path = str(project.root / "src" / "billing.py")
        new = new_line(tag)
        if self.name == "codex":
            patch = (
                "*** Begin Patch\n*** Update File: src/billing.py\n@@\n"
                f"-{OLD_LINE}\n+{new}\n*** End Patch\n"
            )
            return {"custom": "apply_patch", "input": patch}
        if self.name == "opencode":
            return {
                "call": "edit",
                "args": {"filePath": path, "oldString": OLD_LINE, "newString": new},
            }
        args = {"file_path": path, "old_string": OLD_LINE, "new_string": new}
        if self.name == "claude-code":
            return {"call": "Edit", "args": args}
        return {"call": "replace", "args": {**args, "instruction": "Round refunds in cents."}}

    def shell(self, command: str) -> dict[str, Any]:
        return {
            "claude-code": {"call": "Bash", "args": {"command": command}},
            "codex": {"call": "exec_command", "args": {"cmd": command}},
            "gemini-cli": {"call": "run_shell_command", "args": {"command": command}},
            "opencode": {"call": "bash", "args": {"command": command, "description": "run it"}},
        }[self.name]

    def check(self) -> list[dict[str, Any]]:
        """Return the steps that call engram's check tool on src/billing.py.

        Codex defers MCP tools behind its client-side ``tool_search``: the model searches, Codex
        answers with the tools found (in a ``mcp__engram`` namespace) and the model calls one.
        """
        args = {"files": ["src/billing.py"]}
        if self.name == "codex":
            search = {"search": "engram check pitfalls before editing"}
            return [search, {"call": "check", "namespace": "mcp__engram", "args": args}]
        return [{"call": self.engram_tool_prefix + "check", "args": args}]

    def command(self, binary: Path, project: Project, prompt: str) -> list[str]:
        if self.name == "claude-code":
            # acceptEdits: the person lets the agent edit; a hook that asks still asks
            # and lets it run shell commands (else -p refuses them: "requires approval")
            return [
                str(binary),
                "-p",
                prompt,
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                "Bash",
            ]
        if self.name == "codex":
            return [
                str(binary),
                "exec",
                "-c",
                'model_providers.fake.base_url="@BASE@/v1"',
                # Codex's own sandbox needs kernel features a test namespace may lack; the
                # network namespace around the run is the sandbox here
                "--dangerously-bypass-approvals-and-sandbox",
                prompt,
            ]
        if self.name == "gemini-cli":
            # yolo: headless Gemini CLI refuses a shell command it would have to confirm
            return [str(binary), "-p", prompt, "-m", "gemini-2.5-flash", "--approval-mode", "yolo"]
        return [str(binary), "run", prompt]

    def prepare(self, project: Project) -> dict[str, str]:
        """Write the agent's own settings (the fake model as its provider); return its env."""
        if self.name == "claude-code":
            # the person accepted the workspace trust dialog and approved .mcp.json's server
            # once, as Claude Code asks them to (before that it ignores the project's
            # permissions.allow and does not start the server)
            state = {"hasTrustDialogAccepted": True, "enabledMcpjsonServers": ["engram"]}
            claude = project.home / ".claude.json"
            claude.write_text(json.dumps({"projects": {str(project.root): state}}), "utf-8")
            return {
                "ANTHROPIC_BASE_URL": "@BASE@",
                "ANTHROPIC_API_KEY": "sk-ant-fake-key",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }
        if self.name == "codex":
            config = project.home / ".codex" / "config.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            old = config.read_text(encoding="utf-8") if config.exists() else ""
            # top-level keys first: engram setup may have written tables already
            config.write_text(
                'model = "gpt-5.5"\nmodel_provider = "fake"\n\n'
                f"{old}\n"
                '[model_providers.fake]\nname = "fake"\nbase_url = "http://127.0.0.1:9/v1"\n'
                'wire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\n'
                "request_max_retries = 0\nstream_max_retries = 0\n"
                + (
                    ""
                    if f'[projects."{project.root}"]' in old
                    else f'\n[projects."{project.root}"]\ntrust_level = "trusted"\n'
                ),
                encoding="utf-8",
            )
            with config.open("a", encoding="utf-8") as out:
                out.write(codex_trusted_hooks(project.root / ".codex" / "hooks.json"))
            return {"FAKE_MODEL_KEY": "fake-key", "RUST_LOG": "error"}
        if self.name == "gemini-cli":
            settings = project.home / ".gemini" / "settings.json"
            settings.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(settings.read_text(encoding="utf-8")) if settings.exists() else {}
            data.setdefault("security", {})["auth"] = {"selectedType": "gemini-api-key"}
            data.setdefault("privacy", {})["usageStatisticsEnabled"] = False
            data.setdefault("general", {})["enableAutoUpdate"] = False
            settings.write_text(json.dumps(data), encoding="utf-8")
            # the person trusts the project's folder (else Gemini CLI ignores its settings)
            trusted = settings.parent / "trustedFolders.json"
            trusted.write_text(json.dumps({str(project.root): "TRUST_FOLDER"}), encoding="utf-8")
            return {
                "GOOGLE_GEMINI_BASE_URL": "@BASE@",
                "GEMINI_API_KEY": "fake-key",
                "GEMINI_CLI_NO_RELAUNCH": "true",
            }
        config = {
            "provider": {
                "fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": "@BASE@/v1", "apiKey": "fake-key"},
                    "models": {"fake-model": {"name": "Fake", "tool_call": True}},
                }
            },
            "model": "fake/fake-model",
            "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"},
            "autoupdate": False,
            "share": "disabled",
        }
        return {
            # OpenCode runs `npm install @opencode-ai/plugin` in .opencode/ before it loads a
            # project's plugins, and waits for it: npm takes it from the npm cache that `make
            # agents` filled (package.json pins it), as the namespace has no registry
            "npm_config_offline": "true",
            "npm_config_cache": harness.npm_cache(),
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        }


AGENTS = {
    "claude-code": Agent("claude-code", "Read", "mcp__engram__"),
    "codex": Agent("codex", "exec_command", "mcp__engram__"),
    "gemini-cli": Agent("gemini-cli", "read_file", "mcp_engram_"),
    "opencode": Agent("opencode", "read", "engram_"),
}
