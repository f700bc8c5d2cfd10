"""Search: BM25 text, HNSW vector, and hybrid fusion of both.

Every filter is applied inside the query (for vector search it is pushed into the HNSW scan,
so k results come back from the filtered subset; a notebook scope walks that notebook's own
graph). Vector search uses the HNSW index through ``<|K,EF|>``; if the index is not ready
(being built), it falls back to an exact scan rather than trusting the engine, which would
then return every row.

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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ..config import FUSIONS, Settings
from ..embed import EmbeddingRunner
from ..errors import ConfigurationError, DimensionMismatchError
from ..parts.analyzer import STOP_WORDS, analyzer_for
from ..parts.filters import Filters, glob_to_regex
from ..parts.fusion import fuse
from ..parts.relevance import LEXICAL, calibration_for, coverage, kept, query_weights
from ..parts.results import Hit, id_text
from ..store.chunks import is_visible
from ..store.documents import record_id
from ..store.storage import Storage
from .search_request import MODES

__all__ = ["MODES", "NOTHING_RELEVANT", "Filters", "Hit", "Searcher", "common_words_only",
           "glob_to_regex",
           "query_terms", "query_words", "search_notice"]

# the most hits (and candidates per leg) one search may ask for
MAX_RESULTS = 10_000
MAX_FETCH = 10_000  # most chunks one leg fetches while collecting distinct documents
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


def search_notice(query: str | None, hits: Sequence[Hit], *, cutoff: bool = True,
                  show_weaker: str = "cutoff=false") -> str | None:
    """Why a search found nothing, for every face to show: the query is only common words,
    or no passage looks relevant (``show_weaker``: how this face shows weaker matches)."""
    if hits:
        return None
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


class Searcher:
    """Searches one store. Stores without vectors (``embedding`` ``None``) offer text search
    only; documents-only stores (``settings.chunked`` false) search whole documents."""

    def __init__(self, storage: Storage, embedding: EmbeddingRunner | None,
                 settings: Settings) -> None:
        self.storage = storage
        self.embedding = embedding if settings.vectors else None
        self.settings = settings

    async def search(self, query: str | None, *, mode: str = "hybrid", limit: int = 10,
                     min_score: float | None = None, filters: Filters | None = None,
                     candidates: int | None = None, rrf_k: int | None = None,
                     fusion: str | None = None, text_weight: float | None = None,
                     vector_weight: float | None = None, per_document: bool = False,
                     query_vector: Sequence[float] | None = None,
                     cutoff: bool = True) -> list[Hit]:
        """Search chunks (see :meth:`surrealdocs.KnowledgeBase.search` for the options).
        ``cutoff``: the default cut-off (:func:`surrealdocs.parts.relevance.kept`): no hits
        unless one scores ``settings.relevance_cutoff``, then those down to
        ``settings.relevance_floor``."""
        if mode not in MODES:
            raise ConfigurationError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        _check_int("limit", limit, 1, MAX_RESULTS)
        if candidates is not None:
            _check_int("candidates", candidates, 1, MAX_RESULTS)
        settings = self.settings
        fusion = (fusion or settings.hybrid_fusion).lower()
        if fusion not in FUSIONS:
            raise ConfigurationError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        weights = (settings.text_weight if text_weight is None else text_weight,
                   settings.vector_weight if vector_weight is None else vector_weight)
        if not all(isinstance(w, (int, float)) and math.isfinite(w) and w >= 0
                   for w in weights) or sum(weights) == 0:
            raise ConfigurationError(
                "text_weight and vector_weight must be finite numbers >= 0, not both 0")
        k = settings.rrf_k if rrf_k is None else rrf_k
        _check_int("rrf_k", k, 0, MAX_RESULTS)
        if min_score is not None and (isinstance(min_score, bool) or not isinstance(
                min_score, (int, float)) or not 0.0 <= min_score <= 1.0):
            raise ConfigurationError(
                f"min_score must be a number from 0 to 1 (a probability of relevance), got"
                f" {min_score!r}")
        filters = filters or Filters()
        text = (query or "").strip()
        if len(text) > settings.max_query_chars:
            raise ConfigurationError(
                f"the query has {len(text)} characters; the limit is {settings.max_query_chars}"
                " (SURREALDOCS_MAX_QUERY_CHARS)")
        if not text and query_vector is None:
            raise ConfigurationError("the query is empty")
        if query_vector is not None and not text and mode != "vector":
            if mode == "text":
                raise ConfigurationError("text search needs query text, not only a vector")
            mode = "vector"
        if mode != "text" and self.embedding is None:
            raise ConfigurationError(
                f"{mode} search needs embedding vectors, and this store has none "
                "(it was created " + ("with documents only" if not settings.chunked
                                      else "with embed=False") + "): use mode='text'")
        if query_vector is None and common_words_only(text):
            return []  # nothing to look for (search_notice says so)
        depth = max(candidates or settings.hybrid_candidates, limit)  # hybrid, per leg
        if mode == "hybrid" and query_vector is None:
            # the text leg runs while the model embeds the query (in a thread)
            embedding = asyncio.ensure_future(self._query_vector(text, None))
            try:
                text_first = await self._leg_text(text, depth, filters, per_document, False)
            except BaseException:
                embedding.cancel()
                await asyncio.gather(embedding, return_exceptions=True)
                raise
            vector: list[float] | None = await embedding
        else:
            text_first = None
            vector = None if mode == "text" else await self._query_vector(text, query_vector)
        # a text search's hits are scored with the query's vector too (a chunk scores the
        # same in every mode): it is embedded while the text leg runs
        pending = asyncio.ensure_future(self._query_vector(text, None)) \
            if mode == "text" and self._judged_by_meaning() else None
        try:
            return await self._ranked(text, mode, limit, min_score, filters, depth, fusion, k,
                                      weights, per_document, cutoff, text_first, vector,
                                      pending)
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)

    async def _ranked(self, text: str, mode: str, limit: int, min_score: float | None,
                      filters: Filters, depth: int, fusion: str, k: int,
                      weights: tuple[float, float], per_document: bool, cutoff: bool,
                      text_first: list[Hit] | None, vector: list[float] | None,
                      pending: asyncio.Future[list[float]] | None) -> list[Hit]:
        """The legs, fused, shown, scored and cut (:meth:`search` has checked the request)."""
        settings = self.settings

        async def run(careful: bool) -> list[Hit]:
            if mode == "text":
                hits = await self._leg_text(text, limit, filters, per_document, careful)
            elif mode == "vector":
                assert vector is not None
                hits = await self._leg_vector(vector, limit, filters, per_document, careful)
            else:
                assert vector is not None
                if text_first is not None and not careful:
                    text_hits = text_first
                    vector_hits = await self._leg_vector(vector, depth, filters, per_document,
                                                         careful)
                else:
                    text_hits, vector_hits = await asyncio.gather(
                        self._leg_text(text, depth, filters, per_document, careful),
                        self._leg_vector(vector, depth, filters, per_document, careful))
                hits = fuse(text_hits, vector_hits, limit=len(text_hits) + len(vector_hits),
                            method=fusion, k=k, weights=weights, per_document=per_document)
            return hits[:limit]

        # The legs do not check that each chunk is visible (its document complete, its
        # generation current): that costs a read of the document per candidate, and a chunk
        # is invisible only while it is being written or replaced. The final hits are
        # checked; if one is not visible, the search runs again checking every candidate.
        shown, all_visible = await self._show(await run(careful=False))
        if not all_visible:
            shown, _ = await self._show(await run(careful=True))
        if pending is not None and shown:
            vector = await pending
        await self._judge(shown, text, vector)
        if cutoff and settings.relevance_cutoff > 0:
            shown = [h for h, keep in zip(shown, kept(
                [h.score for h in shown], settings.relevance_cutoff,
                min(settings.relevance_floor, settings.relevance_cutoff))) if keep]
        if min_score:
            shown = [h for h in shown if h.score >= min_score]
        return shown

    def _judged_by_meaning(self) -> bool:
        """Whether a hit's score weighs its vector similarity: in a chunked store with an
        embedding model that embeds meaning (not the word-hashing test models)."""
        return (self.embedding is not None and self.settings.chunked
                and calibration_for(self.embedding.name) is not LEXICAL)

    async def _judge(self, hits: list[Hit], text: str, vector: list[float] | None) -> None:
        """Give each hit its score: the probability that it is relevant, from the query and
        the chunk alone (:mod:`surrealdocs.parts.relevance`), with the evidence it rests on
        (``similarity``, ``coverage``)."""
        if not hits:
            return
        legs = self.storage.chunks.legs
        analyzer = analyzer_for(self.storage.store.names.language)
        weights = query_weights(analyzer.terms(query_terms(text))) if text else {}
        if not self.settings.chunked:  # documents-only stores keep no term statistics
            idf = dict.fromkeys(weights, 1.0)
        else:
            idf = await legs.idf(list(weights)) if weights else {}
        similarity: dict[str, float] = {}
        model = self.embedding.name if self.embedding else ""
        calibration = calibration_for(model)
        background: float | None = None
        if vector is not None and self.settings.chunked:
            similarity = await legs.similarities(vector, [h.chunk_id for h in hits])
            if calibration.against_background:
                background = await self._background(vector)
                if background is None:
                    calibration = calibration_for(model, background=False)
        for hit in hits:
            hit.coverage = round(coverage(weights, idf, analyzer.terms_of_words(
                list(set(analyzer.words(hit.content))))), 6) if weights else None
            hit.similarity = similarity.get(hit.chunk_id)
            if vector is not None and hit.similarity is None and hit.vector_score is not None:
                hit.similarity = hit.vector_score  # documents-only stores: the leg's own
            # a word-hashing model's similarity judges only a search without words
            by_meaning = vector is not None and (calibration is not LEXICAL or not weights)
            hit.score = calibration.probability(
                _against(hit.similarity, background) if by_meaning else None,
                hit.coverage if weights or not by_meaning else None)

    async def _background(self, vector: list[float]) -> float | None:
        """The query's mean similarity to a fixed sample of the store's chunks (``None``
        where the store cannot say, or knows too few)."""
        distances = await self.storage.chunks.legs.background(vector)
        if distances is None or len(distances) < MIN_BACKGROUND:
            return None
        similarity = 1.0 - np.asarray(distances, dtype=np.float64) \
            if self.settings.hnsw_distance == "COSINE" else -np.asarray(distances)
        return float(similarity.mean())

    async def _show(self, hits: list[Hit]) -> tuple[list[Hit], bool]:
        """Fill in what the final hits show (text, position, source): the legs returned ids
        and scores only. Returns the hits that are visible, and whether all were."""
        if not self.settings.chunked or not hits:
            return hits, True
        chunks = self.storage.chunks
        details = await chunks.details([record_id(h.chunk_id, chunks.table) for h in hits])
        shown = []
        for hit in hits:
            row = details.get(hit.chunk_id)
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

    async def _leg_text(self, query: str, limit: int, filters: Filters,
                        per_document: bool, careful: bool) -> list[Hit]:
        if not per_document:
            return await self.text(query, limit, filters, careful)
        return await _distinct_documents(lambda n: self.text(query, n, filters, careful),
                                         limit, "text", self.settings.bm25_document_bonus)

    async def _leg_vector(self, vector: list[float], limit: int, filters: Filters,
                          per_document: bool, careful: bool) -> list[Hit]:
        if not per_document:
            return await self.vector(vector, limit, filters, careful)
        return await _distinct_documents(lambda n: self.vector(vector, n, filters, careful),
                                         limit, "vector")

    async def text(self, query: str, limit: int, filters: Filters,
                   careful: bool = True) -> list[Hit]:
        """The BM25 leg: chunks (or documents, in documents-only stores) best first."""
        words = query_words(query)
        if self.settings.chunked and self.settings.bm25_max_df < 1.0 and len(words) > 1 \
                and self.storage.chunks.text is None:  # the engine's index only
            words = await self._informative(words)
        terms = " ".join(words)
        if not terms:
            return []
        if not self.settings.chunked:
            rows = await self.storage.documents.text_rows(terms, limit, filters)
            rows = [r for r in rows if r.get("complete") is True]
        else:
            rows = await self.storage.chunks.legs.text_rows(terms, limit, filters, careful)
        hits = [_hit(row, float(row.get("score") or 0.0)) for row in rows]
        for rank, hit in enumerate(hits, 1):
            hit.text_rank, hit.text_score = rank, hit.score
        return hits

    async def _informative(self, words: list[str]) -> list[str]:
        """The query's terms without those in more than ``bm25_max_df`` of the chunks (and
        in more than ``bm25_max_df_floor`` chunks).

        The engine scores every chunk that holds any query term, so a term in a quarter of
        the chunks costs a quarter of the table, while its inverse document frequency (and so
        its weight in the score) is low. The rarest ``bm25_min_terms`` are always kept, and
        so is a word whose frequency is not known yet (it is being counted).
        """
        chunks = self.storage.chunks
        df = chunks.legs.known_term_counts(words)  # a word not counted yet is kept
        if not df:
            return words
        cap = max(self.settings.bm25_max_df * await chunks.legs.total(),
                  self.settings.bm25_max_df_floor)
        kept = [w for w in words if df.get(w, 0) <= cap]
        if len(set(kept)) < self.settings.bm25_min_terms:
            rarest = sorted(set(words), key=lambda w: (df.get(w, 0), w))
            keep = set(rarest[:self.settings.bm25_min_terms])
            kept = [w for w in words if w in keep]
        return kept

    async def vector(self, vector: list[float], limit: int, filters: Filters,
                     careful: bool = True) -> list[Hit]:
        """The vector leg: the nearest chunks by the HNSW graph, best first."""
        k = int(limit)
        # The graph's recall falls when k approaches ef (on SciFact, M 12 / EFC 150: recall@100
        # 0.95 at ef 100, 0.99 at ef 200): deep fetches get a candidate list of twice k.
        ef = max(self.settings.hnsw_ef, 2 * k)
        rows = await self.storage.chunks.legs.vector_rows(vector, k, ef, filters, careful)
        similarity = self._similarity(np.array([float(r["distance"]) for r in rows]))
        hits = [_hit(row, float(score)) for row, score in zip(rows, similarity, strict=True)]
        for rank, hit in enumerate(hits, 1):
            hit.vector_rank, hit.vector_score = rank, hit.score
        return hits

    def _similarity(self, distance: np.ndarray) -> np.ndarray:
        """0-1, higher is nearer: the cosine similarity (below 0 counts as 0), or
        1 / (1 + distance) for the other distances."""
        if self.settings.hnsw_distance == "COSINE":
            return np.maximum(0.0, 1.0 - distance)
        return 1.0 / (1.0 + distance)


def _against(similarity: float | None, background: float | None) -> float | None:
    """The similarity as the calibration takes it: as it is, or above the query's mean
    similarity to the store's background sample."""
    if similarity is None or background is None:
        return similarity
    return similarity - background


def _check_int(name: str, value: Any, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) \
            or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be an integer from {minimum} to {maximum}, got {value!r}")


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


def _hit(row: dict[str, Any], score: float) -> Hit:
    """A hit from a leg's row (its details are filled in by ``_fill`` when it is shown)."""
    hit = Hit(chunk_id=id_text(row["id"]), document_id=id_text(row["document"]), source="",
              title=None, mime_type="", content="", chunk_index=0, char_start=0, char_end=0,
              page=None, last_page=None, score=score)
    if "content" in row:  # a whole document (documents-only stores): shown as it is
        _fill(hit, row)
    return hit


def _fill(hit: Hit, row: dict[str, Any]) -> None:
    hit.source = row.get("source") or ""
    hit.title = row.get("title")
    hit.mime_type = row.get("mime_type") or ""
    hit.content = row.get("content") or ""
    hit.context = row.get("context")
    hit.chunk_index = int(row.get("chunk_index") or 0)
    hit.char_start = int(row.get("char_start") or 0)
    hit.char_end = int(row.get("char_end") or 0)
    hit.page = row.get("page_number")
    hit.last_page = row.get("last_page")
