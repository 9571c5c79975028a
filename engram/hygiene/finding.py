"""One thing a health check found: what ``doctor`` and its secret scan report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Finding:
    """One thing ``doctor`` found: severity ``error`` / ``warning`` / ``ok``, and if fixed."""

    severity: str
    check: str
    message: str
    fixed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping."""
        return {
            "severity": self.severity,
            "check": self.check,
            "message": self.message,
            "fixed": self.fixed,
        }
