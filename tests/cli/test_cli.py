"""The CLI as a user sees it: exact output, --json, aliases, -C, errors, and README agreement."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from engram.__main__ import app
from engram.cli.app import JsonOpt
from engram.cli.options import Values
from engram.operations import Param
from tests.conftest import EXAMPLES, run_cli
from tests.helpers.places import ROOT

README = ROOT / "README.md"
runner = CliRunner()


def invoke(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    code, out, _ = invoke("-C", str(root), "init", "--project", "shop")
    assert code == 0, out
    assert out.splitlines()[:4] == [
        "created .engram/config.yaml",
        "created .engram/memories.jsonl",
        "created .engram/.gitignore",
        "project: shop",
    ]
    return root


def test_init_is_idempotent_and_writes_gitignore(repo: Path) -> None:
    code, out, _ = invoke("-C", str(repo), "init")
    assert code == 0
    assert out.splitlines()[0].endswith(".engram already set up")
    ignored = (repo / ".engram/.gitignore").read_text().splitlines()
    assert {"index/", "state/", ".*.tmp"} <= set(ignored)  # temp files of killed writes too
    assert (repo / ".engram/memories.jsonl").read_bytes() == b""


def test_remember_recall_get_update_forget(repo: Path) -> None:
    c = ("-C", str(repo))
    code, out, _ = invoke(
        *c,
        "remember",
        "Use UTC everywhere",
        "Store timestamps in UTC.",
        "--kind",
        "decision",
        "--tags",
        "time",
        "-t",
        "db",
        "--files",
        "app/models.py,app/db.py",
        "-i",
        "4",
    )
    assert code == 0
    rid = out.strip()
    assert re.fullmatch(r"[a-z2-7]{26}", rid)
    code, out, _ = invoke(*c, "recall", "timestamps utc")
    assert code == 0
    assert out.splitlines()[0].startswith(f" 1. {rid[:8]}  decision     Use UTC everywhere  (")
    assert out.splitlines()[1] == "    Store timestamps in UTC."
    code, out, _ = invoke(*c, "search", "utc", "--json")
    data = json.loads(out)
    assert data["count"] == 1 and data["hits"][0]["memory"]["files"] == [
        "app/db.py",
        "app/models.py",
    ]
    assert data["hits"][0]["memory"]["tags"] == ["db", "time"]
    code, out, _ = invoke(*c, "get", rid[:5])
    assert out.splitlines()[:2] == [f"{rid}  decision  [active]", "# Use UTC everywhere"]
    code, out, _ = invoke(*c, "update", rid[:5], "--status", "archived")
    assert (code, out.strip()) == (0, f"{rid} rev 2")
    code, out, _ = invoke(*c, "show", rid, "--json")
    assert json.loads(out)["status"] == "archived"
    code, out, _ = invoke(*c, "delete", rid)
    assert (code, out.strip()) == (0, f"{rid} forgotten (tombstone kept)")
    code, out, err = invoke(*c, "recall", "utc")
    assert (code, out) == (0, "")
    assert "no memories match" in err


def test_save_alias_dedupes_and_reports(repo: Path) -> None:
    c = ("-C", str(repo))
    _, first, _ = invoke(*c, "save", "Same thing", "body")
    code, again, err = invoke(*c, "save", "Same thing", "body")
    assert code == 0 and again == first
    assert "already saved: duplicate_count is now 1" in err
    code, out, _ = invoke(*c, "remember", "Same thing", "body", "--json")
    assert json.loads(out)["action"] == "duplicate"


def test_content_from_stdin(repo: Path) -> None:
    code, out, _ = invoke(
        "-C", str(repo), "remember", "From a pipe", "-", input="line one\nline two\n"
    )
    assert code == 0
    code, out, _ = invoke("-C", str(repo), "get", out.strip(), "--json")
    assert json.loads(out)["content"] == "line one\nline two"


def test_errors_have_message_and_hint(repo: Path, tmp_path: Path) -> None:
    code, _, err = invoke("-C", str(repo), "get", "nosuchid")
    assert code == 1
    assert err.splitlines() == [
        "error: no memory with id nosuchid",
        "hint: run `engram recall WORDS` to find the id",
    ]
    code, _, err = invoke("-C", str(repo), "remember", "x", "--kind", "banana")
    assert code == 1 and err.startswith("error: unknown kind 'banana'")
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    code, _, err = invoke("-C", str(elsewhere), "recall", "x")
    assert code == 1 and "hint: run `engram init`" in err
    code, _, err = invoke("-C", str(tmp_path / "missing"), "stats")
    assert code == 1 and "no such folder" in err


def _twins(repo: Path) -> None:
    """Store two memories whose ids share the prefix ``twin``."""
    from engram.service import Engram

    stamp = "2026-01-01T00:00:00.000Z"
    with Engram.open(repo) as engram:
        engram.project_ws.store.put(
            [
                {"id": f"twin{n}" + "a" * 20, "kind": kind, "title": title,
                 "created_at": stamp, "updated_at": stamp, "rev": 1}
                for n, kind, title in ((1, "decision", "Use UTC"), (2, "pitfall", "Cron in UTC"))
            ]
        )  # fmt: skip


def test_forget_needs_four_characters_and_names_the_candidates(repo: Path) -> None:
    _twins(repo)
    for command in ("forget", "delete"):
        code, _, err = invoke("-C", str(repo), command, "t")
        assert code == 1
        assert err.splitlines()[0] == (
            "error: id prefix 't' is too short to forget a memory: "
            "give at least 4 characters of its id"
        )
    code, _, err = invoke("-C", str(repo), "update", "tw", "--title", "x")
    assert code == 1 and "too short to update" in err
    code, _, err = invoke("-C", str(repo), "forget", "twin")
    assert code == 1
    first = err.splitlines()[0]
    assert f"twin1{'a' * 20} (decision) 'Use UTC'" in first
    assert f"twin2{'a' * 20} (pitfall) 'Cron in UTC'" in first
    assert "hint: type more characters of the id" in err
    code, out, _ = invoke("-C", str(repo), "get", "twin1", "--json")
    assert code == 0 and json.loads(out)["title"] == "Use UTC"  # nothing was forgotten
    code, _, _ = invoke("-C", str(repo), "forget", "twin2")
    assert code == 0


EVIL = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[1A\r\x08\x9b31m"  # clipboard write, clear, CSI


def test_terminal_escapes_in_memories_are_shown_not_obeyed(repo: Path) -> None:
    """A teammate's memory must not clear the screen or write the clipboard when printed."""
    c = ("-C", str(repo))
    done = run_cli(
        *c, "remember", f"Pool size {EVIL}[bold]x[/bold]", f"keep it at 20 {EVIL}\nsecond line",
        "--tags", "db,[link=https://evil.example]t[/link]", "--files", "db/pool.py",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rid = done.stdout.decode().split()[0]
    runs = [
        ("get", rid),
        ("recall", "pool"),
        ("why", rid),
        ("related", rid),
        ("timeline", rid),
        ("context",),
        ("check", "db/pool.py"),
        ("stats",),
        ("forget", "zz"),  # an error message
    ]
    for args in runs:
        out = run_cli(*c, *args)
        text = out.stdout + out.stderr
        for byte in (b"\x1b", b"\x07", b"\x08", b"\r", "\x9b".encode()):
            assert byte not in text, (args, text)
    shown = run_cli(*c, "get", rid).stdout.decode()
    assert "\\x1b]52;c;ZXZpbA==\\x07" in shown and "\\x1b[2J" in shown and "\nsecond line" in shown
    assert "[bold]x[/bold]" in shown  # markup is text, not style
    stats = run_cli(*c, "stats").stdout.decode()
    assert "[link=https://evil.example]t[/link]" in stats
    # --json is JSON: every control character escaped, the value itself unchanged.
    raw = run_cli(*c, "get", rid, "--json").stdout
    assert b"\x1b" not in raw and "\x9b".encode() not in raw
    assert "\x1b]52;c;ZXZpbA==\x07\x1b[2J" in json.loads(raw)["title"]


def test_stats_doctor_index_version_json(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "ex"
    shutil.copytree(
        EXAMPLES / ".engram", root / ".engram", ignore=shutil.ignore_patterns("index", "state")
    )
    c = ("-C", str(root))
    code, out, _ = invoke(*c, "stats", "--json")
    assert code == 0 and json.loads(out)["stores"][0]["memories"] == 32
    code, out, _ = invoke(*c, "stats")
    assert "32 memories, 1 tombstone," in out
    code, out, _ = invoke(*c, "doctor", "--json")
    assert code == 0 and json.loads(out)[0]["severity"] == "ok"
    code, out, _ = invoke(*c, "index", "--rebuild", "--json")
    data = json.loads(out)
    assert data["search_index"] == {"rebuilt": True, "records": 33, "changed": 33}
    # The example's two ADR-sourced decisions were written by people: indexing leaves them be.
    assert data["adr"]["archived"] == 0 and data["writes"] == 0
    code, out, _ = invoke("version", "--json")
    assert set(json.loads(out)) >= {"engram", "python", "tantivy"}


def test_export_import_files(repo: Path, tmp_path: Path) -> None:
    invoke("-C", str(repo), "remember", "Exported", "text")
    target = tmp_path / "out.json"
    code, _, err = invoke("-C", str(repo), "export", str(target))
    assert code == 0 and "exported 1 record to" in err
    other = tmp_path / "other"
    other.mkdir()
    invoke("-C", str(other), "init")
    code, out, _ = invoke("-C", str(other), "import", str(target))
    assert (code, out.strip()) == (0, "engram: added 1, updated 0, unchanged 0, skipped 0")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope", encoding="utf-8")
    code, _, err = invoke("-C", str(other), "import", str(bad))
    assert code == 1 and f"{bad}: not a file engram can import" in err


def test_python_dash_m_and_console_script_agree(repo: Path) -> None:
    result = run_cli("-C", str(repo), "remember", "Via a process", "x", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["action"] == "created"
    script = Path(sys.executable).parent / "engram"
    if script.exists():
        import subprocess

        out = subprocess.run(
            [str(script), "-C", str(repo), "recall", "process"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "Via a process" in out


def _help_commands() -> set[str]:
    code, out, _ = invoke("--help")
    assert code == 0
    commands = out.split("Commands:", 1)[1]
    return set(re.findall(r"^  ([\w-]+)\s", commands, flags=re.MULTILINE))


def _readme_commands() -> set[str]:
    table = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            first = row.split("|")[1]
            names.update(re.findall(r"`([\w-]+)`", first))
    return names


def test_readme_and_help_list_the_same_commands() -> None:
    assert _help_commands() == _readme_commands()


def test_readme_options_exist_in_help() -> None:
    """Every --option the README's command table names is accepted by that command."""
    table = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        command = re.findall(r"`([\w-]+)`", row.split("|")[1])[0]
        _, out, _ = invoke(command, "--help")
        if "Commands:" in out:  # a group: its subcommands take the options
            listed = out.split("Commands:", 1)[1]
            for sub in re.findall(r"^  ([a-z][\w-]*)", listed, flags=re.MULTILINE):
                out += invoke(command, sub, "--help")[1]
        for option in re.findall(r"--[a-z][a-z-]+", row.split("|")[2]):
            assert option in out, f"README says `{command} {option}` but --help does not"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("```", 2)[1]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()[1:]] == [
        "make demo",
        "make test",
    ]
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


def _typer_options(command_name: str) -> set[str]:
    import typer.main

    command = typer.main.get_command(app).commands[command_name]  # type: ignore[attr-defined]
    return {opt for param in command.params for opt in param.opts if opt.startswith("-")}


FAST_OPERATIONS = {"recall": "recall", "search": "recall", "check": "check", "context": "context"}


def _declared_options(operation: str) -> set[str]:
    """Return every CLI option name the declaration of ``operation`` gives its command."""
    from engram.cli.options import option_names
    from engram.operations import OPERATIONS

    params = OPERATIONS[operation].params_for("cli")
    return {name for p in params if not p.argument for name in option_names(p)}


@pytest.mark.parametrize("command_name", ["recall", "search", "check", "context"])
def test_fast_path_accepts_what_typer_accepts(command_name: str) -> None:
    from engram.cli import FAST_COMMANDS, fast_options

    assert command_name in FAST_COMMANDS
    assert fast_options(command_name) == _typer_options(command_name) - {"--help", "-h"}
    # Every option of the declaration, on both paths.
    declared = _declared_options(FAST_OPERATIONS[command_name])
    assert declared <= _typer_options(command_name)
    assert declared <= (fast_options(command_name) or set())


def _sample(param: Param) -> str:
    """Return a value of the declared parameter's type that the example store can answer."""
    if param.enum:
        return param.enum[0]
    if param.type == "integer":
        low = int(param.minimum or 0)
        high = int(param.maximum) if param.maximum is not None else low + 100
        return str(min(max(low, 2) + 1, high))
    if param.type == "date":
        return "2020-01-01"
    return {"files": "api", "project": "ledger-api", "text": "redis"}.get(param.name, "money")


def _declared_lines() -> list[list[str]]:
    """Return one command line per option name of each fast command's declaration."""
    from engram.cli.options import option_names
    from engram.operations import OPERATIONS

    lines: list[list[str]] = []
    for command in ("recall", "check", "context"):
        params = [p for p in OPERATIONS[command].params_for("cli") if not p.argument]
        # check needs files (or --text): the line with each option alone names them too.
        words = {"recall": ["money"], "check": ["--files", "api"]}.get(command, [])
        every: list[str] = []
        for param in params:
            value = [] if param.type == "boolean" else [_sample(param)]
            for n, name in enumerate(option_names(param)):
                lines.append([command, *words, name, *value, *(["--json"] if n else [])])
            long = option_names(param)[0]
            every.append(f"{long}={value[0]}" if value else long)
        lines.append([command, *every, *words, "--json"])
    return lines


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    root = tmp_path_factory.mktemp("declared") / "ex"
    shutil.copytree(
        EXAMPLES / ".engram", root / ".engram", ignore=shutil.ignore_patterns("index", "state")
    )
    return root


@pytest.mark.parametrize("args", _declared_lines(), ids=" ".join)
def test_every_declared_option_prints_the_same_on_both_paths(
    example: Path,
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A parameter added to a fast command's declaration is proven on the fast path and typer's."""
    from engram.cli import fast_command, main

    argv = ["-C", str(example), *args]
    assert fast_command(argv) is not None, argv
    monkeypatch.setattr(sys, "argv", ["engram", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
        raise SystemExit(0)
    fast = capsys.readouterr()
    code, out, err = invoke(*argv)
    assert (exited.value.code or 0, fast.out, fast.err) == (code, out, err)
    assert code == 0, err


def _declared_commands() -> list[tuple[str, Any]]:
    """Return (command path, callback) of every command whose options come from a declaration."""
    from engram.cli.options import declared

    def name(info: Any) -> str:
        return str(info.name or info.callback.__name__.replace("_", "-"))

    found = [(name(info), info.callback) for info in app.registered_commands]
    for sub in app.registered_groups:
        found += [
            (f"{sub.name} {name(info)}", info.callback)
            for info in sub.typer_instance.registered_commands  # type: ignore[union-attr]
        ]
    return [(path, callback) for path, callback in found if declared(callback) is not None]


def test_declared_commands_offer_their_declarations() -> None:
    """Each declared parameter is its command's option or argument: names, help, limits."""
    import typer.main
    from typer.core import TyperArgument

    from engram.cli.options import declared, default, option_names

    commands = dict(_declared_commands())
    expected = {
        "remember", "save", "recall", "search", "get", "show", "why", "related", "update",
        "forget", "delete", "timeline", "judge", "context", "check", "session start",
        "session end", "session summary", "prompt", "capture", "train", "insights delete",
        "export", "sync", "doctor",
    }  # fmt: skip
    assert expected <= set(commands)
    root = typer.main.get_command(app)
    for path, callback in commands.items():
        found = declared(callback)
        assert found is not None
        command: Any = root
        for part in path.split():
            command = command.commands[part]
        if path in {"get", "why", "remember", "recall", "prompt", "timeline"}:
            assert command.help.split("\n")[0] == found.operation.summary, path
        by_name = {param.name: param for param in command.params}
        for param in found.params:
            option = by_name[param.name]
            if param.argument:
                assert isinstance(option, TyperArgument), (path, param.name)
            else:
                assert set(option.opts) == set(option_names(param)), (path, param.name)
            assert option.help.startswith(param.help), (path, param.name)  # type: ignore[attr-defined]
            assert option.required == (param.required and param.type != "boolean"), path
            assert (option.min, option.max) == (param.minimum, param.maximum), (path, param.name)
            if not option.required:
                assert option.default == default(param), (path, param.name)


def test_a_filter_added_to_a_declaration_reaches_both_paths() -> None:
    """A new recall filter needs no edit of the CLI: typer, the fast path and the body get it."""
    from engram.cli.fast import shape_of
    from engram.cli.options import options
    from engram.operations.memory import RECALL

    # A filter no declaration has (yet): the CLI offers it without an edit.
    reviewer = Param("reviewer", "strings", "Only these.", target="reviewers", filter=True)
    grown = RECALL._replace(params=(*RECALL.params, reviewer))
    seen: list[dict[str, Any]] = []

    @options(grown)
    def recall(ctx: typer.Context, values: Values, as_json: JsonOpt = False) -> None:
        seen.append(values.filters())

    sandbox = typer.Typer()
    sandbox.command()(recall)
    sandbox.command("other")(lambda: None)
    result = CliRunner().invoke(sandbox, ["recall", "x", "--reviewer", "ann", "-k", "decision"])
    assert result.exit_code == 0, result.output
    assert seen[-1]["reviewers"] == ["ann"] and seen[-1]["kinds"] == ["decision"]
    assert set(seen[-1]) == {p.key for p in RECALL.filters} | {"reviewers"}
    fast = shape_of(recall)
    assert fast is not None and fast.options["--reviewer"].kind == "list"


@pytest.mark.parametrize(
    "args",
    [
        ["recall", "idempotency"],
        ["search", "idempotency keys", "-n", "2"],
        ["recall", "--kind", "decision", "--kind=pitfall", "redis"],
        ["recall", "money", "-t", "rounding", "--limit=3", "--offset", "1"],
        ["recall", "-f", "api/idempotency.py", "--json"],
        ["recall", "--status", "superseded", "--scope", "project", "--project", "ledger-api", "x"],
        ["recall", "no-such-word-anywhere"],
        ["recall", "--kind", "banana", "x"],
        ["check", "--files", "api/idempotency.py"],
        ["check", "-f", "api/idempotency.py,api/money.py", "--text", "redis", "--json"],
        ["check", "--budget=120", "--files", "api/idempotency.py"],
        ["check"],
        ["context"],
        ["context", "--budget", "300", "-q", "money"],
        ["context", "--json", "--query=idempotency"],
    ],
)
def test_fast_path_prints_what_typer_prints(
    tmp_path: Path,
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    from engram.cli import fast_command, main

    root = tmp_path / "ex"
    shutil.copytree(
        EXAMPLES / ".engram", root / ".engram", ignore=shutil.ignore_patterns("index", "state")
    )
    argv = ["-C", str(root), *args]
    assert fast_command(argv) is not None
    monkeypatch.setattr(sys, "argv", ["engram", *argv])
    # click names the program from __main__: under `python -m pytest` that would be
    # "python -m pytest.engram"; the console script's __main__ has no package.
    monkeypatch.setattr(sys.modules["__main__"], "__package__", None, raising=False)
    with pytest.raises(SystemExit) as exited:
        main()
        raise SystemExit(0)
    fast = capsys.readouterr()
    code, out, err = invoke(*argv)
    assert (exited.value.code or 0, fast.out, fast.err) == (code, out, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "--help"],
        ["recall", "a", "b"],
        ["recall", "-n"],
        ["recall", "-n", "x"],
        ["recall", "--unknown", "x"],
        ["recall", "-n", "\N{FULLWIDTH DIGIT THREE}"],
        ["recall", "--json=yes"],
        ["check", "--files"],
        ["check", "stray-word"],
        ["context", "--budget", "-1"],
        ["context", "--help"],
        ["stats"],
        ["-C"],
        [],
    ],
)
def test_fast_path_leaves_the_rest_to_typer(argv: list[str]) -> None:
    from engram.cli import fast_command

    assert fast_command(argv) is None


def test_the_adapter_commands_agree_with_the_adapters_that_serve_them() -> None:
    """The CLI declares mcp, daemon, serve and tui; their names and defaults are the adapters'."""
    import importlib

    from engram import cli, http_api, mcp_server
    from engram.__main__ import RUNNERS

    assert set(RUNNERS) == set(cli.ADAPTER_COMMANDS)
    for target in RUNNERS.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target
    assert tuple(cli.ToolProfile) == mcp_server.PROFILES
    assert tuple(cli.CompatNames) == mcp_server.COMPATS
    assert cli.MCP_BUDGET == mcp_server.DEFAULT_BUDGET
    served = (cli.HTTP_HOST, cli.HTTP_PORT, cli.HTTP_TOKEN_ENV)
    assert served == (http_api.DEFAULT_HOST, http_api.DEFAULT_PORT, http_api.TOKEN_ENV)
    code, out, _ = invoke("--help")
    assert code == 0
    for name, command in cli.ADAPTER_COMMANDS.items():
        summary = (command.__doc__ or "").split("\n")[0][:30]
        assert re.search(rf"^\s+{name}\s+{re.escape(summary)}", out, re.MULTILINE), name
