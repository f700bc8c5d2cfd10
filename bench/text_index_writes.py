"""Write amplification of the text index: a store fed one small document at a time.

    python bench/text_index_writes.py [--documents 3000] [--db mem://]

Ingests SciFact abstracts (or generated text without ../shared/data) one per call, as a
server does for single uploads, with no vectors, then reports: segments written by the
writes and by merges, the merges, the bytes of maps and postings written in all, the bytes
the live index holds at the end, their ratio (the write amplification), the live segments
left, and the ingest seconds per 1,000 chunks over the first and the last tenth of the
documents (does the cost grow with the store?).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.store.segments.postings import bytes_of

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact" / "corpus.jsonl"


def texts(n: int) -> list[str]:
    if SCIFACT.exists():
        out = []
        with SCIFACT.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                out.append(f"{row.get('title', '')}\n\n{row.get('text', '')}")
                if len(out) >= n:
                    break
        return out
    rng = random.Random(5)
    words = [f"word{i}" for i in range(5000)]
    return [" ".join(rng.choice(words) for _ in range(200)) for _ in range(n)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--db", default="mem://")
    args = parser.parse_args()
    docs = texts(args.documents)
    tenth = max(1, len(docs) // 10)
    settings = Settings.from_env(db=args.db, embed=False)
    async with await KnowledgeBase.open(settings=settings) as kb:
        text = kb.storage.chunks.text
        assert text is not None, "run with the text index (SURREALDOCS_TEXT_INDEX=segments)"
        spans: list[tuple[int, float]] = []
        for i, body in enumerate(docs):
            t0 = time.perf_counter()
            report = await kb.ingest_texts({f"doc{i}": body})
            spans.append((report.chunks_written, time.perf_counter() - t0))
        await text.stop()  # the running merge ends
        text.maintenance._stopping = False
        while await text.merge_once():  # and what is due is merged, as the next write would
            pass
        stats = await text.stats()
        maps, blocks = await kb.store.query(
            f"SELECT * FROM {text.map_table}; SELECT * FROM {text.block_table};")
        live_bytes = sum(bytes_of({k: v for k, v in r.items() if k != "id"})
                         for r in [*maps, *blocks])

        def cost(part: list[tuple[int, float]]) -> float:
            chunks = sum(c for c, _ in part)
            return round(sum(s for _, s in part) / max(chunks, 1) * 1000, 2)

        print(json.dumps({
            "documents": len(docs), "chunks": stats["chunks"],
            "segments_written": text.written["segments"], "merges": text.written["merges"],
            "records_written": text.written["records"],
            "bytes_written": text.written["bytes"], "live_bytes_approx": live_bytes,
            "write_amplification": round(text.written["bytes"] / max(live_bytes, 1), 2),
            "live_segments": stats["segments"], "levels": stats["levels"],
            "ingest_s_per_1k_chunks_first_tenth": cost(spans[:tenth]),
            "ingest_s_per_1k_chunks_last_tenth": cost(spans[-tenth:]),
        }, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
