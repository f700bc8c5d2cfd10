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
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from ..chat import chat_model
from ..config import Settings
from ..embed import Embedder, EmbeddingRunner, get_embedder, provenance
from ..embed.carried import CarriedModel
from ..errors import ConfigurationError, NotFoundError, SchemaNotInitializedError
from ..parts.metadata import user_metadata
from ..parts.results import (
    FileResult,
    Forgotten,
    Hit,
    IngestReport,
    Stats,
    SyncReport,
    id_text,
)
from ..store.connection import Store, connect, resolve_url, store_missing, store_path
from ..store.names import Names
from ..store.schema import ensure_schema, layout_of, read_schema, stored_model, vectors_apart
from ..store.storage import Storage
from .answer import Answer, answer
from .archive import ArchiveReport, copy_store, export_store, import_archive
from .archive import Progress as ArchiveProgress
from .conversations import ConversationService
from .ingest import Ingestor, ProgressCallback
from .ingest_jobs import IngestJobs
from .job_runner import JobService
from .key_service import ApiKeyService
from .metadata import MetadataService
from .notebook_service import Notebook, NotebookService
from .reader import DocumentReader, as_path
from .reembed import reembed as reembed_store
from .search import Searcher, query_words
from .search_request import SearchRequest
from .sync import Syncer, check_glob
from .web_sources import WebSources

T = TypeVar("T")

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
        self.web = WebSources(self.storage, self._ingestor, settings)  # core/web_sources.py
        self._searcher = Searcher(self.storage.legs, self.embedding, settings,
                                  store.names.language)
        self._notebooks = NotebookService(
            self.storage, settings, self.embedding, self.jobs,
            self._ingestor) if settings.chunked else None
        try:  # the loop the store was opened on: its connection answers there
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None
        self._ingest_jobs = IngestJobs(
            self.storage, settings, self.jobs, self._ingestor,
            self._notebooks, self.web) if self._notebooks is not None else None
        self._keys = ApiKeyService(self.storage.keys) if settings.chunked else None
        # reading what is stored: core/reader.py
        self.reader = DocumentReader(self.storage, settings,
                                     lambda ref: self.notebooks.resolve(ref))
        self.conversations = ConversationService(  # chats with the store: core/conversations
            self.storage.conversations, settings, self.ask, self.reader.resolve_notebook)
        self.metadata = MetadataService(self.storage, self.reader)  # core/metadata.py
        self.documents = self.reader.documents
        self.count_documents = self.reader.count_documents
        self.document = self.reader.document
        self.failures = self.reader.failures  # sources whose last ingest failed, why
        self.failure = self.reader.failure
        self.sources_matching = self.reader.sources_matching
        self.sources_under = self.reader.sources_under
        self.passage = self.reader.passage
        self.pages = self.reader.pages
        self.excerpt = self.reader.excerpt

    # ----- opening and closing ---------------------------------------------------------
    @classmethod
    async def open(cls, db: str | None = None, *, settings: Settings | None = None,
                   embedder: Embedder | None = None, run_jobs: bool = False,
                   create: bool = True, load_model: bool = True,
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
            load_model: ``False`` opens an existing store without loading its model (for
                work that embeds nothing: an export, a copy); embedding then fails.
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
        store = await connect(settings)
        try:
            if settings.vectors and embedder is None:
                stored = await stored_model(store)
                if stored and not settings.model_named:  # the store's own model
                    settings = settings.replace(model=str(stored["model"]), model_named=True)
                if stored and not load_model and stored["model"] == settings.model:
                    embedder = CarriedModel(settings.model, int(stored["dimension"]),
                                            stored.get("provenance"))
                else:  # loading a model or probing a provider blocks: not on the loop
                    embedder = await asyncio.to_thread(get_embedder, settings.model, settings)
            embedder = embedder if settings.vectors else None
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
        await kb.storage.chunks.graphs.ensure_vector_index()
        # On an embedded store this process is the only writer, so every incomplete document
        # is a crash's debris; on a server only those idle for longer than the write lease.
        exclusive = store.owned and store.embedded
        await kb.storage.documents.recover(0 if exclusive else int(settings.write_lease))
        if settings.chunked:
            await kb.jobs.requeue_interrupted()
            if run_jobs:
                kb.jobs.start()
        return kb

    @classmethod
    async def reembed(cls, model: str, *, settings: Settings | None = None,
                      progress: Callable[[int, int], None] | None = None) -> int:
        """Re-embed every chunk of a store with ``model``, its model from then on."""
        settings = settings or Settings.from_env()
        embedder = await asyncio.to_thread(get_embedder, model, settings)
        return await reembed_store(settings, embedder, progress)

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the job runner (a running job is resumed at the next open) and close the
        store, unless it is a connection the caller lent (:meth:`around`)."""
        await self.jobs.stop()
        await self.storage.legs.stop()
        await self._searcher.close()
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
                     metadata: Mapping[str, Any] | None = None,
                     on_result: ProgressCallback | None = None,
                     on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest files and directories (expanded with ``glob``).

        Unchanged files (same bytes as last time) are skipped before extraction; ``force``
        re-extracts them, ``retry_failed`` retries only the ones that failed last time.
        ``metadata`` (keys of the user's own) is set on every document the files give.
        """
        check_glob(glob)
        user_metadata(metadata)  # checked before any work
        report = await self._ingestor.ingest_paths(
            paths, glob=glob, force=force, retry_failed=retry_failed, on_result=on_result,
            on_discovered=on_discovered)
        await self.metadata.file_documents(report, metadata)
        return report

    async def sync(self, paths: Iterable[str | Path] | str | Path, *, glob: str = "**/*",
                   dry_run: bool = False, notebook: Notebook | Any = None,
                   metadata: Mapping[str, Any] | None = None,
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
        document of the folders in that notebook, and ``metadata`` sets those keys on
        them; ``dry_run`` computes the plan and changes nothing. See
        :mod:`surrealdocs.core.sync`.
        """
        check_glob(glob)
        user_metadata(metadata)
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if not roots:
            raise ConfigurationError("give at least one folder to sync")
        nb = None if notebook is None else await self.notebooks.resolve(notebook)

        def discovered(plan: Any) -> None:
            if on_discovered:
                on_discovered(len(plan.present) + len(plan.problems))

        report, plan = await self._syncer.sync(roots, glob, dry_run=dry_run,
                                               on_result=on_result, on_plan=discovered)
        self.storage.chunks.written()  # its deletions can make a segment due for a merge
        if nb is not None or (metadata and not dry_run):
            docs = await self._syncer.documents_of(plan)
            if nb is not None:
                report.notebook = id_text(nb)
                report.linked = await self.notebooks.link_documents(nb, docs,
                                                                    dry_run=dry_run)
            if not dry_run:
                await self.metadata.file_documents(docs, metadata)
        return report

    async def watch(self, paths: Iterable[str | Path] | str | Path, *, glob: str = "**/*",
                    notebook: Notebook | Any = None, settle: float = 0.5,
                    metadata: Mapping[str, Any] | None = None,
                    on_pass: Callable[[SyncReport], Any] | None = None,
                    on_result: ProgressCallback | None = None,
                    on_changes: Callable[[int], None] | None = None,
                    stop: asyncio.Event | None = None) -> None:
        """:meth:`sync` the folders, then follow them: each batch of changes is synced once
        no new change came for ``settle`` seconds. Every pass's report goes to ``on_pass``.
        Returns when ``stop`` is set (or the task is cancelled: the document being written
        then is left out whole, and the next sync does it)."""
        roots = [paths] if isinstance(paths, (str, Path)) else list(paths)

        async def one_pass() -> None:
            report = await self.sync(roots, glob=glob, notebook=notebook, metadata=metadata,
                                     on_result=on_result)
            if on_pass:
                on_pass(report)

        folder = store_path(self.store.url)
        ignore = [folder] if folder is not None else []
        await self._syncer.watch(roots, one_pass, settle=settle, ignore=ignore,
                                 stop=stop, on_changes=on_changes)

    async def ingest_bytes(self, data: bytes, *, mime_type: str, source: str,
                           force: bool = False, retry_failed: bool = False,
                           metadata: Mapping[str, Any] | None = None) -> FileResult:
        """Ingest raw bytes of a given MIME type under a source name (e.g. ``upload://x``).
        The same bytes under the same name again are skipped, failures included (unless
        ``retry_failed``); ``metadata`` is set on the document."""
        user_metadata(metadata)
        result = await self._ingestor.ingest_bytes(data, mime_type, source, force=force,
                                                   retry_failed=retry_failed)
        if result.document_id:
            await self.metadata.file_documents([result.document_id], metadata)
        return result

    async def ingest_many_bytes(self, items: Iterable[tuple[str, bytes, str]], *,
                                force: bool = False, retry_failed: bool = False,
                                metadata: Mapping[str, Any] | None = None,
                                on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many in-memory documents, each ``(source, data, mime_type)``, through the
        same pipeline as :meth:`ingest_bytes`, concurrently and with one HNSW rebuild check
        at the end; ``metadata`` is set on every document."""
        user_metadata(metadata)
        report = await self._ingestor.ingest_many(items, force=force,
                                                  retry_failed=retry_failed,
                                                  on_result=on_result)
        await self.metadata.file_documents(report, metadata)
        return report

    async def ingest_texts(self, texts: Mapping[str, str] | Iterable[tuple[str, str]], *,
                           mime_type: str = "text/plain", force: bool = False,
                           retry_failed: bool = False,
                           metadata: Mapping[str, Any] | None = None,
                           on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many texts, given as ``{source: text}`` or ``(source, text)`` pairs."""
        pairs = texts.items() if isinstance(texts, Mapping) else texts
        return await self.ingest_many_bytes(
            ((source, text.encode("utf-8"), mime_type) for source, text in pairs),
            force=force, retry_failed=retry_failed, metadata=metadata, on_result=on_result)

    async def ingest_urls(self, urls: Iterable[str] = (), *, sitemaps: Sequence[str] = (),
                          follow: int = 0, max_pages: int = 1000, force: bool = False,
                          retry_failed: bool = False, allow_private: bool = True,
                          obey_robots: bool = True, metadata: Mapping[str, Any] | None = None,
                          on_result: ProgressCallback | None = None,
                          on_discovered: Callable[[int], None] | None = None
                          ) -> IngestReport:
        """Fetch web pages and ingest them (docs/web.md): ``urls``, the pages ``sitemaps``
        list, and with ``follow`` the pages they link to within the same host and path, at
        most ``max_pages``. A page asked again answers 304 (unchanged, nothing read) when
        its ETag or Last-Modified says so. ``allow_private=False`` refuses loopback,
        private and reserved addresses (what a server does); ``metadata`` is set on every
        document."""
        user_metadata(metadata)
        report = await self.web.ingest(
            urls, sitemaps=sitemaps, follow=follow, max_pages=max_pages, force=force,
            retry_failed=retry_failed, allow_private=allow_private, obey_robots=obey_robots,
            on_result=on_result, on_discovered=on_discovered)
        await self.metadata.file_documents(report, metadata)
        return report

    async def refresh(self, *, older_than: float | None = None, prune: bool = False,
                      allow_private: bool = True, obey_robots: bool = True,
                      on_result: ProgressCallback | None = None,
                      on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        """Re-check every web page source (fetched more than ``older_than`` seconds ago):
        304s are unchanged, changed pages replaced, a page that is gone (404, 410) reported
        and, with ``prune``, removed."""
        return await self.web.refresh(older_than=older_than, prune=prune,
                                      allow_private=allow_private, obey_robots=obey_robots,
                                      on_result=on_result, on_discovered=on_discovered)

    async def delete(self, source: str) -> bool:
        """Forget a source; its document (and chunks) go when no other source shares it."""
        key = source if "://" in source else next(iter(as_path(source)), source)
        return await self._ingestor.delete_source(key)

    # ----- search ----------------------------------------------------------------------
    async def search(self, query: str | SearchRequest | None = None,
                     **options: Any) -> list[Hit]:
        """Search by ``mode``: ``hybrid`` (default), ``vector`` or ``text`` (BM25).

        Give the query and options by name, or one :class:`SearchRequest` (which documents
        each option). A hit's score is the probability that it is relevant (0-1), from the
        query and the chunk alone; hits below ``settings.relevance_cutoff`` are left out
        unless ``cutoff`` is false, so a search about nothing the store holds finds nothing.
        """
        request = SearchRequest.of(query, **options).checked(self.settings)
        notebook = None if request.notebook is None \
            else await self.notebooks.resolve(request.notebook)
        return await self._searcher.search(request, request.filters(notebook))

    async def warm_up(self, queries: Iterable[str]) -> None:
        """Learn now what searches for these queries need (how common each BM25 term is),
        instead of in the background of the first searches: results are then the same
        from the first search on (evaluation does this)."""
        await self.storage.legs.text.warm_up(sorted({w for q in queries
                                                     for w in query_words(q)}))

    # ----- documents -------------------------------------------------------------------
    async def forget(self, refs: Sequence[str] = (), *, glob: str | None = None,
                     where: Any = None, dry_run: bool = False) -> list[Forgotten]:
        """Forget sources (paths or names) and delete documents (``documents:…`` ids,
        whatever their sources), plus every source ``glob`` matches and every document
        whose metadata passes ``where``; with ``dry_run``, say what would go and change
        nothing. A source not found comes back with the stored sources whose name ends
        like it (a name typed without its folder)."""
        targets = [*refs, *(await self.sources_matching(glob) if glob else [])]
        if where is not None:
            targets += await self.reader.ids_matching(where)
        out = []
        for ref in dict.fromkeys(targets):
            is_doc = ref.startswith(self.storage.documents.table + ":")
            if dry_run:
                known = (await self.storage.documents.exists(await self.reader.document_id(ref))
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

    async def delete_document(self, ref: Any) -> None:
        """Delete a document, whatever its sources: its chunks, vector copies, notebook
        edges, jobs and source records go with it."""
        await self._ingestor.delete_document(await self.reader.document_id(ref))

    # ----- maintenance -----------------------------------------------------------------
    async def rebuild_index(self, *, text: bool = True, vectors: bool = True,
                            progress: Callable[[int, int], None] | None = None) -> None:
        """Rebuild the text index from the chunks (``progress(done, total)`` follows it)
        and build the HNSW graph over every vector (done automatically after big
        ingests)."""
        await self._ingestor.rebuild_index(text=text, vectors=vectors, progress=progress)

    # ----- archives: export, import, copy (core/archive.py) ---------------------------
    async def export(self, out: IO[bytes], *, with_keys: bool = False,
                     progress: ArchiveProgress | None = None) -> ArchiveReport:
        """Write an archive of this store into the binary stream ``out`` (docs/archive.md):
        documents, files, chunks with their vectors, notebooks, notes, conversations, and
        with ``with_keys`` the API keys' hashes. ``progress(what, done, total)``."""
        return await export_store(self.storage, self.settings, self.embedder, out,
                                  with_keys=with_keys, progress=progress)

    @classmethod
    async def import_archive(cls, source: IO[bytes], db: str | None = None, *,
                             settings: Settings | None = None, merge: bool = False,
                             progress: ArchiveProgress | None = None) -> ArchiveReport:
        """Import an archive (a binary stream) into an empty store (``db``), bound to the
        archive's model; nothing is extracted or embedded. Run again after an
        interruption, it finishes the import. ``merge`` imports into a store that holds
        documents already (docs/archive.md). Raises :class:`ArchiveError`."""
        settings = settings or Settings.from_env()
        return await import_archive(source, cls._opener(), settings.replace(db=db) if db
                                    else settings, merge=merge, progress=progress)

    async def copy_to(self, db: str, *, settings: Settings | None = None,
                      with_keys: bool = False,
                      progress: ArchiveProgress | None = None) -> ArchiveReport:
        """Copy this store into the empty store ``db`` (export piped into import)."""
        target = (settings or self.settings).replace(db=db)
        return await copy_store(self.storage, self.settings, self.embedder, self._opener(),
                                target, with_keys=with_keys, progress=progress)

    @classmethod
    def _opener(cls) -> Callable[[Settings, Embedder | None], Coroutine[Any, Any, Any]]:
        async def open_target(settings: Settings, embedder: Embedder | None) -> Any:
            return await cls.open(settings=settings, embedder=embedder)
        return open_target

    async def stats(self) -> Stats:
        return await self.reader.stats(self.embedder)

    async def ask(self, question: str | SearchRequest, *, llm: str | None = None,
                  on_event: Callable[[str, Any], Any] | None = None) -> Answer:
        """Answer from the passages a search finds (or a SearchRequest's) with the chat
        model ``llm`` (default ``settings.llm``), citations checked: :mod:`.answer`."""
        request = question if isinstance(question, SearchRequest) else SearchRequest(
            question, limit=self.settings.ask_passages)
        model = chat_model(llm, self.settings)
        passages = await self.search(request)
        result = await answer(request.query or "", passages, model,
                              self.settings.ask_context_chars, on_event)
        result.notice = getattr(passages, "notice", None)
        return result


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

