"""``python -m engram.daemon ROOT [SOCKET] [--idle SECONDS]``: the daemon in the foreground.

The same as ``python -m engram.daemon.server``, which it runs.
"""

import runpy

runpy.run_module("engram.daemon.server", run_name="__main__", alter_sys=True)
