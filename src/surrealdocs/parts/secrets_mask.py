"""Secrets kept out of the texts a server may echo back: a model server's error body can
quote the API key it was sent, in its own case, percent-encoded, as hex, or inside a base64
blob (``Basic`` credentials, a JWT, a dump of the request's headers). :func:`mask` finds
every such form, and any run of at least :data:`MIN_RUN` characters of the key, and puts
``***`` in its place."""

from __future__ import annotations

import base64
import binascii
import re
import urllib.parse
from collections.abc import Iterable

MIN_RUN = 8  # a shorter piece of a key tells an attacker next to nothing
MASK = "***"


def _runs(text: str) -> set[str]:
    """Every stretch of ``MIN_RUN`` characters of ``text`` (all of it when shorter)."""
    if len(text) <= MIN_RUN:
        return {text} if text else set()
    return {text[i:i + MIN_RUN] for i in range(len(text) - MIN_RUN + 1)}


def _base64_cores(secret: bytes) -> set[str]:
    """The part of ``secret``'s base64 that stays the same wherever the secret sits in the
    encoded bytes: for each of the three alignments, the characters that only the secret's
    own bytes decide (standard and URL-safe alphabets, padding dropped)."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret).decode().rstrip("=")
        start = -(-offset * 4 // 3)  # the first character made of the secret's bits only
        full = (offset + len(secret)) * 4 // 3  # the last whole one
        core = encoded[start + 1:full]
        if len(core) >= MIN_RUN:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def forms(secret: str) -> set[str]:
    """The strings that give ``secret`` away: its runs as written, percent-encoded and as
    hex, and its base64 at every alignment (matched without regard to case)."""
    raw = secret.encode()
    out = _runs(secret) | _runs(urllib.parse.quote(secret, safe=""))
    out |= _runs(binascii.hexlify(raw).decode())
    for core in _base64_cores(raw):
        out |= _runs(core)
    return {f for f in out if f}


def mask(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every form of each secret (see :func:`forms`) replaced by ``***``;
    overlapping finds are masked as one."""
    patterns = set()
    for secret in secrets:
        if secret:
            patterns |= forms(secret)
    if not text or not patterns:
        return text
    finder = re.compile("|".join(re.escape(p) for p in sorted(patterns, key=len,
                                                              reverse=True)), re.IGNORECASE)
    spans: list[list[int]] = []
    for i in range(len(text)):  # overlapping matches: try at every position
        match = finder.match(text, i)
        if match is None:
            continue
        if spans and match.start() <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], match.end())
        else:
            spans.append([match.start(), match.end()])
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], MASK]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
