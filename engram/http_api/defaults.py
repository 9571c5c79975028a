"""The HTTP server's defaults: its address and port, its token's variable, body limit, compat names.

A leaf of the package: every other module of it may read these, and this one imports nothing.
"""

from __future__ import annotations

from typing import Final

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 7437
TOKEN_ENV: Final = "ENGRAM_HTTP_TOKEN"
MAX_BODY_BYTES: Final = 8 * 1024 * 1024
COMPATS: Final = ("go-engram",)  # other tools' routes ``engram serve --compat`` can offer
PORT_ENV: Final = "ENGRAM_PORT"  # Go engram's plugins and server read the port here
