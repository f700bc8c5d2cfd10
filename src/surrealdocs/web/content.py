"""A web page's own content, without its frame: trafilatura keeps the article (headings,
paragraphs, lists, tables) and leaves out navigation, headers, footers, cookie banners and
link lists; its metadata (title, site name, author, date, canonical URL, description,
language) is kept beside it. BENCHMARKS.md ("Web pages: the content, not the frame") has
what it keeps and drops, measured against another extractor."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

# trafilatura logs every page it finds too short at WARNING: a library's chatter, not ours
logging.getLogger("trafilatura").setLevel(logging.ERROR)
logging.getLogger("htmldate").setLevel(logging.ERROR)

_SPACES = re.compile(r"\n{3,}")


@dataclass
class PageContent:
    """The page's main text (Markdown: headings stay headings) and its metadata."""

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def main_content(html: bytes | str, url: str) -> PageContent | None:
    """The main content of an HTML page, or ``None`` when the extractor finds none (then
    the whole page's text is the better answer)."""
    import trafilatura

    text = trafilatura.extract(html, url=url, output_format="markdown", include_tables=True,
                               include_formatting=True, include_links=False,
                               include_comments=False, include_images=False,
                               with_metadata=False, deduplicate=False)
    if not text or not text.strip():
        return None
    meta = trafilatura.extract_metadata(html, default_url=url)
    found: dict[str, Any] = {}
    if meta is not None:
        values = meta.as_dict()
        for ours, theirs in (("title", "title"), ("site_name", "sitename"),
                             ("author", "author"), ("date", "date"),
                             ("canonical_url", "url"), ("description", "description"),
                             ("language", "language")):
            value = values.get(theirs)
            if isinstance(value, str) and value.strip():
                found[ours] = value.strip()
    return PageContent(_SPACES.sub("\n\n", text).strip() + "\n", found)
