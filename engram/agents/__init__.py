"""agents/ is the coding agent's loop: setup, hook payloads and replies, briefing, check, capture.

``setup`` wires engram into an agent (``engram setup AGENT``: its MCP server entry,
instructions, and the hooks declared once in ``hookspec``). At each hook, ``answer.answer``
(the facade's ``Engram.hook``) takes the agent's event (``payload.Event``, read from the JSON
the agent sent) and the ``HookSpec`` it came through, acts on an opened project and returns
exactly what the agent reads (``reply``): the briefing at session start and after compaction
(``briefing``), the check of every file a tool call reads or writes (``check``), memory offered
unasked at the prompt, after a failed command and to a subagent (``moments``), the learnings
of the agent's last message proposed as memories (``capture``), the session summary at its end
(``session``); what a session was shown and edited is kept in its ledger
(``engram.store.ledger``). The ``engram hook`` command (``engram.hooks``) runs it in its own
process, or the daemon (``engram.daemon.server``'s ``engram_hook``) in its long-lived one: the
same answer either way. No adapter framework; nothing here reads stdin or prints.

This file imports nothing, and ``hookspec`` and ``payload`` use the standard library only
(docs/layers.toml places them with the leaves): a hook process the daemon answers imports
nothing else of engram's core.
"""
