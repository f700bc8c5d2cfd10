"""Search latency per mode on an ingested store, with where the time goes.

    python bench/search_speed.py --db STORE --dataset DIR [--split dev] [--queries 100]
    python bench/search_speed.py --db STORE --dataset DIR --long    # paragraph-long queries

STORE is a store that holds a BEIR dataset (e.g. made by `surrealdocs eval DIR --db STORE`);
the queries are the dataset's own (or, with --long, the first 60 words of random corpus
documents: long natural-language queries). Every query runs in each mode as a user's search
does (`KnowledgeBase.search`, top 10, one hit per document by default, query embedding
included), after one warm-up pass. It reports p50/p95/mean per mode and, per search, the
time the engine spent on its statements (from the engine's own per-statement timings), the
number of round trips, and the time in the query embedding; the rest is Python (CBOR
decoding of results, building hits, fusion).

It uses only the public API, so the same script measures an older checkout side by side:
`PYTHONPATH=/path/to/old/src python bench/search_speed.py ...`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import load_queries
from surrealdocs import KnowledgeBase, Settings

_UNITS = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
_DURATION = re.compile(r"([\d.]+)(ns|µs|us|ms|s)")


def engine_ms(duration: str) -> float:
    """An engine timing such as '1.2ms' or '3m1.5s' in milliseconds."""
    total = 0.0
    for value, unit in _DURATION.findall(duration or ""):
        total += float(value) * _UNITS[unit]
    minutes = re.match(r"(\d+)m(?!s)", duration or "")
    if minutes:
        total += int(minutes.group(1)) * 60_000
    return total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--long", action="store_true")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--chunks", action="store_true", help="chunk hits, not per document")
    parser.add_argument("--modes", default="text,vector,hybrid")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--label", default="")
    parser.add_argument("--passes", type=int, default=1,
                        help="run the queries this many times and report the last pass"
                             " (2: with the caches warm, as a long-running server has them)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    queries = load_queries(args.dataset, args.split, args.queries, args.long, args.seed)
    modes = args.modes.split(",")

    async with await KnowledgeBase.open(settings=Settings.from_env(db=args.db)) as kb:
        client = kb.store.client
        real_query_raw = client.query_raw
        calls: list[float] = []

        async def query_raw(sql: str, params: Any = None) -> Any:
            raw = await real_query_raw(sql, params)
            calls.append(sum(engine_ms(s.get("time", "")) for s in raw.get("result", [])))
            return raw

        client.query_raw = query_raw
        embedder = kb.embedder
        embed_ms: list[float] = []
        if embedder is not None:
            real_embed = embedder.embed_query

            def embed_query(text: str) -> Any:
                t0 = time.perf_counter()
                out = real_embed(text)
                embed_ms.append((time.perf_counter() - t0) * 1000)
                return out

            embedder.embed_query = embed_query  # type: ignore[method-assign]
        results: dict[str, Any] = {}
        for mode in modes:
            for q in queries[:10]:  # warm-up
                await kb.search(q, mode=mode, limit=args.limit, per_document=not args.chunks)
            for _ in range(args.passes - 1):
                for q in queries:
                    await kb.search(q, mode=mode, limit=args.limit,
                                    per_document=not args.chunks)
            total, engine, trips, embeds = [], [], [], []
            for q in queries:
                calls.clear()
                embed_ms.clear()
                t0 = time.perf_counter()
                await kb.search(q, mode=mode, limit=args.limit, per_document=not args.chunks)
                total.append((time.perf_counter() - t0) * 1000)
                engine.append(sum(calls))
                trips.append(len(calls))
                embeds.append(sum(embed_ms))
            results[mode] = {
                "p50_ms": round(statistics.median(total), 1),
                "p95_ms": round(pct(total, 0.95), 1),
                "mean_ms": round(statistics.mean(total), 1),
                "engine_ms_mean": round(statistics.mean(engine), 1),
                "embed_ms_mean": round(statistics.mean(embeds), 1),
                "other_ms_mean": round(statistics.mean(total) - statistics.mean(engine)
                                       - statistics.mean(embeds), 1),
                "round_trips_mean": round(statistics.mean(trips), 1),
            }
            print(mode, results[mode], file=sys.stderr, flush=True)
        stats = await kb.stats()
    report = {"label": args.label, "store": args.db, "chunks": stats.chunks,
              "passes": args.passes,
              "queries": len(queries), "long": args.long, "per_document": not args.chunks,
              "limit": args.limit, "results": results}
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
