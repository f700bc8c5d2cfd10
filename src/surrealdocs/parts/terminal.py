"""Text from elsewhere (a chat model's answer, a document's words) made safe for a
terminal: control characters (C0 but newline and tab, DEL, C1 — ESC starts the sequences
that clear the screen or set the window's title) and the bidirectional controls (which
reorder what is shown: Trojan Source) are printed as escapes, never interpreted."""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                     "\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with every control and bidi character shown as ``\\xNN`` / ``\\uNNNN``."""
    return _UNSAFE.sub(lambda m: _escape(m.group()), text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
