"""Probe for issue 28's text index: what segment layouts cost to write and to read in SurrealDB.

    python bench/text_index_probe.py [--segments 1 16 256] [--db surrealkv|mem] [--queries 300]

SciFact's corpus (``../shared/data/scifact``) is cut into plain 800-character windows, analysed
in Python (class tokens, lowercase, ASCII folding, Snowball English through PyStemmer) and
its postings written into embedded SurrealDB as immutable segments, in three layouts:

- ``term``: a record per (segment, term), ``text_term:[seg, term]``, with the postings packed
  in ``bytes`` (chunk ordinals as uint32, term frequencies as uint16); a search reads every
  segment's records of the query terms in one statement, by record id (the segments' term
  sets are kept in memory, as a cache of immutable segments would);
- ``term_where``: the same records, found by ``WHERE term IN $terms`` on an index;
- ``whole``: a record per segment holding its whole term dictionary and postings (one blob);
  a search reads every segment (what a store of small, unmerged segments costs).

Each search scores BM25 (Lucene's IDF, k1 0.9, b 0.4) with numpy and takes the top 10. The
figures are p50/p95 per layout and segment count, with no decoded-segment cache, and the
records and bytes written (the write amplification of small segments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import Stemmer
from surrealdb import AsyncSurreal, RecordID

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
TOKEN = re.compile(r"\w+")
STOP = set("a an and are as at be but by for if in into is it no not of on or such that the "
           "their then there these they this to was will with what which how does do".split())
STEM = Stemmer.Stemmer("english")
K1, B = 0.9, 0.4


def analyse(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    return STEM.stemWords(TOKEN.findall(folded))


def windows(limit: int | None) -> list[str]:
    out = []
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = f"{row.get('title', '')}\n\n{row.get('text', '')}"
            out.extend(text[i:i + 800] for i in range(0, len(text), 800))
            if limit and len(out) >= limit:
                break
    return out


def build_segments(chunks: list[list[str]], count: int) -> list[dict[str, Any]]:
    """``count`` segments over consecutive chunks: per term, (ordinals, tfs) packed."""
    size = -(-len(chunks) // count)
    segments = []
    for s in range(count):
        part = chunks[s * size:(s + 1) * size]
        postings: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for ordinal, terms in enumerate(part):
            for term, tf in Counter(terms).items():
                postings[term][0].append(ordinal)
                postings[term][1].append(min(tf, 65535))
        segments.append({
            "id": s, "base": s * size, "lengths": [len(t) for t in part],
            "postings": {t: (np.asarray(o, dtype="<u4").tobytes(),
                             np.asarray(f, dtype="<u2").tobytes())
                         for t, (o, f) in postings.items()}})
    return segments


async def write(db: Any, segments: list[dict[str, Any]], layout: str) -> tuple[float, int, int]:
    t0, records, size = time.perf_counter(), 0, 0
    for seg in segments:
        head = {"lengths": np.asarray(seg["lengths"], dtype="<u2").tobytes(), "base": seg["base"]}
        if layout == "whole":
            blob = {t: o + f for t, (o, f) in seg["postings"].items()}
            await db.query("CREATE $id CONTENT $c RETURN NONE;", {
                "id": RecordID("text_whole", seg["id"]), "c": {**head, "terms": blob}})
            records += 1
            size += sum(len(b) for b in blob.values())
            continue
        await db.query("CREATE $id CONTENT $c RETURN NONE;",
                       {"id": RecordID("text_seg", seg["id"]), "c": head})
        rows = [{"id": RecordID("text_term", [seg["id"], t]), "seg": seg["id"], "term": t,
                 "o": o, "f": f} for t, (o, f) in seg["postings"].items()]
        for i in range(0, len(rows), 2000):
            await db.query("INSERT INTO text_term $rows RETURN NONE;", {"rows": rows[i:i + 2000]})
        records += 1 + len(rows)
        size += sum(len(r["o"]) + len(r["f"]) for r in rows)
    return time.perf_counter() - t0, records, size


def score(blocks: list[tuple[int, bytes, bytes, str]], lengths: np.ndarray, n: int,
          df: dict[str, int], qterms: list[str]) -> np.ndarray:
    avg = lengths.mean()
    scores = np.zeros(n, dtype=np.float32)
    for base, o, f, term in blocks:
        ords = np.frombuffer(o, dtype="<u4").astype(np.int64) + base
        tfs = np.frombuffer(f, dtype="<u2").astype(np.float32)
        idf = np.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        norm = K1 * (1 - B + B * lengths[ords] / avg)
        scores[ords] += idf * tfs * (K1 + 1) / (tfs + norm) * qterms.count(term)
    return scores


async def search(db: Any, layout: str, qterms: list[str], seg_terms: list[set[str]],
                 bases: list[int], lengths: np.ndarray, df: dict[str, int]) -> list[int]:
    n = len(lengths)
    uniq = sorted(set(qterms))
    blocks: list[tuple[int, bytes, bytes, str]] = []
    if layout == "term":
        ids = [RecordID("text_term", [s, t]) for s, terms in enumerate(seg_terms)
               for t in uniq if t in terms]
        if ids:
            (rows,) = await db.query("SELECT seg, term, o, f FROM $ids;", {"ids": ids})
            blocks = [(bases[r["seg"]], r["o"], r["f"], r["term"]) for r in rows]
    elif layout == "term_where":
        (rows,) = await db.query("SELECT seg, term, o, f FROM text_term WHERE term IN $t;",
                                 {"t": uniq})
        blocks = [(bases[r["seg"]], r["o"], r["f"], r["term"]) for r in rows]
    else:
        (rows,) = await db.query("SELECT id, terms FROM text_whole;")
        for r in rows:
            base = bases[r["id"].id]
            for t in uniq:
                blob = r["terms"].get(t)
                if blob is not None:
                    k = len(blob) // 6
                    blocks.append((base, blob[:4 * k], blob[4 * k:], t))
    scores = score(blocks, lengths, n, df, qterms)
    top = np.argpartition(-scores, 10)[:10]
    return [int(i) for i in top[np.argsort(-scores[top])]]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, nargs="+", default=[1, 16, 256])
    parser.add_argument("--layouts", nargs="+", default=["term", "term_where", "whole"])
    parser.add_argument("--db", choices=["surrealkv", "mem"], default="surrealkv")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--chunks", type=int, default=None)
    args = parser.parse_args()
    texts = windows(args.chunks)
    chunks = [analyse(t) for t in texts]
    lengths = np.asarray([len(c) for c in chunks], dtype=np.float32)
    df = Counter(t for c in chunks for t in set(c))
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f][:args.queries]
    qterms = [[t for t in analyse(q) if t not in STOP and t in df] or analyse(q)[:1]
              for q in queries]
    print(f"{len(texts)} chunks, {len(df)} terms, {len(queries)} queries, {args.db}")
    print("layout      segments  write s  records   bytes      p50 ms  p95 ms  same top10")
    reference: list[list[int]] | None = None
    for count in args.segments:
        segments = build_segments(chunks, count)
        seg_terms = [set(s["postings"]) for s in segments]
        bases = [s["base"] for s in segments]
        for layout in args.layouts:
            url = "mem://" if args.db == "mem" else f"surrealkv://{tempfile.mkdtemp()}/db"
            async with AsyncSurreal(url) as db:
                await db.use("probe", "probe")
                await db.query("DEFINE TABLE text_term SCHEMALESS; DEFINE TABLE text_seg "
                               "SCHEMALESS; DEFINE TABLE text_whole SCHEMALESS;"
                               "DEFINE INDEX term_ix ON text_term FIELDS term;")
                seconds, records, size = await write(db, segments, layout)
                for q in qterms[:20]:  # warm-up
                    await search(db, layout, q, seg_terms, bases, lengths, df)
                times, tops = [], []
                for q in qterms:
                    t0 = time.perf_counter()
                    tops.append(await search(db, layout, q, seg_terms, bases, lengths, df))
                    times.append((time.perf_counter() - t0) * 1000)
            if reference is None:
                reference = tops
            same = sum(a == b for a, b in zip(tops, reference)) / len(tops)
            times.sort()
            print(f"{layout:<11} {count:>8}  {seconds:7.1f}  {records:>7}  {size:>9,}  "
                  f"{statistics.median(times):6.1f}  {times[int(0.95 * len(times))]:6.1f}"
                  f"  {same:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
