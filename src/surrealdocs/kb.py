"""The library's front door: a knowledge base is a store + an embedding model + settings.

>>> kb = await KnowledgeBase.open()                 # embedded file store in ./.surrealdocs/
>>> report = await kb.ingest(["docs/"], glob="**/*.pdf")
>>> hits = await kb.search("quarterly revenue", mode="hybrid", limit=5)
>>> await kb.close()

:class:`SyncKnowledgeBase` offers the same calls without ``await``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from .config import Settings
from .embed import Embedder, get_embedder, provenance
from .ingest import FileResult, Ingestor, IngestReport, ProgressCallback, rebuild_vector_index
from .search import Filters, Hit, Searcher
from .store.connection import Store, connect
from .store.schema import SCHEMA_VERSION, ensure_schema

T = TypeVar("T")


@dataclass
class Stats:
    url: str
    schema_version: int
    model: str
    dimension: int
    documents: int
    chunks: int
    sources: dict[str, int] = field(default_factory=dict)
    mime_types: dict[str, int] = field(default_factory=dict)
    vectors_outside_graph: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class KnowledgeBase:
    """Documents, chunks and vectors in one SurrealDB store, searchable three ways."""

    def __init__(self, store: Store, embedder: Embedder | None, settings: Settings) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self._ingestor = Ingestor(store, embedder, settings)
        self._searcher = Searcher(store, embedder, settings)

    @classmethod
    async def open(cls, db: str | None = None, *, settings: Settings | None = None,
                   embedder: Embedder | None = None, **overrides: Any) -> KnowledgeBase:
        """Open (and create or upgrade) a knowledge base.

        Args:
            db: store URL or path; default ``SURREALDOCS_DB`` or ``./.surrealdocs/db``.
            settings: full settings; otherwise read from the environment plus ``overrides``.
            embedder: a ready embedder (its ``name`` is recorded in the store); otherwise the
                model named by ``settings.model`` is loaded (a hosted provider's,
                ``openai:MODEL`` or ``ollama:MODEL``, is asked for its dimension). Stores
                without vectors (``chunked`` or ``embed`` false) load no model.
        """
        settings = settings or Settings.from_env(**overrides)
        if db is not None:
            settings = settings.replace(db=db)
        if settings.vectors and embedder is None:
            # Loading a model or probing a provider blocks: keep it off the event loop.
            embedder = await asyncio.to_thread(get_embedder, settings.model, settings)
        embedder = embedder if settings.vectors else None
        store = await connect(settings)
        try:
            await ensure_schema(store, settings, embedder.name if embedder else None,
                                embedder.dimension if embedder else 0,
                                provenance=provenance(embedder) if embedder else None)
        except BaseException:
            await store.close()
            raise
        return cls(store, embedder, settings)

    async def __aenter__(self) -> KnowledgeBase:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.store.close()

    async def ingest(self, paths: Iterable[str | Path], *, glob: str = "**/*",
                     force: bool = False, retry_failed: bool = False,
                     on_result: ProgressCallback | None = None,
                     on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        """Ingest files and directories (expanded with ``glob``).

        Unchanged files (same bytes as last time) are skipped before extraction; ``force``
        re-extracts them, ``retry_failed`` retries only the ones that failed last time.
        """
        return await self._ingestor.ingest_paths(
            paths, glob=glob, force=force, retry_failed=retry_failed, on_result=on_result,
            on_discovered=on_discovered)

    async def ingest_bytes(self, data: bytes, *, mime_type: str, source: str,
                           force: bool = False) -> FileResult:
        """Ingest raw bytes of a given MIME type under a source name (e.g. ``upload://x``)."""
        return await self._ingestor.ingest_bytes(data, mime_type, source, force=force)

    async def ingest_many_bytes(self, items: Iterable[tuple[str, bytes, str]], *,
                                force: bool = False,
                                on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many in-memory documents, each ``(source, data, mime_type)``, through the
        same pipeline as :meth:`ingest_bytes`, concurrently and with one HNSW rebuild check
        at the end."""
        return await self._ingestor.ingest_many(items, force=force, on_result=on_result)

    async def ingest_texts(self, texts: Mapping[str, str] | Iterable[tuple[str, str]], *,
                           mime_type: str = "text/plain", force: bool = False,
                           on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest many texts, given as ``{source: text}`` or ``(source, text)`` pairs."""
        pairs = texts.items() if isinstance(texts, Mapping) else texts
        return await self.ingest_many_bytes(
            ((source, text.encode("utf-8"), mime_type) for source, text in pairs),
            force=force, on_result=on_result)

    async def search(self, query: str, *, mode: str = "hybrid", limit: int = 10,
                     min_score: float | None = None, source: str | None = None,
                     mime_type: str | Sequence[str] | None = None,
                     candidates: int | None = None, fusion: str | None = None,
                     rrf_k: int | None = None, text_weight: float | None = None,
                     vector_weight: float | None = None,
                     per_document: bool = False) -> list[Hit]:
        """Search chunks by ``mode`` (hybrid, vector or text), optionally filtered by a
        source glob and MIME type(s).

        Hybrid search fuses ``candidates`` hits of each leg with ``fusion`` (``rrf``,
        ``minmax`` or ``zscore``), weighting the legs by ``text_weight`` and
        ``vector_weight``; unset, these come from the settings. ``per_document`` returns one
        hit per document, its best chunk.
        """
        return await self._searcher.search(
            query, mode=mode, limit=limit, min_score=min_score,
            filters=Filters(source=source, mime_type=mime_type), candidates=candidates,
            fusion=fusion, rrf_k=rrf_k, text_weight=text_weight, vector_weight=vector_weight,
            per_document=per_document)

    async def delete(self, source: str) -> bool:
        """Forget a source; its document (and chunks) go when no other source shares it."""
        key = str(Path(source).resolve()) if "://" not in source else source
        return await self._ingestor.delete_source(key)

    async def rebuild_index(self) -> None:
        """Build the HNSW graph over every vector (done automatically after big ingests)."""
        if self.settings.vectors:
            await rebuild_vector_index(self.store)

    async def stats(self) -> Stats:
        names = self.store.names
        count_chunks = (f"SELECT count() AS n FROM {names.chunks} GROUP ALL;"
                        if self.settings.chunked else "RETURN [];")
        docs, chunks, files, mimes, model, state = await self.store.query(
            f"SELECT count() AS n FROM {names.documents} GROUP ALL; {count_chunks}"
            f" SELECT status, count() AS n FROM {names.files} GROUP BY status;"
            f" SELECT mime_type, count() AS n FROM {names.documents} GROUP BY mime_type;"
            " SELECT * FROM ONLY $model; SELECT * FROM ONLY $state;",
            {"model": names.embedding_key, "state": names.index_state_key},
        )
        return Stats(
            url=self.store.url,
            schema_version=SCHEMA_VERSION,
            model=(model or {}).get("model", self.embedder.name if self.embedder else ""),
            dimension=int((model or {}).get("dimension",
                                            self.embedder.dimension if self.embedder else 0)),
            documents=int(docs[0]["n"]) if docs else 0,
            chunks=int(chunks[0]["n"]) if chunks else 0,
            sources={r["status"]: int(r["n"]) for r in files or []},
            mime_types={r["mime_type"]: int(r["n"]) for r in mimes or []},
            vectors_outside_graph=int((state or {}).get("pending_vectors") or 0),
        )


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
    def store(self) -> Store:
        return self._kb.store

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

    def search(self, query: str, **kwargs: Any) -> list[Hit]:
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
