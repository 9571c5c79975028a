"""Fixtures of the index tests: each backend in turn."""

from __future__ import annotations

import pytest

from tests.helpers.backends import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The full-text backend a test runs on: tantivy, then fts5."""
    return str(request.param)
