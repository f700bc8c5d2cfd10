"""Export and import of a whole store (issue 41): seconds, chunks a second and peak RSS of
`surrealdocs export` and `surrealdocs import`, each a fresh process timed end to end, and
the ratio against ingesting the same store again.

    .venv/bin/python bench/archive_speed.py --db STORE --ingest-seconds 727
    .venv/bin/python bench/archive_speed.py --synth 300000     # a made-up store, for RSS

STORE holds a dataset ingested with the default model (``surrealdocs eval DEV --db STORE``
prints its ingest seconds: pass them as --ingest-seconds, the baseline). ``--synth N``
writes an archive of N chunks (three per document, random 384-dimensional vectors, text of
SciFact's size), imports it, exports the imported store, and reports the same figures:
memory must stay bounded whatever the size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "surrealdocs"]
WORDS = ("cell protein gene expression tumour patient trial dose receptor pathway immune "
         "response mutation signal binding clinical cohort risk factor level increase "
         "decrease associated significant effect model mouse human tissue").split()


def timed(command: list[str]) -> tuple[float, int, str]:
    """Seconds, peak RSS (MB) and stdout of one command in a fresh process."""
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}
                          ) as proc:
        _, _, usage = os.wait4(proc.pid, 0)
        out = proc.stdout.read().decode() if proc.stdout else ""
        err = proc.stderr.read().decode() if proc.stderr else ""
        proc.returncode = 0  # reaped by wait4
    seconds = time.perf_counter() - start
    if "error" in err.lower() and "exported" not in err and "imported" not in out:
        raise SystemExit(f"{' '.join(command)} failed:\n{err}")
    return seconds, usage.ru_maxrss // 1024, out + err


def synth_archive(path: Path, chunks: int) -> None:
    """An archive of ``chunks`` chunks written with the archive writer itself."""
    import numpy as np
    from surrealdb import RecordID

    from surrealdocs.parts.archive import ArchiveWriter, VectorRef
    from surrealdocs.store.migrations import SCHEMA_VERSION

    rng = np.random.default_rng(0)
    words = random.Random(0)
    header = {"created": "2026-12-07T00:00:00+00:00", "surrealdocs": "bench",
              "schema": SCHEMA_VERSION,
              "layout": {"analyzer_language": "english", "vectors": True},
              "model": {"name": "synthetic-384", "dimension": 384, "distance": "COSINE",
                        "provenance": {}}}
    writer = ArchiveWriter(header, lambda table: table)
    per_doc, page = 3, 600
    from datetime import datetime, timezone
    now = datetime.now(timezone.utc)
    for start in range(0, chunks // per_doc, page):
        docs, rows = [], []
        for d in range(start, min(start + page, chunks // per_doc)):
            doc = RecordID("documents", f"d{d:08d}")
            texts = [" ".join(words.choice(WORDS) for _ in range(120)) for _ in range(per_doc)]
            content = "\n\n".join(texts)
            docs.append({"id": doc, "source": f"synth://{d}", "sources": [f"synth://{d}"],
                         "content": content, "mime_type": "text/plain",
                         "content_hash": f"{d:064x}", "title": f"Document {d}",
                         "chunk_count": per_doc, "complete": True, "generation": 0,
                         "topics": [], "notebooks": [], "ingested_at": now,
                         "updated_at": now, "embedding_model": "synthetic-384"})
            offset = 0
            for i, text in enumerate(texts):
                rows.append({"id": RecordID("chunks", f"d{d:08d}_{i}"), "document": doc,
                             "content": text, "chunk_index": i, "char_start": offset,
                             "char_end": offset + len(text), "word_count": 120,
                             "generation": 0, "notebooks": []})
                offset += len(text) + 2
        vectors = rng.standard_normal((len(rows), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        first = writer.vectors("chunks", 384, vectors.astype(np.float64).tolist())
        for n, row in enumerate(rows):
            row["embedding"] = VectorRef(first + n)
        writer.rows("documents", docs)
        writer.rows("chunks", rows)
    try:
        with path.open("wb") as out:
            writer.write_to(out)
    finally:
        writer.discard()


def run(db: str, archive: Path, target: Path, chunks: int, ingest: float | None) -> dict:
    row: dict = {"chunks": chunks}
    if db:
        seconds, rss, _ = timed([*CLI, "export", str(archive), "--db", db])
        row.update(export_s=round(seconds, 2), export_rss_mb=rss,
                   export_chunks_per_s=round(chunks / seconds))
    seconds, rss, _ = timed([*CLI, "import", str(archive), "--db", str(target)])
    row.update(import_s=round(seconds, 2), import_rss_mb=rss,
               import_chunks_per_s=round(chunks / seconds),
               archive_mb=round(archive.stat().st_size / 1e6, 1))
    if not db:  # a synthetic store: export what was imported
        again = archive.with_name("again.tar")
        seconds, rss, _ = timed([*CLI, "export", str(again), "--db", str(target)])
        row.update(export_s=round(seconds, 2), export_rss_mb=rss,
                   export_chunks_per_s=round(chunks / seconds))
    if ingest:
        row["ingest_s"] = ingest
        row["ratio"] = round(ingest / (row["export_s"] + row["import_s"]), 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a store to export and import again")
    parser.add_argument("--chunks", type=int, help="the store's chunks (read from it if unset)")
    parser.add_argument("--ingest-seconds", type=float, help="the store's ingest time")
    parser.add_argument("--synth", type=int, help="a made-up store of this many chunks")
    parser.add_argument("--workdir", default="/tmp/archive-speed")
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    archive, target = work / "kb.tar", work / "imported"
    if args.synth:
        synth_archive(archive, args.synth)
        print(json.dumps(run("", archive, target, args.synth // 3 * 3, None)))
        return
    if not args.db:
        parser.error("--db or --synth")
    chunks = args.chunks
    if chunks is None:
        _, _, out = timed([*CLI, "stats", "--db", args.db, "--json"])
        chunks = int(json.loads(out[out.index("{"):])["chunks"])
    print(json.dumps(run(args.db, archive, target, chunks, args.ingest_seconds)))


if __name__ == "__main__":
    main()
