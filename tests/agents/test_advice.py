"""Advice in the reader's words: MCP answers name tools and parameters, the CLI its commands.

A real MCP session walks through the calls whose answers carry advice (an unknown id, a stale
memory, a near-duplicate save, an empty recall, a check and a briefing cut to their budgets, a
session's end, a resource, the prompts) and no answer names a CLI command or an option; the
same situations on the CLI, run as processes, still name the CLI's commands.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engram import errors
from engram.index import semantic
from engram.operations import OPERATIONS, advice
from engram.service import Engram
from tests.mcp_server.test_mcp import connect, run
from tests.project.test_staleness import AUTH_V1, new_repo

# `engram` and one of its commands, or an option: what an MCP answer must never say.
COMMANDS = sorted(
    {op.command.split()[0] for op in OPERATIONS.values() if op.command}
    | {"init", "index", "mcp", "setup", "hook", "serve", "daemon", "tui", "resolve", "version"}
)
CLI_WORDS = re.compile(rf"\bengram (?:{'|'.join(COMMANDS)})\b|(?<![\w-])--[a-z][a-z-]*")


def cli_words(text: str) -> list[str]:
    """Return what in ``text`` is CLI advice: `engram COMMAND …` or a --flag."""
    return [match.group(0) for match in CLI_WORDS.finditer(text)]


# -- the renderers --------------------------------------------------------------------------------


def test_the_cli_and_mcp_say_the_same_advice_in_their_own_words() -> None:
    served = advice.Tools(["get", "recall", "update", "context", "check"])
    cases = [
        (("get",), {"id": "ID"}, "`engram get ID`", "`get` with id=ID"),
        (("recall",), {"kind": "KIND"}, "`engram recall --kind KIND`", "`recall` with kind=KIND"),
        (("context",), {"budget": "N"}, "`engram context --budget N`", "`context` with budget=N"),
        (
            ("update",),
            {"id": "7f3k", "status": "superseded"},
            "`engram update 7f3k --status superseded`",
            "`update` with id=7f3k, status=superseded",
        ),
        (("session_start",), {}, "`engram session start`", "`engram session start` (the user's"),
    ]
    for (op,), args, on_cli, in_mcp in cases:
        assert advice.cmd(op, **args) == on_cli  # the CLI's is the default
        with advice.using(served):
            assert advice.cmd(op, **args).startswith(in_mcp), op
    assert advice.run("doctor", fix=True) == "run `engram doctor --fix`"
    with advice.using(served):
        assert advice.run("get", id="ID") == "call `get` with id=ID"
        # doctor is not a tool of this server: it is the person's to run.
        assert advice.run("doctor", fix=True) == "the user can run `engram doctor --fix`"
        assert (advice.name("check"), advice.option("check", "budget")) == ("check", "budget")
    assert (advice.name("check"), advice.option("check", "budget")) == ("engram check", "--budget")
    with pytest.raises(KeyError, match="no declared operation"):
        advice.cmd("no_such_operation")
    with pytest.raises(KeyError, match="no parameter"):
        advice.cmd("get", idd="ID")


def test_hints_written_for_the_cli_render_as_tools_once_and_stay_on_the_cli() -> None:
    served = advice.Tools(["recall", "get"])
    not_found = errors.NotFound.hint
    assert advice.render(not_found, advice.CLI) == not_found
    assert advice.render(not_found, served) == "call `recall` with query=WORDS to find the id"
    corrupt = advice.render(errors.CorruptStore.hint, served)
    assert corrupt == (
        "the user can run `engram doctor` to see every problem, `engram doctor --fix` (the "
        "user's command) to repair"
    )
    with advice.using(advice.Tools(["doctor"])):
        assert advice.render(errors.CorruptStore.hint) == (
            "call `doctor` to see every problem, `doctor` with fix=true to repair"
        )
    # No operation of the reader's (init, index): the person's; rendering again changes nothing.
    for hint in (errors.IndexError_.hint, errors.NotInitialized.hint, corrupt):
        once = advice.render(hint, served)
        assert advice.render(once, served) == once
    assert advice.render(errors.IndexError_.hint, served) == (
        "the user can run `engram index --rebuild`"
    )
    # Every default hint of the error tree renders for MCP with no CLI advice left for an agent.
    for error in (errors.NotFound, errors.ConfigError, errors.SyncError, errors.CorruptStore):
        text = advice.render(error.hint, advice.Tools(OPERATIONS))
        assert "`engram" not in text, (error, text)


# -- a real MCP session ---------------------------------------------------------------------------


@pytest.fixture
def stale_repo(tmp_path: Path) -> tuple[Path, str]:
    """A project whose memory about src/auth.py was saved before auth.py changed twice."""
    root = tmp_path / "svc"
    repo = new_repo(root)
    engram, _ = Engram.init(root, "svc")
    with engram:
        rid = engram.remember(
            "Token rotation lives in login",
            "login() issues and rotates the session token.",
            kind="decision",
            files=["src/auth.py"],
        ).record["id"]
        for n in range(12):
            engram.remember(
                f"Auth pitfall number {n} about token expiry",
                f"Tokens issued by login expire after {n + 1} hours; refresh before.",
                kind="pitfall",
                files=["src/auth.py"],
            )
    for n in range(2):
        repo.commit(f"Auth change {n}", {"src/auth.py": AUTH_V1 + f"# change {n}\n".encode()})
    return root, rid


def test_an_mcp_session_hears_tools_and_parameters_never_cli_commands(
    stale_repo: tuple[Path, str],
) -> None:
    root, rid = stale_repo
    texts: list[str] = []

    async def scenario() -> None:
        async with connect(root) as client:

            async def call(name: str, args: dict[str, Any]) -> Any:
                result = await client.session.call_tool(name, args)
                text = result.content[0].text  # type: ignore[union-attr]
                texts.append(text)
                return json.loads(text)

            missing = await call("get", {"id": "nosuchid"})
            assert missing["hint"] == "call `recall` with query=WORDS to find the id"
            await call("update", {"id": "zzzzzzzz", "title": "x"})
            short = await call("remember", {"title": "t", "links": ["supersedes:ab"]})
            assert "`recall` with query=WORDS" in short["hint"]

            found = await call("recall", {"query": "token rotation login"})
            assert found["hits"][0]["may_be_stale"].startswith("src/auth.py changed in 2")
            assert "`get` with id=ID reads one in full" in found["note"]
            empty = await call("recall", {"query": "kubernetes helm chart"})
            assert empty["hits"] == [] and "hint" in empty
            memory = await call("get", {"id": rid[:8]})
            assert "may be stale" in memory["note"]
            await call("why", {"id": rid[:8]})

            checked = await call("check", {"files": ["src/auth.py"], "budget": 100})
            assert checked["text"].startswith("check src/auth.py: ")
            assert "`get` with id=ID reads one in full" in checked["text"]
            assert "raise budget." in checked["text"]
            briefing = await call("context", {"budget": 120})
            assert (
                "`recall` with kind=KIND or a larger `context` with budget=N"
                in (briefing["briefing"])
            )

            first = {"title": "Store user sessions in Postgres", "kind": "decision"}
            await call("remember", {**first, "content": "Sessions live in Postgres, not Redis."})
            again = await call(
                "remember",
                {
                    "title": "Keep user sessions in Postgres",
                    "kind": "decision",
                    "content": "Session state lives in Postgres rather than Redis.",
                },
            )
            if semantic.available():  # the server loaded the model for the recalls above
                assert again["similar"], again
                assert "`update` with id=ID, status=superseded" in again["hint"]

            await call("session_start", {"session_id": "s-advice"})
            await call("session_summary", {"goal": "Tidy auth", "session_id": "s-advice"})
            await call("session_end", {"session_id": "s-advice"})
            await call("session_end", {"session_id": "no-such-session"})
            await call("capture", {"content": "nothing to learn here"})

            resource = await client.session.read_resource("engram://context")
            texts.append(resource.contents[0].text)  # type: ignore[union-attr]
            for name in ("memory-protocol", "recall-first", "session-summary", "write-memory"):
                prompt = await client.session.get_prompt(name, {"task": "auth"})
                texts.append(prompt.messages[0].content.text)  # type: ignore[union-attr]
            tools = (await client.session.list_tools()).tools
            texts.extend(tool.description or "" for tool in tools)
            texts.extend(
                str(prop.get("description", ""))
                for tool in tools
                for prop in tool.input_schema["properties"].values()
            )

    run(scenario)
    said = {text[:80]: cli_words(text) for text in texts if cli_words(text)}
    assert said == {}


def test_the_cli_still_names_its_commands(stale_repo: tuple[Path, str]) -> None:
    root, _ = stale_repo

    def engram(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "engram", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    missing = engram("get", "nosuchid")
    assert missing.returncode == 1
    assert "hint: run `engram recall WORDS` to find the id" in missing.stderr
    checked = engram("check", "--files", "src/auth.py", "--budget", "100")
    assert checked.stdout.startswith("engram check src/auth.py: ")
    assert "`engram get ID` reads one in full" in checked.stdout
    assert "raise --budget." in checked.stdout
    briefing = engram("context", "--budget", "120")
    assert "`engram recall --kind KIND` or a larger `engram context --budget N`" in (
        briefing.stdout
    )


def test_the_recall_first_prompt_teaches_check_before_editing() -> None:
    from engram.mcp_server.prompts import render_prompt

    description, text = render_prompt("recall-first", {"task": "fix rounding in money.py"})
    assert "check" in description
    assert "fix rounding in money.py" in text
    assert "call recall with the key words" in text.lower()
    assert "call check with files=[" in text
    assert text.index("recall with the key words") < text.index("check with files=")
    assert cli_words(text) == []
