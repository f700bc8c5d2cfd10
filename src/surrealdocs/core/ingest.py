"""The ingest pipeline: discover → skip unchanged → extract → dedup → embed → write.

- The SHA-256 of a source's raw bytes is compared with its last ingest *before*
  extraction, so an unchanged file costs one read and one hash; a source that failed or gave
  no text is remembered the same way and not retried unless asked.
- The SHA-256 of the extracted text is the document's id: identical content from several
  sources is stored once, and each source points at it.
- A document, its chunks and its source land completely or not at all, even across a crash
  (see :meth:`Ingestor._write_new`). Writing is in this module; the SurrealQL is in the
  owners of the tables (:mod:`surrealdocs.store.documents`, :mod:`surrealdocs.store.chunks`,
  :mod:`surrealdocs.store.notebooks`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..embed import EmbeddingRunner, token_window
from ..errors import ConfigurationError, NotFoundError, StoreError
from ..parts.chunk import Chunk, assign_context, assign_pages, fit_to_window
from ..parts.discover import discover, os_reason, read_found
from ..parts.extract import Extracted, ExtractFailure, extract_bytes, extract_file
from ..parts.results import STATUSES, FileResult, IngestReport, id_text
from ..parts.tasks import all_or_cancel
from ..store.chunks import IDS_TAKEN_MARK, Move
from ..store.connection import STALE_MARK, Statement
from ..store.documents import DocumentExistsError
from ..store.folders import own_folders
from ..store.storage import Storage

__all__ = ["STATUSES", "FileResult", "IngestReport", "Ingestor", "ProgressCallback", "sha256"]

ProgressCallback = Callable[[FileResult], None]
# A document of at most this many chunks is written in one transaction (the full-text index
# makes larger transactions slow; see Ingestor._write_new).
SMALL_DOCUMENT_CHUNKS = 10

# A modification time this recent (or in the future) is not recorded: a file changed again
# within the file system's clock tick, at the same size, would look unchanged to a sync.
RACY_SECONDS = 2.0
# How often a write whose plan went stale (another writer changed the previous version
# meanwhile) is planned again before it gives up moving chunks.
STALE_RETRIES = 3


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def recorded_mtime(info: os.stat_result) -> int | None:
    """The modification time to remember for a file (``None`` when too recent to trust)."""
    if info.st_mtime_ns > time.time_ns() - int(RACY_SECONDS * 1e9):
        return None
    return int(info.st_mtime_ns)


class _Stale(Exception):
    """The previous version a write planned to take chunks from changed meanwhile."""


@dataclass
class _ChunkPlan:
    """How a new document gets its chunks: chunks of the source's previous version moved
    over as they are (``moves``), and rows to insert with vectors that were stored already
    or embedded now."""

    moves: list[Move] = field(default_factory=list)
    old: Any = None  # the previous version the moves come from
    old_generation: int = 0
    insert: list[Any] = field(default_factory=list)  # the chunks to insert
    vectors: Any = None  # their vectors (None without vectors)
    embedded: int = 0  # texts the model embedded for this plan


@dataclass
class _Source:
    """One thing to ingest: a file on disk or bytes in memory."""

    key: str
    data: bytes | None = None
    path: Path | None = None
    mime_type: str | None = None
    mtime_ns: int | None = None


class Ingestor:
    """Runs the pipeline for one store, model and configuration.

    ``embedding`` may be ``None`` only for stores without vectors (``settings.vectors``
    false): documents only, or chunks without embeddings.
    """

    def __init__(self, storage: Storage, embedding: EmbeddingRunner | None,
                 settings: Settings) -> None:
        if settings.vectors and embedding is None:
            raise ConfigurationError("an embedding model is needed to store vectors "
                                     "(or set embed=False)")
        self.storage = storage
        self.store = storage.store
        self.embedding = embedding if settings.vectors else None
        self.settings = settings
        self._extract_slots = asyncio.Semaphore(settings.extract_concurrency)
        self._touched_notebooks: set[RecordID] = set()
        self.chunks_embedded = 0  # texts sent to the model, for reports and benchmarks
        self._window = (token_window(self.embedding.embedder)
                        if self.embedding is not None and settings.fit_chunks
                        and settings.chunked else None)

    async def delete_document(self, doc: RecordID) -> None:
        """Delete a document, whatever its sources: its chunks, vector copies, notebook
        edges, jobs and source records go with it, in one transaction."""
        storage = self.storage
        if not await storage.documents.exists(doc):
            raise NotFoundError(f"no document {id_text(doc)!r}")
        async with self.store.write_lock:
            await self.store.transaction(
                storage.jobs.delete_for_target_statement(doc),
                storage.notebooks.unlink_all_statement(doc),
                storage.documents.delete_statement(doc))
        storage.chunks.written()  # deletions can make a segment due for a merge

    async def ingest_paths(self, paths: Iterable[str | Path], *, glob: str = "**/*",
                           force: bool = False, retry_failed: bool = False,
                           on_result: ProgressCallback | None = None,
                           on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        started = time.perf_counter()
        files, unusable = discover(paths, glob, exclude=own_folders(self.settings))
        if on_discovered:
            on_discovered(len(files) + len(unusable))
        report = IngestReport(results=[FileResult(p.source, p.status, reason=p.reason)
                                       for p in unusable])
        for r in report.results:
            if on_result:
                on_result(r)
        sources = [_Source(key=str(p), path=p) for p in files]
        report.results.extend(await self._run(sources, force, retry_failed, on_result))
        report.index_rebuilt = await self.rebuild_if_due()
        report.seconds = time.perf_counter() - started
        return report

    async def ingest_files(self, files: Iterable[tuple[str, str | Path]], *,
                           force: bool = False, retry_failed: bool = False,
                           on_result: ProgressCallback | None = None) -> IngestReport:
        """Ingest files on disk under source names of the caller's choosing, given as
        ``(source, path)`` (for example an upload kept in a server's folder, named
        ``upload://report.pdf``). Source names must be unique within a call."""
        started = time.perf_counter()
        sources: list[_Source] = []
        seen: set[str] = set()
        for key, path in files:
            if key in seen:
                raise ConfigurationError(f"source {key!r} appears twice in one batch")
            seen.add(key)
            # resolved now, as a path the caller named; read later without following links
            sources.append(_Source(key=key, path=Path(path).expanduser().resolve()))
        report = IngestReport(results=await self._run(sources, force, retry_failed, on_result))
        report.index_rebuilt = await self.rebuild_if_due()
        report.seconds = time.perf_counter() - started
        return report

    async def ingest_found(self, paths: Sequence[Path], *,
                           on_result: ProgressCallback | None = None) -> list[FileResult]:
        """Ingest files found already (absolute paths), without checking for an HNSW
        rebuild (the caller does, once: :meth:`rebuild_if_due`)."""
        return await self._run([_Source(key=str(p), path=p) for p in paths], False, False,
                               on_result)

    async def ingest_bytes(self, data: bytes, mime_type: str, source: str, *,
                           force: bool = False, retry_failed: bool = False) -> FileResult:
        (result,) = await self._run(
            [_Source(key=source, data=data, mime_type=mime_type)], force, retry_failed, None)
        await self.rebuild_if_due()
        return result

    async def ingest_many(self, items: Iterable[tuple[str, bytes, str]], *,
                          force: bool = False, retry_failed: bool = False,
                          on_result: ProgressCallback | None = None,
                          group_size: int = 256) -> IngestReport:
        """Ingest many in-memory documents, given as ``(source, data, mime_type)``.

        The same pipeline as :meth:`ingest_bytes` (extract, chunk, embed, write, each
        document all-or-nothing), run concurrently over groups of ``group_size`` items so
        memory stays bounded, and with one check for an HNSW rebuild at the end instead of
        one per document. Source names must be unique within a call.
        """
        started = time.perf_counter()
        report = IngestReport()
        seen: set[str] = set()
        group: list[_Source] = []
        for source, data, mime_type in items:
            if source in seen:
                raise ConfigurationError(f"source {source!r} appears twice in one batch")
            seen.add(source)
            group.append(_Source(key=source, data=data, mime_type=mime_type))
            if len(group) >= group_size:
                report.results.extend(await self._run(group, force, retry_failed, on_result))
                group = []
        if group:
            report.results.extend(await self._run(group, force, retry_failed, on_result))
        report.index_rebuilt = await self.rebuild_if_due()
        report.seconds = time.perf_counter() - started
        return report

    async def delete_source(self, source: str) -> bool:
        """Forget a source; its document goes when no other source shares it."""
        async with self.store.write_lock:
            return await self.storage.documents.forget_source(source)

    async def rebuild_if_due(self) -> bool:
        """Build the HNSW graphs in which enough new vectors wait (the shared one, and the
        notebooks' that a changed source carried vectors into)."""
        rebuilt = await self.storage.chunks.rebuild_if_due()
        for notebook in sorted(self._touched_notebooks, key=str):
            await self.storage.chunks.rebuild_notebook_if_due(notebook)
        self._touched_notebooks.clear()
        return rebuilt

    async def _run(self, sources: Sequence[_Source], force: bool, retry_failed: bool,
                   on_result: ProgressCallback | None) -> list[FileResult]:
        previous = await self.storage.documents.file_records([s.key for s in sources])

        # Files in flight (read, extracted, waiting for the model or the writer) are bounded,
        # so that extraction running ahead of embedding cannot hold a whole corpus in memory.
        in_flight = asyncio.Semaphore(self.settings.extract_concurrency * 4)

        async def one(src: _Source) -> FileResult:
            async with in_flight:
                t0 = time.perf_counter()
                result = await self._ingest_one(src, previous.get(src.key), force,
                                                retry_failed)
                result.seconds = time.perf_counter() - t0
            if on_result:
                on_result(result)
            return result

        return await all_or_cancel([one(s) for s in sources])

    async def _ingest_one(self, src: _Source, previous: dict[str, Any] | None, force: bool,
                          retry_failed: bool) -> FileResult:
        limit = self.settings.max_file_bytes
        async with self._extract_slots:
            if src.data is None:
                assert src.path is not None
                try:
                    # the status is taken before reading: a change made while it is read
                    # gives a newer time
                    info, src.data = await asyncio.to_thread(read_found, src.path, limit)
                except OSError as exc:
                    return FileResult(src.key, "failed", reason=f"cannot read: {os_reason(exc)}")
                if src.data is None:
                    return FileResult(src.key, "failed", reason=_too_large(info.st_size, limit))
                src.mtime_ns = recorded_mtime(info)
            if len(src.data) > limit:
                return FileResult(src.key, "failed", reason=_too_large(len(src.data), limit))
            file_hash = sha256(src.data)
            if previous and previous["file_hash"] == file_hash and not force:
                failed_before = previous["status"] in ("failed", "empty")
                if not (failed_before and retry_failed):
                    if src.mtime_ns is not None and (
                            previous.get("mtime_ns") != src.mtime_ns
                            or previous.get("size") != len(src.data)):
                        await self.storage.documents.touch_file(
                            src.key, file_hash, len(src.data), src.mtime_ns)
                    doc = previous.get("document")
                    return FileResult(src.key, "unchanged",
                                      document_id=id_text(doc) if doc else None,
                                      reason=previous.get("error") if failed_before else None,
                                      last_status=previous["status"])
            if src.path is not None:
                outcome = await extract_file(src.path, self.settings, source=src.key,
                                             data=src.data)
            else:
                outcome = await extract_bytes(src.data, src.mime_type or "", src.key,
                                              self.settings)
        size = len(src.data)
        src.data = None  # free the bytes before embedding
        if isinstance(outcome, Extracted) and self._window is not None:
            outcome.chunks = await asyncio.to_thread(self._fit, outcome)
        most = self.settings.max_chunks_per_document
        if isinstance(outcome, Extracted) and len(outcome.chunks) > most:
            outcome = ExtractFailure(
                src.key, f"the document has {len(outcome.chunks)} chunks; the limit is {most}"
                " (SURREALDOCS_MAX_CHUNKS_PER_DOCUMENT)")
        if isinstance(outcome, ExtractFailure):
            async with self.store.write_lock:
                await self.storage.documents.record_failure(
                    src.key, file_hash, size, outcome.kind, outcome.reason, src.mtime_ns)
            return FileResult(src.key, outcome.kind, reason=outcome.reason)
        return await self._store_document(src.key, file_hash, size, src.mtime_ns, outcome,
                                          previous)

    def _fit(self, doc: Extracted) -> list[Chunk]:
        assert self._window is not None
        most, count = self._window
        chunks = fit_to_window(doc.content, doc.chunks, most, count,
                               self.settings.chunk_overlap)
        if chunks is not doc.chunks:
            assign_pages(chunks, doc.page_starts)
            assign_context(doc.content, chunks, doc.headings)
        return chunks

    async def _store_document(self, key: str, file_hash: str, size: int,
                              mtime_ns: int | None, doc: Extracted,
                              previous: dict[str, Any] | None) -> FileResult:
        documents = self.storage.documents
        content_hash = sha256(doc.content)
        doc_id = documents.document_id(content_hash)
        was_there = previous is not None and previous.get("status") in ("ingested", "duplicate")
        plan: _ChunkPlan | None = None
        known: dict[str, Any] = {}  # vectors by text hash, kept when the plan is made again
        stale = embedded = 0
        while True:
            state = await documents.state(doc_id)
            if state is not None and state.complete:
                async with self.store.write_lock:
                    added = await documents.add_source(key, file_hash, size, doc.mime_type,
                                                       doc_id, mtime_ns)
                if not added:
                    continue  # deleted meanwhile: look again
                same_doc = previous is not None and str(previous.get("document")) == str(doc_id)
                return FileResult(key, "unchanged" if same_doc else "duplicate",
                                  document_id=id_text(doc_id))
            if state is not None:  # another writer's, or abandoned by a dead one
                await self._wait_or_take_over(doc_id, state.idle_seconds)
                continue
            if plan is None:
                plan = await self._plan(key, doc, doc_id, known,
                                        moves=stale < STALE_RETRIES)
                embedded += plan.embedded
            async with self.store.write_lock:
                if plan.moves and await documents.sole_source_document(key) != \
                        (plan.old, plan.old_generation):
                    plan, stale = None, stale + 1  # the previous version changed meanwhile
                    continue
                try:
                    await self._write_new(key, file_hash, size, mtime_ns, doc, doc_id,
                                          content_hash, plan, previous)
                except DocumentExistsError:  # written meanwhile: look again
                    continue
                except _Stale:  # another process changed the previous version
                    plan, stale = None, stale + 1
                    continue
            return FileResult(key, "updated" if was_there else "ingested",
                              document_id=id_text(doc_id), chunks=len(doc.chunks),
                              embedded=embedded)

    async def _plan(self, key: str, doc: Extracted, doc_id: RecordID,
                    known: dict[str, Any], *, moves: bool = True) -> _ChunkPlan:
        """Which chunks of a new document are embedded, and which come from the store.

        A chunk whose text the source's previous version has (when that version goes away
        with this write, because the source was its only one) is moved over: same row, same
        vector, a new place. Any other chunk whose text some stored chunk has takes that
        vector; the rest are embedded, each distinct text once.
        """
        plan = _ChunkPlan()
        chunks = doc.chunks
        if not self.settings.chunked:
            plan.insert = list(chunks)
            plan.vectors = await self._embed([c.embedding_input for c in chunks])
            plan.embedded = len(chunks) if self.embedding else 0
            return plan
        storage = self.storage
        hashes = [sha256(c.embedding_input) for c in chunks]  # as the store's text_hash
        hash_of = {id(c): h for c, h in zip(chunks, hashes)}
        moved: set[int] = set()
        sole = await storage.documents.sole_source_document(key) if moves else None
        if sole is not None and sole[0] != doc_id:
            plan.old, plan.old_generation = sole
            stored: defaultdict[str, deque[RecordID]] = defaultdict(deque)
            for row in await storage.chunks.text_hashes(plan.old, plan.old_generation):
                if row.get("text_hash"):
                    stored[row["text_hash"]].append(row["id"])
            for chunk, text_hash in zip(chunks, hashes):
                if stored[text_hash]:
                    plan.moves.append(Move(stored[text_hash].popleft(), chunk))
                    moved.add(chunk.index)
        plan.insert = [c for c in chunks if c.index not in moved]
        if self.embedding is None:
            return plan
        wanted = {hash_of[id(c)]: c.embedding_input for c in plan.insert}
        missing = [h for h in wanted if h not in known]
        if missing:
            known.update(await storage.chunks.vectors_by_hash(missing))
        missing = [h for h in wanted if h not in known]
        if missing:
            known.update(zip(missing, await self._embed([wanted[h] for h in missing])))
            plan.embedded = len(missing)
        plan.vectors = [known[hash_of[id(c)]] for c in plan.insert]
        return plan

    async def _wait_or_take_over(self, doc_id: RecordID, idle_seconds: int) -> None:
        """A document of the same text is being written. In this process, the writer holds
        the write lock: once we hold it, what is still incomplete is debris. On a server,
        another process may be writing it: wait, and take over once it has made no progress
        for the write lease (its writer died)."""
        documents = self.storage.documents
        if self.store.owned and self.store.embedded:
            async with self.store.write_lock:
                await documents.discard_incomplete(doc_id)
        elif idle_seconds >= self.settings.write_lease:
            await documents.discard_incomplete(doc_id, int(self.settings.write_lease))
        else:
            await asyncio.sleep(min(1.0, self.settings.write_lease / 10))

    async def _embed(self, texts: list[str]) -> Any:
        """The texts' vectors (``None`` without vectors)."""
        if self.embedding is None:
            return None
        self.chunks_embedded += len(texts)
        return await self.embedding.documents(texts)

    async def _write_new(self, key: str, file_hash: str, size: int, mtime_ns: int | None,
                         doc: Extracted, doc_id: RecordID, content_hash: str,
                         plan: _ChunkPlan, previous: dict[str, Any] | None) -> None:
        """Write a document so that it lands completely or not at all.

        A small document is written in one transaction. A large one cannot be: the engine's
        full-text index makes a transaction superlinear in its size (1,000 chunks: 62 s and
        10.6 GB, against 2.3 s as ten 100-row statements). So: (1) create the document
        marked incomplete, (2) insert its new chunks in batches, (3) in one small
        transaction move the chunks it takes from the source's previous version (their
        text, vector and index entries stay as they are), mark it complete and point the
        source at it. A failure deletes the document (its chunks cascade); a crash leaves an
        incomplete document that the next open deletes (``recover``), and search never shows
        chunks of incomplete documents. Until the write commits, the previous version is
        whole and searchable. Raises :class:`DocumentExistsError` when another writer
        created the document first, and ``_Stale`` when one changed the previous version.
        """
        storage = self.storage
        rows = storage.chunks.rows(doc_id, plan.insert, plan.vectors)
        fields = {
            "sources": [key], "content": doc.content,
            "mime_type": doc.mime_type, "content_hash": content_hash, "title": doc.title,
            "authors": doc.authors, "created_at": doc.created_at,
            "metadata": doc.metadata, "detected_languages": doc.detected_languages,
            "keywords": doc.keywords,
            "quality_score": doc.quality_score, "page_count": doc.page_count,
            "page_starts": doc.page_starts, "chunk_count": len(doc.chunks),
            "headings": [[level, text] for level, text in doc.headings] or None,
            "embedding_model": self.embedding.name if self.embedding else None,
        }
        # a new version of a source keeps the old one's notebooks and topics
        notebooks: list[Any] = []
        topics: list[str] = []
        old = (previous or {}).get("document_membership") or {}
        if old.get("notebooks") or old.get("topics"):
            notebooks, topics = await storage.documents.membership_of_source(key)
        moving = [storage.documents.sole_source_check_statement(key, plan.old),
                  storage.chunks.move_statement(doc_id, plan.old, plan.old_generation,
                                                plan.moves)] if plan.moves else []

        def completing(inserted: Sequence[RecordID]) -> list[Statement]:
            return [*moving,
                    storage.documents.complete_statement(key, file_hash, size, doc.mime_type,
                                                         doc_id, mtime_ns),
                    storage.chunks.pending_statement(len(rows)),
                    *self._inherit(doc_id, notebooks, topics,
                                   plan.old if plan.moves else None, inserted)]

        try:
            written = False
            if len(rows) <= SMALL_DOCUMENT_CHUNKS:
                try:
                    await storage.documents.write_whole(
                        doc_id, fields, [storage.chunks.ids_free_statement(rows),
                                         *storage.chunks.insert_statements(rows),
                                         *completing([row["id"] for row in rows])])
                    written = True
                except StoreError as exc:  # an id taken by a moved chunk: the long way
                    if IDS_TAKEN_MARK not in str(exc):
                        raise
            if not written:
                await storage.documents.create_incomplete(doc_id, fields)
                try:
                    inserted = await storage.chunks.insert(
                        rows, heartbeat=storage.documents.touch_statement(doc_id))
                    await self.store.transaction(*completing(inserted))
                except BaseException:
                    await asyncio.shield(storage.documents.discard_incomplete(doc_id))
                    raise
        except StoreError as exc:
            if STALE_MARK in str(exc):
                raise _Stale(str(exc)) from exc
            raise
        storage.chunks.written()
        self._touched_notebooks.update(notebooks)

    def _inherit(self, doc: RecordID, notebooks: list[Any], topics: list[str],
                 moved_from: RecordID | None = None,
                 inserted: Sequence[RecordID] = ()) -> list[Statement]:
        """A new version of a source keeps the old version's notebooks (edges, chunk
        membership, vector copies) and topics."""
        if not notebooks and not topics:
            return []
        statements = [self.storage.documents.inherit_statement(doc, notebooks, topics)]
        if notebooks:
            statements.append(self.storage.notebooks.inherit_statement(doc, notebooks))
            statements += self.storage.chunks.inherit_statements(
                doc, notebooks, moved_from=moved_from, inserted=inserted)
        return statements


def _too_large(size: int, limit: int) -> str:
    return (f"the file has {_size(size)}; the limit is {_size(limit)}"
            " (SURREALDOCS_MAX_FILE_BYTES)")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
