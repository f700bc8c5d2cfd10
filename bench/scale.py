"""Search and ingest at 10k, 100k and 300k chunks, against Open Notebook's full scan.

    python bench/scale.py [--sizes 10000 100000 300000] [--queries 100] [--scan-queries 100]
                          [--marks 200000 290000] [--workdir DIR]
                          [--vectors hashing|minilm-sentences] [--ef 100 200 400]

Each size is a file store grown through the normal ingest path (``ingest_texts``): SciFact's
real abstracts first, then deterministic synthetic documents made of SciFact sentences
(shuffled with a fixed seed), until the store holds the size's chunks. The vectors come
from the ``hashing-384`` embedder (a fixed random projection of the words, no model: the
real model would take hours to embed 300k chunks on 2 cores), for documents and queries
alike, so recall is measured in one consistent space. The queries are SciFact's test
claims.

``--vectors minilm-sentences`` gives the documents vectors in all-MiniLM-L6-v2's space at the
cost of a lookup: every distinct SciFact sentence is embedded once by the real model (about
6 to 25 minutes here, cached in the work folder), and a chunk's vector is the length-weighted
mean of its sentences' vectors, normalised (a piece that is no whole sentence is matched by
its first or last 40 characters, else embedded by the model). Queries are embedded by the
real model. This is not what the model gives a whole chunk, but it has the model's geometry,
which hashing vectors (a bag of words in 384 random directions) do not: a graph's recall on
them says more about real stores.

Per size it reports: ingest seconds per 1,000 chunks of the step that grew the store to
that size (its growth is the cost's growth); the seconds of one HNSW build over every vector
at that size, timed apart (the store grows with the rebuild threshold out of reach: with the
default, a series of ingest calls rebuilds the graph after each call that brings 2,000 new
vectors, which would count the same build many times over); p50/p95 of text, vector and
hybrid search (top 10, one hit per document, query embedding included); HNSW recall@10
against an exact scan (as a set, and counting ties as ann-benchmarks does: a hit within
0.001 of the 10th exact distance counts), at each ``--ef``; the same queries done as Open
Notebook does them (cosine over every row, a ``min_score`` filter: ``SELECT ...
vector::similarity::cosine(...) ... ORDER BY``); peak RSS of the process; and the store's
size on disk.

``--marks`` adds sizes at which only the ingest cost of the step is recorded (no graph build,
no searches): ``--sizes 10000 300000 --marks 290000`` gives the cost of the last 10,000
chunks at 300k, comparable with the first 10,000, without building and searching at 290k.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import (  # noqa: F401
    PROXY,
    ROOT,
    SCIFACT,
    SENTENCE_END,
    SentenceMeanEmbedder,
    corpus,
    disk_bytes,
    grow,
    pct,
    queries,
    synthetic,
    time_modes,
)

MODEL = "hashing-384"
TIE_EPSILON = 1e-3  # ann-benchmarks' epsilon for a result that ties the k-th true distance


async def rebuild_graph(kb: Any) -> None:
    """The HNSW graph only (the text index is kept up by merges as the store grows); an
    older checkout's rebuild_index builds only the graph anyway."""
    import inspect

    if "text" in inspect.signature(kb.rebuild_index).parameters:
        await kb.rebuild_index(text=False)
    else:
        await kb.rebuild_index()


async def measure(kb: Any, qs: list[str], scan_queries: int, efs: list[int],
                  min_score: float = 0.2) -> dict[str, Any]:
    from surrealdocs.parts.filters import Filters
    from surrealdocs.parts.results import id_text
    from surrealdocs.store.legs import ScanLeg

    names = kb.store.names
    leg = kb.storage.legs.vector
    graph = leg.graph if isinstance(leg, ScanLeg) else leg  # the HNSW graph, measured by ef
    table = kb.storage.chunks.vector_table
    out: dict[str, Any] = {}
    await kb.warm_up(qs)  # term frequencies known before the first timed search
    out.update(await time_modes(kb, qs))
    recalls, scan_ms = [], []
    by_ef: dict[int, dict[str, list[float]]] = {ef: {"set": [], "ties": [], "ms": []}
                                                for ef in efs}
    for q in qs[:scan_queries]:  # the full scan costs seconds per query at 100k
        vector = [float(x) for x in kb.embedder.embed_query(q)]
        hnsw = await kb.search(mode="vector", query_vector=vector, limit=10)
        t0 = time.perf_counter()
        (exact,) = await kb.store.query(
            f"SELECT id, vector::similarity::cosine(embedding, $v) AS s FROM {table}"
            " WHERE vector::similarity::cosine(embedding, $v) >= $min"
            " ORDER BY s DESC LIMIT 10;", {"v": vector, "min": min_score})
        scan_ms.append((time.perf_counter() - t0) * 1000)
        # id_text, not str(): str() escapes a key that starts with a digit (⟨…⟩), and such
        # ids never matched a hit's (the recall figures before 2026-12-07 were low for it)
        exact_ids = {f"{names.chunks}:{r['id'].id}" for r in exact}
        if not exact_ids:
            continue
        recalls.append(len(exact_ids & {h.chunk_id for h in hnsw}) / len(exact_ids))
        kth = 1.0 - min(float(r["s"]) for r in exact)  # the 10th exact cosine distance
        for ef in efs:
            t0 = time.perf_counter()
            rows = await graph.nearest(vector, 10, ef, Filters(), careful=False)
            by_ef[ef]["ms"].append((time.perf_counter() - t0) * 1000)
            ids = {id_text(r["id"]) for r in rows}
            by_ef[ef]["set"].append(len(exact_ids & ids) / len(exact_ids))
            ties = sum(1 for r in rows if 1.0 - float(r["score"]) <= kth + TIE_EPSILON)
            by_ef[ef]["ties"].append(min(ties, len(exact_ids)) / len(exact_ids))
    out["open_notebook_scan"] = {"p50_ms": round(statistics.median(scan_ms), 1),
                                 "p95_ms": round(pct(scan_ms, 0.95), 1)}
    # the default vector leg's recall: the HNSW graph's, or 1.0 where the segments are scanned
    text = kb.storage.chunks.text
    out["vector_leg"] = "hnsw" if text is None or await text.nearest(
        [float(x) for x in kb.embedder.embed_query(qs[0])]) is None else "scan"
    out["hnsw_recall_at_10"] = round(statistics.mean(recalls), 4) if recalls else None
    out["recall_at_10_by_ef"] = {
        str(ef): {"set": round(statistics.mean(v["set"]), 4) if v["set"] else None,
                  "with_ties": round(statistics.mean(v["ties"]), 4) if v["ties"] else None,
                  "p50_ms": round(statistics.median(v["ms"]), 1) if v["ms"] else None}
        for ef, v in by_ef.items()}
    out["scan_queries"] = len(scan_ms)
    out["hybrid_speedup_vs_scan_p50"] = round(
        out["open_notebook_scan"]["p50_ms"] / out["hybrid"]["p50_ms"], 1)
    return out


async def main() -> None:
    from surrealdocs import KnowledgeBase, Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--scan-queries", type=int, default=100,
                        help="Queries for the full-scan baseline and the recall (the first N)")
    parser.add_argument("--marks", type=int, nargs="*", default=[],
                        help="Sizes at which only the ingest cost is recorded")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/surrealdocs-scale"))
    parser.add_argument("--vectors", choices=["hashing", PROXY], default="hashing",
                        help="hashing-384, or MiniLM sentence vectors averaged per chunk")
    parser.add_argument("--ef", type=int, nargs="+", default=[100, 200, 400],
                        help="HNSW candidate list sizes at which recall@10 is measured")
    parser.add_argument("--no-graph", action="store_true",
                        help="Never build the HNSW graph (the vector leg scans the text index's"
                             " segments; the graph's recall is not measured)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    args = parser.parse_args()
    docs, sentences = corpus()
    qs = queries(args.queries)
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / "store"
    model = MODEL
    if args.vectors == PROXY:
        from surrealdocs.embed import register

        proxy = SentenceMeanEmbedder(sentences, args.workdir)
        register(PROXY, lambda name: proxy)
        model = PROXY
    results: dict[str, Any] = {"model": model, "queries": len(qs), "sizes": [], "marks": []}
    marks = set(args.marks)
    settings = Settings.from_env(db=str(db), model=model, rebuild_threshold=10**9)
    async with await KnowledgeBase.open(settings=settings) as kb:
        for i, size in enumerate(sorted(set(args.sizes) | marks)):
            written, seconds = await grow(kb, size, docs, sentences, seed=i + 1)
            if size in marks and size not in args.sizes:
                mark = {"chunks": (await kb.stats()).chunks, "ingest_chunks": written,
                        "ingest_s_per_1k_chunks": round(seconds / max(written, 1) * 1000, 2),
                        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                             / 1024)}
                results["marks"].append(mark)
                print(json.dumps(mark), file=sys.stderr, flush=True)
                continue
            # the step's ingest cost first: the graph build can hang in the embedded engine
            # (it did over 300,000 vectors; BENCHMARKS.md), and the cost is known already
            print(json.dumps({"chunks": (await kb.stats()).chunks, "ingest_chunks": written,
                              "ingest_s_per_1k_chunks":
                                  round(seconds / max(written, 1) * 1000, 2),
                              "building": True}), file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            if not args.no_graph:
                await rebuild_graph(kb)  # searches run on the full graph
            build_s = time.perf_counter() - t0
            stats = await kb.stats()
            row = {"chunks": stats.chunks, "documents": stats.documents,
                   "ingest_chunks": written,
                   "ingest_s_per_1k_chunks": round(seconds / max(written, 1) * 1000, 2),
                   "graph_build_s": round(build_s, 1),
                   **await measure(kb, qs, args.scan_queries, [] if args.no_graph else args.ef),
                   "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                        / 1024),
                   "disk_mb": round(disk_bytes(db) / 1e6)}
            results["sizes"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.vectors == PROXY:  # pieces embedded by the model: no whole sentence matched them
        results["proxy_pieces_embedded"] = len(proxy.misses)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
