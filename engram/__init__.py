"""engram: a git-native, file-first memory for AI coding agents.

The library API is ``engram.service.Engram``; the CLI (``engram``) and the other adapters are
thin layers over it. Importing this package does no work.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
