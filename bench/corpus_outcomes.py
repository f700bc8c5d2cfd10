"""Extract every file of the shared corpus with ``extract_file`` and count the outcomes.

    python bench/corpus_outcomes.py [--root ../shared/data/documents] [--json out.json]
                                    [--compare before.json]

Not a test: a check that a change to extraction keeps every file's outcome named. It prints
the counts (extracted, empty, failed), every failure with its reason, and with ``--compare``
the files whose outcome or text length changed against an earlier ``--json`` output.
Files are extracted two at a time, as ingest does (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from surrealdocs import Settings
from surrealdocs.parts.extract import Extracted, extract_file

ROOT = Path(__file__).resolve().parents[1]


async def run(root: Path, settings: Settings) -> dict[str, dict[str, Any]]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.parent != root)
    slots = asyncio.Semaphore(settings.extract_concurrency)
    out: dict[str, dict[str, Any]] = {}

    async def one(path: Path) -> None:
        async with slots:
            t0 = time.perf_counter()
            outcome = await extract_file(path, settings)
            seconds = time.perf_counter() - t0
        rel = str(path.relative_to(root))
        if isinstance(outcome, Extracted):
            out[rel] = {"outcome": "extracted", "chars": len(outcome.content),
                        "mime": outcome.mime_type, "chunks": len(outcome.chunks),
                        "seconds": round(seconds, 3)}
        else:
            out[rel] = {"outcome": outcome.kind, "reason": outcome.reason,
                        "seconds": round(seconds, 3)}

    await asyncio.gather(*(one(p) for p in files))
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser()
    default = next((d for d in (ROOT.parent / "shared" / "data" / "documents",
                                ROOT.parents[1] / "shared" / "data" / "documents")
                    if d.is_dir()), None)  # a checkout, or a worktree under wt/
    parser.add_argument("--root", type=Path, default=default)
    parser.add_argument("--json", type=Path, help="write every file's outcome here")
    parser.add_argument("--compare", type=Path, help="an earlier --json output")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    if args.root is None or not args.root.is_dir():
        parser.error("no corpus found: pass --root")

    started = time.perf_counter()
    results = asyncio.run(run(args.root, Settings(db="mem://", extract_timeout=args.timeout)))
    wall = time.perf_counter() - started
    counts = Counter(r["outcome"] for r in results.values())
    print(f"{len(results)} files in {wall:.1f} s: " +
          ", ".join(f"{k} {counts.get(k, 0)}" for k in ("extracted", "empty", "failed")))
    unnamed = [rel for rel, r in results.items()
               if r["outcome"] != "extracted" and len(r.get("reason") or "") < 10]
    print(f"failures without a reason of 10+ characters: {len(unnamed)} {unnamed}")
    for rel, r in results.items():
        if r["outcome"] == "failed":
            print(f"  failed  {rel}: {r['reason']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.compare:
        before = json.loads(args.compare.read_text())
        changed = 0
        for rel in sorted(set(before) | set(results)):
            a, b = before.get(rel, {}), results.get(rel, {})
            if a.get("outcome") != b.get("outcome") or a.get("chars") != b.get("chars"):
                changed += 1
                print(f"  changed {rel}: {a.get('outcome')} {a.get('chars', '')} "
                      f"{a.get('reason', '')!s:.60} -> {b.get('outcome')} {b.get('chars', '')} "
                      f"{b.get('reason', '')!s:.80}")
        print(f"{changed} files changed outcome or text length")


if __name__ == "__main__":
    main()
