"""Reading what a knowledge base holds (``kb.documents``, ``kb.document``, ``kb.passage``,
``kb.pages``, ``kb.excerpt``): documents a page at a time with the filters a search takes,
one document with where its chunks lie, and stretches of a document's text around a chunk,
over pages or between two offsets."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..embed import Embedder
from ..errors import ConfigurationError, NotFoundError
from ..parts.filters import Filters, glob_to_regex
from ..parts.results import ChunkSpan, Document, FileResult, Passage, Stats, id_text
from ..store.documents import record_id
from ..store.schema import SCHEMA_VERSION
from ..store.storage import Storage
from .notebook_service import Notebook
from .search_request import metadata_filter

# the furthest a page of documents may start
MAX_OFFSET = 10**12


class DocumentReader:
    """Reads documents, their chunks' places and their text (no writes)."""

    def __init__(self, storage: Storage, settings: Settings,
                 resolve_notebook: Callable[[Any], Awaitable[RecordID]]) -> None:
        self.storage = storage
        self.settings = settings
        self.resolve_notebook = resolve_notebook

    async def documents(self, *, offset: int = 0, limit: int = 50,
                        notebook: Notebook | Any = None, source: str | None = None,
                        mime_type: str | Sequence[str] | None = None,
                        topics: Sequence[str] | None = None,
                        created_after: dt.datetime | None = None,
                        created_before: dt.datetime | None = None,
                        where: Any = None) -> list[Document]:
        """Stored documents, oldest first, a page at a time (without their text), with the
        filters a search takes (a notebook, a source glob, MIME types, topics, when
        ingested, ``where`` on their metadata)."""
        if isinstance(offset, bool) or not isinstance(offset, int) \
                or not 0 <= offset <= MAX_OFFSET:
            raise ConfigurationError(
                f"offset must be an integer from 0 to {MAX_OFFSET}, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"limit must be an integer from 1 to 10000, got {limit!r}")
        filters = await self._filters(notebook, source, mime_type, topics, created_after,
                                      created_before, where)
        rows = await self.storage.documents.select(filters=filters, offset=offset,
                                                   limit=limit, text=False)
        return [_document(row) for row in rows]

    async def count_documents(self, *, notebook: Notebook | Any = None,
                              source: str | None = None,
                              mime_type: str | Sequence[str] | None = None,
                              topics: Sequence[str] | None = None,
                              created_after: dt.datetime | None = None,
                              created_before: dt.datetime | None = None,
                              where: Any = None) -> int:
        """How many documents :meth:`documents` would list, over all its pages."""
        filters = await self._filters(notebook, source, mime_type, topics, created_after,
                                      created_before, where)
        return await self.storage.documents.count(filters=filters)

    async def ids_matching(self, where: Any) -> list[str]:
        """The ids of every complete document whose metadata passes ``where``."""
        filters = Filters(where=metadata_filter(where))
        rows = await self.storage.documents.select(filters=filters, text=False)
        return [id_text(row["id"]) for row in rows]

    async def _filters(self, notebook: Any, source: str | None,
                       mime_type: str | Sequence[str] | None, topics: Sequence[str] | None,
                       created_after: dt.datetime | None,
                       created_before: dt.datetime | None, where: Any = None) -> Filters:
        nb = None if notebook is None else await self.resolve_notebook(notebook)
        return Filters(source=source, mime_type=mime_type, notebook=nb, topics=topics,
                       created_after=created_after, created_before=created_before,
                       where=metadata_filter(where))

    async def failure(self, ref: str) -> FileResult | None:
        """The failed last ingest of the source ``ref`` (a name, or a path as given or
        absolute), ``None`` when its last ingest did not fail or there was none."""
        candidates = list(dict.fromkeys([ref, *as_path(ref)]))
        records = await self.storage.files.of(candidates)
        for source in candidates:
            row = records.get(source)
            if row is not None and row.get("status") == "failed":
                return FileResult(source, "failed", reason=row.get("error"),
                                  last_status="failed")
        return None

    async def failures(self, *, offset: int = 0, limit: int = 50,
                       source: str | None = None) -> tuple[list[FileResult], int]:
        """A page of the sources whose last ingest failed, each with its reason (by
        source), optionally those matching a source glob; and how many there are."""
        if source is not None:
            Filters(source=source)  # the glob's checks
        rows, total = await self.storage.files.failed(offset, limit, source)
        return [FileResult(str(r["path"]), "failed", reason=r.get("error"),
                           last_status="failed") for r in rows], total

    async def document(self, ref: Any, *, text: bool = True) -> Document:
        """A document by id (``documents:…`` or its key) or by one of its sources, with its
        text and where each chunk lies in it (``text=False``: only what it is)."""
        doc = await self.document_id(ref)
        row = await self.storage.documents.get(doc)
        if row is None or not row.get("complete"):
            raise NotFoundError(f"no document {ref!r}")
        document = _document(row)
        document.metadata = row.get("metadata")
        if text:
            document.content = row.get("content") or ""
            if self.settings.chunked:
                document.chunks = [_span(r) for r in await self.storage.chunks.spans(doc)]
        else:
            document.content = None
        return document

    async def sources_under(self, prefixes: Sequence[str]) -> list[dict[str, Any]]:
        """What each stored source under these prefixes last held and what came of it
        (``path``, ``file_hash``, ``size``, ``status``, ``error``), by path: a source equal
        to a prefix, or starting with it and a ``/`` (``upload://notes`` holds
        ``upload://notes/a.md``). How a client syncs a folder through a server."""
        rows = await self.storage.files.under([p for p in prefixes if p])
        return [{"path": r["path"], "file_hash": r.get("file_hash"), "size": r.get("size"),
                 "status": r.get("status"), "error": r.get("error")} for r in rows]

    async def sources_matching(self, glob: str) -> list[str]:
        """Every stored source that ``glob`` matches, sorted (the meaning of a search's
        ``source`` filter: a relative pattern matches at the end of the path)."""
        pattern = re.compile(glob_to_regex(glob))
        out: set[str] = set()
        offset, page = 0, 1000
        while True:
            docs = await self.documents(offset=offset, limit=page, source=glob)
            out.update(s for d in docs for s in d.sources if pattern.match(s))
            if len(docs) < page:
                return sorted(out)
            offset += page

    async def passage(self, chunk: Any, *, before: int = 1, after: int = 1) -> Passage:
        """The text of a chunk (a hit's ``chunk_id``) with ``before`` and ``after``
        neighbouring chunks, as one stretch of its document's text."""
        for name, value in (("before", before), ("after", after)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 50:
                raise ConfigurationError(f"{name} must be an integer from 0 to 50")
        row = await self.storage.chunks.get(record_id(chunk, self.storage.chunks.table))
        if row is None:
            raise NotFoundError(f"no chunk {chunk!r}")
        doc = row["document"]
        index = int(row["chunk_index"])
        spans = [_span(r) for r in await self.storage.chunks.spans(
            doc, first=max(index - before, 0), last=index + after)]
        return await self._passage(doc, spans or [_span(row)])

    async def pages(self, ref: Any, first: int, last: int | None = None) -> Passage:
        """The text of pages ``first`` to ``last`` (inclusive) of a paged document."""
        last = first if last is None else last
        if isinstance(first, bool) or not isinstance(first, int) or first < 1 or \
                isinstance(last, bool) or not isinstance(last, int) or last < first:
            raise ConfigurationError("pages are numbered from 1, and last >= first")
        doc = await self.document_id(ref)
        spans = [s for s in (_span(r) for r in await self.storage.chunks.spans(doc))
                 if s.page is not None and s.page <= last and (s.last_page or s.page) >= first]
        if not spans:
            raise NotFoundError(f"document {ref!r} has no text on pages {first}-{last}")
        return await self._passage(doc, spans)

    async def excerpt(self, ref: Any, start: int = 0, end: int | None = None) -> Passage:
        """Characters ``start`` to ``end`` (the end of the text when ``None``) of a
        document's text, with the chunks that overlap them and the pages those span."""
        for name, value in (("start", start), ("end", end)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise ConfigurationError(f"{name} must be an integer >= 0, got {value!r}")
        doc = await self.document_id(ref)
        row = await self.storage.documents.get(doc)
        if row is None or not row.get("complete"):
            raise NotFoundError(f"no document {ref!r}")
        content = row.get("content") or ""
        if start > len(content):
            raise ConfigurationError(
                f"start {start} is past the end of the document ({len(content)} characters)")
        end = len(content) if end is None else max(min(end, len(content)), start)
        spans = [s for s in (_span(r) for r in await self.storage.chunks.spans(doc))
                 if s.char_start < end and s.char_end > start] if self.settings.chunked else []
        pages = [p for s in spans for p in (s.page, s.last_page) if p is not None]
        return Passage(document_id=id_text(doc), source=row.get("source"), title=row.get("title"),
                       text=content[start:end], char_start=start, char_end=end,
                       first_page=min(pages) if pages else None,
                       last_page=max(pages) if pages else None, chunks=spans)

    async def _passage(self, doc: Any, spans: list[ChunkSpan]) -> Passage:
        row = await self.storage.documents.get(doc)
        if row is None:
            raise NotFoundError(f"no document {doc}")
        start, end = min(s.char_start for s in spans), max(s.char_end for s in spans)
        pages = [p for s in spans for p in (s.page, s.last_page) if p is not None]
        return Passage(document_id=id_text(doc), source=row.get("source"), title=row.get("title"),
                       text=(row.get("content") or "")[start:end], char_start=start,
                       char_end=end, first_page=min(pages) if pages else None,
                       last_page=max(pages) if pages else None, chunks=spans)

    async def document_id(self, ref: Any) -> Any:
        """A document's record id from its id, key or one of its sources."""
        documents = self.storage.documents
        if isinstance(ref, str) and not ref.startswith(documents.table + ":"):
            for source in (ref, *(as_path(ref) if "://" not in ref else [])):
                by_source = await documents.of_source(source)
                if by_source is not None:
                    return by_source
        return documents.document_id(ref)


    async def stats(self, embedder: Embedder | None) -> Stats:
        """Numbers of what the store holds, its model, and its indexes' state."""
        documents, mime_types, sources = await self.storage.documents.counts()
        chunks = await self.storage.chunks.count() if self.settings.chunked else 0
        return Stats(
            url=self.storage.store.url,
            schema_version=SCHEMA_VERSION,
            model=embedder.name if embedder else "",
            dimension=embedder.dimension if embedder else 0,
            documents=documents,
            chunks=chunks,
            sources=sources,
            mime_types=mime_types,
            # the counter counts vectors written since the graph was built, also those
            # deleted or replaced since: never more than the store holds
            vectors_outside_graph=min(await self.storage.chunks.graphs.pending(), chunks)
            if self.settings.vectors else 0,
            notebooks=await self.storage.notebooks.count() if self.settings.chunked else 0,
            text_index=await self.storage.chunks.text_index_stats()
            if self.settings.chunked else {},
        )


def _document(row: dict[str, Any]) -> Document:
    return Document(
        id=id_text(row["id"]), source=row.get("source"), sources=list(row.get("sources") or []),
        title=row.get("title"), mime_type=row.get("mime_type") or "",
        chunk_count=int(row.get("chunk_count") or 0),
        characters=int(row.get("characters") or len(row.get("content") or "")),
        page_count=row.get("page_count"), ingested_at=row.get("ingested_at"),
        updated_at=row.get("updated_at"),
        notebooks=[id_text(n) for n in row.get("notebooks") or []],
        topics=list(row.get("topics") or []), authors=row.get("authors"),
        languages=row.get("detected_languages"), embedding_model=row.get("embedding_model"))


def _span(row: dict[str, Any]) -> ChunkSpan:
    return ChunkSpan(chunk_id=id_text(row["id"]), index=int(row.get("chunk_index") or 0),
                     char_start=int(row.get("char_start") or 0),
                     char_end=int(row.get("char_end") or 0), page=row.get("page_number"),
                     last_page=row.get("last_page"))


def as_path(ref: str) -> list[str]:
    """A document reference read as a path on this machine (``~`` expanded, made
    absolute), or nothing when it cannot be one (a NUL, an unknown user's ``~``)."""
    try:
        return [str(Path(ref).expanduser().resolve())]
    except (ValueError, OSError, RuntimeError):
        return []
