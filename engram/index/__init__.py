"""index/ is search over memories: the derived, rebuildable index of one memories file.

Not to be confused with engram.indexer, which creates memories from ADRs and git. The parts,
each in its own module: ``db.Index`` composes them and keeps them current (every read
refreshes first); ``records`` holds the SQLite rows, ``recordqueries`` the lookups and filters
over them; ``fulltext`` the backend in use and its queue; ``backend`` the backend protocol,
``factory`` picks one of ``tantivy`` and ``fts``; ``vectors`` the embeddings (``semantic`` the
model); ``ranking`` scores, fuses and cuts; ``query`` the values a recall passes and gets
back; ``source`` what the index reads of the store. Nothing here imports the store. This
package module imports none of them, so importing one part never loads the others.
"""
