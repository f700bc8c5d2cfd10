"""Hybrid fusion variants on every dev collection (SciFact dev, MED, CACM, NPL), computed
outside the engine from each leg's candidates.

    python bench/fusion_collections.py --stores DIR [--cache DIR]

``DIR`` holds one store per collection, as ``bench/quality.py --collections --stores DIR``
leaves them (``scifact-dev``, ``med``, ``cacm``, ``npl``). For each judged query this takes
the two legs exactly as hybrid search runs them (per document, 100 candidates each) and the
exact best-chunk cosine of every document, caches them in ``--cache``, then fuses the legs
in several ways and prints nDCG@10 per collection and the mean. The ``zscore`` row
reproduces the engine's hybrid figures (BENCHMARKS.md, "Retrieval across collections"), so
the variants compare with them. Quality figures are deterministic; a first run costs a few
minutes (the BM25 leg), later runs read the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from common import DEV_COLLECTIONS, SHARED, dev_dataset
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.evaluate import SOURCE_PREFIX, load_beir, mean_scores, score_run
from surrealdocs.parts.fusion import minmax as scale_minmax
from surrealdocs.parts.fusion import zscore as scale_zscore

ROOT = Path(__file__).resolve().parents[1]

DEPTH = 100
Fusion = Callable[[dict[str, Any], str], list[str]]


async def legs(name: str, dataset: Path, split: str, store: Path) -> dict[str, Any]:
    data = load_beir(dataset, split)
    out: dict[str, Any] = {"qrels": data.qrels, "queries": data.queries,
                           "text": {}, "vector": {}}
    async with await KnowledgeBase.open(settings=Settings.from_env(db=str(store))) as kb:
        await kb.warm_up(data.queries.values())
        (rows,) = await kb.store.query(f"SELECT id, sources FROM {kb.store.names.documents};")
        out["corpus_ids"] = {str(r["id"]): [s.removeprefix(SOURCE_PREFIX) for s in r["sources"]]
                             for r in rows}
        for qid, text in data.queries.items():
            for mode in ("text", "vector"):
                hits = await kb.search(text, mode=mode, limit=DEPTH, per_document=True)
                out[mode][qid] = [(h.document_id, float(h.text_score if mode == "text"
                                                        else h.vector_score or 0.0))
                                  for h in hits]
        (vectors,) = await kb.store.query(
            f"SELECT chunk.document AS document, embedding"
            f" FROM {kb.storage.chunks.vector_table};")
        documents = sorted({str(r["document"]) for r in vectors})
        column = {d: i for i, d in enumerate(documents)}
        matrix = np.array([r["embedding"] for r in vectors], dtype=np.float32)
        owner = np.array([column[str(r["document"])] for r in vectors])
        queries = np.array([await kb.embedding.query(t) for t in data.queries.values()],
                           dtype=np.float32)
        best = np.full((len(queries), len(documents)), -2.0, dtype=np.float32)
        sims = queries @ matrix.T
        for j in range(len(owner)):
            np.maximum(best[:, owner[j]], sims[:, j], out=best[:, owner[j]])
        out["exact"] = {qid: dict(zip(documents, best[i].tolist()))
                        for i, qid in enumerate(data.queries)}
    print(f"{name}: {len(data.queries)} queries", file=sys.stderr, flush=True)
    return out


def zscore(w_text: float = 1.0, w_vector: float = 1.0, *, fill: bool = False,
           stats_top: int | None = None, gap: bool = False) -> Fusion:
    """The engine's default fusion; ``fill`` gives a document found by BM25 alone its exact
    vector score instead of the vector leg's lowest; ``stats_top`` standardises over the
    top candidates only; ``gap`` weighs each leg by how far its top hit stands above its
    candidates (a per-query guess at which leg failed)."""
    def fuse(d: dict[str, Any], q: str) -> list[str]:
        text, vector = dict(d["text"][q]), dict(d["vector"][q])
        keys = list(dict.fromkeys([*text, *vector]))
        if fill:
            exact = d["exact"][q]
            vector = {**{k: exact[k] for k in keys if k in exact}, **vector}
        t_values = [s for _, s in d["text"][q]][:stats_top]
        v_values = [s for _, s in d["vector"][q]][:stats_top]
        t_norm, v_norm = scale_zscore(t_values), scale_zscore(v_values)
        a, b = w_text, w_vector
        if gap and t_values and v_values:
            a *= max(t_norm(t_values[0]), 0.1)
            b *= max(v_norm(v_values[0]), 0.1)
            a, b = 2 * a / (a + b), 2 * b / (a + b)
        score = {k: a * t_norm(text.get(k)) + b * v_norm(vector.get(k)) for k in keys}
        return sorted(keys, key=lambda k: -score[k])
    return fuse


def minmax(w_text: float = 1.0, w_vector: float = 1.0) -> Fusion:
    def fuse(d: dict[str, Any], q: str) -> list[str]:
        text, vector = dict(d["text"][q]), dict(d["vector"][q])
        t_norm, v_norm = scale_minmax(list(text.values())), scale_minmax(list(vector.values()))
        keys = list(dict.fromkeys([*text, *vector]))
        return sorted(keys, key=lambda k: -(w_text * t_norm(text.get(k))
                                            + w_vector * v_norm(vector.get(k))))
    return fuse


def rrf(k: int = 60) -> Fusion:
    def fuse(d: dict[str, Any], q: str) -> list[str]:
        score: dict[str, float] = {}
        for leg in ("text", "vector"):
            for rank, (doc, _) in enumerate(d[leg][q], 1):
                score[doc] = score.get(doc, 0.0) + 1.0 / (k + rank)
        return sorted(score, key=lambda doc: -score[doc])
    return fuse


def one_leg(leg: str) -> Fusion:
    return lambda d, q: [doc for doc, _ in d[leg][q]]


def shallow(depth: int, inner: Fusion) -> Fusion:
    """``inner`` on the top ``depth`` candidates of each leg."""
    def fuse(d: dict[str, Any], q: str) -> list[str]:
        cut = {**d, "text": {q: d["text"][q][:depth]}, "vector": {q: d["vector"][q][:depth]}}
        return inner(cut, q)
    return fuse


VARIANTS: dict[str, Fusion] = {
    "text leg": one_leg("text"),
    "vector leg": one_leg("vector"),
    "zscore 1/1 (default)": zscore(),
    "rrf k=60": rrf(),
    "minmax 1/1": minmax(),
    "zscore, vector weight 1.25": zscore(1.0, 1.25),
    "zscore, vector weight 1.5": zscore(1.0, 1.5),
    "zscore, text weight 1.25": zscore(1.25, 1.0),
    "zscore, exact vector fill-in": zscore(fill=True),
    "zscore, statistics of top 30": zscore(stats_top=30),
    "zscore, legs weighed by their top hit's z-score": zscore(gap=True),
    "zscore, 50 candidates per leg": shallow(50, zscore()),
    "zscore, 30 candidates per leg": shallow(30, zscore()),
}


def ndcg(d: dict[str, Any], fusion: Fusion) -> float:
    run = {q: [c for doc in fusion(d, q) for c in d["corpus_ids"].get(doc, [])]
           for q in d["queries"]}
    return mean_scores(score_run(d["qrels"], run))["ndcg@10"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=ROOT / "bench" / "results" / "fusion")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    collections = [("scifact-dev", None, "dev")] + [(n, SHARED / n, "test")
                                                    for n in DEV_COLLECTIONS]
    data = {}
    for name, path, split in collections:
        cached = args.cache / f"{name}.pkl"
        if not cached.exists():
            dataset = path or dev_dataset()
            cached.write_bytes(pickle.dumps(await legs(name, dataset, split,
                                                       args.stores / name)))
        data[name] = pickle.loads(cached.read_bytes())
    names = list(data)
    print("| fusion | " + " | ".join(names) + " | mean |")
    print("|---|" + "---|" * (len(names) + 1))
    for label, fusion in VARIANTS.items():
        row = [ndcg(data[n], fusion) for n in names]
        print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in row)
              + f" | {np.mean(row):.4f} |", flush=True)
    sys.stdout.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    asyncio.run(main())
