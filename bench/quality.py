"""Retrieval quality, written into BENCHMARKS.md: SciFact's test split beside published
figures, and every dev collection (SciFact dev, MED, CACM, NPL) in one table.

    python bench/quality.py                    # ../shared/data/scifact, default settings
    python bench/quality.py --from-json FILE   # the table from `surrealdocs eval -o FILE`
    python bench/quality.py --dev              # the dev queries the defaults were chosen on
    python bench/quality.py --collections [--stores DIR] [--before FILE]
                                               # every dev collection, one table (with the
                                               # figures of FILE as "before")

Settings come from SURREALDOCS_* variables as usual, e.g. SURREALDOCS_BM25_K1=1.2.

Runs the same code as ``surrealdocs eval`` (the library's
:func:`surrealdocs.core.evaluate.evaluate`) with the default settings a user gets (the
all-MiniLM-L6-v2 model, an in-memory store), prints the table, saves the figures as JSON
under bench/results/, and replaces the table between the markers in BENCHMARKS.md. Quality
figures are deterministic; timings depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import DEV_COLLECTIONS, SHARED, dev_dataset
from surrealdocs import Settings
from surrealdocs.core.evaluate import evaluate, load_beir

ROOT = Path(__file__).resolve().parents[1]

BEGIN, END = "<!-- quality:begin -->", "<!-- quality:end -->"
COLLECTIONS_BEGIN, COLLECTIONS_END = "<!-- collections:begin -->", "<!-- collections:end -->"

# Published SciFact (BEIR test split) figures: (system, nDCG@10, R@100, MRR@10, source)
PUBLISHED = {
    "text": [
        ("BM25, BEIR paper (Elasticsearch)", "0.665", "0.908", "–", "Thakur et al. 2021"),
        ("BM25, Anserini flat (k1 0.9, b 0.4)", "0.679", "–", "–", "Pyserini BEIR baselines"),
        ("BM25, Elasticsearch", "0.690", "–", "–", "issue 3"),
    ],
    "vector": [
        ("all-MiniLM-L6-v2, exact", "0.645", "–", "–", "MTEB / sentence-transformers"),
        ("bge-small-en-v1.5, exact (not available offline)", "0.713", "–", "–", "MTEB"),
    ],
    "hybrid": [
        ("RRF BM25 + all-MiniLM-L6-v2", "≈0.72", "–", "–", "issue 3"),
        ("RRF BM25 + bge-base-en-v1.5 (DuckDB)", "0.744", "–", "–", "issue 3"),
    ],
}
LABELS = {"text": "BM25 (text)", "vector": "vector", "hybrid": "hybrid"}


def fusion_label(s: dict[str, Any]) -> str:
    weights = f"weights {s['text_weight']:g} / {s['vector_weight']:g}"
    if s["hybrid_fusion"] == "rrf":
        return f"RRF (k {s['rrf_k']}, {weights})"
    return f"{s['hybrid_fusion']} fusion ({weights})"


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        "| mode | system | nDCG@10 | Recall@100 | MRR@10 | time (300 queries) |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        mode, seconds = r["mode"], r["seconds"]
        ours = {
            "text": f"**surrealdocs** BM25({s['bm25_k1']}, {s['bm25_b']}), chunks of"
                    f" {s['chunk_size']} chars, best chunk per document",
            "vector": f"**surrealdocs** {s['model']} (int8 ONNX), "
                      + (s["vector_index"] if s["vector_index"].startswith("exact") else
                         f"HNSW M {s['hnsw_m']} EFC {s['hnsw_efc']} ef {s['hnsw_ef']},"
                         f" {s['vector_index']}"),
            "hybrid": f"**surrealdocs** {fusion_label(s)} of {s['hybrid_candidates']}"
                      " documents per leg",
        }[mode]
        lines.append(
            f"| {LABELS[mode]} | {ours} | **{r['ndcg@10']:.4f}** | {r['recall@100']:.4f} |"
            f" {r['mrr@10']:.4f} | {seconds:.0f} s ({r['ms_per_query']:.0f} ms/query) |")
        for name, ndcg, recall, mrr, source in PUBLISHED[mode]:
            lines.append(f"| | {name} [{source}] | {ndcg} | {recall} | {mrr} | |")
    when = report.get("date") or dt.date.today().isoformat()
    lines += [
        "",
        f"{report['dataset']}, {report['split']} split: {report['queries']} queries,"
        f" {report['documents']} documents ({report['chunks']} chunks). Ingest (extract,"
        f" chunk, embed, write, HNSW build): {report['ingest_seconds']:.0f} s. Measured {when}"
        f" on a shared {os.cpu_count()}-core {platform.machine()} machine (other jobs were"
        " running: timings are indicative; the quality figures are deterministic).",
    ]
    return "\n".join(lines)


def bm25_reference(dataset: Path) -> float | None:
    """The BM25 nDCG@10 (k1 1.2, b 0.75, bm25s with stemming and stop words) that a
    collection's PROVENANCE.md reports, if any."""
    provenance = dataset / "PROVENANCE.md"
    if not provenance.is_file():
        return None
    for line in provenance.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] == "k1=1.2, b=0.75":
            return float(cells[1])
    return None


async def measure_collections(stores: Path) -> list[dict[str, Any]]:
    """Every dev collection in every mode, plus the RRF of the two legs; each collection in
    its own store under ``stores`` (reused when it holds that collection only)."""
    def progress(stage: str, done: int, total: int) -> None:
        if done == total:
            print(f"  {stage}: {done}/{total}", file=sys.stderr, flush=True)

    out = []
    datasets = [(dev_dataset(), "dev", None)] + [
        (SHARED / name, "test", bm25_reference(SHARED / name)) for name in DEV_COLLECTIONS]
    for path, split, reference in datasets:
        name = "scifact-dev" if split == "dev" else path.name
        print(f"{name}:", file=sys.stderr, flush=True)
        data = load_beir(path, split)
        data.name = name
        settings = Settings.from_env(db=str(stores / name))
        report = await evaluate(data, settings=settings, split=split, on_progress=progress)
        rrf = await evaluate(data, settings=settings, split=split, modes=["hybrid"],
                             search_options={"fusion": "rrf"}, on_progress=progress)
        figures = report.to_dict()
        rrf_result = rrf.to_dict()["results"][0]
        rrf_result["mode"] = "rrf"
        figures["results"].append(rrf_result)
        figures["bm25_reference"] = reference
        out.append(figures)
    return out


def _by_mode(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["mode"]: r for r in report["results"]}


def collections_table(reports: list[dict[str, Any]],
                      before: list[dict[str, Any]] | None = None) -> str:
    """nDCG@10 per collection and mode (``before → after`` when given), the goal checks,
    and Recall@100 / MRR@10."""
    old = {r["dataset"]: _by_mode(r) for r in before or []}
    modes = ("text", "vector", "hybrid", "rrf")
    lines = [
        "| collection | queries | BM25 reference | BM25 (text) | vector | hybrid | RRF of the"
        " legs | hybrid above both legs, the reference and RRF |",
        "|---|---|---|---|---|---|---|---|",
    ]
    means: dict[str, list[float]] = {m: [] for m in modes}
    old_means: dict[str, list[float]] = {m: [] for m in modes}
    for report in reports:
        now = _by_mode(report)
        was = old.get(report["dataset"], {})
        cells = []
        for m in modes:
            value = now[m]["ndcg@10"] if m in now else None
            if value is None:
                cells.append("–")
                continue
            means[m].append(value)
            if m in was:
                old_means[m].append(was[m]["ndcg@10"])
                cells.append(f"{was[m]['ndcg@10']:.4f} → **{value:.4f}**")
            else:
                cells.append(f"**{value:.4f}**")
        reference = report.get("bm25_reference")
        hybrid = now["hybrid"]["ndcg@10"]
        bar = max([now[m]["ndcg@10"] for m in ("text", "vector", "rrf") if m in now]
                  + ([reference] if reference else []))
        verdict = "yes" if hybrid >= bar else f"no ({hybrid - bar:+.4f})"
        lines.append(f"| {report['dataset']} | {report['queries']} |"
                     f" {reference if reference else '–'} | " + " | ".join(cells)
                     + f" | {verdict} |")
    mean_cells = []
    for m in modes:
        if not means[m]:
            mean_cells.append("–")
            continue
        value = sum(means[m]) / len(means[m])
        if len(old_means[m]) == len(means[m]):
            was_mean = sum(old_means[m]) / len(old_means[m])
            mean_cells.append(f"{was_mean:.4f} → **{value:.4f}**")
        else:
            mean_cells.append(f"**{value:.4f}**")
    lines.append("| **mean** | | | " + " | ".join(mean_cells) + " | |")
    lines += ["", "| collection | mode | Recall@100 | MRR@10 | ms per query |",
              "|---|---|---|---|---|"]
    for report in reports:
        for m, r in _by_mode(report).items():
            lines.append(f"| {report['dataset']} | {m} | {r['recall@100']:.4f} |"
                         f" {r['mrr@10']:.4f} | {r['ms_per_query']:.0f} |")
    s = reports[0]["settings"]
    when = dt.date.today().isoformat()
    fitted = (", fitted to the model's window" if s.get("fit_chunks")
              else "" if "fit_chunks" not in s else ", not fitted to the model's window")
    lines += ["", f"Settings ({s['model']}, chunks of {s['chunk_size']} characters{fitted},"
              f" BM25({s['bm25_k1']}, {s['bm25_b']}), {s['hybrid_fusion']} fusion); RRF of the"
              " legs is `--fusion rrf` on the same store. BM25 reference: bm25s (k1 1.2,"
              " b 0.75, stemming, stop words) from each collection's PROVENANCE.md."
              f" Measured {when}; quality figures are deterministic."]
    return "\n".join(lines)


def write_between(begin: str, end: str, text: str) -> None:
    path = ROOT / "BENCHMARKS.md"
    doc = path.read_text(encoding="utf-8")
    if begin not in doc or end not in doc:
        raise SystemExit(f"{path} has no {begin} … {end} markers")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")
    print(f"table written to {path}", file=sys.stderr)


def collections_main(args: argparse.Namespace) -> None:
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    if args.from_json:
        reports = json.loads(args.from_json.read_text(encoding="utf-8"))["datasets"]
    else:
        stores = args.stores or Path(tempfile.mkdtemp(prefix="quality-stores-"))
        reports = asyncio.run(measure_collections(stores))
        out = results / "quality-collections.json"
        out.write_text(json.dumps({"datasets": reports}, indent=2) + "\n", encoding="utf-8")
        print(f"figures: {out}", file=sys.stderr)
    before = (json.loads(args.before.read_text(encoding="utf-8"))["datasets"]
              if args.before else None)
    text = collections_table(reports, before)
    print(text)
    if not args.no_write:
        write_between(COLLECTIONS_BEGIN, COLLECTIONS_END, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--split", default="test")
    parser.add_argument("--dev", action="store_true",
                        help="Measure the dev split instead (implies --no-write)")
    parser.add_argument("--from-json", type=Path,
                        help="Take the figures from `surrealdocs eval -o FILE` instead of running")
    parser.add_argument("--no-write", action="store_true", help="Do not touch BENCHMARKS.md")
    parser.add_argument("--collections", action="store_true",
                        help="Every dev collection (SciFact dev, MED, CACM, NPL), one table")
    parser.add_argument("--stores", type=Path,
                        help="With --collections: a folder of one store per collection,"
                             " reused when run again")
    parser.add_argument("--before", type=Path,
                        help="With --collections: figures of an earlier run, shown as before")
    args = parser.parse_args()
    if args.collections:
        collections_main(args)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def progress(stage: str, done: int, total: int) -> None:
        if done == total or done % 500 == 0:
            print(f"  {stage}: {done}/{total}", file=sys.stderr, flush=True)

    if args.from_json:
        figures = json.loads(args.from_json.read_text(encoding="utf-8"))
        figures.setdefault("date", dt.date.fromtimestamp(
            args.from_json.stat().st_mtime).isoformat())
    else:
        dataset, split = (dev_dataset(), "dev") if args.dev else (args.dataset, args.split)
        report = asyncio.run(evaluate(dataset, settings=Settings.from_env(db="mem://"),
                                      split=split, on_progress=progress))
        figures = report.to_dict()
        results = ROOT / "bench" / "results"
        results.mkdir(parents=True, exist_ok=True)
        out = results / f"quality-scifact-{split}.json"
        out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"figures: {out}", file=sys.stderr)
    text = table(figures)
    print(text)
    if not (args.no_write or args.dev):
        write_between(BEGIN, END, text)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the embedded engine can abort while the interpreter tears down


if __name__ == "__main__":
    main()
