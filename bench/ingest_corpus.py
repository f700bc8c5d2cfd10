"""Ingest throughput on a real corpus, first run against re-run (and, optionally, against
extraction + embedding alone, without the store).

    python bench/ingest_corpus.py [CORPUS_DIR] [--model all-minilm-l6-v2] [--baseline]

Prints and writes bench/results/ingest_corpus.json. Run it alone on the machine: timings
taken while another job runs are not comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.discover import discover
from surrealdocs.embed import get_embedder
from surrealdocs.extract import Extracted, extract_file

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


async def baseline(files: list[Path], settings: Settings) -> dict[str, float]:
    """kreuzberg extraction (same concurrency) plus model embedding, no database."""
    model = get_embedder(settings.model)
    slots = asyncio.Semaphore(settings.extract_concurrency)
    t0 = time.perf_counter()

    async def one(p: Path) -> Extracted | None:
        async with slots:
            out = await extract_file(p, settings)
        return out if isinstance(out, Extracted) else None

    docs = [d for d in await asyncio.gather(*(one(p) for p in files)) if d]
    t_extract = time.perf_counter() - t0
    texts = [c.content for d in docs for c in d.chunks]
    t1 = time.perf_counter()
    model.embed_documents(texts)
    t_embed = time.perf_counter() - t1
    return {"extract_s": t_extract, "embed_s": t_embed, "total_s": t_extract + t_embed,
            "chunks": len(texts)}


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
        result = {
            "corpus": str(args.corpus), "model": args.model, "files": len(files),
            "first_run": {"seconds": round(first_s, 2), "counts": first.counts,
                          "chunks": first.chunks_written,
                          "files_per_s": round(len(files) / first_s, 2),
                          "chunks_per_s": round(first.chunks_written / first_s, 1),
                          "index_rebuilt": first.index_rebuilt},
            "second_run": {"seconds": round(second_s, 3), "counts": second.counts},
            "speedup_second_run": round(first_s / second_s, 1),
            "store": {"documents": stats.documents, "chunks": stats.chunks},
        }
        if args.baseline:
            b = await baseline(files, settings)
            result["baseline_no_store"] = {k: round(v, 2) for k, v in b.items()}
            result["ratio_first_run_to_baseline"] = round(first_s / b["total_s"], 2)
    out = Path(__file__).parent / "results" / "ingest_corpus.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    sys.stdout.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    asyncio.run(main())
