"""The decoded vectors of the text index's live segments, read a few part records at a
time and kept while their segment lives (segments never change), and the scan of a query
over them. See :mod:`.codes` for the codes and :mod:`.index` for the layout."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import numpy as np
from surrealdb import RecordID

from ..connection import Store, release_freed_memory
from .codes import (
    PART_ROWS,
    PARTS_PER_STATEMENT,
    VectorSet,
    decode_part,
)
from .postings import (
    BACKGROUND_ROWS,
    MissingRecord,
    Ranked,
    Segment,
    View,
)


class SegmentVectors:
    """The live segments' vectors, decoded once each (one search loads at a time)."""

    def __init__(self, store: Store, part_table: str) -> None:
        self.store = store
        self.vector_part_table = part_table
        self.sets: dict[str, VectorSet] = {}
        self._loading = asyncio.Lock()

    async def of(self, segments: Sequence[Segment]) -> dict[str, VectorSet]:
        """The vectors of these segments (each read once, by one search at a time)."""
        async with self._loading:
            loaded = False
            for s in segments:
                if s.key in self.sets or not s.vparts:
                    continue
                self.sets[s.key] = await self._read(s)
                loaded = True
            if loaded:  # the answers' buffers were large: give their pages back
                release_freed_memory()
            return {s.key: self.sets[s.key] for s in segments
                    if s.key in self.sets}

    async def _read(self, s: Segment) -> VectorSet:
        """A segment's vectors, read a few parts at a time (a whole large segment in one
        answer would hold its vectors three times over while decoded)."""
        codes: np.ndarray | None = None
        scales = np.zeros(s.n, dtype=np.float32)
        has = np.zeros(s.n, dtype=bool)
        for first in range(0, s.vparts, PARTS_PER_STATEMENT):
            numbers = range(first, min(first + PARTS_PER_STATEMENT, s.vparts))
            (rows,) = await self.store.query(
                "SELECT * FROM $ids;",
                {"ids": [RecordID(self.vector_part_table, [s.key, p]) for p in numbers]},
                read_only=True)
            if len(rows or []) != len(numbers):
                raise MissingRecord(f"vectors of segment {s.key}")
            for row in rows:
                start = int(row["id"].id[1]) * PART_ROWS
                part_codes, part_scales, part_has = decode_part(row)
                if codes is None:
                    codes = np.zeros((s.n, part_codes.shape[1]), dtype=np.int8)
                rows_of = slice(start, start + len(part_codes))
                codes[rows_of], scales[rows_of], has[rows_of] = (
                    part_codes, part_scales, part_has)
            del rows
        assert codes is not None
        return VectorSet.of(codes, scales, has)


def _live(view: View, sets: dict[str, VectorSet]
          ) -> Iterator[tuple[int, str, VectorSet, np.ndarray]]:
    """Each segment of ``view`` with vectors in ``sets``: its position, key, vectors, and the
    ordinals of its live chunks that have one."""
    for i, s in enumerate(view.segments):
        found = sets.get(s.key)
        if found is None:
            continue
        valid = found.has
        dead = view.dead.get(s.key)
        if dead is not None:
            valid = valid & ~dead
        yield i, s.key, found, np.flatnonzero(valid)


def _query(vector: Sequence[float], distance: str) -> np.ndarray | None:
    """The query as the scan takes it (float32, of unit length for cosine); ``None`` for a
    zero vector under cosine, which is near nothing."""
    query = np.asarray(vector, dtype=np.float32)
    if distance != "COSINE":
        return query
    norm = float(np.linalg.norm(query))
    return query / norm if norm else None


def scan(view: View, sets: dict[str, VectorSet], vector: Sequence[float],
         distance: str) -> Ranked:
    """Every live chunk of ``view`` that has a vector in ``sets``, nearest first."""
    query = _query(vector, distance)
    if query is None:
        return Ranked()
    ordinals, scores = [], []
    for i, _, found, picked in _live(view, sets):
        ordinals.append(picked + view.offsets[i])
        scores.append(found.scores(query, distance)[picked].astype(np.float64))
    if not ordinals:
        return Ranked()
    return Ranked(view, np.concatenate(ordinals), np.concatenate(scores))


def similarity_of(view: View, sets: dict[str, VectorSet], vector: Sequence[float],
                  distance: str, keys: Sequence[str]) -> dict[str, float]:
    """The scores (as :func:`scan` gives its best rows) of ``vector`` against the live
    chunks ``keys``, computed from their codes alone: the same for a chunk whichever search
    found it. A key without a live vector is left out."""
    query = _query(vector, distance)
    if query is None:
        return {}
    out: dict[str, float] = {}
    wanted = set(keys)
    for s in reversed(view.segments):  # newest first
        found = sets.get(s.key)
        if found is None or not wanted:
            continue
        dead = view.dead.get(s.key)
        mapping = view.maps[s.key]
        here = [(k, o) for k in wanted if (o := mapping.ordinal_of_key(k)) is not None
                and found.has[o] and (dead is None or not dead[o])]
        if not here:
            continue
        ordinals = np.array([o for _, o in here], dtype=np.int64)
        scores = found.take(ordinals).scores(query, distance)  # few rows: each one exact
        for (k, _), score in zip(here, scores.tolist()):
            out[k] = float(score)
            wanted.discard(k)
    return out


def background(view: View, sets: dict[str, VectorSet], vector: Sequence[float],
               distance: str) -> np.ndarray:
    """The scores (as :func:`scan` gives them) of ``vector`` against a fixed sample of the
    live chunks, spread evenly over the segments: what chunks unrelated to the query score.
    The sample is drawn once per view (at most :data:`BACKGROUND_ROWS` rows)."""
    if view.background is None:
        live = [(found, picked) for _, _, found, picked in _live(view, sets) if len(picked)]
        stride = max(1, -(-sum(len(picked) for _, picked in live) // BACKGROUND_ROWS))
        parts = [found.take(picked[::stride]) for found, picked in live]
        view.background = VectorSet.concatenate(parts) if parts else None
    query = _query(vector, distance)
    if view.background is None or query is None:
        return np.zeros(0)
    return view.background.scores(query, distance)


def held(view: View, sets: dict[str, VectorSet]) -> dict[str, list[float]]:
    """Every live chunk's vector in ``sets``, by chunk key (for checks)."""
    return {view.maps[key].keys[ordinal]: found.vector(ordinal)
            for _, key, found, picked in _live(view, sets) for ordinal in picked.tolist()}
