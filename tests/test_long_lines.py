"""Very long lines: kreuzberg's chunker is quadratic in a line's length, ours must not be."""

from __future__ import annotations

import asyncio
import random
from itertools import pairwise
from pathlib import Path

import pytest

import surrealdocs.parts.chunk as chunk_module
from surrealdocs import Settings
from surrealdocs.parts.chunk import LONG_LINE, LONG_TEXT, Chunk, chunk_text, pieces
from surrealdocs.parts.extract import Extracted, extract_file

WORDS = ("Brücke", "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "naïve")


def one_line(n_chars: int, sentences: bool = False) -> str:
    rng = random.Random(3)
    out, size = [], 0
    while size < n_chars:
        word = rng.choice(WORDS) + ("." if sentences and rng.random() < 0.08 else "")
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def assert_cover(text: str, chunks: list[Chunk], max_chars: int) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text.rstrip())
    for c in chunks:
        assert text[c.char_start:c.char_end] == c.content
        assert len(c.content) <= max_chars
    for a, b in pairwise(chunks):
        assert a.char_start < b.char_start  # in order
        assert not text[a.char_end:b.char_start].strip()  # nothing but spaces between


async def test_a_2mb_single_line_file_is_chunked_in_seconds(tmp_path: Path) -> None:
    text = one_line(2_000_000)
    f = tmp_path / "one-line.txt"
    f.write_text(text, encoding="utf-8")
    # kreuzberg's own chunking of this line took 33-46 s: the 20 s extraction timeout stops it
    settings = Settings(db="mem://", extract_timeout=20)
    out = await asyncio.wait_for(extract_file(f, settings), timeout=60)
    assert isinstance(out, Extracted), out
    assert out.content == text
    assert len(out.chunks) > 2_000
    assert_cover(out.content, out.chunks, settings.chunk_size)


@pytest.mark.parametrize("sentences", [False, True])
def test_chunk_text_of_a_long_line_covers_it_with_overlap(sentences: bool) -> None:
    text = "Title line\n\n" + one_line(120_000, sentences) + "\n\nA short closing paragraph."
    chunks = chunk_text(text, max_chars=300, overlap=40)
    assert_cover(text, chunks, 300)
    overlaps = [a.char_end - b.char_start for a, b in pairwise(chunks)]
    assert max(overlaps) > 0  # kreuzberg overlaps chunks within a sentence; so do pieces


def test_text_without_long_lines_is_chunked_in_one_call() -> None:
    text = "\n".join(one_line(LONG_LINE - 100) for _ in range(3))
    assert pieces(text, 10**9) == [(0, len(text))]
    chunks = chunk_text(text, max_chars=500, overlap=50)
    assert_cover(text, chunks, 500)


def test_a_long_text_is_chunked_in_pieces_like_one_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    paragraphs, size = [], 0
    while size < 2.5 * LONG_TEXT:
        words = [rng.choice(WORDS) + ("." if rng.random() < 0.1 else "")
                 for _ in range(rng.randint(20, 160))]
        paragraphs.append(" ".join(words))
        size += len(paragraphs[-1]) + 2
    text = "\n\n".join(paragraphs)
    calls: list[int] = []
    original = chunk_module._chunk_pieces

    def counting(texts: list[str], max_chars: int, overlap: int) -> list[object]:
        calls.append(len(texts))
        return original(texts, max_chars, overlap)

    monkeypatch.setattr(chunk_module, "_chunk_pieces", counting)
    chunks = chunk_text(text, max_chars=800, overlap=100)
    assert calls == [3]  # three pieces, one parallel batch
    assert_cover(text, chunks, 800)
    # away from the two cuts, the chunks are those of one call
    monkeypatch.setattr(chunk_module, "LONG_TEXT", 10**9)
    whole = chunk_text(text, max_chars=800, overlap=100)
    assert calls == [3, 1]
    shared = {(c.char_start, c.char_end) for c in chunks} & {
        (c.char_start, c.char_end) for c in whole}
    assert len(shared) >= len(whole) - 10 and abs(len(chunks) - len(whole)) <= 4


def test_pieces_cut_at_the_best_boundary() -> None:
    text = "aaaa bbbb. cccc dddd\neeee ffff"
    assert pieces(text, 24) == [(0, 21), (21, len(text))]  # the line break
    assert pieces(text[:20], 16) == [(0, 11), (11, 20)]  # the sentence end
    assert pieces("aaaa bbbb cccc", 12) == [(0, 10), (10, 14)]  # a space
    assert pieces("x" * 25, 10) == [(0, 10), (10, 20), (20, 25)]  # nothing better
    spans = pieces(one_line(5_000), 1_000, overlap=100)
    assert spans[0][0] == 0 and spans[-1][1] == len(one_line(5_000))
    for (a, b), (c, d) in pairwise(spans):
        assert a < c < b < d and b - c <= 100


def test_chunk_spans_survive_kreuzberg_normalising_whitespace() -> None:
    # kreuzberg's text/plain extraction trims lines and collapses blank lines: the chunks
    # it returns are of that text, and must still index ours
    text = "Title   \n\n\n\n" + "\n\n\n".join(
        f"Paragraph {n} ends with spaces.   \nAnd a second line.  " for n in range(60))
    chunks = chunk_text(text, max_chars=300, overlap=30)
    assert len(chunks) >= 10
    for c in chunks:
        assert text[c.char_start:c.char_end] == c.content
        assert c.content == c.content.strip()
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text.rstrip())
    assert "Paragraph 59" in chunks[-1].content
