"""What the benchmarks share: the data (SciFact's corpus, claims and synthetic documents made
of its sentences; the dev collections), the proxy embedder of ``scale.py``, growing a store
and timing its modes, and small measures (percentiles, RSS, size on disk). Scripts import
these from here, never from each other.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from surrealdb import RecordID

from surrealdocs import KnowledgeBase
from surrealdocs.embed.hashing import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]

SCIFACT = ROOT.parent / "shared" / "data" / "scifact"

PROXY = "minilm-sentences"

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

SHARED = ROOT.parent / "shared" / "data"

DEV_COLLECTIONS = ("med", "cacm", "npl")  # with scifact-dev first

DIM = 384

VOCABULARY = 5000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def corpus() -> tuple[dict[str, str], list[str]]:
    docs = {}
    sentences: list[str] = []
    for line in (SCIFACT / "corpus.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        text = f"{row.get('title', '')}\n\n{row.get('text', '')}".strip()
        docs[f"beir:{row['_id']}"] = text
        sentences += [s for s in SENTENCE_END.split(row.get("text", "")) if len(s) > 40]
    return docs, sentences


def synthetic(sentences: list[str], n: int, seed: int) -> dict[str, str]:
    """``n`` documents of 8–16 SciFact sentences each, deterministic for ``seed``."""
    rng = random.Random(seed)
    return {f"synthetic:{seed}:{i}": " ".join(rng.choice(sentences)
                                               for _ in range(rng.randint(8, 16)))
            for i in range(n)}


def queries(n: int) -> list[str]:
    judged = {line.split("\t")[0] for line in (SCIFACT / "qrels" / "test.tsv").open()}
    rows = [json.loads(line) for line in (SCIFACT / "queries.jsonl").open()]
    return [r["text"] for r in rows if str(r["_id"]) in judged][:n]


class SentenceMeanEmbedder:
    """all-MiniLM-L6-v2's geometry for a lookup's cost (see the module's docstring)."""

    def __init__(self, sentences: list[str], workdir: Path) -> None:
        import numpy as np

        from surrealdocs.embed import get_embedder

        self.model = get_embedder("all-minilm-l6-v2")
        self.name, self.dimension = PROXY, self.model.dimension
        distinct = sorted(set(sentences))
        cache = workdir / "scifact-sentences-minilm.npy"
        if cache.exists():
            vectors = np.load(cache)
        else:
            print(f"embedding {len(distinct)} sentences once", file=sys.stderr, flush=True)
            vectors = self.model.embed_documents(distinct)
            np.save(cache, vectors)
        assert vectors.shape == (len(distinct), self.dimension)
        self.vectors = vectors
        self.index = {s: i for i, s in enumerate(distinct)}
        self.head = {s[:40]: i for i, s in enumerate(distinct)}
        self.tail = {s[-40:]: i for i, s in enumerate(distinct)}
        self.misses: dict[str, Any] = {}

    def _piece(self, piece: str) -> Any:
        i = self.index.get(piece)
        if i is None and len(piece) >= 40:
            i = self.head.get(piece[:40], self.tail.get(piece[-40:]))
        if i is not None:
            return self.vectors[i]
        if piece not in self.misses:
            self.misses[piece] = self.model.embed_query(piece)
        return self.misses[piece]

    def _vector(self, text: str) -> Any:
        import numpy as np

        pieces = [p for p in SENTENCE_END.split(text.strip()) if p.strip()] or [text]
        total = sum(len(p) * self._piece(p) for p in pieces)
        norm = float(np.linalg.norm(total))
        return (total / norm).astype(np.float32) if norm else self.model.embed_query(text)

    def embed_documents(self, texts: Any) -> Any:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> Any:
        return self.model.embed_query(text)


async def grow(kb: Any, target: int, docs: dict[str, str], sentences: list[str],
               seed: int) -> tuple[int, float]:
    """Ingest until the store holds ``target`` chunks (SciFact's documents first, in steps
    of 500, then synthetic ones); (chunks written, seconds)."""
    stats = await kb.stats()
    written, seconds = 0, 0.0
    batch_no = 0
    real = [kv for kv in docs.items()]
    while stats.chunks < target:
        start = stats.documents
        if start < len(real):
            pending = dict(real[start:start + 500])
        else:
            # about 4 chunks per synthetic document; steps of up to 5,000 documents
            need = max(1, min(5_000, (target - stats.chunks) // 4 + 1))
            pending = synthetic(sentences, need, seed * 1_000 + batch_no)
            batch_no += 1
        t0 = time.perf_counter()
        report = await kb.ingest_texts(pending)
        seconds += time.perf_counter() - t0
        written += report.chunks_written
        stats = await kb.stats()
    return written, seconds


async def time_modes(kb: Any, qs: list[str]) -> dict[str, dict[str, float]]:
    """p50/p95 ms of each mode over ``qs`` (top 10, one hit per document; five untimed
    searches first)."""
    out = {}
    for mode in ("text", "vector", "hybrid"):
        for q in qs[:5]:
            await kb.search(q, mode=mode, per_document=True)
        times = []
        for q in qs:
            t0 = time.perf_counter()
            await kb.search(q, mode=mode, per_document=True)
            times.append((time.perf_counter() - t0) * 1000)
        out[mode] = {"p50_ms": round(statistics.median(times), 1),
                     "p95_ms": round(pct(times, 0.95), 1)}
    return out


def dev_dataset() -> Path:
    """The dev split (300 SciFact train queries, see bench/data/scifact-dev/README.md) next
    to the shared SciFact corpus, as one BEIR directory."""
    target = Path(tempfile.mkdtemp(prefix="scifact-dev-"))
    source = ROOT / "bench" / "data" / "scifact-dev"
    shutil.copytree(source / "qrels", target / "qrels")
    shutil.copy(source / "queries.jsonl", target / "queries.jsonl")
    (target / "corpus.jsonl").symlink_to(ROOT.parent / "shared" / "data" / "scifact"
                                         / "corpus.jsonl")
    return target


def load_queries(dataset: Path, split: str, n: int, long: bool, seed: int) -> list[str]:
    rng = random.Random(seed)
    if long:
        docs = [json.loads(line) for line in (dataset / "corpus.jsonl").open()]
        picked = rng.sample(docs, min(n, len(docs)))
        return [" ".join(str(d.get("text", "")).split()[:60]) for d in picked]
    judged = {line.split("\t")[0] for line in (dataset / "qrels" / f"{split}.tsv").open()}
    queries = [json.loads(line) for line in (dataset / "queries.jsonl").open()]
    texts = [q["text"] for q in queries if str(q["_id"]) in judged]
    return texts[:n]


async def insert_rows(db: Any, rows: list[dict[str, Any]], rows_per_insert: int,
                      streams: int) -> None:
    """``INSERT INTO chunks``, ``rows_per_insert`` rows a statement, ``streams`` at once."""
    batches = iter([rows[i:i + rows_per_insert] for i in range(0, len(rows), rows_per_insert)])

    async def stream() -> None:
        for batch in batches:  # shared: each batch is taken once
            raw: Any = await db.query_raw("INSERT INTO chunks $rows RETURN NONE;",
                                          {"rows": batch})
            if any(r.get("status") != "OK" for r in raw["result"]):
                raise SystemExit(f"insert failed: {raw['result']}")

    await asyncio.gather(*(stream() for _ in range(streams)))


def rss_mb() -> int:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


_T0 = time.perf_counter()


def log(msg: str) -> None:
    """Stage progress on stderr, so a slow or stuck stage is visible while it runs."""
    print(f"[{time.perf_counter() - _T0:8.1f}s] {msg}", file=sys.stderr, flush=True)


class FixedDim(HashingEmbedder):
    """Only its name and dimension matter here: vectors are given directly."""


def word(rank: int) -> str:
    """A distinct letters-only word per rank (digits would be split off by the analyzer)."""
    letters = "bcdfghjklmnprstv"
    out = "q"
    while True:
        rank, digit = divmod(rank, 16)
        out += letters[digit] + "a"
        if rank == 0:
            return out


def text(rng: np.random.Generator, words: int = 30) -> str:
    ranks = np.minimum(rng.zipf(1.1, words), VOCABULARY)
    return " ".join(word(int(r)) for r in ranks)


async def load(kb: KnowledgeBase, n_chunks: int, per_source: int, rng: np.random.Generator,
               centres: np.ndarray) -> list[RecordID]:
    n = kb.store.names
    sources = []
    for s in range(n_chunks // per_source):
        doc = RecordID(n.documents, f"src{s:05d}")
        await kb.store.query("CREATE $d CONTENT $doc RETURN NONE;", {"d": doc, "doc": {
            "source": f"bench://{s}", "sources": [f"bench://{s}"], "content": f"source {s}",
            "mime_type": "text/plain", "content_hash": f"h{s}", "chunk_count": per_source,
            "complete": True}})
        vecs = centres[rng.integers(0, len(centres), per_source)] \
            + 0.35 * rng.normal(size=(per_source, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [{"id": RecordID(n.chunks, f"src{s:05d}_{i}"), "document": doc,
                 "content": text(rng),
                 "chunk_index": i, "char_start": 0, "char_end": 1, "word_count": 6,
                 "embedding": v.tolist()} for i, v in enumerate(vecs)]
        for start in range(0, len(rows), 100):
            await kb.store.query(f"INSERT INTO {n.chunks} $r RETURN NONE;",
                                  {"r": rows[start:start + 100]})
        sources.append(doc)
        if (s + 1) % 10 == 0:
            log(f"loaded {(s + 1) * per_source} chunks")
    return sources
