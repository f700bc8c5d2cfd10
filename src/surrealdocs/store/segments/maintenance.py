"""Keeping the text index small and whole (``TextIndex.merge_once``, ``rebuild``): tiered
merges of segments under a lease in the store (two processes never merge the same
segments; a crash mid-merge leaves the old segments live), dead postings dropped, and the
rebuild of the whole index from the chunks. See :mod:`.index` for the layout."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from surrealdb import RecordID

from ...errors import StoreError
from ..connection import Statement
from .codes import (
    VectorSet,
)
from .postings import (
    HEADER_FIELDS,
    LEASE_SECONDS,
    REBUILD_PAGE,
    STALE,
    Built,
    MissingRecord,
    Segment,
    View,
    build_with_origins,
    collapse,
    concatenated,
    due_segments,
    full_levels,
    holder_gone,
    new_segment_key,
)


class TextIndexMaintenance:
    """Merges and rebuilds of one text index (:class:`~.index.TextIndex`, which
    creates this and delegates to it): one at a time in a process, under the store's lease
    across processes."""

    def __init__(self, index: Any) -> None:
        self.index = index  # the TextIndex (typed loosely: it imports this module)
        self._merging: asyncio.Task[None] | None = None
        self._maintaining = asyncio.Lock()
        self._stopping = False

    # ----- merging -------------------------------------------------------------------
    def merge_soon(self) -> None:
        """Merge in the background when a level has grown full (one merge at a time in
        this process; the lease keeps other processes out)."""
        if self._stopping or (self._merging is not None and not self._merging.done()):
            return
        self._merging = asyncio.get_running_loop().create_task(self._merge_quietly())

    async def _merge_quietly(self) -> None:
        try:
            while not self._stopping and await self.merge_once():
                pass
        except Exception:  # a busy or closing store: merged another time
            pass

    async def stop(self) -> None:
        """Let a background merge end after its current statement, and wait for it."""
        self._stopping = True
        if self._merging is not None:
            await asyncio.gather(self._merging, return_exceptions=True)

    def resume(self) -> None:
        """Merge again after :meth:`stop` (merges wait for :meth:`merge_soon`)."""
        self._stopping = False

    async def merge_once(self, *, force: bool = False) -> bool:
        """Merge one group of segments if one is due (``force``: every live segment into
        one). Returns whether it merged."""
        if not force and not await self._may_be_due():
            return False
        view = await self.index.reader.view()
        group = due_segments(view, force)
        if not group:
            return False
        async with self._maintaining:
            return await self._merge_under_lease(force)

    async def _may_be_due(self) -> bool:
        """Whether a merge may be due, from the segments' levels and whether any chunk was
        deleted: after most writes none is, and the view (the segments' maps, the deleted
        and moved chunks) is not read for nothing."""
        levels, dead = await self.index.store.query(
            f"SELECT VALUE level FROM {self.index.segment_table} WHERE live = true;"
            f" SELECT VALUE id FROM {self.index.dead_table} LIMIT 1;", read_only=True)
        return bool(dead) or bool(full_levels(levels or []))

    async def _merge_under_lease(self, force: bool) -> bool:
        if not await self._take_lease():
            return False
        try:
            await self._drop_unpublished()
            view = await self.index.reader.view()  # again, under the lease
            group = due_segments(view, force)
            if not group:
                return False
            await self._merge(view, group)
            return True
        finally:
            await self._release_lease()

    async def _merge(self, view: View, group: list[Segment]) -> None:
        parts = await self.index.reader.read_whole(group)
        # the vectors go along, known when every input's are
        known = all(s.vectors is not None for s in group)
        sets = await self.index.vectors.of([s for s in group if s.vectors]) if known else {}
        dimension = next(iter(sets.values())).dimension if sets else 0
        gathered = _Gathered(documents=[] if all(view.maps[s.key].documents is not None
                                                 for s in group) else None)
        for s in group:
            gathered.add(view, s.key, parts[s.key], sets.get(s.key) if sets else None,
                         bool(sets), dimension)
        merged = gathered.merged(known, bool(sets))
        absorbed, moves = gathered.absorbed, gathered.moves
        if self._stopping:
            return
        if merged.n:
            for statement in self.index._write_statements(merged, live=False):
                await self.index.store.run(statement)
                if self._stopping:
                    return
        await self._publish(merged if merged.n else None, group, absorbed, moves)
        if merged.n and merged.vectors is not None:  # what the next search would read
            self.index.vectors.sets[merged.key] = merged.vectors
        self.index.written["merges"] += 1

    def _drop_statements(self, group: Sequence[Segment]) -> Statement:
        return Statement(
            "DELETE $drop_headers; DELETE $drop_maps; DELETE $drop_blocks;"
            " DELETE $drop_vectors;",
            {"drop_headers": [RecordID(self.index.segment_table, s.key) for s in group],
             "drop_maps": [RecordID(self.index.map_table, s.key) for s in group],
             "drop_blocks": [RecordID(self.index.block_table, [s.key, b]) for s in group
                             for b in range(s.blocks)],
             "drop_vectors": [RecordID(self.index.vector_part_table, [s.key, p]) for s in group
                              for p in range(s.vparts)]})

    async def _publish(self, merged: Built | None, group: list[Segment],
                       absorbed: list[tuple[str, str]],
                       moves: list[tuple[list[str], Any]]) -> None:
        """Swap the merged segment for its inputs in one transaction (refused when an input
        is gone or the merged segment was removed as unpublished by another merger). The
        moves it took in go, unless a chunk moved again meanwhile."""
        check = Statement(
            f"IF array::len((SELECT id FROM $inputs WHERE live = true)) != array::len($inputs)"
            f" {{ THROW '{STALE}' }};",
            {"inputs": [RecordID(self.index.segment_table, s.key) for s in group]})
        publish = Statement("")
        if merged is not None:
            publish = Statement(
                f"IF !record::exists($merged) {{ THROW '{STALE}' }};"
                " UPDATE $merged SET live = true RETURN NONE;",
                {"merged": RecordID(self.index.segment_table, merged.key)})
        forget = Statement(
            f"FOR $d IN $absorbed {{ DELETE {self.index.dead_table} WHERE seg = $d[1]"
            " AND chunk = $d[0]; };"
            f" FOR $m IN $taken_moves {{ DELETE type::record('{self.index.moved_table}', $m[0])"
            " WHERE document = $m[1]; };",
            {"absorbed": [list(a) for a in absorbed],
             "taken_moves": [[key, document] for key, document in moves]})
        await self.index.store.transaction(check, publish, self._drop_statements(group), forget)

    async def _drop_unpublished(self) -> None:
        """Remove what an interrupted merge or rebuild left (the lease is ours)."""
        (rows,) = await self.index.store.query(
            f"SELECT {HEADER_FIELDS} FROM {self.index.segment_table} WHERE live = false;")
        if rows:
            await self.index.store.run(self._drop_statements([Segment.of(r) for r in rows]))

    async def _take_lease(self) -> bool:
        """Take the store's merge lease: free, expired, ours, or held by a process known to
        be gone (its holder is taken over at once, not after the lease's 300 s)."""
        try:
            (holder,) = await self.index.store.query(
                "SELECT VALUE owner FROM ONLY $lease;", {"lease": self.index.lease_key},
                read_only=True)
            gone = holder if isinstance(holder, str) and self._gone(holder) else None
            await self.index.store.transaction(Statement(
                "IF (SELECT VALUE until FROM ONLY $lease) > time::now()"
                " AND (SELECT VALUE owner FROM ONLY $lease) NOT IN [$owner, $gone]"
                f" {{ THROW 'busy' }};"
                " UPSERT $lease SET owner = $owner,"
                f" until = time::now() + {LEASE_SECONDS}s RETURN NONE;",
                {"lease": self.index.lease_key, "owner": self.index.owner, "gone": gone}))
        except StoreError:  # held by another process, or two took it at once
            return False
        return True

    def _gone(self, holder: str) -> bool:
        """Whether the lease's holder is known to be gone: in a store only this process can
        open (the embedded engine locks its files), any other holder; else one of this
        machine whose process no longer runs."""
        if holder == self.index.owner:
            return False
        store = self.index.store
        if store.owned and store.embedded:
            return True
        return holder_gone(holder)

    async def _release_lease(self) -> None:
        with contextlib.suppress(StoreError):  # it expires anyway
            await self.index.store.query(
                "DELETE $lease WHERE owner = $owner;",
                {"lease": self.index.lease_key, "owner": self.index.owner})

    # ----- rebuilding ----------------------------------------------------------------
    async def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the text index from the chunks; ``progress(done, total)`` follows it.
        Returns the chunks indexed."""
        async with self._maintaining:
            return await self._rebuild(progress)

    async def _rebuild(self, progress: Callable[[int, int], None] | None) -> int:
        await self._wait_for_lease()
        try:
            await self._drop_unpublished()
            store = self.index.store
            (old,) = await store.query(f"SELECT {HEADER_FIELDS} FROM {self.index.segment_table};")
            old_segments = [Segment.of(r) for r in old or []]
            old_keys = {s.key for s in old_segments}
            old_dead, old_moved = await store.query(
                f"SELECT VALUE id FROM {self.index.dead_table};"
                f" SELECT VALUE [id, document] FROM {self.index.moved_table};")
            fresh: list[str] = []
            last: RecordID | None = None
            done = 0
            total = await self._chunk_count() if progress is not None else 0
            if progress is not None:
                progress(0, total)
            while True:
                rows, current = await self._page_after(last)
                if not rows:
                    break
                # chunks written since the rebuild began are in segments of their own
                written = await self._rebuilt_page(rows, set(current or []) - old_keys)
                if written is None:  # a chunk of the page was deleted: read it again
                    continue
                last = rows[-1]["id"]
                key, count = written
                if count:
                    fresh.append(key)
                done += count
                if progress is not None:
                    progress(done, total)
            # the chunks keep their origins, so deletions recorded from now on find them in
            # the new segments; those recorded before the rebuild are of chunks it did not see
            await store.transaction(
                Statement("UPDATE $fresh SET live = true RETURN NONE;",
                          {"fresh": [RecordID(self.index.segment_table, k) for k in fresh]}),
                self._drop_statements(old_segments),
                Statement("DELETE $old_dead; FOR $m IN $old_moved { DELETE $m[0]"
                          " WHERE document = $m[1]; };",
                          {"old_dead": list(old_dead or []), "old_moved": old_moved or []}))
            return done
        finally:
            await self._release_lease()

    async def _wait_for_lease(self) -> None:
        deadline = time.monotonic() + LEASE_SECONDS
        while not await self._take_lease():
            if time.monotonic() > deadline:
                raise StoreError("the text index is being merged or rebuilt by another"
                                 " process; try again later")
            await asyncio.sleep(0.5)

    async def _chunk_count(self) -> int:
        (counted,) = await self.index.store.query(
            f"SELECT count() AS n FROM {self.index.chunks_table} GROUP ALL;")
        return int(counted[0]["n"]) if counted else 0

    async def _page_after(self, last: RecordID | None) -> tuple[list[dict[str, Any]], Any]:
        """The next page of chunks after ``last`` (with their vectors where the chunks hold
        them), and the live segments' keys now."""
        index = self.index
        inline = ", embedding" if index.vector_table == index.chunks_table else ""
        rows, current = await index.store.query(
            f"SELECT id, document, content, text_seg{inline} FROM {index.chunks_table}"
            + (" WHERE id > $last" if last is not None else "")
            + f" ORDER BY id LIMIT {REBUILD_PAGE};"
            f" SELECT VALUE record::id(id) FROM {index.segment_table} WHERE live = true;",
            {"last": last})
        return list(rows or []), current

    async def _rebuilt_page(self, rows: list[dict[str, Any]],
                            written_since: set[str]) -> tuple[str, int] | None:
        """Write one page's chunks (but those in ``written_since`` segments) as an
        unpublished segment, stamping the chunks without one: its key and its chunk count,
        or ``None`` when a chunk of the page was deleted meanwhile."""
        rows = [r for r in rows if r.get("text_seg") not in written_since]
        key = new_segment_key()
        built = build_with_origins(
            key, [str(r["id"].id) for r in rows], [r["document"].id for r in rows],
            [str(r.get("content") or "") for r in rows],
            [r.get("text_seg") or key for r in rows], self.index.analyzer,
            await self._vectors_for(rows))
        ids = [r["id"] for r in rows]
        unstamped = [r["id"] for r in rows if not r.get("text_seg")]
        try:
            await self.index.store.transaction(
                Statement(
                    "IF array::len($page_ids.filter(|$i| record::exists($i)))"
                    f" != array::len($page_ids) {{ THROW '{STALE}' }};"
                    " UPDATE $page_new SET text_seg = $page_seg RETURN NONE;",
                    {"page_ids": ids, "page_new": unstamped, "page_seg": key}),
                *(self.index._write_statements(built, live=False) if rows else []))
        except StoreError as exc:
            if STALE not in str(exc):
                raise
            return None
        return key, len(rows)

    async def _vectors_for(self, rows: list[dict[str, Any]]) -> list[Any] | None:
        """The vectors of these chunk rows (``None`` for a chunk without one), read from
        where the store keeps them."""
        if self.index.vector_table is None:
            return None
        if self.index.vector_table == self.index.chunks_table:
            return [r.get("embedding") for r in rows]
        (found,) = await self.index.store.query(
            "SELECT VALUE [record::id(id), embedding] FROM $vector_ids;",
            {"vector_ids": [RecordID(self.index.vector_table, r["id"].id) for r in rows]})
        by_key = {str(k): v for k, v in found or []}
        return [by_key.get(str(r["id"].id)) for r in rows]

    # ----- checks: the index against the chunks -----------------------------------------
    async def live_postings(self) -> dict[str, dict[str, int]]:
        """Every live chunk's terms and their frequencies, as the index holds them (reads
        the whole index: for checks)."""
        async def read() -> dict[str, dict[str, int]]:
            view = await self.index.reader.view()
            parts = await self.index.reader.read_whole(view.segments)
            if (await self.index.reader.view()).signature != view.signature:
                # a merge replaced segments meanwhile: their blocks may be gone already
                raise MissingRecord("a segment merged while it was read")
            out: dict[str, dict[str, int]] = {}
            for s in view.segments:
                m = view.maps[s.key]
                dead = view.dead.get(s.key)
                for ordinal, key in enumerate(m.keys):
                    if dead is None or not dead[ordinal]:
                        if key in out:
                            raise StoreError(f"chunk {key} is live in two segments")
                        out[key] = {}
                for block in parts[s.key]:
                    for term, i in block.index.items():
                        lo, hi = block.starts[i], block.starts[i + 1]
                        for ordinal, tf in zip(block.ords[lo:hi].tolist(),
                                               block.tfs[lo:hi].tolist()):
                            if dead is None or not dead[ordinal]:
                                out[m.keys[ordinal]][term] = int(tf)
            return out
        found: dict[str, dict[str, int]] = await self.index._retrying(read)
        return found

    async def expected_postings(self) -> dict[str, dict[str, int]]:
        """What an index rebuilt from the chunks would hold (for checks)."""
        (rows,) = await self.index.store.query(
            f"SELECT id, content FROM {self.index.chunks_table};")
        out = {}
        for row in rows or []:
            counts: dict[str, int] = {}
            for term in self.index.analyzer.indexed_terms(str(row.get("content") or "")):
                counts[term] = counts.get(term, 0) + 1
            out[str(row["id"].id)] = counts
        return out


@dataclass
class _Gathered:
    """What a merge takes of its input segments: their live chunks (keys, documents,
    lengths, origins, vectors), their postings renumbered into one vocabulary, the dead
    chunks it drops (``absorbed``) and the moved records it takes in (``moves``)."""

    documents: list[Any] | None
    keys: list[str] = field(default_factory=list)
    lengths: list[np.ndarray] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    origin_of: list[np.ndarray] = field(default_factory=list)
    vocabulary: dict[str, int] = field(default_factory=dict)
    term_of: list[np.ndarray] = field(default_factory=list)
    ords: list[np.ndarray] = field(default_factory=list)
    tfs: list[np.ndarray] = field(default_factory=list)
    carried: list[VectorSet] = field(default_factory=list)
    absorbed: list[tuple[str, str]] = field(default_factory=list)
    moves: list[tuple[list[str], Any]] = field(default_factory=list)

    def add(self, view: View, key: str, blocks: Sequence[Any], found: VectorSet | None,
            with_vectors: bool, dimension: int) -> None:
        m = view.maps[key]
        dead = view.dead.get(key, np.zeros(len(m.keys), dtype=bool))
        alive = np.flatnonzero(~dead)
        new_ord = np.full(len(m.keys), -1, dtype=np.int64)
        new_ord[alive] = np.arange(len(self.keys), len(self.keys) + len(alive))
        codes = m.origin_of
        self.absorbed += [(m.keys[i], m.origins[codes[i]]) for i in np.flatnonzero(dead)]
        self.keys += [m.keys[i] for i in alive.tolist()]
        if self.documents is not None:
            self.documents += [view.document(key, i) for i in alive.tolist()]
        self.moves += [([m.keys[o], m.origins[codes[o]]], document)
                       for (seg, o), document in view.moved.items() if seg == key]
        self.lengths.append(m.lengths[alive])
        if with_vectors:
            self.carried.append(found.take(alive) if found is not None
                                else VectorSet.empty(len(alive), dimension))
        shift = len(self.origins)
        self.origins += m.origins
        self.origin_of.append(codes[alive] + shift)
        vocabulary = self.vocabulary
        for block in blocks:
            local = np.fromiter((vocabulary.setdefault(t, len(vocabulary))
                                 for t in block.index), dtype=np.int64,
                                count=len(block.index))
            counts = np.diff(block.starts)
            mapped = new_ord[block.ords]
            keep = mapped >= 0
            self.term_of.append(np.repeat(local, counts)[keep])
            self.ords.append(mapped[keep])
            self.tfs.append(block.tfs[keep].astype(np.int64))

    def merged(self, vectors_known: bool, with_vectors: bool) -> Built:
        """The segment the merge writes (origins no live chunk holds left out)."""
        keys, origins = self.keys, self.origins
        used = sorted(set(np.concatenate(self.origin_of).tolist())) if keys else []
        renumber = np.zeros(max(len(origins), 1), dtype=np.int64)
        renumber[used] = np.arange(len(used))
        merged = collapse(
            new_segment_key(), keys, self.documents, np.concatenate(self.lengths).astype(
                np.int64) if self.lengths else np.zeros(0, dtype=np.int64),
            [origins[u] for u in used],
            renumber[np.concatenate(self.origin_of)] if keys else np.zeros(0, dtype=np.int64),
            list(self.vocabulary), concatenated(self.term_of), concatenated(self.ords),
            concatenated(self.tfs))
        merged.vectors_known = vectors_known
        if with_vectors and keys:
            merged.vectors = VectorSet.concatenate(self.carried)
        return merged
