from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from conftest import SAMPLES, shared_docs
from surrealdocs import Settings
from surrealdocs.parts.extract import (
    LANGUAGE_SAMPLE_CHARS,
    Extracted,
    ExtractFailure,
    detect_languages,
    extract_bytes,
    extract_file,
)

SETTINGS = Settings(db="mem://", chunk_size=300, chunk_overlap=30)


async def test_pdf_has_pages_title_and_exact_spans() -> None:
    out = await extract_file(SAMPLES / "quarterly-report.pdf", SETTINGS)
    assert isinstance(out, Extracted)
    assert out.mime_type == "application/pdf"
    assert out.title == "Quarterly report"
    assert out.page_count == 2
    assert {c.first_page for c in out.chunks} == {1, 2}
    for c in out.chunks:
        assert out.content[c.char_start:c.char_end] == c.content


@pytest.mark.parametrize("name,mime", [
    ("vector-indexes.md", "text/markdown"), ("bm25.txt", "text/plain"),
    ("surrealdb.html", "text/html"),
])
async def test_text_formats(name: str, mime: str) -> None:
    out = await extract_file(SAMPLES / name, SETTINGS)
    assert isinstance(out, Extracted), out
    assert out.mime_type == mime
    assert out.chunks and all(c.content.strip() for c in out.chunks)
    assert out.detected_languages and "eng" in out.detected_languages


async def test_languages_of_a_long_text_come_from_windows_across_it() -> None:
    english = ("The herons waited at the edge of the marsh while the light faded over the "
               "water and the reeds. ")
    spanish = ("Las garzas esperaban en la orilla del pantano mientras la luz se apagaba "
               "sobre el agua y los juncos. ")
    half = english * (3 * LANGUAGE_SAMPLE_CHARS // len(english))
    text = half + spanish * (LANGUAGE_SAMPLE_CHARS // 2 // len(spanish)) + half
    assert len(text) > 6 * LANGUAGE_SAMPLE_CHARS
    languages = detect_languages(text)
    assert languages is not None and languages[0] == "eng" and "spa" in languages
    assert detect_languages(english * 3) == ["eng"]
    assert detect_languages("12345 67890") is None
    out = await extract_bytes(text.encode(), "text/plain", "note://long", SETTINGS)
    assert isinstance(out, Extracted) and out.detected_languages == languages


async def test_html_title() -> None:
    out = await extract_file(SAMPLES / "surrealdb.html", SETTINGS)
    assert isinstance(out, Extracted)
    assert out.title == "SurrealDB as a document store"


async def test_bytes_with_mime_type() -> None:
    data = (SAMPLES / "quarterly-report.pdf").read_bytes()
    out = await extract_bytes(data, "application/pdf", "upload://q.pdf", SETTINGS)
    assert isinstance(out, Extracted)
    assert out.source == "upload://q.pdf" and out.page_count == 2


async def test_unknown_mime_type_is_a_named_failure() -> None:
    out = await extract_bytes(b"hello", "application/x-made-up", "upload://x", SETTINGS)
    assert isinstance(out, ExtractFailure)
    assert out.source == "upload://x"
    assert "application/x-made-up" in out.reason


async def test_garbage_pdf_fails_with_reason(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.7\n this is not a pdf at all")
    out = await extract_file(bad, SETTINGS)
    assert isinstance(out, ExtractFailure) and out.kind == "failed"
    assert "PDF" in out.reason
    # said once, without the nested libraries' class names (it was "ParsingError: Invalid
    # PDF: PdfiumLibraryInternalError: FormatError: Invalid PDF: ...")
    assert out.reason.count("Invalid PDF") <= 1 and "PdfiumLibrary" not in out.reason, out.reason


async def test_empty_file_is_reported_as_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    out = await extract_file(empty, SETTINGS)
    assert isinstance(out, ExtractFailure) and out.kind == "empty"


async def test_timeout_is_a_failure_and_does_not_hang() -> None:
    quick = Settings(db="mem://", extract_timeout=0.001)
    docs = shared_docs()
    out = await asyncio.wait_for(
        extract_file(docs / "pdf" / "DA-619p.pdf", quick), timeout=30)
    assert isinstance(out, ExtractFailure)
    assert "timed out" in out.reason


@pytest.mark.slow
async def test_encrypted_pdf_named_reason() -> None:
    docs = shared_docs()
    out = await extract_file(docs / "pdf" / "password.pdf", SETTINGS)
    assert isinstance(out, ExtractFailure)
    assert "password-protected" in out.reason


@pytest.mark.slow
async def test_ocr_of_an_image() -> None:
    docs = shared_docs()
    out = await extract_file(docs / "images" / "layout-parser-paper-fast.jpg", SETTINGS)
    assert isinstance(out, Extracted), out
    assert "layout" in out.content.lower()


@pytest.mark.slow
async def test_ocr_of_a_scanned_pdf() -> None:
    docs = shared_docs()
    # loremipsum-flat.pdf has no text layer: the text only comes from OCR
    out = await extract_file(docs / "pdf" / "loremipsum-flat.pdf", SETTINGS)
    assert isinstance(out, Extracted), out
    assert "lorem" in out.content.lower()


async def test_a_binary_file_mangled_by_a_text_conversion_fails_with_that_reason(
        tmp_path: Path) -> None:
    """Issue 43: a PDF whose bytes were replaced by U+FFFD was filed as "no text"."""
    original = shared_docs() / "pdf" / "dmca.pdf"  # compressed streams: binary
    mangled = tmp_path / "dmca.pdf"
    mangled.write_bytes(original.read_bytes().decode("utf-8", errors="replace").encode())
    outcome = await extract_file(mangled, Settings(db="mem://"))
    assert isinstance(outcome, ExtractFailure) and outcome.kind == "failed"
    assert "U+FFFD" in outcome.reason
    for intact in (original, SAMPLES / "quarterly-report.pdf"):
        assert not isinstance(await extract_file(intact, Settings(db="mem://")), ExtractFailure)
