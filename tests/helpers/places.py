"""Where things are in the checkout, for tests in any folder under tests/."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent  # the checkout: README.md, engram/, benchmarks/, examples/
FIXTURES = TESTS / "fixtures"
HELPERS = TESTS / "helpers"
