"""Writing one extracted document (``Ingestor`` calls it for every file it stores): its
record, its source, and its chunks with their vectors, in transactions that leave no half
document behind. A new version of a source takes over the previous version's unchanged
chunks (moved, not written again) and its notebooks and topics; a chunk whose text is
stored already takes that vector, and the rest are embedded, each distinct text once.

A small document is one transaction. A large one is created marked incomplete, its chunks
inserted in transactions of ``insert_batch_size`` rows (two in flight), and one small
transaction completes it and points the source at it; a failure deletes it, and search
never shows an incomplete document's chunks.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..embed import EmbeddingRunner
from ..errors import StoreError
from ..parts.chunk import Chunk
from ..parts.digest import sha256
from ..parts.extract import Extracted
from ..parts.metadata import with_times
from ..parts.results import FileResult, id_text
from ..store.chunks import IDS_TAKEN_MARK, Move
from ..store.connection import STALE_MARK, Statement
from ..store.documents import DocumentExistsError
from ..store.storage import Storage

# A document of at most this many chunks is written in one transaction (the full-text index
# makes larger transactions slow; see DocumentWriter._write_new).
SMALL_DOCUMENT_CHUNKS = 10

# How often a write whose plan went stale (another writer changed the previous version
# meanwhile) is planned again before it gives up moving chunks.
STALE_RETRIES = 3


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


class DocumentWriter:
    """Writes extracted documents into one store (see the module)."""

    def __init__(self, storage: Storage, embedding: EmbeddingRunner | None,
                 settings: Settings) -> None:
        self.storage = storage
        self.store = storage.store
        self.embedding = embedding
        self.settings = settings
        # notebooks a new version carried vectors into: their graphs may be due
        self.touched_notebooks: set[RecordID] = set()

    async def store_document(self, key: str, file_hash: str, size: int,
                              mtime_ns: int | None, doc: Extracted,
                              previous: dict[str, Any] | None,
                              on_step: Callable[[str], None] | None = None) -> FileResult:
        """Store a document from ``key`` (see :meth:`_write_new`); ``on_step`` is told the
        long steps as they begin (``embedding N chunks``, ``writing``)."""
        step = on_step or (lambda name: None)
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
                # a source with no record when the ingest began has no version to move
                # chunks from (one written meanwhile is replaced whole, as after retries)
                plan = await self._plan(key, doc, doc_id, known,
                                        moves=previous is not None and stale < STALE_RETRIES,
                                        on_step=step)
                embedded += plan.embedded
            step("writing")
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
                    known: dict[str, Any], *, moves: bool = True,
                    on_step: Callable[[str], None] = lambda name: None) -> _ChunkPlan:
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
            if self.embedding is not None and chunks:
                on_step(_embedding_step(len(chunks)))
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
            on_step(_embedding_step(len(missing)))
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

    async def vectors_for(self, chunks: Sequence[Chunk]) -> list[Any]:
        """One vector per chunk: a text stored already keeps its vector, the rest are
        embedded, each distinct text once."""
        texts = {sha256(c.embedding_input): c.embedding_input for c in chunks}
        known: dict[str, Any] = await self.storage.chunks.vectors_by_hash(list(texts))
        missing = [h for h in texts if h not in known]
        if missing:
            known.update(zip(missing, await self._embed([texts[h] for h in missing])))
        return [known[sha256(c.embedding_input)] for c in chunks]

    async def _embed(self, texts: list[str]) -> Any:
        """The texts' vectors (``None`` without vectors)."""
        if self.embedding is None:
            return None
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
        # a new version of a source keeps the old one's notebooks, topics and the user's
        # own metadata
        notebooks: list[Any] = []
        topics: list[str] = []
        old = (previous or {}).get("document_membership") or {}
        fields = self._fields(key, doc, content_hash, old.get("user_metadata") or {})
        if old.get("notebooks") or old.get("topics"):
            notebooks, topics = await storage.documents.membership_of_source(key)
        moving = [storage.documents.sole_source_check_statement(key, plan.old),
                  storage.chunks.move_statement(doc_id, plan.old, plan.old_generation,
                                                plan.moves)] if plan.moves else []

        def completing(inserted: Sequence[RecordID]) -> list[Statement]:
            return [*moving,
                    storage.documents.complete_statement(key, file_hash, size, doc.mime_type,
                                                         doc_id, mtime_ns),
                    storage.chunks.graphs.pending_statement(len(rows)),
                    *self._inherit(doc_id, notebooks, topics,
                                   plan.old if plan.moves else None, inserted)]

        try:
            if not (len(rows) <= SMALL_DOCUMENT_CHUNKS
                    and await self._written_whole(doc_id, fields, rows, completing)):
                await self._written_in_steps(doc_id, fields, rows, completing)
        except StoreError as exc:
            if STALE_MARK in str(exc):
                raise _Stale(str(exc)) from exc
            raise
        storage.chunks.written()
        self.touched_notebooks.update(notebooks)

    def _fields(self, key: str, doc: Extracted, content_hash: str,
                own: dict[str, Any]) -> dict[str, Any]:
        """A document's record, as written (``own``: the user's metadata, over the
        extractor's)."""
        return {
            "sources": [key], "content": doc.content,
            "mime_type": doc.mime_type, "content_hash": content_hash, "title": doc.title,
            "authors": doc.authors, "created_at": doc.created_at,
            # (the facade keeps kreuzberg's metadata as kreuzberg gives it)
            "metadata": {**(with_times(doc.metadata) if self.settings.separate_vectors
                            else doc.metadata), **own},
            **({"user_metadata": own} if own else {}),
            "detected_languages": doc.detected_languages,
            "keywords": doc.keywords,
            "quality_score": doc.quality_score, "page_count": doc.page_count,
            "page_starts": doc.page_starts, "chunk_count": len(doc.chunks),
            "headings": [[level, text] for level, text in doc.headings] or None,
            "embedding_model": self.embedding.name if self.embedding else None,
        }

    async def _written_whole(self, doc_id: RecordID, fields: dict[str, Any],
                             rows: list[dict[str, Any]],
                             completing: Callable[[Sequence[RecordID]], list[Statement]]
                             ) -> bool:
        """Write a small document in one transaction; ``False`` when an id it needs is
        taken by a moved chunk (then it goes the long way)."""
        storage = self.storage
        try:
            await storage.documents.write_whole(
                doc_id, fields, [storage.chunks.ids_free_statement(rows),
                                 *storage.chunks.insert_statements(rows),
                                 *completing([row["id"] for row in rows])])
        except StoreError as exc:
            if IDS_TAKEN_MARK not in str(exc):
                raise
            return False
        return True

    async def _written_in_steps(self, doc_id: RecordID, fields: dict[str, Any],
                                rows: list[dict[str, Any]],
                                completing: Callable[[Sequence[RecordID]], list[Statement]]
                                ) -> None:
        """Write a document incomplete, insert its chunks in batches, complete it in one
        small transaction; a failure deletes it."""
        storage = self.storage
        await storage.documents.create_incomplete(doc_id, fields)
        try:
            inserted = await storage.chunks.insert(
                rows, heartbeat=storage.documents.touch_statement(doc_id))
            await self.store.transaction(*completing(inserted))
        except BaseException:
            await asyncio.shield(storage.documents.discard_incomplete(doc_id))
            raise

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


def _embedding_step(n: int) -> str:
    return f"embedding {n:,} chunk{'' if n == 1 else 's'}"
