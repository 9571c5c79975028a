"""engram: a git-native, file-first memory for AI coding agents.

The library API is ``Engram`` (``engram.service.Engram``, the facade every adapter calls):
``from engram import Engram``; docs/library.md shows it. The CLI (``engram``) and the other
adapters are thin layers over it. Importing this package does no work: ``Engram`` is imported
on first use (the one import of this leaf upward, declared in docs/layers.toml), so the
command line's start-up path, which imports ``engram``, stays cheap.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a hook process 10 ms: annotations only (mypy reads this)
if TYPE_CHECKING:
    from typing import Any

    from engram.service import Engram

__all__ = ["Engram", "__version__"]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``Engram``: the facade, imported when first asked for."""
    if name == "Engram":
        from engram.service import Engram

        return Engram
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
