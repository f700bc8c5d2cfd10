"""Reading what the knowledge base holds: documents a page at a time, one document with its
text and chunk spans, a chunk with its neighbours, a range of pages; deleting a document."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import SAMPLES
from surrealdocs import ConfigurationError, KnowledgeBase, NotFoundError, Settings


@pytest.fixture
async def kb() -> KnowledgeBase:
    base = await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64",
                                                      chunk_size=120, chunk_overlap=10))
    report = await base.ingest([SAMPLES])
    assert report.counts["ingested"] == 5
    yield base  # type: ignore[misc]
    await base.close()


async def test_documents_page_by_page(kb: KnowledgeBase) -> None:
    every = await kb.documents(limit=100)
    assert len(every) == await kb.count_documents() == 5
    pages = [await kb.documents(offset=i, limit=2) for i in (0, 2, 4)]
    assert [d.id for page in pages for d in page] == [d.id for d in every]
    assert all(d.content is None and d.chunk_count >= 1 and d.characters > 0 for d in every)
    assert {Path(d.source or "").name for d in every} == {p.name for p in SAMPLES.iterdir()}
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": True}):
        with pytest.raises(ConfigurationError):
            await kb.documents(**bad)  # type: ignore[arg-type]


async def test_document_with_text_and_chunk_spans(kb: KnowledgeBase) -> None:
    pdf = str((SAMPLES / "quarterly-report.pdf").resolve())
    doc = await kb.document(pdf)  # by source...
    assert doc.id == (await kb.document(doc.id)).id  # ...or by id
    assert doc.page_count == 2 and doc.content and doc.chunks
    assert [c.index for c in doc.chunks] == list(range(doc.chunk_count))
    hits = await kb.search("quarterly revenue", mode="text", source="*.pdf", limit=20)
    spans = {c.chunk_id: c for c in doc.chunks}
    for hit in hits:  # a hit's span is where its chunk lies in the document's text
        span = spans[hit.chunk_id]
        assert doc.content[span.char_start:span.char_end] == hit.content
    with pytest.raises(NotFoundError):
        await kb.document("documents:nope")


async def test_passage_and_pages(kb: KnowledgeBase) -> None:
    doc = await kb.document(str((SAMPLES / "quarterly-report.pdf").resolve()))
    assert doc.chunks and len(doc.chunks) >= 3 and doc.content
    middle = doc.chunks[1]
    passage = await kb.passage(middle.chunk_id, before=1, after=1)
    assert [c.index for c in passage.chunks] == [0, 1, 2]
    assert passage.text == doc.content[doc.chunks[0].char_start:doc.chunks[2].char_end]
    alone = await kb.passage(middle.chunk_id, before=0, after=0)
    assert alone.text == doc.content[middle.char_start:middle.char_end]
    page_two = await kb.pages(doc.id, 2)
    assert page_two.first_page is not None and page_two.last_page == 2
    assert all((c.last_page or c.page or 0) >= 2 for c in page_two.chunks)
    with pytest.raises(NotFoundError):
        await kb.pages(doc.id, 7)
    with pytest.raises(ConfigurationError):
        await kb.passage(middle.chunk_id, before=-1)


async def test_delete_document_takes_everything_with_it(kb: KnowledgeBase) -> None:
    nb = await kb.notebooks.create_notebook("N")
    doc = await kb.document(str((SAMPLES / "bm25.txt").resolve()), text=False)
    await kb.notebooks.link(doc.id, nb)
    await kb.delete_document(doc.id)
    assert await kb.count_documents() == 4
    assert await kb.search("reciprocal rank fusion", mode="text", source="*bm25.txt") == []
    assert await kb.notebooks.sources(nb) == []
    (orphans,) = await kb.store.query("SELECT VALUE id FROM chunks WHERE document = $d;",
                                      {"d": kb.storage.documents.document_id(doc.id)})
    assert orphans == []
    with pytest.raises(NotFoundError):
        await kb.delete_document(doc.id)
