"""Git-native sync: the one merge function and, later, chunks and remotes.

Everything that reconciles two views of the memories (the git merge driver, sync chunks,
``engram import``) goes through ``engram.sync.merge``.
"""
