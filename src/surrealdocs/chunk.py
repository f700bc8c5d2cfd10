"""Chunks with positions: index, character span in the document text, page numbers.

kreuzberg's chunker splits at sentence and paragraph boundaries and reports UTF-8 *byte*
offsets; here they become Python string (code point) offsets, so that
``document.content[chunk.char_start:chunk.char_end] == chunk.content``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Chunk:
    index: int
    content: str
    char_start: int
    char_end: int
    first_page: int | None = None
    last_page: int | None = None

    @property
    def page_number(self) -> int | None:
        return self.first_page

    @property
    def word_count(self) -> int:
        return len(self.content.split())


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


def chunk_text(text: str, max_chars: int = 800, overlap: int = 100) -> list[Chunk]:
    """Chunk plain text with the same chunker as documents (no extraction involved)."""
    from kreuzberg import ChunkingConfig, ExtractionConfig, extract_bytes_sync

    if not text.strip():
        return []
    config = ExtractionConfig(
        use_cache=False,
        chunking=ChunkingConfig(max_chars=max_chars, max_overlap=overlap),
    )
    result = extract_bytes_sync(text.encode("utf-8"), "text/plain", config)
    content = result.content
    chunks = chunks_from_kreuzberg(content, result.chunks or [])
    if content != text:  # kreuzberg normalised the text: re-anchor spans on the original
        cursor = 0
        for c in chunks:
            found = text.find(c.content, cursor)
            if found >= 0:
                c.char_start, c.char_end = found, found + len(c.content)
                cursor = found + 1
    return chunks
