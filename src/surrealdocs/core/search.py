"""Search: BM25 text, vector, and hybrid fusion of both, through the store's two legs
(:mod:`surrealdocs.store.legs`, chosen when the store opened; this module never asks how
the store is laid out).

Every filter is applied inside the legs' queries (for vector search it is pushed into the
scan, so k results come back from the filtered subset; a notebook scope walks that
notebook's own graph).

Hybrid search fetches ``candidates`` hits from each leg and fuses them (:mod:`.fusion`;
z-score normalisation by default). With ``per_document=True`` every result is a different
document, represented by its best chunk (MaxP): both legs over-fetch chunks until they have
enough documents, and hybrid search fuses document ranks, so a document whose best BM25
chunk and best vector chunk differ is still recognised as found by both.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ..config import Settings
from ..embed import EmbeddingRunner
from ..errors import ConfigurationError, DimensionMismatchError
from ..parts.analyzer import STOP_WORDS, analyzer_for
from ..parts.filters import Filters, glob_to_regex
from ..parts.fusion import fuse
from ..parts.relevance import LEXICAL, calibration_for, coverage, kept, query_weights
from ..parts.results import Hit, id_text
from ..rerank import Reranker, RerankError, reranker_for
from ..store.chunks import is_visible
from ..store.documents import record_id
from ..store.legs import Legs
from .search_request import MAX_RESULTS, MODES, SearchRequest

__all__ = ["MODES", "NOTHING_RELEVANT", "Filters", "Hit", "Searcher", "common_words_only",
           "glob_to_regex",
           "query_terms", "query_words", "search_notice"]

MAX_FETCH = 10_000  # most chunks one leg fetches while collecting distinct documents
DUPLICATE_ROOM = 10  # hits fetched beyond the limit, for passages shown twice
BONUS_CHUNKS = 2  # a document's chunks after its best that add to its score (with a bonus)

# The analyzer's `class` tokenizer splits runs of letters from runs of digits ("r2d2" is
# r, 2, d, 2): query words are cut the same way, so that each is one index term.
_PIECE = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)


def common_words_only(text: str) -> list[str]:
    """The query's words when every one is a common word (``the``, ``of and``): such a query
    says nothing about what to look for, and every search returns no hits for it
    (:func:`search_notice` says why). Empty otherwise."""
    words = _PIECE.findall(text.lower())
    return words if words and all(w in STOP_WORDS for w in words) else []


NOTHING_RELEVANT = "no passage looks relevant to the query"


class SearchHits(list[Hit]):
    """A search's hits, and what a face must say beside them: ``notice`` (a reranker that
    failed) and how long the rerank stage took (``rerank_ms``)."""

    notice: str | None = None
    rerank_ms: float | None = None


def search_notice(query: str | None, hits: Sequence[Hit], *, cutoff: bool = True,
                  show_weaker: str = "cutoff=false") -> str | None:
    """Why a search found nothing, for every face to show: the query is only common words,
    or no passage looks relevant (``show_weaker``: how this face shows weaker matches);
    or, beside hits, why their order is the first stage's (a reranker failed)."""
    own = getattr(hits, "notice", None)
    if hits:
        return own
    words = common_words_only(query or "")
    if words:
        return (f"every word of the query is a common word"
                f" ({', '.join(dict.fromkeys(words))}), which says nothing about what to"
                " look for: add a word that does")
    if cutoff:
        return f"{NOTHING_RELEVANT} ({show_weaker} shows weaker matches)"
    return None


def query_words(text: str) -> list[str]:
    """Terms of a user query for the BM25 index: punctuation and stop words removed."""
    words = _PIECE.findall(text.lower())
    kept = [w for w in words if w not in STOP_WORDS]
    return kept or words


def query_terms(text: str) -> str:
    return " ".join(query_words(text))


MIN_BACKGROUND = 100  # fewer chunks than this say too little of what unrelated ones score


class _Embedded:
    """The query's vector as the legs need it (``vector``), and as the scores need it: a
    text search's hits are scored with the query's vector too (a chunk scores the same in
    every mode), embedded while the text leg runs (``pending``)."""

    def __init__(self, vector: list[float] | None, text_first: list[Hit] | None,
                 pending: asyncio.Future[list[float]] | None) -> None:
        self.vector = vector
        self.text_first = text_first  # a hybrid search's text leg, run while embedding
        self.pending = pending

    async def for_scores(self) -> list[float] | None:
        return await self.pending if self.pending is not None else self.vector

    async def cancel(self) -> None:
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()
            await asyncio.gather(self.pending, return_exceptions=True)


class Searcher:
    """Searches one store through its legs (:mod:`surrealdocs.store.legs`), chosen when the
    store opened: stores without vectors have no vector leg (text search only)."""

    def __init__(self, legs: Legs, embedding: EmbeddingRunner | None, settings: Settings,
                 language: str) -> None:
        self.legs = legs
        self.embedding = embedding if legs.vector is not None else None
        self.settings = settings
        self.analyzer = analyzer_for(language)
        self._rerankers: dict[str, Reranker] = {}

    async def search(self, request: SearchRequest, filters: Filters) -> list[Hit]:
        """:meth:`first_stage`, then, when ``request.rerank`` names a reranker, its second
        stage: the first ``rerank_depth`` passages in the reranker's order (each hit keeps its
        ``first_rank`` beside its ``rerank_score``). A reranker that fails changes nothing but
        the notice the hits carry (:class:`SearchHits`)."""
        if not request.rerank:
            return await self.first_stage(request, filters)
        depth = self.settings.rerank_depth
        # rerank_timeout bounds the whole search: the reranker gets what the first stage
        # left of it, so that a reranker that never answers costs the timeout, not more
        deadline = time.monotonic() + self.settings.rerank_timeout
        hits = await self.first_stage(request.replace(limit=max(request.limit, depth)),
                                      filters)
        for rank, hit in enumerate(hits, 1):
            hit.first_rank = rank
        out = SearchHits(hits)
        if hits:
            try:
                reranker = self.reranker(str(request.rerank))
                top = hits[:depth]
                started = time.monotonic()
                async with asyncio.timeout(max(0.0, deadline - started)):
                    scores = await reranker.scores(request.query or "", [h.content for h in top])
                for hit, score in zip(top, scores, strict=True):
                    hit.rerank_score = round(score, 6)
                order = sorted(range(len(top)), key=lambda i: (-scores[i], i))
                out = SearchHits([top[i] for i in order] + hits[depth:])
                out.rerank_ms = round((time.monotonic() - started) * 1000, 2)
            except TimeoutError:
                out.notice = (f"the reranker did not answer within"
                              f" {self.settings.rerank_timeout:g} s: the first stage's order"
                              " is shown")
            except (RerankError, ConfigurationError) as exc:
                out.notice = f"the reranker failed ({exc}): the first stage's order is shown"
        kept = SearchHits(out[:request.limit])
        kept.notice, kept.rerank_ms = out.notice, out.rerank_ms
        return kept

    def reranker(self, name: str) -> Reranker:
        """The reranker ``name``, made once."""
        found = self._rerankers.get(name)
        if found is None:
            found = self._rerankers[name] = reranker_for(name, self.settings)
        return found

    async def close(self) -> None:
        """Let the rerankers' connections go."""
        for reranker in self._rerankers.values():
            await reranker.close()
        self._rerankers.clear()

    async def first_stage(self, request: SearchRequest, filters: Filters) -> list[Hit]:
        """Search as ``request`` asks (checked by :meth:`SearchRequest.checked`), within
        ``filters``: embed the query, run the legs, fuse them, show and score the hits.

        Unless ``request.cutoff`` is false, the default cut-off applies
        (:func:`surrealdocs.parts.relevance.kept`): no hits unless one scores
        ``settings.relevance_cutoff``, then those down to ``settings.relevance_floor``."""
        if request.mode != "text" and self.embedding is None:
            raise ConfigurationError(
                f"{request.mode} search needs embedding vectors, and this store has none "
                f"({self.legs.without_vectors}): use mode='text'")
        text = request.query or ""
        if request.query_vector is None and common_words_only(text):
            return []  # nothing to look for (search_notice says so)
        filters = await self.legs.resolve(filters)
        if filters.documents is not None and filters.documents.nothing:
            return []  # no document passes the metadata filter
        embedded = await self._embed(request, filters)
        try:
            hits = await self._found(request, filters, embedded)
            await self._judge(hits, text, await embedded.for_scores() if hits else None)
        finally:
            await embedded.cancel()
        return self._cut(hits, request)

    async def _embed(self, request: SearchRequest, filters: Filters) -> _Embedded:
        """The query's vector; in a hybrid search the text leg runs meanwhile (the model
        embeds in a thread)."""
        text, mode = request.query or "", request.mode
        if mode == "hybrid" and request.query_vector is None:
            embedding = asyncio.ensure_future(self._query_vector(text, None))
            try:
                text_first = await self._leg_text(request, filters, _depth(request), False)
            except BaseException:
                embedding.cancel()
                await asyncio.gather(embedding, return_exceptions=True)
                raise
            return _Embedded(await embedding, text_first, None)
        if mode == "text":
            pending = asyncio.ensure_future(self._query_vector(text, None)) \
                if self._judged_by_meaning() else None
            return _Embedded(None, None, pending)
        return _Embedded(await self._query_vector(text, request.query_vector), None, None)

    async def _found(self, request: SearchRequest, filters: Filters,
                     embedded: _Embedded) -> list[Hit]:
        """The legs, fused and shown.

        The legs do not check that each chunk is visible (its document complete, its
        generation current): that costs a read of the document per candidate, and a chunk
        is invisible only while it is being written or replaced. The final hits are
        checked; if one is not visible, the search runs again checking every candidate.

        A passage whose text an earlier hit shows already (the same paragraph in two files)
        is shown once, by its best hit: the legs fetch some more than ``limit``, and more
        again while duplicates leave fewer than ``limit`` distinct passages (per document,
        every hit is another document, and each counts)."""
        limit = request.limit
        fetch = limit if request.per_document else min(limit + min(limit, DUPLICATE_ROOM),
                                                      MAX_RESULTS)
        first = True
        while True:
            shown, all_visible = await self._show(await self._fused(
                request, filters, embedded, fetch, careful=False, first=first))
            if not all_visible:
                shown, _ = await self._show(await self._fused(
                    request, filters, embedded, fetch, careful=True, first=first))
            if request.per_document:
                return shown[:limit]
            distinct = _distinct_texts(shown)
            if len(distinct) >= limit or len(shown) < fetch or fetch >= MAX_RESULTS:
                return distinct[:limit]
            fetch, first = min(fetch * 4, MAX_RESULTS), False

    async def _fused(self, request: SearchRequest, filters: Filters, embedded: _Embedded,
                     fetch: int, *, careful: bool, first: bool) -> list[Hit]:
        """The first ``fetch`` hits of the legs (fused in a hybrid search, whose legs give
        ``candidates`` hits each, or ``fetch`` once duplicates called for more: ``first``
        false)."""
        vector = embedded.vector
        if request.mode == "text":
            return (await self._leg_text(request, filters, fetch, careful))[:fetch]
        assert vector is not None
        if request.mode == "vector":
            return (await self._leg_vector(request, filters, vector, fetch, careful))[:fetch]
        depth = _depth(request) if first else max(_depth(request), fetch)
        if embedded.text_first is not None and first and not careful:
            text_hits = embedded.text_first
            vector_hits = await self._leg_vector(request, filters, vector, depth, careful)
        else:
            text_hits, vector_hits = await asyncio.gather(
                self._leg_text(request, filters, depth, careful),
                self._leg_vector(request, filters, vector, depth, careful))
        assert request.fusion is not None and request.rrf_k is not None
        weights = (float(request.text_weight or 0.0), float(request.vector_weight or 0.0))
        hits = fuse(text_hits, vector_hits, limit=len(text_hits) + len(vector_hits),
                    method=request.fusion, k=request.rrf_k, weights=weights,
                    per_document=request.per_document)
        return hits[:fetch]

    def _cut(self, hits: list[Hit], request: SearchRequest) -> list[Hit]:
        """The hits the cut-off and ``min_score`` keep."""
        settings = self.settings
        if request.cutoff and settings.relevance_cutoff > 0:
            hits = [h for h, keep in zip(hits, kept(
                [h.score for h in hits], settings.relevance_cutoff,
                min(settings.relevance_floor, settings.relevance_cutoff))) if keep]
        if request.min_score:
            hits = [h for h in hits if h.score >= request.min_score]
        return hits

    def _judged_by_meaning(self) -> bool:
        """Whether a hit's score weighs its vector similarity: with an embedding model that
        embeds meaning (not the word-hashing test models)."""
        return (self.embedding is not None
                and calibration_for(self.embedding.name) is not LEXICAL)

    async def _judge(self, hits: list[Hit], text: str, vector: list[float] | None) -> None:
        """Give each hit its score: the probability that it is relevant, from the query and
        the chunk alone (:mod:`surrealdocs.parts.relevance`), with the evidence it rests on
        (``similarity``, ``coverage``)."""
        if not hits:
            return
        analyzer = self.analyzer
        weights = query_weights(analyzer.terms(query_terms(text))) if text else {}
        idf = await self.legs.text.idf(list(weights)) if weights else {}
        similarity: dict[str, float] = {}
        model = self.embedding.name if self.embedding else ""
        calibration = calibration_for(model)
        background: float | None = None
        if vector is not None and self.legs.vector is not None:
            similarity = await self.legs.vector.similarities(
                vector, {h.chunk_id.split(":", 1)[1]: h.chunk_id for h in hits})
            if calibration.against_background:
                background = await self._background(vector)
                if background is None:
                    calibration = calibration_for(model, background=False)
        for hit in hits:
            hit.coverage = round(coverage(weights, idf, analyzer.terms_of_words(
                list(set(analyzer.words(hit.content))))), 6) if weights else None
            hit.similarity = similarity.get(hit.chunk_id)
            if vector is not None and hit.similarity is None and hit.vector_score is not None:
                hit.similarity = hit.vector_score  # a vector hit the codes do not hold yet
            # a word-hashing model's similarity judges only a search without words
            by_meaning = vector is not None and (calibration is not LEXICAL or not weights)
            hit.score = calibration.probability(
                _against(hit.similarity, background) if by_meaning else None,
                hit.coverage if weights or not by_meaning else None)

    async def _background(self, vector: list[float]) -> float | None:
        """The query's mean similarity to a fixed sample of the store's chunks (``None``
        where the store cannot say, or knows too few)."""
        assert self.legs.vector is not None
        similarities = await self.legs.vector.background(vector)
        if similarities is None or len(similarities) < MIN_BACKGROUND:
            return None
        return float(np.asarray(similarities, dtype=np.float64).mean())

    async def _show(self, hits: list[Hit]) -> tuple[list[Hit], bool]:
        """Fill in what the final hits show (text, position, source): the legs returned ids
        and scores only. Returns the hits that are visible, and whether all were."""
        details = self.legs.details
        if details is None or not hits:
            return hits, True
        rows = await details([record_id(h.chunk_id, self.legs.chunks_table) for h in hits])
        shown = []
        for hit in hits:
            row = rows.get(hit.chunk_id)
            if row is not None and is_visible(row):
                _fill(hit, row)
                shown.append(hit)
        return shown, len(shown) == len(hits)

    async def _query_vector(self, text: str,
                            given: Sequence[float] | None) -> list[float]:
        assert self.embedding is not None
        if given is None:
            return await self.embedding.query(text)
        vector = [float(x) for x in given]
        if len(vector) != self.embedding.dimension:
            raise DimensionMismatchError(
                f"query vector has {len(vector)} dimensions, the index has "
                f"{self.embedding.dimension}")
        if not all(math.isfinite(x) for x in vector):
            raise ConfigurationError("the query vector holds NaN or infinite values")
        return vector

    async def _leg_text(self, request: SearchRequest, filters: Filters, limit: int,
                        careful: bool) -> list[Hit]:
        words = query_words(request.query or "")
        if not request.per_document:
            return await self.text(words, limit, filters, careful)
        return await _distinct_documents(lambda n: self.text(words, n, filters, careful),
                                         limit, "text", self.settings.bm25_document_bonus)

    async def _leg_vector(self, request: SearchRequest, filters: Filters,
                          vector: list[float], limit: int, careful: bool) -> list[Hit]:
        if not request.per_document:
            return await self.vector(vector, limit, filters, careful)
        return await _distinct_documents(lambda n: self.vector(vector, n, filters, careful),
                                         limit, "vector")

    async def text(self, words: list[str], limit: int, filters: Filters,
                   careful: bool = True) -> list[Hit]:
        """The BM25 leg: chunks (or documents, in documents-only stores) best first."""
        if not words:
            return []
        rows = await self.legs.text.rows(words, limit, filters, careful)
        hits = [_hit(row) for row in rows]
        for rank, hit in enumerate(hits, 1):
            hit.text_rank, hit.text_score = rank, hit.score
        return hits

    async def vector(self, vector: list[float], limit: int, filters: Filters,
                     careful: bool = True) -> list[Hit]:
        """The vector leg: the nearest chunks, best first."""
        rows = await self.legs.vector_for(filters).rows(vector, int(limit), filters, careful)
        hits = [_hit(row) for row in rows]
        for rank, hit in enumerate(hits, 1):
            hit.vector_rank, hit.vector_score = rank, hit.score
        return hits


def _distinct_texts(hits: list[Hit]) -> list[Hit]:
    """The hits without those whose text (whitespace aside) an earlier hit has."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        text = " ".join(hit.content.split())
        if text not in seen:
            seen.add(text)
            out.append(hit)
    return out


def _depth(request: SearchRequest) -> int:
    """How many hits a hybrid search fetches of each leg."""
    return max(request.candidates or 0, request.limit)


def _against(similarity: float | None, background: float | None) -> float | None:
    """The similarity as the calibration takes it: as it is, or above the query's mean
    similarity to the store's background sample."""
    if similarity is None or background is None:
        return similarity
    return similarity - background


async def _distinct_documents(fetch: Callable[[int], Awaitable[list[Hit]]], want: int,
                              leg: str, bonus: float = 0.0) -> list[Hit]:
    """The best chunk of each of the top ``want`` documents of one leg (MaxP).

    Fetches chunks, three per wanted document to start with, and twice as many each time
    the distinct documents fall short while the leg still has more to give. Ranks and
    scores are rewritten as document ranks. With a ``bonus``, a document scores its best
    chunk's score plus ``bonus`` times its next :data:`BONUS_CHUNKS` fetched chunks' scores
    (a document that matches in several places is more likely about the query).
    """
    n = min(max(want * 3, want + 10), MAX_FETCH)
    while True:
        chunks = await fetch(n)
        seen: dict[str, Hit] = {}
        more: dict[str, list[float]] = {}
        for hit in chunks:
            if seen.setdefault(hit.document_id, hit) is not hit:
                more.setdefault(hit.document_id, []).append(hit.score)
        if len(seen) >= want or len(chunks) < n or n >= MAX_FETCH:
            break
        n = min(n * 2, MAX_FETCH)
    docs = list(seen.values())
    if bonus:  # divided by what the bonus can add at most, so a 0-1 score stays 0-1
        for hit in docs:
            hit.score = (hit.score + bonus * sum(sorted(more.get(hit.document_id, ()),
                                                        reverse=True)[:BONUS_CHUNKS])
                         ) / (1.0 + bonus * BONUS_CHUNKS)
        docs.sort(key=lambda h: -h.score)  # stable: ties keep the leg's order
    docs = docs[:want]
    for rank, hit in enumerate(docs, 1):
        if leg == "text":
            hit.text_rank, hit.text_score = rank, hit.score
        else:
            hit.vector_rank, hit.vector_score = rank, hit.score
    return docs


def _hit(row: dict[str, Any]) -> Hit:
    """A hit from a leg's row (its details are filled in by ``_fill`` when it is shown)."""
    hit = Hit(chunk_id=id_text(row["id"]), document_id=id_text(row["document"]), source="",
              title=None, mime_type="", content="", chunk_index=0, char_start=0, char_end=0,
              page=None, last_page=None, score=float(row.get("score") or 0.0))
    if "content" in row:  # a whole document (documents-only stores): shown as it is
        _fill(hit, row)
    return hit


def _fill(hit: Hit, row: dict[str, Any]) -> None:
    hit.source = row.get("source") or ""
    hit.title = row.get("title")
    hit.mime_type = row.get("mime_type") or ""
    hit.content = row.get("content") or ""
    hit.context = row.get("context")
    hit.metadata = row.get("metadata") or None
    hit.chunk_index = int(row.get("chunk_index") or 0)
    hit.char_start = int(row.get("char_start") or 0)
    hit.char_end = int(row.get("char_end") or 0)
    hit.page = row.get("page_number")
    hit.last_page = row.get("last_page")
