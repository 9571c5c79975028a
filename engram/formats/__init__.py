"""formats/ is other tools' shapes in and out: Go engram, MCP memory JSON, plain notes, Obsidian.

``convert`` detects a file's format and dispatches to the readers (``goimport``, ``plain``; it
reads MCP memory JSON Lines and engram's own export itself); ``goexport`` writes Go engram's
shape and ``obsidian`` a vault; ``common`` holds what the readers share (``Converted``, import
identities, times, titles). The dispatcher imports the formats, never the reverse. Formats
convert only: no store and no merge (``engram.sync`` merges what they return).
"""
