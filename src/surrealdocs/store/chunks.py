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
  wait, and ``settings.rebuild_fraction`` of the graph's size, :meth:`VectorGraphs.rebuild_if_due`
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
from ..parts.results import id_text
from .connection import STALE_MARK, Statement, Store
from .names import Names
from .segments.index import TextIndex
from .vectorgraphs import VectorGraphs
from .wire import wire_vector

STATEMENTS_PER_ROUND_TRIP = 10
INSERT_STREAMS = 2  # round trips of one document's inserts in flight at once
IDS_TAKEN_MARK = "surrealdocs: chunk ids taken"

# What a hit shows, and whether its chunk is visible (its document complete, its generation
# current).
_VISIBILITY = ("document.complete AS complete, generation,"
               " document.generation AS doc_generation")
_DETAIL_FIELDS = (
    "id, document, content, context, chunk_index, char_start, char_end, page_number,"
    " last_page, document.source AS source, document.title AS title,"
    " document.mime_type AS mime_type, document.user_metadata AS metadata, "
    + _VISIBILITY
)


def ft_index_sql(names: Names, settings: Settings, *, overwrite: bool = False) -> str:
    clause = "OVERWRITE" if overwrite else "IF NOT EXISTS"
    return (f"DEFINE INDEX {clause} {names.ft_index} ON {names.chunks} FIELDS content"
            f" FULLTEXT ANALYZER {names.analyzer}"
            f" BM25({float(settings.bm25_k1)},{float(settings.bm25_b)}) HIGHLIGHTS;")


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
        # the text index (None: the engine's FULLTEXT index ranks BM25)
        self.text = TextIndex(store, settings, self.table,
                              self.vector_table if settings.vectors else None) \
            if settings.chunked and settings.text_index == "segments" else None
        # the vectors' HNSW graphs and the notebooks' vector tables (vectorgraphs.py); the
        # search legs that read them are in legs/
        self.graphs = VectorGraphs(store, settings, dimension, self.table, self.vector_table,
                                   vectors_apart, self.count)

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

    def _split(self, rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]],
                                                               list[dict[str, Any]]]:
        """Chunk rows and, when vectors live apart, their vector rows."""
        if not self.apart:
            return [{**row, "embedding": wire_vector(row["embedding"])}
                    if row.get("embedding") is not None else row for row in rows], []
        chunks, vectors = [], []
        for row in rows:
            chunk = dict(row)
            embedding = chunk.pop("embedding", None)
            chunks.append(chunk)
            if embedding is not None:
                vectors.append({"id": RecordID(self.vector_table, row["id"].id),
                                "chunk": row["id"], "document": row["document"],
                                "embedding": wire_vector(embedding)})
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
                    group = list(rows[start:start + step])
                    beat = [heartbeat] if heartbeat and number == 0 else []
                    if self.text is None:  # statements that land one by one: ids checked first
                        group = await self._free_ids(group)
                        await self.store.run(*self.insert_statements(group), *beat)
                    else:  # the rows and their text segment: one transaction, which a
                        # taken id refuses whole (then the ids are checked)
                        try:
                            await self.store.transaction(*self.insert_statements(group), *beat)
                        except StoreError as exc:
                            if not self._id_taken(exc):
                                raise
                            group = await self._free_ids(group)
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

    def _id_taken(self, exc: StoreError) -> bool:
        message = str(exc)
        return "already exists" in message and any(
            f"`{table}:" in message for table in (self.table, self.vector_table))

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
        statements = [self.graphs.pending_statement(count)]
        for nb in notebooks:
            statements += self.graphs.copy_statements(doc, nb, "$generation",
                                                {"generation": generation})
        return statements

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
        t = self.graphs.notebook_table(notebook)
        statements.append(Statement(f"DELETE {t} WHERE document = $doc;", {"doc": doc}))
        if add:
            statements += self.graphs.copy_statements(doc, notebook, "$doc.generation")
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
                statements += self.graphs.copy_statements(doc, nb, None)
            return statements
        statements = [Statement("UPDATE $inherit_ids SET notebooks = $inherit_nbs RETURN NONE;",
                                {"inherit_ids": list(inserted),
                                 "inherit_nbs": list(notebooks)})]
        if not self.settings.vectors:
            return statements
        for nb in notebooks:
            t = self.graphs.notebook_table(nb)
            statements.append(Statement(
                f"UPDATE {t} SET document = $doc WHERE document = $inherit_old RETURN NONE;",
                {"doc": doc, "inherit_old": moved_from}))
            statements += self.graphs.copy_statements(doc, nb, None, ids=inserted)
        return statements

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


def is_visible(row: dict[str, Any]) -> bool:
    """Whether a chunk row (with its visibility fields) may be shown: chunks of a document
    still being written, of a generation being replaced, or left by a crash (until
    recovery) never are."""
    return row.get("complete") is True and \
        (row.get("generation") or 0) == (row.get("doc_generation") or 0)


