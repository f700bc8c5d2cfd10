"""The text index: BM25 ranked in this process over postings that surrealdocs keeps in
SurrealDB (issue 28). This module owns its tables and all their SurrealQL.

The engine's FULLTEXT index scores every matching row before ``LIMIT`` and is most of the
cost of writing a chunk. Here the store keeps immutable *segments* and this process ranks:

- ``<chunks>_text_segment``: one header per segment (its chunk count, their total length,
  how many blocks its postings have, ``live``).
- ``<chunks>_text_map``: per segment, each ordinal's chunk key, document key and length,
  and its *origin* (the segment the chunk was first written in, which the chunk row keeps
  in ``text_seg``).
- ``<chunks>_text_block``: a segment's postings, its terms split into ``blocks`` records by
  a hash of the term (a small segment is one record; a search reads only the blocks of the
  query's terms). A block holds its terms, their posting counts, and each posting's ordinal
  (``<u4``) and term frequency (``<u2``) as packed ``bytes``.
- ``<chunks>_text_dead``: a deleted chunk (its id and origin), written by an event in the
  transaction that deletes the row, whatever deletes it (a cascade too).
- ``<chunks>_text_vector``: a segment's vectors (the chunks' embeddings as int8 codes with
  a scale per row, in part records; :mod:`.codes`), so that the vector leg scans
  them in this process, merged and deleted with the postings.
- ``<chunks>_text_moved``: a chunk moved into another document (a new version of a source
  keeps its unchanged chunks), keyed by chunk and origin, written by the statement that
  moves it: searches group hits by document without reading the chunks' rows.
- ``<chunks>_text_lease``: who merges or rebuilds now.

A write of chunks adds its segment in the same transaction, so a chunk is findable by text
exactly when its row is committed. Merges (tiered: ten segments of a level into one of the
next, or one segment whose chunks are mostly deleted) write the new segment unpublished,
then publish it and remove its inputs and the deletions they absorbed in one transaction,
under the lease; a crash before that leaves the inputs live and the unpublished segment to
the next merger, which removes it.

Segments never change, so what this process decoded of them (maps, blocks) is kept in a
bounded cache keyed by segment. Statistics (chunk count, average length, document
frequencies) are exact over the live chunks; the IDF is Lucene's, never zero.
"""

from __future__ import annotations

import math
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from surrealdb import RecordID

from ...config import Settings
from ...errors import StoreError
from ...parts.analyzer import analyzer_for
from ..connection import Statement, Store
from .codes import (
    PARTS_PER_STATEMENT,
    SCAN_MAX_BYTES,
    SCANNED_DISTANCES,
    VectorSet,
    part_bytes,
    part_records,
)
from .maintenance import TextIndexMaintenance
from .postings import (
    BLOCKS_PER_STATEMENT,
    DAMAGED,
    POSTINGS_CACHE_BYTES,
    RANKED_CACHE,
    Block,
    Built,
    MissingRecord,
    Ranked,
    T,
    View,
    build,
    bytes_of,
    lease_owner,
    new_segment_key,
)
from .reader import SegmentReader
from .vectors import SegmentVectors, background, held, scan, similarity_of


class TextIndex:
    """The text index of one store's chunks."""

    def __init__(self, store: Store, settings: Settings, chunks_table: str,
                 vector_table: str | None = None) -> None:
        """``vector_table``: where the chunks' vectors are (the chunks table, or their own),
        ``None`` in a store without vectors."""
        self.store = store
        self.settings = settings
        self.chunks_table = chunks_table
        self.vector_table = vector_table
        self.vector_part_table = f"{chunks_table}_text_vector"
        # the live segments' vectors, decoded (immutable; dropped when a segment goes)
        self.vectors = SegmentVectors(store, self.vector_part_table)
        # the live view of the segments and their decoded records (reader.py)
        self.reader = reader = SegmentReader(store, chunks_table, self.vectors)
        self.segment_table, self.map_table = reader.segment_table, reader.map_table
        self.block_table, self.dead_table = reader.block_table, reader.dead_table
        self.moved_table = reader.moved_table
        self.lease_key = RecordID(f"{chunks_table}_text_lease", "merge")
        self.analyzer = analyzer_for(store.names.language)
        self.owner = lease_owner()
        self._last_idf: tuple[tuple[str, ...], dict[str, float]] | None = None
        self._ranked: OrderedDict[tuple[Any, ...], Ranked] = OrderedDict()
        # what this process wrote: segments, merges, bytes of postings and maps (for the
        # write-amplification figure, bench/text_index_writes.py)
        self.written = {"segments": 0, "merges": 0, "bytes": 0, "records": 0}
        self.maintenance = TextIndexMaintenance(self)

    # ----- schema --------------------------------------------------------------------
    @staticmethod
    def schema_sql_for(chunks_table: str) -> str:
        C = chunks_table
        dead = f"{C}_text_dead"
        tables = "".join(f" DEFINE TABLE IF NOT EXISTS {C}_text_{t} SCHEMALESS;"
                         for t in ("segment", "map", "block", "dead", "lease", "vector",
                                   "moved"))
        return (tables
                + f" DEFINE FIELD IF NOT EXISTS text_seg ON {C} TYPE option<string>;"
                f" DEFINE INDEX IF NOT EXISTS {dead}_seg ON {dead} FIELDS seg;"
                f" DEFINE EVENT IF NOT EXISTS {C}_text_dead ON {C}"
                " WHEN $event = 'DELETE' AND $before.text_seg != NONE THEN"
                f" (CREATE {dead} CONTENT {{ chunk: record::id($before.id),"
                " seg: $before.text_seg } RETURN NONE);")

    # ----- writing -------------------------------------------------------------------
    def add_statements(self, rows: list[dict[str, Any]]) -> list[Statement]:
        """Give ``rows`` (chunk rows about to be inserted) a segment: each row gets its
        ``text_seg``, and the returned statements write the segment, live. For the
        transaction that inserts the rows."""
        if not rows:
            return []
        key = new_segment_key()
        for row in rows:
            row["text_seg"] = key
        built = build(key, [str(row["id"].id) for row in rows],
                      [row["document"].id for row in rows],
                      [str(row.get("content") or "") for row in rows], self.analyzer,
                      [row.get("embedding") for row in rows]
                      if self.vector_table is not None else None)
        return self._write_statements(built, live=True)

    def moved_sql(self, ids: str, document: str) -> str:
        """SurrealQL that records that the chunks ``$<ids>`` belong to ``$<document>`` now,
        for the statement that moves them (after it has)."""
        return (f" FOR $text_moved IN (SELECT VALUE [record::id(id), text_seg] FROM ${ids}"
                f" WHERE text_seg != NONE) {{ UPSERT type::record('{self.moved_table}',"
                f" $text_moved) SET document = record::id(${document}) RETURN NONE; }};")

    def _write_statements(self, built: Built, *, live: bool) -> list[Statement]:
        key = built.key
        tag = f"ts_{key}"
        blocks = [{"id": RecordID(self.block_table, [key, b]), **record}
                  for b, record in built.blocks()]
        self.written["segments"] += 1
        self.written["records"] += 2 + len(blocks)
        self.written["bytes"] += bytes_of(built.map_record()) + sum(map(bytes_of, blocks))
        statements = [Statement(
            f"CREATE ${tag}_h CONTENT ${tag}_hv RETURN NONE;"
            f" CREATE ${tag}_m CONTENT ${tag}_mv RETURN NONE;",
            {f"{tag}_h": RecordID(self.segment_table, key), f"{tag}_hv": built.header(live),
             f"{tag}_m": RecordID(self.map_table, key), f"{tag}_mv": built.map_record()})]
        for start in range(0, len(blocks), BLOCKS_PER_STATEMENT):  # a big merge: parts
            part = blocks[start:start + BLOCKS_PER_STATEMENT]
            statements.append(Statement(
                f"INSERT INTO {self.block_table} ${tag}_b{start} RETURN NONE;",
                {f"{tag}_b{start}": part}, rows=len(part)))
        if built.vectors is not None:
            parts = [{"id": RecordID(self.vector_part_table, [key, p]), **record}
                     for p, record in enumerate(part_records(built.vectors))]
            self.written["records"] += len(parts)
            self.written["bytes"] += sum(map(part_bytes, parts))
            for start in range(0, len(parts), PARTS_PER_STATEMENT):
                some = parts[start:start + PARTS_PER_STATEMENT]
                statements.append(Statement(
                    f"INSERT INTO {self.vector_part_table} ${tag}_v{start} RETURN NONE;",
                    {f"{tag}_v{start}": some}, rows=len(some)))
        return statements

    # ----- searching -----------------------------------------------------------------
    async def rank(self, terms: Sequence[str]) -> Ranked:
        """Every live chunk holding any of the (analyzed) terms, best first by BM25 (a term
        the query repeats weighs as many times: "system" twice in a question counts
        twice)."""
        return await self._retrying(lambda: self._rank(terms))

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        """Each (analysed) term's IDF over the live chunks: those of the last ranking of
        these terms (a search has just ranked them: the view is not read again), else of a
        new one."""
        last = self._last_idf
        if last is not None and last[0] == tuple(sorted(set(terms))):
            return dict(last[1])
        return dict((await self.rank(terms)).idf)

    async def _retrying(self, read: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(3):
            try:
                return await read()
            except MissingRecord as exc:
                if attempt == 2:  # not a merge racing this read: records are gone
                    raise StoreError(DAMAGED.format(url=self.store.url, what=str(exc))
                                     ) from None
        raise AssertionError("unreachable")

    async def _rank(self, terms: Sequence[str]) -> Ranked:
        weights: dict[str, int] = {}
        for term in terms:
            if term:
                weights[term] = weights.get(term, 0) + 1
        unique = sorted(weights)
        view = await self.reader.view()
        if not unique or view.chunks <= 0:
            return Ranked()
        asked = (view.signature, *sorted(weights.items()))
        known = self._ranked.get(asked)
        if known is not None:  # the same search again (a per-document search asks more)
            self._last_idf = (tuple(unique), known.idf)
            return known
        ranked = await self._score(view, weights)
        self._ranked[asked] = ranked
        self._last_idf = (tuple(unique), ranked.idf)
        while len(self._ranked) > RANKED_CACHE:
            self._ranked.popitem(last=False)
        return ranked

    async def _score(self, view: View, weights: dict[str, int]) -> Ranked:
        unique = list(weights)
        wanted = {(s.key, zlib.crc32(t.encode()) % s.blocks) for s in view.segments
                  for t in unique if t not in view.postings}
        blocks = await self.reader.blocks(wanted) if wanted else {}
        if view.norm is None:  # once per view: each chunk's length normalisation
            k1, b = self.settings.bm25_k1, self.settings.bm25_b
            lengths = np.concatenate([view.maps[s.key].lengths for s in view.segments])
            view.norm = k1 * (1.0 - b + b * lengths / max(view.average_length, 1e-9))
        k1 = self.settings.bm25_k1
        acc = np.zeros(view.offsets[-1], dtype=np.float64)
        n = view.chunks
        ceiling = 0.0  # the most any chunk could score: every term, saturated
        idfs: dict[str, float] = {}
        for term in unique:
            found = view.postings.get(term)
            if found is None:  # the term's BM25 per live chunk, kept for the view's life
                ords, tfs = self._live_postings(view, term, blocks)
                df = len(ords)
                idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                found = (ords, idf * tfs * (k1 + 1.0) / (tfs + view.norm[ords]), idf)
                view.postings_bytes += found[0].nbytes + found[1].nbytes
                if view.postings_bytes > POSTINGS_CACHE_BYTES:
                    view.postings.clear()
                    view.postings_bytes = found[0].nbytes + found[1].nbytes
                view.postings[term] = found
            ords, contribution, idf = found
            idfs[term] = idf
            if len(ords):
                acc[ords] += weights[term] * contribution
            ceiling += weights[term] * idf * (k1 + 1.0)  # a term no chunk holds counts too
        hits = np.flatnonzero(acc)
        # scores as a share of that ceiling: 0-1 whatever the query (the order is BM25's)
        ranked = Ranked(view, hits, acc[hits] / ceiling if ceiling > 0 else acc[hits])
        ranked.idf = idfs
        return ranked

    @staticmethod
    def _live_postings(view: View, term: str,
                       blocks: dict[tuple[str, int], Block]) -> tuple[np.ndarray, np.ndarray]:
        """A term's live postings over the whole view: global ordinals and frequencies."""
        bucket = zlib.crc32(term.encode())
        ords_parts, tfs_parts = [], []
        for i, s in enumerate(view.segments):
            block = blocks.get((s.key, bucket % s.blocks))
            hit = block.postings(term) if block is not None else None
            if hit is None:
                continue
            ords, tfs = hit
            mask = view.dead.get(s.key)
            if mask is not None:
                keep = ~mask[ords]
                ords, tfs = ords[keep], tfs[keep]
            ords_parts.append(ords + view.offsets[i])
            tfs_parts.append(tfs)
        if not ords_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate(ords_parts), np.concatenate(tfs_parts)

    async def nearest(self, vector: Sequence[float]) -> Ranked | None:
        """Every live chunk that has a vector, nearest to ``vector`` first, by a scan of
        the segments' coded vectors (scores: :meth:`VectorSet.scores`). ``None`` when the scan
        cannot answer and the HNSW graph must: segments written before they carried vectors
        (until the index is rebuilt), a distance it does not compute, or more vectors than
        :data:`SCAN_MAX_BYTES`."""
        distance = self.settings.hnsw_distance
        return await self._scanning(len(vector),
                                    lambda view, sets: scan(view, sets, vector, distance))

    async def similarities(self, vector: Sequence[float],
                           keys: Sequence[str]) -> dict[str, float] | None:
        """The scores (as :meth:`nearest` gives them) of ``vector`` against the chunks
        ``keys`` alone; ``None`` where :meth:`nearest` cannot answer."""
        distance = self.settings.hnsw_distance
        return await self._scanning(
            len(vector), lambda view, sets: similarity_of(view, sets, vector, distance, keys))

    async def background(self, vector: Sequence[float]) -> np.ndarray | None:
        """The scores (as :meth:`nearest` gives them) of ``vector`` against a fixed sample
        of the live chunks: how a chunk unrelated to the query scores, in this store. ``None``
        where :meth:`nearest` cannot answer."""
        distance = self.settings.hnsw_distance
        # a sample need not be of this instant: the last view serves (no read of the
        # segment headers where other processes may write)
        return await self._scanning(len(vector),
                                    lambda view, sets: background(view, sets, vector, distance),
                                    recent=True)

    async def scans(self, dimension: int) -> bool:
        """Whether :meth:`nearest` answers for queries of ``dimension`` (else the graph)."""
        return await self._scanning(dimension, lambda view, sets: True) is not None

    async def _scanning(self, dimension: int, use: Callable[[View, dict[str, VectorSet]], T],
                        *, recent: bool = False) -> T | None:
        """``use(view, vector sets)`` where a scan of queries of ``dimension`` can answer
        (``recent``: the last view, if nothing was written here since and its vectors held)."""
        if self.vector_table is None or self.settings.hnsw_distance not in SCANNED_DISTANCES:
            return None

        async def read() -> T | None:
            view = self.reader.last_view if recent else None
            if view is None or view.stamp != self.store.changes or any(
                    s.vectors and s.key not in self.vectors.sets for s in view.segments):
                view = await self.reader.view()
            if any(s.vectors is None for s in view.segments):
                return None
            carrying = [s for s in view.segments if s.vectors]
            if sum(s.n for s in carrying) * dimension * 4 > SCAN_MAX_BYTES:
                return None
            sets = await self.vectors.of(carrying)
            if any(v.dimension != dimension for v in sets.values()):
                return None
            return use(view, sets)
        return await self._retrying(read)

    async def live_vectors(self) -> dict[str, list[float]]:
        """Every live chunk's vector as the index holds it (for checks)."""
        async def read() -> dict[str, list[float]]:
            view = await self.reader.view()
            return held(view, await self.vectors.of([s for s in view.segments if s.vectors]))
        return await self._retrying(read)

    # ----- statistics ------------------------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        """Segments, postings, live and dead chunks."""
        view = await self._retrying(self.reader.view)
        dead = sum(int(m.sum()) for m in view.dead.values())
        stored = sum(s.n for s in view.segments)
        (pending,) = await self.store.query(
            f"SELECT count() AS n FROM {self.dead_table} GROUP ALL;")
        return {"segments": len(view.segments),
                "postings": sum(s.postings for s in view.segments),
                "chunks": view.chunks, "dead": dead,
                "dead_ratio": dead / stored if stored else 0.0,
                "deletions_recorded": int(pending[0]["n"]) if pending else 0,
                "levels": sorted({s.level for s in view.segments})}

    async def live_postings(self) -> dict[str, dict[str, int]]:
        """Every live chunk's terms and their frequencies, as the index holds them."""
        return await self.maintenance.live_postings()

    async def expected_postings(self) -> dict[str, dict[str, int]]:
        """What an index rebuilt from the chunks would hold (for checks)."""
        return await self.maintenance.expected_postings()

    # ----- merges and rebuilds (maintenance.py) ------------------------------------------
    def merge_soon(self) -> None:
        """Merge in the background when a level has grown full."""
        self.maintenance.merge_soon()

    async def merge_once(self, *, force: bool = False) -> bool:
        """Merge one group of segments if one is due (``force``: every live segment into
        one). Returns whether it merged."""
        return await self.maintenance.merge_once(force=force)

    async def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the whole index from the chunks; returns the chunks indexed."""
        return await self.maintenance.rebuild(progress)

    async def stop(self) -> None:
        """Let a background merge end after its current statement, and wait for it."""
        await self.maintenance.stop()

    async def drop(self) -> None:
        """Remove the text index's records (the store goes back to the engine's index)."""
        await self.store.query(
            "".join(f"DELETE {t};" for t in (self.segment_table, self.map_table,
                                              self.block_table, self.dead_table,
                                              self.vector_part_table, self.moved_table))
            + f" UPDATE {self.chunks_table} SET text_seg = NONE WHERE text_seg != NONE"
            " RETURN NONE;")
