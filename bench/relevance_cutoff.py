"""The default cut-off (``Settings.relevance_sigmas``) on a store of the user's own files:
how many of the top hits each setting keeps, for questions about the files and for
off-topic ones.

    .venv/bin/surrealdocs ingest FOLDER --db STORE
    .venv/bin/python bench/relevance_cutoff.py --db STORE --about "question one" "question two"

A hit is kept when the BM25 leg found it, or when its vector similarity is at least the
query's mean similarity to the store's chunks plus SIGMAS standard deviations (the rule of
``core/search.py``); the search itself runs once per question with the cut-off off.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from surrealdocs import KnowledgeBase, Settings

OFF_TOPIC = [
    "recipe for chocolate cake", "how do I renew my passport", "stock price of apple today",
    "best hiking trails in the alps", "guitar chord progressions for beginners",
    "who won the oscars", "asdkjh qwe zxcv", "symptoms of the flu",
]
SIGMAS = (0.0, 1.5, 2.0, 2.5, 3.0)


async def kept(kb: KnowledgeBase, question: str, limit: int) -> dict[float, int]:
    vector = await kb.embedding.query(question)
    distances = await kb.storage.chunks.legs.background(vector)
    if distances is None:
        raise SystemExit("this store cannot say (engine text index, or no vectors)")
    similarity = np.maximum(0.0, 1.0 - distances)
    mean, spread = float(similarity.mean()), float(similarity.std())
    hits = await kb.search(question, mode="hybrid", limit=limit)
    return {z: sum(1 for h in hits if h.text_rank is not None
                   or (h.vector_score or 0.0) >= mean + z * spread) if z else len(hits)
            for z in SIGMAS}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--about", nargs="+", required=True,
                        help="questions about what the store holds")
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    settings = Settings.from_env(db=args.db, relevance_sigmas=0)
    async with await KnowledgeBase.open(settings=settings) as kb:
        for label, questions in (("about the files", args.about), ("off-topic", OFF_TOPIC)):
            totals = dict.fromkeys(SIGMAS, 0)
            for question in questions:
                counts = await kept(kb, question, args.limit)
                for z in SIGMAS:
                    totals[z] += counts[z]
                print(f"{label:15} {question[:40]:40}",
                      " ".join(f"{z:g}:{counts[z]}" for z in SIGMAS))
            print(f"{label:15} {'total':40}",
                  " ".join(f"{z:g}:{totals[z]}" for z in SIGMAS), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
