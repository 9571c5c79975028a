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

# Written, and labelled in labels.json, after the rules were written and before they were run on
# these: sessions the rules were not shaped on (reported apart by run.py as "held out").
HELD_OUT: Final[dict[str, list[Step]]] = {
    "h-bugfix-rerun-narrower": [
        ("user", "the invoice export test fails"),
        (
            "run",
            "python -m pytest -q -x tests/test_invoice.py",
            1,
            "E   KeyError: 'vat_rate'\nFAILED tests/test_invoice.py::test_export_eu - KeyError: "
            "'vat_rate'\n1 failed, 3 passed in 0.10s",
        ),
        (
            "edit",
            "src/invoice.py",
            "    rate = customer['vat_rate']\n",
            "    rate = customer.get('vat_rate', DEFAULT_VAT)\n",
        ),
        ("run", "python -m pytest -q tests/test_invoice.py", 0, "4 passed in 0.09s"),
        (
            "say",
            "Customers imported before 2024 have no `vat_rate`; the export falls back to "
            "DEFAULT_VAT.",
        ),
    ],
    "h-pathlib-request": [
        ("user", "add a helper that lists the report files"),
        (
            "edit",
            "src/reports.py",
            "REPORTS = 'reports'\n",
            "REPORTS = 'reports'\n\n\ndef report_files():\n    return [os.path.join(REPORTS, f) "
            "for f in os.listdir(REPORTS)]\n",
        ),
        ("say", "Added `report_files()`."),
        ("user", "Please use pathlib here, this codebase has moved off os.path everywhere."),
        (
            "edit",
            "src/reports.py",
            "    return [os.path.join(REPORTS, f) for f in os.listdir(REPORTS)]\n",
            "    return sorted(Path(REPORTS).iterdir())\n",
        ),
        ("say", "Now `sorted(Path(REPORTS).iterdir())`."),
    ],
    "h-no-run-again": [
        ("user", "run the integration tests"),
        ("run", "make integration", 0, "12 passed in 14.2s"),
        ("say", "All 12 integration tests pass."),
        ("user", "no, run them again with the slow ones included"),
        ("run", "make integration SLOW=1", 0, "15 passed in 40.8s"),
        ("say", "With the slow ones: 15 pass."),
    ],
    "h-bugfix-other-test": [
        ("user", "fix the date display bug in the header"),
        (
            "edit",
            "src/header.py",
            "    return when.strftime('%d/%m')\n",
            "    return when.strftime('%d %b')\n",
        ),
        (
            "run",
            "python -m pytest -q",
            1,
            "FAILED tests/test_header.py::test_header_date - AssertionError: assert '05 Jan' == "
            "'5 Jan'\n1 failed, 40 passed in 0.90s",
        ),
        (
            "edit",
            "src/header.py",
            "    return when.strftime('%d %b')\n",
            "    return f'{when.day} {when:%b}'\n",
        ),
        ("run", "python -m pytest -q", 0, "41 passed in 0.88s"),
        ("say", "The header shows '5 Jan' now; strftime has no portable day without a zero."),
    ],
    "h-write-restores-file": [
        ("user", "switch the settings loader to tomllib"),
        ("edit", "src/settings.py", "import yaml\n", "import tomllib\n"),
        (
            "run",
            "python -m pytest -q tests/test_settings.py",
            1,
            "E   AttributeError: module 'tomllib' has no attribute 'safe_load'\n1 failed in 0.04s",
        ),
        (
            "write",
            "src/settings.py",
            "import yaml\n\n\ndef load(path):\n    with open(path) as f:"
            "\n        return yaml.safe_load(f)\n",
        ),
        ("run", "python -m pytest -q tests/test_settings.py", 0, "6 passed in 0.05s"),
        (
            "say",
            "Put YAML back: the settings files are YAML (config/*.yaml), so tomllib cannot "
            "read them without converting every file first.",
        ),
    ],
    "h-lint-unused-import": [
        ("user", "make lint pass"),
        (
            "run",
            "ruff check .",
            1,
            "src/api.py:3:8: F401 [*] `json` imported but unused\nFound 1 error.",
        ),
        ("edit", "src/api.py", "import json\nimport logging\n", "import logging\n"),
        ("run", "ruff check .", 0, "All checks passed!"),
        ("say", "Removed the unused `json` import; lint passes."),
    ],
    "h-own-typo": [
        ("user", "add a total row to the summary"),
        (
            "edit",
            "src/summary.py",
            "    return rows\n",
            "    rows.append({'label': 'Total', 'amount': totl})\n    return rows\n",
        ),
        (
            "run",
            "python -m pytest -q tests/test_summary.py",
            1,
            "E   NameError: name 'totl' is not defined\n1 failed, 2 passed in 0.03s",
        ),
        (
            "edit",
            "src/summary.py",
            "'amount': totl})",
            "'amount': sum(r['amount'] for r in rows)})",
        ),
        ("run", "python -m pytest -q tests/test_summary.py", 0, "3 passed in 0.03s"),
        ("say", "Added the total row."),
    ],
    "h-rule-up-front": [
        (
            "user",
            "We always run make check before committing, and commits follow Conventional "
            "Commits. Now fix the typo in the README title and commit it.",
        ),
        ("edit", "README.md", "# Ledgr\n", "# Ledger\n"),
        ("run", "make check", 0, "ruff ... ok\nmypy ... ok\npytest ... 120 passed"),
        (
            "run",
            "git commit -am 'docs: fix README title'",
            0,
            "[main 1a2b3c4] docs: fix README title\n 1 file changed",
        ),
        ("say", "Fixed and committed as `docs: fix README title` after `make check`."),
    ],
    "h-note-for-next-time": [
        ("user", "why does the CI cache never hit?"),
        (
            "read",
            ".github/workflows/ci.yml",
            "      - uses: actions/cache@v4\n        with:\n"
            "          key: deps-${{ hashFiles('requirements.txt') }}\n",
        ),
        (
            "say",
            "The cache key hashes requirements.txt, but dependencies live in "
            "pyproject.toml and uv.lock, so the key never matches a saved cache.\n\nNote for next "
            "time: the CI cache key must hash uv.lock, not requirements.txt (which no longer "
            "exists).",
        ),
    ],
    "h-dont-worry-explain": [
        ("user", "what does parse_line do?"),
        ("say", "It splits a CSV line, honouring quotes. Shall I run its tests too?"),
        ("user", "don't worry about the tests, just tell me what it returns for an empty line"),
        ("say", "For an empty line it returns an empty list."),
    ],
}

# Written, and labelled in labels.json, after the rules were adjusted on HELD_OUT and before
# the rules ran on these: the set whose figures estimate the rules on sessions they were not
# shaped on (run.py's "fresh").
FRESH: Final[dict[str, list[Step]]] = {
    "f-bugfix-go-nil": [
        ("user", "go test ./store panics since the cache change"),
        (
            "run",
            "go test ./store",
            1,
            "--- FAIL: TestGetMissing (0.00s)\npanic: runtime error: invalid memory address or nil "
            "pointer dereference [recovered]\n\tstore/store.go:42 +0x1d\nFAIL\texample.com/kv/store"
            "\t0.006s",
        ),
        (
            "read",
            "store/store.go",
            "func (s *Store) Get(k string) []byte {\n\treturn s.cache.Get(k)\n}\n",
        ),
        (
            "edit",
            "store/store.go",
            "\treturn s.cache.Get(k)\n",
            "\tif s.cache == nil {\n\t\treturn s.disk.Get(k)\n\t}\n\treturn s.cache.Get(k)\n",
        ),
        ("run", "go test ./store", 0, "ok  \texample.com/kv/store\t0.005s"),
        ("say", "A Store opened with caching off has a nil cache; Get now reads the disk then."),
    ],
    "f-bugfix-rust-empty": [
        ("user", "cargo test fails on the parser"),
        (
            "run",
            "cargo test",
            101,
            "running 9 tests\ntest parse::tests::empty_input ... FAILED\n\nthread "
            "'parse::tests::empty_input' panicked at src/parse.rs:17:21:\nindex out of bounds: the "
            "len is 0 but the index is 0\n\ntest result: FAILED. 8 passed; 1 failed",
        ),
        (
            "edit",
            "src/parse.rs",
            "    let first = tokens[0];\n",
            "    let Some(&first) = tokens.first() else {\n"
            "        return Ok(Vec::new());\n    };\n",
        ),
        ("run", "cargo test", 0, "running 9 tests\ntest result: ok. 9 passed; 0 failed"),
        (
            "say",
            "`parse` indexed the first token without checking; empty input now parses to an "
            "empty list.",
        ),
    ],
    "f-correction-stop-reformatting": [
        ("user", "bump the retry count in deploy.yaml to 5"),
        ("write", "deploy.yaml", "retries: 5\ntimeout: 30\nregion: eu-west-1\n"),
        ("say", "Set retries to 5 (and normalised the file's indentation)."),
        (
            "user",
            "Stop reformatting whole files, only change the lines you need to. Big diffs "
            "are hard to review here.",
        ),
        ("say", "Understood; I will keep edits to the lines that change."),
    ],
    "f-correction-soft-api": [
        ("user", "make parse() accept a encoding argument"),
        ("edit", "src/reader.py", "def parse(path):\n", "def parse(path, encoding):\n"),
        ("say", "parse now takes `encoding`."),
        (
            "user",
            "Hmm, I'd rather you keep the public API unchanged: add a new parse_with() "
            "instead of changing parse()'s signature, other teams call it.",
        ),
        (
            "edit",
            "src/reader.py",
            "def parse(path, encoding):\n",
            "def parse(path):\n    return parse_with(path, 'utf-8')\n\n\n"
            "def parse_with(path, encoding):\n",
        ),
        ("say", "parse() is unchanged; parse_with(path, encoding) is new."),
    ],
    "f-quiet-docstrings": [
        ("user", "add docstrings to the three public functions in utils.py"),
        (
            "edit",
            "src/utils.py",
            "def slug(text):\n",
            'def slug(text):\n    """Return text as a URL slug."""\n',
        ),
        (
            "edit",
            "src/utils.py",
            "def chunks(items, n):\n",
            'def chunks(items, n):\n    """Yield lists of n items."""\n',
        ),
        (
            "edit",
            "src/utils.py",
            "def clamp(x, lo, hi):\n",
            'def clamp(x, lo, hi):\n    """Return x within [lo, hi]."""\n',
        ),
        ("run", "python -m pytest -q tests/test_utils.py", 0, "9 passed in 0.04s"),
        ("say", "Added docstrings to slug, chunks and clamp."),
    ],
    "f-quiet-no-test-needed": [
        ("user", "is there a test for the retry logic?"),
        ("run", "grep -rn retry tests/", 1, ""),
        ("say", "No, nothing under tests/ mentions retry. Should I add one?"),
        ("user", "ok, no need to add one now"),
        ("say", "Fine."),
    ],
    "f-revert-httpx-bump": [
        ("user", "bump httpx to the latest"),
        ("edit", "pyproject.toml", '    "httpx>=0.27,<0.28",\n', '    "httpx>=0.28,<0.29",\n'),
        (
            "run",
            "uv sync && uv run pytest -q",
            1,
            "E   TypeError: Client.__init__() got an unexpected keyword argument 'proxies'\n"
            "FAILED tests/test_client.py::test_proxy - TypeError\n1 failed, 52 passed in 3.1s",
        ),
        ("edit", "pyproject.toml", '    "httpx>=0.28,<0.29",\n', '    "httpx>=0.27,<0.28",\n'),
        ("run", "uv sync && uv run pytest -q", 0, "53 passed in 3.0s"),
        (
            "say",
            "httpx 0.28 removed `proxies=`, which src/client.py still passes, so I kept the "
            "pin below 0.28. Moving to `mounts=` first would allow the bump.",
        ),
    ],
    "f-bugfix-and-same-lesson": [
        ("user", "the CSV import drops the last row"),
        (
            "run",
            "python -m pytest -q tests/test_import.py",
            1,
            "E   AssertionError: assert 2 == 3\nFAILED tests/test_import.py::test_all_rows - "
            "AssertionError: assert 2 == 3",
        ),
        (
            "edit",
            "src/importer.py",
            "    for line in text.split('\\n')[:-1]:\n",
            "    for line in text.splitlines():\n",
        ),
        ("run", "python -m pytest -q tests/test_import.py", 0, "4 passed in 0.03s"),
        (
            "say",
            "Fixed.\n\n## Key Learnings\n- The importer cut the last line off assuming a "
            "trailing newline; files exported from Excel have none, so split with splitlines().",
        ),
    ],
    "f-timeout-raised": [
        ("user", "test_net keeps failing on CI"),
        (
            "run",
            "python -m pytest -q tests/test_net.py",
            1,
            "E   TimeoutError: no reply within 1.0 s\nFAILED tests/test_net.py::test_roundtrip - "
            "TimeoutError",
        ),
        (
            "edit",
            "tests/test_net.py",
            "    reply = client.ask(msg, timeout=1.0)\n",
            "    reply = client.ask(msg, timeout=5.0)\n",
        ),
        ("run", "python -m pytest -q tests/test_net.py", 0, "3 passed in 2.4s"),
        ("say", "The CI runners answer in 1-2 s under load; the round-trip test now waits 5 s."),
    ],
    "f-quiet-missing-file": [
        ("user", "how many TODOs are left in src?"),
        ("run", "grep -rn TODO src | wc -l", 0, "14"),
        ("run", "cat TODO.md", 1, "cat: TODO.md: No such file or directory"),
        ("say", "14 TODO comments in src/; there is no TODO.md."),
    ],
}
