"""Reproduce the embedded engine's HNSW build hang, or show that a reopen avoids it.

    python bench/graph_build_probe.py [--chunks 100000] [--statement rebuild|define]
                                      [--reopen] [--timeout 1500]

Loads ``--chunks`` chunks and links 10% of them into a notebook, as bench/notebook_scope.py
does, all in one engine session. It then builds the shared HNSW graph by calling the engine
directly, bypassing ``Store.build_index``: with ``REBUILD INDEX``, or with a synchronous
``DEFINE INDEX … OVERWRITE``. With ``--reopen`` the engine is closed and reopened first, which
is what ``Store.refresh_engine`` does. The script prints how long the build took, or that no
answer came within ``--timeout`` seconds. When that happens, the process sits at 0% CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/common.py

from common import DIM, FixedDim, load, log
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.store.vectorgraphs import hnsw_index_sql

ROOT = Path(__file__).resolve().parents[1]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--statement", choices=("rebuild", "define"), default="rebuild")
    parser.add_argument("--reopen", action="store_true")
    parser.add_argument("--timeout", type=float, default=1500)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(100, DIM)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=str(Path(tmp) / "kb"), model="bench", rebuild_threshold=10**9)
        kb = await KnowledgeBase.open(settings=settings, embedder=FixedDim(DIM))
        nbs = kb.notebooks
        sources = await load(kb, args.chunks, 1000, rng, centres)
        nb = await nbs.create_notebook("probe")
        for doc in sources[: max(len(sources) // 10, 1)]:
            await nbs.link(doc, nb)
        log("loaded and linked")
        if args.reopen:
            t0 = time.perf_counter()
            await kb.store.refresh_engine()
            log(f"engine reopened in {time.perf_counter() - t0:.1f} s")
        n = kb.store.names
        sql = (hnsw_index_sql(n, settings, DIM).replace("IF NOT EXISTS", "OVERWRITE")
               if args.statement == "define" else f"REBUILD INDEX {n.hnsw_index} ON {n.chunks};")
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(kb.store.query(sql), args.timeout)
            log(f"{args.statement} finished in {time.perf_counter() - t0:.1f} s")
        except asyncio.TimeoutError:
            log(f"{args.statement}: no answer after {time.perf_counter() - t0:.0f} s")
    os._exit(0)  # a hung engine would keep the interpreter from exiting


if __name__ == "__main__":
    asyncio.run(main())
