"""Content whose name or declared MIME type lies about what it is."""

from __future__ import annotations

import random
import struct
import unicodedata
from pathlib import Path

import pytest

from conftest import SAMPLES
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.parts.extract import Extracted, ExtractFailure, extract_bytes, extract_file

SETTINGS = Settings(db="mem://", chunk_size=300, chunk_overlap=30)


def page_png() -> bytes:
    """A PNG picture of a page with text on it (the sample PDF's first page)."""
    from kreuzberg import render_pdf_page

    return bytes(render_pdf_page(str(SAMPLES / "quarterly-report.pdf"), 0, dpi=150))


def garbage_share(text: str) -> float:
    """Share of characters that no text contains: controls and replacement characters."""
    bad = sum(1 for ch in text if ch == "\ufffd" or (
        unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn") and ch not in "\t\n\r\f\v"))
    return bad / max(len(text), 1)


@pytest.mark.slow
async def test_png_named_txt_is_read_as_the_image_it_is(tmp_path: Path) -> None:
    fake = tmp_path / "report.txt"
    fake.write_bytes(page_png())
    out = await extract_file(fake, SETTINGS)
    assert isinstance(out, Extracted), out
    assert out.mime_type == "image/png"
    assert "quarterly" in out.content.lower()  # OCR'd, not decoded as text
    assert garbage_share(out.content) < 0.01
    assert any("image/png, not text/plain" in w for w in out.warnings), out.warnings


async def test_binary_named_txt_fails_with_the_reason(tmp_path: Path) -> None:
    rng = random.Random(7)
    junk = tmp_path / "notes.txt"
    junk.write_bytes(bytes(rng.randrange(256) for _ in range(20_000)))
    out = await extract_file(junk, SETTINGS)
    assert isinstance(out, ExtractFailure) and out.kind == "failed"
    assert "binary" in out.reason and "text/plain" in out.reason


async def test_audio_named_txt_fails_with_the_reason(tmp_path: Path) -> None:
    samples = bytes(128 + int(100 * (i % 40 < 20)) for i in range(8000))
    wav = (b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt "
           + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8)
           + b"data" + struct.pack("<I", len(samples)) + samples)
    fake = tmp_path / "song.txt"
    fake.write_bytes(wav)
    out = await extract_file(fake, SETTINGS)
    assert isinstance(out, ExtractFailure), out
    assert "binary" in out.reason and "text/plain" in out.reason


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "cp1252"])
async def test_text_in_other_encodings_is_decoded(tmp_path: Path, codec: str) -> None:
    text = "Die Brücke über den Fluss können alle Menschen überqueren. " * 5
    f = tmp_path / f"{codec}.txt"
    f.write_bytes(text.encode(codec))
    out = await extract_file(f, SETTINGS)
    assert isinstance(out, Extracted), out
    assert "Die Brücke über den Fluss" in out.content
    assert garbage_share(out.content) == 0


async def test_html_in_a_declared_legacy_charset(tmp_path: Path) -> None:
    html = ('<html><head><meta charset="iso-8859-15"><title>Prix</title></head>'
            "<body><p>Le prix est de 5 € pour un café.</p></body></html>")
    f = tmp_path / "prix.html"
    f.write_bytes(html.encode("iso-8859-15"))
    out = await extract_file(f, SETTINGS)
    assert isinstance(out, Extracted), out
    assert "5 € pour un café" in out.content


async def test_bytes_whose_declared_type_lies() -> None:
    png, pdf = page_png(), (SAMPLES / "quarterly-report.pdf").read_bytes()
    out = await extract_bytes(png, "text/plain", "upload://a", SETTINGS)
    assert isinstance(out, Extracted) and out.mime_type == "image/png", out
    assert "quarterly" in out.content.lower()
    out = await extract_bytes(pdf, "text/html", "upload://b", SETTINGS)
    assert isinstance(out, Extracted) and out.mime_type == "application/pdf", out
    assert out.page_count == 2
    out = await extract_bytes(pdf, "application/octet-stream", "upload://c", SETTINGS)
    assert isinstance(out, Extracted) and out.mime_type == "application/pdf", out
    # text declared as a PDF: kreuzberg's failure, and why
    out = await extract_bytes(b"just some plain words", "application/pdf", "upload://d",
                              SETTINGS)
    assert isinstance(out, ExtractFailure)
    assert "looks like text, not application/pdf as declared" in out.reason
    # binary declared as text
    out = await extract_bytes(bytes(range(256)) * 40, "text/plain", "upload://e", SETTINGS)
    assert isinstance(out, ExtractFailure) and "binary" in out.reason


@pytest.mark.slow
async def test_ingest_stores_no_binary_garbage(kb: KnowledgeBase, tmp_path: Path) -> None:
    (tmp_path / "scan.txt").write_bytes(page_png())
    (tmp_path / "junk.txt").write_bytes(bytes(range(256)) * 100)
    (tmp_path / "fine.txt").write_text("A fine text about herons and their nests.")
    report = await kb.ingest([tmp_path])
    by_name = {Path(r.source).name: r for r in report.results}
    assert by_name["scan.txt"].status == "ingested"
    assert by_name["fine.txt"].status == "ingested"
    assert by_name["junk.txt"].status == "failed"
    assert "binary" in (by_name["junk.txt"].reason or "")
    (docs,) = await kb.store.query("SELECT source, mime_type, content FROM documents;")
    for doc in docs:
        assert garbage_share(doc["content"]) < 0.01, doc["source"]
    assert {d["mime_type"] for d in docs} == {"image/png", "text/plain"}


async def test_files_without_an_extension_are_read_by_their_content(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("Plain words about a project.")
    (tmp_path / "report").write_bytes((SAMPLES / "quarterly-report.pdf").read_bytes())
    text = await extract_file(tmp_path / "README", SETTINGS)
    assert isinstance(text, Extracted) and text.mime_type == "text/plain", text
    pdf = await extract_file(tmp_path / "report", SETTINGS)
    assert isinstance(pdf, Extracted) and pdf.mime_type == "application/pdf", pdf
    assert pdf.page_count == 2


async def test_an_unsupported_type_is_named_as_before(tmp_path: Path) -> None:
    f = tmp_path / "mol.xyz"  # chemical/x-xyz by its name, which kreuzberg cannot extract
    f.write_text("3\nwater\nO 0 0 0\nH 0 0 1\nH 0 1 0\n")
    out = await extract_file(f, SETTINGS)
    assert isinstance(out, ExtractFailure) and "chemical/x-xyz" in out.reason


@pytest.mark.parametrize("text", [
    "BM25 ranks documents by term frequency.",  # "BM" is the BMP signature
    "GIF89a is an image format from 1989.",  # so is "GIF89a" for GIF
    "ID3 tags describe MP3 files.",  # and "ID3" for MP3
])
async def test_text_that_starts_like_a_binary_signature_is_text(tmp_path: Path,
                                                                 text: str) -> None:
    f = tmp_path / "note.txt"
    f.write_text(text * 3)
    out = await extract_file(f, SETTINGS)
    assert isinstance(out, Extracted) and out.content.startswith(text.split()[0]), out
    for declared in ("text/plain", "application/octet-stream"):
        got = await extract_bytes((text * 3).encode(), declared, "b://note", SETTINGS)
        assert isinstance(got, Extracted) and got.mime_type == "text/plain", (declared, got)
