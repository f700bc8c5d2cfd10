"""Running headers and footers: lines that open or close most pages of a document (a title,
"Copyright Office Summary December 1998 Page 7", a page number). They stay in the
document's text, but no chunk holds them: repeated in every chunk that starts a page, they
outranked the passages themselves (``copyright`` found the header of every page first).

A line is a running line when, with its digits ignored ("Page 7" and "Page 8" are one
line), it is among the first or last :data:`EDGE_LINES` non-empty lines of at least half of
a document's pages, and of at least :data:`MIN_PAGES` pages, and stands about once a page
(a line of that shape many times a page is the text's own: numbered lines, table rows).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Sequence

EDGE_LINES = 3
MIN_PAGES = 3
MAX_LINE_CHARS = 200  # a longer "line" is a paragraph, never a header
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def _key(line: str) -> str:
    return _SPACE.sub(" ", _DIGITS.sub("#", line.strip()))


def _lines(content: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans (with their line break) of a page's non-empty lines."""
    lines: list[tuple[int, int]] = []
    at = start
    while at < end:
        nl = content.find("\n", at, end)
        stop = end if nl < 0 else nl + 1
        if content[at:stop].strip():
            lines.append((at, stop))
        at = stop
    return lines


def _edges(lines: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:]


def running_lines(content: str, page_starts: Sequence[Sequence[int]] | None
                  ) -> list[tuple[int, int]]:
    """The spans of ``content`` that are running headers or footers (sorted, disjoint),
    given its pages as ``[page number, offset]`` pairs; none for fewer than
    :data:`MIN_PAGES` pages."""
    if not page_starts or len(page_starts) < MIN_PAGES:
        return []
    offsets = [int(p[1]) for p in page_starts] + [len(content)]
    pages = [_lines(content, a, b) for a, b in itertools.pairwise(offsets) if b > a]
    seen: Counter[str] = Counter()
    for lines in pages:
        seen.update({_key(content[a:b]) for a, b in _edges(lines)
                     if len(content[a:b].strip()) <= MAX_LINE_CHARS})
    needed = max(MIN_PAGES, (len(pages) + 1) // 2)
    running = {key for key, n in seen.items() if n >= needed and key}
    if not running:
        return []
    # every short line's key, once (the long ones are paragraphs)
    keys = {(a, b): _key(content[a:b]) for lines in pages for a, b in lines
            if len(content[a:b].strip()) <= MAX_LINE_CHARS}
    # a header stands once on a page: a line of that shape standing many times a page
    # is the text's own (numbered lines, table rows)
    everywhere = Counter(key for key in keys.values() if key in running)
    running = {key for key in running if everywhere[key] <= 2 * seen[key]}
    # found at the pages' edges; removed wherever they stand (a PDF's text may put a
    # header after a footnote)
    return sorted(span for span, key in keys.items() if key in running)


def texts_of(content: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """Each running line once, as it first stands in the text."""
    out: dict[str, str] = {}
    for a, b in spans:
        out.setdefault(_key(content[a:b]), content[a:b].strip())
    return list(out.values())
