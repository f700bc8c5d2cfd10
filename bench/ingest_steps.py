"""Ingest steps into an existing store, each timed, with every engine reopen timed.

    python bench/ingest_steps.py STORE [--steps 4] [--seed 900] [--grow-to 0]

Each step ingests 2,500 synthetic documents of SciFact sentences (``bench/scale.py``'s, about
7,900 chunks, ``hashing-384`` vectors) through ``KnowledgeBase.ingest_texts`` into the file
store ``STORE``, in one process. ``--grow-to N`` first grows the store to N chunks the way
``bench/scale.py`` does. Per step it prints the store's size before it, seconds per 1,000
chunks, the process's RSS, and the seconds (of which closing) and RSS around every reopen of
the embedded engine (``Store.refresh_engine``, every ``engine_reopen_rows`` rows written).
Run once per size in fresh processes to compare stores of different sizes; run with several
steps to see what a long-lived process adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from surrealdb.connections.async_embedded import AsyncEmbeddedSurrealConnection

from common import corpus, grow, rss_mb, synthetic
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.store.connection import Store, release_freed_memory


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=900)
    parser.add_argument("--grow-to", type=int, default=0)
    parser.add_argument("--trim", action="store_true",
                        help="after each step, ask glibc to give freed memory back "
                             "(malloc_trim) and print RSS after it")
    args = parser.parse_args()
    reopens: list[tuple[float, float, int, int]] = []
    refresh = Store.refresh_engine
    close = AsyncEmbeddedSurrealConnection.close
    closing: list[float] = []

    async def timed_close(self: AsyncEmbeddedSurrealConnection) -> None:
        started = time.perf_counter()
        try:
            await close(self)
        finally:
            closing.append(time.perf_counter() - started)

    async def timed_refresh(self: Store) -> bool:
        before, started = rss_mb(), time.perf_counter()
        closing.clear()
        try:
            return await refresh(self)
        finally:
            reopens.append((time.perf_counter() - started, sum(closing), before, rss_mb()))

    AsyncEmbeddedSurrealConnection.close = timed_close  # type: ignore[method-assign]
    Store.refresh_engine = timed_refresh  # type: ignore[method-assign]
    docs, sentences = corpus()
    settings = Settings(db=args.store, model="hashing-384", rebuild_threshold=10**9)
    async with await KnowledgeBase.open(settings=settings) as kb:
        if args.grow_to:
            await grow(kb, args.grow_to, docs, sentences, seed=1)
        print("store chunks  chunks  s per 1k  RSS MB  "
              "reopens (seconds, of which closing; RSS before -> after)")
        for step in range(args.steps):
            before = (await kb.stats()).chunks
            reopens.clear()
            started = time.perf_counter()
            report: Any = await kb.ingest_texts(synthetic(sentences, 2_500, args.seed + step))
            per_1k = (time.perf_counter() - started) / report.chunks_written * 1000
            trimmed = ""
            if args.trim:
                rss = rss_mb()
                release_freed_memory()
                trimmed = f" (trimmed {rss} -> {rss_mb()} MB)"
            times = ", ".join(f"{s:.2f} s ({c:.2f} closing) {a} -> {b} MB"
                              for s, c, a, b in reopens)
            print(f"{before:>12}  {report.chunks_written:>6}  {per_1k:>8.2f}  {rss_mb():>6}  "
                  + times + trimmed, flush=True)
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    asyncio.run(main())
