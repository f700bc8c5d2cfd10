"""What a page links to and what a sitemap lists: the URLs of a bounded crawl."""

from __future__ import annotations

import gzip
import html
import re
import zlib

from ..errors import ConfigurationError
from .urls import normalise, within

MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # decompressed, as the sitemap protocol allows
_LOC = re.compile(r"<(?:\w+:)?loc>\s*(.*?)\s*</(?:\w+:)?loc>", re.DOTALL | re.IGNORECASE)
_INDEX = re.compile(r"<(?:\w+:)?sitemapindex\b", re.IGNORECASE)


def links(page: bytes | str, base: str, root: str) -> list[str]:
    """The pages ``page`` (HTML at ``base``) links to that lie under ``root``
    (:func:`~.urls.within`), normalised, in order, once each; ``rel=nofollow`` links and
    other schemes are left out."""
    from urllib.parse import urljoin

    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(page)
    found: dict[str, None] = {}
    base_tag = tree.css_first("base[href]")
    if base_tag is not None:
        base = urljoin(base, base_tag.attributes.get("href") or "")
    for anchor in tree.css("a[href]"):
        rel = (anchor.attributes.get("rel") or "").lower()
        if "nofollow" in rel.split():
            continue
        href = (anchor.attributes.get("href") or "").strip()
        if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
            continue
        try:
            url = normalise(urljoin(base, href))
        except (ConfigurationError, ValueError):
            continue
        if within(url, root):
            found.setdefault(url, None)
    return list(found)


def sitemap_urls(data: bytes) -> tuple[list[str], bool]:
    """The URLs a sitemap lists (gzipped or not), and whether it is an index of sitemaps
    (then they are sitemaps, not pages). Entries that are no http(s) URL are left out."""
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data)
    text = data.decode("utf-8", errors="replace")
    urls: dict[str, None] = {}
    for match in _LOC.finditer(text):
        raw = html.unescape(match.group(1)).strip()
        if raw.startswith("<![CDATA[") and raw.endswith("]]>"):
            raw = raw[9:-3].strip()
        try:
            urls.setdefault(normalise(raw), None)
        except ConfigurationError:
            continue
    return list(urls), bool(_INDEX.search(text[:4096]))


def _gunzip(data: bytes) -> bytes:
    """A gzipped sitemap, stopped past :data:`MAX_SITEMAP_BYTES` (a bomb stops there)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, MAX_SITEMAP_BYTES + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise ConfigurationError(f"the sitemap is not valid gzip: {exc}") from None
    if len(out) > MAX_SITEMAP_BYTES:
        raise ConfigurationError(f"the sitemap is over {MAX_SITEMAP_BYTES:,} bytes"
                                 " decompressed")
    return out
