"""What a perfect reranker could reach from our first stage, per depth; and the rerank
stage's own cost.

    python bench/rerank_ceiling.py --stores DIR [--depths 10 20 50 100] [--queries N]

DIR holds the stores ``surrealdocs eval`` made with the default model: ``scifact-dev``
(SciFact's corpus with the dev queries of bench/data/scifact-dev), ``med``, ``cacm`` and
``npl`` (../shared/data). A loopback rerank server (the shared rerank request, reached
through the real HTTP path: ``RerankService``) scores each passage by the qrels grade of
its document for the query asked (an oracle: tests and benchmarks only), ties kept in the
first stage's order. For each depth, hybrid search (one hit per document, the cut-off off,
as ``surrealdocs eval`` searches) reranks its first DEPTH documents and nDCG@10 is taken;
beside it, recall@DEPTH of the first stage: the share of the judged relevant documents the
reranker was shown.

Then the stage's own cost: the rerank step's time (``SearchHits.rerank_ms``: the request,
the loopback round trip, the answer read and the reorder) at depth 50 against a rerank
server in a process of its own that does no work (it scores by position); and a whole
search whose reranker never answers (a server that accepts and waits) against its
``rerank_timeout`` of 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import ROOT, SHARED, log, pct
from surrealdocs import KnowledgeBase, Settings
from surrealdocs.core.evaluate import SOURCE_PREFIX, load_beir, mean_scores, score_run

COLLECTIONS = {"scifact-dev": ("dev", None), "med": ("test", SHARED / "med"),
               "cacm": ("test", SHARED / "cacm"), "npl": ("test", SHARED / "npl")}


class Oracle:
    """Scores a passage by its document's grade for the current query."""

    def __init__(self) -> None:
        self.document_of: dict[str, str] = {}  # passage text -> corpus id
        self.grades: dict[str, int] = {}  # corpus id -> grade, for the query asked
        self.top = 1  # the highest grade there is
        self.wait = False  # never answer (the unreachable case)

    def scores(self, texts: list[str]) -> list[float]:
        n = len(texts)
        return [self.grades.get(self.document_of.get(t, ""), 0) + (n - i) / (n + 1) * 1e-3
                for i, t in enumerate(texts)]


def serve(oracle: Oracle) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if oracle.wait:
                time.sleep(30)
                return
            scores = oracle.scores(body["documents"])
            # one scale for every batch of a query (a request holds at most 64 passages)
            data = json.dumps({"results": [
                {"index": i, "relevance_score": s / (oracle.top + 1.0)}
                for i, s in enumerate(scores)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


async def texts_of(kb: KnowledgeBase) -> dict[str, str]:
    """Every chunk's text -> its document's corpus id."""
    (rows,) = await kb.store.query(
        f"SELECT VALUE [content, document.sources] FROM {kb.storage.chunks.table};")
    out: dict[str, str] = {}
    for content, sources in rows or []:
        for source in sources or []:
            if str(source).startswith(SOURCE_PREFIX):
                out[str(content)] = str(source)[len(SOURCE_PREFIX):]
                break
    return out


async def collection(name: str, store: Path, depths: list[int], limit: int | None,
                     oracle: Oracle, base: str) -> list[dict[str, Any]]:
    split, path = COLLECTIONS[name]
    if path is None:
        dev = ROOT / "bench" / "data" / "scifact-dev"
        data = load_beir_dev(dev)
    else:
        data = load_beir(path, split)
    queries = list(data.queries.items())[:limit] if limit else list(data.queries.items())
    qrels = {q: data.qrels[q] for q, _ in queries}
    rows = []
    settings = Settings.from_env(db=str(store), rerank="rerank:oracle", rerank_base_url=base,
                                 rerank_timeout=30.0)
    for depth in [None, *depths]:
        # the depth is the store's setting (rerank_depth): a knowledge base per depth
        own = settings.replace(rerank_depth=depth or 50)
        async with await KnowledgeBase.open(settings=own) as kb:
            if not oracle.document_of:
                oracle.document_of = await texts_of(kb)
            run: dict[str, list[str]] = {}
            recall: list[float] = []
            for qid, text in queries:
                oracle.grades = {d: g for d, g in data.qrels[qid].items() if g > 0}
                oracle.top = max([*oracle.grades.values(), 1])
                if depth is not None:
                    first = await kb.search(text, limit=depth, per_document=True,
                                            cutoff=False, rerank="off")
                    shown = {oracle.document_of.get(h.content, "") for h in first}
                    recall.append(len(shown & set(oracle.grades)) / max(len(oracle.grades), 1))
                hits = await kb.search(text, limit=10, per_document=True, cutoff=False,
                                       rerank="off" if depth is None else "rerank:oracle")
                run[qid] = [oracle.document_of.get(h.content, h.document_id) for h in hits]
        row: dict[str, Any] = {"collection": name, "depth": depth or 0,
                               "ndcg@10": round(mean_scores(score_run(qrels, run))["ndcg@10"],
                                                4)}
        if recall:
            row["recall@depth"] = round(statistics.mean(recall), 4)
        rows.append(row)
        log(str(row))
    oracle.document_of = {}
    return rows


def load_beir_dev(dev: Path) -> Any:
    import shutil
    import tempfile

    target = Path(tempfile.mkdtemp(prefix="scifact-dev-"))
    shutil.copytree(dev / "qrels", target / "qrels")
    shutil.copy(dev / "queries.jsonl", target / "queries.jsonl")
    (target / "corpus.jsonl").symlink_to(SHARED / "scifact" / "corpus.jsonl")
    return load_beir(target, "dev")


PLAIN_SERVER = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
wait = sys.argv[1] == "wait"
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as real servers do: no 40 ms wait for a delayed ACK
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if wait:
            time.sleep(30); return
        n = len(body["documents"])
        data = json.dumps({"results": [{"index": i, "relevance_score": (n - i) / n}
                                       for i in range(n)]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def plain_server(mode: str) -> tuple[subprocess.Popen[str], str]:
    """A rerank server in a process of its own (no share of this process's GIL) whose own
    work is nothing: it scores by position, or (``wait``) never answers."""
    proc = subprocess.Popen([sys.executable, "-c", PLAIN_SERVER, mode],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"http://127.0.0.1:{proc.stdout.readline().strip()}"


async def cost(store: Path, queries: list[str]) -> dict[str, Any]:
    """The rerank step's time at depth 50, and a search whose reranker never answers."""
    stage, hung = [], []
    quick, quick_url = plain_server("answer")
    stuck, stuck_url = plain_server("wait")
    try:
        settings = Settings.from_env(db=str(store), rerank="rerank:plain",
                                     rerank_base_url=quick_url, rerank_depth=50,
                                     rerank_timeout=1.0)
        async with await KnowledgeBase.open(settings=settings) as kb:
            for text in queries[:5]:
                await kb.search(text, cutoff=False)  # warm
            for text in queries:
                hits = await kb.search(text, cutoff=False)
                stage.append(getattr(hits, "rerank_ms", None) or 0.0)
        settings = settings.replace(rerank_base_url=stuck_url)
        async with await KnowledgeBase.open(settings=settings) as kb:
            for text in queries[:20]:
                plain_started = time.perf_counter()
                await kb.search(text, cutoff=False, rerank="off")
                plain = time.perf_counter() - plain_started
                started = time.perf_counter()
                hits = await kb.search(text, cutoff=False)
                total = time.perf_counter() - started
                hung.append((total - 1.0) * 1000)
                assert getattr(hits, "notice", None), "no notice"
                log(f"unreachable: {total * 1000:.1f} ms (first stage alone {plain * 1000:.1f})")
    finally:
        quick.kill()
        stuck.kill()
    return {"rerank_stage_p50_ms": round(statistics.median(stage), 2),
            "rerank_stage_p95_ms": round(pct(stage, 0.95), 2),
            "unreachable_beyond_timeout_p50_ms": round(statistics.median(hung), 1),
            "unreachable_beyond_timeout_max_ms": round(max(hung), 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stores", type=Path, required=True)
    parser.add_argument("--depths", type=int, nargs="*", default=[10, 20, 50, 100])
    parser.add_argument("--queries", type=int, default=None, help="per collection")
    parser.add_argument("--collections", nargs="*", default=list(COLLECTIONS))
    parser.add_argument("--cost-only", action="store_true")
    args = parser.parse_args()
    oracle = Oracle()
    server, base = serve(oracle)
    rows: list[dict[str, Any]] = []
    if not args.cost_only:
        for name in args.collections:
            rows += await collection(name, args.stores / name, args.depths, args.queries,
                                     oracle, base)
        print(json.dumps(rows, indent=1))
    claims = [json.loads(line)["text"] for line in
              (SHARED / "scifact" / "queries.jsonl").open()][:100]
    log(json.dumps(await cost(args.stores / "scifact-dev", claims)))
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
