"""Chunks with positions: index, character span in the document text, page numbers.

:func:`cut` is the one decision of a text's chunks, for extraction, ingest and a notebook
source's vectorize alike: made (or kreuzberg's), fitted to the model's window, given their
pages and their heading context.

kreuzberg's chunker splits at sentence and paragraph boundaries and reports UTF-8 *byte*
offsets; here they become Python string (code point) offsets, so that
``document.content[chunk.char_start:chunk.char_end] == chunk.content``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Cutting:
    """How a store cuts text: ``size`` and ``overlap`` in characters, whether chunks carry
    their heading path (``headings``), and the embedding model's window (its most word
    pieces and their counter; ``None``: chunks are not fitted)."""

    size: int
    overlap: int
    headings: bool = True
    window: tuple[int, Callable[[Sequence[str]], list[int]]] | None = None


def cut(content: str, cutting: Cutting, *, chunks: list[Chunk] | None = None,
        page_starts: Sequence[Sequence[int]] | None = None,
        headings: Sequence[Any] = (), skip: Sequence[tuple[int, int]] = ()) -> list[Chunk]:
    """The chunks of ``content``: ``chunks`` as given (kreuzberg's, which carry its page
    numbers), else made by :func:`chunk_text` (none holding a span of ``skip``); fitted to
    the model's window; chunks made here given their pages from ``page_starts``; each given
    the path of ``headings`` over it."""
    made = chunks is None
    if chunks is None:
        chunks = chunk_text(content, cutting.size, cutting.overlap, skip=skip)
    if cutting.window is not None:
        most, count = cutting.window
        fitted = fit_to_window(content, chunks, most, count, cutting.overlap)
        made, chunks = made or fitted is not chunks, fitted
    if made:
        assign_pages(chunks, page_starts)
    if cutting.headings and headings:
        assign_context(content, chunks, headings)
    return chunks


@dataclass
class Chunk:
    index: int
    content: str
    char_start: int
    char_end: int
    first_page: int | None = None
    last_page: int | None = None
    # the heading path over the chunk ("Chapter 2 › Eligibility"), kept apart from its text
    context: str | None = None

    @property
    def embedding_input(self) -> str:
        return embedding_input(self.content, self.context)

    @property
    def page_number(self) -> int | None:
        return self.first_page

    @property
    def word_count(self) -> int:
        return len(self.content.split())


# What the embedding model reads of a chunk: its context, a blank line, its text. The store
# computes the same string for the chunk's ``text_hash`` (schema migration 10).
CONTEXT_SEPARATOR = "\n\n"
# Longest context kept: a heading path is a pointer, not text (the model's window is short).
CONTEXT_MAX_CHARS = 200
HEADING_SEPARATOR = " › "


def embedding_input(content: str, context: str | None) -> str:
    return f"{context}{CONTEXT_SEPARATOR}{content}" if context else content


def assign_context(content: str, chunks: Sequence[Chunk],
                   headings: Sequence[tuple[int, str]]) -> None:
    """Give each chunk the path of headings it lies under.

    ``headings`` are (level, text) in document order, as kreuzberg's document structure
    lists them; each is found in ``content`` after the previous one (a heading not found
    is skipped). A chunk lies under the headings found at or before its start: the last
    heading of each level, deeper levels cleared by a shallower heading.
    """
    found: list[tuple[int, int, str]] = []  # (offset, level, text)
    at = 0
    for level, text in headings:
        text = " ".join(_GAPS.split(text)).strip()
        if not text:
            continue
        offset = _find_words(content, text, at)
        if offset < 0:
            continue
        found.append((offset, level, text))
        at = offset + 1
    if not found:
        return
    path: list[tuple[int, str]] = []  # (level, text), shallowest first
    passed = 0
    for chunk in sorted(chunks, key=lambda c: c.char_start):
        while passed < len(found) and found[passed][0] <= chunk.char_start:
            _, level, text = found[passed]
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
            passed += 1
        chunk.context = _join_path([text for _, text in path])


_GAPS = re.compile(r"[\s\x00-\x1f\x7f]+")  # whitespace and control characters


# How far after the previous heading the next one is looked for by pattern (on a line of its
# own, or with other whitespace): a heading absent from the text must not cost a scan of all
# the rest of a long text each.
HEADING_WINDOW = 200_000


def _find_words(content: str, words: str, start: int) -> int:
    """Where the heading ``words`` (single-spaced) are in ``content`` from ``start``: on a
    line of their own if they are so within :data:`HEADING_WINDOW` (whatever the whitespace
    between them), else their first occurrence; -1 if nowhere."""
    end = min(len(content), start + HEADING_WINDOW)
    gaps = _GAPS.pattern.join(re.escape(w) for w in words.split())
    match = re.compile(r"(?m)^[ \t#*]*" + gaps + r"[ \t:.*]*$").search(content, start, end)
    if match:
        return match.start() + len(match.group()) - len(match.group().lstrip(" \t#*"))
    offset = content.find(words, start)
    if offset >= 0:
        return offset
    match = re.compile(gaps).search(content, start, end)
    return match.start() if match else -1


def _join_path(texts: list[str]) -> str | None:
    while len(texts) > 1 and len(HEADING_SEPARATOR.join(texts)) > CONTEXT_MAX_CHARS:
        texts = texts[1:]  # the deepest headings say most about the chunk
    if not texts:
        return None
    joined = HEADING_SEPARATOR.join(texts)
    return joined if len(joined) <= CONTEXT_MAX_CHARS else joined[:CONTEXT_MAX_CHARS - 1] + "…"


def byte_to_char_offsets(text: str, byte_offsets: Sequence[int]) -> list[int]:
    """Map UTF-8 byte offsets in ``text`` to code point offsets."""
    if text.isascii():
        return [int(b) for b in byte_offsets]
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = np.where(codepoints < 0x80, 1,
                      np.where(codepoints < 0x800, 2, np.where(codepoints < 0x10000, 3, 4)))
    ends = np.cumsum(widths)  # ends[i] = byte offset just after char i
    # number of characters whose end is <= b  ==  char index at byte offset b
    return [int(i) for i in np.searchsorted(ends, np.asarray(byte_offsets), side="right")]


def chunks_from_kreuzberg(content: str, kz_chunks: Sequence[Any]) -> list[Chunk]:
    """Our chunks from kreuzberg's, dropping whitespace-only ones and renumbering."""
    metas = [c.metadata or {} for c in kz_chunks]
    starts = byte_to_char_offsets(content, [m.get("byte_start", 0) for m in metas])
    ends = byte_to_char_offsets(content, [m.get("byte_end", 0) for m in metas])
    out: list[Chunk] = []
    for kz, meta, start, end in zip(kz_chunks, metas, starts, ends):
        text = kz.content or ""
        if not text.strip():
            continue
        if content[start:end] != text:  # offsets disagree: locate the text itself
            found = content.find(text, out[-1].char_start if out else 0)
            start, end = (found, found + len(text)) if found >= 0 else (start, start + len(text))
        out.append(Chunk(
            index=len(out),
            content=text,
            char_start=start,
            char_end=end,
            first_page=_page(meta.get("first_page")),
            last_page=_page(meta.get("last_page")),
        ))
    return out


def fit_to_window(content: str, chunks: list[Chunk], max_tokens: int,
                  count_tokens: Callable[[Sequence[str]], list[int]],
                  overlap: int = 100) -> list[Chunk]:
    """Chunks an embedding model reads whole.

    Text that fits the model's window of ``max_tokens`` word pieces becomes one chunk: one
    vector of the whole text says more than several of its pieces. Otherwise every chunk
    longer than the window is cut again, in proportion to its word pieces, so that no text
    is silently truncated by the model. Spans keep indexing ``content``.
    """
    if not chunks:
        return chunks
    if len(chunks) > 1 and len(content) <= max_tokens * MAX_CHARS_PER_TOKEN:
        start = len(content) - len(content.lstrip())
        end = len(content.rstrip())
        if count_tokens([content[start:end]])[0] <= max_tokens:
            pages = [p for c in chunks for p in (c.first_page, c.last_page) if p is not None]
            return [Chunk(0, content[start:end], start, end,
                          min(pages) if pages else None, max(pages) if pages else None)]
    counts = count_tokens([c.content for c in chunks])
    if all(n <= max_tokens for n in counts):
        return chunks
    out: list[Chunk] = []
    for chunk, n in zip(chunks, counts):
        for piece in (_split_to_fit(chunk, n, max_tokens, count_tokens, overlap)
                      if n > max_tokens else [chunk]):
            piece.index = len(out)
            out.append(piece)
    return out


# A word piece rarely covers more characters than this: longer text cannot fit the window.
MAX_CHARS_PER_TOKEN = 12


def _split_to_fit(chunk: Chunk, tokens: int, max_tokens: int,
                  count_tokens: Callable[[Sequence[str]], list[int]],
                  overlap: int) -> list[Chunk]:
    size = max(50, int(len(chunk.content) * max_tokens / tokens * 0.9))
    parts = chunk_text(chunk.content, size, min(overlap, size // 4))
    if len(parts) <= 1:  # the chunker cannot cut it smaller: keep it as it is
        return [chunk]
    out = []
    for part in parts:
        part.char_start += chunk.char_start
        part.char_end += chunk.char_start
        part.first_page, part.last_page = chunk.first_page, chunk.last_page
        n = count_tokens([part.content])[0]
        out += _split_to_fit(part, n, max_tokens, count_tokens, overlap) \
            if n > max_tokens else [part]
    return out


def _page(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value > 0 else None


def assign_pages(chunks: Sequence[Chunk], page_starts: Sequence[Sequence[int]] | None) -> None:
    """Set each chunk's first and last page from where the pages start in the text
    (``[page number, character offset]`` pairs, as extraction recorded them)."""
    if not page_starts:
        return
    ordered = sorted((int(start), int(page)) for page, start in page_starts)
    starts = [start for start, _ in ordered]

    def page_at(offset: int) -> int:
        return ordered[max(bisect.bisect_right(starts, offset) - 1, 0)][1]

    for chunk in chunks:
        chunk.first_page = page_at(chunk.char_start)
        chunk.last_page = page_at(max(chunk.char_end - 1, chunk.char_start))


# kreuzberg's text chunker rescans the rest of a line for every chunk it cuts from it: its
# cost grows with the square of the line's length (a 1 MB line takes about 10 s, 2 MB 40 s).
# Text with a line longer than this is chunked in pieces of ``piece_chars`` characters.
LONG_LINE = 10_000
# Its cost also grows faster than a text's length: War and Peace (3.2 M characters) takes
# 1.7 s in one call and 0.16 s as 17 pieces of 200,000 (5,236 chunks against 5,226, the
# pieces cut at paragraph breaks). A longer text is chunked in pieces of this size.
LONG_TEXT = 200_000


def longest_line(text: str | bytes) -> int:
    """Length of the longest line of ``text`` (characters, or bytes for ``bytes``)."""
    if not text:
        return 0
    sep = b"\n" if isinstance(text, bytes) else "\n"
    return max(map(len, text.split(sep)))  # type: ignore[arg-type]


def chunk_text(text: str, max_chars: int = 800, overlap: int = 100, *,
               skip: Sequence[tuple[int, int]] = ()) -> list[Chunk]:
    """Chunk plain text with the same chunker as documents (no extraction involved).

    Text whose lines are all shorter than :data:`LONG_LINE`, and which is no longer than
    :data:`LONG_TEXT`, goes to kreuzberg's chunker in one call. Longer lines make that call
    quadratic, and a longer text slower than its length, so such text is cut into pieces
    first (:func:`pieces`), at paragraph, line, sentence or word boundaries, each piece
    starting ``overlap`` characters before the previous one ended; the pieces are chunked
    in one parallel batch. ``skip``: sorted, disjoint spans no chunk may hold (running
    headers and footers); the text between them is chunked apart. Spans always index
    ``text``.
    """
    if not text.strip():
        return []
    spans: list[tuple[int, int]] = []
    for a, b in _between(len(text), skip):
        span = text[a:b]
        if not span.strip():
            continue
        if longest_line(span) > LONG_LINE:
            size = piece_chars(max_chars)
        elif len(span) > LONG_TEXT:
            size = LONG_TEXT
        else:
            spans.append((a, b))
            continue
        spans += [(a + x, a + y) for x, y in pieces(span, size, overlap)]
    if not spans:
        return []
    results = _chunk_pieces([text[a:b] for a, b in spans], max_chars, overlap)
    out: list[Chunk] = []
    for (start, end), result in zip(spans, results):
        piece = text[start:end]
        chunks = chunks_from_kreuzberg(result.content, result.chunks or [])
        if result.content != piece:  # kreuzberg normalised the text: map spans back
            chunks = _map_back(piece, result.content, chunks)
        for c in chunks:
            c.char_start += start
            c.char_end += start
            if out and c.char_end <= out[-1].char_end:
                continue  # inside the overlap with the previous piece
            c.index = len(out)
            out.append(c)
    return out


_SPACES = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)


def _map_back(original: str, normalised: str, chunks: list[Chunk]) -> list[Chunk]:
    """Spans of ``chunks`` (in ``normalised``) moved onto ``original``.

    kreuzberg's text/plain extraction only changes whitespace (it trims lines and collapses
    blank lines), so the two texts have the same non-space characters in the same order: a
    chunk maps to the span from its first to its last non-space character, and its text
    becomes that span of ``original``. Should the texts differ otherwise, each chunk's text is
    searched for in ``original`` instead.
    """
    def solid(text: str) -> Any:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        where = np.flatnonzero(~np.isin(codes, _SPACES))
        return codes[where], where

    codes_o, where_o = solid(original)
    codes_n, where_n = solid(normalised)
    if len(codes_o) != len(codes_n) or not np.array_equal(codes_o, codes_n):
        cursor = 0
        for c in chunks:
            found = original.find(c.content, cursor)
            if found >= 0:
                c.char_start, c.char_end = found, found + len(c.content)
                cursor = found + 1
        return [c for c in chunks if original[c.char_start:c.char_end] == c.content]
    out = []
    for c in chunks:
        first = int(np.searchsorted(where_n, c.char_start))
        last = int(np.searchsorted(where_n, c.char_end)) - 1
        if first > last:
            continue  # only spaces
        c.char_start, c.char_end = int(where_o[first]), int(where_o[last]) + 1
        c.content = original[c.char_start:c.char_end]
        out.append(c)
    return out


def piece_chars(max_chars: int) -> int:
    """Size of the pieces long lines are cut into: enough for many chunks, small enough that
    the chunker's quadratic cost stays negligible (about 2 ms per piece)."""
    return max(16 * max_chars, 8_192)


def pieces(text: str, size: int, overlap: int = 0) -> list[tuple[int, int]]:
    """Spans of at most ``size`` characters covering ``text``, each cut at the last
    paragraph break, line break, sentence end or space of its second half (else at
    ``size``), and each after the first starting about ``overlap`` characters before the
    previous one ended (at a word boundary)."""
    spans: list[tuple[int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(start + size, n)
        if end < n:
            end = _cut(text, start + size // 2, end)
        spans.append((start, end))
        if end >= n:
            break
        nxt = end
        if overlap:
            back = max(end - overlap, start + 1)
            space = text.find(" ", back, end)
            nxt = space + 1 if space >= 0 else end
        start = nxt
    return spans


def _cut(text: str, lo: int, hi: int) -> int:
    for sep in ("\n\n", "\n"):
        at = text.rfind(sep, lo, hi)
        if at >= 0:
            return at + len(sep)
    best = max(text.rfind(p, lo, hi) for p in (". ", "? ", "! ", "。"))
    if best >= 0:
        return best + (1 if text[best] == "。" else 2)
    at = text.rfind(" ", lo, hi)
    return at + 1 if at >= 0 else hi


def _chunk_pieces(texts: list[str], max_chars: int, overlap: int) -> list[Any]:
    from kreuzberg import (
        ChunkingConfig,
        ExtractionConfig,
        batch_extract_bytes_sync,
        extract_bytes_sync,
    )

    config = ExtractionConfig(
        use_cache=False,
        chunking=ChunkingConfig(max_chars=max_chars, max_overlap=overlap),
    )
    data: list[bytes | bytearray] = [t.encode("utf-8") for t in texts]
    if len(data) == 1:
        return [extract_bytes_sync(data[0], "text/plain", config)]
    return list(batch_extract_bytes_sync(data, ["text/plain"] * len(data), config))


def _between(length: int, skip: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of ``[0, length)`` outside the (sorted, disjoint) ``skip`` spans."""
    out, at = [], 0
    for a, b in skip:
        if a > at:
            out.append((at, a))
        at = max(at, b)
    if at < length:
        out.append((at, length))
    return out
