"""The memory of a process that only searches a store grown by ``bench/scale.py``.

    python bench/search_memory.py --workdir DIR [--queries 50] [--vectors minilm-sentences]

Opens ``DIR/store`` (as ``scale.py`` left it), runs the SciFact test claims in each mode
(top 10, one hit per document; the first five of each mode untimed), and prints p50/p95 per
mode, the process's peak RSS (``ru_maxrss``), and what the text index holds in memory: its
decoded-segment cache, and the vectors it scans. With ``--vectors minilm-sentences`` the
proxy model of ``scale.py`` is registered first (the store is bound to it); its table of
sentence vectors is part of the peak.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
from pathlib import Path

from common import PROXY, SentenceMeanEmbedder, corpus, queries, time_modes


async def main() -> None:
    from surrealdocs import KnowledgeBase, Settings
    from surrealdocs.embed import register

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--vectors", choices=["hashing", PROXY], default=PROXY)
    args = parser.parse_args()
    model = "hashing-384"
    if args.vectors == PROXY:
        _, sentences = corpus()
        proxy = SentenceMeanEmbedder(sentences, args.workdir)
        register(PROXY, lambda name: proxy)
        model = PROXY
    qs = queries(args.queries)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out: dict[str, object] = {"rss_before_open_mb": round(before)}
    settings = Settings.from_env(db=str(args.workdir / "store"), model=model)
    async with await KnowledgeBase.open(settings=settings) as kb:
        text = kb.storage.chunks.text
        # the text index's count (its segment headers): kb.stats() reads every row of the
        # documents and chunks tables, which the engine would then keep in its cache
        out["chunks"] = (await text.stats())["chunks"] if text else (await kb.stats()).chunks
        out.update(await time_modes(kb, qs))
        if text is not None:
            out["segment_cache_mb"] = round(text.reader.cache.used / 2**20)
            out["scanned_vectors_mb"] = round(
                sum(v.size for v in text.vectors.sets.values()) / 2**20)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
