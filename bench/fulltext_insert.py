"""The engine's cost of writing chunk rows into a table with a full-text index, by rows per
INSERT statement and by statements in flight at once.

    python bench/fulltext_insert.py [--rows 100 25 10] [--streams 1 2 3] [--db mem://]
        [--file ../shared/data/documents/txt/book-war-and-peace-1225p.txt] [--no-index]

Bare SurrealQL (``INSERT INTO chunks $rows``) into the schema of the kreuzberg-surrealdb
facade, on a fresh engine per combination, with 800-character windows of a long text (every
700 characters, at most 5,000). After loading, three BM25 queries print their top scores, so
that sequential and concurrent loading can be checked to index the same.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from surrealdb import AsyncSurreal, RecordID

import surrealdocs.kreuzberg_surrealdb as facade
from common import insert_rows

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT.parent / "shared" / "data" / "documents" / "txt" / "book-war-and-peace-1225p.txt"
QUERIES = ["prince andrew natasha", "war of 1812 napoleon moscow", "the old count rostov dinner"]


async def load(url: str, texts: list[str], rows_per_insert: int, streams: int,
               index: bool) -> tuple[float, list[list[float]]]:
    db: Any = AsyncSurreal(url)
    await db.connect()
    await db.use("bench", "bench")
    await facade.DocumentPipeline(db=db, embed=False).setup_schema()
    if not index:
        await db.query("REMOVE INDEX chunks_content_ft ON chunks;")
    await db.query("CREATE documents:book SET content = 'x', content_hash = 'h',"
                   " mime_type = 'text/plain', sources = ['book'];")
    rows = [{"id": RecordID("chunks", i), "document": RecordID("documents", "book"),
             "content": text, "chunk_index": i, "char_start": 0, "char_end": len(text),
             "word_count": len(text.split())} for i, text in enumerate(texts)]
    started = time.perf_counter()
    await insert_rows(db, rows, rows_per_insert, streams)
    seconds = time.perf_counter() - started
    scores: list[list[float]] = []
    if index:
        for query in QUERIES:
            found = await db.query("SELECT search::score(1) AS s FROM chunks WHERE content"
                                   " @1,OR@ $q ORDER BY s DESC LIMIT 3;", {"q": query})
            if found and isinstance(found[0], list):  # one list per statement
                found = found[-1]
            scores.append([round(r["s"], 5) for r in found])
    await db.close()
    return seconds, scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100, 25, 10])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--db", default="mem://", help="mem:// or surrealkv:// (a fresh"
                        " temporary store per combination)")
    parser.add_argument("--file", type=Path, default=BOOK)
    parser.add_argument("--no-index", action="store_true", help="without the full-text index")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    text = args.file.read_text(encoding="utf-8")
    texts = [text[i:i + 800] for i in range(0, len(text), 700)][:5000]
    if args.one:  # one combination, in a process of its own (a fresh engine)
        tmp = Path(tempfile.mkdtemp(prefix="ftinsert-"))
        url = args.db if args.db.startswith("mem") else f"surrealkv://{tmp}/db"
        seconds, scores = asyncio.run(load(url, texts, args.rows[0], args.streams[0],
                                           not args.no_index))
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"{args.rows[0]:>11}  {args.streams[0]:>7}  {seconds:7.2f}  {scores}", flush=True)
        os._exit(0)  # the embedded engine can abort while the interpreter tears down
    print(f"{len(texts)} chunks of {args.file.name}, {args.db}", flush=True)
    print("rows/INSERT  streams  seconds  top BM25 scores", flush=True)
    for rows in args.rows:
        for streams in args.streams:
            subprocess.run([sys.executable, __file__, "--one", "--rows", str(rows),
                            "--streams", str(streams), "--db", args.db, "--file",
                            str(args.file), *(["--no-index"] if args.no_index else [])],
                           check=True)


if __name__ == "__main__":
    main()
