"""Hybrid fusion variants on SciFact, computed outside the engine from each leg's candidates.

    python bench/fusion_variants.py --db /tmp/scifact-kb [--split dev] [--doc-bm25]
                                    [--title-context]

This is the harness behind BENCHMARKS.md's "Why z-score and not RRF". The first run ingests the
SciFact corpus into the store at ``--db`` through the normal pipeline (about 10-15 minutes on 2
cores) and keeps it; later runs reuse it. For each query of the split it takes the BM25 chunk
hits from the engine (the text leg, as search runs it) and scores every stored chunk vector
exactly, then ranks documents by their best chunk and fuses the two legs in several ways.
Its baseline rows reproduce the engine's own figures (``bench/quality.py --dev``), so the
variants are comparable with them.

``--doc-bm25`` adds a full-text index over whole documents to that store (a variant of the
text leg); ``--title-context`` embeds every chunk after the first with its document's title in
front (another 12,000 chunks through the model, about 15 minutes). Use the dev split to choose
anything; the test split is for reporting.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common import dev_dataset
from surrealdocs import Settings
from surrealdocs.core.evaluate import (
    SOURCE_PREFIX,
    document_text,
    load_beir,
    mean_scores,
    score_run,
)
from surrealdocs.core.kb import KnowledgeBase
from surrealdocs.core.search import query_terms
from surrealdocs.embed import get_embedder

ROOT = Path(__file__).resolve().parents[1]

SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
DEPTH = 100
Ranking = list[tuple[str, float]]  # (document key, score), best first


def key(record: Any) -> str:
    """A document's key, whether given as a RecordID or as its printed form."""
    text = str(getattr(record, "id", record))
    return text.split(":", 1)[-1].strip("⟨⟩`")


def best_chunk_per_document(pairs: Sequence[tuple[str, float]], depth: int = DEPTH) -> Ranking:
    seen: dict[str, float] = {}
    for doc, score in pairs:
        seen.setdefault(doc, score)
    return list(seen.items())[:depth]


def rrf(lists: Sequence[Ranking], k: int = 60, weights: Sequence[float] | None = None,
        depth: int = DEPTH) -> list[str]:
    score: dict[str, float] = defaultdict(float)
    best: dict[str, int] = {}
    for i, ranking in enumerate(lists):
        weight = 1.0 if weights is None else weights[i]
        for rank, (doc, _) in enumerate(ranking, 1):
            score[doc] += weight / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    return [d for d, _ in sorted(score.items(), key=lambda x: (-x[1], best[x[0]], x[0]))][:depth]


def normalised(method: str) -> Callable[[Ranking, Ranking, float], list[str]]:
    """min-max or z-score fusion; a document missing from a leg counts as its lowest."""
    def scale(ranking: Ranking) -> tuple[dict[str, float], float]:
        s = np.array([v for _, v in ranking])
        if method == "zscore":
            centre, spread = s.mean(), s.std() or 1.0
        else:
            centre, spread = s.min(), (s.max() - s.min()) or 1.0
        return {d: (v - centre) / spread for d, v in ranking}, (s.min() - centre) / spread

    def fuse(text: Ranking, vector: Ranking, text_weight: float = 0.5) -> list[str]:
        (t, t_floor), (v, v_floor) = scale(text), scale(vector)
        score = {d: text_weight * t.get(d, t_floor) + (1 - text_weight) * v.get(d, v_floor)
                 for d in set(t) | set(v)}
        return [d for d, _ in sorted(score.items(), key=lambda x: -x[1])][:DEPTH]

    return fuse


async def build(db: str) -> dict[str, list[str]]:
    """The SciFact store and, per stored document, the corpus ids it stands for."""
    ids_file = Path(db).with_suffix(".ids.json")
    if ids_file.exists():
        ids: dict[str, list[str]] = json.loads(ids_file.read_text())
        return ids
    data = load_beir(SCIFACT, "test")
    async with await KnowledgeBase.open(settings=Settings.from_env(db=db)) as kb:
        report = await kb.ingest_texts((SOURCE_PREFIX + did, document_text(title, text))
                                       for did, (title, text) in data.corpus.items())
    ids = {}
    for r in report.results:
        if r.document_id:
            ids.setdefault(key(r.document_id), []).append(r.source.removeprefix(SOURCE_PREFIX))
    ids_file.write_text(json.dumps(ids))
    return ids


async def collect(db: str, queries: dict[str, str], doc_bm25: bool) -> dict[str, Any]:
    async with await KnowledgeBase.open(settings=Settings.from_env(db=db)) as kb:
        (rows,) = await kb.store.query(
            f"SELECT id, document, chunk_index, content FROM {kb.store.names.chunks};")
        # the vectors live in their own table (schema 8), keyed as their chunks
        (vectors,) = await kb.store.query(
            f"SELECT VALUE [record::id(id), embedding] FROM {kb.storage.chunks.vector_table};")
        by_key = {str(k): v for k, v in vectors}
        assert kb.embedder is not None
        out: dict[str, Any] = {
            "chunks": [(key(r["document"]), int(r["chunk_index"]), r["content"]) for r in rows],
            "vectors": np.array([by_key[str(r["id"].id)] for r in rows], dtype=np.float32),
            "text": {}, "query_vectors": {}, "doc_bm25": {}}
        if doc_bm25:
            await kb.store.query(
                f"DEFINE INDEX IF NOT EXISTS bench_doc_ft ON {kb.store.names.documents} FIELDS"
                f" content FULLTEXT ANALYZER {kb.store.names.analyzer}"
                f" BM25({kb.settings.bm25_k1},{kb.settings.bm25_b});")
        for qid, text in queries.items():
            hits = await kb.search(text, mode="text", limit=400)
            out["text"][qid] = [(key(h.document_id), h.score) for h in hits]
            out["query_vectors"][qid] = np.asarray(kb.embedder.embed_query(text),
                                                   dtype=np.float32)
            if doc_bm25:
                (docs,) = await kb.store.query(
                    "SELECT id, search::score(1) AS s FROM type::table($t)"
                    " WHERE content @1,OR@ $q ORDER BY s DESC LIMIT 100;",
                    {"t": kb.store.names.documents, "q": query_terms(text)})
                out["doc_bm25"][qid] = [(key(d["id"]), float(d["s"])) for d in docs]
        return out


def title_context_vectors(legs: dict[str, Any], titles: dict[str, str],
                          ids: dict[str, list[str]]) -> np.ndarray:
    embedder = get_embedder(Settings().model)
    vectors: np.ndarray = np.array(legs["vectors"], copy=True)
    todo = [i for i, (_, index, _) in enumerate(legs["chunks"]) if index > 0]
    for start in range(0, len(todo), 64):
        part = todo[start:start + 64]
        texts = [titles[ids[legs["chunks"][i][0]][0]] + "\n\n" + legs["chunks"][i][2]
                 for i in part]
        vectors[part] = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="store directory (built on first use)")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--doc-bm25", action="store_true")
    parser.add_argument("--title-context", action="store_true")
    args = parser.parse_args()

    ids = asyncio.run(build(args.db))
    data = load_beir(dev_dataset() if args.split == "dev" else SCIFACT, args.split)
    legs = asyncio.run(collect(args.db, data.queries, args.doc_bm25))
    chunk_docs = [doc for doc, _, _ in legs["chunks"]]
    by_doc: dict[str, list[int]] = defaultdict(list)
    for i, doc in enumerate(chunk_docs):
        by_doc[doc].append(i)
    doc_keys = sorted(by_doc)
    doc_means = np.stack([legs["vectors"][by_doc[d]].mean(0) for d in doc_keys])
    doc_means /= np.linalg.norm(doc_means, axis=1, keepdims=True)
    titled = None
    if args.title_context:
        titles = {row_id: title for row_id, (title, _) in data.corpus.items()}
        titled = title_context_vectors(legs, titles, ids)
    zscore, minmax = normalised("zscore"), normalised("minmax")

    def vector_leg(vectors: np.ndarray, q: np.ndarray) -> Ranking:
        sims = vectors @ q
        top = np.argsort(-sims)[:600]
        return best_chunk_per_document([(chunk_docs[i], float(sims[i])) for i in top])

    runs: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for qid in data.queries:
        q = legs["query_vectors"][qid]
        text = best_chunk_per_document(legs["text"][qid])
        vector = vector_leg(legs["vectors"], q)
        grouped: dict[str, list[float]] = defaultdict(list)
        for doc, score in legs["text"][qid]:
            grouped[doc].append(score)
        text_plus = sorted(((d, s[0] + 0.1 * sum(s[1:])) for d, s in grouped.items()),
                           key=lambda x: -x[1])[:DEPTH]
        mean_sims = doc_means @ q
        doc_mean = [(doc_keys[i], float(mean_sims[i])) for i in np.argsort(-mean_sims)[:DEPTH]]
        variants: dict[str, list[str]] = {
            "BM25 (best chunk)": [d for d, _ in text],
            "vector (best chunk, exact)": [d for d, _ in vector],
            "BM25 best chunk + 0.1 x the rest": [d for d, _ in text_plus],
            "RRF k 60": rrf([text, vector]),
            "z-score 0.5 / 0.5": zscore(text, vector, 0.5),
            "min-max 0.5 / 0.5": minmax(text, vector, 0.5),
            "RRF k 60, BM25 best chunk + 0.1 x the rest": rrf([text_plus, vector]),
            "RRF k 60 + document-mean vectors": rrf([text, vector, doc_mean]),
        }
        for k in (0, 5, 10, 30, 100):
            variants[f"RRF k {k}"] = rrf([text, vector], k=k)
        for w in (0.3, 0.4, 0.6):
            variants[f"RRF text weight {w}"] = rrf([text, vector], weights=(w, 1 - w))
            variants[f"z-score text weight {w}"] = zscore(text, vector, w)
        if args.doc_bm25:
            whole = legs["doc_bm25"][qid]
            variants["BM25 whole documents"] = [d for d, _ in whole]
            variants["RRF k 60, whole-document BM25"] = rrf([whole, vector])
            variants["z-score, whole-document BM25"] = zscore(whole, vector, 0.5)
        if titled is not None:
            with_title = vector_leg(titled, q)
            variants["vector, title as chunk context"] = [d for d, _ in with_title]
            variants["RRF k 60, title as chunk context"] = rrf([text, with_title])
            variants["z-score, title as chunk context"] = zscore(text, with_title, 0.5)
        for name, ranked in variants.items():
            runs[name][qid] = [cid for d in ranked for cid in ids.get(d, [])]

    print(f"SciFact {args.split}: {len(data.queries)} queries\n")
    print("| variant | nDCG@10 | R@100 | MRR@10 |\n|---|---|---|---|")
    for name, run in runs.items():
        m = mean_scores(score_run(data.qrels, run))
        print(f"| {name} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} |")
    os._exit(0)  # the embedded engine can abort during interpreter teardown


if __name__ == "__main__":
    main()
