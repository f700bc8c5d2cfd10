"""Open Notebook's search calls on a knowledge base: ``vector_search(notebook_id,
query_vector, min_score, limit)`` and its text and hybrid siblings, each one
:class:`~surrealdocs.SearchRequest` through :meth:`KnowledgeBase.search`, the door every
face uses.

>>> search = NotebookSearch(kb)
>>> hits = await search.vector_search("dense retrieval", notebook_id=nb.id, min_score=0.2)

As in Open Notebook, ``vector_search``'s ``min_score`` is a cosine similarity (each hit's
``similarity``, 0.2 by default), and it is the only cut-off; everywhere else a hit's
``score`` is a probability of relevance and the store's cut-off applies.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from ..core.kb import KnowledgeBase
from ..core.notebook_service import SourceMatch
from ..core.search_request import SearchRequest
from ..parts.results import Hit

__all__ = ["NotebookSearch", "SourceMatch"]

OPEN_NOTEBOOK_MIN_SIMILARITY = 0.2  # Open Notebook's default threshold


class NotebookSearch:
    """Open Notebook's search calls on ``kb``, scoped to a notebook by ``notebook_id`` (a
    Notebook, its id or its name) and, optionally, a creation window and topics. With
    ``group_by_source`` the hits come grouped per source (:class:`SourceMatch`)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb

    async def vector_search(self, query: str | None = None, *,
                            query_vector: Sequence[float] | None = None,
                            notebook_id: Any = None,
                            min_score: float = OPEN_NOTEBOOK_MIN_SIMILARITY,
                            limit: int = 10, created_after: dt.datetime | None = None,
                            created_before: dt.datetime | None = None,
                            topics: Sequence[str] | None = None,
                            group_by_source: bool = False) -> list[Any]:
        """Chunks nearest to ``query`` (or ``query_vector``) by cosine similarity, at least
        ``min_score``."""
        request = SearchRequest(query, mode="vector", notebook=notebook_id,
                                query_vector=query_vector, created_after=created_after,
                                created_before=created_before, topics=topics)
        return await self._run(request, limit, group_by_source, min_score)

    async def text_search(self, query: str, *, notebook_id: Any = None, limit: int = 10,
                          min_score: float | None = None,
                          created_after: dt.datetime | None = None,
                          created_before: dt.datetime | None = None,
                          topics: Sequence[str] | None = None,
                          group_by_source: bool = False) -> list[Any]:
        request = SearchRequest(query, mode="text", notebook=notebook_id, min_score=min_score,
                                created_after=created_after, created_before=created_before,
                                topics=topics)
        return await self._run(request, limit, group_by_source)

    async def hybrid_search(self, query: str, *, notebook_id: Any = None, limit: int = 10,
                            candidates: int | None = None,
                            created_after: dt.datetime | None = None,
                            created_before: dt.datetime | None = None,
                            topics: Sequence[str] | None = None,
                            group_by_source: bool = False) -> list[Any]:
        """Both legs scoped inside their queries, merged by the core's fusion."""
        request = SearchRequest(query, mode="hybrid", notebook=notebook_id,
                                candidates=candidates, created_after=created_after,
                                created_before=created_before, topics=topics)
        return await self._run(request, limit, group_by_source)

    async def search(self, query: str, *, mode: str = "hybrid", notebook_id: Any = None,
                     limit: int = 10, min_score: float | None = None) -> list[Any]:
        """One entry point for the three modes (for vector search, ``min_score`` is a cosine
        similarity, 0.2 by default, as Open Notebook's)."""
        if mode == "vector":
            return await self.vector_search(
                query, notebook_id=notebook_id, limit=limit,
                min_score=OPEN_NOTEBOOK_MIN_SIMILARITY if min_score is None else min_score)
        request = SearchRequest(query, mode=mode, notebook=notebook_id, min_score=min_score)
        return await self._run(request, limit, False)

    async def _run(self, request: SearchRequest, limit: int, group_by_source: bool,
                   min_similarity: float | None = None) -> list[Any]:
        """The core's search; with ``min_similarity`` (Open Notebook's vector threshold, in
        cosine similarity) that threshold instead of the core's cut-off."""
        request = request.replace(limit=limit * 4 if group_by_source else limit,
                                  cutoff=min_similarity is None)
        hits = await self.kb.search(request)
        if min_similarity is not None:
            hits = [h for h in hits if (h.similarity if h.similarity is not None
                                        else h.vector_score or 0.0) >= min_similarity]
        return _group(hits, limit) if group_by_source else hits


def _group(hits: list[Hit], limit: int) -> list[SourceMatch]:
    groups: dict[str, SourceMatch] = {}
    for hit in hits:  # hits arrive best first
        group = groups.get(hit.document_id)
        if group is None:
            groups[hit.document_id] = SourceMatch(hit.document_id, hit.title, hit.score, [hit])
        else:
            group.matches.append(hit)
    return list(groups.values())[:limit]
