"""The default model's speed and memory by batch size: chunks/s and the process's peak RSS.

    python bench/embed_batch.py [--sizes 1 2 4 8 16 32] [--texts 300] [--rounds 2]

Each batch size runs in a fresh process, because onnxruntime's memory arena keeps the
largest run's memory for the life of the session: the peak RSS of a process is what that
batch size costs an ingest. The texts are 800-character slices of the War and Peace file
of ``../shared/data/documents`` (the size of an ingest chunk), or of a synthetic text when
that folder is absent. Rounds interleave the sizes so that a noisy machine hits them all
alike. Prints one line per run and a summary (median chunks/s, peak RSS per size).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BOOK = (Path(__file__).resolve().parents[2] / "shared" / "data" / "documents" / "txt"
        / "book-war-and-peace-1225p.txt")


def texts(count: int) -> list[str]:
    if BOOK.exists():
        text = BOOK.read_text(encoding="utf-8")
    else:
        words = [f"word{i % 997} term{i % 131}" for i in range(40_000)]
        text = " ".join(words)
    start = len(text) // 10
    return [text[start + i * 800:start + (i + 1) * 800] for i in range(count)]


def one(size: int, count: int) -> dict[str, float]:
    from surrealdocs.embed.minilm import MiniLMEmbedder

    model = MiniLMEmbedder(batch_size=size)
    sample = texts(count)
    model.embed_documents(sample[:8])  # load and warm the session
    t0 = time.perf_counter()
    model.embed_documents(sample)
    seconds = time.perf_counter() - t0
    peak = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text()
                .splitlines() if line.startswith("VmHWM"))
    return {"batch_size": size, "chunks_per_s": count / seconds, "peak_rss_mb": peak / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.texts)))
        return
    runs: dict[int, list[dict[str, float]]] = {s: [] for s in args.sizes}
    for _ in range(args.rounds):
        for size in args.sizes:
            out = subprocess.run([sys.executable, __file__, "--one", str(size),
                                  "--texts", str(args.texts)],
                                 check=True, capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            runs[size].append(row)
            print(f"batch {size:3d}: {row['chunks_per_s']:5.1f} chunks/s, "
                  f"peak RSS {row['peak_rss_mb']:6.0f} MB", flush=True)
    print("\n| batch size | chunks/s (median) | peak RSS (MB) |\n|---|---|---|")
    for size, rows in runs.items():
        print(f"| {size} | {statistics.median(r['chunks_per_s'] for r in rows):.1f} | "
              f"{max(r['peak_rss_mb'] for r in rows):.0f} |")


if __name__ == "__main__":
    main()
