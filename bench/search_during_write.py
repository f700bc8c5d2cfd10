"""Searches while a large document is written: do they keep answering?

    python bench/search_during_write.py [--db DIR] [--mb 20] [--model all-minilm-l6-v2]

What a server does when one client sends a large text (``POST /v1/texts``) while others
search: one process, one knowledge base; the write runs as a task while a reader searches
without pause. The store first holds SciFact's corpus (from ``../shared/data/scifact``, when
it is there; else generated sentences), then the reader's idle p50/p95 per mode are taken;
then one document of ``--mb`` megabytes of SciFact text (its abstracts, repeated and
shuffled) is written and the reader's latencies during the write are reported beside the
idle ones, with the ratio of the p95s (the goal: at most 3x).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from surrealdocs import KnowledgeBase, Settings

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def corpus(limit: int) -> list[str]:
    path = SCIFACT / "corpus.jsonl"
    if path.exists():
        out = []
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                out.append(f"{row.get('title', '')}\n\n{row.get('text', '')}")
                if len(out) >= limit:
                    break
        return out
    rng = random.Random(1)
    words = "cell protein gene immune tumor blood brain signal dose trial risk".split()
    return [" ".join(rng.choice(words) for _ in range(150)) for _ in range(limit)]


def queries() -> list[str]:
    path = SCIFACT / "queries.jsonl"
    if path.exists():
        with path.open(encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f][:200]
    return ["protein signal in tumor cells", "immune response dose", "brain blood risk"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def read_for(kb: KnowledgeBase, mode: str, texts: list[str], stop: asyncio.Event,
                   seconds: float | None = None) -> list[float]:
    times: list[float] = []
    end = time.monotonic() + seconds if seconds else None
    i = 0
    while not stop.is_set() and (end is None or time.monotonic() < end):
        t0 = time.perf_counter()
        await kb.search(texts[i % len(texts)], mode=mode, limit=10, per_document=True)
        times.append((time.perf_counter() - t0) * 1000)
        i += 1
        await asyncio.sleep(0)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="store folder (default: a temporary one)")
    parser.add_argument("--mb", type=float, default=20.0, help="size of the large document")
    parser.add_argument("--docs", type=int, default=5183, help="documents stored first")
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--modes", nargs="+", default=["text", "vector", "hybrid"])
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    args = parser.parse_args()
    db = args.db or tempfile.mkdtemp(prefix="sdw-") + "/db"
    texts = corpus(args.docs)
    settings = Settings(db=db, model=args.model,
                        max_chunks_per_document=1_000_000)
    async with await KnowledgeBase.open(settings=settings) as kb:
        if (await kb.stats()).documents == 0:
            t0 = time.perf_counter()
            await kb.ingest_texts({f"scifact://{i}": t for i, t in enumerate(texts)})
            print(f"stored {len(texts)} documents in {time.perf_counter() - t0:.1f} s")
        qs = queries()
        stop = asyncio.Event()
        idle = {m: await read_for(kb, m, qs, stop, args.idle_seconds / len(args.modes))
                for m in args.modes}
        rng = random.Random(7)
        big, size = [], 0
        while size < args.mb * 1e6:
            part = rng.choice(texts)
            big.append(part)
            size += len(part) + 2
        large = "\n\n".join(big)
        during: dict[str, list[float]] = {m: [] for m in args.modes}

        async def reader() -> None:
            while not stop.is_set():
                for m in args.modes:
                    during[m].extend(await read_for(kb, m, qs, stop, 1.0))

        task = asyncio.get_running_loop().create_task(reader())
        t0 = time.perf_counter()
        report = await kb.ingest_texts({f"large://{time.time_ns()}": large})
        write_s = time.perf_counter() - t0
        stop.set()
        await task
        print(f"large document: {size / 1e6:.1f} MB, {report.chunks_written} chunks,"
              f" written in {write_s:.1f} s")
        print("mode    idle p50  idle p95  during p50  during p95  p95 ratio  searches during")
        for m in args.modes:
            i50, i95 = statistics.median(idle[m]), pct(idle[m], 0.95)
            d50, d95 = statistics.median(during[m] or [float("nan")]), pct(during[m], 0.95)
            print(f"{m:<7} {i50:8.1f}  {i95:8.1f}  {d50:10.1f}  {d95:10.1f}  {d95 / i95:9.1f}x"
                  f"  {len(during[m])}")


if __name__ == "__main__":
    asyncio.run(main())
