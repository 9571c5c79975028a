"""Indexer: creates memories from what the project already knows (ADRs, git history).

Not to be confused with engram.index, the derived search index over memories.
"""
