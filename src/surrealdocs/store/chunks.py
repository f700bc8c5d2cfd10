"""Chunk and vector storage: every statement that writes the ``chunks`` table, the notebooks'
vector tables and the counters that decide when an HNSW graph is rebuilt.

- **Chunks** carry their text, position (index, character span, pages), the *generation*
  of their document they belong to, and the document's notebooks. Their vectors live in a
  table of their own (``<chunks>_vectors``, ids mirroring the chunks', with the shared HNSW
  index) so that BM25, which reads every matching row, never reads a vector; stores of the
  kreuzberg-surrealdb facade keep them in the chunks (``vectors_apart`` false). Rows are
  inserted ``settings.insert_batch_size`` per statement: the engine's full-text index makes
  large statements and transactions superlinear (1,000 chunks in one transaction: 62 s and
  10.6 GB, against 2.3 s as ten 100-row statements; on ``mem://`` 25-row statements are
  1.5x faster again than 100-row ones).
- **Reuse**: every chunk carries ``text_hash``, the SHA-256 of its text, computed by the
  engine (migration 9). A new version of a source takes the chunks of the old version whose
  text did not change: :meth:`ChunkStorage.move_statement` re-points those rows (text,
  vector, full-text and HNSW entries untouched) in the transaction that completes the new
  version. Any other chunk whose text is stored takes that vector
  (:meth:`ChunkStorage.vectors_by_hash`), so only new text is embedded.
- **Generations**: re-chunking a document (a notebook source's vectorize job) writes a new
  generation beside the old one, switches the document to it in one small transaction, then
  deletes the old one. Searches show only chunks of the document's current generation, so
  they see the old chunks or the new ones, never a mix.
- **Notebook vector tables** (``<chunks>_nbv_<notebook>``): a copy of the vectors of one
  notebook's chunks with an HNSW index of its own, so a scoped vector search walks a graph
  of that notebook only (the engine's HNSW with a filter pushed into the scan was 23x slower
  at 100k vectors). Copies cascade away with their chunks.
- **Pending counters**: vectors written since an index's graph was last built. The embedded
  engine searches such vectors by an exact scan; once ``settings.rebuild_threshold`` of them
  wait, and ``settings.rebuild_fraction`` of the graph's size, :meth:`ChunkStorage.rebuild_if_due`
  builds the graph. Counters live in the meta table
  (``index_state`` records), one per HNSW index.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from surrealdb import RecordID

from ..config import Settings
from ..errors import StoreError
from ..parts.chunk import Chunk
from ..parts.filters import Filters
from ..parts.results import id_text
from .conditions import filter_conditions
from .connection import STALE_MARK, Statement, Store
from .schema import hnsw_index_sql, vector_table_sql
from .segmentvectors import distance_of
from .textindex import TextIndex
from .textsegments import Ranked

STATEMENTS_PER_ROUND_TRIP = 10
INSERT_STREAMS = 2  # round trips of one document's inserts in flight at once
IDS_TAKEN_MARK = "surrealdocs: chunk ids taken"
REMOTE_BUILD_POLL_SECONDS = 0.5
READY_CHECK_SECONDS = 5.0
COUNT_CACHE_SECONDS = 60.0
TERM_CACHE_SECONDS = 600.0  # a term's document frequency changes slowly
TERM_CACHE_SIZE = 100_000

# What a leg returns per chunk: enough to rank and collapse per document. Checking that a
# chunk is visible (its document complete, its generation current) costs a read of the
# document per candidate; a careful leg does it (see Searcher.search).
_LEG_FIELDS = "id, document"
_LEG_FIELDS_VIA_CHUNK = "chunk AS id, document"  # a vector table's rows
_VISIBILITY = ("document.complete AS complete, generation,"
               " document.generation AS doc_generation")
_VISIBLE = "document.complete = true AND (generation OR 0) = (document.generation OR 0)"
_VISIBLE_VIA_CHUNK = ("document.complete = true"
                      " AND (chunk.generation OR 0) = (document.generation OR 0)")
# What a hit shows.
_DETAIL_FIELDS = (
    "id, document, content, context, chunk_index, char_start, char_end, page_number,"
    " last_page, document.source AS source, document.title AS title,"
    " document.mime_type AS mime_type, "
    + _VISIBILITY
)


@dataclass(frozen=True)
class Move:
    """A stored chunk that becomes chunk ``chunk.index`` of another document (same text,
    its new place)."""

    id: RecordID
    chunk: Chunk


class ChunkStorage:
    """The chunks of one store, the notebooks' vector copies, and their HNSW graphs."""

    def __init__(self, store: Store, settings: Settings, dimension: int, *,
                 vectors_apart: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.dimension = dimension
        self.names = store.names
        self.table = store.names.chunks
        # where the vectors and the shared HNSW index are: their own table, or the chunks
        self.apart = vectors_apart
        self.vector_table = store.names.vectors if vectors_apart else store.names.chunks
        self._building: set[str] = set()  # indexes this process is building now
        self._ready_until: dict[str, float] = {}  # indexes seen ready, until when to trust it
        self._total: tuple[int, float] | None = None  # chunk count, until when to trust it
        self._term_counts: dict[str, tuple[int, float]] = {}  # word -> (chunks, until when)
        self._counting: set[str] = set()  # words being counted in the background
        self._counters: set[asyncio.Task[None]] = set()
        self._stop_counting = False
        # the text index (None: the engine's FULLTEXT index ranks BM25)
        self.text = TextIndex(store, settings, self.table,
                              self.vector_table if settings.vectors else None) \
            if settings.chunked and settings.text_index == "segments" else None

    # ----- rows -----------------------------------------------------------------------
    def rows(self, doc: RecordID, chunks: Sequence[Chunk], vectors: Any = None, *,
             generation: int = 0, notebooks: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The stored rows of a document's chunks (ids derive from the document's key, the
        generation and the chunk's index, so a re-run writes the same ids)."""
        key = str(doc.id)
        prefix = f"{key}_" if generation == 0 else f"{key}_g{generation}_"
        out = []
        for chunk, vector in zip(chunks, vectors if vectors is not None else repeat(None)):
            row: dict[str, Any] = {
                "id": RecordID(self.table, f"{prefix}{chunk.index}"),
                "document": doc,
                "content": chunk.content,
                "chunk_index": chunk.index,
                "char_start": chunk.char_start,
                "char_end": chunk.char_end,
                "word_count": chunk.word_count,
            }
            if chunk.context:
                row["context"] = chunk.context
            if generation:
                row["generation"] = generation
            if notebooks:
                row["notebooks"] = list(notebooks)
            if vector is not None:
                row["embedding"] = [float(x) for x in vector]
            if chunk.first_page is not None:
                row["page_number"] = chunk.first_page
                row["first_page"] = chunk.first_page
                row["last_page"] = chunk.last_page or chunk.first_page
            out.append(row)
        return out

    def _vector_id(self, chunk: Any) -> RecordID:
        """The id of a chunk's vector row (it mirrors the chunk's)."""
        return RecordID(self.vector_table, chunk.id)

    def _split(self, rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                               list[dict[str, Any]]]:
        """Chunk rows and, when vectors live apart, their vector rows."""
        if not self.apart:
            return list(rows), []
        chunks, vectors = [], []
        for row in rows:
            chunk = dict(row)
            embedding = chunk.pop("embedding", None)
            chunks.append(chunk)
            if embedding is not None:
                vectors.append({"id": RecordID(self.vector_table, row["id"].id),
                                "chunk": row["id"], "document": row["document"],
                                "embedding": embedding})
        return chunks, vectors

    def insert_statements(self, rows: Sequence[dict[str, Any]]) -> list[Statement]:
        """Statements inserting ``rows`` (and their vectors), ``insert_batch_size`` per
        statement, and their text segment (they belong in one transaction then)."""
        batch = self.settings.insert_batch_size
        statements: list[Statement] = []
        if self.text is not None:
            rows = [dict(row) for row in rows]
            statements += self.text.add_statements(rows)
        for table, part in zip((self.table, self.vector_table), self._split(rows)):
            for i in range(0, len(part), batch):
                name = f"rows{len(statements)}"
                some = part[i:i + batch]
                statements.append(Statement(f"INSERT INTO {table} ${name} RETURN NONE;",
                                            {name: some}, rows=len(some)))
        return statements

    async def insert(self, rows: Sequence[dict[str, Any]],
                     heartbeat: Statement | None = None) -> list[RecordID]:
        """Insert rows (and their vectors), ``insert_batch_size`` per statement, several
        statements per round trip (each statement is its own transaction), two round trips
        at once. ``heartbeat`` runs with every round trip of the first stream (a writer
        marking its document as still being written).
        Returns the ids the rows got.

        A chunk moved into a newer document keeps its id, which derives from the document
        it was first written for: should that document's text come back, a row may find
        its id taken. Such a row gets a fresh id instead.
        """
        step = self.settings.insert_batch_size * STATEMENTS_PER_ROUND_TRIP
        starts = range(0, len(rows), step)
        written: dict[int, list[RecordID]] = {}
        pending = iter(starts)  # shared by the streams: each group is taken once
        failed = False

        async def stream(number: int) -> None:
            nonlocal failed
            for start in pending:
                if failed:
                    return
                try:
                    group = await self._free_ids(rows[start:start + step])
                    beat = [heartbeat] if heartbeat and number == 0 else []
                    if self.text is None:
                        await self.store.run(*self.insert_statements(group), *beat)
                    else:  # the rows and their text segment: one transaction
                        await self.store.transaction(*self.insert_statements(group), *beat)
                except BaseException:
                    failed = True
                    raise
                written[start] = [row["id"] for row in group]

        # Two round trips in flight: the engine indexes two statements' text at once
        # (4,575 chunks on mem://: 5.5 s in one stream, 3.6 s in two, the same BM25 scores;
        # bench/fulltext_insert.py). When one stream fails, the other finishes the round
        # trip it has sent and stops: cancelling it would not stop the engine, whose
        # statements could then land after the caller has discarded the document.
        outcomes = await asyncio.gather(
            *(stream(n) for n in range(min(INSERT_STREAMS, len(starts)))),
            return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [i for start in starts for i in written[start]]

    def ids_free_statement(self, rows: Sequence[dict[str, Any]]) -> Statement:
        """Refuse (THROW :data:`IDS_TAKEN_MARK`) when a row's id is taken (by a chunk moved
        into another document): for a transaction that inserts ``rows`` as they are."""
        return Statement("IF array::len($free_ids.filter(|$i| record::exists($i))) > 0"
                         f" {{ THROW '{IDS_TAKEN_MARK}' }};",
                         {"free_ids": [row["id"] for row in rows]})

    async def _free_ids(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        (taken,) = await self.store.query("RETURN $ids.filter(|$i| record::exists($i));",
                                          {"ids": [row["id"] for row in rows]})
        if not taken:
            return list(rows)
        busy = {str(t) for t in taken}
        return [{**row, "id": RecordID(self.table, f"{row['id'].id}_{uuid.uuid4().hex[:8]}")}
                if str(row["id"]) in busy else row for row in rows]

    # ----- reusing what is stored -------------------------------------------------------
    async def text_hashes(self, doc: RecordID, generation: int) -> list[dict[str, Any]]:
        """Id and text hash of each chunk of one generation of a document, in order."""
        (rows,) = await self.store.query(
            f"SELECT id, chunk_index, text_hash FROM {self.table}"
            " WHERE document = $doc AND generation = $generation ORDER BY chunk_index;",
            {"doc": doc, "generation": generation})
        return list(rows or [])

    async def vectors_by_hash(self, hashes: Collection[str]) -> dict[str, list[float]]:
        """A stored vector for each of these text hashes that some chunk has (any chunk of
        any document: a store is bound to one model, so the same text has the same
        vector)."""
        out: dict[str, list[float]] = {}
        wanted = sorted(hashes)
        for start in range(0, len(wanted), 500):
            if self.apart:
                (rows,) = await self.store.query(
                    f"SELECT text_hash, type::record('{self.vector_table}', record::id(id))"
                    f".embedding AS embedding FROM {self.table} WHERE text_hash IN $hashes;",
                    {"hashes": wanted[start:start + 500]})
            else:
                (rows,) = await self.store.query(
                    f"SELECT text_hash, embedding FROM {self.table}"
                    " WHERE text_hash IN $hashes AND embedding != NONE;",
                    {"hashes": wanted[start:start + 500]})
            for row in rows or []:
                if row.get("embedding") is not None:
                    out.setdefault(row["text_hash"], row["embedding"])
        return out

    def move_statement(self, doc: RecordID, old: RecordID, generation: int,
                       moves: Sequence[Move]) -> Statement:
        """Make chunks of ``old`` (of its ``generation``) chunks of ``doc`` in their new
        places, keeping their text, vector and notebook copies; refuses (THROW) when any of
        them is no longer such a chunk. For the transaction that completes ``doc``, before
        ``old`` (and the rest of its chunks) is deleted."""
        if not moves:
            return Statement("")
        items = []
        for m in moves:
            c = m.chunk
            items.append({"id": m.id, "i": c.index, "s": c.char_start, "e": c.char_end,
                          "c": c.context, "p": c.first_page, "l": (c.last_page or c.first_page)
                          if c.first_page is not None else None})
        vectors = (f" UPDATE {self.vector_table} SET document = $mv_doc"
                   " WHERE chunk IN $mv_ids RETURN NONE;" if self.apart else "")
        if self.text is not None:
            vectors += self.text.moved_sql("mv_ids", "mv_doc")
        return Statement(
            "IF ((SELECT count() AS n FROM $mv_ids WHERE document = $mv_old"
            " AND generation = $mv_generation GROUP ALL)[0].n OR 0) != array::len($mv_ids)"
            f" {{ THROW '{STALE_MARK}' }};"
            " FOR $m IN $mv_items { UPDATE $m.id SET document = $mv_doc, generation = 0,"
            " chunk_index = $m.i, char_start = $m.s, char_end = $m.e, context = $m.c,"
            " page_number = $m.p,"
            " first_page = $m.p, last_page = $m.l RETURN NONE; };" + vectors,
            {"mv_ids": [m.id for m in moves], "mv_old": old, "mv_generation": generation,
             "mv_items": items, "mv_doc": doc})

    async def count(self, table: str | None = None) -> int:
        """Rows of the chunks table, or of ``table`` (a vector table)."""
        (rows,) = await self.store.query(
            f"SELECT count() AS n FROM {table or self.table} GROUP ALL;")
        return int(rows[0]["n"]) if rows else 0

    async def of_document(self, doc: RecordID) -> list[dict[str, Any]]:
        """The current generation's chunks of a document, in order, with their vectors."""
        embedding = "" if self.apart else ", embedding"
        (rows,) = await self.store.query(
            f"SELECT id, document, chunk_index, content, char_start, char_end, page_number,"
            f" last_page{embedding} FROM {self.table}"
            " WHERE document = $doc AND generation = $doc.generation ORDER BY chunk_index;",
            {"doc": doc})
        rows = list(rows or [])
        if self.apart and rows:
            (vectors,) = await self.store.query(
                f"SELECT chunk, embedding FROM {self.vector_table} WHERE document = $doc;",
                {"doc": doc})
            by_chunk = {str(v["chunk"]): v["embedding"] for v in vectors or []}
            for row in rows:
                row["embedding"] = by_chunk.get(str(row["id"]))
        return rows

    async def spans(self, doc: RecordID, *, first: int | None = None,
                    last: int | None = None) -> list[dict[str, Any]]:
        """Where the current generation's chunks of a document lie (index, character span,
        pages), in order; optionally only chunk indexes ``first`` to ``last``."""
        clauses = ["document = $doc", "generation = $doc.generation"]
        if first is not None:
            clauses.append("chunk_index >= $first")
        if last is not None:
            clauses.append("chunk_index <= $last")
        (rows,) = await self.store.query(
            f"SELECT id, chunk_index, char_start, char_end, page_number, last_page"
            f" FROM {self.table} WHERE {' AND '.join(clauses)} ORDER BY chunk_index;",
            {"doc": doc, "first": first, "last": last})
        return list(rows or [])

    async def get(self, chunk: RecordID) -> dict[str, Any] | None:
        """One chunk with its position (no vector)."""
        (row,) = await self.store.query(
            "SELECT id, document, chunk_index, char_start, char_end, page_number, last_page,"
            " content FROM ONLY $chunk;", {"chunk": chunk})
        return row if isinstance(row, dict) else None

    # ----- generations ----------------------------------------------------------------
    async def delete_generation(self, doc: RecordID, generation: int) -> None:
        await self.store.query(
            f"DELETE {self.table} WHERE document = $doc AND generation = $generation;",
            {"doc": doc, "generation": generation})

    async def delete_other_generations(self, doc: RecordID, generation: int) -> None:
        await self.store.query(
            f"DELETE {self.table} WHERE document = $doc AND generation != $generation;",
            {"doc": doc, "generation": generation})

    def switch_statements(self, doc: RecordID, generation: int, count: int,
                          notebooks: Sequence[RecordID]) -> list[Statement]:
        """The chunk side of switching ``doc`` to ``generation``: its vectors enter each of
        its notebooks' tables and every index's pending count (the document's own switch
        comes from DocumentStorage.generation_statement)."""
        statements = [self.pending_statement(count)]
        for nb in notebooks:
            statements += self._copy_statements(doc, nb, "$generation",
                                                {"generation": generation})
        return statements

    # ----- notebooks ------------------------------------------------------------------
    def notebook_table(self, notebook: RecordID) -> str:
        return self.names.notebook_vectors(notebook)

    async def define_notebook_table(self, notebook: RecordID) -> None:
        """Create a notebook's vector table and its HNSW index (idempotent)."""
        if not self.settings.vectors:
            return
        t, s = self.notebook_table(notebook), self.settings
        await self.store.query(
            f"DEFINE TABLE IF NOT EXISTS {t} SCHEMAFULL;"
            f" DEFINE FIELD IF NOT EXISTS chunk ON {t} TYPE record<{self.table}>"
            "   REFERENCE ON DELETE CASCADE;"
            f" DEFINE FIELD IF NOT EXISTS document ON {t} TYPE record<{self.names.documents}>;"
            f" DEFINE FIELD IF NOT EXISTS embedding ON {t} TYPE array<float>;"
            f" DEFINE INDEX IF NOT EXISTS {t}_document ON {t} FIELDS document;"
            f" DEFINE INDEX IF NOT EXISTS {t}_hnsw ON {t} FIELDS embedding HNSW"
            f" DIMENSION {int(self.dimension)} DIST {s.hnsw_distance}"
            f" TYPE F32 EFC {int(s.hnsw_efc)} M {int(s.hnsw_m)};")

    def drop_notebook_table_statement(self, notebook: RecordID) -> Statement:
        t = self.notebook_table(notebook)
        return Statement(f"REMOVE TABLE IF EXISTS {t};"
                         " DELETE $pending_key;", {"pending_key": self._pending_key(t)})

    def membership_statements(self, doc: RecordID, notebook: RecordID, *,
                              add: bool) -> list[Statement]:
        """The chunk side of putting a document in a notebook or taking it out: the chunks'
        notebook lists, and the notebook's vector copies."""
        change = "array::union" if add else "array::complement"
        statements = [Statement(
            f"UPDATE {self.table} SET notebooks = {change}(notebooks, [$nb])"
            " WHERE document = $doc RETURN NONE;", {"doc": doc, "nb": notebook})]
        if not self.settings.vectors:
            return statements
        t = self.notebook_table(notebook)
        statements.append(Statement(f"DELETE {t} WHERE document = $doc;", {"doc": doc}))
        if add:
            statements += self._copy_statements(doc, notebook, "$doc.generation")
        return statements

    def inherit_statements(self, doc: RecordID, notebooks: Sequence[RecordID], *,
                           moved_from: RecordID | None = None,
                           inserted: Sequence[RecordID] = ()) -> list[Statement]:
        """The chunk side of a new version of a source keeping the old one's notebooks.

        When chunks were moved from the old version (``moved_from``) they are in those
        notebooks already, vector copies included: their copies are re-pointed, and only
        the ``inserted`` chunks are added."""
        if moved_from is None:
            statements = [Statement(
                f"UPDATE {self.table} SET notebooks = $inherit_nbs WHERE document = $doc"
                " RETURN NONE;", {"doc": doc, "inherit_nbs": list(notebooks)})]
            for nb in notebooks:
                statements += self._copy_statements(doc, nb, None)
            return statements
        statements = [Statement("UPDATE $inherit_ids SET notebooks = $inherit_nbs RETURN NONE;",
                                {"inherit_ids": list(inserted),
                                 "inherit_nbs": list(notebooks)})]
        if not self.settings.vectors:
            return statements
        for nb in notebooks:
            t = self.notebook_table(nb)
            statements.append(Statement(
                f"UPDATE {t} SET document = $doc WHERE document = $inherit_old RETURN NONE;",
                {"doc": doc, "inherit_old": moved_from}))
            statements += self._copy_statements(doc, nb, None, ids=inserted)
        return statements

    def _copy_statements(self, doc: RecordID, notebook: RecordID, generation: str | None,
                         params: dict[str, Any] | None = None, *,
                         ids: Sequence[RecordID] | None = None) -> list[Statement]:
        """Copy a document's vectors (of the chunks of ``generation``, a SurrealQL
        expression, when given; or those of the chunks ``ids``) into a notebook's table
        (ids mirror the chunks') and count them as pending in that table's index."""
        if not self.settings.vectors:
            return []
        t = self.notebook_table(notebook)
        if ids is not None:
            if self.apart:  # the vector rows of these chunks (ids mirror the chunks')
                rows, fields = "$inherit_vids", "chunk, document, embedding"
                params = {"inherit_vids": [self._vector_id(i) for i in ids]}
                where = ""
            else:
                rows, fields = "$inherit_ids", "id AS chunk, document, embedding"
                params = {"inherit_ids": list(ids)}
                where = " WHERE embedding != NONE"
            return [Statement(
                f"INSERT INTO {t} (SELECT type::record('{t}', record::id(id)) AS id, {fields}"
                f" FROM {rows}{where}) RETURN NONE; UPSERT ${t}_pending SET pending_vectors ="
                f" (pending_vectors OR 0) + array::len((SELECT VALUE id FROM {rows}{where}))"
                " RETURN NONE;", {**params, f"{t}_pending": self._pending_key(t)},
                rows=len(ids))]
        if self.apart:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, chunk, document,"
                      f" embedding FROM {self.vector_table} WHERE document = $doc"
                      + (f" AND chunk.generation = {generation}" if generation else ""))
        else:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
                      f" document, embedding FROM {self.table}"
                      " WHERE document = $doc AND embedding != NONE"
                      + (f" AND generation = {generation}" if generation else ""))
        return [Statement(
            f"INSERT INTO {t} ({source}) RETURN NONE;"
            f" UPSERT ${t}_pending SET pending_vectors = (pending_vectors OR 0)"
            f" + ((SELECT VALUE count() FROM {t} WHERE document = $doc GROUP ALL)[0] OR 0)"
            " RETURN NONE;",
            {"doc": doc, f"{t}_pending": self._pending_key(t), **(params or {})})]

    # ----- HNSW graphs ----------------------------------------------------------------
    def _pending_key(self, table: str | None = None) -> RecordID:
        return self.names.index_state_key if table is None else \
            self.names.index_state_key_of(table)

    def pending_statement(self, count: int, table: str | None = None) -> Statement:
        """Count ``count`` new vectors as waiting outside an index's graph."""
        if not self.settings.vectors or count <= 0:
            return Statement("")
        return Statement("UPSERT $index_state SET pending_vectors ="
                         " (pending_vectors OR 0) + $pending_n RETURN NONE;",
                         {"index_state": self._pending_key(table), "pending_n": int(count)})

    async def pending(self, table: str | None = None) -> int:
        """Vectors written since the index's graph was last built."""
        (state,) = await self.store.query("SELECT * FROM ONLY $k;",
                                          {"k": self._pending_key(table)})
        return int((state or {}).get("pending_vectors") or 0)

    async def rebuild_if_due(self, *, force: bool = False) -> bool:
        """Build the shared HNSW graph when enough vectors wait in the engine's exact-scan
        queue (or with ``force``). Returns whether it was built."""
        if not self.settings.vectors:
            return False
        return await self._rebuild(self.names.hnsw_index, self.vector_table, None, force)

    async def rebuild_notebook_if_due(self, notebook: RecordID, *, force: bool = False) -> bool:
        """The same for one notebook's vector table."""
        if not self.settings.vectors:
            return False
        t = self.notebook_table(notebook)
        return await self._rebuild(f"{t}_hnsw", t, t, force)

    async def _due(self, table: str, pending: int) -> bool:
        """Whether ``pending`` vectors waiting outside ``table``'s graph call for a build:
        at least ``rebuild_threshold`` of them, and at least ``rebuild_fraction`` of the
        vectors in the graph (a build costs time in proportion to the whole table)."""
        if pending < self.settings.rebuild_threshold:
            return False
        if self.settings.rebuild_fraction <= 0:
            return True
        in_graph = await self.count(table) - pending
        return pending >= self.settings.rebuild_fraction * in_graph

    async def _rebuild(self, index: str, table: str, pending_of: str | None,
                       force: bool) -> bool:
        if not force and not await self._due(table, await self.pending(pending_of)):
            return False
        async with self.store.write_lock:
            seen = await self.pending(pending_of)  # again: another task may have built it
            if not force and not await self._due(table, seen):
                return False
            # vectors counted while the graph was built stay counted
            counted = Statement(
                "UPSERT $k SET pending_vectors = math::max([(pending_vectors OR 0) - $seen,"
                " 0]), rebuilt_at = time::now() RETURN NONE;",
                {"k": self._pending_key(pending_of), "seen": seen})
            self._building.add(index)
            try:
                if self.store.embedded:
                    await self.store.build_index(
                        Statement(f"REBUILD INDEX {index} ON {table};"), counted)
                    return True
                # A server builds a large graph for longer than the SDK waits for any reply
                # (30 s): build it in the background and wait for it here. Searches
                # meanwhile scan exactly (see vector_rows).
                try:
                    await self.store.query(f"REBUILD INDEX {index} ON {table} CONCURRENTLY;")
                except StoreError as exc:
                    if "currently building" not in str(exc):
                        raise
                    await self._wait_built(index, table)  # another process is building it
                    return False
                await self._wait_built(index, table)
                await self.store.run(counted)
                return True
            finally:
                self._building.discard(index)

    async def vector_index_ready(self, index: str, table: str) -> bool:
        """False while the engine builds the index: its k-NN operator then returns every row.

        A store this process opened on an embedded engine builds only when this process
        does, so that is all there is to know; elsewhere (a server, a lent connection) the
        engine is asked, at most every few seconds per index.
        """
        if index in self._building:
            return False
        if self.store.owned and self.store.embedded:
            return True
        now = asyncio.get_running_loop().time()
        known = self._ready_until.get(index)
        if known is not None and known > now:
            return True
        (info,) = await self.store.query(f"INFO FOR INDEX {index} ON {table};")
        building = (info or {}).get("building") or {}
        ready = str(building.get("status", "ready")) == "ready"
        if ready:
            self._ready_until[index] = now + READY_CHECK_SECONDS
        else:
            self._ready_until.pop(index, None)
        return ready

    # ----- search ---------------------------------------------------------------------
    async def text_rows(self, terms: str, limit: int, filters: Filters,
                        careful: bool = True) -> list[dict[str, Any]]:
        """Chunks matching any of ``terms`` by BM25, best first: id, document and
        ``score`` only (see :meth:`details`); with ``careful``, visible ones only."""
        clauses, params = filter_conditions(filters)
        if careful:
            clauses.append(_VISIBLE)
        if self.text is not None:
            return await self._ranked_rows(terms, limit, clauses, params)
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            f"SELECT {_LEG_FIELDS}, search::score(1) AS score FROM {self.table}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return list(rows or [])

    async def _ranked_rows(self, terms: str, limit: int, clauses: list[str],
                           params: dict[str, Any]) -> list[dict[str, Any]]:
        """The text index's ranking, walked best first until ``limit`` chunks pass the
        conditions (the chunks' rows are read for the candidates only, more each round)."""
        assert self.text is not None
        return await self._walk(await self.text.rank(self.text.analyzer.terms(terms)),
                                limit, clauses, params)

    async def _walk(self, ranked: Ranked, limit: int, clauses: list[str],
                    params: dict[str, Any]) -> list[dict[str, Any]]:
        """The first ``limit`` chunks of ``ranked`` that pass the conditions, with their
        scores."""
        documents = self.names.documents
        if not clauses:  # nothing to check: the index knows the chunks' documents
            best = ranked.best(0, limit)
            known = ranked.documents(0, limit)
            if known is not None:  # ids as ``table:key`` text (what a hit holds)
                table = self.table
                return [{"id": f"{table}:{key}", "document": f"{documents}:{document}",
                         "score": score} for (key, score), document in zip(best, known)]
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        out: list[dict[str, Any]] = []
        start, step = 0, limit + max(10, limit // 4)
        while start < len(ranked) and len(out) < limit:
            best = ranked.best(start, start + step)
            # keys in, keys out: record ids cost the client's CBOR far more than strings
            (rows,) = await self.store.query(
                f"SELECT VALUE [record::id(id), record::id(document)] FROM"
                f" $candidates.map(|$k| type::record('{self.table}', $k)){where};",
                {**params, "candidates": [k for k, _ in best]}, read_only=True)
            passed = {key: document for key, document in rows or []}
            for key, score in best:
                document = passed.get(key)
                if document is not None:
                    out.append({"id": RecordID(self.table, key),
                                "document": RecordID(documents, document), "score": score})
            start += step
            step *= 4
        return out[:limit]

    async def vector_rows(self, vector: list[float], k: int, ef: int, filters: Filters,
                          careful: bool = True) -> list[dict[str, Any]]:
        """The ``k`` chunks nearest to ``vector``: id, document and ``distance`` only (see
        :meth:`details`), visible ones only. The text index's segments are scanned exactly
        when they can answer; else, and in a notebook's scope (which walks that notebook's
        own graph), the HNSW graph answers."""
        if self.text is not None and filters.notebook is None:
            ranked = await self.text.nearest(vector)
            if ranked is not None:
                clauses, params = filter_conditions(filters)
                if careful:
                    clauses.append(_VISIBLE)
                distance = self.settings.hnsw_distance
                return [{"id": r["id"], "document": r["document"],
                         "distance": distance_of(r["score"], distance)}
                        for r in await self._walk(ranked, k, clauses, params)]
        if filters.notebook is not None:
            table = self.notebook_table(filters.notebook)
            index, fields, check = f"{table}_hnsw", _LEG_FIELDS_VIA_CHUNK, _VISIBLE_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.", notebook_scoped=True)
        elif self.apart:
            table, index = self.vector_table, self.names.hnsw_index
            fields, check = _LEG_FIELDS_VIA_CHUNK, _VISIBLE_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.")
        else:
            table, index, fields, check = (self.table, self.names.hnsw_index, _LEG_FIELDS,
                                           _VISIBLE)
            clauses, params = filter_conditions(filters)
        if careful:  # a condition inside the scan, so that k visible rows come back
            clauses.append(check)
        if await self.vector_index_ready(index, table):
            clauses.append(f"embedding <|{int(k)},{int(ef)}|> $v")
            distance = "vector::distance::knn()"
        else:  # the graph is being built: the operator would return every row
            clauses.append("embedding != NONE")
            distance = "(1 - vector::similarity::cosine(embedding, $v))"
        (rows,) = await self.store.query(
            f"SELECT {fields}, {distance} AS distance FROM {table}"
            f" WHERE {' AND '.join(clauses)} ORDER BY distance, id LIMIT {int(k)};",
            {**params, "v": vector},
        )
        return [r for r in rows or [] if r.get("distance") is not None]

    async def total(self) -> int:
        """How many chunks there are (known for a minute at a time)."""
        now = asyncio.get_running_loop().time()
        if self._total is None or self._total[1] < now:
            self._total = (await self.count(), now + COUNT_CACHE_SECONDS)
        return self._total[0]

    def known_term_counts(self, words: Sequence[str]) -> dict[str, int]:
        """In how many chunks each query word occurs (its document frequency), for the words
        counted already; the others are counted in the background (a count costs about what
        the word costs in a search: it is never paid by the search that first meets it) and
        remembered for ``TERM_CACHE_SECONDS``."""
        now = asyncio.get_running_loop().time()
        known, missing = {}, []
        for word in words:
            entry = self._term_counts.get(word)
            if entry is not None and entry[1] >= now:
                known[word] = entry[0]
            elif word not in self._counting:
                missing.append(word)
        if missing:
            self._counting.update(missing)
            task = asyncio.get_running_loop().create_task(self._count_terms(missing))
            self._counters.add(task)
            task.add_done_callback(self._counters.discard)
        return known

    async def count_terms(self, words: Sequence[str]) -> None:
        """Count the words now (so that the next searches know their frequencies)."""
        now = asyncio.get_running_loop().time()
        missing = sorted({w for w in words if w not in self._term_counts
                          or self._term_counts[w][1] < now})
        await self._count_terms(missing)

    async def _count_terms(self, words: list[str]) -> None:
        try:
            for word in words:  # one at a time: searches go first
                if self._stop_counting:
                    break
                (rows,) = await self.store.query(
                    f"SELECT count() AS n FROM {self.table} WHERE content @1@ $w GROUP ALL;",
                    {"w": word})
                if len(self._term_counts) > TERM_CACHE_SIZE:
                    self._term_counts.clear()
                self._term_counts[word] = (int(rows[0]["n"]) if rows else 0,
                                           asyncio.get_running_loop().time()
                                           + TERM_CACHE_SECONDS)
        except Exception:  # the store closed: counted another time
            pass
        finally:
            self._counting.difference_update(words)

    async def stop_counting(self) -> None:
        """Let the background counts end after the statement each is running, and wait for
        them. Not cancelled: a cancelled query goes on in the engine, so the store would be
        closed with a statement still running in it."""
        self._stop_counting = True
        await asyncio.gather(*self._counters, return_exceptions=True)
        if self.text is not None:
            await self.text.stop()

    async def text_index_stats(self) -> dict[str, Any]:
        if self.text is None:
            return {"kind": "engine"}
        return {"kind": "segments", **await self.text.stats()}

    def written(self) -> None:
        """Chunks were written: merge the text index's segments if a level is full."""
        if self.text is not None:
            self.text.merge_soon()

    async def details(self, chunks: Sequence[RecordID]) -> dict[str, dict[str, Any]]:
        """What a hit shows of each chunk (text, position, its document's source, title and
        MIME type), by chunk id. Legs return ids and scores only: every field a statement
        returns is decoded in Python, so text is read for the final hits alone."""
        if not chunks:
            return {}
        (rows,) = await self.store.query(f"SELECT {_DETAIL_FIELDS} FROM $ids;",
                                         {"ids": list(chunks)}, read_only=True)
        return {id_text(r["id"]): r for r in rows or []}

    # ----- re-embedding with another model --------------------------------------------
    async def drop_vector_indexes(self) -> None:
        """Remove the shared HNSW index and every notebook's vector table (they hold the
        old model's vectors; :meth:`recopy_notebook` makes them again)."""
        tables = await self.notebook_tables()
        await self.store.query(
            f"REMOVE INDEX IF EXISTS {self.names.hnsw_index} ON {self.vector_table};"
            + "".join(f" REMOVE TABLE IF EXISTS {t};" for t in tables))

    async def notebook_tables(self) -> list[str]:
        (info,) = await self.store.query("INFO FOR DB;")
        prefix = f"{self.table}_nbv_"
        return sorted(t for t in ((info or {}).get("tables") or {}) if t.startswith(prefix))

    async def page_after(self, last: RecordID | None, limit: int) -> list[dict[str, Any]]:
        """Chunks (id, document, content, context) in id order after ``last``, for a pass
        over every chunk."""
        (rows,) = await self.store.query(
            f"SELECT id, document, content, context FROM {self.table}"
            + (" WHERE id > $last" if last is not None else "")
            + f" ORDER BY id LIMIT {int(limit)};", {"last": last})
        return list(rows or [])

    async def set_vectors(self, rows: Sequence[dict[str, Any]], vectors: Any) -> None:
        """Give chunks (rows of :meth:`page_after`) new vectors."""
        items = [{"id": r["id"], "document": r["document"], "v": [float(x) for x in vector]}
                 for r, vector in zip(rows, vectors)]
        if self.apart:
            write = (f"FOR $u IN $batch {{ UPSERT type::record('{self.vector_table}',"
                     " record::id($u.id)) CONTENT { chunk: $u.id, document: $u.document,"
                     " embedding: $u.v } RETURN NONE; };")
        else:
            write = "FOR $u IN $batch { UPDATE $u.id SET embedding = $u.v RETURN NONE; };"
        batch = self.settings.insert_batch_size
        for start in range(0, len(items), batch):
            some = items[start:start + batch]
            await self.store.query(write, {"batch": some}, rows=len(some))

    async def ensure_vector_index(self) -> None:
        """Define the shared HNSW index if it is missing (a new store, or one whose vectors
        just moved to their own table)."""
        if not self.settings.vectors:
            return
        (info,) = await self.store.query(f"INFO FOR TABLE {self.vector_table};")
        if self.names.hnsw_index not in ((info or {}).get("indexes") or {}):
            await self.define_vector_index()

    async def define_vector_index(self, *also: Statement) -> None:
        """Define the shared HNSW index for this storage's dimension and build its graph
        from the stored vectors (nothing waits outside it then); ``also`` runs with it."""
        counted = Statement("UPSERT $index_state SET pending_vectors = 0,"
                            " rebuilt_at = time::now();",
                            {"index_state": self._pending_key()})
        define = hnsw_index_sql(self.names, self.settings, self.dimension, self.vector_table)
        if self.apart:
            define = vector_table_sql(self.names) + " " + define
        index = self.names.hnsw_index
        self._building.add(index)
        try:
            if self.store.embedded:
                await self.store.build_index(Statement(define), counted, *also)
                return
            # on a server, in the background (see _rebuild)
            await self.store.query(define.rstrip(";") + " CONCURRENTLY;")
            await self._wait_built(index, self.vector_table)
            await self.store.run(counted, *also)
        finally:
            self._building.discard(index)

    async def _wait_built(self, index: str, table: str) -> None:
        while True:
            (info,) = await self.store.query(f"INFO FOR INDEX {index} ON {table};")
            if str(((info or {}).get("building") or {}).get("status", "ready")) == "ready":
                return
            await asyncio.sleep(REMOTE_BUILD_POLL_SECONDS)

    async def recopy_notebook(self, notebook: RecordID) -> None:
        """Fill a (re)defined notebook table from its notebook's current chunks."""
        await self.define_notebook_table(notebook)
        t = self.notebook_table(notebook)
        if self.apart:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, chunk, document,"
                      f" embedding FROM {self.vector_table} WHERE chunk.notebooks CONTAINS $nb"
                      " AND chunk.generation = document.generation")
        else:
            source = (f"SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
                      f" document, embedding FROM {self.table} WHERE notebooks CONTAINS $nb"
                      " AND embedding != NONE AND generation = document.generation")
        await self.store.query(
            f"INSERT INTO {t} ({source}) RETURN NONE;"
            f" UPSERT $k SET pending_vectors = (SELECT VALUE count() FROM {t}"
            " GROUP ALL)[0] OR 0 RETURN NONE;",
            {"nb": notebook, "k": self._pending_key(t)})


def is_visible(row: dict[str, Any]) -> bool:
    """Whether a chunk row (with its visibility fields) may be shown: chunks of a document
    still being written, of a generation being replaced, or left by a crash (until
    recovery) never are."""
    return row.get("complete") is True and \
        (row.get("generation") or 0) == (row.get("doc_generation") or 0)


