"""``python -m engram.http_api``: serve the project of the working directory (see serve.main)."""

from __future__ import annotations

import logging
import sys

from engram.http_api.serve import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv[1:]))
