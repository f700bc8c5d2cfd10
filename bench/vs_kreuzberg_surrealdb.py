"""Ingest side by side: kreuzberg-surrealdb 0.2.0 against surrealdocs (facade and CLI).

    python bench/vs_kreuzberg_surrealdb.py --original-python /path/to/venv/bin/python \\
        [--corpus ../shared/data/documents] [--out bench/results/vs_kzs.json]

The original is installed only in the benchmark's own environment, never as a dependency:

    python3 -m venv /tmp/kzs && /tmp/kzs/bin/pip install kreuzberg-surrealdb==0.2.0 \\
        surrealdb==3.0.0b10 surrealdb-embedded==3.0.0b10   # the same engine as ours

Four legs, one after the other in one run, each in its own process on `mem://` with the
same engine (SurrealDB 3.2.4 embedded), BM25 only (no embeddings), over the same files:

- ``original``: kreuzberg-surrealdb's ``DocumentPipeline(embed=False)``: ``setup_schema()``,
  then ``ingest_file`` per file, then every file again.
- ``facade``: the same script on ``surrealdocs.kreuzberg_surrealdb`` (one import changed).
- ``library``: surrealdocs' own API, ``KnowledgeBase.ingest([file])`` per file on
  ``mem://`` with ``embed=False``: the same per-file loop, with the store's own text index
  (the facade keeps the engine's FULLTEXT index, since its users write ``@@`` queries).
- ``cli``: ``surrealdocs ingest DIR`` twice with ``SURREALDOCS_EMBED=false`` on a file store
  (the CLI's path: discovery, concurrency, a progress bar).

With ``--batch-from RESULTS.json`` (a run of the legs above) it times instead one call for
all the files both read, as a user ingests a folder: the original's ``ingest_files`` (a
loop, one file after the other) against ``KnowledgeBase.ingest`` (extraction of the next
files while the last are written), each in its own process, alternated ``--rounds`` times.

Per file it records the outcome, seconds and chunks stored (counted after the timing), so
the first pass is compared on the files from which the original got text. The files it
got no text from (scanned PDFs, which surrealdocs OCRs), and those only surrealdocs reads,
are reported apart. Peak RSS of each process is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "documents"


def corpus_files(corpus: Path) -> list[Path]:
    own = ("README", "MANIFEST", "RESULTS")  # the corpus's description of itself
    return sorted(p for p in corpus.rglob("*") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(corpus).parts)
                  and not (p.parent == corpus and p.name.upper().startswith(own)))


async def count_rows(db: Any, table: str) -> int:
    rows = await db.query(f"SELECT count() AS n FROM {table} GROUP ALL;")
    stored = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], list) else rows
    return int(stored[0]["n"]) if stored else 0


async def open_pipeline(module: str) -> tuple[Any, Any]:
    """The store's client and a pipeline with ``ingest_file(path)`` and
    ``ingest_files(paths)`` (returning the sources that failed): the kreuzberg-surrealdb API
    from ``module``, or surrealdocs' own (``module`` "surrealdocs")."""
    if module == "surrealdocs":
        from surrealdocs import KnowledgeBase, Settings

        kb = await KnowledgeBase.open(settings=Settings.from_env(db="mem://", embed=False))

        class Native:
            async def ingest_file(self, path: Path) -> None:
                failed = await self.ingest_files([path])
                if failed:
                    raise RuntimeError(failed[0])

            async def ingest_files(self, paths: list[Path]) -> list[str]:
                report = await kb.ingest(paths)
                return [f"{r.source}: {r.reason}" for r in report.results
                        if r.status == "failed"]

        return kb.store.client, Native()
    from surrealdb import AsyncSurreal

    api = __import__(module, fromlist=["DocumentPipeline"])
    db = AsyncSurreal("mem://")
    await db.connect()
    await db.use("bench", "bench")
    pipeline = api.DocumentPipeline(db=db, embed=False)
    await pipeline.setup_schema()
    return db, pipeline


async def run_pipeline(module: str, files: list[Path]) -> dict[str, Any]:
    """One leg in this process (see :func:`open_pipeline`), a file at a time, twice."""
    db, pipeline = await open_pipeline(module)
    passes: list[dict[str, Any]] = []
    for _ in range(2):
        per_file: dict[str, Any] = {}
        stored_before = await count_rows(db, "chunks")
        counting = 0.0
        started = time.perf_counter()
        for path in files:
            t0 = time.perf_counter()
            try:
                await pipeline.ingest_file(path)
                outcome = "ok"
            except Exception as exc:  # the original raises for any bad file
                outcome = f"error: {type(exc).__name__}: {str(exc)[:120]}"
            seconds = time.perf_counter() - t0
            chunks = await count_rows(db, "chunks")  # after the timing: what it stored
            counting += time.perf_counter() - t0 - seconds
            per_file[str(path)] = {"seconds": seconds, "outcome": outcome,
                                   "chunks": chunks - stored_before}
            stored_before = chunks
        passes.append({"seconds": time.perf_counter() - started - counting,
                       "files": per_file})
    return {"passes": passes, "documents": await count_rows(db, "documents")}


async def run_batch(module: str, files: list[Path]) -> dict[str, Any]:
    """One call for all ``files``, as a user ingests a folder: the original's (and the
    facade's) ``ingest_files``, surrealdocs' ``KnowledgeBase.ingest``."""
    db, pipeline = await open_pipeline(module)
    started = time.perf_counter()
    failed = await pipeline.ingest_files(files)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "failed": failed or [],
            "chunks": await count_rows(db, "chunks"),
            "documents": await count_rows(db, "documents")}


def both_read(results: dict[str, Any]) -> list[str]:
    """The files from which the original and surrealdocs' library both got text."""
    first_o = results["original"]["passes"][0]["files"]
    first_l = results["library"]["passes"][0]["files"]
    return [f for f in first_o if first_o[f]["outcome"] == "ok" and first_o[f]["chunks"] > 0
            and first_l.get(f, {}).get("outcome") == "ok"]


def run_cli(files_dir: Path, surrealdocs: str) -> dict[str, Any]:
    store = Path(tempfile.mkdtemp(prefix="kzs-cli-")) / "kb"
    env = {**os.environ, "SURREALDOCS_EMBED": "false"}
    passes = []
    for _ in range(2):
        started = time.perf_counter()
        proc = subprocess.run([surrealdocs, "ingest", str(files_dir), "--db", str(store),
                               "--json"], capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - started
        report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
        passes.append({"seconds": seconds, "counts": report.get("counts"),
                       "exit": proc.returncode})
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"passes": passes, "peak_rss_mb": peak}


def leg_main(args: argparse.Namespace) -> None:
    files = [Path(line) for line in Path(args.files).read_text().splitlines() if line]
    run = run_batch if args.batch else run_pipeline
    result = asyncio.run(run(args.module, files))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.leg_out).write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


def run_leg(python: str, module: str, files_list: Path,
            batch: bool = False) -> dict[str, Any]:
    out = Path(tempfile.mkstemp(suffix=".json")[1])
    subprocess.run([python, __file__, "--leg", "--module", module, "--files", str(files_list),
                    "--leg-out", str(out), *(["--batch"] if batch else [])], check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def summary(original: dict[str, Any], facade: dict[str, Any]) -> dict[str, Any]:
    first_o, first_f = original["passes"][0]["files"], facade["passes"][0]["files"]
    both = [f for f in first_o if first_o[f]["outcome"] == "ok" and first_f[f]["outcome"] == "ok"]
    # read by both, but the original stored no chunks: no text (scanned PDFs and images,
    # which surrealdocs OCRs) or a duplicate of a file already stored
    ocr = [f for f in both if first_o[f].get("chunks") == 0]
    text = [f for f in both if f not in ocr]
    ours_only = [f for f in first_o if first_o[f]["outcome"] != "ok"
                 and first_f[f]["outcome"] == "ok"]

    def total(files: dict[str, Any], names: list[str]) -> float:
        return sum(files[n]["seconds"] for n in names)

    return {
        "files": len(first_o),
        "read_by_both": len(both),
        "text_by_both": len(text),
        "no_new_chunks_by_the_original": len(ocr),
        "of_which_surrealdocs_got_text": sum(first_f[f].get("chunks", 0) > 0 for f in ocr),
        "read_by_surrealdocs_only": len(ours_only),
        "first_pass_text_by_both_seconds": {"original": round(total(first_o, text), 2),
                                            "facade": round(total(first_f, text), 2)},
        "first_pass_ocr_seconds": {"original": round(total(first_o, ocr), 2),
                                   "facade": round(total(first_f, ocr), 2)},
        "first_pass_surrealdocs_only_seconds": round(total(first_f, ours_only), 2),
        "speedup_first_pass_text_by_both": round(
            total(first_o, text) / max(total(first_f, text), 1e-9), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leg", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--module", help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    parser.add_argument("--leg-out", help=argparse.SUPPRESS)
    parser.add_argument("--batch", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch-from", type=Path,
                        help="a results file of an earlier run: time one ingest_files call of"
                        " the original against one KnowledgeBase.ingest call, alternated,"
                        " over the files both read (--rounds times)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--original-python", help="python of the venv with kreuzberg-surrealdb")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--legs", default="original,facade,library,cli")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vs_kzs.json")
    args = parser.parse_args()
    if args.leg:
        leg_main(args)
        return
    if args.batch_from:
        batch_main(args)
        return
    files = corpus_files(args.corpus)
    files_list = Path(tempfile.mkstemp(suffix=".txt")[1])
    files_list.write_text("\n".join(str(p) for p in files))
    staged = Path(tempfile.mkdtemp(prefix="kzs-files-"))
    for p in files:  # the CLI leg ingests a folder of exactly these files
        target = staged / p.relative_to(args.corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(p, target)
        except OSError:  # another file system
            shutil.copy2(p, target)
    legs = args.legs.split(",")
    results: dict[str, Any] = {"corpus": str(args.corpus), "files": len(files)}
    if "original" in legs:
        if not args.original_python:
            raise SystemExit("--original-python is needed for the original leg")
        results["original"] = run_leg(args.original_python, "kreuzberg_surrealdb", files_list)
    if "facade" in legs:
        results["facade"] = run_leg(sys.executable, "surrealdocs.kreuzberg_surrealdb",
                                    files_list)
    if "library" in legs:
        results["library"] = run_leg(sys.executable, "surrealdocs", files_list)
    if "cli" in legs:
        results["cli"] = run_cli(staged, str(Path(sys.executable).parent / "surrealdocs"))
    if "original" in results and "facade" in results:
        results["summary"] = summary(results["original"], results["facade"])
    if "original" in results and "library" in results:
        results["summary_library"] = summary(results["original"], results["library"])
    for name in ("original", "facade", "library"):
        if name in results:
            leg = results[name]
            print(f"{name}: first {leg['passes'][0]['seconds']:.1f} s, again"
                  f" {leg['passes'][1]['seconds']:.1f} s, documents {leg['documents']},"
                  f" peak RSS {leg['peak_rss_mb']:.0f} MB")
    if "cli" in results:
        cli = results["cli"]["passes"]
        print(f"cli: first {cli[0]['seconds']:.1f} s, again {cli[1]['seconds']:.1f} s,"
              f" counts {cli[0]['counts']}")
    for name in ("summary", "summary_library"):
        if name in results:
            print(name, json.dumps(results[name], indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


def batch_main(args: argparse.Namespace) -> None:
    if not args.original_python:
        raise SystemExit("--original-python is needed")
    files = both_read(json.loads(args.batch_from.read_text()))
    files_list = Path(tempfile.mkstemp(suffix=".txt")[1])
    files_list.write_text("\n".join(files))
    rounds = []
    for _ in range(args.rounds):  # alternated: load on the machine falls on both alike
        original = run_leg(args.original_python, "kreuzberg_surrealdb", files_list, batch=True)
        library = run_leg(sys.executable, "surrealdocs", files_list, batch=True)
        rounds.append({"original": original, "library": library,
                       "speedup": round(original["seconds"] / library["seconds"], 2)})
        print(f"{len(files)} files: original ingest_files {original['seconds']:.1f} s"
              f" ({original['chunks']} chunks), KnowledgeBase.ingest {library['seconds']:.1f} s"
              f" ({library['chunks']} chunks, {len(library['failed'])} failed):"
              f" {rounds[-1]['speedup']}x", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"files": files, "rounds": rounds}, indent=1) + "\n")


if __name__ == "__main__":
    main()
