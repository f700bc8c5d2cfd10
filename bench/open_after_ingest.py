"""How long the first open of a file store takes after an ingest, and the opens after it.

    python bench/open_after_ingest.py STORE [--opens 3] [--model hashing-384]

Each open runs in a fresh process, the way one ``surrealdocs search`` after another does:
``KnowledgeBase.open`` on ``STORE``, one text search, closing. Printed per open: the seconds
to open, to search, to close, and the process's peak RSS. The embedded engine merges the
SSTables earlier sessions left when it opens (BENCHMARKS.md, "Where the growth comes from"),
so the first open after an ingest can cost far more than the next ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time

from surrealdocs import KnowledgeBase, Settings


async def one_open(store: str, model: str) -> dict[str, float]:
    started = time.perf_counter()
    kb = await KnowledgeBase.open(settings=Settings(db=store, model=model))
    opened = time.perf_counter()
    await kb.search("the cells of the immune system", mode="text", limit=10)
    searched = time.perf_counter()
    await kb.close()
    return {"open": opened - started, "search": searched - opened,
            "close": time.perf_counter() - searched,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--model", default="hashing-384")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(one_open(args.store, args.model))), flush=True)
        os._exit(0)  # the embedded engine can abort while the interpreter tears down
    print("open  seconds to open  to search  to close  peak RSS MB")
    for number in range(1, args.opens + 1):
        child = subprocess.run([sys.executable, __file__, args.store, "--model", args.model,
                                "--child"], capture_output=True, text=True, check=True)
        row = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{number:>4}  {row['open']:>15.2f}  {row['search']:>9.2f}  {row['close']:>8.2f}"
              f"  {row['peak_rss_mb']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
