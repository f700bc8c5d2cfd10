"""The ingest pipeline: discover → skip unchanged → extract → dedup → embed → write.

- The SHA-256 of a source's raw bytes is compared with its last ingest *before*
  extraction, so an unchanged file costs one read and one hash; a source that failed or gave
  no text is remembered the same way and not retried unless asked.
- The SHA-256 of the extracted text is the document's id: identical content from several
  sources is stored once, and each source points at it.
- A document, its chunks and its source land completely or not at all, even across a crash
  (:mod:`surrealdocs.core.document_writer` writes them). The SurrealQL is in the owners of
  the tables (:mod:`surrealdocs.store.documents`, :mod:`surrealdocs.store.chunks`,
  :mod:`surrealdocs.store.notebooks`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..embed import EmbeddingRunner, token_window
from ..errors import ConfigurationError, NotFoundError
from ..parts.chunk import Chunk, Cutting, cut
from ..parts.digest import sha256
from ..parts.discover import discover, os_reason, read_found
from ..parts.extract import Extracted, ExtractFailure, extract_bytes, extract_file
from ..parts.results import STATUSES, FileResult, IngestReport, id_text
from ..parts.tasks import all_or_cancel
from ..store.folders import own_folders
from ..store.storage import Storage
from .document_writer import DocumentWriter

__all__ = ["STATUSES", "FileResult", "IngestReport", "Ingestor", "ProgressCallback", "sha256"]

# Called with each source's result as it is done. A callback with a ``started(source)``
# method is also told when each source starts (a progress display shows what is in flight),
# one with a ``step(source, name)`` method each long step of a source as it begins
# (extracting, embedding N chunks, writing), and, with source "", the vector graph's build.
ProgressCallback = Callable[[FileResult], None]

# A modification time this recent (or in the future) is not recorded: a file changed again
# within the file system's clock tick, at the same size, would look unchanged to a sync.
RACY_SECONDS = 2.0


def recorded_mtime(info: os.stat_result) -> int | None:
    """The modification time to remember for a file (``None`` when too recent to trust)."""
    if info.st_mtime_ns > time.time_ns() - int(RACY_SECONDS * 1e9):
        return None
    return int(info.st_mtime_ns)


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
        self.writer = DocumentWriter(storage, self.embedding, settings)
        self._window = (token_window(self.embedding.embedder)
                        if self.embedding is not None and settings.fit_chunks else None)

    @property
    def cutting(self) -> Cutting:
        """How this store cuts text (:func:`surrealdocs.parts.chunk.cut`)."""
        settings = self.settings
        return Cutting(settings.chunk_size, settings.chunk_overlap, settings.heading_context,
                       self._window)

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
        report.index_rebuilt = await self.rebuild_if_due(on_result)
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
        report.index_rebuilt = await self.rebuild_if_due(on_result)
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
        report.index_rebuilt = await self.rebuild_if_due(on_result)
        report.seconds = time.perf_counter() - started
        return report

    async def delete_source(self, source: str) -> bool:
        """Forget a source; its document goes when no other source shares it."""
        async with self.store.write_lock:
            deleted = await self.storage.documents.forget_source(source)
        self.storage.chunks.written()  # deletions can make a segment due for a merge
        return deleted

    async def rebuild_index(self, *, text: bool = True, vectors: bool = True,
                            progress: Callable[[int, int], None] | None = None) -> None:
        """Rebuild the text index from the chunks, and the HNSW graph over every vector."""
        chunks = self.storage.chunks
        if text and chunks.text is not None:
            await chunks.text.rebuild(progress)
        if vectors and self.settings.vectors:
            await chunks.graphs.rebuild_if_due(force=True)

    async def rebuild_if_due(self, on_result: ProgressCallback | None = None) -> bool:
        """Build the HNSW graphs in which enough new vectors wait (the shared one, and the
        notebooks' that a changed source carried vectors into); a progress callback with a
        ``step`` method is told when the shared graph's build begins."""
        stepped = getattr(on_result, "step", None)
        rebuilt = await self.storage.chunks.graphs.rebuild_if_due(
            on_build=(lambda: stepped("", "building the vector graph"))
            if stepped is not None else None)
        for notebook in sorted(self.writer.touched_notebooks, key=str):
            await self.storage.chunks.graphs.rebuild_notebook_if_due(notebook)
        self.writer.touched_notebooks.clear()
        return rebuilt

    async def _run(self, sources: Sequence[_Source], force: bool, retry_failed: bool,
                   on_result: ProgressCallback | None) -> list[FileResult]:
        previous = await self.storage.files.of([s.key for s in sources])

        # Files in flight (read, extracted, waiting for the model or the writer) are bounded,
        # so that extraction running ahead of embedding cannot hold a whole corpus in memory.
        in_flight = asyncio.Semaphore(self.settings.extract_concurrency * 4)

        started = getattr(on_result, "started", None)
        stepped = getattr(on_result, "step", None)

        async def one(src: _Source) -> FileResult:
            async with in_flight:
                if started is not None:
                    started(src.key)
                t0 = time.perf_counter()
                result = await self._ingest_one(
                    src, previous.get(src.key), force, retry_failed,
                    (lambda name: stepped(src.key, name)) if stepped is not None else None)
                result.seconds = time.perf_counter() - t0
            if on_result:
                on_result(result)
            return result

        # The largest files start first: one started last would run alone at the end while
        # the other core idles (longest-processing-time-first). Results keep the given order.
        sizes = await asyncio.to_thread(_sizes, sources)
        order = sorted(range(len(sources)), key=lambda i: -sizes[i])
        done = dict(zip(order, await all_or_cancel([one(sources[i]) for i in order])))
        return [done[i] for i in range(len(sources))]

    async def _ingest_one(self, src: _Source, previous: dict[str, Any] | None, force: bool,
                          retry_failed: bool,
                          on_step: Callable[[str], None] | None = None) -> FileResult:
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
                        await self.storage.files.touch(
                            src.key, file_hash, len(src.data), src.mtime_ns)
                    doc = previous.get("document")
                    if previous["status"] == "failed":  # still failed: said on every run
                        return FileResult(
                            src.key, "failed", reason=f"{previous.get('error') or 'failed'}"
                            " (unchanged since it failed; --retry-failed tries again)",
                            last_status="failed")
                    return FileResult(src.key, "unchanged",
                                      document_id=id_text(doc) if doc else None,
                                      reason=previous.get("error") if failed_before else None,
                                      last_status=previous["status"])
            if on_step is not None:
                on_step("extracting")
            if src.path is not None:
                outcome = await extract_file(src.path, self.settings, source=src.key,
                                             data=src.data)
            else:
                outcome = await extract_bytes(src.data, src.mime_type or "", src.key,
                                              self.settings)
        size = len(src.data)
        src.data = None  # free the bytes before embedding
        if isinstance(outcome, Extracted) and self.cutting.window is not None:
            outcome.chunks = await asyncio.to_thread(
                cut, outcome.content, self.cutting, chunks=outcome.chunks,
                page_starts=outcome.page_starts, headings=outcome.headings)
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
        return await self.writer.store_document(src.key, file_hash, size, src.mtime_ns,
                                                outcome, previous, on_step)

    async def chunks_of(self, content: str, page_starts: Any = None,
                        headings: Any = None) -> list[Chunk]:
        """A stored text cut as an ingest cuts a document's (a notebook source's text, to
        vectorize): chunked, with pages and heading context, fitted to the model's window,
        and no more than ``max_chunks_per_document``."""
        settings = self.settings
        chunks = await asyncio.to_thread(cut, content, self.cutting, page_starts=page_starts,
                                         headings=headings or ())
        if len(chunks) > settings.max_chunks_per_document:
            raise ConfigurationError(
                f"the text has {len(chunks)} chunks; the limit is"
                f" {settings.max_chunks_per_document} (SURREALDOCS_MAX_CHUNKS_PER_DOCUMENT)")
        return chunks


def _sizes(sources: Sequence[_Source]) -> list[int]:
    """Each source's size in bytes, as far as it is known before reading (0 if not)."""
    sizes = []
    for src in sources:
        if src.data is not None:
            sizes.append(len(src.data))
            continue
        try:
            sizes.append(os.stat(src.path).st_size if src.path is not None else 0)
        except OSError:
            sizes.append(0)
    return sizes


def _too_large(size: int, limit: int) -> str:
    return (f"the file has {_size(size)}; the limit is {_size(limit)}"
            " (SURREALDOCS_MAX_FILE_BYTES)")


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
