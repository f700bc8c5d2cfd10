"""The search legs of one store, chosen once when it opens (:func:`choose_legs`): a text
leg and a vector leg behind two small interfaces, so that search code never asks how the
store is laid out. Part of the chunks' owner (:mod:`..chunks`): the legs' SurrealQL reads
the chunks, their vectors and the notebooks' vector tables.

=================  ===========================================================
text leg           the text index's segments (:class:`SegmentTextLeg`), the
                   engine's FULLTEXT index (:class:`EngineTextLeg`), or whole
                   documents in documents-only stores (:class:`DocumentTextLeg`)
vector leg         a scan of the text index's int8 codes (:class:`ScanLeg`), or
                   the HNSW graph over the chunks or over their vectors' own
                   table (:class:`GraphLeg`); in a notebook's scope, that
                   notebook's graph; none in stores without vectors
=================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from surrealdb import RecordID

from ...config import Settings
from ...parts.filters import Filters
from ..chunks import ChunkStorage
from ..documents import DocumentStorage
from .text import DocumentTextLeg, EngineTextLeg, SegmentTextLeg
from .vector import GraphLeg, ScanLeg

__all__ = ["DocumentTextLeg", "EngineTextLeg", "GraphLeg", "Legs", "ScanLeg",
           "SegmentTextLeg", "TextLeg", "VectorLeg", "choose_legs"]


class TextLeg(Protocol):
    async def rows(self, words: Sequence[str], limit: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        """Chunks holding any of the query's ``words`` (as :func:`query_words` gives them),
        best first by BM25: id, document and ``score``; with ``careful``, visible ones
        only."""
        ...

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        """Each analysed query term's IDF over the live chunks."""
        ...

    async def warm_up(self, words: Sequence[str]) -> None:
        """Learn now what searches for these words need."""
        ...

    async def stop(self) -> None:
        """Let what runs in the background end; the store closes."""
        ...


class VectorLeg(Protocol):
    def for_notebook(self, notebook: RecordID) -> VectorLeg:
        """The leg of a search scoped to one notebook."""
        ...

    async def rows(self, vector: list[float], k: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        """The ``k`` chunks nearest to ``vector``: id, document and ``score`` (a 0-1
        similarity), nearest first; with ``careful``, visible ones only."""
        ...

    async def similarities(self, vector: list[float],
                           keys: dict[str, str]) -> dict[str, float]:
        """The raw similarity (cosine, or minus the distance) of ``vector`` to each chunk
        of ``keys`` (chunk key -> ``table:key`` id), by that id."""
        ...

    async def background(self, vector: list[float]) -> np.ndarray | None:
        """Raw similarities of ``vector`` to a fixed sample of the chunks, if kept."""
        ...

    async def scans(self) -> bool:
        """Whether the leg scans codes exactly (else a graph answers)."""
        ...


@dataclass(frozen=True)
class Legs:
    """A store's two legs and how its hits are shown: ``details`` reads what the final hits
    show by chunk id (``None``: the text leg's rows are whole documents, shown as they
    are)."""

    text: TextLeg
    vector: VectorLeg | None
    details: Callable[[list[RecordID]], Awaitable[dict[str, dict[str, Any]]]] | None
    chunks_table: str
    resolve: Callable[[Filters], Awaitable[Filters]]  # answers a metadata filter, once
    without_vectors: str = ""  # why the store has no vector leg

    def vector_for(self, filters: Filters) -> VectorLeg:
        assert self.vector is not None
        if filters.notebook is not None:
            return self.vector.for_notebook(filters.notebook)
        return self.vector

    async def stop(self) -> None:
        await self.text.stop()


def choose_legs(settings: Settings, chunks: ChunkStorage,
                documents: DocumentStorage) -> Legs:
    """The legs this store's layout calls for (its settings and where its vectors are)."""
    store = chunks.store
    if not settings.chunked:
        return Legs(DocumentTextLeg(documents), None, None, chunks.table, documents.resolved,
                    "it was created with documents only")
    text: TextLeg
    if chunks.text is not None:
        text = SegmentTextLeg(store, chunks.table, chunks.text)
    else:
        text = EngineTextLeg(store, settings, chunks.table, chunks.count)
    if not settings.vectors:
        return Legs(text, None, chunks.details, chunks.table, documents.resolved,
                    "it was created with embed=False")
    graph = GraphLeg(store, settings, chunks.graphs, chunks.vector_table,
                     store.names.hnsw_index, through_chunk=chunks.apart)
    vector: VectorLeg = graph
    if chunks.text is not None:
        vector = ScanLeg(store, settings, chunks.table, chunks.text, chunks.dimension, graph)
    return Legs(text, vector, chunks.details, chunks.table, documents.resolved)
