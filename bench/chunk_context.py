"""What contextual chunks cost at extraction, and which documents get a context.

    python bench/chunk_context.py [CORPUS_DIR] [--rounds 3]

Every file of the corpus is extracted with OCR off (OCR costs the same either way), with
``chunk_context="none"`` and with ``"headings"`` (the default: kreuzberg's document
structure is asked for, and each chunk gets the path of headings it lies under). The two
ways alternate file by file, the order flipping every round, so that a noisy machine
weighs on both alike. Prints the total seconds per way, their ratio, and per format the
files with headings and the share of chunks that got a context; checks that the chunks
themselves (text and spans) are the same both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from pathlib import Path

from surrealdocs.config import Settings
from surrealdocs.parts.discover import discover
from surrealdocs.parts.extract import Extracted, extract_file

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    files, _ = discover([args.corpus])
    ways = {"none": Settings(db="mem://", embed=False, ocr_language="", chunk_context="none"),
            "headings": Settings(db="mem://", embed=False, ocr_language="")}
    seconds = dict.fromkeys(ways, 0.0)
    per_format: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # files, with, chunks, ctx
    different: list[str] = []
    for r in range(args.rounds):
        for path in files:
            outs = {}
            for name in (list(ways) if (r + len(outs)) % 2 == 0 else list(reversed(ways))):
                t0 = time.perf_counter()
                outs[name] = asyncio.run(extract_file(path, ways[name]))
                seconds[name] += time.perf_counter() - t0
            plain, doc = outs["none"], outs["headings"]
            if r or not isinstance(doc, Extracted) or not isinstance(plain, Extracted):
                continue
            if [(c.content, c.char_start, c.char_end) for c in doc.chunks] != \
                    [(c.content, c.char_start, c.char_end) for c in plain.chunks]:
                different.append(path.name)
            counts = per_format[path.suffix.lower().lstrip(".") or "(none)"]
            counts[0] += 1
            counts[1] += bool(doc.headings)
            counts[2] += len(doc.chunks)
            counts[3] += sum(1 for c in doc.chunks if c.context)
    print(f"{len(files)} files, OCR off, mean of {args.rounds} rounds:")
    for name in ways:
        print(f"  chunk_context={name}: {seconds[name] / args.rounds:.2f} s")
    print(f"  headings / none: {seconds['headings'] / seconds['none']:.3f}")
    print("format  files  with headings  chunks  with context")
    for fmt, (n, with_headings, chunks, ctx) in sorted(per_format.items()):
        if with_headings:
            print(f"{fmt:7} {n:5}  {with_headings:13}  {chunks:6}  {ctx:6}"
                  f" ({ctx / max(chunks, 1):.0%})")
    total = [sum(v[i] for v in per_format.values()) for i in range(4)]
    print(f"all     {total[0]:5}  {total[1]:13}  {total[2]:6}  {total[3]:6}"
          f" ({total[3] / max(total[2], 1):.0%})")
    print(f"files whose chunks differ between the two ways: {different or 'none'}")


if __name__ == "__main__":
    main()
