"""The engine's cost of writing chunk rows as the full-text index grows, with bare SurrealQL.

    python bench/fulltext_growth.py [--to 300000] [--step 10000] [--db mem://|surrealkv://]
        [--no-index] [--reopen-rows 10000]

The write path of ``surrealdocs`` without ``surrealdocs``: rows of 800-character texts
(windows of the SciFact-sentence documents ``bench/scale.py`` grows its stores with), 25 per
``INSERT``, two statements in flight, into the schema of the kreuzberg-surrealdb facade
(an analyzer with snowball stemming and a BM25 index). Every ``--step`` rows, the seconds per
1,000 rows of that step are printed, with the ratio to the first step. ``--no-index`` removes
the full-text index first (the control: the same rows with no index to update). On
``surrealkv://`` the engine is closed and opened again every ``--reopen-rows`` rows, as
``Store`` does, since a long series of writes in one session stalls there
(``bench/engine_write_hang.py``); the reopening is timed apart (closing, then opening), and
not counted in the seconds per row.

If the cost per row grows here as it does through ``bench/scale.py``'s ingest path, the
growth is the engine's, not ours.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from surrealdb import AsyncSurreal, RecordID

import surrealdocs.kreuzberg_surrealdb as facade
from common import corpus, insert_rows, rss_mb, synthetic

ROWS_PER_INSERT = 25
STREAMS = 2


def texts(count: int) -> list[str]:
    """``count`` 800-character windows (every 700) of deterministic synthetic documents."""
    _, sentences = corpus()
    out: list[str] = []
    seed = 0
    while len(out) < count:
        for doc in synthetic(sentences, 2_000, seed).values():
            out += [doc[i:i + 800] for i in range(0, max(1, len(doc) - 100), 700)]
        seed += 1
    return out[:count]


async def connect(url: str) -> Any:
    db: Any = AsyncSurreal(url)
    await db.connect()
    await db.use("bench", "bench")
    return db


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="ftgrowth-"))
    url = "mem://" if args.db.startswith("mem") else f"surrealkv://{tmp}/db"
    db = await connect(url)
    await facade.DocumentPipeline(db=db, embed=False).setup_schema()
    if args.no_index:
        await db.query("REMOVE INDEX chunks_content_ft ON chunks;")
    await db.query("CREATE documents:d SET content = 'x', content_hash = 'h',"
                   " mime_type = 'text/plain', sources = ['d'];")
    all_texts = texts(args.to)
    print(f"{args.to} rows, {args.db}, {'no full-text index' if args.no_index else 'BM25 index'}"
          f", {ROWS_PER_INSERT} rows per INSERT, {STREAMS} in flight", flush=True)
    print("rows after step  s per 1k rows  vs first step  peak RSS MB  RSS MB"
          "  reopen s (closing + opening)", flush=True)
    first = None
    since_reopen = 0
    for start in range(0, args.to, args.step):
        rows = [{"id": RecordID("chunks", i), "document": RecordID("documents", "d"),
                 "content": text, "chunk_index": i, "char_start": 0, "char_end": len(text),
                 "word_count": len(text.split())}
                for i, text in enumerate(all_texts[start:start + args.step], start)]
        seconds = 0.0
        reopens: list[str] = []
        for part in range(0, len(rows), args.reopen_rows or len(rows)):
            if url != "mem://" and args.reopen_rows and since_reopen >= args.reopen_rows:
                started = time.perf_counter()
                await db.close()
                closed = time.perf_counter()
                db = await connect(url)
                reopens.append(f"{closed - started:.2f} + {time.perf_counter() - closed:.2f}")
                since_reopen = 0
            chunk = rows[part:part + (args.reopen_rows or len(rows))]
            started = time.perf_counter()
            await insert_rows(db, chunk, ROWS_PER_INSERT, STREAMS)
            seconds += time.perf_counter() - started
            since_reopen += len(chunk)
        per_1k = seconds / len(rows) * 1000
        first = first or per_1k
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{start + len(rows):>15}  {per_1k:>13.3f}  {per_1k / first:>12.2f}x"
              f"  {rss:>11.0f}  {rss_mb():>6}  {', '.join(reopens)}", flush=True)
    await db.close()
    shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--to", type=int, default=300_000)
    parser.add_argument("--step", type=int, default=10_000)
    parser.add_argument("--db", default="mem://", help="mem:// or surrealkv:// (a fresh"
                        " temporary store)")
    parser.add_argument("--no-index", action="store_true", help="without the full-text index")
    parser.add_argument("--reopen-rows", type=int, default=10_000,
                        help="surrealkv:// only: reopen the engine after this many rows"
                        " (0: never)")
    asyncio.run(run(parser.parse_args()))
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    main()
