"""Running headers and footers (parts/boilerplate.py): found on most pages, kept in the
document's text, held by no chunk; a line repeated on a few pages, or a title in another
case, stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.parts.boilerplate import running_lines, texts_of
from surrealdocs.parts.chunk import chunk_text
from surrealdocs.parts.extract import Extracted, extract_file

SHARED_PDF = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents" / "pdf"
HEADER = "Wading Birds of the Estuary Survey 2024"


def _paged(pages: int) -> tuple[str, list[list[int]]]:
    parts, starts, at = [], [], 0
    for n in range(1, pages + 1):
        body = (f"{HEADER}\nQuarterly notes, page {n}\n"
                + "".join(f"Line {k} of the notes on page {n}: herons, egrets and stilts fed on"
                          f" the mudflat.\n" for k in range(12))
                + ("The same remark on two pages only.\n" if n in (2, 3) else "")
                + f"{n}\n")
        if n == 1:
            body = "WADING BIRDS OF THE ESTUARY SURVEY 2024\n" + body
        starts.append([n, at])
        parts.append(body)
        at += len(body)
    return "".join(parts), starts


def test_running_lines_are_found_and_kept_out_of_every_chunk() -> None:
    content, starts = _paged(6)
    spans = running_lines(content, starts)
    found = texts_of(content, spans)
    assert HEADER in found and "Quarterly notes, page 1" in found and "1" in found
    assert "The same remark on two pages only." not in found  # on too few pages
    assert "WADING BIRDS OF THE ESTUARY SURVEY 2024" not in found  # the title, in capitals
    chunks = chunk_text(content, 300, 30, skip=spans)
    assert chunks and all(content[c.char_start:c.char_end] == c.content for c in chunks)
    assert not any(HEADER in c.content for c in chunks)
    assert sum("herons, egrets" in c.content for c in chunks) >= 6  # the body is all there
    every_line = {line for c in chunks for line in c.content.splitlines()}
    assert {f"Line {k} of the notes on page 4: herons, egrets and stilts fed on the mudflat."
            for k in range(12)} <= every_line


def test_short_documents_have_no_running_lines() -> None:
    content, starts = _paged(2)
    assert running_lines(content, starts) == []
    assert running_lines(content, None) == []


@pytest.mark.skipif(not (SHARED_PDF / "dmca.pdf").exists(), reason="no shared documents")
async def test_a_pdfs_running_header_no_longer_tops_a_search(tmp_path: Path) -> None:
    pdf = SHARED_PDF / "dmca.pdf"
    header = "Copyright Office Summary December 1998 Page"
    kept = await extract_file(pdf, Settings(db="mem://", strip_running_lines=False))
    stripped = await extract_file(pdf, Settings(db="mem://"))
    assert isinstance(kept, Extracted) and isinstance(stripped, Extracted)
    assert sum(header in c.content for c in kept.chunks) >= 10
    assert sum(header in c.content for c in stripped.chunks) == 0
    assert stripped.content == kept.content  # the document's text keeps them
    assert any(line.startswith(header) for line in stripped.metadata["running_lines"])
    async with await KnowledgeBase.open(settings=Settings(db="mem://", model="hashing-64")
                                        ) as kb:
        await kb.ingest([pdf])
        hits = await kb.search("copyright", mode="text", limit=10)
        assert hits and not any(header in h.content for h in hits)
