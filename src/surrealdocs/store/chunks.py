"""Chunk and vector storage: every statement that writes the ``chunks`` table, the notebooks'
vector tables and the counters that decide when an HNSW graph is rebuilt.

- **Chunks** carry their text, position (index, character span, pages), embedding, the
  *generation* of their document they belong to, and the document's notebooks. Rows are
  inserted ``settings.insert_batch_size`` per statement: the engine's full-text index makes
  large statements and transactions superlinear (1,000 chunks in one transaction: 62 s and
  10.6 GB, against 2.3 s as ten 100-row statements).
- **Reuse**: every chunk carries ``text_hash``, the SHA-256 of its text, computed by the
  engine (migration 8). A new version of a source takes the chunks of the old version whose
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
  wait, :meth:`ChunkStorage.rebuild_if_due` builds the graph. Counters live in the meta table
  (``index_state`` records), one per HNSW index.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from surrealdb import RecordID

from ..chunk import Chunk
from ..config import Settings
from ..errors import StoreError
from ..filters import Filters
from .conditions import filter_conditions
from .connection import STALE_MARK, Statement, Store
from .schema import hnsw_index_sql

STATEMENTS_PER_ROUND_TRIP = 10
REMOTE_BUILD_POLL_SECONDS = 0.5
READY_CHECK_SECONDS = 5.0

# What a leg returns per chunk: enough to rank, collapse per document and hide chunks that
# are not visible (an incomplete document's, or a replaced generation's).
_LEG_FIELDS = ("id, document, document.complete AS complete, generation,"
               " document.generation AS doc_generation")
# the same read through the `chunk` link of a notebook's vector table
_LEG_FIELDS_VIA_CHUNK = ("chunk AS id, document, document.complete AS complete,"
                         " chunk.generation AS generation,"
                         " document.generation AS doc_generation")
# What a hit shows.
_DETAIL_FIELDS = (
    "id, document, content, chunk_index, char_start, char_end, page_number, last_page,"
    " document.source AS source, document.title AS title, document.mime_type AS mime_type"
)


@dataclass(frozen=True)
class Move:
    """A stored chunk that becomes chunk ``chunk.index`` of another document (same text,
    its new place)."""

    id: RecordID
    chunk: Chunk


class ChunkStorage:
    """The chunks of one store, the notebooks' vector copies, and their HNSW graphs."""

    def __init__(self, store: Store, settings: Settings, dimension: int) -> None:
        self.store = store
        self.settings = settings
        self.dimension = dimension
        self.names = store.names
        self.table = store.names.chunks
        self._building: set[str] = set()  # indexes this process is building now
        self._ready_until: dict[str, float] = {}  # indexes seen ready, until when to trust it

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

    async def insert(self, rows: Sequence[dict[str, Any]],
                     heartbeat: Statement | None = None) -> list[RecordID]:
        """Insert rows, ``insert_batch_size`` per statement, several statements per round
        trip (each statement is its own transaction). ``heartbeat`` runs with every round
        trip (a writer marking its document as still being written). Returns the ids the
        rows got.

        A chunk moved into a newer document keeps its id, which derives from the document
        it was first written for: should that document's text come back, a row may find
        its id taken. Such a row gets a fresh id instead.
        """
        batch = self.settings.insert_batch_size
        step = batch * STATEMENTS_PER_ROUND_TRIP
        ids: list[RecordID] = []
        for start in range(0, len(rows), step):
            group = await self._free_ids(rows[start:start + step])
            statements = [Statement(f"INSERT INTO {self.table} $rows{n} RETURN NONE;",
                                    {f"rows{n}": list(group[i:i + batch])})
                          for n, i in enumerate(range(0, len(group), batch))]
            await self.store.run(*statements, *([heartbeat] if heartbeat else []))
            ids += [row["id"] for row in group]
        return ids

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
            (rows,) = await self.store.query(
                f"SELECT text_hash, embedding FROM {self.table}"
                " WHERE text_hash IN $hashes AND embedding != NONE;",
                {"hashes": wanted[start:start + 500]})
            for row in rows or []:
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
                          "p": c.first_page, "l": (c.last_page or c.first_page)
                          if c.first_page is not None else None})
        return Statement(
            "IF ((SELECT count() AS n FROM $mv_ids WHERE document = $mv_old"
            " AND generation = $mv_generation GROUP ALL)[0].n OR 0) != array::len($mv_ids)"
            f" {{ THROW '{STALE_MARK}' }};"
            " FOR $m IN $mv_items { UPDATE $m.id SET document = $mv_doc, generation = 0,"
            " chunk_index = $m.i, char_start = $m.s, char_end = $m.e, page_number = $m.p,"
            " first_page = $m.p, last_page = $m.l RETURN NONE; };",
            {"mv_ids": [m.id for m in moves], "mv_old": old, "mv_generation": generation,
             "mv_items": items, "mv_doc": doc})

    async def count(self) -> int:
        (rows,) = await self.store.query(f"SELECT count() AS n FROM {self.table} GROUP ALL;")
        return int(rows[0]["n"]) if rows else 0

    async def of_document(self, doc: RecordID) -> list[dict[str, Any]]:
        """The current generation's chunks of a document, in order, with their vectors."""
        (rows,) = await self.store.query(
            f"SELECT id, document, chunk_index, content, char_start, char_end, page_number,"
            f" last_page, embedding FROM {self.table}"
            " WHERE document = $doc AND generation = $doc.generation ORDER BY chunk_index;",
            {"doc": doc})
        return list(rows or [])

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
            statements += self._copy_statements(doc, nb, " AND generation = $generation",
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
            statements += self._copy_statements(doc, notebook,
                                                " AND generation = $doc.generation")
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
                statements += self._copy_statements(doc, nb, "")
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
            statements += self._copy_statements(doc, nb, "", ids=inserted)
        return statements

    def _copy_statements(self, doc: RecordID, notebook: RecordID, condition: str,
                         params: dict[str, Any] | None = None, *,
                         ids: Sequence[RecordID] | None = None) -> list[Statement]:
        """Copy a document's vectors (or those of the chunks ``ids``) into a notebook's
        table (ids mirror the chunks') and count them as pending in that table's index."""
        if not self.settings.vectors:
            return []
        t = self.notebook_table(notebook)
        if ids is not None:
            return [Statement(
                f"INSERT INTO {t} (SELECT type::record('{t}', record::id(id)) AS id,"
                " id AS chunk, document, embedding FROM $inherit_ids WHERE embedding != NONE)"
                f" RETURN NONE; UPSERT ${t}_pending SET pending_vectors ="
                " (pending_vectors OR 0) + array::len((SELECT VALUE id FROM $inherit_ids"
                " WHERE embedding != NONE)) RETURN NONE;",
                {"inherit_ids": list(ids), f"{t}_pending": self._pending_key(t)})]
        return [Statement(
            f"INSERT INTO {t} (SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
            f" document, embedding FROM {self.table}"
            f" WHERE document = $doc AND embedding != NONE{condition}) RETURN NONE;"
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
        return await self._rebuild(self.names.hnsw_index, self.table, None, force)

    async def rebuild_notebook_if_due(self, notebook: RecordID, *, force: bool = False) -> bool:
        """The same for one notebook's vector table."""
        if not self.settings.vectors:
            return False
        t = self.notebook_table(notebook)
        return await self._rebuild(f"{t}_hnsw", t, t, force)

    async def _rebuild(self, index: str, table: str, pending_of: str | None,
                       force: bool) -> bool:
        if not force and await self.pending(pending_of) < self.settings.rebuild_threshold:
            return False
        async with self.store.write_lock:
            seen = await self.pending(pending_of)  # again: another task may have built it
            if not force and seen < self.settings.rebuild_threshold:
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
    async def text_rows(self, terms: str, limit: int, filters: Filters) -> list[dict[str, Any]]:
        """Chunks matching any of ``terms`` by BM25, best first: id, document and
        ``score`` only (see :meth:`details`), visible ones only."""
        clauses, params = filter_conditions(filters)
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            f"SELECT {_LEG_FIELDS}, search::score(1) AS score FROM {self.table}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return visible(rows)

    async def vector_rows(self, vector: list[float], k: int, ef: int,
                          filters: Filters) -> list[dict[str, Any]]:
        """The ``k`` chunks nearest to ``vector``: id, document and ``distance`` only (see
        :meth:`details`), visible ones only. A notebook filter walks that notebook's own
        graph."""
        if filters.notebook is not None:
            table = self.notebook_table(filters.notebook)
            index, fields = f"{table}_hnsw", _LEG_FIELDS_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.", notebook_scoped=True)
        else:
            table, index, fields = self.table, self.names.hnsw_index, _LEG_FIELDS
            clauses, params = filter_conditions(filters)
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
        return [r for r in visible(rows) if r.get("distance") is not None]

    async def details(self, chunks: Sequence[RecordID]) -> dict[str, dict[str, Any]]:
        """What a hit shows of each chunk (text, position, its document's source, title and
        MIME type), by chunk id. Legs return ids and scores only: every field a statement
        returns is decoded in Python, so text is read for the final hits alone."""
        if not chunks:
            return {}
        (rows,) = await self.store.query(f"SELECT {_DETAIL_FIELDS} FROM $ids;",
                                         {"ids": list(chunks)})
        return {str(r["id"]): r for r in rows or []}

    # ----- re-embedding with another model --------------------------------------------
    async def drop_vector_indexes(self) -> None:
        """Remove the shared HNSW index and every notebook's vector table (they hold the
        old model's vectors; :meth:`recopy_notebook` makes them again)."""
        tables = await self.notebook_tables()
        await self.store.query(
            f"REMOVE INDEX IF EXISTS {self.names.hnsw_index} ON {self.table};"
            + "".join(f" REMOVE TABLE IF EXISTS {t};" for t in tables))

    async def notebook_tables(self) -> list[str]:
        (info,) = await self.store.query("INFO FOR DB;")
        prefix = f"{self.table}_nbv_"
        return sorted(t for t in ((info or {}).get("tables") or {}) if t.startswith(prefix))

    async def page_after(self, last: RecordID | None, limit: int) -> list[dict[str, Any]]:
        """Chunks (id, content) in id order after ``last``, for a pass over every chunk."""
        (rows,) = await self.store.query(
            f"SELECT id, content FROM {self.table}"
            + (" WHERE id > $last" if last is not None else "")
            + f" ORDER BY id LIMIT {int(limit)};", {"last": last})
        return list(rows or [])

    async def set_vectors(self, updates: Iterable[tuple[RecordID, Any]]) -> None:
        items = [{"id": rid, "v": [float(x) for x in vector]} for rid, vector in updates]
        batch = self.settings.insert_batch_size
        for start in range(0, len(items), batch):
            await self.store.query(
                "FOR $u IN $batch { UPDATE $u.id SET embedding = $u.v RETURN NONE; };",
                {"batch": items[start:start + batch]})

    async def define_vector_index(self, *also: Statement) -> None:
        """Define the shared HNSW index for this storage's dimension and build its graph
        from the stored vectors (nothing waits outside it then); ``also`` runs with it."""
        counted = Statement("UPSERT $index_state SET pending_vectors = 0,"
                            " rebuilt_at = time::now();",
                            {"index_state": self._pending_key()})
        define = hnsw_index_sql(self.names, self.settings, self.dimension)
        index = self.names.hnsw_index
        self._building.add(index)
        try:
            if self.store.embedded:
                await self.store.build_index(Statement(define), counted, *also)
                return
            # on a server, in the background (see _rebuild)
            await self.store.query(define.rstrip(";") + " CONCURRENTLY;")
            await self._wait_built(index, self.table)
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
        await self.store.query(
            f"INSERT INTO {t} (SELECT type::record('{t}', record::id(id)) AS id, id AS chunk,"
            f" document, embedding FROM {self.table} WHERE notebooks CONTAINS $nb"
            " AND embedding != NONE AND generation = document.generation) RETURN NONE;"
            f" UPSERT $k SET pending_vectors = (SELECT VALUE count() FROM {t}"
            " GROUP ALL)[0] OR 0 RETURN NONE;",
            {"nb": notebook, "k": self._pending_key(t)})


def visible(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Rows whose document is complete and current: chunks of a document still being
    written, of a generation being replaced, or left by a crash (until recovery) are never
    shown."""
    return [r for r in rows or [] if r.get("complete") is True
            and (r.get("generation") or 0) == (r.get("doc_generation") or 0)]

