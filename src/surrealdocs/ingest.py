"""The ingest pipeline: discover → skip unchanged → extract → dedup → embed → write.

- The SHA-256 of a file's raw bytes is compared with the last ingest of the same source
  *before* extraction, so an unchanged file costs one read and one hash.
- The SHA-256 of the extracted text is the document's id: identical content from several
  sources is stored once, and each source points at it.
- A document, its chunks and its source record are written in one transaction: a failure or
  a crash leaves all of it or none of it, and a re-run converges.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from surrealdb import RecordID

from .chunk import Chunk
from .config import Settings
from .discover import discover
from .embed import Embedder
from .errors import ConfigurationError, DimensionMismatchError
from .extract import Extracted, ExtractFailure, extract_bytes, extract_file
from .store.connection import Store
from .store.names import Names

CHUNK_ROWS_PER_STATEMENT = 100  # larger INSERTs make the full-text index superlinear

STATUSES = ("ingested", "updated", "unchanged", "duplicate", "empty", "failed", "skipped")


@dataclass
class FileResult:
    """What happened to one source. ``status`` is one of :data:`STATUSES`."""

    source: str
    status: str
    document_id: str | None = None
    chunks: int = 0
    reason: str | None = None
    seconds: float = 0.0


@dataclass
class IngestReport:
    results: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    index_rebuilt: bool = False

    @property
    def counts(self) -> dict[str, int]:
        counter = Counter(r.status for r in self.results)
        return {s: counter.get(s, 0) for s in STATUSES}

    @property
    def failures(self) -> list[FileResult]:
        return [r for r in self.results if r.status in ("failed", "empty")]

    @property
    def chunks_written(self) -> int:
        return sum(r.chunks for r in self.results if r.status in ("ingested", "updated"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts,
            "chunks_written": self.chunks_written,
            "seconds": round(self.seconds, 3),
            "index_rebuilt": self.index_rebuilt,
            "results": [r.__dict__ for r in self.results],
        }


ProgressCallback = Callable[[FileResult], None]


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


@dataclass
class _Source:
    """One thing to ingest: a file on disk or bytes in memory."""

    key: str
    data: bytes | None = None
    path: Path | None = None
    mime_type: str | None = None


class Ingestor:
    """Runs the pipeline for one store, model and configuration.

    ``embedder`` may be ``None`` only for stores without vectors (``settings.vectors``
    false): documents only, or chunks without embeddings.
    """

    def __init__(self, store: Store, embedder: Embedder | None, settings: Settings) -> None:
        if settings.vectors and embedder is None:
            raise ConfigurationError("an embedding model is needed to store vectors "
                                     "(or set embed=False)")
        self.store = store
        self.embedder = embedder if settings.vectors else None
        self.settings = settings
        self.names = store.names
        self._write_lock = asyncio.Lock()
        self._extract_slots = asyncio.Semaphore(settings.extract_concurrency)
        self._embed_lock = asyncio.Lock()

    async def ingest_paths(self, paths: Iterable[str | Path], *, glob: str = "**/*",
                           force: bool = False, retry_failed: bool = False,
                           on_result: ProgressCallback | None = None,
                           on_discovered: Callable[[int], None] | None = None) -> IngestReport:
        started = time.perf_counter()
        files, missing = discover(paths, glob)
        if on_discovered:
            on_discovered(len(files) + len(missing))
        report = IngestReport(results=[FileResult(p.source, p.status, reason=p.reason)
                                      for p in missing])
        for r in report.results:
            if on_result:
                on_result(r)
        sources = [_Source(key=str(p), path=p) for p in files]
        report.results.extend(await self._run(sources, force, retry_failed, on_result))
        report.index_rebuilt = await self.maybe_rebuild_index()
        report.seconds = time.perf_counter() - started
        return report

    async def ingest_bytes(self, data: bytes, mime_type: str, source: str, *,
                           force: bool = False) -> FileResult:
        (result,) = await self._run(
            [_Source(key=source, data=data, mime_type=mime_type)], force, True, None)
        await self.maybe_rebuild_index()
        return result

    async def ingest_many(self, items: Iterable[tuple[str, bytes, str]], *,
                          force: bool = False, on_result: ProgressCallback | None = None,
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
                report.results.extend(await self._run(group, force, True, on_result))
                group = []
        if group:
            report.results.extend(await self._run(group, force, True, on_result))
        report.index_rebuilt = await self.maybe_rebuild_index()
        report.seconds = time.perf_counter() - started
        return report

    async def _run(self, sources: Sequence[_Source], force: bool, retry_failed: bool,
                   on_result: ProgressCallback | None) -> list[FileResult]:
        await recover(self.store, 0 if self.store.embedded else 3600)
        previous = await self._previous_hashes([s.key for s in sources])

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

        return list(await asyncio.gather(*(one(s) for s in sources)))

    def _file_id(self, key: str) -> RecordID:
        return RecordID(self.names.files, key)

    async def _previous_hashes(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), 500):
            ids = [RecordID(self.names.files, k) for k in keys[start:start + 500]]
            (rows,) = await self.store.query(
                f"SELECT path, file_hash, status, error, document FROM {self.names.files} "
                "WHERE id IN $ids;", {"ids": ids})
            for row in rows or []:
                out[row["path"]] = row
        return out

    async def _ingest_one(self, src: _Source, previous: dict[str, Any] | None, force: bool,
                          retry_failed: bool) -> FileResult:
        async with self._extract_slots:
            if src.data is None:
                assert src.path is not None
                try:
                    src.data = await asyncio.to_thread(src.path.read_bytes)
                except OSError as exc:
                    return FileResult(src.key, "failed", reason=f"cannot read: {exc.strerror}")
            file_hash = sha256(src.data)
            if previous and previous["file_hash"] == file_hash and not force:
                failed_before = previous["status"] in ("failed", "empty")
                if not (failed_before and retry_failed):
                    doc = previous.get("document")
                    return FileResult(src.key, "unchanged",
                                      document_id=str(doc) if doc else None,
                                      reason=previous.get("error") if failed_before else None)
            if src.path is not None:
                outcome = await extract_file(src.path, self.settings, source=src.key)
            else:
                outcome = await extract_bytes(src.data, src.mime_type or "", src.key,
                                              self.settings)
        size = len(src.data)
        src.data = None  # free the bytes before embedding
        if isinstance(outcome, ExtractFailure):
            await self._record_failure(src.key, file_hash, size, outcome)
            return FileResult(src.key, outcome.kind, reason=outcome.reason)
        return await self._store_document(src.key, file_hash, size, outcome, previous)

    async def _record_failure(self, key: str, file_hash: str, size: int,
                              failure: ExtractFailure) -> None:
        async with self._write_lock:
            await self.store.query(
                "BEGIN;"
                " LET $old = (SELECT VALUE document FROM ONLY $file);"
                " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
                "   status: $status, error: $error, document: NONE };"
                + _DETACH_OLD + " COMMIT;",
                {"file": self._file_id(key), "path": key, "hash": file_hash, "size": size,
                 "status": failure.kind, "error": failure.reason},
            )

    async def _store_document(self, key: str, file_hash: str, size: int, doc: Extracted,
                              previous: dict[str, Any] | None) -> FileResult:
        content_hash = sha256(doc.content)
        doc_id = RecordID(self.names.documents, content_hash)
        was_there = previous is not None and previous.get("status") in ("ingested", "duplicate")
        if not await self._document_exists(doc_id):
            vectors = await self._embed(doc)
            async with self._write_lock:
                if not await self._document_exists(doc_id):
                    await self._write_new(key, file_hash, size, doc, doc_id, content_hash,
                                          vectors)
                    return FileResult(key, "updated" if was_there else "ingested",
                                      document_id=str(doc_id), chunks=len(doc.chunks))
        async with self._write_lock:
            await self.store.query(
                "BEGIN;"
                " LET $old = (SELECT VALUE document FROM ONLY $file);"
                " UPDATE $doc SET sources = array::union(sources, [$path]);"
                " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
                "   status: 'duplicate', document: $doc, mime_type: $mime };"
                + _DETACH_OLD + " COMMIT;",
                {"file": self._file_id(key), "doc": doc_id, "path": key, "hash": file_hash,
                 "size": size, "mime": doc.mime_type},
            )
        same_doc = previous is not None and str(previous.get("document")) == str(doc_id)
        return FileResult(key, "unchanged" if same_doc else "duplicate",
                          document_id=str(doc_id))

    async def _embed(self, doc: Extracted) -> Any:
        """The chunks' vectors, checked against the model's dimension (``None`` without
        vectors)."""
        if self.embedder is None:
            return None
        async with self._embed_lock:  # one model call at a time; it uses every core
            vectors = await asyncio.to_thread(
                self.embedder.embed_documents, [c.content for c in doc.chunks])
        shape = getattr(vectors, "shape", None)
        expected = (len(doc.chunks), self.embedder.dimension)
        if shape is None or tuple(shape) != expected:
            got = tuple(shape) if shape is not None else type(vectors).__name__
            raise DimensionMismatchError(
                f"embedding model {self.embedder.name!r} returned vectors of shape {got} for "
                f"{len(doc.chunks)} chunks, expected {expected}: its output does not match "
                f"its declared dimension {self.embedder.dimension}")
        return vectors

    async def _document_exists(self, doc_id: RecordID) -> bool:
        (row,) = await self.store.query("SELECT VALUE id FROM ONLY $doc;", {"doc": doc_id})
        return row is not None

    async def _write_new(self, key: str, file_hash: str, size: int, doc: Extracted,
                         doc_id: RecordID, content_hash: str, vectors: Any) -> None:
        """Write a document in three steps that together are all-or-nothing.

        One transaction would be simplest, but the engine's full-text index makes a
        transaction superlinear in its size (1,000 chunks: 62 s and 10.6 GB, against 2.3 s
        as ten 100-row statements). So: (1) create the document marked incomplete, (2)
        insert its chunks 100 rows per statement, (3) in one small transaction mark it
        complete and point the source at it. A failure deletes the document (its chunks
        cascade); a crash leaves an incomplete document that :func:`recover` deletes, and
        search never shows chunks of incomplete documents.
        """
        rows = chunk_rows(self.names, doc, doc_id, content_hash, vectors)
        # No `source` yet: it is UNIQUE, and the source may still point at its previous
        # document until _finish_document detaches it in the same transaction.
        document = {
            "sources": [key], "content": doc.content,
            "mime_type": doc.mime_type, "content_hash": content_hash, "title": doc.title,
            "authors": doc.authors, "created_at": doc.created_at,
            "metadata": doc.metadata, "detected_languages": doc.detected_languages,
            "keywords": doc.keywords,
            "quality_score": doc.quality_score, "page_count": doc.page_count,
            "page_starts": doc.page_starts, "chunk_count": len(rows),
            "embedding_model": self.embedder.name if self.embedder else None,
            "complete": False,
        }
        await self.store.query(
            "CREATE $doc CONTENT $document RETURN NONE;",
            {"doc": doc_id, "document": {k: v for k, v in document.items() if v is not None}},
        )
        try:
            await self._write_chunks(rows)
            await self._finish_document(key, file_hash, size, doc, doc_id, len(rows))
        except BaseException:
            await asyncio.shield(self.store.query("DELETE $doc;", {"doc": doc_id}))
            raise

    async def _write_chunks(self, rows: list[dict[str, Any]]) -> None:
        batch = self.settings.insert_batch_size
        for start in range(0, len(rows), batch * 10):
            group = rows[start:start + batch * 10]
            params = {f"rows{n}": group[i:i + batch]
                      for n, i in enumerate(range(0, len(group), batch))}
            await self.store.query(
                "\n".join(f"INSERT INTO {self.names.chunks} ${name} RETURN NONE;"
                          for name in params),
                params)

    async def _finish_document(self, key: str, file_hash: str, size: int, doc: Extracted,
                               doc_id: RecordID, n_chunks: int) -> None:
        n = self.names
        (old,) = await self.store.query(
            "SELECT VALUE document.{ id, notebooks, topics } FROM ONLY $file;",
            {"file": self._file_id(key)})
        notebooks = list((old or {}).get("notebooks") or []) if old else []
        # A new version of a source keeps the old version's notebooks and topics: edges,
        # chunk membership and the copies in each notebook's vector table.
        carry = ""
        if notebooks:
            carry = (
                " UPDATE $doc SET notebooks = $nbs, topics = $topics RETURN NONE;"
                f" UPDATE {n.chunks} SET notebooks = $nbs WHERE document = $doc RETURN NONE;"
                f" FOR $nb IN $nbs {{ RELATE $doc->{n.reference}->$nb; }};"
                + "".join(
                    copy_vectors_sql(n, table, "$doc") +
                    f" UPDATE $nb{i} SET pending_vectors += $n RETURN NONE;"
                    for i, table in enumerate(n.notebook_vectors(nb) for nb in notebooks)))
        await self.store.query(
            "BEGIN;"
            " LET $old = (SELECT VALUE document FROM ONLY $file);"
            " UPSERT $file CONTENT { path: $path, file_hash: $hash, size: $size,"
            "   status: 'ingested', document: $doc, mime_type: $mime } RETURN NONE;"
            + carry + _DETACH_OLD +  # frees the source (UNIQUE) before the new document
            " UPDATE $doc SET complete = true, source = $path RETURN NONE;"
            " UPSERT $state SET pending_vectors = (pending_vectors OR 0) + $n RETURN NONE;"
            " COMMIT;",
            {"file": self._file_id(key), "doc": doc_id, "path": key, "hash": file_hash,
             "size": size, "mime": doc.mime_type, "state": n.index_state_key,
             "n": n_chunks if self.settings.vectors else 0, "nbs": notebooks,
             "topics": list((old or {}).get("topics") or []),
             **{f"nb{i}": nb for i, nb in enumerate(notebooks)}},
        )

    async def delete_source(self, key: str) -> bool:
        """Forget a source; its document goes when no other source shares it."""
        async with self._write_lock:
            (found,) = await self.store.query(
                "SELECT VALUE id FROM ONLY $file;", {"file": self._file_id(key)})
            if found is None:
                return False
            await self.store.query(
                "BEGIN; LET $old = (SELECT VALUE document FROM ONLY $file); DELETE $file;"
                + _DETACH_OLD + " COMMIT;",
                {"file": self._file_id(key), "path": key},
            )
        return True

    async def maybe_rebuild_index(self, force: bool = False) -> bool:
        """Build the HNSW graph when enough vectors wait in the engine's exact-scan queue."""
        if not self.settings.vectors:
            return False
        (state,) = await self.store.query("SELECT * FROM ONLY $s;",
                                          {"s": self.names.index_state_key})
        pending = int((state or {}).get("pending_vectors") or 0)
        if not force and pending < self.settings.rebuild_threshold:
            return False
        async with self._write_lock:
            await rebuild_vector_index(self.store)
        return True


async def recover(store: Store, older_than_seconds: int = 0) -> int:
    """Delete documents left incomplete by a crash (their chunks cascade). Returns how many.

    On an embedded store only this process can be writing, so every incomplete document is
    debris; on a shared server pass an age, so that another writer's work is left alone.
    """
    (deleted,) = await store.query(
        f"DELETE {store.names.documents} WHERE complete = false"
        " AND updated_at < time::now() - type::duration($age) RETURN BEFORE;",
        {"age": f"{int(older_than_seconds)}s"},
    )
    return len(deleted or [])


async def rebuild_vector_index(store: Store) -> None:
    """Rebuild the HNSW graph synchronously, so every vector is in the graph."""
    await store.build_index(
        f"REBUILD INDEX {store.names.hnsw_index} ON {store.names.chunks};"
        " UPSERT $s SET pending_vectors = 0, rebuilt_at = time::now();",
        {"s": store.names.index_state_key},
    )


# Detaching a source from the document it pointed at ($old): drop it from the document's
# sources (and from its primary `source`), and delete the document (its chunks cascade) once
# no source is left. Expects $old, $path and, when re-pointing, the new document in $doc.
_DETACH_OLD = """
IF $old != NONE AND $old != $doc {
    UPDATE $old SET sources = array::complement(sources, [$path]) RETURN NONE;
    UPDATE $old SET source = sources[0] WHERE source = $path AND array::len(sources) > 0
        RETURN NONE;
    IF array::len((SELECT VALUE sources FROM ONLY $old) OR []) = 0 { DELETE $old; };
};
"""


def copy_vectors_sql(names: Names, table: str, document: str, extra: str = "") -> str:
    """Statement copying a document's chunk vectors into a notebook's vector table (ids
    mirror the chunks'). ``document`` is a SurrealQL expression, e.g. ``$doc``."""
    return (f" INSERT INTO {table} (SELECT type::record('{table}', record::id(id)) AS id,"
            f" id AS chunk, document, embedding FROM {names.chunks}"
            f" WHERE document = {document} AND embedding != NONE{extra}) RETURN NONE;")


def chunk_rows(names: Names, doc: Extracted, doc_id: RecordID, content_hash: str,
               vectors: Any) -> list[dict[str, Any]]:
    return [chunk_row(RecordID(names.chunks, f"{content_hash}_{chunk.index}"), doc_id, chunk,
                      vector)
            for chunk, vector in zip(doc.chunks,
                                     vectors if vectors is not None else repeat(None))]


def chunk_row(row_id: RecordID, doc_id: RecordID, chunk: Chunk, vector: Any) -> dict[str, Any]:
    """The stored row of one chunk: text, position, pages and (when given) its vector."""
    row: dict[str, Any] = {
        "id": row_id,
        "document": doc_id,
        "content": chunk.content,
        "chunk_index": chunk.index,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "word_count": chunk.word_count,
    }
    if vector is not None:
        row["embedding"] = [float(x) for x in vector]
    if chunk.first_page is not None:
        row["page_number"] = chunk.first_page
        row["first_page"] = chunk.first_page
        row["last_page"] = chunk.last_page or chunk.first_page
    return row
