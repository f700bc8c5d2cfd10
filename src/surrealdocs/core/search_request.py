"""One search, as every face asks for it: :class:`SearchRequest` is what
:meth:`~surrealdocs.core.kb.KnowledgeBase.search` takes. The command line's options, the HTTP
API's model, the MCP tool's arguments and the retrievers' options are checked against its
fields by ``tests/test_faces.py``, so that a new option reaches every face (or the test names
the face that leaves it out, and why)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MODES = ("hybrid", "vector", "text")


@dataclass(frozen=True)
class SearchRequest:
    """What to look for, how to rank it, how many hits, and which documents may answer.

    ``mode``: ``hybrid``, ``vector`` or ``text`` (BM25). Filters, applied inside the query:
    ``source`` (a glob over sources), ``mime_type`` (one or several), ``notebook`` (a
    Notebook, its id or its name), ``topics`` (any of them), ``created_after`` and
    ``created_before`` (when the source was ingested). ``min_score`` drops hits scoring
    below it (scores are 0-1 in every mode). Hybrid search fuses ``candidates`` hits of each
    leg with ``fusion`` (``zscore``, ``minmax`` or ``rrf``, with ``rrf_k``), weighting the
    legs by ``text_weight`` and ``vector_weight`` (unset: the settings'). ``per_document``:
    one hit per document, its best chunk. ``query_vector``: a vector computed with the
    store's model, instead of or besides the query text.

    Each hit's ``score`` is the probability that it is relevant (0-1, from the query and
    the chunk alone). Hits below the store's cut-off (``Settings.relevance_cutoff``) are
    dropped unless ``cutoff`` is false (weaker matches too); ``min_score`` (0-1) raises the
    bar for this search.
    """

    query: str | None = None
    mode: str = "hybrid"
    limit: int = 10
    min_score: float | None = None
    source: str | None = None
    mime_type: str | Sequence[str] | None = None
    notebook: Any = None
    topics: Sequence[str] | None = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    candidates: int | None = None
    fusion: str | None = None
    rrf_k: int | None = None
    text_weight: float | None = None
    vector_weight: float | None = None
    per_document: bool = False
    query_vector: Sequence[float] | None = None
    cutoff: bool = True

    def replace(self, **changes: Any) -> SearchRequest:
        return dataclasses.replace(self, **changes)

    def options(self) -> dict[str, Any]:
        """Every field but the query, by name."""
        return {name: getattr(self, name) for name in SEARCH_FIELDS if name != "query"}


SEARCH_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SearchRequest))
