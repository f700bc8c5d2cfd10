"""KnowledgeBase.excerpt (a document's text by character offsets, with its chunks and
pages) and the event loop a knowledge base records."""

from __future__ import annotations

import asyncio

import pytest

from conftest import SAMPLES
from surrealdocs import ConfigurationError, KnowledgeBase, NotFoundError, Settings


async def test_excerpt_by_offsets() -> None:
    async with await KnowledgeBase.open(settings=Settings(
            db="mem://", model="hashing-64", chunk_size=120, chunk_overlap=10)) as kb:
        assert kb.loop is asyncio.get_running_loop()
        await kb.ingest([SAMPLES])
        pdf = str((SAMPLES / "quarterly-report.pdf").resolve())
        doc = await kb.document(pdf)
        assert doc.content and doc.chunks and len(doc.chunks) >= 3
        whole = await kb.excerpt(doc.id)
        assert whole.text == doc.content and (whole.char_start, whole.char_end) == (
            0, len(doc.content))
        assert [c.chunk_id for c in whole.chunks] == [c.chunk_id for c in doc.chunks]
        assert (whole.first_page, whole.last_page) == (1, 2)
        second = doc.chunks[1]
        part = await kb.excerpt(pdf, second.char_start + 1, second.char_end - 1)  # by source
        assert part.text == doc.content[second.char_start + 1:second.char_end - 1]
        assert second.chunk_id in {c.chunk_id for c in part.chunks}
        assert all(c.char_start < part.char_end and c.char_end > part.char_start
                   for c in part.chunks)
        tail = await kb.excerpt(doc.id, len(doc.content) - 5, 10**9)  # the end is clamped
        assert tail.text == doc.content[-5:] and tail.char_end == len(doc.content)
        empty = await kb.excerpt(doc.id, len(doc.content))
        assert empty.text == "" and empty.chunks == [] and empty.first_page is None
        with pytest.raises(ConfigurationError, match="past the end"):
            await kb.excerpt(doc.id, len(doc.content) + 1)
        with pytest.raises(ConfigurationError):
            await kb.excerpt(doc.id, -1)
        with pytest.raises(NotFoundError):
            await kb.excerpt("documents:nope")
