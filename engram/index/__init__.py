"""Search over memories: the derived, rebuildable index (SQLite records + a full-text backend).

Not to be confused with engram.indexer, which creates memories from ADRs and git.
"""
