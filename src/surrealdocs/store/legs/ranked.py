"""What both legs share: the rows they return, the visibility condition, and the walk of a
text index ranking (BM25 or a vector scan) through a search's filters."""

from __future__ import annotations

from typing import Any

from surrealdb import RecordID

from ...parts.filters import Filters
from ..conditions import filter_conditions
from ..connection import Store
from ..segments.postings import Ranked

# What a leg returns per chunk: id, document and score, enough to rank and collapse per
# document. Checking that a chunk is visible (its document complete, its generation current)
# costs a read of the document per candidate; a careful leg does it (see Searcher.search).
LEG_FIELDS = "id, document"
LEG_FIELDS_VIA_CHUNK = "chunk AS id, document"  # a vector table's rows
VISIBLE = "document.complete = true AND (generation OR 0) = (document.generation OR 0)"
VISIBLE_VIA_CHUNK = ("document.complete = true"
                     " AND (chunk.generation OR 0) = (document.generation OR 0)")


async def walk_within(store: Store, table: str, ranked: Ranked, limit: int, filters: Filters,
                      careful: bool) -> list[dict[str, Any]]:
    """The first ``limit`` chunks of ``ranked`` that pass ``filters`` (and, ``careful``,
    are visible). The metadata filter's documents are applied by the index's maps, before
    any chunk is read, where they know the chunks' documents."""
    applied = False
    if filters.documents is not None:
        within = ranked.within(filters.documents)
        if within is not None:
            ranked, applied = within, True
    clauses, params = filter_conditions(filters, documents_applied=applied)
    if careful:
        clauses.append(VISIBLE)
    return await walk(store, table, ranked, limit, clauses, params)


async def walk(store: Store, table: str, ranked: Ranked, limit: int, clauses: list[str],
               params: dict[str, Any]) -> list[dict[str, Any]]:
    """The first ``limit`` chunks of ``ranked`` that pass the conditions, with their scores
    (the chunks' rows are read for the candidates only, more each round)."""
    documents = store.names.documents
    if not clauses:  # nothing to check: the index knows the chunks' documents
        best = ranked.best(0, limit)
        known = ranked.documents(0, limit)
        if known is not None:  # ids as ``table:key`` text (what a hit holds)
            return [{"id": f"{table}:{key}", "document": f"{documents}:{document}",
                     "score": score} for (key, score), document in zip(best, known)]
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    out: list[dict[str, Any]] = []
    start, step = 0, limit + max(10, limit // 4)
    while start < len(ranked) and len(out) < limit:
        best = ranked.best(start, start + step)
        # keys in, keys out: record ids cost the client's CBOR far more than strings
        (rows,) = await store.query(
            f"SELECT VALUE [record::id(id), record::id(document)] FROM"
            f" $candidates.map(|$k| type::record('{table}', $k)){where};",
            {**params, "candidates": [k for k, _ in best]}, read_only=True)
        passed = {key: document for key, document in rows or []}
        for key, score in best:
            document = passed.get(key)
            if document is not None:
                out.append({"id": RecordID(table, key),
                            "document": RecordID(documents, document), "score": score})
        start += step
        step *= 4
    return out[:limit]
