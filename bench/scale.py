"""Search and ingest at 10k, 100k and 300k chunks, against Open Notebook's full scan.

    python bench/scale.py [--sizes 10000 100000 300000] [--queries 100] [--scan-queries 100]
                          [--marks 200000 290000] [--workdir DIR]

Each size is a file store grown through the normal ingest path (``ingest_texts``): SciFact's
real abstracts first, then deterministic synthetic documents made of SciFact sentences
(shuffled with a fixed seed), until the store holds the size's chunks. The vectors come
from the ``hashing-384`` embedder (a fixed random projection of the words, no model: the
real model would take hours to embed 300k chunks on 2 cores), for documents and queries
alike, so recall is measured in one consistent space. The queries are SciFact's test
claims.

Per size it reports: ingest seconds per 1,000 chunks of the step that grew the store to
that size (its growth is the cost's growth); the seconds of one HNSW build over every vector
at that size, timed apart (the store grows with the rebuild threshold out of reach: with the
default, a series of ingest calls rebuilds the graph after each call that brings 2,000 new
vectors, which would count the same build many times over); p50/p95 of text, vector and
hybrid search (top 10, one hit per document, query embedding included); HNSW recall@10
against an exact scan; the same queries done as Open Notebook does them (cosine over every
row, a ``min_score`` filter: ``SELECT ... vector::similarity::cosine(...) ... ORDER BY``);
peak RSS of the process; and the store's size on disk.

``--marks`` adds sizes at which only the ingest cost of the step is recorded (no graph build,
no searches): ``--sizes 10000 300000 --marks 290000`` gives the cost of the last 10,000
chunks at 300k, comparable with the first 10,000, without building and searching at 290k.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
MODEL = "hashing-384"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def corpus() -> tuple[dict[str, str], list[str]]:
    docs = {}
    sentences: list[str] = []
    for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        text = f"{row.get('title', '')}\n\n{row.get('text', '')}".strip()
        docs[f"beir:{row['_id']}"] = text
        sentences += [s for s in re.split(r"(?<=[.!?])\s+", row.get("text", "")) if len(s) > 40]
    return docs, sentences


def synthetic(sentences: list[str], n: int, seed: int) -> dict[str, str]:
    """``n`` documents of 8–16 SciFact sentences each, deterministic for ``seed``."""
    rng = random.Random(seed)
    return {f"synthetic:{seed}:{i}": " ".join(rng.choice(sentences)
                                               for _ in range(rng.randint(8, 16)))
            for i in range(n)}


def queries(n: int) -> list[str]:
    judged = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").open()}
    rows = [json.loads(line) for line in (SCIFACT / "queries.jsonl").open()]
    return [r["text"] for r in rows if str(r["_id"]) in judged][:n]


async def grow(kb: Any, target: int, docs: dict[str, str], sentences: list[str],
               seed: int) -> tuple[int, float]:
    """Ingest until the store holds ``target`` chunks (SciFact's documents first, in steps
    of 500, then synthetic ones); (chunks written, seconds)."""
    stats = await kb.stats()
    written, seconds = 0, 0.0
    batch_no = 0
    real = [kv for kv in docs.items()]
    while stats.chunks < target:
        start = stats.documents
        if start < len(real):
            pending = dict(real[start:start + 500])
        else:
            # about 4 chunks per synthetic document; steps of up to 5,000 documents
            need = max(1, min(5_000, (target - stats.chunks) // 4 + 1))
            pending = synthetic(sentences, need, seed * 1_000 + batch_no)
            batch_no += 1
        t0 = time.perf_counter()
        report = await kb.ingest_texts(pending)
        seconds += time.perf_counter() - t0
        written += report.chunks_written
        stats = await kb.stats()
    return written, seconds


async def measure(kb: Any, qs: list[str], scan_queries: int,
                  min_score: float = 0.2) -> dict[str, Any]:
    names = kb.store.names
    table = kb.storage.chunks.vector_table
    out: dict[str, Any] = {}
    await kb.warm_up(qs)  # term frequencies known before the first timed search
    for mode in ("text", "vector", "hybrid"):
        for q in qs[:5]:
            await kb.search(q, mode=mode, per_document=True)
        times = []
        for q in qs:
            t0 = time.perf_counter()
            await kb.search(q, mode=mode, per_document=True)
            times.append((time.perf_counter() - t0) * 1000)
        out[mode] = {"p50_ms": round(statistics.median(times), 1),
                     "p95_ms": round(pct(times, 0.95), 1)}
    recalls, scan_ms = [], []
    for q in qs[:scan_queries]:  # the full scan costs seconds per query at 100k
        vector = [float(x) for x in kb.embedder.embed_query(q)]
        hnsw = await kb.search(mode="vector", query_vector=vector, limit=10)
        t0 = time.perf_counter()
        (exact,) = await kb.store.query(
            f"SELECT id, vector::similarity::cosine(embedding, $v) AS s FROM {table}"
            " WHERE vector::similarity::cosine(embedding, $v) >= $min"
            " ORDER BY s DESC LIMIT 10;", {"v": vector, "min": min_score})
        scan_ms.append((time.perf_counter() - t0) * 1000)
        exact_ids = {str(r["id"]).replace(f"{table}:", f"{names.chunks}:") for r in exact}
        if exact_ids:
            recalls.append(len(exact_ids & {h.chunk_id for h in hnsw}) / len(exact_ids))
    out["open_notebook_scan"] = {"p50_ms": round(statistics.median(scan_ms), 1),
                                 "p95_ms": round(pct(scan_ms, 0.95), 1)}
    out["hnsw_recall_at_10"] = round(statistics.mean(recalls), 4) if recalls else None
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
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    args = parser.parse_args()
    docs, sentences = corpus()
    qs = queries(args.queries)
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / "store"
    results: dict[str, Any] = {"model": MODEL, "queries": len(qs), "sizes": [], "marks": []}
    marks = set(args.marks)
    settings = Settings(db=str(db), model=MODEL, rebuild_threshold=10**9)
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
            await kb.rebuild_index()  # searches run on the full graph
            build_s = time.perf_counter() - t0
            stats = await kb.stats()
            row = {"chunks": stats.chunks, "documents": stats.documents,
                   "ingest_chunks": written,
                   "ingest_s_per_1k_chunks": round(seconds / max(written, 1) * 1000, 2),
                   "graph_build_s": round(build_s, 1),
                   **await measure(kb, qs, args.scan_queries),
                   "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                        / 1024),
                   "disk_mb": round(disk_bytes(db) / 1e6)}
            results["sizes"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
