"""A search engine's line beside ours: tantivy (Rust, Lucene's design) over the same chunks.

    .venv/bin/pip install tantivy          # the benchmark's own; never a dependency
    python bench/tantivy_reference.py --db STORE --dataset DIR [--split dev] [--queries 100]

Reads every chunk of STORE, indexes the chunks in RAM with tantivy's English stemming
tokenizer, and times top-10 BM25 queries (the dataset's own queries, as
``bench/search_speed.py`` picks them, words only, OR'ed): p50 and p95 in milliseconds. It
shows how far the text index is from a search engine's floor on this machine; it is not
the same work (no store round trip, no filters, no per-document collapse).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import tantivy

from common import load_queries, pct
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.search import query_words

ROOT = Path(__file__).resolve().parents[1]


async def chunks_of(db: str) -> list[tuple[str, str]]:
    async with await KnowledgeBase.open(settings=Settings.from_env(db=db),
                                        create=False) as kb:
        (rows,) = await kb.store.query("SELECT id, content FROM chunks;")
    return [(str(r["id"].id), str(r["content"])) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    chunks = asyncio.run(chunks_of(args.db))
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("key", stored=True, tokenizer_name="raw")
    builder.add_text_field("content", stored=False, tokenizer_name="en_stem")
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer(heap_size=256_000_000, num_threads=1)
    t0 = time.perf_counter()
    for key, content in chunks:
        writer.add_document(tantivy.Document(key=key, content=content))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    built = time.perf_counter() - t0
    searcher = index.searcher()
    queries = load_queries(args.dataset, args.split, args.queries, False, args.seed)
    parsed = [index.parse_query(" ".join(query_words(q)), ["content"]) for q in queries]
    for q in parsed[:10]:
        searcher.search(q, 10)
    times = []
    for q in parsed:
        t = time.perf_counter()
        searcher.search(q, 10).hits  # noqa: B018
        times.append((time.perf_counter() - t) * 1000)
    print(f"tantivy {tantivy.__name__}: {len(chunks)} chunks indexed in {built:.1f} s;"
          f" top-10 p50 {statistics.median(times):.2f} ms, p95 {pct(times, 0.95):.2f} ms")


if __name__ == "__main__":
    main()
