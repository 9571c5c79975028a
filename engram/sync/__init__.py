"""sync/ shares memories between clones, branches and tools; the one merge function is here.

Everything that reconciles two views of the memories (the git merge driver, sync chunks,
``engram import``) goes through ``engram.sync.merge``. The modules:

- ``merge``: the one merge function (pure; keyed by id, commutative, associative, idempotent).
- ``chunks``, ``audit``: sync chunks, the manifest and the sync state (read, checked, rendered;
  the store writes them), and doctor's checks and repairs of them.
- ``transfer``: records from elsewhere merged into a workspace (``engram import``, chunks) and
  the export document.
- ``exchange``: ``engram sync``, local and through a git remote, over one workspace.
- ``remote`` (dulwich: fetch, commit, push), ``gitsetup`` (the attributes and drivers'
  config), ``gitmerge`` (the merge driver), ``gitresolve`` (``resolve``), ``gitlog`` (a
  memory's git log).
- ``gotransfer``, ``plaintransfer``: other tools' files merged into the stores (``engram.formats``
  converts them).

Nothing here imports the service or an adapter; dulwich is imported inside functions.
"""
