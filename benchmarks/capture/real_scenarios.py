"""The scripted sessions ``real.py`` runs through the real agent programs.

Each scenario is the project files committed before the session and one or more prompts; each
prompt has the steps the fake model answers with, in order (read a file, run a command, edit a
file, write a new one), and its final text. The steps are the same for every program; ``real.py``
turns each into the program's own tool call. A ``Run`` says the exit status the command gives at
that point (``real.py --dry`` checks every scenario against it without any agent program). An
``Edit`` replaces whole lines (Codex's patches name lines), and the text it replaces is found
once in the file.

What a careful engineer would save from each is in ``labels.json`` ("real"), written before the
extractor first ran on these transcripts.
"""

# ruff: noqa: E501  (the scripted words and file contents read best unbroken)
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Read:
    path: str


@dataclass(frozen=True)
class Run:
    command: str
    code: int = 0  # the exit status expected at this point of the session
    restores: str = ""  # a file the command puts back as committed (git checkout)


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str
    why: str = "Apply the change."


@dataclass(frozen=True)
class Write:
    path: str
    content: str


Step = Read | Run | Edit | Write


@dataclass(frozen=True)
class Turn:
    prompt: str
    steps: list[Step]
    final: str = "Done."


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: list[Turn]
    files: dict[str, str] = field(default_factory=dict)


def fix(
    name: str,
    files: dict[str, str],
    prompt: str,
    check: str,
    edits: list[Edit],
    final: str,
    *,
    code: int = 1,
) -> Scenario:
    """A bug fix: the check fails, the files are read and edited, the check passes."""
    reads = list(dict.fromkeys(edit.path for edit in edits))
    steps: list[Step] = [Run(check, code), *(Read(path) for path in reads), *edits, Run(check)]
    return Scenario(name, [Turn(prompt, steps, final)], files)


def pytest_like(module: str, body: str) -> str:
    """A test script that imports from src/ and runs its asserts (python3 tests/x.py)."""
    return f"import sys\nsys.path.insert(0, 'src')\nfrom {module} import *  # noqa\n\n{body}print('ok')\n"


SLUG = 'def slug(text):\n    return "_".join(text.lower().split())\n'
CART = """function total(items) {
  let sum = 0;
  for (const item of items) {
    sum = sum + item.price;
  }
  return sum;
}

module.exports = { total };
"""
CART_TEST = """const assert = require("node:assert");
const { total } = require("../src/cart.js");

assert.strictEqual(total([{ price: "1.50" }, { price: "2" }]), 3.5);
console.log("cart ok");
"""
BACKUP = """#!/bin/sh
set -eu
mkdir -p "$BACKUP_DIR"
cp README.md "$BACKUP_DIR/README.md.bak"
echo "backed up to $BACKUP_DIR"
"""
REPORT = """from datetime import datetime


def parse_day(text):
    return datetime.strptime(text, "%d/%m/%Y").date()
"""
CONFIG = """import json


def load(path):
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return {"host": data["host"], "timeout": data["timeout"]}
"""
USER_JS = """function displayName(user) {
  return user.profile.name;
}

module.exports = { displayName };
"""
USER_TEST = """const assert = require("node:assert");
const { displayName } = require("../src/user.js");

assert.strictEqual(displayName({ profile: { name: "Ada" } }), "Ada");
assert.strictEqual(displayName({ id: 7 }), "user 7");
console.log("user ok");
"""
PAGER = """def pages(count, size):
    return count // size
"""
MAKEFILE_SPACES = "check:\n    @python3 -c 'print(\"checks pass\")'\n"
APP_INIT = "import utils\n\nVERSION = utils.version()\n"
APP_UTILS = 'def version():\n    return "1.4.0"\n'
UNITS = """def meters(feet):
    return feet * 0.3048
"""
CONVERT = """import units


def to_metric(row):
    return {"height_m": round(units.meters(row["height_ft"]), 2),
            "depth_m": round(units.metres(row["depth_ft"]), 2)}
"""
APP_JSON = '{\n  "name": "shop",\n  "port": 8080,\n}\n'
PKG_JSON = '{\n  "name": "greeter",\n  "version": "1.0.0",\n  "type": "module"\n}\n'
INDEX_JS = 'const { hello } = require("./hello.js");\n\nconsole.log(hello("team"));\n'
HELLO_JS = "export function hello(name) {\n  return `hello ${name}`;\n}\n"
PARSE_CSV = """def rows(text):
    lines = text.split("\\n")
    return [line.split(",") for line in lines[1:-1]]
"""
LOADER = """import json

_RELOADS = []


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
"""
LOADER_TEST = """import json
import sys
sys.path.insert(0, "src")
from loader import load

with open("flags.json", "w", encoding="utf-8") as out:
    json.dump({"beta": False}, out)
assert load("flags.json") == {"beta": False}
with open("flags.json", "w", encoding="utf-8") as out:
    json.dump({"beta": True}, out)
assert load("flags.json") == {"beta": True}, "load() returned stale flags after the file changed"
print("reload ok")
"""
COMPARE_JS = """function sameId(a, b) {
  return a == b;
}

module.exports = { sameId };
"""
COMPARE_TEST = """const assert = require("node:assert");
const { sameId } = require("../src/compare.js");

// ids from the query string are strings, ids from the database are numbers
assert.ok(sameId("42", 42));
assert.ok(!sameId("42", 43));
console.log("compare ok");
"""
RANK = """def ranked(rows):
    return sorted(rows, key=lambda row: row["score"], reverse=True)
"""
LIMITS = "MAX_BATCH = 100\n"
LIMITS_TEST = """import sys
sys.path.insert(0, "src")
from limits import MAX_BATCH

# the payment provider rejects batches over 100 items
assert MAX_BATCH <= 100, f"MAX_BATCH {MAX_BATCH} is over the provider's limit of 100"
print("limits ok")
"""
STATS = """def mean(values):
    return sum(values) / len(values)
"""
DATES = """from datetime import date


def parse_date(text):
    return date.fromisoformat(text)
"""
WORKER = """import logging

log = logging.getLogger(__name__)


def handle(job):
    result = job["payload"].upper()
    return result
"""
STORE = """import sqlite3


def save(conn, name):
    conn.execute("insert into items(name) values (?)", (name,))
"""
API = """def fetch_user(user_id):
    return {"id": user_id}
"""
LOGFMT = """def line(name, count):
    return name + ": " + str(count)
"""
SCHEDULE = """import yaml  # noqa


def next_run(entry):
    return entry["at"]
"""
CRON = "jobs:\n  - name: nightly-export\n    at: '02:00'\n"
VITE = "export default {\n  server: { port: 5173, strictPort: true },\n};\n"
GREET = """def greet(name):
    return f"Hello, {name}!"
"""
GREET_TEST = pytest_like("greet", "assert greet('Ada') == 'Hello, Ada!'\n")
CACHE_CHECK = """#!/bin/sh
# warms the cache on its first run and fails then; passes once it is warm
if [ ! -f .cache-warm ]; then
  touch .cache-warm
  echo "cache cold: timed out after 2s waiting for warmup" >&2
  exit 1
fi
echo "cache ok"
"""
SHIP = """#!/bin/sh
echo "shipping $1"
"""


SCENARIOS: list[Scenario] = [
    # -- bug fixes: a check fails, files are edited, it passes ----------------------------------
    fix(
        "bugfix-py-slug",
        {
            "src/slug.py": SLUG,
            "tests/check_slug.py": pytest_like(
                "slug", "assert slug('Big Sale') == 'big-sale', slug('Big Sale')\n"
            ),
        },
        "The slug check fails, please fix it",
        "python3 tests/check_slug.py",
        [
            Edit(
                "src/slug.py",
                '    return "_".join(text.lower().split())',
                '    return "-".join(text.lower().split())',
            )
        ],
        "Fixed: slug() joined words with underscores, the URLs use dashes. tests/check_slug.py passes.",
    ),
    fix(
        "bugfix-js-cart-strings",
        {"src/cart.js": CART, "test/cart.test.js": CART_TEST},
        "node test/cart.test.js fails, can you look?",
        "node test/cart.test.js",
        [Edit("src/cart.js", "    sum = sum + item.price;", "    sum = sum + Number(item.price);")],
        "The prices come in as strings from the form, so total() concatenated them ('01.502'). "
        "It now converts each price with Number(); the test passes.",
    ),
    fix(
        "bugfix-sh-unbound",
        {"scripts/backup.sh": BACKUP},
        "The backup script crashes, fix it",
        "sh scripts/backup.sh",
        [Edit("scripts/backup.sh", "set -eu", 'set -eu\nBACKUP_DIR="${BACKUP_DIR:-backups}"')],
        "scripts/backup.sh runs with set -u and BACKUP_DIR was never set outside CI "
        '("BACKUP_DIR: parameter not set"). It now defaults to backups/.',
        code=2,
    ),
    fix(
        "bugfix-py-date-format",
        {
            "src/report.py": REPORT,
            "tests/check_report.py": pytest_like(
                "report", "assert str(parse_day('2026-03-01')) == '2026-03-01'\n"
            ),
        },
        "The report crashes on the new export, fix parse_day",
        "python3 tests/check_report.py",
        [
            Edit(
                "src/report.py",
                '    return datetime.strptime(text, "%d/%m/%Y").date()',
                "    return datetime.fromisoformat(text).date()",
            )
        ],
        "The new export writes ISO dates (2026-03-01); parse_day() expected day/month/year. "
        "It now parses ISO 8601 with fromisoformat.",
    ),
    fix(
        "bugfix-py-keyerror-timeout",
        {
            "src/config.py": CONFIG,
            "settings.json": '{"host": "db.internal"}\n',
            "tests/check_config.py": pytest_like(
                "config", "assert load('settings.json')['timeout'] == 30\n"
            ),
        },
        "Loading settings.json fails with a KeyError, fix it",
        "python3 tests/check_config.py",
        [
            Edit(
                "src/config.py",
                '    return {"host": data["host"], "timeout": data["timeout"]}',
                '    return {"host": data["host"], "timeout": data.get("timeout", 30)}',
            )
        ],
        "settings.json may leave out timeout; load() now defaults it to 30 seconds.",
    ),
    fix(
        "bugfix-js-undefined-profile",
        {"src/user.js": USER_JS, "test/user.test.js": USER_TEST},
        "displayName throws for users without a profile",
        "node test/user.test.js",
        [
            Edit(
                "src/user.js",
                "  return user.profile.name;",
                "  return user.profile?.name ?? `user ${user.id}`;",
            )
        ],
        "Users created by the import have no profile; displayName() now falls back to 'user <id>'.",
    ),
    fix(
        "bugfix-py-pages-off-by-one",
        {
            "src/pager.py": PAGER,
            "tests/check_pager.py": pytest_like(
                "pager", "assert pages(10, 3) == 4, pages(10, 3)\nassert pages(9, 3) == 3\n"
            ),
        },
        "The last page of results is missing, fix pages()",
        "python3 tests/check_pager.py",
        [Edit("src/pager.py", "    return count // size", "    return -(-count // size)")],
        "pages() rounded down and dropped a partial last page; it now rounds up.",
    ),
    fix(
        "bugfix-make-separator",
        {"Makefile": MAKEFILE_SPACES},
        "make check is broken",
        "make check",
        [
            Edit(
                "Makefile",
                "    @python3 -c 'print(\"checks pass\")'",
                "\t@python3 -c 'print(\"checks pass\")'",
            )
        ],
        'The recipe was indented with spaces ("missing separator"); make needs a tab. Fixed.',
        code=2,
    ),
    fix(
        "bugfix-py-relative-import",
        {
            "src/app/__init__.py": APP_INIT,
            "src/app/utils.py": APP_UTILS,
            "tests/check_app.py": "import sys\nsys.path.insert(0, 'src')\nimport app\nassert app.VERSION == '1.4.0'\nprint('ok')\n",
        },
        "Importing the app package fails",
        "python3 tests/check_app.py",
        [Edit("src/app/__init__.py", "import utils", "from . import utils")],
        "src/app/__init__.py imported utils as a top-level module; inside the package it must be "
        "`from . import utils`. The import works now.",
    ),
    fix(
        "bugfix-two-files-units",
        {
            "src/units.py": UNITS,
            "src/convert.py": CONVERT,
            "tests/check_convert.py": pytest_like(
                "convert",
                "assert to_metric({'height_ft': 10, 'depth_ft': 3}) == {'height_m': 3.05, 'depth_m': 0.91}\n",
            ),
        },
        "to_metric crashes with an AttributeError",
        "python3 tests/check_convert.py",
        [
            Edit(
                "src/units.py",
                "    return feet * 0.3048",
                "    return feet * 0.3048\n\n\nmetres = meters",
            ),
            Edit(
                "src/convert.py",
                '            "depth_m": round(units.metres(row["depth_ft"]), 2)}',
                '            "depth_m": round(units.meters(row["depth_ft"]), 2)}',
            ),
        ],
        "convert.py called units.metres, which does not exist (the function is meters). Fixed the "
        "call and kept an alias metres in units.py for the other callers.",
    ),
    fix(
        "bugfix-json-trailing-comma",
        {"config/app.json": APP_JSON},
        "The service will not start: config/app.json does not parse",
        "python3 -m json.tool config/app.json",
        [Edit("config/app.json", '  "port": 8080,', '  "port": 8080')],
        "config/app.json had a trailing comma after the last key, which JSON does not allow. Removed.",
    ),
    fix(
        "bugfix-node-esm",
        {"package.json": PKG_JSON, "src/index.js": INDEX_JS, "src/hello.js": HELLO_JS},
        "node src/index.js fails with a ReferenceError",
        "node src/index.js",
        [
            Edit(
                "src/index.js",
                'const { hello } = require("./hello.js");',
                'import { hello } from "./hello.js";',
            )
        ],
        'package.json declares "type": "module", so src/index.js is an ES module and has no '
        "require(); it now imports hello. node src/index.js prints hello team.",
    ),
    fix(
        "bugfix-csv-last-row",
        {
            "src/parse_csv.py": PARSE_CSV,
            "tests/check_csv.py": pytest_like(
                "parse_csv",
                "assert rows('a,b\\n1,2\\n3,4') == [['1', '2'], ['3', '4']], rows('a,b\\n1,2\\n3,4')\n",
            ),
        },
        "The last row of uploaded CSV files goes missing",
        "python3 tests/check_csv.py",
        [
            Edit(
                "src/parse_csv.py", '    lines = text.split("\\n")', "    lines = text.splitlines()"
            ),
            Edit(
                "src/parse_csv.py",
                '    return [line.split(",") for line in lines[1:-1]]',
                '    return [line.split(",") for line in lines[1:]]',
            ),
        ],
        "rows() dropped the last line because it assumed a trailing newline; uploads from Excel have "
        "none. It now uses splitlines() and keeps every line after the header.",
    ),
    # -- edits undone within the session (pitfalls) ----------------------------------------------
    Scenario(
        "revert-lru-cache",
        [
            Turn(
                "Loading flags is slow, cache load() in src/loader.py",
                [
                    Read("src/loader.py"),
                    Edit(
                        "src/loader.py",
                        "def load(path):",
                        "@functools.lru_cache(maxsize=None)\ndef load(path):",
                    ),
                    Edit("src/loader.py", "import json", "import functools\nimport json"),
                    Run("python3 tests/check_loader.py", 1),
                    Edit(
                        "src/loader.py",
                        "@functools.lru_cache(maxsize=None)\ndef load(path):",
                        "def load(path):",
                    ),
                    Edit("src/loader.py", "import functools\nimport json", "import json"),
                    Run("python3 tests/check_loader.py"),
                ],
                "I reverted the cache: lru_cache on load() keys on the path only, so after flags.json "
                "changes it returns the stale flags (tests/check_loader.py fails). Caching needs the "
                "file's mtime in the key; left load() uncached for now.",
            )
        ],
        {"src/loader.py": LOADER, "tests/check_loader.py": LOADER_TEST},
    ),
    Scenario(
        "revert-strict-equals",
        [
            Turn(
                "Lint complains about == in src/compare.js, switch it to ===",
                [
                    Read("src/compare.js"),
                    Edit("src/compare.js", "  return a == b;", "  return a === b;"),
                    Run("node test/compare.test.js", 1),
                    Edit("src/compare.js", "  return a === b;", "  return a == b;"),
                    Run("node test/compare.test.js"),
                ],
                "I put == back: ids from the query string are strings and ids from the database are "
                "numbers, so === made sameId('42', 42) false and the test failed. A strict comparison "
                "would need Number() on both sides first.",
            )
        ],
        {"src/compare.js": COMPARE_JS, "test/compare.test.js": COMPARE_TEST},
    ),
    Scenario(
        "revert-git-checkout-limit",
        [
            Turn(
                "Raise MAX_BATCH in src/limits.py to 500 so imports go faster",
                [
                    Read("src/limits.py"),
                    Edit("src/limits.py", "MAX_BATCH = 100", "MAX_BATCH = 500"),
                    Run("python3 tests/check_limits.py", 1),
                    Run("git checkout -- src/limits.py", restores="src/limits.py"),
                    Run("python3 tests/check_limits.py"),
                ],
                "I could not raise it: the payment provider rejects batches over 100 items, and "
                "tests/check_limits.py guards that. I restored src/limits.py with git checkout.",
            )
        ],
        {"src/limits.py": LIMITS, "tests/check_limits.py": LIMITS_TEST},
    ),
    Scenario(
        "revert-floor-division",
        [
            Turn(
                "mean() in src/stats.py should return ints for the dashboard",
                [
                    Read("src/stats.py"),
                    Edit(
                        "src/stats.py",
                        "    return sum(values) / len(values)",
                        "    return sum(values) // len(values)",
                    ),
                    Run("python3 tests/check_stats.py", 1),
                    Edit(
                        "src/stats.py",
                        "    return sum(values) // len(values)",
                        "    return sum(values) / len(values)",
                    ),
                    Run("python3 tests/check_stats.py"),
                ],
                "Floor division broke mean([1, 2]) == 1.5, which the billing export relies on, so I "
                "undid it. The dashboard should round when it displays the value instead.",
            )
        ],
        {
            "src/stats.py": STATS,
            "tests/check_stats.py": pytest_like(
                "stats", "assert mean([1, 2]) == 1.5, mean([1, 2])\n"
            ),
        },
    ),
    Scenario(
        "revert-rename-public",
        [
            Turn(
                "Tidy up src/dates.py",
                [
                    Read("src/dates.py"),
                    Edit("src/dates.py", "def parse_date(text):", "def parse_iso_date(text):"),
                    Run("grep -rn parse_date --include=*.py .", 0),
                    Edit("src/dates.py", "def parse_iso_date(text):", "def parse_date(text):"),
                ],
                "I renamed parse_date to parse_iso_date and then undid it: jobs/nightly.py imports "
                "parse_date by name, as do other services. The name is part of the public API.",
            )
        ],
        {
            "src/dates.py": DATES,
            "jobs/nightly.py": "from dates import parse_date\n\nSTART = parse_date('2026-01-01')\n",
        },
    ),
    Scenario(
        "revert-sort-in-place",
        [
            Turn(
                "ranked() copies the list, sort in place to save memory",
                [
                    Read("src/rank.py"),
                    Edit(
                        "src/rank.py",
                        '    return sorted(rows, key=lambda row: row["score"], reverse=True)',
                        '    rows.sort(key=lambda row: row["score"], reverse=True)\n    return rows',
                    ),
                    Run("python3 tests/check_rank.py", 1),
                    Edit(
                        "src/rank.py",
                        '    rows.sort(key=lambda row: row["score"], reverse=True)\n    return rows',
                        '    return sorted(rows, key=lambda row: row["score"], reverse=True)',
                    ),
                    Run("python3 tests/check_rank.py"),
                ],
                "Sorting in place reordered the caller's list, which the leaderboard still shows in "
                "arrival order (the test caught it), so I went back to sorted().",
            )
        ],
        {
            "src/rank.py": RANK,
            "tests/check_rank.py": pytest_like(
                "rank",
                "rows = [{'score': 1}, {'score': 3}]\nranked(rows)\n"
                "assert rows == [{'score': 1}, {'score': 3}], 'ranked() modified its input'\n",
            ),
        },
    ),
    # -- corrections by the person in a later prompt ---------------------------------------------
    Scenario(
        "correction-no-print",
        [
            Turn(
                "Add some output to handle() in src/worker.py so I can see the jobs",
                [
                    Read("src/worker.py"),
                    Edit(
                        "src/worker.py",
                        '    result = job["payload"].upper()',
                        '    print("handling", job)\n    result = job["payload"].upper()',
                    ),
                ],
                "Added a print of each job in handle().",
            ),
            Turn(
                "No, don't use print in this codebase: we always log through the logging module.",
                [
                    Read("src/worker.py"),
                    Edit(
                        "src/worker.py",
                        '    print("handling", job)',
                        '    log.info("handling %s", job)',
                    ),
                ],
                "Switched to log.info.",
            ),
        ],
        {"src/worker.py": WORKER},
    ),
    Scenario(
        "correction-force-push",
        [
            Turn(
                "What state is the branch in?",
                [Run("git status --short"), Run("git log --oneline -3")],
                "The branch is clean with one commit on top of start. To update the remote after "
                "the rebase I would force-push it.",
            ),
            Turn(
                "Never force-push here, we always add a fixup commit instead so reviewers keep their comments.",
                [],
                "Understood: fixup commits, no force-push.",
            ),
        ],
    ),
    Scenario(
        "correction-no-db-mocks",
        [
            Turn(
                "Write a test for save() in src/store.py",
                [
                    Read("src/store.py"),
                    Write(
                        "tests/test_store.py",
                        "from unittest import mock\n\nfrom store import save\n\n\n"
                        "def test_save():\n    conn = mock.Mock()\n    save(conn, 'pen')\n"
                        "    conn.execute.assert_called_once()\n",
                    ),
                ],
                "Added tests/test_store.py with a mocked connection.",
            ),
            Turn(
                "No, we never mock the database in tests; use a real sqlite3 in-memory connection instead.",
                [
                    Read("tests/test_store.py"),
                    Edit(
                        "tests/test_store.py",
                        "def test_save():\n    conn = mock.Mock()\n    save(conn, 'pen')\n    conn.execute.assert_called_once()",
                        "def test_save():\n    conn = sqlite3.connect(':memory:')\n    conn.execute('create table items(name text)')\n"
                        "    save(conn, 'pen')\n    assert conn.execute('select name from items').fetchall() == [('pen',)]",
                    ),
                    Edit("tests/test_store.py", "from unittest import mock", "import sqlite3"),
                ],
                "The test now uses an in-memory sqlite3 database.",
            ),
        ],
        {"src/store.py": STORE},
    ),
    Scenario(
        "correction-keep-public-name",
        [
            Turn(
                "Rename fetch_user in src/api.py to get_user, it reads better",
                [
                    Read("src/api.py"),
                    Edit("src/api.py", "def fetch_user(user_id):", "def get_user(user_id):"),
                ],
                "Renamed fetch_user to get_user.",
            ),
            Turn(
                "Wait, don't rename public functions in src/api.py: the mobile team imports fetch_user. "
                "Keep the old name and add get_user as an alias instead.",
                [
                    Read("src/api.py"),
                    Edit(
                        "src/api.py",
                        'def get_user(user_id):\n    return {"id": user_id}',
                        'def fetch_user(user_id):\n    return {"id": user_id}\n\n\nget_user = fetch_user',
                    ),
                ],
                "fetch_user is back, with get_user as an alias.",
            ),
        ],
        {"src/api.py": API},
    ),
    Scenario(
        "correction-no-new-dependency",
        [
            Turn(
                "Fetch the exchange rates over HTTP in src/rates.py",
                [
                    Read("requirements.txt"),
                    Edit("requirements.txt", "pyyaml==6.0.2", "pyyaml==6.0.2\nrequests==2.32.3"),
                    Write(
                        "src/rates.py",
                        "import requests\n\n\ndef rates(url):\n    return requests.get(url, timeout=10).json()\n",
                    ),
                ],
                "Added requests and src/rates.py.",
            ),
            Turn(
                "No, we don't add dependencies without asking first. Use urllib from the standard library instead.",
                [
                    Read("requirements.txt"),
                    Edit("requirements.txt", "pyyaml==6.0.2\nrequests==2.32.3", "pyyaml==6.0.2"),
                    Read("src/rates.py"),
                    Edit(
                        "src/rates.py",
                        "import requests\n\n\ndef rates(url):\n    return requests.get(url, timeout=10).json()",
                        "import json\nimport urllib.request\n\n\ndef rates(url):\n"
                        "    with urllib.request.urlopen(url, timeout=10) as answer:\n        return json.load(answer)",
                    ),
                ],
                "Dropped requests; rates() uses urllib.request.",
            ),
        ],
        {"requirements.txt": "pyyaml==6.0.2\n"},
    ),
    Scenario(
        "correction-fstrings",
        [
            Turn(
                "line() in src/logfmt.py should pad the count to 5 digits",
                [
                    Read("src/logfmt.py"),
                    Edit(
                        "src/logfmt.py",
                        '    return name + ": " + str(count)',
                        '    return "%s: %05d" % (name, count)',
                    ),
                    Run(
                        "python3 -c \"import sys; sys.path.insert(0, 'src'); from logfmt import line; print(line('jobs', 42))\""
                    ),
                ],
                "line('jobs', 42) now gives 'jobs: 00042'.",
            ),
            Turn(
                "Please don't use % formatting; in this repo we use f-strings only.",
                [
                    Read("src/logfmt.py"),
                    Edit(
                        "src/logfmt.py",
                        '    return "%s: %05d" % (name, count)',
                        '    return f"{name}: {count:05d}"',
                    ),
                ],
                "Now an f-string.",
            ),
        ],
        {"src/logfmt.py": LOGFMT},
    ),
    Scenario(
        "correction-commit-to-main",
        [
            Turn(
                "Fix the typo in README.md and commit it",
                [
                    Read("README.md"),
                    Edit("README.md", "# shop", "# Shop"),
                    Run("git commit -qam 'README: capitalise the title'"),
                ],
                "Fixed and committed on main.",
            ),
            Turn(
                "No, never commit straight to main. Always make a branch and open a pull request.",
                [
                    Run(
                        "git branch readme-title && git reset -q --hard HEAD~1 && git switch -q readme-title"
                    )
                ],
                "Moved the commit to the branch readme-title; main is back where it was.",
            ),
        ],
    ),
    # -- lessons in the agent's words ------------------------------------------------------------
    Scenario(
        "lesson-cron-utc",
        [
            Turn(
                "Why does the nightly export run at 3 in the morning instead of 2?",
                [Read("deploy/cron.yaml"), Read("src/schedule.py")],
                "deploy/cron.yaml says 02:00, and the scheduler reads that time as UTC; in winter "
                "Berlin is UTC+1, so it runs at 03:00 local time.\n\n## Key Learnings\n"
                "- Times in deploy/cron.yaml are UTC, not local time: the nightly export at 02:00 "
                "runs at 03:00 in Berlin in winter.\n",
            )
        ],
        {"deploy/cron.yaml": CRON, "src/schedule.py": SCHEDULE},
    ),
    Scenario(
        "lesson-vite-port",
        [
            Turn(
                "Can I move the dev server to port 3000?",
                [Read("vite.config.js"), Run("grep -rn 5173 . --include=*.js --include=*.md")],
                "Better not.\n\n## Key Learnings\n- The dev server must stay on port 5173 "
                "(strictPort in vite.config.js): the OAuth callback is registered for "
                "localhost:5173.\n",
            )
        ],
        {
            "vite.config.js": VITE,
            "docs/auth.md": "OAuth callback: http://localhost:5173/callback\n",
        },
    ),
    Scenario(
        "lesson-two-items",
        [
            Turn(
                "Look at how the shipping script is run and tell me anything surprising",
                [Read("scripts/ship.sh"), Run("sh scripts/ship.sh staging")],
                "It only echoes its target for now.\n\n**Key Learnings**\n"
                "- scripts/ship.sh must be run from the repository root: it uses relative paths.\n"
                "- The staging target needs the VPN; from outside it hangs without an error.\n",
            )
        ],
        {"scripts/ship.sh": SHIP},
    ),
    Scenario(
        "lesson-after-bugfix",
        [
            Turn(
                "The CSV export breaks in Excel: accents come out garbled",
                [
                    Run("python3 tests/check_export.py", 1),
                    Read("src/export.py"),
                    Edit(
                        "src/export.py",
                        '    return text.encode("utf-8")',
                        '    return text.encode("utf-8-sig")',
                    ),
                    Run("python3 tests/check_export.py"),
                ],
                "Fixed: the export now starts with a byte order mark.\n\n## Key Learnings\n"
                "- Excel reads CSV as UTF-8 only with a byte order mark: encode exports as utf-8-sig.\n",
            )
        ],
        {
            "src/export.py": 'def encode(text):\n    return text.encode("utf-8")\n',
            "tests/check_export.py": pytest_like(
                "export",
                "assert encode('é').startswith(b'\\xef\\xbb\\xbf'), 'no byte order mark for Excel'\n",
            ),
        },
    ),
    # -- a bug fix and a correction in one session ------------------------------------------------
    Scenario(
        "mixed-fix-then-correction",
        [
            Turn(
                "tests/check_greet.py fails, fix it",
                [
                    Run("python3 tests/check_greet.py", 1),
                    Read("src/greet.py"),
                    Edit(
                        "src/greet.py", '    return f"Hello {name}"', '    return f"Hello, {name}!"'
                    ),
                    Run("python3 tests/check_greet.py"),
                    Run("git commit -qam 'greet: punctuation'"),
                ],
                "greet() lacked the comma and exclamation mark the check expects. Fixed and committed.",
            ),
            Turn(
                "Don't commit for me; I always review the diff and commit myself.",
                [Run("git reset -q --soft HEAD~1")],
                "Undid the commit; the change is staged for you to review.",
            ),
        ],
        {
            "src/greet.py": 'def greet(name):\n    return f"Hello {name}"\n',
            "tests/check_greet.py": GREET_TEST,
        },
    ),
    # -- uneventful sessions: nothing worth keeping ----------------------------------------------
    Scenario(
        "quiet-explain-module",
        [
            Turn(
                "What does src/stats.py do?",
                [Read("src/stats.py")],
                "It has one function, mean(), the arithmetic mean of a list.",
            )
        ],
        {"src/stats.py": STATS},
    ),
    Scenario(
        "quiet-tests-pass",
        [Turn("Run the checks", [Run("python3 tests/check_greet.py")], "All checks pass.")],
        {"src/greet.py": GREET, "tests/check_greet.py": GREET_TEST},
    ),
    Scenario(
        "quiet-add-docstring",
        [
            Turn(
                "Add a docstring to greet()",
                [
                    Read("src/greet.py"),
                    Edit(
                        "src/greet.py",
                        "def greet(name):",
                        'def greet(name):\n    """Return the greeting for a name."""',
                    ),
                    Run("python3 tests/check_greet.py"),
                ],
                "Added the docstring; the check still passes.",
            )
        ],
        {"src/greet.py": GREET, "tests/check_greet.py": GREET_TEST},
    ),
    Scenario(
        "quiet-rename-local",
        [
            Turn(
                "Rename the variable result in handle() to upper",
                [
                    Read("src/worker.py"),
                    Edit(
                        "src/worker.py",
                        '    result = job["payload"].upper()\n    return result',
                        '    upper = job["payload"].upper()\n    return upper',
                    ),
                    Run(
                        "python3 -c \"import sys; sys.path.insert(0, 'src'); import worker; print(worker.handle({'payload': 'a'}))\""
                    ),
                ],
                "Renamed.",
            )
        ],
        {"src/worker.py": WORKER},
    ),
    Scenario(
        "quiet-git-history",
        [
            Turn(
                "Summarise the recent history",
                [Run("git log --oneline -5"), Run("git status --short")],
                "Two commits: the start and the project files. The tree is clean.",
            )
        ],
        {"src/stats.py": STATS},
    ),
    Scenario(
        "quiet-missing-doc",
        [
            Turn(
                "How do I set the project up?",
                [Run("cat docs/setup.md", 1), Run("ls"), Read("README.md")],
                "There is no setup guide; the README only has the title. Install Python 3 and run the checks in tests/.",
            )
        ],
    ),
    Scenario(
        "quiet-own-typo",
        [
            Turn(
                "Run the greeting check",
                [Run("pyhton3 tests/check_greet.py", 127), Run("python3 tests/check_greet.py")],
                "It passes (my first command had a typo).",
            )
        ],
        {"src/greet.py": GREET, "tests/check_greet.py": GREET_TEST},
    ),
    Scenario(
        "quiet-flaky-rerun",
        [
            Turn(
                "Run the cache check",
                [Run("sh tests/check_cache.sh", 1), Run("sh tests/check_cache.sh")],
                "The first run timed out while the cache warmed up; the second passed. Nothing to change.",
            )
        ],
        {"tests/check_cache.sh": CACHE_CHECK},
    ),
    Scenario(
        "quiet-new-notes-file",
        [
            Turn(
                "Create docs/meeting.md with today's three agenda items: release, hiring, offsite",
                [Write("docs/meeting.md", "# Meeting\n\n1. Release\n2. Hiring\n3. Offsite\n")],
                "Created docs/meeting.md.",
            )
        ],
    ),
    Scenario(
        "quiet-question-only",
        [
            Turn(
                "What is the difference between a list and a tuple in Python?",
                [],
                "A list is mutable, a tuple is not; tuples can be dict keys.",
            )
        ],
    ),
    Scenario(
        "quiet-grep-todos",
        [Turn("Are there TODOs left in src?", [Run("grep -rn TODO src", 1)], "No TODOs in src/.")],
        {"src/greet.py": GREET},
    ),
    Scenario(
        "quiet-thanks-after-edit",
        [
            Turn(
                "Make greet() say Hi instead of Hello",
                [
                    Read("src/greet.py"),
                    Edit(
                        "src/greet.py", '    return f"Hello, {name}!"', '    return f"Hi, {name}!"'
                    ),
                ],
                "greet() now says Hi.",
            ),
            Turn("No, that's all, thanks!", [], "You're welcome."),
        ],
        {"src/greet.py": GREET},
    ),
    Scenario(
        "quiet-dont-worry",
        [
            Turn(
                "Run the pager check",
                [Run("python3 -W always tests/check_pager.py")],
                "It passes; Python printed no warnings.",
            ),
            Turn(
                "Don't worry about warnings for now, just tell me the page count for 10 items of 5.",
                [],
                "pages(10, 5) is 2.",
            ),
        ],
        {
            "src/pager.py": "def pages(count, size):\n    return -(-count // size)\n",
            "tests/check_pager.py": pytest_like("pager", "assert pages(10, 5) == 2\n"),
        },
    ),
    Scenario(
        "quiet-validate-json",
        [
            Turn(
                "Is config/app.json valid?",
                [Run("python3 -m json.tool config/app.json")],
                "Yes, it parses.",
            )
        ],
        {"config/app.json": '{\n  "name": "shop",\n  "port": 8080\n}\n'},
    ),
    Scenario(
        "quiet-tool-missing",
        [
            Turn(
                "Lint scripts/ship.sh with shellcheck",
                [Run("shellcheck scripts/ship.sh", 127), Run("sh -n scripts/ship.sh")],
                "shellcheck is not installed on this machine; `sh -n` finds no syntax error.",
            )
        ],
        {"scripts/ship.sh": SHIP},
    ),
    Scenario(
        "quiet-add-test",
        [
            Turn(
                "Add a check that greet handles an empty name",
                [
                    Read("tests/check_greet.py"),
                    Edit(
                        "tests/check_greet.py",
                        "assert greet('Ada') == 'Hello, Ada!'",
                        "assert greet('Ada') == 'Hello, Ada!'\nassert greet('') == 'Hello, !'",
                    ),
                    Run("python3 tests/check_greet.py"),
                ],
                "Added; it passes.",
            )
        ],
        {"src/greet.py": GREET, "tests/check_greet.py": GREET_TEST},
    ),
    Scenario(
        "quiet-two-reads-review",
        [
            Turn(
                "Review src/cart.js and its test, anything wrong?",
                [Read("src/cart.js"), Read("test/cart.test.js"), Run("node test/cart.test.js")],
                "Both look fine and the test passes.",
            )
        ],
        {
            "src/cart.js": CART.replace("sum + item.price", "sum + Number(item.price)"),
            "test/cart.test.js": CART_TEST,
        },
    ),
]
