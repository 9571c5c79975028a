"""Make untrusted text safe to print on a terminal: its control characters shown, not obeyed.

A memory's text comes from teammates' commits, agents and imports. Printed raw, an ESC sequence
in it could clear the screen, retitle the window, fake earlier output (``\\r``, backspace) or
write the clipboard (OSC 52). Owns the one rule every adapter that draws on a terminal (the CLI,
the TUI) applies: every C0 control but newline and tab, DEL, and every C1 control becomes a
visible ``\\xNN``. Must not: import anything (it is a pure function on text), touch markup (each
adapter escapes its own: rich markup in the CLI, none needed where text is drawn as plain Text).
"""

from __future__ import annotations

from typing import Final

__all__ = ["json_c1", "visible"]

_CONTROLS: Final = (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))
_VISIBLE: Final = {code: f"\\x{code:02x}" for code in _CONTROLS}
# json.dumps escapes C0 controls itself but writes C1 ones (U+0080-U+009F, CSI among them) raw.
_JSON_C1: Final = {code: f"\\u{code:04x}" for code in range(0x80, 0xA0)}


def visible(text: str) -> str:
    """Return text with every control character but newline and tab shown as ``\\xNN``."""
    return text.translate(_VISIBLE)


def json_c1(text: str) -> str:
    """Return JSON text with raw C1 controls escaped as ``\\u00NN`` (the same JSON value)."""
    return text.translate(_JSON_C1)
