"""One search, as every face asks for it: :class:`SearchRequest` is what
:meth:`~surrealdocs.core.kb.KnowledgeBase.search` takes. The command line's options, the HTTP
API's model, the MCP tool's arguments and the retrievers' options are checked against its
fields by ``tests/test_faces.py``, so that a new option reaches every face (or the test names
the face that leaves it out, and why)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import FUSIONS, Settings
from ..errors import ConfigurationError
from ..parts.filters import Filters
from ..parts.metadata import AllOf, AnyOf, Condition, MetaFilter, parse_filter, parse_where

MODES = ("hybrid", "vector", "text")
MAX_RESULTS = 10_000  # the most hits (and candidates per leg) one search may ask for


@dataclass(frozen=True)
class SearchRequest:
    """What to look for, how to rank it, how many hits, and which documents may answer.

    ``mode``: ``hybrid``, ``vector`` or ``text`` (BM25). Filters, applied inside the query:
    ``source`` (a glob over sources), ``mime_type`` (one or several), ``notebook`` (a
    Notebook, its id or its name), ``topics`` (any of them), ``created_after`` and
    ``created_before`` (when the source was ingested), ``where`` (the documents' metadata:
    ``--where`` texts, a JSON filter object, or a :class:`~surrealdocs.parts.metadata`
    filter; docs/filters.md). ``rerank``: the second stage, ``rerank:MODEL`` or ``llm``
    (``True``/unset: the settings' ``rerank``; ``False`` or ``"off"``: none;
    docs/rerank.md). ``min_score`` drops hits scoring
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
    where: Any = None
    rerank: str | bool | None = None

    @classmethod
    def of(cls, query: str | SearchRequest | None = None, **options: Any) -> SearchRequest:
        """A request from a query and options by name (or a request as it is)."""
        unknown = sorted(set(options) - set(SEARCH_FIELDS))
        if unknown:
            raise ConfigurationError(f"unknown search option {', '.join(unknown)}; the options"
                                     f" are {', '.join(SEARCH_FIELDS[1:])}")
        if isinstance(query, SearchRequest):
            if options:
                raise ConfigurationError("give a SearchRequest or search options, not both")
            return query
        return cls(query, **options)

    def replace(self, **changes: Any) -> SearchRequest:
        return dataclasses.replace(self, **changes)

    def checked(self, settings: Settings) -> SearchRequest:
        """This request, checked (a :class:`ConfigurationError` says what is wrong), with
        the query trimmed and every option left unset taken from ``settings``: the one
        validation of a search, whatever face asked for it."""
        if self.mode not in MODES:
            raise ConfigurationError(
                f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        _check_int("limit", self.limit, 1, MAX_RESULTS)
        candidates = settings.hybrid_candidates if self.candidates is None else self.candidates
        _check_int("candidates", candidates, 1, MAX_RESULTS)
        fusion = (self.fusion or settings.hybrid_fusion).lower()
        if fusion not in FUSIONS:
            raise ConfigurationError(
                f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        text_weight = settings.text_weight if self.text_weight is None else self.text_weight
        vector_weight = (settings.vector_weight if self.vector_weight is None
                         else self.vector_weight)
        weights = (text_weight, vector_weight)
        if not all(isinstance(w, (int, float)) and math.isfinite(w) and w >= 0
                   for w in weights) or sum(weights) == 0:
            raise ConfigurationError(
                "text_weight and vector_weight must be finite numbers >= 0, not both 0")
        rrf_k = settings.rrf_k if self.rrf_k is None else self.rrf_k
        _check_int("rrf_k", rrf_k, 0, MAX_RESULTS)
        min_score = self.min_score
        if min_score is not None and (isinstance(min_score, bool) or not isinstance(
                min_score, (int, float)) or not 0.0 <= min_score <= 1.0):
            raise ConfigurationError(
                f"min_score must be a number from 0 to 1 (a probability of relevance), got"
                f" {min_score!r}")
        text = (self.query or "").strip()
        if len(text) > settings.max_query_chars:
            raise ConfigurationError(
                f"the query has {len(text)} characters; the limit is {settings.max_query_chars}"
                " (SURREALDOCS_MAX_QUERY_CHARS)")
        mode = self.mode
        if not text and self.query_vector is None:
            raise ConfigurationError("the query is empty")
        if self.query_vector is not None and not text and mode != "vector":
            if mode == "text":
                raise ConfigurationError("text search needs query text, not only a vector")
            mode = "vector"
        return self.replace(query=text, mode=mode, candidates=candidates, fusion=fusion,
                            text_weight=text_weight, vector_weight=vector_weight, rrf_k=rrf_k,
                            where=metadata_filter(self.where),
                            rerank=_rerank(self.rerank, settings))

    def filters(self, notebook: Any = None) -> Filters:
        """The request's filters, its notebook resolved to ``notebook`` (a record id)."""
        return Filters(source=self.source, mime_type=self.mime_type, notebook=notebook,
                       topics=self.topics, created_after=self.created_after,
                       created_before=self.created_before,
                       where=metadata_filter(self.where))

    def options(self) -> dict[str, Any]:
        """Every field but the query, by name."""
        return {name: getattr(self, name) for name in SEARCH_FIELDS if name != "query"}


SEARCH_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SearchRequest))


def _rerank(value: str | bool | None, settings: Settings) -> str:
    """The reranker a search uses ("" for none)."""
    if value is None or value is True:
        if value is True and not settings.rerank:
            raise ConfigurationError(
                "no reranker is configured: set SURREALDOCS_RERANK (rerank:MODEL or llm)")
        return settings.rerank
    if value is False or (isinstance(value, str) and value.strip().lower() in ("off", "none",
                                                                               "")):
        return ""
    if isinstance(value, str):
        name = value.strip()
        if name == "llm" or (name.startswith("rerank:") and name.split(":", 1)[1].strip()):
            return name
    raise ConfigurationError(f"rerank must be rerank:MODEL, llm or off, got {value!r}")


def metadata_filter(where: Any) -> MetaFilter | None:
    """A metadata filter from what a face gives: ``--where`` text (or a list of them), a
    JSON filter object, or a filter already made."""
    if where is None or isinstance(where, (Condition, AllOf, AnyOf)):
        return where
    if isinstance(where, str) or (isinstance(where, (list, tuple))
                                  and all(isinstance(w, str) for w in where)):
        return parse_where(where)
    if isinstance(where, dict):
        return parse_filter(where)
    raise ConfigurationError("where must be --where text, a list of them, or a JSON filter"
                             f" object, got {type(where).__name__}")


def _check_int(name: str, value: Any, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) \
            or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be an integer from {minimum} to {maximum}, got {value!r}")
