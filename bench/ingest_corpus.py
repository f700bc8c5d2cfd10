"""Ingest throughput and memory on a real corpus: the first run, the re-run, and (with
``--baseline``) the embedding model alone on the same chunks at its best batch size.

    python bench/ingest_corpus.py [CORPUS_DIR] [--model all-minilm-l6-v2] [--baseline]

The pipeline's chunks/s is the chunks stored over the whole first run (extraction, chunking,
embedding, writes, the HNSW build); the model's is the same chunk texts embedded in one
process with nothing else running, at the best of a few batch sizes. Peak RSS is the
process's after the first run (before the baseline allocates anything). Prints and writes
bench/results/ingest_corpus.json. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed.minilm import MiniLMEmbedder
from surrealdocs.parts.discover import discover
from surrealdocs.parts.extract import Extracted, extract_file

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


async def baseline(files: list[Path], settings: Settings) -> dict[str, float]:
    """The same chunk texts through the model alone, at its best batch size; and kreuzberg
    extraction alone, for reference."""
    slots = asyncio.Semaphore(settings.extract_concurrency)
    t0 = time.perf_counter()

    async def one(p: Path) -> Extracted | None:
        async with slots:
            out = await extract_file(p, settings)
        return out if isinstance(out, Extracted) else None

    docs = [d for d in await asyncio.gather(*(one(p) for p in files)) if d]
    t_extract = time.perf_counter() - t0
    texts = [c.content for d in docs for c in d.chunks]
    sample = texts[:: max(1, len(texts) // 500)][:500]
    best, best_rate = 32, 0.0
    for size in (1, 2, 4, 8, 16, 32, 64):
        model = MiniLMEmbedder(batch_size=size)
        t1 = time.perf_counter()
        model.embed_documents(sample)
        rate = len(sample) / (time.perf_counter() - t1)
        if rate > best_rate:
            best, best_rate = size, rate
    t1 = time.perf_counter()
    MiniLMEmbedder(batch_size=best).embed_documents(texts)
    t_embed = time.perf_counter() - t1
    return {"extract_s": t_extract, "embed_s": t_embed, "chunks": len(texts),
            "best_batch_size": best, "model_chunks_per_s": len(texts) / t_embed}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--baseline", action="store_true",
                        help="also time extraction + embedding without the store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=str(Path(tmp) / "kb"), model=args.model)
        files, _ = discover([args.corpus])
        async with await KnowledgeBase.open(settings=settings) as kb:
            t0 = time.perf_counter()
            first = await kb.ingest([args.corpus])
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            second = await kb.ingest([args.corpus])
            second_s = time.perf_counter() - t0
            stats = await kb.stats()
        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = {
            "corpus": str(args.corpus), "model": args.model, "files": len(files),
            "first_run": {"seconds": round(first_s, 2), "counts": first.counts,
                          "chunks": first.chunks_written,
                          "chunks_embedded": first.chunks_embedded,
                          "files_per_s": round(len(files) / first_s, 2),
                          "chunks_per_s": round(first.chunks_written / first_s, 1),
                          "index_rebuilt": first.index_rebuilt},
            "second_run": {"seconds": round(second_s, 3), "counts": second.counts},
            "speedup_second_run": round(first_s / second_s, 1),
            "store": {"documents": stats.documents, "chunks": stats.chunks},
            "peak_rss_mb": round(peak_rss_mb),
        }
        if args.baseline and args.model == "all-minilm-l6-v2":
            b = await baseline(files, settings)
            result["model_alone"] = {k: round(v, 2) for k, v in b.items()}
            pipeline_rate = first.chunks_written / first_s
            result["pipeline_share_of_model_rate"] = round(
                pipeline_rate / b["model_chunks_per_s"], 3)
    out = Path(__file__).parent / "results" / "ingest_corpus.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    sys.stdout.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    asyncio.run(main())
