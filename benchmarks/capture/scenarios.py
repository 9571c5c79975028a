"""The scripted sessions of the capture set: what the person said, what the agent did.

Each scenario is a list of steps, written once and rendered by ``make.py`` into each agent's
own on-disk transcript format (Claude Code's session JSONL, Codex's rollout JSONL, Gemini CLI's
chat JSONL). A step is one of:

    ("user", text)                      the person's message
    ("say", text)                       the agent's text reply
    ("run", command, exit_code, output) a shell command the agent ran and what it printed
    ("read", path, content)             a file the agent read
    ("edit", path, old, new)            a search-and-replace edit of a file
    ("write", path, content)            a whole file written

What a careful engineer would have saved from each session is in ``labels.json``, written by
hand before the extractor was run on any of them.
"""

from __future__ import annotations

from typing import Any, Final

Step = tuple[Any, ...]

SCENARIOS: Final[dict[str, list[Step]]] = {
    "bugfix-isoformat": [
        ("user", "tests/test_dates.py fails on CI, can you fix it?"),
        (
            "run",
            "python -m pytest -q tests/test_dates.py",
            1,
            "F..\n=========================== FAILURES ===========================\n"
            "____________________________ test_parse_iso_utc ____________________________\n"
            "    def test_parse_iso_utc():\n"
            ">       assert parse_when('2024-01-05T10:00:00Z').tzinfo is not None\n"
            "src/dates.py:12: in parse_when\n"
            "    return datetime.fromisoformat(text)\n"
            "E   ValueError: Invalid isoformat string: '2024-01-05T10:00:00Z'\n"
            "FAILED tests/test_dates.py::test_parse_iso_utc - ValueError: Invalid isoformat "
            "string: '2024-01-05T10:00:00Z'\n1 failed, 2 passed in 0.11s",
        ),
        (
            "read",
            "src/dates.py",
            "from datetime import datetime\n\n\ndef parse_when(text: str) -> datetime:\n"
            '    """Parse an ISO 8601 time."""\n    return datetime.fromisoformat(text)\n',
        ),
        (
            "edit",
            "src/dates.py",
            "    return datetime.fromisoformat(text)\n",
            '    # Python 3.10 fromisoformat rejects a trailing "Z".\n'
            '    return datetime.fromisoformat(text.replace("Z", "+00:00"))\n',
        ),
        ("run", "python -m pytest -q tests/test_dates.py", 0, "...\n3 passed in 0.09s"),
        (
            "say",
            'Fixed: `datetime.fromisoformat` on Python 3.10 does not accept a trailing "Z", '
            "so `parse_when` now maps it to +00:00. All three date tests pass.",
        ),
    ],
    "bugfix-cart-undefined": [
        ("user", "npm test is red since the cart refactor"),
        (
            "run",
            "npm test",
            1,
            "> shop@1.4.0 test\n> vitest run\n\n FAIL  src/cart.test.js > total of an empty cart\n"
            "TypeError: Cannot read properties of undefined (reading 'map')\n"
            " ❯ cartTotal src/cart.js:7:22\n\n Test Files  1 failed (1)\n      Tests  1 failed | "
            "11 passed (12)",
        ),
        (
            "read",
            "src/cart.js",
            "export function cartTotal(cart) {\n  const prices = cart.items.map((i) => i.price * "
            "i.qty);\n  return prices.reduce((a, b) => a + b, 0);\n}\n",
        ),
        (
            "edit",
            "src/cart.js",
            "  const prices = cart.items.map((i) => i.price * i.qty);\n",
            "  const prices = (cart.items ?? []).map((i) => i.price * i.qty);\n",
        ),
        ("run", "npm test", 0, " Test Files  1 passed (1)\n      Tests  12 passed (12)"),
        (
            "say",
            "An empty cart has no `items` array after the refactor; `cartTotal` now treats it "
            "as empty. All 12 tests pass.",
        ),
    ],
    "bugfix-config-timeout": [
        ("user", "go test fails in config, please look"),
        (
            "run",
            "go test ./...",
            1,
            "--- FAIL: TestDefaults (0.00s)\n    config_test.go:14: got timeout 0s, want 30s\n"
            "FAIL\nFAIL\texample.com/relay/config\t0.004s\nok  \texample.com/relay/server\t0.021s",
        ),
        (
            "read",
            "config/config.go",
            "package config\n\ntype Config struct {\n\tTimeout time.Duration\n}\n\n"
            "func Load(path string) (Config, error) {\n\tvar c Config\n\treturn c, decode(path, "
            "&c)\n}\n",
        ),
        (
            "edit",
            "config/config.go",
            "\tvar c Config\n",
            "\tc := Defaults()\n",
        ),
        (
            "write",
            "config/defaults.go",
            'package config\n\nimport "time"\n\n// Defaults is what Load starts from: a '
            "missing key keeps its default.\nfunc Defaults() Config {\n\treturn Config{Timeout: 30 "
            "* time.Second}\n}\n",
        ),
        (
            "run",
            "go test ./...",
            0,
            "ok  \texample.com/relay/config\t0.005s\nok  \texample.com/relay/server\t0.020s",
        ),
        (
            "say",
            "Load decoded into a zero Config, so a file without `timeout` gave 0s. It now "
            "starts from `Defaults()` (new config/defaults.go).",
        ),
    ],
    "revert-loader-cache": [
        ("user", "the loader is slow, can you speed it up?"),
        (
            "edit",
            "src/loader.py",
            "def load(path):\n",
            "@functools.lru_cache(maxsize=None)\ndef load(path):\n",
        ),
        (
            "run",
            "python -m pytest -q",
            1,
            "FAILED tests/test_loader.py::test_reload_sees_new_content - AssertionError: "
            "stale value returned after reload\n1 failed, 30 passed in 0.62s",
        ),
        (
            "edit",
            "src/loader.py",
            "@functools.lru_cache(maxsize=None)\ndef load(path):\n",
            "def load(path):\n",
        ),
        ("run", "python -m pytest -q", 0, "31 passed in 0.58s"),
        (
            "say",
            "Caching `load` broke reloading (a changed file must be read again), so I took "
            "the cache out. The slowness is elsewhere: parsing, not reading.",
        ),
    ],
    "revert-makefile-xdist": [
        ("user", "make the test target run in parallel"),
        (
            "edit",
            "Makefile",
            "\tpython -m pytest -q\n",
            "\tpython -m pytest -q -n auto\n",
        ),
        (
            "run",
            "make test",
            2,
            "python -m pytest -q -n auto\nERROR: usage: __main__.py [options] [file_or_dir] "
            "[file_or_dir] [...]\n__main__.py: error: unrecognized arguments: -n\n"
            "make: *** [Makefile:4: test] Error 4",
        ),
        (
            "edit",
            "Makefile",
            "\tpython -m pytest -q -n auto\n",
            "\tpython -m pytest -q\n",
        ),
        ("run", "make test", 0, "python -m pytest -q\n88 passed in 3.10s"),
        (
            "say",
            "`-n auto` needs pytest-xdist, which is not a dependency here, so I restored the "
            "target. Add pytest-xdist to the dev dependencies first if you want parallel runs.",
        ),
    ],
    "correction-print-logging": [
        ("user", "add some logging to the sync job so we can see what it does"),
        (
            "edit",
            "src/sync.py",
            "    for batch in batches:\n",
            "    for batch in batches:\n        print(f'syncing batch {batch.id}')\n",
        ),
        ("say", "Added a print of each batch id to `run_sync`."),
        (
            "user",
            "no, don't use print for this. We always log through the structlog logger "
            "(log = structlog.get_logger()), print output is lost in production.",
        ),
        (
            "edit",
            "src/sync.py",
            "        print(f'syncing batch {batch.id}')\n",
            "        log.info('sync.batch', batch_id=batch.id)\n",
        ),
        (
            "say",
            "Switched to `log.info('sync.batch', batch_id=...)` with the module's structlog "
            "logger.",
        ),
    ],
    "correction-never-main": [
        ("user", "commit the docs fix and push it"),
        (
            "run",
            "git add docs/install.md && git commit -m 'docs: fix install steps'",
            0,
            "[main 4f2a9c1] docs: fix install steps\n"
            " 1 file changed, 3 insertions(+), 1 deletion(-)",
        ),
        ("say", "Committed. Pushing to origin main now."),
        (
            "user",
            "wait, we never push straight to main here. Push a branch and open a pull request "
            "instead; main is protected and only changes through reviewed PRs.",
        ),
        (
            "run",
            "git switch -c docs/install-steps && git push -u origin docs/install-steps",
            0,
            "Switched to a new branch 'docs/install-steps'\nbranch 'docs/install-steps' set up to "
            "track 'origin/docs/install-steps'.",
        ),
        ("say", "Pushed `docs/install-steps`; open the pull request from there."),
    ],
    "correction-no-db-mocks": [
        ("user", "please add a test for the orders endpoint"),
        (
            "write",
            "tests/test_orders.py",
            "from unittest import mock\n\nfrom app.api import list_orders\n\n\n"
            "def test_list_orders():\n    with mock.patch('app.api.db') as db:\n"
            "        db.fetch.return_value = [{'id': 1}]\n        assert list_orders() == "
            "[{'id': 1}]\n",
        ),
        ("say", "Added tests/test_orders.py mocking the database."),
        (
            "user",
            "No, don't mock the database in tests. Use the sqlite_db fixture from conftest.py, "
            "mocked queries have hidden two bugs already.",
        ),
        (
            "write",
            "tests/test_orders.py",
            "from app.api import list_orders\n\n\ndef test_list_orders(sqlite_db):\n"
            "    sqlite_db.insert('orders', {'id': 1})\n    assert [o['id'] for o in "
            "list_orders()] == [1]\n",
        ),
        ("run", "python -m pytest -q tests/test_orders.py", 0, "1 passed in 0.20s"),
        ("say", "The test now runs against the `sqlite_db` fixture."),
    ],
    "lesson-csv-bom": [
        ("user", "customers say the exported CSV shows garbage in Excel"),
        (
            "edit",
            "src/export.py",
            "    with open(path, 'w', encoding='utf-8', newline='') as out:\n",
            "    with open(path, 'w', encoding='utf-8-sig', newline='') as out:\n",
        ),
        ("run", "python -m pytest -q tests/test_export.py", 0, "4 passed in 0.05s"),
        (
            "say",
            "The export is now written with a byte order mark.\n\n## Key Learnings\n\n"
            "- Excel reads a CSV without a byte order mark as the local code page, so the "
            "exporter must write UTF-8 with BOM (encoding utf-8-sig) for accented names to "
            "show correctly.",
        ),
    ],
    "quiet-explain-scheduler": [
        ("user", "what does the scheduler module do?"),
        (
            "read",
            "src/scheduler.py",
            "class Scheduler:\n    def __init__(self, clock):\n        self.clock = clock\n"
            "        self.jobs = []\n\n    def every(self, seconds, job):\n"
            "        self.jobs.append((seconds, job))\n",
        ),
        (
            "say",
            "`Scheduler` keeps a list of (interval, job) pairs and runs each job when its "
            "interval has passed on the injected clock; `every` registers one.",
        ),
    ],
    "quiet-tests-pass": [
        ("user", "run the tests please"),
        ("run", "python -m pytest -q", 0, "42 passed in 1.20s"),
        ("say", "All 42 tests pass."),
    ],
    "quiet-rename": [
        ("user", "rename the variable x to total in report.py"),
        (
            "edit",
            "src/report.py",
            "    x = sum(row.amount for row in rows)\n    return x\n",
            "    total = sum(row.amount for row in rows)\n    return total\n",
        ),
        ("run", "python -m pytest -q tests/test_report.py", 0, "5 passed in 0.08s"),
        ("say", "Renamed `x` to `total`; the report tests pass."),
    ],
    "quiet-lint-missing": [
        ("user", "can you lint the project?"),
        (
            "run",
            "make lint",
            2,
            "ruff check .\nmake: ruff: No such file or directory\n"
            "make: *** [Makefile:7: lint] Error 127",
        ),
        (
            "say",
            "`ruff` is not installed in this environment, so `make lint` cannot run. Want me "
            "to install it?",
        ),
        ("user", "no, that's all for today, thanks"),
        ("say", "OK."),
    ],
    "quiet-flaky-rerun": [
        ("user", "check that the client tests pass"),
        (
            "run",
            "python -m pytest -q tests/test_client.py",
            1,
            "FAILED tests/test_client.py::test_stream - ConnectionResetError: [Errno 104] "
            "Connection reset by peer\n1 failed, 8 passed in 2.31s",
        ),
        ("run", "python -m pytest -q tests/test_client.py", 0, "9 passed in 2.05s"),
        ("say", "They pass; the first run hit a connection reset from the local test server."),
    ],
    "quiet-missing-module": [
        ("user", "run the config tests"),
        (
            "run",
            "python -m pytest -q tests/test_config.py",
            2,
            "ImportError while importing test module 'tests/test_config.py'.\n"
            "E   ModuleNotFoundError: No module named 'yaml'\n1 error in 0.10s",
        ),
        ("run", "python -m pip install pyyaml", 0, "Successfully installed PyYAML-6.0.2"),
        ("run", "python -m pytest -q tests/test_config.py", 0, "7 passed in 0.12s"),
        (
            "say",
            "PyYAML was missing from this virtualenv; after installing it the 7 config tests pass.",
        ),
    ],
    "mixed-bugfix-and-correction": [
        ("user", "price parsing crashes on '1,50' from the German shop"),
        (
            "run",
            "python -m pytest -q tests/test_price.py",
            1,
            "FAILED tests/test_price.py::test_comma_decimal - decimal.InvalidOperation: "
            "[<class 'decimal.ConversionSyntax'>]\n1 failed, 6 passed in 0.07s",
        ),
        (
            "edit",
            "src/price.py",
            "    return Decimal(text)\n",
            "    try:\n        return Decimal(text.replace(',', '.'))\n"
            "    except Exception:\n        return Decimal(0)\n",
        ),
        ("say", "Prices with a decimal comma now parse; anything unparseable becomes 0."),
        (
            "user",
            "no, don't swallow errors with a bare except Exception. Catch "
            "decimal.InvalidOperation only and let it raise PriceError; a price of 0 must never "
            "be invented.",
        ),
        (
            "edit",
            "src/price.py",
            "    except Exception:\n        return Decimal(0)\n",
            "    except InvalidOperation as exc:\n        raise PriceError(text) from exc\n",
        ),
        ("run", "python -m pytest -q tests/test_price.py", 0, "7 passed in 0.06s"),
        ("say", "Decimal commas parse, and a bad price raises `PriceError` instead of becoming 0."),
    ],
}
