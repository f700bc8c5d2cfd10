"""Time ``extract_file`` on single-line text files of growing size.

    python bench/long_lines.py [--sizes 0.5 1 2] [--sentences] [--timeout 300]

Each file is one line of words (with ``--sentences``, about one word in 12 ends with a
period), written to a temporary ``.txt`` file and extracted with the default chunking
(800/100). kreuzberg's chunker is quadratic in a line's length; surrealdocs cuts such lines
into pieces first (``chunk.chunk_text``). Prints seconds, chunks and whether the chunks cover
the text exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from surrealdocs import Settings
from surrealdocs.parts.extract import Extracted, extract_file

ROOT = Path(__file__).resolve().parents[1]

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
         "kappa", "lambda", "mu")


def one_line(n_chars: int, sentences: bool, seed: int = 1) -> str:
    rng = random.Random(seed)
    out, size = [], 0
    while size < n_chars:
        word = rng.choice(WORDS) + ("." if sentences and rng.random() < 0.08 else "")
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n_chars].rstrip()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.5, 1.0, 2.0],
                        help="megabytes")
    parser.add_argument("--sentences", action="store_true")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    settings = Settings(db="mem://", extract_timeout=args.timeout)
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.sizes:
            text = one_line(int(mb * 1_000_000), args.sentences)
            path = Path(tmp) / f"line-{mb}.txt"
            path.write_text(text)
            t0 = time.perf_counter()
            out = await extract_file(path, settings)
            seconds = time.perf_counter() - t0
            if not isinstance(out, Extracted):
                print(f"{mb:5.1f} MB  {seconds:7.2f} s  {out.kind}: {out.reason}", flush=True)
                continue
            c = out.chunks
            exact = all(out.content[k.char_start:k.char_end] == k.content for k in c)
            covered = (c[0].char_start == 0 and c[-1].char_end == len(out.content)
                       and all(b.char_start <= a.char_end for a, b in pairwise(c)))
            print(f"{mb:5.1f} MB  {seconds:7.2f} s  {len(c):6d} chunks  exact spans {exact}"
                  f"  covering {covered}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
