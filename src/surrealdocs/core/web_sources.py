"""Web pages as sources (``kb.web``): fetch, keep the page's content, ingest it as a file is
ingested, and re-check it later without fetching it again when it has not changed.

A page's source is its normalised URL (:func:`surrealdocs.web.urls.normalise`). An HTML
page's main content (:mod:`surrealdocs.web.content`) is ingested as Markdown whose front
matter holds the page's metadata (title, site name, author, date, canonical URL), so its
headings stay headings and its metadata is the document's; other types (PDF, Office, plain
text) go to kreuzberg as they are. A page ingested again is asked with its ETag and
Last-Modified: a 304 is ``unchanged`` with nothing read; else its content's hash decides,
and a changed page is replaced with chunk reuse, as a changed file is.

The command line fetches whatever its user names; the HTTP API and MCP fetch public
addresses only (:mod:`surrealdocs.web.guard`) unless the server allows private ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Settings
from ..errors import ConfigurationError
from ..parts.results import FileResult, IngestReport, id_text
from ..store.storage import Storage
from ..web.content import main_content
from ..web.crawl import links, sitemap_urls
from ..web.fetcher import Fetched, Fetcher, FetchError
from ..web.guard import BlockedAddress
from ..web.urls import normalise
from .ingest import Ingestor, ProgressCallback

HTML_TYPES = ("text/html", "application/xhtml+xml")
FETCHES_IN_FLIGHT = 8  # over all hosts (each host gets at most 2: the fetcher's rule)
MAX_PAGES = 1000  # what a crawl or a sitemap brings at most, unless told otherwise
MAX_SITEMAPS = 50  # nested sitemaps read for one --sitemap


@dataclass
class _Page:
    source: str
    depth: int
    root: str


class WebSources:
    """Ingest and refresh web pages through the store's one ingest path."""

    def __init__(self, storage: Storage, ingestor: Ingestor, settings: Settings) -> None:
        self.storage = storage
        self.ingestor = ingestor
        self.settings = settings

    async def ingest(self, urls: Iterable[str] = (), *, sitemaps: Sequence[str] = (),
                     follow: int = 0, max_pages: int = MAX_PAGES, force: bool = False,
                     retry_failed: bool = False, allow_private: bool = True,
                     obey_robots: bool = True,
                     on_result: ProgressCallback | None = None,
                     on_discovered: Callable[[int], None] | None = None,
                     fetcher: Fetcher | None = None) -> IngestReport:
        """Fetch and ingest pages: ``urls``, the pages ``sitemaps`` list, and with
        ``follow`` the pages they link to within the same host and path (that many links
        deep), at most ``max_pages`` in all. See the module's documentation."""
        if follow < 0 or max_pages < 1:
            raise ConfigurationError("--follow must be 0 or more and --max-pages 1 or more")
        started = time.perf_counter()
        report = IngestReport()
        own = fetcher is None
        fetcher = fetcher or Fetcher(allow_private=allow_private, obey_robots=obey_robots)
        try:
            pages: list[_Page] = []
            for url in urls:
                try:
                    source = normalise(url)
                except ConfigurationError as exc:
                    report.results.append(_done(FileResult(url, "failed", reason=str(exc)),
                                                on_result))
                    continue
                pages.append(_Page(source, 0, source))
            for sitemap in sitemaps:
                listed, problem = await self._sitemap(fetcher, sitemap, max_pages)
                if problem is not None:
                    report.results.append(_done(problem, on_result))
                pages += [_Page(u, 0, u) for u in listed]
            seen: set[str] = set()
            frontier: list[_Page] = []
            for page in pages:
                if page.source not in seen and len(frontier) < max_pages:
                    seen.add(page.source)
                    frontier.append(page)
            if on_discovered:
                on_discovered(len(frontier) + len(report.results))
            total = len(frontier)
            while frontier:
                found, more = await self._round(fetcher, frontier, follow, force,
                                                retry_failed, on_result)
                report.results += found
                fresh = [p for p in more if p.source not in seen][:max_pages - total]
                seen.update(p.source for p in fresh)
                total += len(fresh)
                if fresh and on_discovered:
                    on_discovered(total + len(report.results) - len(found))
                frontier = fresh
        finally:
            if own:
                await fetcher.close()
        report.index_rebuilt = await self.ingestor.rebuild_if_due(on_result)
        report.seconds = time.perf_counter() - started
        return report

    async def refresh(self, *, older_than: float | None = None, prune: bool = False,
                      allow_private: bool = True, obey_robots: bool = True,
                      on_result: ProgressCallback | None = None,
                      on_discovered: Callable[[int], None] | None = None,
                      fetcher: Fetcher | None = None) -> IngestReport:
        """Re-check every web page source (those fetched more than ``older_than`` seconds
        ago): unchanged ones by their ETag / Last-Modified (a 304 reads nothing), changed
        ones replaced. A page that is gone (404, 410) is reported as ``failed`` and, with
        ``prune``, removed (``deleted``)."""
        started = time.perf_counter()
        records = await self.storage.files.web_sources(older_than)
        if on_discovered:
            on_discovered(len(records))
        report = IngestReport()
        own = fetcher is None
        fetcher = fetcher or Fetcher(allow_private=allow_private, obey_robots=obey_robots)
        try:
            frontier = [_Page(r["path"], 0, r["path"]) for r in records]
            found, _ = await self._round(fetcher, frontier, 0, False, True, None,
                                         refreshing=True)
        finally:
            if own:
                await fetcher.close()
        for result in found:
            gone = result.status == "failed" and (result.reason or "").startswith("gone")
            if gone and prune and await self.ingestor.delete_source(result.source):
                result.status = "deleted"
            report.results.append(_done(result, on_result))
        report.index_rebuilt = await self.ingestor.rebuild_if_due(on_result)
        report.seconds = time.perf_counter() - started
        return report

    # ----- one round of fetches ---------------------------------------------------------
    async def _round(self, fetcher: Fetcher, pages: list[_Page], follow: int, force: bool,
                     retry_failed: bool, on_result: ProgressCallback | None, *,
                     refreshing: bool = False) -> tuple[list[FileResult], list[_Page]]:
        """Fetch ``pages``, ingest what changed: their results, and the pages they link to
        (when ``follow`` reaches past their depth)."""
        previous = await self.storage.files.of([p.source for p in pages])
        slots = asyncio.Semaphore(FETCHES_IN_FLIGHT)
        results: list[FileResult] = []
        items: list[tuple[str, bytes, str]] = []
        fetched_of: dict[str, Fetched] = {}
        more: list[_Page] = []

        async def one(page: _Page) -> None:
            before = previous.get(page.source) or {}
            conditional = {} if force or before.get("status") not in ("ingested",
                                                                      "duplicate") else {
                "etag": before.get("etag"), "last_modified": before.get("last_modified")}
            async with slots:
                try:
                    fetched = await fetcher.fetch(page.source, **conditional)
                except (FetchError, BlockedAddress, ConfigurationError) as exc:
                    results.append(await self._failed(page.source, exc, before, refreshing,
                                                      on_result))
                    return
            if fetched.not_modified:
                results.append(_done(FileResult(
                    page.source, "unchanged", document_id=_id(before.get("document")),
                    last_status=before.get("status")), on_result))
                fetched_of[page.source] = fetched
                return
            data, mime = await asyncio.to_thread(_ingestible, fetched)
            fetched_of[page.source] = fetched
            items.append((page.source, data, mime))
            if page.depth < follow and fetched.mime_type in HTML_TYPES:
                more.extend(_Page(u, page.depth + 1, page.root)
                            for u in links(fetched.data, fetched.url, page.root))

        await asyncio.gather(*(one(p) for p in pages))
        if items:
            ingested = await self.ingestor.ingest_many(items, force=force,
                                                       retry_failed=retry_failed,
                                                       on_result=on_result)
            results += ingested.results
        await self.storage.files.remember_fetches([
            {"source": source, "etag": f.etag, "last_modified": f.last_modified}
            for source, f in fetched_of.items()])
        order = {p.source: n for n, p in enumerate(pages)}
        results.sort(key=lambda r: order.get(r.source, len(order)))
        return results, more

    async def _failed(self, source: str, exc: Exception, before: dict[str, Any],
                      refreshing: bool, on_result: ProgressCallback | None) -> FileResult:
        """A page that could not be fetched: a new one is recorded as failed (``list
        --failed`` names it); one stored before keeps its document (a refresh reports it)."""
        reason = str(exc)
        if isinstance(exc, FetchError) and exc.gone:
            reason = f"gone: {reason}"
        if not before and not refreshing:
            await self.storage.documents.record_failure(source, "", 0, "failed", reason)
        return _done(FileResult(source, "failed", reason=reason,
                                document_id=_id(before.get("document"))), on_result)

    async def _sitemap(self, fetcher: Fetcher, url: str,
                       max_pages: int) -> tuple[list[str], FileResult | None]:
        """The pages a sitemap lists (its nested sitemaps read too, at most
        :data:`MAX_SITEMAPS`), or the reason it could not be read."""
        pages: list[str] = []
        queue, read = [url], 0
        while queue and len(pages) < max_pages and read < MAX_SITEMAPS:
            current = queue.pop(0)
            read += 1
            try:
                fetched = await fetcher.fetch(current)
                listed, nested = sitemap_urls(fetched.data)
            except (FetchError, BlockedAddress, ConfigurationError) as exc:
                return pages, FileResult(current, "failed", reason=f"sitemap: {exc}")
            if nested:
                queue += listed
            else:
                pages += listed
        return pages[:max_pages], None


def _ingestible(fetched: Fetched) -> tuple[bytes, str]:
    """What the ingest path takes of a page: an HTML page's main content as Markdown with
    its metadata as front matter; text in UTF-8; anything else as it came."""
    import yaml

    mime = fetched.mime_type or "application/octet-stream"
    data = fetched.data
    if mime in HTML_TYPES:
        page: bytes | str = data
        if fetched.charset:
            try:
                page = data.decode(fetched.charset, errors="replace")
            except LookupError:
                page = data
        content = main_content(page, fetched.url)
        if content is not None:
            metadata = {**content.metadata, "url": fetched.url}
            front = yaml.safe_dump(metadata, allow_unicode=True, sort_keys=False)
            return f"---\n{front}---\n\n{content.text}".encode(), "text/markdown"
        return data, "text/html"
    if mime.startswith("text/") and fetched.charset and fetched.charset not in ("utf-8",
                                                                              "utf8"):
        try:
            return data.decode(fetched.charset, errors="replace").encode(), mime
        except LookupError:
            pass
    return data, mime


def _done(result: FileResult, on_result: ProgressCallback | None) -> FileResult:
    if on_result:
        on_result(result)
    return result


def _id(value: Any) -> str | None:
    return id_text(value) if value is not None else None
