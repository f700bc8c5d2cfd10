"""The vector legs: an exact scan of the text index's int8 codes, or an HNSW graph (the
shared one, in the chunks table or in a vector table apart, or a notebook's own). Each
returns rows of id, document and ``score``: a similarity from 0 to 1, higher is nearer (the
cosine similarity, below 0 counting as 0; 1 / (1 + distance) for the other distances)."""

from __future__ import annotations

from typing import Any

import numpy as np
from surrealdb import RecordID

from ...config import Settings
from ...parts.filters import Filters
from ..conditions import filter_conditions
from ..connection import Store
from ..segments.index import TextIndex
from ..vectorgraphs import VectorGraphs
from .ranked import LEG_FIELDS, LEG_FIELDS_VIA_CHUNK, VISIBLE, VISIBLE_VIA_CHUNK, walk_within


def similarity_of_distance(distance: np.ndarray, metric: str) -> np.ndarray:
    """A leg's 0-1 score from the engine's distance (the graph's k-NN, or 1 - cosine)."""
    if metric == "COSINE":
        return np.asarray(np.maximum(0.0, 1.0 - distance))
    return np.asarray(1.0 / (1.0 + distance))


def leg_similarity(raw: np.ndarray, metric: str) -> np.ndarray:
    """A leg's 0-1 score from the raw similarity (the cosine, or minus the distance)."""
    if metric == "COSINE":
        return np.asarray(np.maximum(0.0, raw))
    return np.asarray(1.0 / (1.0 - raw))


class GraphLeg:
    """The nearest chunks by an HNSW graph: the store's shared one (over the chunks table, or
    over the vectors' own table: ``through_chunk``), or a notebook's (:meth:`for_notebook`).
    While the engine builds a graph, the table is scanned exactly instead (its k-NN operator
    would return every row)."""

    def __init__(self, store: Store, settings: Settings, graphs: VectorGraphs, table: str,
                 index: str, *, through_chunk: bool, notebook_scoped: bool = False) -> None:
        self.store = store
        self.settings = settings
        self.graphs = graphs
        self.table = table
        self.index = index
        self.through_chunk = through_chunk
        self.notebook_scoped = notebook_scoped

    def for_notebook(self, notebook: RecordID) -> GraphLeg:
        table = self.graphs.notebook_table(notebook)
        return GraphLeg(self.store, self.settings, self.graphs, table, f"{table}_hnsw",
                        through_chunk=True, notebook_scoped=True)

    async def rows(self, vector: list[float], k: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        # The graph's recall falls when k approaches ef (on SciFact, M 12 / EFC 150: recall@100
        # 0.95 at ef 100, 0.99 at ef 200): deep fetches get a candidate list of twice k.
        return await self.nearest(vector, k, max(self.settings.hnsw_ef, 2 * k), filters,
                                  careful)

    async def nearest(self, vector: list[float], k: int, ef: int, filters: Filters,
                      careful: bool) -> list[dict[str, Any]]:
        """:meth:`rows` with the graph's candidate list ``ef``."""
        if self.through_chunk:
            fields, check = LEG_FIELDS_VIA_CHUNK, VISIBLE_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.",
                                                notebook_scoped=self.notebook_scoped)
        else:
            fields, check = LEG_FIELDS, VISIBLE
            clauses, params = filter_conditions(filters)
        if careful:  # a condition inside the scan, so that k visible rows come back
            clauses.append(check)
        if await self.graphs.vector_index_ready(self.index, self.table):
            clauses.append(f"embedding <|{int(k)},{int(ef)}|> $v")
            distance = "vector::distance::knn()"
        else:
            clauses.append("embedding != NONE")
            distance = "(1 - vector::similarity::cosine(embedding, $v))"
        (rows,) = await self.store.query(
            f"SELECT {fields}, {distance} AS distance FROM {self.table}"
            f" WHERE {' AND '.join(clauses)} ORDER BY distance, id LIMIT {int(k)};",
            {**params, "v": vector},
        )
        rows = [r for r in rows or [] if r.get("distance") is not None]
        scores = similarity_of_distance(np.array([float(r.pop("distance")) for r in rows]),
                                        self.settings.hnsw_distance)
        for row, score in zip(rows, scores, strict=True):
            row["score"] = float(score)
        return rows

    async def similarities(self, vector: list[float],
                           keys: dict[str, str]) -> dict[str, float]:
        """The raw similarity (cosine, or minus the euclidean distance) of ``vector`` to the
        stored vector of each chunk (``keys``: chunk key -> ``table:key`` id)."""
        ids = [RecordID(self.graphs.vector_table, k) for k in keys]
        function = ("vector::similarity::cosine" if self.settings.hnsw_distance == "COSINE"
                    else "-vector::distance::euclidean")
        (rows,) = await self.store.query(
            f"SELECT record::id(id) AS k, {function}(embedding, $v) AS s FROM $ids"
            " WHERE embedding != NONE;", {"ids": ids, "v": vector}, read_only=True)
        return {keys[str(r["k"])]: float(r["s"]) for r in rows or []
                if str(r.get("k")) in keys and r.get("s") is not None}

    async def background(self, vector: list[float]) -> np.ndarray | None:
        """A graph keeps no sample of the store."""
        return None

    async def scans(self) -> bool:
        return False


class ScanLeg:
    """The nearest chunks by an exact scan of the text index's int8 codes; where the scan
    cannot answer (see :meth:`TextIndex.nearest`), by the graph."""

    def __init__(self, store: Store, settings: Settings, table: str, index: TextIndex,
                 dimension: int, graph: GraphLeg) -> None:
        self.store = store
        self.settings = settings
        self.table = table
        self.index = index
        self.dimension = dimension
        self.graph = graph

    def for_notebook(self, notebook: RecordID) -> GraphLeg:
        """A notebook's scope walks that notebook's own graph."""
        return self.graph.for_notebook(notebook)

    async def rows(self, vector: list[float], k: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        ranked = await self.index.nearest(vector)
        if ranked is None:
            return await self.graph.rows(vector, k, filters, careful)
        rows = await walk_within(self.store, self.table, ranked, k, filters, careful)
        scores = leg_similarity(np.array([float(r["score"]) for r in rows]),
                                self.settings.hnsw_distance)
        for row, score in zip(rows, scores, strict=True):
            row["score"] = float(score)
        return rows

    async def similarities(self, vector: list[float],
                           keys: dict[str, str]) -> dict[str, float]:
        """The raw similarity of ``vector`` to each chunk, from its codes as every search
        of this store computes it (the stored vectors where the scan cannot answer)."""
        found = await self.index.similarities(vector, list(keys))
        if found is None:
            return await self.graph.similarities(vector, keys)
        return {keys[k]: v for k, v in found.items()}

    async def background(self, vector: list[float]) -> np.ndarray | None:
        """The raw similarities of ``vector`` to a fixed sample of the live chunks (``None``
        where the scan cannot answer): how an unrelated chunk scores in this store."""
        return await self.index.background(vector)

    async def scans(self) -> bool:
        return await self.index.scans(self.dimension)
