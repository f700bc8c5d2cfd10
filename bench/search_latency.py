"""Search latency per mode on a real store, with exact brute-force vector search run side by
side as the baseline, and the HNSW index's recall@10 against it.

    python bench/search_latency.py --db PATH [--queries 50] [--model all-minilm-l6-v2]

Build the store first, e.g. ``surrealdocs ingest --db PATH ../shared/data/documents``.
Prints and writes bench/results/search_latency.json. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

from surrealdocs import KnowledgeBase, Settings


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = await fn()
    return (time.perf_counter() - t0) * 1000, out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    settings = Settings(db=args.db, model=args.model)
    async with await KnowledgeBase.open(settings=settings) as kb:
        names = kb.store.names
        (rows,) = await kb.store.query(f"SELECT VALUE content FROM {names.chunks};")
        rng = random.Random(args.seed)
        # queries: eight consecutive words from random chunks
        queries = []
        for text in rng.sample(rows, min(args.queries, len(rows))):
            words = text.split()
            start = rng.randrange(max(1, len(words) - 8))
            queries.append(" ".join(words[start:start + 8]))
        lat: dict[str, list[float]] = {m: [] for m in
                                       ("text", "vector_hnsw", "vector_exact", "hybrid")}
        recalls = []
        await kb.search("warm up", mode="hybrid")
        for q in queries:
            vec = kb.embedder.embed_query(q)
            ms, _ = await timed(lambda q=q: kb.search(q, mode="text", limit=10))
            lat["text"].append(ms)
            ms, hnsw = await timed(lambda v=vec: kb.search(mode="vector", query_vector=v,
                                                          limit=10))
            lat["vector_hnsw"].append(ms)
            ms, exact = await timed(lambda v=vec: kb.store.query(
                f"SELECT id, vector::similarity::cosine(embedding, $v) AS s FROM {names.chunks}"
                " WHERE embedding != NONE ORDER BY s DESC LIMIT 10;",
                {"v": [float(x) for x in v]}))
            lat["vector_exact"].append(ms)
            ms, _ = await timed(lambda q=q: kb.search(q, mode="hybrid", limit=10))
            lat["hybrid"].append(ms)
            exact_ids = {str(r["id"]) for r in exact[0]}
            recalls.append(len(exact_ids & {h.chunk_id for h in hnsw}) / max(1, len(exact_ids)))
        stats = await kb.stats()
    result = {
        "store": args.db, "chunks": stats.chunks, "queries": len(queries),
        "vectors_outside_graph": stats.vectors_outside_graph,
        "latency_ms": {m: {"p50": round(statistics.median(v), 1), "p95": round(pct(v, 0.95), 1)}
                       for m, v in lat.items()},
        "hnsw_recall_at_10_vs_exact": round(statistics.mean(recalls), 4),
        "speedup_hnsw_vs_exact_p50": round(statistics.median(lat["vector_exact"])
                                           / statistics.median(lat["vector_hnsw"]), 1),
    }
    out = Path(__file__).parent / "results" / "search_latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
