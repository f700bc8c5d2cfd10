"""Sync on a real corpus: first ingest, unchanged re-sync, and re-sync after a one-paragraph
edit of the largest book, against re-ingesting that book the way ingest did before chunk
reuse (every chunk embedded and written again).

    python bench/sync.py [CORPUS_DIR] [--model all-minilm-l6-v2]
                         [--book txt/book-war-and-peace-1225p.txt]

The corpus is copied to a temporary folder (it is read-only and stays untouched), its files
dated a day back (a file written in the last seconds is hashed instead of trusted by its
modification time, as for any real folder synced long after it was written). Steps, on one
embedded file store:

1. ``kb.sync(folder)`` on the empty store: the first ingest (the ingest pipeline).
2. ``kb.sync(folder)`` again, nothing changed; and the same as the CLI,
   ``surrealdocs sync FOLDER`` in a new process (model load and store open included).
3. One paragraph in the middle of the book gets a sentence more; ``kb.sync(folder)``.
4. Another paragraph gets a sentence more; the book is ingested with chunk reuse off
   (``kb.ingest([book])``): every chunk embedded and inserted again, the old version's
   chunks deleted, the HNSW graph rebuilt once more than 2,000 new vectors wait. That is
   what a changed file cost before sync.

Prints and writes bench/results/sync.json. Timings on a shared machine move with its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from surrealdocs import KnowledgeBase, Settings, SyncReport

# beside the repository (../shared), or beside the worktrees' folder (../../shared)
DEFAULT_CORPUS = next((p / "shared" / "data" / "documents"
                       for p in Path(__file__).resolve().parents[1:4]
                       if (p / "shared" / "data" / "documents").is_dir()),
                      Path("../shared/data/documents"))
DEFAULT_BOOK = "txt/book-war-and-peace-1225p.txt"
DAY = 86_400


def copy_corpus(corpus: Path, into: Path) -> None:
    shutil.copytree(corpus, into, copy_function=shutil.copyfile)  # writable copies
    then = time.time() - DAY
    for path in into.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def edit_paragraph(book: Path, where: float, sentence: str) -> None:
    """Add a sentence to the paragraph at ``where`` (0..1) through the book."""
    text = book.read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    k = int(len(paragraphs) * where)
    while not paragraphs[k].strip():
        k += 1
    paragraphs[k] = paragraphs[k].rstrip() + " " + sentence
    book.write_text("\n\n".join(paragraphs), encoding="utf-8")
    then = time.time() - 60  # an edit a minute ago
    os.utime(book, (then, then))


def summary(report: SyncReport, seconds: float) -> dict[str, Any]:
    return {"seconds": round(seconds, 3), "counts": {k: v for k, v in report.counts.items() if v},
            "chunks_written": report.chunks_written,
            "chunks_embedded": report.chunks_embedded, "index_rebuilt": report.index_rebuilt}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--book", default=DEFAULT_BOOK, help="the file to edit (relative)")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "sync.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sync-bench-") as tmp:
        folder = Path(tmp) / "documents"
        copy_corpus(args.corpus, folder)
        book = folder / args.book
        db = str(Path(tmp) / "kb")
        settings = Settings(db=db, model=args.model)
        result: dict[str, Any] = {"corpus": str(args.corpus), "model": args.model,
                                  "book": args.book, "cores": os.cpu_count(),
                                  "load_before": os.getloadavg()}
        async with await KnowledgeBase.open(settings=settings) as kb:
            t0 = time.perf_counter()
            first = await kb.sync([folder])
            result["first_ingest"] = summary(first, time.perf_counter() - t0)
            result["first_ingest"]["files"] = len(first.plan)
            print("first ingest", json.dumps(result["first_ingest"]), flush=True)

            t0 = time.perf_counter()
            unchanged = await kb.sync([folder])
            result["unchanged_resync"] = summary(unchanged, time.perf_counter() - t0)
            print("unchanged re-sync", json.dumps(result["unchanged_resync"]), flush=True)
        # the same from the command line, in a new process (model load, store open)
        cli = Path(sys.executable).with_name("surrealdocs")
        t0 = time.perf_counter()
        proc = subprocess.run([str(cli), "sync", str(folder), "--db", db, "--model",
                               args.model, "--json"], capture_output=True, text=True,
                              check=False)
        cli_seconds = time.perf_counter() - t0
        assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: the corpus's broken files
        cli_report = json.loads(proc.stdout)
        assert cli_report["planned"]["unchanged"] == len(first.plan), cli_report["planned"]
        result["unchanged_resync_cli"] = {"seconds": round(cli_seconds, 3),
                                          "counts": {k: v for k, v in
                                                     cli_report["counts"].items() if v}}
        print("unchanged re-sync (CLI)", json.dumps(result["unchanged_resync_cli"]), flush=True)

        async with await KnowledgeBase.open(settings=settings) as kb:
            (chunks,) = await kb.store.query(
                "SELECT VALUE chunk_count FROM documents WHERE source = $s;",
                {"s": str(book.resolve())})
            result["book_chunks"] = chunks[0] if chunks else None
            edit_paragraph(book, 0.5, "An editor added this sentence to the story.")
            t0 = time.perf_counter()
            edited = await kb.sync([folder])
            result["edit_resync"] = summary(edited, time.perf_counter() - t0)
            print("edit re-sync", json.dumps(result["edit_resync"]), flush=True)

            edit_paragraph(book, 0.33, "Another editor added this sentence as well.")
            # the ingest path without reuse: a store that holds none of the book's text
            # embeds and writes every chunk
            async with await KnowledgeBase.open(settings=settings.replace(db="mem://")) as empty:
                t0 = time.perf_counter()
                baseline = await empty.ingest([book])
                seconds = time.perf_counter() - t0
            result["reingest_book_before"] = {
                "seconds": round(seconds, 3),
                "counts": {k: v for k, v in baseline.counts.items() if v},
                "chunks_written": baseline.chunks_written,
                "chunks_embedded": baseline.chunks_embedded,
                "index_rebuilt": baseline.index_rebuilt}
            print("re-ingest of the book, before", json.dumps(result["reingest_book_before"]),
                  flush=True)
            stats = await kb.stats()
            result["store"] = {"documents": stats.documents, "chunks": stats.chunks}
        first_s = result["first_ingest"]["seconds"]
        result["ratios"] = {
            "first_ingest_over_unchanged_resync": round(
                first_s / result["unchanged_resync"]["seconds"], 1),
            "first_ingest_over_unchanged_resync_cli": round(first_s / cli_seconds, 1),
            "reingest_before_over_edit_resync": round(
                seconds / result["edit_resync"]["seconds"], 1),
        }
        result["load_after"] = os.getloadavg()
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    sys.stdout.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    asyncio.run(main())
