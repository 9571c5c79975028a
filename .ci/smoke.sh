#!/usr/bin/env bash
# The package as a user gets it: build the wheel and the sdist, check what they ship, install the
# wheel (no extras) into a clean virtualenv outside the repository, and use it in a fresh git
# repository with no file of this checkout around: init, remember, recall, check, MCP tools/list.
# Usage: .ci/smoke.sh [PYTHON]   (default: .venv/bin/python, which has `build`; `make test` makes it)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${1:-$REPO/.venv/bin/python}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/engram-smoke.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
step() { printf '\n== smoke: %s\n' "$*"; }
fail() { printf 'smoke FAILED: %s\n' "$*" >&2; exit 1; }

step "build the wheel and the sdist"
"$PY" -m build --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "build"; }
WHEEL=$(ls "$WORK"/dist/*.whl)
SDIST=$(ls "$WORK"/dist/*.tar.gz)
VERSION=$("$PY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
echo "$(basename "$WHEEL") $(basename "$SDIST")"

step "what the sdist and the wheel ship"
tar tzf "$SDIST" | sed 's|^[^/]*/||' >"$WORK/sdist.txt"
for needed in LICENSE README.md CHANGELOG.md pyproject.toml engram/__init__.py examples/library.py; do
    grep -qx "$needed" "$WORK/sdist.txt" || fail "the sdist lacks $needed"
done
if grep -E '(^|/)(\.venv|\.git|__pycache__|\.hypothesis|\.mypy_cache|\.ruff_cache|\.pytest_cache|\.demo)(/|$)|\.engram/(index|state)/|\.pyc$' "$WORK/sdist.txt"; then
    fail "the sdist ships the files above (local state, caches or a virtualenv)"
fi
"$PY" - "$WHEEL" <<'PYEOF' || fail "the wheel's contents"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no LICENSE in the wheel"
assert not [n for n in names if not n.startswith(("engram/", "engram_git-"))], "foreign files"
assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")], "bytecode shipped"
print(f"{len(names)} files, LICENSE included")
PYEOF

step "install the wheel into a clean virtualenv"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "$WHEEL" 2>&1 | grep -v "^WARNING: Location" || true
"$WORK/venv/bin/python" -c 'import engram' || fail "the wheel did not install"

step "use it in a fresh repository"
mkdir -p "$WORK/home" "$WORK/project/ledger"
cd "$WORK/project"
unset PYTHONPATH VIRTUAL_ENV
export PATH="$WORK/venv/bin:/usr/bin:/bin" HOME="$WORK/home" ENGRAM_HOME="$WORK/home/.engram"
export ENGRAM_DAEMON=off  # no background daemon left behind by the smoke test
git init -q .
git config user.name "Smoke Test"
git config user.email "smoke@example.invalid"
echo 'def total(x): return x // 100' >ledger/money.py
git add ledger && git commit -q -m "ledger"
where=$(python -c 'import engram, os; print(os.path.dirname(engram.__file__))')
case "$where" in "$WORK/venv/"*) ;; *) fail "engram imported from $where, not the clean virtualenv" ;; esac
[ "$(engram --version)" = "engram $VERSION" ] || fail "engram --version says '$(engram --version)'"
engram init
engram remember "Store money as integer minor units" "Floats lost a cent on JPY refunds." \
    --kind decision --files ledger/money.py
engram recall "integer minor units" | tee "$WORK/recall.txt"
grep -q "Store money as integer minor units" "$WORK/recall.txt" || fail "recall found nothing"
engram check --files ledger/money.py | tee "$WORK/check.txt"
grep -q "Store money as integer minor units" "$WORK/check.txt" || fail "check knows nothing"
python "$REPO/.ci/smoke_mcp.py" || fail "MCP tools/list"
python -c 'from engram import Engram
with Engram.open() as memory:
    assert memory.recall("integer minor units"), "library recall found nothing"
print("library: from engram import Engram works")'

step "an optional command without its extra"
set +e
engram serve --port 0 >"$WORK/serve.out" 2>"$WORK/serve.err"
status=$?
set -e
cat "$WORK/serve.err"
[ "$status" = 1 ] || fail "engram serve without fastapi exited $status"
grep -qx "hint: pip install 'engram-git\[http\]'" "$WORK/serve.err" || fail "no install hint"
if grep -q Traceback "$WORK/serve.err"; then fail "a traceback reached the user"; fi
printf '\nsmoke test of the built package: ok\n'
