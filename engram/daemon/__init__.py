"""daemon/ is the socket daemon: ``server`` answers engram-rs methods, the CLI's calls and hooks.

``protocol`` is its wire protocol and client (newline-delimited JSON over a Unix socket); it
uses only the leaves, so the CLI may import it (docs/layers.toml places it there). This file
imports nothing, so importing ``engram.daemon.protocol`` loads no server.
"""
