"""A document's title as people would name it: what its own metadata says when that is a
real title, else an e-mail's subject, its first heading, a presentation's first line, and
last its file name.

Metadata titles are often not titles: a file name (``loremipsum.jpg``, ``fake-memo``), a
template's placeholder (``Slide 1``, ``Untitled``, ``Document1``, ``PowerPoint
Presentation``), or a converter's (``Microsoft Word - report.docx``); those are passed
over."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

MAX_TITLE = 200
_PLACEHOLDER = re.compile(
    r"(untitled( document| presentation| spreadsheet)?|slide \d+|document\d*|presentation\d*|"
    r"(microsoft )?(powerpoint|word|excel) (presentation|document|worksheet)|title|"
    r"no title|new document|book\d*|sheet\d*|workbook\d*|pdf|none|null)", re.IGNORECASE)
_FILE_NAME = re.compile(r".*\.[A-Za-z0-9]{2,5}", re.DOTALL)
_CONVERTER = re.compile(r"^(microsoft (word|powerpoint|excel) - |untitled - )", re.IGNORECASE)
_FILE_SCHEMES = ("upload://", "file://")
_PRESENTATIONS = ("presentation", "powerpoint", "opendocument.presentation")


def clean(text: Any) -> str | None:
    """``text`` on one line, without control characters, at most :data:`MAX_TITLE`
    characters; ``None`` when nothing is left."""
    if not isinstance(text, str):
        return None
    shown = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    shown = " ".join(shown.split())
    if len(shown) > MAX_TITLE:
        shown = shown[:MAX_TITLE - 1].rstrip() + "…"
    return shown or None


def real_title(title: Any, source: str) -> str | None:
    """``title`` when it names the document rather than a file or a template."""
    shown = clean(title)
    if shown is None:
        return None
    shown = _CONVERTER.sub("", shown).strip() or None
    if shown is None or _PLACEHOLDER.fullmatch(shown) or _FILE_NAME.fullmatch(shown):
        return None
    name = file_name(source)
    slug = "-" in shown or "_" in shown or shown == shown.lower()
    if name is not None and shown.lower() in (name.lower(), PurePosixPath(name).stem.lower()) \
            and slug:  # the file's own name ("fake-memo"), not a title that matches it
        return None
    if not any(c.isalpha() for c in shown):
        return None
    return shown


def file_name(source: str) -> str | None:
    """The file name of a file's source (a path, ``upload://…``, ``file://…``); ``None``
    for other sources (``note://1``, ``beir:42``)."""
    if "://" in source and not source.startswith(_FILE_SCHEMES):
        return None
    if "://" not in source and ":" in source.split("/", 1)[0] and not source.startswith("/"):
        return None  # scheme:rest without slashes
    name = source.split("://", 1)[-1].rstrip("/").rsplit("/", 1)[-1]
    return name or None


def title_for(source: str, mime_type: str, metadata: Mapping[str, Any],
              headings: Sequence[tuple[int, str]], content: str) -> str | None:
    """The title a document is shown by (see the module's docstring)."""
    found = real_title(metadata.get("title"), source)
    if found:
        return found
    if mime_type.startswith("message/") or "from_email" in metadata:
        subject = real_title(metadata.get("subject"), source)
        if subject:
            return subject
    for _, text in headings:
        heading = real_title(text, source)
        if heading:
            return heading
    if any(kind in mime_type for kind in _PRESENTATIONS):
        for line in content.splitlines():
            first = real_title(line.strip("# "), source)
            if first and len(first) <= 120:
                return first
    return file_name(source)
