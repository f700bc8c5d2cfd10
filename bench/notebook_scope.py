"""Scoped search: one notebook of 10,000 chunks among 100,000, against unscoped search.

    python bench/notebook_scope.py [--chunks 100000] [--notebook-chunks 10000] [--queries 40]

Chunks get clustered random 384-d unit vectors (100 centres + noise, closer to real
embeddings than uniform noise) and 30-word texts drawn from a Zipf distribution over a
5,000-word vocabulary (as word frequencies in real text), written straight into the schema,
so the benchmark measures search rather than the model. Vector, text and hybrid search are
each timed scoped to the notebook and unscoped. Sources are put in the notebook through
`kb.notebooks.link` (edges, chunk membership, the notebook's vector table), then both HNSW
graphs are built. Scoped and unscoped queries alternate, so machine noise hits both alike;
the brute-force filter on the shared index (`notebooks CONTAINS $nb AND <|k,ef|>`) runs as
the baseline that a per-notebook index replaces.
Prints and writes bench/results/notebook_scope.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import DIM, VOCABULARY, FixedDim, load, log, text, word  # noqa: F401
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.faces.open_notebook import NotebookSearch


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--notebook-chunks", type=int, default=10_000)
    parser.add_argument("--per-source", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(100, DIM)).astype(np.float32)
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=str(Path(tmp) / "kb"), model="bench", rebuild_threshold=10**9)
        kb = await KnowledgeBase.open(settings=settings, embedder=FixedDim(DIM))
        nbs = kb.notebooks
        searches = NotebookSearch(kb)
        t0 = time.perf_counter()
        sources = await load(kb, args.chunks, args.per_source, rng, centres)
        timings["load_s"] = time.perf_counter() - t0
        nb = await nbs.create_notebook("bench")
        t0 = time.perf_counter()
        members = sources[: args.notebook_chunks // args.per_source]
        in_notebook = {str(d) for d in members}
        for i, doc in enumerate(members):
            await nbs.link(doc, nb)
            log(f"linked source {i + 1}")
        timings["link_s"] = time.perf_counter() - t0
        log("rebuilding the shared HNSW graph")
        t0 = time.perf_counter()
        await kb.rebuild_index()
        timings["rebuild_all_s"] = time.perf_counter() - t0
        log("rebuilding the notebook's HNSW graph")
        t0 = time.perf_counter()
        assert nb.id is not None
        await kb.storage.chunks.graphs.rebuild_notebook_if_due(nb.id, force=True)
        timings["rebuild_notebook_s"] = time.perf_counter() - t0

        log("searching")
        queries = centres[rng.integers(0, 100, args.queries)] \
            + 0.35 * rng.normal(size=(args.queries, DIM)).astype(np.float32)
        text_queries = [" ".join(word(int(r)) for r in rng.integers(20, 2000, 3))
                        for _ in range(args.queries)]
        lat: dict[str, list[float]] = {name: [] for name in (
            "vector_unscoped", "vector_scoped", "vector_filter_on_shared", "text_unscoped",
            "text_scoped", "hybrid_unscoped", "hybrid_scoped")}
        recall: list[float] = []
        names = kb.store.names

        async def filter_on_shared(q: Any) -> Any:
            # the baseline: the notebook filter pushed into the shared HNSW index
            return await kb.store.query(
                f"SELECT id, vector::distance::knn() AS d FROM {names.chunks}"
                " WHERE notebooks CONTAINS $nb AND embedding <|10,100|> $v ORDER BY d;",
                {"nb": nb.id, "v": [float(x) for x in q]})

        for q, words in zip(queries, text_queries):
            for name, call in (
                ("vector_unscoped",
                 lambda q=q: searches.vector_search(query_vector=q, min_score=-1)),
                ("vector_scoped",
                 lambda q=q: searches.vector_search(query_vector=q, notebook_id=nb.id,
                                                    min_score=-1)),
                ("vector_filter_on_shared", lambda q=q: filter_on_shared(q)),
                ("text_unscoped", lambda w=words: searches.text_search(w)),
                ("text_scoped", lambda w=words: searches.text_search(w, notebook_id=nb.id)),
                ("hybrid_unscoped", lambda w=words: searches.hybrid_search(w)),
                ("hybrid_scoped", lambda w=words: searches.hybrid_search(w, notebook_id=nb.id)),
            ):
                t0 = time.perf_counter()
                hits: list[Any] = await call()
                lat[name].append((time.perf_counter() - t0) * 1000)
                if name == "vector_scoped":
                    scoped_ids = {h.chunk_id for h in hits}
                if name == "vector_filter_on_shared":  # exact within the notebook
                    shared_ids = {str(r["id"]) for r in hits[0]}
                    recall.append(len(scoped_ids & shared_ids) / 10)
                if name.endswith("_scoped"):
                    outside = [h for h in hits if h.document_id not in in_notebook]
                    assert not outside, f"{name} returned chunks outside the notebook"
        await kb.close()
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    result = {
        "chunks": args.chunks, "notebook_chunks": args.notebook_chunks,
        "queries": args.queries,
        "latency_ms_p50": {k: round(v, 1) for k, v in p50.items()},
        "latency_ms_p95": {k: round(sorted(v)[int(0.95 * len(v))], 1) for k, v in lat.items()},
        "ratio_scoped_to_unscoped": {
            mode: round(p50[f"{mode}_scoped"] / p50[f"{mode}_unscoped"], 2)
            for mode in ("vector", "text", "hybrid")},
        "ratio_vector_filter_on_shared_to_unscoped": round(
            p50["vector_filter_on_shared"] / p50["vector_unscoped"], 2),
        "vector_scoped_overlap_with_filtered_shared_index": round(statistics.mean(recall), 3),
        "setup_s": {k: round(v, 1) for k, v in timings.items()},
    }
    out = Path(__file__).parent / "results" / "notebook_scope.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
