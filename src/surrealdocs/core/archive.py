"""Export and import a whole knowledge base (docs/archive.md): ``kb.export(out)`` writes an
archive of everything the store holds that cannot be recomputed cheaply; importing it
(``KnowledgeBase.import_archive``) writes it into an empty store without extracting or
embedding anything: the vectors travel with their chunks.

An import checks the whole archive before it opens the target. It then writes a mark
naming the archive, the notebooks, the documents with their chunks (each batch of
documents, their chunks, vectors and text segment in one transaction: never half a
document), the other tables, and the notebooks' vector copies, and clears the mark. Killed
part way, the same import run again finds its mark and writes what is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any, Protocol

from ..config import Settings
from ..embed import Embedder, provenance
from ..embed.carried import CarriedModel
from ..errors import ArchiveError, EmbeddingModelMismatchError
from ..parts.archive import Archive, ArchiveWriter, VectorRef, decode, read_archive
from ..store.carry import PAGE_CHUNKS, PAGE_ROWS, ROLES, CarriedRows, carried_tables
from ..store.migrations import SCHEMA_VERSION
from ..store.names import Names
from ..store.storage import Storage
from ..version import __version__
from .archive_merge import Merge

# the roles written after the documents, page by page
_AFTER_DOCUMENTS = ("files", "reference", "note", "artifact", "chat_session", "chat_turn",
                    "api_key")
# roles whose UNIQUE fields a merge's target may hold already (an edge's pair, a key's name)
MERGE_IGNORES = frozenset({"reference", "artifact", "api_key"})
# batches written at once (two cores: one encodes while the engine stores the other)
WRITES_IN_FLIGHT = 2
# reads of a page of documents before one another writer keeps changing is left out
WHOLE_ATTEMPTS = 3
# chunks per transaction when the engine's FULLTEXT index ranks (large ones are slow there)
ENGINE_INDEX_CHUNKS = 100

Progress = Callable[[str, int, int], None]  # (what, done, total)

__all__ = ["ROLES", "ArchiveReport", "archive_model", "archive_settings", "check_archive",
           "copy_store", "export_store", "import_archive", "import_into"]


@dataclass
class ArchiveReport:
    """What an export or an import carried: rows per role, vectors, seconds."""

    rows: dict[str, int] = field(default_factory=dict)
    vectors: int = 0
    seconds: float = 0.0
    resumed: bool = False  # an import that finished an interrupted one
    skipped: int = 0  # export: documents left out, changed by another writer throughout
    already: bool = False  # import: the store holds this archive, imported whole before
    joined: int = 0  # merge: documents the store held, their sources added
    left_out: int = 0  # merge: documents whose every source the store holds with other text

    @property
    def chunks(self) -> int:
        return self.rows.get("chunks", 0)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": dict(self.rows), "vectors": self.vectors,
                "seconds": round(self.seconds, 3), "resumed": self.resumed,
                "skipped": self.skipped, "already": self.already, "joined": self.joined,
                "left_out": self.left_out}


def _silent(what: str, done: int, total: int) -> None:
    return None


# ----- export -----------------------------------------------------------------------------
async def export_store(storage: Storage, settings: Settings, embedder: Embedder | None,
                       out: IO[bytes], *, with_keys: bool = False,
                       progress: Progress | None = None) -> ArchiveReport:
    """Write an archive of the store into the binary stream ``out``."""
    if not settings.chunked:
        raise ArchiveError("this store holds whole documents only (the kreuzberg-surrealdb "
                           "layout): export needs a store with chunks")
    progress = progress or _silent
    started = asyncio.get_running_loop().time()
    carried = CarriedRows(storage)
    counts = await carried.counts()
    header = {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "surrealdocs": __version__, "schema": SCHEMA_VERSION,
        "layout": {"analyzer_language": storage.store.names.language,
                   "vectors": embedder is not None},
        "model": None if embedder is None else {
            "name": embedder.name, "dimension": int(embedder.dimension),
            "distance": settings.hnsw_distance, "provenance": provenance(embedder)},
        "counts": {r: n for r, n in counts.items() if with_keys or r != "api_key"},
    }
    writer = ArchiveWriter(header, carried.role_of)
    report = ArchiveReport()
    try:
        await _export_rows(carried, writer, "notebook", report)
        await _export_documents(carried, writer, embedder, report,
                                lambda done: progress("chunks", done, counts["chunks"]),
                                settings.engine_reopen_rows)
        for role in _AFTER_DOCUMENTS:
            if role != "api_key" or with_keys:
                await _export_rows(carried, writer, role, report)
        progress("writing", 0, 0)
        await asyncio.to_thread(writer.write_to, out)
    finally:
        writer.discard()
    report.seconds = asyncio.get_running_loop().time() - started
    return report


async def _export_rows(carried: CarriedRows, writer: ArchiveWriter, role: str,
                       report: ArchiveReport) -> None:
    ids = await carried.ids(role)
    for start in range(0, len(ids), PAGE_ROWS):
        rows = await carried.rows_of(ids[start:start + PAGE_ROWS])
        writer.rows(role, rows)
        report.rows[role] = report.rows.get(role, 0) + len(rows)


async def _export_documents(carried: CarriedRows, writer: ArchiveWriter,
                            embedder: Embedder | None, report: ArchiveReport,
                            progress: Callable[[int], None], reopen_every: int) -> None:
    """Pages of documents with their chunks; the next page is read while this one is
    written (the engine reads while Python encodes). The embedded engine keeps what it
    reads (RSS grew by 17 MB every 1,500 chunks, to 2.8 GB at 250,000): it is reopened
    every ``reopen_every`` chunks, which holds it under 700 MB."""
    ids = await carried.ids("documents")
    # the counts and the ids scanned whole tables, and the engine keeps what it read (at
    # 300,000 chunks RSS peaked at 1.04 GB here, then held 600-830 MB): start afresh
    await carried.store.refresh_engine()
    pages = [ids[start:start + PAGE_ROWS] for start in range(0, len(ids), PAGE_ROWS)]

    async def read(n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
        page = await carried.documents_of(pages[n])  # those deleted meanwhile are gone
        documents, chunks = await _whole(carried, page)
        return documents, chunks, len(pages[n]) - len(documents)

    if not pages:
        return
    ahead = asyncio.ensure_future(read(0))
    try:
        for n in range(len(pages)):
            documents, chunks, skipped = await ahead
            if report.chunks // reopen_every != (report.chunks + len(chunks)) // reopen_every:
                await carried.store.refresh_engine()  # nothing is read meanwhile
            if n + 1 < len(pages):
                ahead = asyncio.ensure_future(read(n + 1))
            report.skipped += skipped
            _write_page(writer, embedder, documents, chunks, report)
            progress(report.chunks)
    finally:
        if not ahead.done():
            ahead.cancel()
            with contextlib.suppress(BaseException):
                await ahead


def _write_page(writer: ArchiveWriter, embedder: Embedder | None,
                documents: list[dict[str, Any]], chunks: list[dict[str, Any]],
                report: ArchiveReport) -> None:
    with_vectors = [c for c in chunks if c.get("embedding") is not None]
    if with_vectors and embedder is not None:
        first = writer.vectors("chunks", embedder.dimension,
                               [c["embedding"] for c in with_vectors])
        for n, chunk in enumerate(with_vectors):
            chunk["embedding"] = VectorRef(first + n)
        report.vectors += len(with_vectors)
    writer.rows("documents", documents)
    writer.rows("chunks", chunks)
    report.rows["documents"] = report.rows.get("documents", 0) + len(documents)
    report.rows["chunks"] = report.rows.get("chunks", 0) + len(chunks)


async def _whole(carried: CarriedRows, documents: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """These documents with their chunks, each whole: a document another writer changed
    between the two reads (its chunks are not the ``chunk_count`` it says) is read again,
    up to three times, and left out if it never holds still (or was deleted)."""
    kept: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    for attempt in range(WHOLE_ATTEMPTS):
        found = await carried.chunks_of(documents)
        by_document: dict[str, list[dict[str, Any]]] = {}
        for chunk in found:
            by_document.setdefault(str(chunk["document"]), []).append(chunk)
        unsteady = []
        for document in documents:
            own = by_document.get(str(document["id"]), [])
            if len(own) == int(document.get("chunk_count") or 0):
                kept.append(document)
                chunks += own
            else:
                unsteady.append(document["id"])
        if not unsteady or attempt == WHOLE_ATTEMPTS - 1:
            break
        documents = await carried.documents_of(unsteady)
    kept.sort(key=lambda d: str(d["id"]))
    order = {str(d["id"]): n for n, d in enumerate(kept)}
    chunks.sort(key=lambda c: (order[str(c["document"])], c.get("chunk_index") or 0))
    return kept, chunks


# ----- import -----------------------------------------------------------------------------
def check_archive(archive: Archive, tables: dict[str, str]) -> None:
    """Every row valid, and the chunks in their documents' order (as an export writes
    them): raises :class:`ArchiveError` before anything is written."""
    archive.check(tables)
    chunks = _Peek(archive.lines("chunks"))
    for document in archive.lines("documents"):
        key = _key(document.get("id"), "documents")
        while chunks.peek() is not None and \
                _key(chunks.peek().get("document"), "documents") == key:  # type: ignore[union-attr]
            next(chunks)
    left = chunks.peek()
    if left is not None:
        raise ArchiveError("the archive holds a chunk out of its document's order, or of no "
                           f"document: {str(left.get('id'))[:120]}")


def _key(value: Any, role: str) -> Any:
    if isinstance(value, dict) and isinstance(value.get("$record"), list) \
            and len(value["$record"]) == 2 and value["$record"][0] == role:
        key = value["$record"][1]
        return tuple(key) if isinstance(key, list) else key
    raise ArchiveError(f"a row of {role} without a valid id: {str(value)[:120]}")


class _Peek:
    def __init__(self, rows: Iterator[dict[str, Any]]) -> None:
        self._rows = rows
        self._next: dict[str, Any] | None = None
        self._done = False

    def peek(self) -> dict[str, Any] | None:
        if self._next is None and not self._done:
            self._next = next(self._rows, None)
            self._done = self._next is None
        return self._next

    def __next__(self) -> dict[str, Any]:
        row = self.peek()
        if row is None:
            raise StopIteration
        self._next = None
        return row


async def import_into(storage: Storage, archive: Archive, *, merge: bool = False,
                      progress: Progress | None = None) -> ArchiveReport:
    """Write a checked archive (:func:`check_archive`) into the store of ``storage``,
    which must be empty or hold an interrupted import of the same archive; with ``merge``
    it may hold anything (:mod:`.archive_merge`)."""
    progress = progress or _silent
    started = asyncio.get_running_loop().time()
    carried = CarriedRows(storage)
    report = ArchiveReport()
    mark = await carried.import_mark() or {}
    ours = mark.get("archive") == archive.archive_id
    if ours and mark.get("done"):  # a finished import, run again (its end went unseen)
        report.already = True
        progress("chunks", 0, 0)
        return report
    if mark and not ours and not mark.get("done"):
        raise ArchiveError(
            f"an import of another archive into {storage.store.url} was interrupted: run "
            "that import again to finish it, or import into an empty store")
    if not ours:
        counts = await carried.counts()
        held = {role: n for role, n in counts.items() if n}
        if held and not merge:
            raise ArchiveError(
                f"the store at {storage.store.url} is not empty ("
                + ", ".join(f"{n} {role}" for role, n in held.items())
                + "): import into an empty store, or add --merge")
        await carried.set_import_mark(archive.archive_id)
    else:
        report.resumed = True
    rows = _Decoder(carried, archive)
    merging = Merge(storage, carried) if merge else None
    if merging is not None:
        await merging.prepare(rows.rows("notebook"), rows.rows("files"))
        rows.remap = merging.remap
    chunks_part = archive.part("chunks")
    total = chunks_part.rows if chunks_part is not None else 0
    progress("chunks", 0, total)
    await _import_rows(carried, rows, "notebook", report, merging)
    await _import_documents(carried, rows, report,
                            lambda done: progress("chunks", done, total), merging)
    for role in _AFTER_DOCUMENTS:
        await _import_rows(carried, rows, role, report, merging)
    if merging is not None:
        report.joined, report.left_out = merging.joined, merging.left_out
    progress("notebooks", 0, 0)
    await _copy_notebook_vectors(storage, rows)
    progress("text index", 0, 0)
    await storage.store.refresh_engine()  # what the writes left in the engine, freed first
    await carried.merge_text_segments()
    await carried.count_pending_vectors()
    await carried.finish_import_mark()
    report.seconds = asyncio.get_running_loop().time() - started
    return report


class _Decoder:
    """The archive's rows as the target stores them."""

    def __init__(self, carried: CarriedRows, archive: Archive) -> None:
        self.carried = carried
        self.archive = archive
        self.remap: Callable[[Any], Any] | None = None  # a merge's notebook ids

    def rows(self, role: str) -> Iterator[dict[str, Any]]:
        def vector(n: int) -> Any:
            return self.archive.vector("chunks", n)
        for line in self.archive.lines(role):
            row = decode(line, self.carried.table_of, vector)
            yield self.remap(row) if self.remap is not None else row


class _InFlight:
    """Up to ``WRITES_IN_FLIGHT`` writes at once: the SDK encodes one batch (in Python)
    while the engine stores another (in its own threads). A failed write lets the others
    end (cancelled, they could still land) and is raised."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[None]] = set()

    async def add(self, write: Awaitable[None]) -> None:
        if len(self._tasks) >= WRITES_IN_FLIGHT:
            done, self._tasks = await asyncio.wait(self._tasks,
                                                   return_when=asyncio.FIRST_COMPLETED)
            failed = [t.exception() for t in done if t.exception() is not None]
            if failed:
                await self.drain()
                raise failed[0]  # type: ignore[misc]
        self._tasks.add(asyncio.ensure_future(write))

    async def drain(self) -> None:
        tasks, self._tasks = self._tasks, set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome


async def _import_rows(carried: CarriedRows, rows: _Decoder, role: str,
                       report: ArchiveReport, merging: Merge | None = None) -> None:
    writes = _InFlight()

    async def write(batch: list[dict[str, Any]]) -> None:
        taken = await carried.existing([r["id"] for r in batch])
        fresh = [r for r in batch if str(r["id"]) not in taken]
        if merging is None:
            await carried.store.transaction(carried.insert_statement(role, fresh))
            return
        fresh = [r for r in fresh if not merging.skip_row(role, r)]
        if role == "reference":
            fresh = await merging.references(fresh)
        await carried.store.transaction(carried.insert_statement(
            role, fresh, ignore=role in MERGE_IGNORES))

    batch: list[dict[str, Any]] = []
    for row in rows.rows(role):
        batch.append(row)
        if len(batch) >= PAGE_ROWS:
            await writes.add(write(batch))
            report.rows[role] = report.rows.get(role, 0) + len(batch)
            batch = []
    if batch:
        await writes.add(write(batch))
        report.rows[role] = report.rows.get(role, 0) + len(batch)
    await writes.drain()


async def _import_documents(carried: CarriedRows, rows: _Decoder, report: ArchiveReport,
                            progress: Callable[[int], None],
                            merging: Merge | None = None) -> None:
    """Batches of documents with their chunks, each batch one transaction."""
    limit = PAGE_CHUNKS if carried.storage.chunks.text is not None else ENGINE_INDEX_CHUNKS
    chunks = _Peek(rows.rows("chunks"))
    writes = _InFlight()
    documents: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []
    for document in rows.rows("documents"):
        documents.append(document)
        while (chunk := chunks.peek()) is not None and str(chunk["document"]) == \
                str(document["id"]):
            batch.append(next(chunks))
        if len(batch) >= limit or len(documents) >= PAGE_ROWS:
            await writes.add(_write_documents(carried, documents, batch, report, progress,
                                              merging))
            documents, batch = [], []
    if documents:
        await writes.add(_write_documents(carried, documents, batch, report, progress,
                                          merging))
    await writes.drain()


async def _write_documents(carried: CarriedRows, documents: list[dict[str, Any]],
                           chunks: list[dict[str, Any]], report: ArchiveReport,
                           progress: Callable[[int], None],
                           merging: Merge | None = None) -> None:
    taken = await carried.existing([d["id"] for d in documents])
    if merging is not None:
        fresh, fresh_chunks = await merging.documents(documents, chunks, taken)
    else:
        fresh = [d for d in documents if str(d["id"]) not in taken]
        fresh_chunks = [c for c in chunks if str(c["document"]) not in taken]
    await carried.store.transaction(carried.insert_statement("documents", fresh),
                                    *carried.chunk_statements(fresh_chunks))
    report.rows["documents"] = report.rows.get("documents", 0) + len(documents)
    report.rows["chunks"] = report.rows.get("chunks", 0) + len(chunks)
    report.vectors += sum(1 for c in chunks if c.get("embedding") is not None)
    progress(report.chunks)


async def _copy_notebook_vectors(storage: Storage, rows: _Decoder) -> None:
    """Each notebook's vector table, made again from its chunks' vectors."""
    if not storage.chunks.settings.vectors:
        return
    graphs = storage.chunks.graphs
    for notebook in rows.rows("notebook"):
        # made from nothing, so that an import run again after a kill here copies once
        await storage.store.run(graphs.drop_notebook_table_statement(notebook["id"]))
        await graphs.recopy_notebook(notebook["id"])


def archive_settings(archive: Archive, settings: Settings) -> Settings:
    """The settings a store that takes this archive is opened with: the archive's analyzer
    language, and vectors when it carries them."""
    layout = archive.manifest.get("layout")
    if not isinstance(layout, dict):
        raise ArchiveError("the archive's manifest has no layout")
    language = layout.get("analyzer_language")
    if not isinstance(language, str):
        raise ArchiveError("the archive's manifest names no analyzer language")
    try:
        return settings.replace(chunked=True, embed=bool(layout.get("vectors")),
                                analyzer_language=language)
    except ValueError as exc:
        raise ArchiveError(f"the archive's layout cannot be opened here: {exc}") from exc


def archive_model(archive: Archive) -> tuple[str, int, dict[str, str]] | None:
    """(name, dimension, provenance) of the model the archive's vectors come from."""
    model = archive.manifest.get("model")
    if model is None:
        return None
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) \
            or not isinstance(model.get("dimension"), int) \
            or not 0 < model["dimension"] <= 65536:
        raise ArchiveError("the archive's manifest names its model badly")
    part = archive.part("chunks", "vectors")
    if part is not None and part.dimension != model["dimension"]:
        raise ArchiveError("the archive's vectors do not have its model's dimension")
    prov = model.get("provenance") or {}
    if not isinstance(prov, dict):
        raise ArchiveError("the archive's manifest names its model's provenance badly")
    return model["name"], model["dimension"], {str(k): str(v) for k, v in prov.items()}




# ----- opening the target, copying -------------------------------------------------------
class _Opened(Protocol):
    storage: Storage

    async def close(self) -> None: ...


Opener = Callable[[Settings, Embedder | None], Awaitable[_Opened]]


async def import_archive(source: IO[bytes], open_store: Opener, settings: Settings, *,
                         merge: bool = False,
                         progress: Progress | None = None) -> ArchiveReport:
    """Read, check and import an archive from a binary stream into the store of
    ``settings`` (opened with ``open_store``, bound to the archive's model)."""
    archive = await asyncio.to_thread(read_archive, source, schema_version=SCHEMA_VERSION)
    try:
        target = archive_settings(archive, settings)
        names = Names(target.documents_table, target.chunks_table, target.analyzer_language)
        await asyncio.to_thread(check_archive, archive, carried_tables(names))
        model = archive_model(archive)
        try:
            opened = await open_store(target, CarriedModel(*model) if model else None)
        except EmbeddingModelMismatchError as exc:
            stored = exc.stored[0] if exc.stored else "another model"
            raise ArchiveError(
                f"the store at {target.db or 'the default path'} holds vectors of {stored!r}; "
                f"the archive's are of {model[0] if model else 'no model'!r}: import into an "
                "empty store") from exc
        try:
            return await import_into(opened.storage, archive, merge=merge,
                                     progress=progress)
        finally:
            await opened.close()
    finally:
        archive.close()


async def copy_store(storage: Storage, settings: Settings, embedder: Embedder | None,
                     open_target: Opener, target: Settings, *, with_keys: bool = False,
                     progress: Progress | None = None) -> ArchiveReport:
    """Export this store into an import into the store of ``target``, through a pipe."""
    read_fd, write_fd = os.pipe()

    async def produce() -> ArchiveReport:
        with os.fdopen(write_fd, "wb") as out:
            return await export_store(storage, settings, embedder, out, with_keys=with_keys,
                                      progress=progress)

    async def consume() -> ArchiveReport:
        with os.fdopen(read_fd, "rb") as source:
            return await import_archive(source, open_target, target, progress=progress)

    exported, imported = await asyncio.gather(produce(), consume(), return_exceptions=True)
    for outcome in (imported, exported):  # the import's failure says more than a broken pipe
        if isinstance(outcome, BaseException):
            raise outcome
    assert isinstance(imported, ArchiveReport)
    return imported
