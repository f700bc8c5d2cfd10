"""Search: BM25 text, HNSW vector, and hybrid fusion of both.

Every filter is applied inside the query (for vector search it is pushed into the HNSW scan,
so k results come back from the filtered subset). Vector search uses the HNSW index through
``<|K,EF|>``; if the index is not ready (being built), it falls back to an exact scan rather
than trusting the engine, which would then return every row.

Hybrid search fetches ``candidates`` hits from each leg and fuses them: reciprocal rank fusion
by default, or a weighted sum of min-max or z-score normalised scores. With
``per_document=True`` every result is a different document, represented by its best chunk
(MaxP): both legs over-fetch chunks until they have enough documents, and hybrid search fuses
document ranks, so a document whose best BM25 chunk and best vector chunk differ is still
recognised as found by both.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .config import FUSIONS, Settings
from .embed import Embedder
from .errors import ConfigurationError, DimensionMismatchError
from .store.connection import Store
from .store.schema import index_status

MODES = ("hybrid", "vector", "text")
RRF_K = 60
MAX_FETCH = 10_000  # most chunks one leg fetches while collecting distinct documents

_DETAIL_FIELDS = (
    "id, document, content, chunk_index, char_start, char_end, page_number, last_page,"
    " document.source AS source, document.title AS title, document.mime_type AS mime_type,"
    " document.complete AS complete, generation, document.generation AS doc_generation"
)
# the same fields read through the `chunk` link of a notebook's vector table
_DETAIL_FIELDS_VIA_CHUNK = ", ".join(
    f"chunk.{f.split(' AS ')[0].strip()} AS {(f.split(' AS ')[-1]).split('.')[-1].strip()}"
    for f in _DETAIL_FIELDS.split(",")
)

# Common English function words. The analyzer indexes them, and in an OR query they match
# almost every chunk (slow) while adding nothing to the ranking.
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these
they this those through to too under until up very was we were what when where which while who
whom why will with would you your yours yourself yourselves
""".split())
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Filters:
    """Restrict a search. ``source`` is a glob over document sources (``*.pdf``,
    ``reports/*``); a pattern that is not absolute matches at the end of the path.
    ``mime_type`` is one type or a list of types."""

    source: str | None = None
    mime_type: str | Sequence[str] | None = None
    notebook: Any = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    topics: Sequence[str] | None = None

    vector_table: str | None = None

    def where(self, through: str = "",
              document: str = "document.") -> tuple[list[str], dict[str, Any]]:
        """SurrealQL conditions on a chunk and their parameters.

        ``through`` is the path from the queried table to the chunk (``"chunk."`` when
        querying a notebook's vector table, which holds that notebook's chunks only, so the
        notebook condition is left out). ``document`` is the path from the chunk to its
        document's fields (``""`` when querying the documents table itself)."""
        doc = through + document
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.notebook is not None and not through:
            # a field of the chunk itself (kept in step with the reference edges), so the
            # engine checks it without following the link to the document
            clauses.append("notebooks CONTAINS $f_notebook")
            params["f_notebook"] = self.notebook
        if self.created_after is not None:
            clauses.append(f"{doc}ingested_at >= $f_after")
            params["f_after"] = _aware(self.created_after)
        if self.created_before is not None:
            clauses.append(f"{doc}ingested_at < $f_before")
            params["f_before"] = _aware(self.created_before)
        if self.topics:
            clauses.append(f"{doc}topics CONTAINSANY $f_topics")
            params["f_topics"] = list(self.topics)
        if self.mime_type:
            mimes = [self.mime_type] if isinstance(self.mime_type, str) else list(self.mime_type)
            clauses.append(f"{doc}mime_type IN $f_mimes")
            params["f_mimes"] = mimes
        if self.source:
            clauses.append(f"{doc}sources.any(|$s| string::matches($s, $f_source))")
            params["f_source"] = glob_to_regex(self.source)
        return clauses, params


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def glob_to_regex(pattern: str) -> str:
    """A glob as an anchored regular expression (``*`` and ``**`` cross ``/``)."""
    if not pattern.startswith(("/", "*")) and "://" not in pattern:
        pattern = "*" + ("/" if not pattern.startswith("/") else "") + pattern
        pattern = pattern.replace("*//", "*/")
    out = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            while i + 1 < len(pattern) and pattern[i + 1] == "*":
                i += 1
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1:end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    out.append("$")
    # "*/name" should also match a bare "name" at the root.
    regex = "".join(out)
    return regex.replace("^.*/", "^(?:.*/)?", 1)


@dataclass
class Hit:
    """One matching chunk, with where it comes from and why it matched."""

    chunk_id: str
    document_id: str
    source: str
    title: str | None
    mime_type: str
    content: str
    chunk_index: int
    char_start: int
    char_end: int
    page: int | None
    last_page: int | None
    score: float
    text_rank: int | None = None
    vector_rank: int | None = None
    text_score: float | None = None
    vector_score: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra")
        return d


def query_terms(text: str) -> str:
    """Words of a user query for the BM25 index: punctuation and stop words removed."""
    words = [w for w in _WORD.findall(text.lower())]
    kept = [w for w in words if w not in STOP_WORDS]
    return " ".join(kept or words)


class Searcher:
    """Searches one store. Stores without vectors (``embedder`` ``None``) offer text search
    only; documents-only stores (``settings.chunked`` false) search whole documents."""

    def __init__(self, store: Store, embedder: Embedder | None, settings: Settings) -> None:
        self.store = store
        self.embedder = embedder if settings.vectors else None
        self.settings = settings

    async def search(self, query: str, *, mode: str = "hybrid", limit: int = 10,
                     min_score: float | None = None, filters: Filters | None = None,
                     candidates: int | None = None, rrf_k: int | None = None,
                     fusion: str | None = None, text_weight: float | None = None,
                     vector_weight: float | None = None,
                     per_document: bool = False) -> list[Hit]:
        """Search chunks.

        ``min_score`` applies to the mode's own score (cosine similarity for vector, BM25 for
        text, the fused score for hybrid). ``candidates`` is how many hits each leg of a
        hybrid search fetches before fusion; ``fusion``, ``rrf_k``, ``text_weight`` and
        ``vector_weight`` choose how they are merged. Unset, all of these come from the
        settings. ``per_document`` returns at most one hit (the best chunk) per document.
        """
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if limit < 1:
            raise ConfigurationError("limit must be at least 1")
        settings = self.settings
        fusion = (fusion or settings.hybrid_fusion).lower()
        if fusion not in FUSIONS:
            raise ConfigurationError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        weights = (settings.text_weight if text_weight is None else text_weight,
                   settings.vector_weight if vector_weight is None else vector_weight)
        if min(weights) < 0 or sum(weights) == 0:
            raise ConfigurationError("text_weight and vector_weight must be >= 0, not both 0")
        k = settings.rrf_k if rrf_k is None else rrf_k
        if k < 0:
            raise ConfigurationError("rrf_k must be zero or positive")
        filters = filters or Filters()
        if mode != "text" and self.embedder is None:
            raise ConfigurationError(
                f"{mode} search needs embedding vectors, and this store has none "
                "(it was created " + ("with documents only" if not self.settings.chunked
                                      else "with embed=False") + "): use mode='text'")
        if mode == "text":
            hits = await self._leg_text(query, limit, filters, per_document)
        elif mode == "vector":
            assert self.embedder is not None
            vector = await asyncio.to_thread(self.embedder.embed_query, query)
            hits = await self._leg_vector(vector, limit, filters, per_document)
        else:
            assert self.embedder is not None
            depth = max(candidates or settings.hybrid_candidates, limit)
            vector = await asyncio.to_thread(self.embedder.embed_query, query)
            text_hits, vector_hits = await asyncio.gather(
                self._leg_text(query, depth, filters, per_document),
                self._leg_vector(vector, depth, filters, per_document))
            hits = fuse(text_hits, vector_hits, limit=limit, method=fusion, k=k,
                        weights=weights, per_document=per_document)
        if min_score is not None:
            hits = [h for h in hits if h.score >= min_score]
        return hits[:limit]

    async def _leg_text(self, query: str, limit: int, filters: Filters,
                        per_document: bool) -> list[Hit]:
        if not per_document:
            return await self.text(query, limit, filters)
        return await _distinct_documents(lambda n: self.text(query, n, filters), limit,
                                         "text")

    async def _leg_vector(self, vector: Sequence[float] | np.ndarray, limit: int,
                          filters: Filters, per_document: bool) -> list[Hit]:
        if not per_document:
            return await self.vector(vector, limit, filters)
        return await _distinct_documents(lambda n: self.vector(vector, n, filters), limit,
                                         "vector")

    async def text(self, query: str, limit: int, filters: Filters) -> list[Hit]:
        terms = query_terms(query)
        if not terms:
            return []
        if not self.settings.chunked:
            return await self._text_documents(terms, limit, filters)
        names = self.store.names
        clauses, params = filters.where()
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            f"SELECT {_DETAIL_FIELDS}, search::score(1) AS score FROM {names.chunks}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return _text_hits(rows)

    async def _text_documents(self, terms: str, limit: int, filters: Filters) -> list[Hit]:
        """BM25 over whole documents (documents-only stores): a hit is a document."""
        clauses, params = filters.where(document="")
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            "SELECT id, id AS document, content, 0 AS chunk_index, 0 AS char_start,"
            " string::len(content) AS char_end, source, title, mime_type, complete,"
            f" search::score(1) AS score FROM {self.store.names.documents}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return _text_hits(rows)

    async def vector(self, vector: Sequence[float] | np.ndarray, limit: int,
                     filters: Filters) -> list[Hit]:
        if self.embedder is None:
            raise ConfigurationError("vector search needs embedding vectors; this store has none")
        vec = [float(x) for x in vector]
        if len(vec) != self.embedder.dimension:
            raise DimensionMismatchError(
                f"query vector has {len(vec)} dimensions, the index has {self.embedder.dimension}")
        names = self.store.names
        k = int(limit)
        # The graph's recall falls when k approaches ef (on SciFact, M 12 / EFC 150: recall@100
        # 0.95 at ef 100, 0.99 at ef 200): deep fetches get a candidate list of twice k.
        ef = max(self.settings.hnsw_ef, 2 * k)
        if filters.vector_table is not None:  # a notebook's own vectors and index
            table, index, fields = (filters.vector_table, f"{filters.vector_table}_hnsw",
                                    _DETAIL_FIELDS_VIA_CHUNK)
            clauses, params = filters.where(through="chunk.")
        else:
            table, index, fields = names.chunks, names.hnsw_index, _DETAIL_FIELDS
            clauses, params = filters.where()
        if await index_status(self.store, index, table) == "ready":
            clauses.append(f"embedding <|{k},{ef}|> $v")
            distance = "vector::distance::knn()"
        else:  # the graph is being built: the operator would return every row
            clauses.append("embedding != NONE")
            distance = "(1 - vector::similarity::cosine(embedding, $v))"
        (rows,) = await self.store.query(
            f"SELECT {fields}, {distance} AS distance FROM {table}"
            f" WHERE {' AND '.join(clauses)} ORDER BY distance, id LIMIT {k};",
            {**params, "v": vec},
        )
        hits = [_hit(row, self._similarity(float(row["distance"]))) for row in _visible(rows)
                if row.get("distance") is not None]
        for rank, hit in enumerate(hits, 1):
            hit.vector_rank, hit.vector_score = rank, hit.score
        return hits

    def _similarity(self, distance: float) -> float:
        if self.settings.hnsw_distance == "COSINE":
            return 1.0 - distance
        return 1.0 / (1.0 + distance)


async def _distinct_documents(fetch: Callable[[int], Awaitable[list[Hit]]], want: int,
                              leg: str) -> list[Hit]:
    """The best chunk of each of the top ``want`` documents of one leg (MaxP).

    Fetches chunks, three per wanted document to start with, and twice as many each time
    the distinct documents fall short while the leg still has more to give. Ranks and
    scores are rewritten as document ranks.
    """
    n = min(max(want * 3, want + 10), MAX_FETCH)
    while True:
        chunks = await fetch(n)
        seen: dict[str, Hit] = {}
        for hit in chunks:
            seen.setdefault(hit.document_id, hit)
        if len(seen) >= want or len(chunks) < n or n >= MAX_FETCH:
            break
        n = min(n * 2, MAX_FETCH)
    docs = list(seen.values())[:want]
    for rank, hit in enumerate(docs, 1):
        if leg == "text":
            hit.text_rank = rank
        else:
            hit.vector_rank = rank
    return docs


def fuse(text_hits: list[Hit], vector_hits: list[Hit], *, limit: int, method: str = "rrf",
         k: int = RRF_K, weights: tuple[float, float] = (1.0, 1.0),
         per_document: bool = False) -> list[Hit]:
    """Merge the ranked hits of the two legs into one ranking.

    ``rrf``: ``w_text / (k + text_rank) + w_vector / (k + vector_rank)``, a missing rank
    adding nothing. ``minmax``: the weighted sum of each leg's scores scaled to [0, 1] over
    its candidates (a hit missing from a leg counts as that leg's minimum). ``zscore``: the
    same with scores standardised to mean 0 and standard deviation 1. Hits are the same when
    they are the same chunk, or with ``per_document`` the same document; the representative
    chunk of a document is the one its better leg found. Ties are broken by the best rank,
    then the id, so the order is deterministic.
    """
    if method not in FUSIONS:
        raise ConfigurationError(f"fusion must be one of {', '.join(FUSIONS)}, got {method!r}")

    def key(hit: Hit) -> str:
        return hit.document_id if per_document else hit.chunk_id

    fused: dict[str, Hit] = {}
    for hit in [*text_hits, *vector_hits]:
        base = fused.get(key(hit))
        if base is None:
            fused[key(hit)] = hit
            continue
        if hit.text_rank is not None and base.text_rank is None:
            base.text_rank, base.text_score = hit.text_rank, hit.text_score
        if hit.vector_rank is not None and base.vector_rank is None:
            base.vector_rank, base.vector_score = hit.vector_rank, hit.vector_score
            if per_document and hit.vector_rank < (base.text_rank or hit.vector_rank + 1):
                # the vector leg ranks this document higher: show the chunk it found
                fused[key(hit)] = _with_ranks(hit, base)
    w_text, w_vector = weights
    if method == "rrf":
        for hit in fused.values():
            hit.score = ((w_text / (k + hit.text_rank) if hit.text_rank else 0.0)
                         + (w_vector / (k + hit.vector_rank) if hit.vector_rank else 0.0))
    else:
        scale = _minmax if method == "minmax" else _zscore
        text_norm = scale([h.text_score for h in text_hits if h.text_score is not None])
        vector_norm = scale([h.vector_score for h in vector_hits if h.vector_score is not None])
        for hit in fused.values():
            hit.score = (w_text * text_norm(hit.text_score)
                         + w_vector * vector_norm(hit.vector_score))
    ordered = sorted(
        fused.values(),
        key=lambda h: (-h.score, min(r for r in (h.text_rank, h.vector_rank) if r), key(h)),
    )
    return ordered[:limit]


def fuse_rrf(text_hits: list[Hit], vector_hits: list[Hit], limit: int,
             k: int = RRF_K) -> list[Hit]:
    """Reciprocal rank fusion of chunk hits, with a deterministic order for ties."""
    return fuse(text_hits, vector_hits, limit=limit, method="rrf", k=k)


def _with_ranks(hit: Hit, other: Hit) -> Hit:
    hit.text_rank = hit.text_rank or other.text_rank
    hit.text_score = hit.text_score if hit.text_score is not None else other.text_score
    hit.vector_rank = hit.vector_rank or other.vector_rank
    hit.vector_score = hit.vector_score if hit.vector_score is not None else other.vector_score
    return hit


def _minmax(scores: list[float]) -> Callable[[float | None], float]:
    if not scores:
        return lambda s: 0.0
    low, high = min(scores), max(scores)
    span = high - low

    def norm(s: float | None) -> float:
        if s is None:
            return 0.0
        return (s - low) / span if span > 0 else 1.0

    return norm


def _zscore(scores: list[float]) -> Callable[[float | None], float]:
    if not scores:
        return lambda s: 0.0
    mean = float(np.mean(scores))
    std = float(np.std(scores))
    floor = (min(scores) - mean) / std if std > 0 else 0.0

    def norm(s: float | None) -> float:
        if s is None:
            return floor
        return (s - mean) / std if std > 0 else 0.0

    return norm


def _text_hits(rows: list[dict[str, Any]] | None) -> list[Hit]:
    hits = [_hit(row, float(row.get("score") or 0.0)) for row in _visible(rows)]
    for rank, hit in enumerate(hits, 1):
        hit.text_rank, hit.text_score = rank, hit.score
    return hits


def _visible(rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Rows whose document is complete and current: chunks of a document still being
    written, or of a generation being replaced, (or left by a crash, until recovery) are
    never shown."""
    return [r for r in rows or [] if r.get("complete") is True
            and (r.get("generation") or 0) == (r.get("doc_generation") or 0)]


def _hit(row: dict[str, Any], score: float) -> Hit:
    return Hit(
        chunk_id=str(row["id"]),
        document_id=str(row["document"]),
        source=row.get("source") or "",
        title=row.get("title"),
        mime_type=row.get("mime_type") or "",
        content=row.get("content") or "",
        chunk_index=int(row.get("chunk_index") or 0),
        char_start=int(row.get("char_start") or 0),
        char_end=int(row.get("char_end") or 0),
        page=row.get("page_number"),
        last_page=row.get("last_page"),
        score=score,
    )
