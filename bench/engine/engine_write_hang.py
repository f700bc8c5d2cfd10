"""Look for the embedded engine's hang during a long series of writes in one session.

    python bench/engine_write_hang.py [--mode build|nobuild|noembed] [--until 150000]
                                      [--stall 300] [--workdir DIR] [--reopen-rows N]

Grows a file store through the normal ingest path (``ingest_texts``, 2,500 synthetic
documents of SciFact sentences per call, about 7,900 chunks; vectors from ``hashing-384``),
all in one process and one engine session, and prints the chunks stored and the seconds of
each call. ``build`` builds the HNSW graph once after the first 3,000 real abstracts (as
``bench/scale.py`` does at 10k), ``nobuild`` never builds it, ``noembed`` stores no vectors
at all (the full-text index alone). When a call makes no progress for ``--stall`` seconds
(a call takes about 35 s here), it prints HANG with the process's CPU time (which stops
growing when every thread is parked) and exits with status 3; reaching ``--until`` chunks
exits 0. ``--reopen-rows`` is the setting ``engine_reopen_rows`` (the engine is reopened
after that many rows written; 0 never reopens it, which reproduces the hang); by default
the setting's own default.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py

from common import corpus, synthetic


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def watchdog(state: dict[str, float], stall: float) -> None:
    while True:
        time.sleep(5)
        if time.monotonic() - state["last"] > stall:
            print(f"HANG: no call finished for {stall:g} s at {int(state['chunks'])} chunks;"
                  f" CPU time {cpu_seconds():.1f} s (was {state['cpu']:.1f} s at the last"
                  " call)", flush=True)
            os._exit(3)


async def main() -> None:
    from surrealdocs import KnowledgeBase, Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["build", "nobuild", "noembed"], default="build")
    parser.add_argument("--until", type=int, default=150_000)
    parser.add_argument("--stall", type=float, default=300.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/surrealdocs-write-hang"))
    parser.add_argument("--reopen-rows", type=int, default=None)
    args = parser.parse_args()
    store = args.workdir / args.mode
    if store.exists():
        raise SystemExit(f"{store} exists: give another --workdir")
    docs, sentences = corpus()
    settings = Settings(db=str(store), model="hashing-384", rebuild_threshold=10**9,
                        embed=args.mode != "noembed",
                        **({} if args.reopen_rows is None
                           else {"engine_reopen_rows": args.reopen_rows}))
    state = {"last": time.monotonic(), "chunks": 0.0, "cpu": 0.0}
    threading.Thread(target=watchdog, args=(state, args.stall), daemon=True).start()
    async with await KnowledgeBase.open(settings=settings) as kb:
        items = list(docs.items())
        for start in range(0, 3000, 500):
            await kb.ingest_texts(dict(items[start:start + 500]))
        if args.mode == "build":
            t0 = time.perf_counter()
            await kb.rebuild_index()
            print(f"graph built in {time.perf_counter() - t0:.1f} s", flush=True)
        step = 0
        while state["chunks"] < args.until:
            t0 = time.perf_counter()
            await kb.ingest_texts(synthetic(sentences, 2500, 100 + step))
            step += 1
            stats = await kb.stats()
            state.update(last=time.monotonic(), chunks=stats.chunks, cpu=cpu_seconds())
            print(f"{time.strftime('%H:%M:%S')} {stats.chunks} chunks"
                  f" {time.perf_counter() - t0:.1f} s, {kb.store.reopens} reopens so far",
                  flush=True)
        print(f"no hang up to {int(state['chunks'])} chunks", flush=True)
        t0 = time.perf_counter()
        await kb.store.refresh_engine()
        print(f"one more reopen of the engine took {time.perf_counter() - t0:.2f} s",
              flush=True)
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
