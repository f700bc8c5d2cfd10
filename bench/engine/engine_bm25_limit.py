"""A minimal reproduction of the engine's BM25 cost: it grows with the rows that match any
query term, however few results are asked for.

    python bench/engine_bm25_limit.py [--rows 5000 10000 20000 40000] [--runs 15]

One table of short texts (no vectors, nothing but a full-text index with the analyzer
surrealdocs uses) in an embedded in-memory SurrealDB. Every row holds the word ``common``;
one row in a thousand also holds ``rare``. For each table size it times (wall clock, p50 of
``--runs`` runs) the top 10 by BM25 of:

    SELECT id, search::score(1) AS score FROM t WHERE content @1,OR@ $q
        ORDER BY score DESC LIMIT 10

for ``$q = "rare"`` (few rows match) and ``$q = "common"`` (every row matches), and the
same ``common`` query without scores or order (``SELECT id … LIMIT 10``). Only plain
SurrealQL is used, so the figures stand for any client of the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from typing import Any

from surrealdb import AsyncSurreal

WORDS = [f"w{i}" for i in range(5000)]


def text(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(30)] + ["common"]
    if n % 1000 == 0:
        words.append("rare")
    rng.shuffle(words)
    return " ".join(words)


async def timed(db: Any, sql: str, params: dict[str, Any], runs: int) -> float:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await db.query(sql, params)
        walls.append((time.perf_counter() - t0) * 1000)
    return statistics.median(walls)


async def one_size(rows: int, runs: int) -> list[dict[str, Any]]:
    db = AsyncSurreal("mem://")
    await db.connect()
    await db.use("bench", "bench")
    await db.query(
        "DEFINE ANALYZER a TOKENIZERS blank,class FILTERS lowercase,ascii,snowball(english);"
        "DEFINE TABLE t SCHEMAFULL; DEFINE FIELD content ON t TYPE string;"
        "DEFINE INDEX ft ON t FIELDS content FULLTEXT ANALYZER a BM25(0.9,0.4);")
    rng = random.Random(rows)
    batch = 500
    for start in range(0, rows, batch):
        await db.query("INSERT INTO t $rows RETURN NONE",
                       {"rows": [{"content": text(rng, n)}
                                 for n in range(start, min(rows, start + batch))]})
    scored = ("SELECT id, search::score(1) AS score FROM t WHERE content @1,OR@ $q"
              " ORDER BY score DESC LIMIT 10")
    unscored = "SELECT id FROM t WHERE content @1,OR@ $q LIMIT 10"
    out = []
    for label, sql, q in (("rare, scored", scored, "rare"), ("common, scored", scored, "common"),
                          ("common, ids only", unscored, "common")):
        await timed(db, sql, {"q": q}, 2)  # warm
        wall = await timed(db, sql, {"q": q}, runs)
        matching = rows if q == "common" else rows // 1000
        out.append({"rows": rows, "query": label, "matching_rows": matching,
                    "p50_ms": round(wall, 1),
                    "us_per_matching_row": round(1000 * wall / max(matching, 1), 2)})
        print(out[-1], flush=True)
    await db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5000, 10000, 20000, 40000])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    results = []
    for rows in args.rows:
        results += asyncio.run(one_size(rows, args.runs))
    print("\n| rows | query | matching rows | p50 ms | µs per matching row |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['rows']:,} | {r['query']} | {r['matching_rows']:,} | {r['p50_ms']} |"
              f" {r['us_per_matching_row']} |")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
