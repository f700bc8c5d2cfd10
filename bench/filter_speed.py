"""A metadata filter that keeps 1% of a 100,000-chunk store, against the same search
unfiltered, and against brute force.

    python bench/filter_speed.py [--chunks 100000] [--queries 100] [--workdir DIR]

The store is grown through the normal ingest path (``ingest_texts`` with ``metadata``):
documents of 8–16 SciFact sentences (``common.synthetic``), each with ``bucket`` = its
number modulo 100 and a ``year``, vectors from ``hashing-384`` (no model: embedding 100k
chunks with MiniLM takes hours here). It is kept in the work folder and reused.

Per mode (hybrid, text, vector) it times each SciFact test claim unfiltered and with
``where bucket = i % 100`` (1% of the documents, so about 1% of the chunks), the two
interleaved query by query so that a busy machine slows both alike (top 10, one hit per
document off, the cut-off off: the ranking itself is timed), and reports p50 / p95 and the
ratio of the p50s. Then it checks the filtered hits against brute force: the allowed
documents found by reading every document's metadata and judging it in Python
(``parts.metadata.matches``), not by the store's index, and every chunk's document read
from the chunks table. Each leg's filtered top 10 (BM25 by the text index, the vector scan)
must be its whole unfiltered ranking with every chunk of another document taken out; a
whole search in text and vector modes is compared with the unfiltered one 10,000 deep,
filtered alike (it may differ where an allowed passage has the same text as another
document's passage ranked above it: a search shows a text once); in hybrid mode every hit
must be of an allowed document, ten of them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from common import corpus, log, pct, queries, synthetic
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.search import query_words
from surrealdocs.parts.filters import Filters
from surrealdocs.parts.metadata import matches, parse_where
from surrealdocs.parts.results import id_text

MODEL = "hashing-384"
BUCKETS = 100


async def grow(kb: KnowledgeBase, chunks: int) -> None:
    """Ingest documents until the store holds ``chunks`` chunks."""
    _, sentences = corpus()
    stats = await kb.stats()
    seed = 0
    while stats.chunks < chunks:
        want = max(1, (chunks - stats.chunks) // 3)
        docs = synthetic(sentences, min(want, 20_000), seed)
        by_bucket: dict[int, dict[str, str]] = {}
        for n, (source, text) in enumerate(docs.items()):
            by_bucket.setdefault(n % BUCKETS, {})[source] = text
        started = time.perf_counter()
        for bucket, texts in by_bucket.items():
            await kb.ingest_texts(texts, metadata={"bucket": bucket,
                                                   "year": 2000 + bucket % 25})
        stats = await kb.stats()
        log(f"seed {seed}: {len(docs):,} documents in {time.perf_counter() - started:.0f} s,"
            f" now {stats.chunks:,} chunks")
        seed += 1


async def timed(kb: KnowledgeBase, claims: list[str], mode: str) -> dict[str, Any]:
    plain, filtered = [], []
    for n, claim in enumerate(claims):
        where = f"bucket={n % BUCKETS}"
        for out, options in ((plain, {}), (filtered, {"where": where})):
            started = time.perf_counter()
            await kb.search(claim, mode=mode, limit=10, cutoff=False, **options)
            out.append((time.perf_counter() - started) * 1000)
    p50, f50 = statistics.median(plain), statistics.median(filtered)
    return {"mode": mode, "unfiltered_p50": round(p50, 1),
            "unfiltered_p95": round(pct(plain, .95), 1),
            "filtered_p50": round(f50, 1), "filtered_p95": round(pct(filtered, .95), 1),
            "ratio_p50": round(f50 / p50, 2)}


async def checked(kb: KnowledgeBase, claims: list[str]) -> dict[str, int]:
    """The legs' filtered rankings against brute force: every chunk's document read from the
    chunks table, every document's metadata judged in Python, the unfiltered ranking (all of
    it) filtered by them."""
    rows = await kb.storage.documents.select(filters=None)
    metadata = {id_text(r["id"]).split(":", 1)[1]: r.get("metadata") or {} for r in rows}
    (pairs,) = await kb.store.query(
        f"SELECT VALUE [record::id(id), record::id(document)] FROM {kb.storage.chunks.table};")
    document_of = {str(chunk): str(doc) for chunk, doc in pairs}
    index, legs = kb.storage.chunks.text, kb.storage.legs
    assert index is not None and legs.vector is not None and kb.embedding is not None
    out = {"leg_rankings_compared": 0, "leg_rankings_same": 0, "searches_compared": 0,
           "searches_same": 0, "hybrid_ok": 0}
    for n, claim in enumerate(claims):
        where = parse_where(f"bucket={n % BUCKETS}")
        allowed = {d for d, m in metadata.items() if matches(m, where)}
        filters = await kb.storage.documents.resolved(Filters(where=where))
        words = query_words(claim)
        vector = await kb.embedding.query(claim)
        for ranked, leg_rows in (
                (await index.rank(index.analyzer.terms(" ".join(words))),
                 await legs.text.rows(words, 10, filters, False)),
                (await index.nearest(vector), await legs.vector.rows(vector, 10, filters, False))):
            assert ranked is not None
            everything = ranked.best(0, len(ranked))
            want = [key for key, _ in everything if document_of[key] in allowed][:10]
            out["leg_rankings_compared"] += 1
            out["leg_rankings_same"] += [str(r["id"]).split(":", 1)[1] for r in leg_rows] == want
        # the whole search: the unfiltered one (10,000 deep) with the other documents left
        # out; it differs where a passage of an allowed document has the same text as a
        # passage of another one ranked above it (a search shows a text once)
        for mode in ("text", "vector"):
            deep = await kb.search(claim, mode=mode, limit=10_000, cutoff=False)
            wanted = [h.chunk_id for h in deep if h.document_id.split(":", 1)[1] in allowed]
            got = await kb.search(claim, mode=mode, limit=10, cutoff=False, where=where)
            out["searches_compared"] += 1
            out["searches_same"] += [h.chunk_id for h in got] == wanted[:10]
        hybrid = await kb.search(claim, limit=10, cutoff=False, where=where)
        out["hybrid_ok"] += all(h.document_id.split(":", 1)[1] in allowed
                                for h in hybrid) and len(hybrid) == 10
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--check-queries", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/filter-bench"))
    parser.add_argument("--check-only", action="store_true", help="no timing")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = str(args.workdir / f"store-{args.chunks}")
    # no HNSW rebuild after every 2,000 new vectors while it grows (the scan leg answers)
    settings = Settings.from_env(db=db, model=MODEL, rebuild_threshold=10**9)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await grow(kb, args.chunks)
        stats = await kb.stats()
        claims = queries(args.queries)
        log(f"{stats.chunks:,} chunks, {stats.documents:,} documents; {len(claims)} claims")
        await kb.warm_up(claims)
        for claim in claims[:10]:  # the first searches of a view build its caches
            await kb.search(claim, limit=10, cutoff=False, where="bucket=0")
        for mode in () if args.check_only else ("hybrid", "text", "vector"):
            log(str(await timed(kb, claims, mode)))
        log(str(await checked(kb, claims[:args.check_queries])))


if __name__ == "__main__":
    asyncio.run(main())
