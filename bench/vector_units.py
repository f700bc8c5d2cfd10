"""What a document's vectors should cover: the vector leg's quality for different embedding
units, on several BEIR collections, by exact cosine (no index), best unit per document.

    python bench/vector_units.py DATASET[:SPLIT] ... [--variants chars800 fit800 ...]
                                 [--cache DIR] [--bm25]

Variants (each document is its title, a blank line and its text, as ``surrealdocs eval``
ingests it):
- ``charsN``: kreuzberg's chunks of N characters (overlap 100): the chunking of ingest.
- ``fitN``: the whole document when it fits the model's window (256 word pieces), else
  ``charsN`` chunks, any chunk longer than the window split again.
- ``fitN+title``: ``fitN`` with the document's title before every chunk but the first
  (which starts with it) in the embedded text.
- ``charsN+whole``: ``charsN`` chunks plus the whole document (the model reads its first
  256 word pieces) as one more unit.
- ``whole``: the whole document only, truncated by the model.

With ``--bm25`` the BM25 leg of the engine (default settings, the model-free hashing
embedder) is fused with each variant's vector leg by z-score, as hybrid search does.
Embeddings are cached on disk by text, so variants share the work. Prints one table;
quality figures are deterministic.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.evaluate import (
    SOURCE_PREFIX,
    Dataset,
    document_text,
    load_beir,
    mean_scores,
    score_run,
)
from surrealdocs.embed.minilm import MAX_TOKENS, TOKENIZER_PATH, MiniLMEmbedder
from surrealdocs.parts.chunk import chunk_text
from surrealdocs.parts.fusion import zscore

ROOT = Path(__file__).resolve().parents[1]

DEPTH = 100


class Cache:
    """Vectors by the SHA-1 of their text, kept in one .npy + .json pair per model."""

    def __init__(self, folder: Path, model: MiniLMEmbedder) -> None:
        self.folder, self.model = folder, model
        folder.mkdir(parents=True, exist_ok=True)
        self.keys_file, self.vectors_file = folder / "keys.json", folder / "vectors.npy"
        self.index: dict[str, int] = {}
        self.vectors = np.zeros((0, model.dimension), dtype=np.float32)
        if self.keys_file.exists():
            self.index = {k: i for i, k in enumerate(json.loads(self.keys_file.read_text()))}
            self.vectors = np.load(self.vectors_file)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = {k: t for k, t in zip(keys, texts) if k not in self.index}
        if missing:
            print(f"  embedding {len(missing)} texts", file=sys.stderr, flush=True)
            new = self.model.embed_documents(list(missing.values()))
            base = len(self.vectors)
            self.vectors = np.concatenate([self.vectors, new])
            for n, k in enumerate(missing):
                self.index[k] = base + n
            np.save(self.vectors_file, self.vectors)
            self.keys_file.write_text(json.dumps(list(self.index)))
        return self.vectors[[self.index[k] for k in keys]]


Unit = tuple[str, str]  # (corpus id, text to embed)


def units(data: Dataset, variant: str, count: Callable[[str], int]) -> list[Unit]:
    base, _, extra = variant.partition("+")
    out: list[Unit] = []
    for did, (title, text) in data.corpus.items():
        whole = document_text(title, text)
        if not whole:
            continue
        if base == "whole":
            out.append((did, whole))
            continue
        size = int(base.removeprefix("chars").removeprefix("fit"))
        fit = base.startswith("fit")
        if fit and count(whole) <= MAX_TOKENS:
            pieces = [whole]
        else:
            pieces = [c.content for c in chunk_text(whole, size, 100)]
            if fit:
                pieces = [p for piece in pieces for p in split_to_fit(piece, count)]
        if extra == "title" and title.strip():
            pieces = [p if n == 0 or p.startswith(title.strip()) else f"{title.strip()}\n\n{p}"
                      for n, p in enumerate(pieces)]
        if extra == "whole" and len(pieces) > 1:
            pieces.append(whole)
        out += [(did, p) for p in pieces]
    return out


def split_to_fit(text: str, count: Callable[[str], int]) -> list[str]:
    if count(text) <= MAX_TOKENS:
        return [text]
    size = max(100, int(len(text) * MAX_TOKENS / count(text) * 0.9))
    return [p for c in chunk_text(text, size, min(100, size // 4))
            for p in split_to_fit(c.content, count)]


def vector_run(data: Dataset, unit_list: list[Unit], cache: Cache,
               model: MiniLMEmbedder) -> dict[str, list[tuple[str, float]]]:
    vectors = cache.embed([t for _, t in unit_list])
    owners = np.array([d for d, _ in unit_list])
    queries = list(data.queries.items())
    qv = np.stack([model.embed_query(q) for _, q in queries])
    sims = qv @ vectors.T
    run: dict[str, list[tuple[str, float]]] = {}
    for (qid, _), row in zip(queries, sims):
        best: dict[str, float] = {}
        for i in np.argsort(-row)[: DEPTH * 8]:
            d = str(owners[i])
            if d not in best:
                best[d] = float(row[i])
                if len(best) == DEPTH:
                    break
        run[qid] = sorted(best.items(), key=lambda x: -x[1])
    return run


async def bm25_run(data: Dataset, store: Path) -> dict[str, list[tuple[str, float]]]:
    settings = Settings(db=str(store), model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as kb:
        report = await kb.ingest_texts(
            (SOURCE_PREFIX + did, document_text(t, x)) for did, (t, x) in data.corpus.items())
        ids: dict[str, list[str]] = {}
        for r in report.results:
            if r.document_id:
                ids.setdefault(r.document_id, []).append(r.source.removeprefix(SOURCE_PREFIX))
        await kb.warm_up(data.queries.values())
        run = {}
        for qid, q in data.queries.items():
            hits = await kb.search(q, mode="text", limit=DEPTH, per_document=True)
            run[qid] = [(d, float(h.score)) for h in hits for d in ids.get(h.document_id, [])]
        return run


def fuse(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> list[str]:
    na, nb = zscore([s for _, s in a]), zscore([s for _, s in b])
    sa, sb = dict(a), dict(b)
    docs = set(sa) | set(sb)
    return sorted(docs, key=lambda d: -(na(sa.get(d)) + nb(sb.get(d))))[:DEPTH]


def metrics(data: Dataset, run: dict[str, list[str]]) -> dict[str, float]:
    return mean_scores(score_run(data.qrels, run))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", help="DIR or DIR:SPLIT")
    parser.add_argument("--variants", nargs="+",
                        default=["chars800", "fit800", "fit800+title", "chars800+whole",
                                 "whole"])
    parser.add_argument("--cache", type=Path, default=ROOT / "bench" / "results" / "vec-cache")
    parser.add_argument("--bm25", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    model = MiniLMEmbedder(batch_size=32)
    tok = Tokenizer.from_file(str(TOKENIZER_PATH))  # the model's word pieces, uncut
    tok.no_truncation()
    tok.no_padding()

    def count(text: str) -> int:
        return len(tok.encode(text).ids)

    rows: list[dict[str, Any]] = []
    for spec in args.datasets:
        path, _, split = spec.partition(":")
        data = load_beir(path, split or "test")
        print(f"{data.name}: {len(data.corpus)} documents, {len(data.queries)} queries",
              file=sys.stderr, flush=True)
        cache = Cache(args.cache, model)
        text_run: dict[str, list[tuple[str, float]]] | None = None
        if args.bm25:
            store = args.cache.parent / f"bm25-{data.name}"
            text_run = asyncio.run(bm25_run(data, store))
            rows.append({"dataset": data.name, "variant": "BM25 (engine)", "units": 0,
                         **metrics(data, {q: [d for d, _ in r] for q, r in text_run.items()})})
        for variant in args.variants:
            unit_list = units(data, variant, count)
            run = vector_run(data, unit_list, cache, model)
            row = {"dataset": data.name, "variant": variant, "units": len(unit_list),
                   **metrics(data, {q: [d for d, _ in r] for q, r in run.items()})}
            if text_run is not None:
                hybrid = {q: fuse(text_run.get(q, []), run[q]) for q in run}
                row["hybrid"] = metrics(data, hybrid)["ndcg@10"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| dataset | variant | units | nDCG@10 | R@100 | MRR@10 | hybrid nDCG@10 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['variant']} | {r['units']} | {r['ndcg@10']:.4f} |"
              f" {r['recall@100']:.4f} | {r['mrr@10']:.4f} |"
              f" {r['hybrid']:.4f} |" if "hybrid" in r else
              f"| {r['dataset']} | {r['variant']} | {r['units']} | {r['ndcg@10']:.4f} |"
              f" {r['recall@100']:.4f} | {r['mrr@10']:.4f} | |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
