"""What a search reads of the text index's segments: the live view (the segments, their
maps, the deletions and moves resolved to ordinals) and the decoded records, cached (a
segment never changes, so a cached record is always valid)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from surrealdb import RecordID

from ..connection import Store
from .postings import (
    CACHE_BYTES,
    HEADER_FIELDS,
    Block,
    D,
    DecodedCache,
    K,
    MissingRecord,
    Segment,
    SegmentMap,
    View,
)
from .vectors import SegmentVectors


class SegmentReader:
    """Reads one text index's segments (tables named after ``chunks_table``)."""

    def __init__(self, store: Store, chunks_table: str, vectors: SegmentVectors) -> None:
        self.store = store
        self.segment_table = f"{chunks_table}_text_segment"
        self.map_table = f"{chunks_table}_text_map"
        self.block_table = f"{chunks_table}_text_block"
        self.dead_table = f"{chunks_table}_text_dead"
        self.moved_table = f"{chunks_table}_text_moved"
        self.vectors = vectors  # the live segments' decoded vectors: gone segments' dropped
        self.cache = DecodedCache(CACHE_BYTES)
        self.last_view: View | None = None

    def forget(self) -> None:
        """Read everything again from the store, as a fresh process would."""
        self.cache = DecodedCache(self.cache.limit)
        self.last_view = None

    async def view(self) -> View:
        """The live segments, their maps, deletions and moves, as of now."""
        # Where every write goes through this process's store, the last view stands until
        # the store has run anything that may write (reading the headers is a range read
        # the engine slows with every segment merged away: 19 ms on a store grown to 300k
        # chunks); read before the query, so a write that ends meanwhile is not missed.
        stamp = self.store.changes
        last = self.last_view
        if last is not None and self.store.exclusive and last.stamp == stamp:
            return last
        # one transaction: one snapshot of the segments and of the deletions
        _, headers, dead_rows, moved_rows, _ = await self.store.query(
            f"BEGIN; SELECT {HEADER_FIELDS} FROM {self.segment_table}"
            f" WHERE live = true; SELECT id, chunk, seg FROM {self.dead_table};"
            f" SELECT VALUE [id, document] FROM {self.moved_table}; COMMIT;", read_only=True)
        segments = [Segment.of(h) for h in headers or []]
        segments.sort(key=lambda s: s.key)
        moves = {(str(i.id[0]), str(i.id[1])): document for i, document in moved_rows or []}
        signature = (tuple(s.key for s in segments),
                     frozenset(str(r["id"].id) for r in dead_rows or []),
                     frozenset(moves.items()))
        if last is not None and last.signature == signature:
            last.stamp = max(last.stamp, stamp)
            return last  # nothing changed since the last search
        maps = await self.maps([s.key for s in segments])
        where: dict[str, str] = {}  # origin -> live segment holding its chunks
        for s in segments:
            for origin in maps[s.key].origins:
                where[origin] = s.key
        dead: dict[str, np.ndarray] = {}
        for row in dead_rows or []:
            seg = where.get(str(row["seg"]))
            if seg is None:
                continue  # its segment was merged without it, or rebuilt
            ordinal = maps[seg].ordinal(str(row["chunk"]), str(row["seg"]))
            if ordinal is None:
                continue
            mask = dead.get(seg)
            if mask is None:
                mask = dead[seg] = np.zeros(len(maps[seg].keys), dtype=bool)
            mask[ordinal] = True
        moved: dict[tuple[str, int], Any] = {}
        for (chunk, origin), document in moves.items():
            seg = where.get(origin)
            ordinal = maps[seg].ordinal(chunk, origin) if seg is not None else None
            if seg is not None and ordinal is not None:
                moved[(seg, ordinal)] = document
        chunks = sum(s.n for s in segments) - sum(int(m.sum()) for m in dead.values())
        total = sum(s.total for s in segments) - sum(
            float(maps[k].lengths[m].sum()) for k, m in dead.items())
        view = View(segments, maps, dead, chunks, total / chunks if chunks > 0 else 0.0,
                     signature, np.concatenate(([0], np.cumsum([s.n for s in segments],
                                                               dtype=np.int64))),
                     moved=moved, stamp=stamp)
        self.last_view = view
        live = {s.key for s in segments}
        for gone in [k for k in self.vectors.sets if k not in live]:
            del self.vectors.sets[gone]
        return view

    async def maps(self, keys: list[str]) -> dict[str, SegmentMap]:
        return await self._cached(self.map_table, keys, lambda key: key, lambda i: str(i),
                                  SegmentMap.decode)

    async def blocks(self, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], Block]:
        return await self._cached(self.block_table, list(wanted), lambda key: list(key),
                                  lambda i: (str(i[0]), int(i[1])), Block.decode)

    async def _cached(self, table: str, keys: list[K], record_key: Callable[[K], Any],
                      key_of: Callable[[Any], K], decode: Callable[[dict[str, Any]], D]
                      ) -> dict[K, D]:
        """Decoded records of ``table`` by key: from the cache, else read by id (and kept).
        A record not found belongs to a segment merged away while this search read."""
        out: dict[K, D] = {}
        missing = []
        for key in keys:
            found = self.cache.get((table, key))
            if found is None:
                missing.append(key)
            else:
                out[key] = found
        if missing:
            (rows,) = await self.store.query(
                "SELECT * FROM $ids;", {"ids": [RecordID(table, record_key(k))
                                                for k in missing]}, read_only=True)
            for row in rows or []:
                decoded = decode(row)
                key = key_of(row["id"].id)
                self.cache.put((table, key), decoded, decoded.size)
                out[key] = decoded
            lost = [k for k in missing if k not in out]
            if lost:
                raise MissingRecord(f"record {lost[0]} of {table}")
        return out

    async def read_whole(self, group: list[Segment]) -> dict[str, list[Block]]:
        (rows,) = await self.store.query(
            "SELECT * FROM $ids;",
            {"ids": [RecordID(self.block_table, [s.key, b]) for s in group
                     for b in range(s.blocks)]})
        out: dict[str, list[Block]] = {s.key: [] for s in group}
        for row in rows or []:
            out[str(row["id"].id[0])].append(Block.decode(row))
        return out
