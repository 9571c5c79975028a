#!/usr/bin/env bash
# Install the coding agents that tests/agents/test_real_agents.py drives, at the versions
# package-lock.json pins, into .ci/agents/node_modules (git-ignored). A machine without npm or
# without the npm registry still runs every other test: the agent tests skip, saying what is
# missing.
set -uo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
    echo "warning: npm is not installed: tests/agents/test_real_agents.py will skip" >&2
    exit 0
fi
if [ -f node_modules/.package-lock.json ] && cmp -s package-lock.json .installed-lock 2>/dev/null; then
    exit 0  # this lock file is installed already
fi
# `npm install` from the lock file rather than `npm ci`: opencode-ai lists platform packages as
# optional dependencies that the registry does not all publish, and npm ci then refuses the lock.
# package.json pins every program exactly; package-lock.json pins the rest.
if npm install --no-save --no-audit --no-fund --loglevel=error; then
    cp package-lock.json .installed-lock
else
    echo "warning: npm install failed: tests/agents/test_real_agents.py will skip" >&2
fi
