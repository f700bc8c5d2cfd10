"""What a face shows of a hit: the part of its text where the query's words are, with those
words marked (the page does the same in its script).

A query word matches a word of the text that starts with the word's rough stem ("herons"
marks "heron" and "Herons"), as the BM25 leg sees it: stop words out, case ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .analyzer import STOP_WORDS

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIX_LONG = re.compile(r"(ing|ed|es|s|ly|ion|ions)$")


@dataclass(frozen=True)
class Snippet:
    """``text`` (a window of the hit's text, whitespace collapsed, ``…`` where it was cut)
    and the character spans in it of the query's words."""

    text: str
    marks: list[tuple[int, int]]


def stems(query: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOP_WORDS] or words
    out = {(_SUFFIX_LONG.sub("", w) if len(w) > 5 else w.removesuffix("s")) or w
           for w in kept}
    return sorted(out, key=lambda s: (-len(s), s))


def snippet(text: str, query: str, width: int = 240) -> Snippet:
    """The window of about ``width`` characters of ``text`` that holds the most matches of
    the query's words (the start when none match), cut at word boundaries."""
    flat = " ".join(text.split())
    terms = stems(query)
    spans = [(m.start(), m.end()) for m in _WORD.finditer(flat)
             if any(m.group().lower().startswith(t) for t in terms)]
    if len(flat) <= width:
        return Snippet(flat, spans)
    start = 0
    if spans:
        best = max(range(len(spans)),
                   key=lambda i: (sum(1 for s, _ in spans[i:] if s < spans[i][0] + width), -i))
        start = max(0, spans[best][0] - width // 4)
        if start:
            space = flat.rfind(" ", 0, start + 1)
            start = space + 1 if space >= 0 else start
    end = min(len(flat), start + width)
    if end < len(flat):
        space = flat.rfind(" ", start, end)
        end = space if space > start else end
    head, tail = ("…" if start else ""), ("…" if end < len(flat) else "")
    shift = len(head) - start
    marks = [(s + shift, e + shift) for s, e in spans if s >= start and e <= end]
    return Snippet(head + flat[start:end] + tail, marks)
