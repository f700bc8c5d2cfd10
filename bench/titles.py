"""Titles of the shared documents (issue 43): how many get a title people would recognise,
before (kreuzberg's metadata title as it is) and after (``parts/titles.py``).

    .venv/bin/python bench/titles.py [--list]

A title counts as sensible when it is not a file name or a template's placeholder
(``real_title``); the file name itself is the last fallback, counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from pathlib import Path

from surrealdocs import Settings
from surrealdocs.parts.extract import Extracted, extract_file
from surrealdocs.parts.titles import clean, file_name, real_title

DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "documents"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="every file with both titles")
    args = parser.parse_args()
    settings = Settings(db="mem://")
    files = sorted(p for p in DOCS.rglob("*") if p.is_file() and p.parent != DOCS)
    before, after, kinds = 0, 0, Counter()
    extracted = 0
    for path in files:
        outcome = await extract_file(path, settings, source=str(path))
        if not isinstance(outcome, Extracted):
            continue
        extracted += 1
        raw = clean((outcome.metadata or {}).get("title"))
        title = outcome.title
        before += real_title(raw, str(path)) is not None
        kind = "none" if title is None else "file name" if title == file_name(str(path)) \
            else "sensible"
        after += kind == "sensible"
        kinds[kind] += 1
        if args.list:
            print(f"{path.relative_to(DOCS)}\t{raw!r}\t{title!r}")
        print(f"\r{extracted} extracted", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"{extracted} files extracted: a sensible title before {before}"
          f" ({before / extracted:.0%}), after {after} ({after / extracted:.0%});"
          f" after, by kind: {dict(kinds)}")


if __name__ == "__main__":
    asyncio.run(main())
