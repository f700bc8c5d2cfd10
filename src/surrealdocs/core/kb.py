"""The library's front door: a knowledge base is a store + an embedding model + settings.

>>> kb = await KnowledgeBase.open()                 # embedded file store in ./.surrealdocs/
>>> report = await kb.ingest(["docs/"], glob="**/*.pdf")
>>> hits = await kb.search("quarterly revenue", mode="hybrid", limit=5)
>>> nb = await kb.notebooks.create_notebook("Research")
>>> await kb.close()

Every face (the CLI, the servers, the compatibility facades) goes through this class:
ingest, search with every option and filter, notebooks (``kb.notebooks``), background jobs
(``kb.jobs``; ingest in the background: ``kb.ingest_jobs``), the server's API keys
(``kb.keys``), statistics. :class:`SyncKnowledgeBase` offers the same calls without
``await``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..config import Settings
from ..embed import Embedder, EmbeddingRunner, get_embedder, provenance
from ..errors import ConfigurationError, NotFoundError, SchemaNotInitializedError
from ..parts.filters import Filters, glob_to_regex
from ..parts.results import (
    ChunkSpan,
    Document,
    FileResult,
    Forgotten,
    Hit,
    IngestReport,
    Passage,
    Stats,
    SyncReport,
    id_text,
)
from ..store.connection import Store, connect, resolve_url, store_missing, store_path
from ..store.documents import record_id
from ..store.names import Names
from ..store.schema import SCHEMA_VERSION, ensure_schema, layout_of, read_schema, vectors_apart
from ..store.storage import Storage
from .ingest import Ingestor, ProgressCallback
from .ingest_jobs import IngestJobs
from .job_runner import JobService
from .key_service import ApiKeyService
from .notebook_service import Notebook, NotebookService
from .search import Searcher, query_words
from .search_request import SearchRequest
from .sync import Syncer, check_glob

T = TypeVar("T")
# the furthest a page of documents may start
MAX_OFFSET = 10**12

class KnowledgeBase:
    """Documents, chunks and vectors in one SurrealDB store, searchable three ways.

    Open one with :meth:`open` (from a URL) or :meth:`around` (on a connection you opened).
    Attributes: ``store`` (the connection), ``settings``, ``embedder`` (``None`` for stores
    without vectors), ``storage`` (the owners of the tables), ``notebooks``, ``jobs``,
    ``ingest_jobs``, ``keys``, ``loop`` (the event loop it was opened on: a remote store's
    connection and the write lock belong to it).
    """

    def __init__(self, store: Store, embedder: Embedder | None, settings: Settings, *,
                 vectors_apart: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.embedder = embedder if settings.vectors else None
        self.embedding = EmbeddingRunner(self.embedder, settings.embed_batch_size * 2) \
            if self.embedder else None
        self.storage = Storage.of(store, settings,
                                  self.embedder.dimension if self.embedder else 0,
                                  vectors_apart=vectors_apart)
        self.jobs = JobService(self.storage.jobs, exclusive=store.owned and store.embedded)
        self._ingestor = Ingestor(self.storage, self.embedding, settings)
        self._syncer = Syncer(self.storage, self._ingestor, settings)
        self._searcher = Searcher(self.storage, self.embedding, settings)
        self._notebooks = NotebookService(
            self.storage, settings, self.embedding, self.jobs, self._ingestor,
            self._searcher) if settings.chunked else None
        try:  # the loop the store was opened on: its connection answers there
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self._ingest_jobs = IngestJobs(
            self.storage, settings, self.jobs, self._ingestor,
            self._notebooks) if self._notebooks is not None else None
        self._keys = ApiKeyService(self.storage.keys) if settings.chunked else None

    # ----- opening and closing ---------------------------------------------------------
    @classmethod
    async def open(cls, db: str | None = None, *, settings: Settings | None = None,
                   embedder: Embedder | None = None, run_jobs: bool = False,
                   create: bool = True,
                   on_convert: Callable[[int, int], None] | None = None,
                   **overrides: Any) -> KnowledgeBase:
        """Open (and create or upgrade) a knowledge base.

        Args:
            db: store URL or path; default ``SURREALDOCS_DB`` or ``./.surrealdocs/db``.
            settings: full settings; otherwise read from the environment plus ``overrides``.
            embedder: a ready embedder (its ``name`` is recorded in the store); otherwise the
                model named by ``settings.model`` is loaded (a hosted provider's,
                ``openai:MODEL`` or ``ollama:MODEL``, is asked for its dimension). Stores
                without vectors (``chunked`` or ``embed`` false) load no model.
            run_jobs: start running queued background jobs now (they also start when this
                process queues one).
            on_convert: called with (chunks done, chunks in all) while the store's text
                index is converted (a store made with the other ``text_index``).
            create: make the store when it does not exist (a file store's folder);
                ``False`` raises :class:`SchemaNotInitializedError` instead, so that a
                command meant to read does not leave an empty store behind.
        """
        settings = settings or Settings.from_env(**overrides)
        if db is not None:
            settings = settings.replace(db=db)
        missing = None if create else store_missing(resolve_url(settings.db))
        if missing is not None:
            raise SchemaNotInitializedError(
                f"there is no store at {missing} (nothing was ingested there yet): give"
                " --db (SURREALDOCS_DB) the store you mean, or make this one by ingesting"
                " into it")
        if settings.vectors and embedder is None:
            # Loading a model or probing a provider blocks: keep it off the event loop.
            embedder = await asyncio.to_thread(get_embedder, settings.model, settings)
        embedder = embedder if settings.vectors else None
        store = await connect(settings)
        try:
            return await cls._on(store, settings, embedder, create=True, run_jobs=run_jobs,
                                 on_convert=on_convert)
        except BaseException:
            await store.close()
            raise

    @classmethod
    async def around(cls, connection: Any, *, settings: Settings | None = None,
                     embedder: Embedder | None = None, create: bool = True,
                     run_jobs: bool = False) -> KnowledgeBase:
        """A knowledge base on a SurrealDB SDK connection you opened, signed in and
        ``use()``d (the namespace and database come from it). Closing the knowledge base
        leaves the connection open: it is yours.

        With ``create=False`` the tables must exist already (else
        :class:`SchemaNotInitializedError`), and their full-text analyzer's language is
        adopted instead of the settings'.
        """
        settings = settings or Settings()
        names = Names(settings.documents_table, settings.chunks_table,
                      settings.analyzer_language)
        store = await Store.around(connection, names)
        settings = settings.replace(namespace=store.namespace, database=store.database)
        if not create:
            schema = await read_schema(store)
            if not schema or int(schema.get("version", 0)) < 1:
                raise SchemaNotInitializedError(
                    f"no surrealdocs tables {names.documents}/{names.chunks} in "
                    f"{store.namespace}/{store.database}: create them first")
            language = layout_of(schema)[2].removeprefix("sd_")
            store.names = Names(names.documents, names.chunks, language)
            settings = settings.replace(analyzer_language=language)
        if settings.vectors and embedder is None:
            embedder = await asyncio.to_thread(get_embedder, settings.model, settings)
        return await cls._on(store, settings, embedder if settings.vectors else None,
                             create=create, run_jobs=run_jobs)

    @classmethod
    async def _on(cls, store: Store, settings: Settings, embedder: Embedder | None, *,
                  create: bool, run_jobs: bool,
                  on_convert: Callable[[int, int], None] | None = None) -> KnowledgeBase:
        await ensure_schema(store, settings, embedder.name if embedder else None,
                            embedder.dimension if embedder else 0,
                            provenance=provenance(embedder) if embedder else None,
                            text_index_progress=on_convert)
        kb = cls(store, embedder, settings, vectors_apart=await vectors_apart(store))
        await kb.storage.chunks.ensure_vector_index()
        # On an embedded store this process is the only writer, so every incomplete document
        # is a crash's debris; on a server only those idle for longer than the write lease.
        exclusive = store.owned and store.embedded
        await kb.storage.documents.recover(0 if exclusive else int(settings.write_lease))
        if settings.chunked:
            await kb.jobs.requeue_interrupted()
            if run_jobs:
                kb.jobs.start()
        return kb

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the job runner (a running job is resumed at the next open) and close the
        store, unless it is a connection the caller lent (:meth:`around`)."""
        await self.jobs.stop()
        await self.storage.chunks.stop_counting()
        if self.store.owned:
            await self.store.close()

    @property
    def notebooks(self) -> NotebookService:
        """Notebooks, their sources and notes (stores with chunks only)."""
        if self._notebooks is None:
            raise ConfigurationError("this store holds whole documents only: notebooks need "
                                     "chunks (chunked=True)")
        return self._notebooks

    @property
    def ingest_jobs(self) -> IngestJobs:
        """Ingest as a background job (stores with chunks only: jobs live beside them)."""
        if self._ingest_jobs is None:
            raise ConfigurationError("this store holds whole documents only: background "
                                     "jobs need chunks (chunked=True)")
        return self._ingest_jobs

    @property
    def keys(self) -> ApiKeyService:
        """The HTTP server's API keys (stores with chunks only: the server needs jobs)."""
        if self._keys is None:
            raise ConfigurationError("this store holds whole documents only: the server and "
                                     "its keys need chunks (chunked=True)")
        return self._keys

    # ----- ingest ----------------------------------------------------------------------
    async def ingest(self, paths: Iterable[str | Path], *, glob: str = "**/*",
                     force: bool = False, retry_failed: bool = False,
                     on_result: ProgressCallback | None = None,
                     on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest files and directories (expanded with ``glob``).

        Unchanged files (same bytes as last time) are skipped before extraction; ``force``
        re-extracts them, ``retry_failed`` retries only the ones that failed last time.
        """
        check_glob(glob)
        return await self._ingestor.ingest_paths(
            paths, glob=glob, force=force, retry_failed=retry_failed, on_result=on_result,
            on_discovered=on_discovered)

    async def ingest_files(self, files: Mapping[str, str | Path]
                           | Iterable[tuple[str, str | Path]], *, force: bool = False,
                           retry_failed: bool = False,
                           on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest files on disk under source names you choose, given as ``{source: path}``
        or ``(source, path)`` pairs (an upload kept in a folder, named ``upload://x.pdf``)."""
        pairs = files.items() if isinstance(files, Mapping) else files
        return await self._ingestor.ingest_files(pairs, force=force, retry_failed=retry_failed,
                                                 on_result=on_result)

    async def sync(self, paths: Iterable[str | Path] | str | Path, *, glob: str = "**/*",
                   dry_run: bool = False, notebook: Notebook | Any = None,
                   on_result: ProgressCallback | None = None,
                   on_discovered: Callable[[int], None] | None = None) -> SyncReport:
        """Make the store mirror folders: what they hold is ingested (unchanged files are
        skipped by size and modification time, then by their bytes' hash, without
        extraction), a renamed or moved file is re-pointed without extraction or embedding,
        a changed one is replaced (embedding only its new chunks), and a source that is no
        longer there is removed with its chunks (its document stays while another source
        holds it). Sources outside the folders are never touched.

        ``glob`` picks the files inside the folders (and the stored sources the sync
        answers for); ``notebook`` (a Notebook, its id or its name) also puts every
        document of the folders in that notebook; ``dry_run`` computes the plan and
        changes nothing. See :mod:`surrealdocs.core.sync`.
        """
        check_glob(glob)
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not roots:
            raise ConfigurationError("give at least one folder to sync")
        nb = None if notebook is None else await self.notebooks.resolve(notebook)

        def discovered(plan: Any) -> None:
            if on_discovered:
                on_discovered(len(plan.present) + len(plan.problems))

        report = await self._syncer.sync(roots, glob, dry_run=dry_run, on_result=on_result,
                                         on_plan=discovered)
        self.storage.chunks.written()  # its deletions can make a segment due for a merge
        if nb is not None and self._syncer.last_plan is not None:
            docs = await self._syncer.documents_of(self._syncer.last_plan)
            report.notebook = id_text(nb)
            report.linked = await self.notebooks.link_documents(nb, docs, dry_run=dry_run)
        return report

    async def watch(self, paths: Iterable[str | Path] | str | Path, *, glob: str = "**/*",
                    notebook: Notebook | Any = None, settle: float = 0.5,
                    on_pass: Callable[[SyncReport], Any] | None = None,
                    on_result: ProgressCallback | None = None,
                    on_changes: Callable[[int], None] | None = None,
                    stop: asyncio.Event | None = None) -> None:
        """:meth:`sync` the folders, then follow them: each batch of changes is synced once
        no new change came for ``settle`` seconds. Every pass's report goes to ``on_pass``.
        Returns when ``stop`` is set (or the task is cancelled: the document being written
        then is left out whole, and the next sync does it)."""
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if isinstance(settle, bool) or not isinstance(settle, (int, float)) \
                or not 0 < settle <= 60:
            raise ConfigurationError(f"settle must be from 0 to 60 seconds, got {settle!r}")

        async def one_pass() -> None:
            report = await self.sync(roots, glob=glob, notebook=notebook, on_result=on_result)
            if on_pass:
                on_pass(report)

        folder = store_path(self.store.url)
        ignore = [folder] if folder is not None else []
        await self._syncer.watch(roots, one_pass, settle=float(settle), ignore=ignore,
                                 stop=stop, on_changes=on_changes)

    async def ingest_bytes(self, data: bytes, *, mime_type: str, source: str,
                           force: bool = False, retry_failed: bool = False) -> FileResult:
        """Ingest raw bytes of a given MIME type under a source name (e.g. ``upload://x``).
        The same bytes under the same name again are skipped, failures included (unless
        ``retry_failed``)."""
        return await self._ingestor.ingest_bytes(data, mime_type, source, force=force,
                                                 retry_failed=retry_failed)

    async def ingest_many_bytes(self, items: Iterable[tuple[str, bytes, str]], *,
                                force: bool = False, retry_failed: bool = False,
                                on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many in-memory documents, each ``(source, data, mime_type)``, through the
        same pipeline as :meth:`ingest_bytes`, concurrently and with one HNSW rebuild check
        at the end."""
        return await self._ingestor.ingest_many(items, force=force, retry_failed=retry_failed,
                                                on_result=on_result)

    async def ingest_texts(self, texts: Mapping[str, str] | Iterable[tuple[str, str]], *,
                           mime_type: str = "text/plain", force: bool = False,
                           retry_failed: bool = False,
                           on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many texts, given as ``{source: text}`` or ``(source, text)`` pairs."""
        pairs = texts.items() if isinstance(texts, Mapping) else texts
        return await self.ingest_many_bytes(
            ((source, text.encode("utf-8"), mime_type) for source, text in pairs),
            force=force, retry_failed=retry_failed, on_result=on_result)

    async def delete(self, source: str) -> bool:
        """Forget a source; its document (and chunks) go when no other source shares it."""
        key = source if "://" in source else next(iter(_as_path(source)), source)
        deleted = await self._ingestor.delete_source(key)
        self.storage.chunks.written()  # deletions can make a segment due for a merge
        return deleted

    # ----- search ----------------------------------------------------------------------
    async def search(self, query: str | SearchRequest | None = None, *, mode: str = "hybrid",
                     limit: int = 10, min_score: float | None = None,
                     source: str | None = None,
                     mime_type: str | Sequence[str] | None = None,
                     notebook: Notebook | Any = None, topics: Sequence[str] | None = None,
                     created_after: dt.datetime | None = None,
                     created_before: dt.datetime | None = None,
                     candidates: int | None = None, fusion: str | None = None,
                     rrf_k: int | None = None, text_weight: float | None = None,
                     vector_weight: float | None = None, per_document: bool = False,
                     query_vector: Sequence[float] | None = None) -> list[Hit]:
        """Search by ``mode``: ``hybrid`` (default), ``vector`` or ``text`` (BM25).

        Give the query and options, or one :class:`SearchRequest` (which documents each
        option). Scores are 0-1 in every mode (higher is better): text, the hit's BM25 as a
        share of the most the query could score; vector, the cosine similarity; hybrid, the
        fused z-scores through the logistic (0.5: an average candidate).
        """
        options = SearchRequest(
            None, mode, limit, min_score, source, mime_type, notebook, topics, created_after,
            created_before, candidates, fusion, rrf_k, text_weight, vector_weight,
            per_document, query_vector)
        if isinstance(query, SearchRequest):
            if options != SearchRequest():
                raise ConfigurationError("give a SearchRequest or search options, not both")
            request = query
        else:
            request = options.replace(query=query)
        notebook_id = None if request.notebook is None \
            else await self.notebooks.resolve(request.notebook)
        filters = Filters(source=request.source, mime_type=request.mime_type,
                          notebook=notebook_id, topics=request.topics,
                          created_after=request.created_after,
                          created_before=request.created_before)
        return await self._searcher.search(
            request.query, mode=request.mode, limit=request.limit,
            min_score=request.min_score, filters=filters, candidates=request.candidates,
            fusion=request.fusion, rrf_k=request.rrf_k, text_weight=request.text_weight,
            vector_weight=request.vector_weight, per_document=request.per_document,
            query_vector=request.query_vector)

    async def warm_up(self, queries: Iterable[str]) -> None:
        """Learn now what searches for these queries need (how common each BM25 term is),
        instead of in the background of the first searches: results are then the same
        from the first search on (evaluation does this)."""
        if self.settings.chunked and self.settings.bm25_max_df < 1.0 \
                and self.storage.chunks.text is None:
            words = sorted({w for q in queries for w in query_words(q)})
            await self.storage.chunks.count_terms(words)

    # ----- documents -------------------------------------------------------------------
    async def documents(self, *, offset: int = 0, limit: int = 50,
                        notebook: Notebook | Any = None, source: str | None = None,
                        mime_type: str | Sequence[str] | None = None,
                        topics: Sequence[str] | None = None,
                        created_after: dt.datetime | None = None,
                        created_before: dt.datetime | None = None) -> list[Document]:
        """Stored documents, oldest first, a page at a time (without their text), with the
        filters a search takes (a notebook, a source glob, MIME types, topics, when
        ingested)."""
        if isinstance(offset, bool) or not isinstance(offset, int) \
                or not 0 <= offset <= MAX_OFFSET:
            raise ConfigurationError(
                f"offset must be an integer from 0 to {MAX_OFFSET}, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ConfigurationError(f"limit must be an integer from 1 to 10000, got {limit!r}")
        filters = await self._filters(notebook, source, mime_type, topics, created_after,
                                      created_before)
        rows = await self.storage.documents.select(filters=filters, offset=offset,
                                                   limit=limit, text=False)
        return [_document(row) for row in rows]

    async def count_documents(self, *, notebook: Notebook | Any = None,
                              source: str | None = None,
                              mime_type: str | Sequence[str] | None = None,
                              topics: Sequence[str] | None = None,
                              created_after: dt.datetime | None = None,
                              created_before: dt.datetime | None = None) -> int:
        """How many documents :meth:`documents` would list, over all its pages."""
        filters = await self._filters(notebook, source, mime_type, topics, created_after,
                                      created_before)
        return await self.storage.documents.count(filters=filters)

    async def _filters(self, notebook: Any, source: str | None,
                       mime_type: str | Sequence[str] | None, topics: Sequence[str] | None,
                       created_after: dt.datetime | None,
                       created_before: dt.datetime | None) -> Filters:
        nb = None if notebook is None else await self.notebooks.resolve(notebook)
        return Filters(source=source, mime_type=mime_type, notebook=nb, topics=topics,
                       created_after=created_after, created_before=created_before)

    async def document(self, ref: Any, *, text: bool = True) -> Document:
        """A document by id (``documents:…`` or its key) or by one of its sources, with its
        text and where each chunk lies in it (``text=False``: only what it is)."""
        doc = await self._document_id(ref)
        row = await self.storage.documents.get(doc)
        if row is None or not row.get("complete"):
            raise NotFoundError(f"no document {ref!r}")
        document = _document(row)
        if text:
            document.content = row.get("content") or ""
            document.metadata = row.get("metadata")
            if self.settings.chunked:
                document.chunks = [_span(r) for r in await self.storage.chunks.spans(doc)]
        else:
            document.content = None
        return document

    async def forget(self, refs: Sequence[str] = (), *, glob: str | None = None,
                     dry_run: bool = False) -> list[Forgotten]:
        """Forget sources (paths or names) and delete documents (``documents:…`` ids,
        whatever their sources), plus every source ``glob`` matches; with ``dry_run``, say
        what would go and change nothing. A source not found comes back with the stored
        sources whose name ends like it (a name typed without its folder)."""
        targets = [*refs, *(await self.sources_matching(glob) if glob else [])]
        out = []
        for ref in dict.fromkeys(targets):
            is_doc = ref.startswith(self.storage.documents.table + ":")
            if dry_run:
                known = (await self.storage.documents.exists(await self._document_id(ref))
                         if is_doc else bool(await self.sources_matching(ref)))
                out.append(Forgotten(ref, "would delete" if known else "not found"))
            elif is_doc:
                try:
                    await self.delete_document(ref)
                    out.append(Forgotten(ref, "deleted"))
                except NotFoundError:
                    out.append(Forgotten(ref, "not found"))
            elif await self.delete(ref):
                out.append(Forgotten(ref, "deleted"))
            else:
                name = Path(ref).name
                near = await self.sources_matching(name) if name else []
                out.append(Forgotten(ref, "not found", near[:5]))
        return out

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

    async def delete_document(self, ref: Any) -> None:
        """Delete a document, whatever its sources: its chunks, vector copies, notebook
        edges, jobs and source records go with it."""
        doc = await self._document_id(ref)
        if not await self.storage.documents.exists(doc):
            raise NotFoundError(f"no document {ref!r}")
        await self._ingestor.delete_document(doc)

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
        doc = await self._document_id(ref)
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
        doc = await self._document_id(ref)
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

    async def _document_id(self, ref: Any) -> Any:
        documents = self.storage.documents
        if isinstance(ref, str) and not ref.startswith(documents.table + ":"):
            for source in (ref, *(_as_path(ref) if "://" not in ref else [])):
                by_source = await documents.of_source(source)
                if by_source is not None:
                    return by_source
        return documents.document_id(ref)

    # ----- maintenance -----------------------------------------------------------------
    async def rebuild_index(self, *, text: bool = True, vectors: bool = True,
                            progress: Callable[[int, int], None] | None = None) -> None:
        """Rebuild the text index from the chunks (``progress(done, total)`` follows it)
        and build the HNSW graph over every vector (done automatically after big
        ingests)."""
        chunks = self.storage.chunks
        if text and chunks.text is not None:
            await chunks.text.rebuild(progress)
        if vectors and self.settings.vectors:
            await chunks.rebuild_if_due(force=True)

    async def stats(self) -> Stats:
        documents, mime_types, sources = await self.storage.documents.counts()
        chunks = await self.storage.chunks.count() if self.settings.chunked else 0
        return Stats(
            url=self.store.url,
            schema_version=SCHEMA_VERSION,
            model=self.embedder.name if self.embedder else "",
            dimension=self.embedder.dimension if self.embedder else 0,
            documents=documents,
            chunks=chunks,
            sources=sources,
            mime_types=mime_types,
            vectors_outside_graph=await self.storage.chunks.pending()
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


class SyncKnowledgeBase:
    """Blocking wrapper: the same calls as :class:`KnowledgeBase`, run on a private loop."""

    def __init__(self, db: str | None = None, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._kb: KnowledgeBase = self._run(KnowledgeBase.open(db, **kwargs))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def kb(self) -> KnowledgeBase:
        """The asynchronous knowledge base behind this one; await its calls on :attr:`loop`
        only (``asyncio.run_coroutine_threadsafe``)."""
        return self._kb

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The private event loop (in its own thread) the knowledge base runs on."""
        return self._loop

    @property
    def store(self) -> Store:
        return self._kb.store

    @property
    def settings(self) -> Settings:
        return self._kb.settings

    def ingest(self, paths: Iterable[str | Path], **kwargs: Any) -> IngestReport:
        return self._run(self._kb.ingest(paths, **kwargs))

    def ingest_bytes(self, data: bytes, **kwargs: Any) -> FileResult:
        return self._run(self._kb.ingest_bytes(data, **kwargs))

    def ingest_many_bytes(self, items: Iterable[tuple[str, bytes, str]],
                          **kwargs: Any) -> IngestReport:
        return self._run(self._kb.ingest_many_bytes(items, **kwargs))

    def ingest_texts(self, texts: Mapping[str, str] | Iterable[tuple[str, str]],
                     **kwargs: Any) -> IngestReport:
        return self._run(self._kb.ingest_texts(texts, **kwargs))

    def sync(self, paths: Iterable[str | Path] | str | Path, **kwargs: Any) -> SyncReport:
        return self._run(self._kb.sync(paths, **kwargs))

    def search(self, query: str | None = None, **kwargs: Any) -> list[Hit]:
        return self._run(self._kb.search(query, **kwargs))

    def delete(self, source: str) -> bool:
        return self._run(self._kb.delete(source))

    def stats(self) -> Stats:
        return self._run(self._kb.stats())

    def rebuild_index(self) -> None:
        self._run(self._kb.rebuild_index())

    def close(self) -> None:
        try:
            self._run(self._kb.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
            self._loop.close()

    def __enter__(self) -> SyncKnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_path(ref: str) -> list[str]:
    """A document reference read as a path on this machine (``~`` expanded, made
    absolute), or nothing when it cannot be one (a NUL, an unknown user's ``~``)."""
    try:
        return [str(Path(ref).expanduser().resolve())]
    except (ValueError, OSError, RuntimeError):
        return []
