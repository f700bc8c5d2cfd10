"""The queries of the two search legs over the chunks: the text leg (the text index's ranking
walked through the filters, or the engine's BM25 with the term statistics it needs), and the
vector leg (the scan of the text index's vectors, else the HNSW graph, a notebook's own when
scoped). Part of the chunks' owner (:mod:`.chunks`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from surrealdb import RecordID

from ..config import Settings
from ..parts.filters import Filters
from ..parts.relevance import idf_of
from .conditions import filter_conditions
from .connection import Store
from .segmentvectors import distance_of
from .textindex import TextIndex
from .textsegments import Ranked
from .vectorgraphs import VectorGraphs

COUNT_CACHE_SECONDS = 60.0
TERM_CACHE_SECONDS = 600.0  # a term's document frequency changes slowly
TERM_CACHE_SIZE = 100_000

# What a leg returns per chunk: enough to rank and collapse per document. Checking that a
# chunk is visible (its document complete, its generation current) costs a read of the
# document per candidate; a careful leg does it (see Searcher.search).
_LEG_FIELDS = "id, document"
_LEG_FIELDS_VIA_CHUNK = "chunk AS id, document"  # a vector table's rows
_VISIBLE = "document.complete = true AND (generation OR 0) = (document.generation OR 0)"
_VISIBLE_VIA_CHUNK = ("document.complete = true"
                      " AND (chunk.generation OR 0) = (document.generation OR 0)")


class LegQueries:
    """The text and vector legs' reads of one store's chunks."""

    def __init__(self, store: Store, settings: Settings, table: str, vector_table: str,
                 apart: bool, text: TextIndex | None, graphs: VectorGraphs,
                 count: Callable[..., Awaitable[int]]) -> None:
        self.store = store
        self.settings = settings
        self.names = store.names
        self.table = table
        self.vector_table = vector_table
        self.apart = apart
        self.text = text
        self.graphs = graphs
        self._count = count  # rows of the chunks table, or of a vector table
        self._total: tuple[int, float] | None = None  # chunk count, until when to trust it
        self._term_counts: dict[str, tuple[int, float]] = {}  # word -> (chunks, until when)
        self._counting: set[str] = set()  # words being counted in the background
        self._counters: set[asyncio.Task[None]] = set()
        self._stop_counting = False

    # ----- search ---------------------------------------------------------------------
    async def text_rows(self, terms: str, limit: int, filters: Filters,
                        careful: bool = True) -> list[dict[str, Any]]:
        """Chunks matching any of ``terms`` by BM25, best first: id, document and
        ``score`` only (see :meth:`details`); with ``careful``, visible ones only."""
        clauses, params = filter_conditions(filters)
        if careful:
            clauses.append(_VISIBLE)
        if self.text is not None:
            return await self._ranked_rows(terms, limit, clauses, params)
        where = " AND ".join([*clauses, "content @1,OR@ $q"])
        (rows,) = await self.store.query(
            f"SELECT {_LEG_FIELDS}, search::score(1) AS score FROM {self.table}"
            f" WHERE {where} ORDER BY score DESC, id LIMIT {int(limit)};",
            {**params, "q": terms},
        )
        return list(rows or [])

    async def _ranked_rows(self, terms: str, limit: int, clauses: list[str],
                           params: dict[str, Any]) -> list[dict[str, Any]]:
        """The text index's ranking, walked best first until ``limit`` chunks pass the
        conditions (the chunks' rows are read for the candidates only, more each round)."""
        assert self.text is not None
        return await self._walk(await self.text.rank(self.text.analyzer.terms(terms)),
                                limit, clauses, params)

    async def _walk(self, ranked: Ranked, limit: int, clauses: list[str],
                    params: dict[str, Any]) -> list[dict[str, Any]]:
        """The first ``limit`` chunks of ``ranked`` that pass the conditions, with their
        scores."""
        documents = self.names.documents
        if not clauses:  # nothing to check: the index knows the chunks' documents
            best = ranked.best(0, limit)
            known = ranked.documents(0, limit)
            if known is not None:  # ids as ``table:key`` text (what a hit holds)
                table = self.table
                return [{"id": f"{table}:{key}", "document": f"{documents}:{document}",
                         "score": score} for (key, score), document in zip(best, known)]
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        out: list[dict[str, Any]] = []
        start, step = 0, limit + max(10, limit // 4)
        while start < len(ranked) and len(out) < limit:
            best = ranked.best(start, start + step)
            # keys in, keys out: record ids cost the client's CBOR far more than strings
            (rows,) = await self.store.query(
                f"SELECT VALUE [record::id(id), record::id(document)] FROM"
                f" $candidates.map(|$k| type::record('{self.table}', $k)){where};",
                {**params, "candidates": [k for k, _ in best]}, read_only=True)
            passed = {key: document for key, document in rows or []}
            for key, score in best:
                document = passed.get(key)
                if document is not None:
                    out.append({"id": RecordID(self.table, key),
                                "document": RecordID(documents, document), "score": score})
            start += step
            step *= 4
        return out[:limit]

    async def vector_rows(self, vector: list[float], k: int, ef: int, filters: Filters,
                          careful: bool = True) -> list[dict[str, Any]]:
        """The ``k`` chunks nearest to ``vector``: id, document and ``distance`` only (see
        :meth:`details`), visible ones only. The text index's segments are scanned exactly
        when they can answer; else, and in a notebook's scope (which walks that notebook's
        own graph), the HNSW graph answers."""
        if self.text is not None and filters.notebook is None:
            ranked = await self.text.nearest(vector)
            if ranked is not None:
                clauses, params = filter_conditions(filters)
                if careful:
                    clauses.append(_VISIBLE)
                distance = self.settings.hnsw_distance
                return [{"id": r["id"], "document": r["document"],
                         "distance": distance_of(r["score"], distance)}
                        for r in await self._walk(ranked, k, clauses, params)]
        if filters.notebook is not None:
            table = self.graphs.notebook_table(filters.notebook)
            index, fields, check = f"{table}_hnsw", _LEG_FIELDS_VIA_CHUNK, _VISIBLE_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.", notebook_scoped=True)
        elif self.apart:
            table, index = self.vector_table, self.names.hnsw_index
            fields, check = _LEG_FIELDS_VIA_CHUNK, _VISIBLE_VIA_CHUNK
            clauses, params = filter_conditions(filters, through="chunk.")
        else:
            table, index, fields, check = (self.table, self.names.hnsw_index, _LEG_FIELDS,
                                           _VISIBLE)
            clauses, params = filter_conditions(filters)
        if careful:  # a condition inside the scan, so that k visible rows come back
            clauses.append(check)
        if await self.graphs.vector_index_ready(index, table):
            clauses.append(f"embedding <|{int(k)},{int(ef)}|> $v")
            distance = "vector::distance::knn()"
        else:  # the graph is being built: the operator would return every row
            clauses.append("embedding != NONE")
            distance = "(1 - vector::similarity::cosine(embedding, $v))"
        (rows,) = await self.store.query(
            f"SELECT {fields}, {distance} AS distance FROM {table}"
            f" WHERE {' AND '.join(clauses)} ORDER BY distance, id LIMIT {int(k)};",
            {**params, "v": vector},
        )
        return [r for r in rows or [] if r.get("distance") is not None]

    async def scanned(self, dimension: int) -> bool:
        """Whether the vector leg scans the text index's int8 codes (outside notebook
        scopes), rather than walking the HNSW graph."""
        return self.text is not None and await self.text.scans(dimension)

    async def background(self, vector: list[float]) -> np.ndarray | None:
        """The distances (as :meth:`vector_rows` gives them) of ``vector`` to a fixed sample
        of the live chunks, or ``None`` where the text index cannot say (see
        :meth:`TextIndex.background`)."""
        if self.text is None:
            return None
        scores = await self.text.background(vector)
        if scores is None:
            return None
        return distance_of(scores, self.settings.hnsw_distance)

    async def similarities(self, vector: list[float],
                           chunk_ids: Sequence[str]) -> dict[str, float]:
        """The cosine similarity (or, for other distances, the vector leg's score) of
        ``vector`` to each chunk of ``chunk_ids`` (ids as ``table:key`` text), computed from
        the chunk's own vector the way every search of this store computes it: the text
        index's codes where the vector leg scans them, else the stored vector."""
        keys = {cid.split(":", 1)[1]: cid for cid in chunk_ids}
        if not keys:
            return {}
        if self.text is not None:
            found = await self.text.similarities(vector, list(keys))
            if found is not None:
                return {keys[k]: v for k, v in found.items()}
        ids = [RecordID(self.vector_table, k) for k in keys]
        function = ("vector::similarity::cosine" if self.settings.hnsw_distance == "COSINE"
                    else "-vector::distance::euclidean")
        (rows,) = await self.store.query(
            f"SELECT record::id(id) AS k, {function}(embedding, $v) AS s FROM $ids"
            " WHERE embedding != NONE;", {"ids": ids, "v": vector}, read_only=True)
        return {keys[str(r["k"])]: float(r["s"]) for r in rows or []
                if str(r.get("k")) in keys and r.get("s") is not None}

    async def idf(self, terms: Sequence[str]) -> dict[str, float]:
        """Each analysed query term's IDF over the live chunks (the text index's, else from
        the engine's counts)."""
        if self.text is not None:
            return await self.text.idf(terms)
        await self.count_terms(terms)
        counts = self.known_term_counts(terms)
        total = await self.total()
        return {t: idf_of(counts.get(t, 0), total) for t in terms}

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

    async def stop_counting(self) -> None:
        """Let the background counts end after the statement each is running, and wait for
        them. Not cancelled: a cancelled query goes on in the engine, so the store would be
        closed with a statement still running in it."""
        self._stop_counting = True
        await asyncio.gather(*self._counters, return_exceptions=True)
        if self.text is not None:
            await self.text.stop()
