"""What engram does at each agent hook, over an opened store: brief, check, capture, end.

``answer.answer`` (the facade's ``Engram.hook``) takes an agent's hook event
(``payload.Event``, read from the JSON the agent sent) and the ``HookSpec`` it came through,
acts on an opened project, and returns exactly what the agent reads (``reply``): the briefing
at session start and after compaction, the check of every file a tool call touches, the
learnings of the agent's last message saved as memories, the session closed at its end. The
``engram hook`` command (``engram.hooks``) runs it in its own process, or the daemon
(``engram.daemon``'s ``engram_hook``) in its long-lived one: the same answer either
way. No adapter framework; nothing here reads stdin or prints.

    payload  the hook's JSON read into an ``Event`` (standard library only: a hook process
             answered by the daemon imports nothing else of engram's core)
    reply    the text and the JSON the agent reads
    answer   ``answer`` over an opened ``Project``
"""
