"""``python -m engram``: the same CLI as the ``engram`` console script."""

from __future__ import annotations

from engram.cli import main

if __name__ == "__main__":
    main()
