"""The text legs: BM25 by the text index's segments, by the engine's FULLTEXT index (with
the term statistics it needs), or over whole documents (documents-only stores). Each
returns rows of id, document and ``score`` (BM25), best first."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ...config import Settings
from ...parts.filters import Filters
from ...parts.relevance import idf_of
from ..conditions import filter_conditions
from ..connection import Store
from ..documents import DocumentStorage
from ..segments.index import TextIndex
from .ranked import LEG_FIELDS, VISIBLE, walk_within

COUNT_CACHE_SECONDS = 60.0
TERM_CACHE_SECONDS = 600.0  # a term's document frequency changes slowly
TERM_CACHE_SIZE = 100_000


class SegmentTextLeg:
    """BM25 by the text index: its ranking, walked through the filters."""

    def __init__(self, store: Store, table: str, index: TextIndex) -> None:
        self.store = store
        self.table = table
        self.index = index

    async def rows(self, words: Sequence[str], limit: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        ranked = await self.index.rank(self.index.analyzer.terms(" ".join(words)))
        return await walk_within(self.store, self.table, ranked, limit, filters, careful)

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        return await self.index.idf(terms)

    async def warm_up(self, words: Sequence[str]) -> None:
        """Nothing to learn: the index knows every term's frequency."""

    async def stop(self) -> None:
        await self.index.stop()


class EngineTextLeg:
    """BM25 by the engine's FULLTEXT index. The engine scores every chunk that holds any
    query term, so a term in a quarter of the chunks costs a quarter of the table while its
    weight in the score is low: terms in more than ``bm25_max_df`` of the chunks are left
    out (:meth:`informative`), by counts learnt in the background."""

    def __init__(self, store: Store, settings: Settings, table: str,
                 count: Callable[[], Awaitable[int]]) -> None:
        self.store = store
        self.settings = settings
        self.table = table
        self._count = count  # rows of the chunks table
        self._total: tuple[int, float] | None = None  # chunk count, until when to trust it
        self._term_counts: dict[str, tuple[int, float]] = {}  # word -> (chunks, until when)
        self._counting: set[str] = set()  # words being counted in the background
        self._counters: set[asyncio.Task[None]] = set()
        self._stop_counting = False

    async def rows(self, words: Sequence[str], limit: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        terms = " ".join(await self.informative(list(words)))
        if not terms:
            return []
        clauses, params = filter_conditions(filters)
        if careful:
            clauses.append(VISIBLE)
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            f"SELECT {LEG_FIELDS}, search::score(1) AS score FROM {self.table}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return list(rows or [])

    async def informative(self, words: list[str]) -> list[str]:
        """The query's terms without those in more than ``bm25_max_df`` of the chunks (and
        in more than ``bm25_max_df_floor`` chunks). The rarest ``bm25_min_terms`` are always
        kept, and so is a word whose frequency is not known yet (it is being counted)."""
        settings = self.settings
        if settings.bm25_max_df >= 1.0 or len(words) < 2:
            return words
        df = self.known_term_counts(words)
        if not df:
            return words
        cap = max(settings.bm25_max_df * await self.total(), settings.bm25_max_df_floor)
        kept = [w for w in words if df.get(w, 0) <= cap]
        if len(set(kept)) < settings.bm25_min_terms:
            rarest = sorted(set(words), key=lambda w: (df.get(w, 0), w))
            keep = set(rarest[:settings.bm25_min_terms])
            kept = [w for w in words if w in keep]
        return kept

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        await self.count_terms(terms)
        counts = self.known_term_counts(terms)
        total = await self.total()
        return {t: idf_of(counts.get(t, 0), total) for t in terms}

    async def warm_up(self, words: Sequence[str]) -> None:
        """Count the words now, instead of in the background of the first searches."""
        if self.settings.bm25_max_df < 1.0:
            await self.count_terms(words)

    async def total(self) -> int:
        """How many chunks there are (known for a minute at a time)."""
        now = asyncio.get_running_loop().time()
        if self._total is None or self._total[1] < now:
            self._total = (await self._count(), now + COUNT_CACHE_SECONDS)
        return self._total[0]

    def known_term_counts(self, words: Sequence[str]) -> dict[str, int]:
        """In how many chunks each query word occurs (its document frequency), for the words
        counted already; the others are counted in the background (a count costs about what
        the word costs in a search: it is never paid by the search that first meets it) and
        remembered for ``TERM_CACHE_SECONDS``."""
        now = asyncio.get_running_loop().time()
        known, missing = {}, []
        for word in words:
            entry = self._term_counts.get(word)
            if entry is not None and entry[1] >= now:
                known[word] = entry[0]
            elif word not in self._counting:
                missing.append(word)
        if missing:
            self._counting.update(missing)
            task = asyncio.get_running_loop().create_task(self._count_terms(missing))
            self._counters.add(task)
            task.add_done_callback(self._counters.discard)
        return known

    async def count_terms(self, words: Sequence[str]) -> None:
        """Count the words now (so that the next searches know their frequencies)."""
        now = asyncio.get_running_loop().time()
        missing = sorted({w for w in words if w not in self._term_counts
                          or self._term_counts[w][1] < now})
        await self._count_terms(missing)

    async def _count_terms(self, words: list[str]) -> None:
        try:
            for word in words:  # one at a time: searches go first
                if self._stop_counting:
                    break
                (rows,) = await self.store.query(
                    f"SELECT count() AS n FROM {self.table} WHERE content @1@ $w GROUP ALL;",
                    {"w": word})
                if len(self._term_counts) > TERM_CACHE_SIZE:
                    self._term_counts.clear()
                self._term_counts[word] = (int(rows[0]["n"]) if rows else 0,
                                           asyncio.get_running_loop().time()
                                           + TERM_CACHE_SECONDS)
        except Exception:  # the store closed: counted another time
            pass
        finally:
            self._counting.difference_update(words)

    async def stop(self) -> None:
        """Let the background counts end after the statement each is running, and wait for
        them. Not cancelled: a cancelled query goes on in the engine, so the store would be
        closed with a statement still running in it."""
        self._stop_counting = True
        await asyncio.gather(*self._counters, return_exceptions=True)


class DocumentTextLeg:
    """BM25 over whole documents (documents-only stores, which keep no term statistics):
    complete documents, each a row shaped like a shown chunk."""

    def __init__(self, documents: DocumentStorage) -> None:
        self.documents = documents

    async def rows(self, words: Sequence[str], limit: int, filters: Filters,
                   careful: bool) -> list[dict[str, Any]]:
        if not words:
            return []
        rows = await self.documents.text_rows(" ".join(words), limit, filters)
        return [r for r in rows if r.get("complete") is True]

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        return dict.fromkeys(terms, 1.0)

    async def warm_up(self, words: Sequence[str]) -> None:
        """Nothing to learn."""

    async def stop(self) -> None:
        """Nothing runs in the background."""
