"""Whether two versions of the code search alike: every mode, with and without the cut-off,
and per document, for the first queries of a BEIR dataset on a store holding it. Writes each
hit's chunk, score, similarity and coverage to a JSON file; ``--compare A B`` counts the
lists that differ. Run it with each version on the same store (an older checkout's ``src``
first on ``PYTHONPATH``)::

    PYTHONPATH=/tmp/old/src .venv/bin/python bench/search_identity.py --db STORE \\
        --dataset DEV --out /tmp/old.json
    .venv/bin/python bench/search_identity.py --db STORE --dataset DEV --out /tmp/new.json
    .venv/bin/python bench/search_identity.py --compare /tmp/old.json /tmp/new.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any


async def dump(db: str, dataset: Path, queries: int, out: Path) -> None:
    from surrealdocs import KnowledgeBase

    texts = [json.loads(line)["text"] for line in
             (dataset / "queries.jsonl").read_text().splitlines()[:queries]]
    lists: list[Any] = []
    async with await KnowledgeBase.open(db, create=False) as kb:
        for text in texts:
            for mode in ("text", "vector", "hybrid"):
                for cutoff in (True, False):
                    hits = await kb.search(text, mode=mode, limit=10, cutoff=cutoff)
                    lists.append([text, mode, cutoff, [
                        (h.chunk_id, round(h.score, 6), round(h.similarity or 0.0, 6),
                         h.coverage) for h in hits]])
            hits = await kb.search(text, limit=10, per_document=True, cutoff=False)
            lists.append([text, "hybrid per document", False,
                          [(h.chunk_id, round(h.score, 6)) for h in hits]])
    out.write_text(json.dumps(lists))
    print(f"{len(lists)} result lists written to {out}")


def compare(a: Path, b: Path) -> None:
    left, right = json.loads(a.read_text()), json.loads(b.read_text())
    differ = [x for x, y in zip(left, right) if x != y]
    print(f"{len(left)} result lists, {len(differ)} differ"
          + ("" if len(left) == len(right) else f" (and {abs(len(left) - len(right))} more"
             " lists in one file)"))
    for x in differ[:3]:
        print("  first differing:", x[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path)
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
    else:
        if not (args.db and args.dataset and args.out):
            parser.error("--db, --dataset and --out (or --compare A B)")
        asyncio.run(dump(args.db, args.dataset, args.queries, args.out))


if __name__ == "__main__":
    main()
