"""Load on `surrealdocs serve`: searching and uploading clients at once, then a check that
the store holds exactly what was uploaded, and the library's own search latency under the
same load for comparison.

    python bench/serve_load.py [--seconds 60] [--searchers 16] [--uploaders 2]
                               [--model all-minilm-l6-v2] [--seed-docs 2000]

1. Seed: a fresh file store gets ``--seed-docs`` SciFact abstracts (``../shared/data/scifact``)
   through the library.
2. Library: the same load through ``KnowledgeBase`` in one process, ``--library-seconds``
   long: ``--searchers`` tasks searching (SciFact's queries; hybrid, vector and text in
   turn) and ``--uploaders`` tasks ingesting two new abstracts at a time. Also one caller
   alone (sequential), for reference.
3. Server: ``surrealdocs serve`` on loopback, and the same load over HTTP for ``--seconds``
   (and at most ``--max-requests``): searching clients call ``GET /v1/search``; uploading
   clients post two new abstracts as files (multipart), follow their job's events until it
   is done, and go again.
4. Check: the server stopped, the store is opened again; it must hold the seed, the
   library's documents and every uploaded file, each under its own source, nothing else;
   every ingest job done; the uploads folder empty.

Goal: no errors, nothing lost, search p95 over HTTP within 3x of the library's p95 under
the same load. Prints a summary and writes bench/results/serve_load.json. Run it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from surrealdocs import KnowledgeBase, Settings

ROOT = Path(__file__).resolve().parents[1]
MODES = ("hybrid", "vector", "text")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(pct(values, 0.50), 1),
            "p95_ms": round(pct(values, 0.95), 1), "p99_ms": round(pct(values, 0.99), 1),
            "max_ms": round(max(values), 1) if values else float("nan")}


def find_corpus(given: str | None) -> Path:
    candidates = [Path(given)] if given else [
        ROOT.parent / "shared" / "data" / "scifact",
        ROOT.parent.parent / "shared" / "data" / "scifact"]
    for path in candidates:
        if (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file():
            return path
    sys.exit(f"no SciFact corpus in {', '.join(map(str, candidates))}: give --corpus DIR")


@dataclass
class Load:
    """What the clients of one phase did."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    uploaded: list[str] = field(default_factory=list)  # sources stored
    started: float = 0.0
    seconds: float = 0.0

    def error(self, message: str) -> None:
        self.errors.append(message[:300])


class Abstracts:
    """SciFact abstracts not yet used, handed out two at a time."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs
        self.next = 0

    def take(self, n: int) -> list[dict[str, Any]]:
        out = self.docs[self.next:self.next + n]
        self.next += n
        return out


def text_of(doc: dict[str, Any], tag: str = "") -> str:
    """An abstract as a document; ``tag`` makes its text (so its document) unique."""
    return f"{doc['title']}\n\n{doc['text']}\n" + (f"\n({tag})\n" if tag else "")


# ----- the library phase -------------------------------------------------------------------
async def library_phase(settings: Settings, queries: list[str], pool: Abstracts,
                        args: argparse.Namespace) -> tuple[Load, list[float]]:
    load = Load()
    async with await KnowledgeBase.open(settings=settings) as kb:
        for q in queries[:5]:
            await kb.search(q)
        alone = []
        for i, q in enumerate(queries[:90]):
            t0 = time.perf_counter()
            await kb.search(q, mode=MODES[i % 3], limit=10)
            alone.append((time.perf_counter() - t0) * 1000)
        deadline = time.monotonic() + args.library_seconds
        load.started = time.monotonic()

        async def searcher(n: int) -> None:
            rng = random.Random(n)
            i = n
            while time.monotonic() < deadline:
                q, mode = rng.choice(queries), MODES[i % 3]
                i += 1
                t0 = time.perf_counter()
                try:
                    await kb.search(q, mode=mode, limit=10)
                except Exception as exc:
                    load.error(f"library search: {exc!r}")
                    continue
                load.latencies["search"].append((time.perf_counter() - t0) * 1000)
                load.latencies[f"search_{mode}"].append((time.perf_counter() - t0) * 1000)
                load.requests += 1

        async def ingester(n: int) -> None:
            k = 0
            while time.monotonic() < deadline:
                docs = pool.take(2)
                if not docs:
                    return
                texts = {f"lib://{args.run}/{n}-{k}-{d['_id']}.txt":
                         text_of(d, f"run {args.run}, library {n}-{k}") for d in docs}
                k += 1
                t0 = time.perf_counter()
                report = await kb.ingest_texts(texts)
                load.latencies["ingest"].append((time.perf_counter() - t0) * 1000)
                load.requests += 1
                for r in report.results:
                    if r.status == "ingested":
                        load.uploaded.append(r.source)
                    else:
                        load.error(f"library ingest {r.source}: {r.status} {r.reason}")

        await asyncio.gather(*[searcher(i) for i in range(args.searchers)],
                             *[ingester(i) for i in range(args.uploaders)])
        load.seconds = time.monotonic() - load.started
    return load, alone


# ----- the server phase --------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def server_phase(url: str, queries: list[str], pool: Abstracts,
                       args: argparse.Namespace) -> Load:
    load = Load()
    limits = httpx.Limits(max_connections=args.searchers + 2 * args.uploaders + 4)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        for q in queries[:5]:
            (await client.get("/v1/search", params={"query": q})).raise_for_status()
        for i, q in enumerate(queries[:90]):  # one client alone, as the library's was
            t0 = time.perf_counter()
            r = await client.get("/v1/search", params={"query": q, "mode": MODES[i % 3]})
            if r.status_code == 200:
                load.latencies["search_alone"].append((time.perf_counter() - t0) * 1000)
            else:
                load.error(f"search: {r.status_code} {r.text}")
        deadline = time.monotonic() + args.seconds
        load.started = time.monotonic()

        def more() -> bool:
            return time.monotonic() < deadline and load.requests < args.max_requests

        async def searcher(n: int) -> None:
            rng = random.Random(n)
            i = n
            while more():
                q, mode = rng.choice(queries), MODES[i % 3]
                i += 1
                t0 = time.perf_counter()
                try:
                    r = await client.get("/v1/search",
                                         params={"query": q, "mode": mode, "limit": 10})
                except httpx.HTTPError as exc:
                    load.error(f"search: {exc!r}")
                    continue
                load.requests += 1
                if r.status_code != 200:
                    load.error(f"search: {r.status_code} {r.text}")
                    continue
                ms = (time.perf_counter() - t0) * 1000
                load.latencies["search"].append(ms)
                load.latencies[f"search_{mode}"].append(ms)

        async def uploader(n: int) -> None:
            k = 0
            while more():
                docs = pool.take(2)
                if not docs:
                    return
                names = [f"load-{args.run}/{n}-{k}-{d['_id']}.txt" for d in docs]
                files = [("files", (name, text_of(d, f"run {args.run}, upload {n}-{k}")
                                    .encode(), "text/plain")) for name, d in zip(names, docs)]
                k += 1
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/uploads", files=files)
                    load.requests += 1
                    if r.status_code != 202:
                        load.error(f"upload: {r.status_code} {r.text}")
                        continue
                    load.latencies["upload"].append((time.perf_counter() - t0) * 1000)
                    job = await follow(client, r.json()["job"]["id"], load)
                except httpx.HTTPError as exc:
                    load.error(f"upload: {exc!r}")
                    continue
                load.latencies["upload_to_done"].append((time.perf_counter() - t0) * 1000)
                if job is None or job["status"] != "done":
                    load.error(f"job: {job}")
                    continue
                for result in job["result"]["results"]:
                    if result["status"] == "ingested":
                        load.uploaded.append(result["source"])
                    else:
                        load.error(f"upload {result['source']}: {result['status']}"
                                   f" {result.get('reason')}")

        await asyncio.gather(*[searcher(i) for i in range(args.searchers)],
                             *[uploader(i) for i in range(args.uploaders)])
        load.seconds = time.monotonic() - load.started
    return load


async def follow(client: httpx.AsyncClient, job_id: str, load: Load) -> dict[str, Any] | None:
    """The job's events until it ends; its last state."""
    last = None
    async with client.stream("GET", f"/v1/jobs/{job_id}/events") as r:
        load.requests += 1
        if r.status_code != 200:
            load.error(f"events: {r.status_code}")
            return None
        event = None
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "job":
                last = json.loads(line[6:])
    return last


def start_server(db: str, model: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - the process's log, closed with it
    return subprocess.Popen(
        [sys.executable, "-m", "surrealdocs", "serve", "--db", db, "--model", model,
         "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("the server exited before it was ready")
        try:
            if httpx.get(url + "/v1/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit("the server did not get ready")


# ----- the check -----------------------------------------------------------------------------
async def sources_of(kb: KnowledgeBase) -> set[str]:
    sources: set[str] = set()
    offset = 0
    while True:
        page = await kb.documents(offset=offset, limit=1000)
        if not page:
            return sources
        for doc in page:
            sources.update(doc.sources)
        offset += len(page)


async def check(settings: Settings, expected: set[str], seeded: set[str],
                uploads_dir: Path, jobs_before: int) -> dict[str, Any]:
    async with await KnowledgeBase.open(settings=settings) as kb:
        documents = await kb.count_documents()
        sources = await sources_of(kb)
        jobs = (await kb.jobs.list(kind="ingest"))[jobs_before:]
        statuses: dict[str, int] = defaultdict(int)
        for job in jobs:
            statuses[job.status] += 1
    want = expected | seeded
    leftovers = [p.name for p in uploads_dir.iterdir()] if uploads_dir.is_dir() else []
    return {"documents": documents, "expected_documents": len(want),
            "missing": sorted(want - sources)[:20], "unexpected": sorted(sources - want)[:20],
            "jobs": dict(statuses), "upload_folders_left": leftovers,
            "ok": documents == len(want) and sources == want and set(statuses) <= {"done"}
            and not leftovers}


# ----- main --------------------------------------------------------------------------------
async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--library-seconds", type=float, default=30.0)
    parser.add_argument("--searchers", type=int, default=16)
    parser.add_argument("--uploaders", type=int, default=2)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--seed-docs", type=int, default=2000)
    parser.add_argument("--corpus", default=None, help="a BEIR SciFact directory")
    parser.add_argument("--query-words", type=int, default=0,
                        help="cut each query to its first N words (0: whole SciFact claims)")
    parser.add_argument("--workdir", default=None,
                        help="where the store goes [a temp dir]; a store there from an"
                             " earlier run is reused (the seed is then unchanged)")
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "serve_load.json"))
    args = parser.parse_args()

    corpus = find_corpus(args.corpus)
    docs = [json.loads(line) for line in (corpus / "corpus.jsonl").open()]
    docs = [d for d in docs if d.get("text")]
    random.Random(1).shuffle(docs)
    queries = [json.loads(line)["text"] for line in (corpus / "queries.jsonl").open()]
    if args.query_words:
        queries = [" ".join(q.split()[:args.query_words]) for q in queries]
    args.run = time.strftime("%Y%m%d-%H%M%S")
    seed, rest = docs[:args.seed_docs], docs[args.seed_docs:]
    pool = Abstracts(rest)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="serve-load-"))
    work.mkdir(parents=True, exist_ok=True)
    db = str(work / "db")
    settings = Settings(db=db, model=args.model)
    print(f"store {db}, model {args.model}, corpus {corpus} ({len(docs)} abstracts,"
          f" {len(queries)} queries)", flush=True)

    t0 = time.perf_counter()
    async with await KnowledgeBase.open(settings=settings) as kb:
        await kb.ingest_texts({f"seed://{d['_id']}": text_of(d) for d in seed})
        stats = await kb.stats()
        seeded = await sources_of(kb)  # the seed, and what earlier runs left
        jobs_before = len(await kb.jobs.list(kind="ingest"))
    print(f"store holds {stats.documents} documents, {stats.chunks} chunks (seeded in"
          f" {time.perf_counter() - t0:.0f} s)", flush=True)

    load_before = round(os.getloadavg()[0], 2)  # others' work on the machine
    library, alone = await library_phase(settings, queries, pool, args)
    print(f"library: {library.requests} calls in {library.seconds:.0f} s, search p95"
          f" {pct(library.latencies['search'], 0.95):.0f} ms (alone:"
          f" {pct(alone, 0.95):.0f} ms), {len(library.errors)} errors", flush=True)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = work / "serve.log"
    proc = start_server(db, args.model, port, log)
    try:
        wait_ready(url, proc)
        server = await server_phase(url, queries, pool, args)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
    print(f"server: {server.requests} requests in {server.seconds:.0f} s,"
          f" {len(server.errors)} errors; stopped with exit code {code}", flush=True)

    checked = await check(settings, set(library.uploaded) | set(server.uploaded), seeded,
                          work / "db.uploads", jobs_before)
    lib_p95 = pct(library.latencies["search"], 0.95)
    http_p95 = pct(server.latencies["search"], 0.95)
    result = {
        "command": "python bench/serve_load.py " + " ".join(sys.argv[1:]),
        "model": args.model, "cpus": os.cpu_count(), "load_average_before": load_before,
        "store_documents": stats.documents, "store_chunks": stats.chunks,
        "query_words": args.query_words or "all", "searchers": args.searchers,
        "uploaders": args.uploaders,
        "server": {
            "seconds": round(server.seconds, 1), "requests": server.requests,
            "requests_per_s": round(server.requests / server.seconds, 1),
            "searches_per_s": round(len(server.latencies["search"]) / server.seconds, 1),
            "files_uploaded": len(server.uploaded), "errors": len(server.errors),
            "error_samples": server.errors[:5], "exit_code": code,
            **{k: summary(v) for k, v in sorted(server.latencies.items())}},
        "library": {
            "seconds": round(library.seconds, 1), "calls": library.requests,
            "searches_per_s": round(len(library.latencies["search"]) / library.seconds, 1),
            "documents_ingested": len(library.uploaded), "errors": len(library.errors),
            "error_samples": library.errors[:5], "search_alone": summary(alone),
            **{k: summary(v) for k, v in sorted(library.latencies.items())}},
        "search_p95_ratio_http_to_library": round(http_p95 / lib_p95, 2),
        "check": checked,
    }
    result["goal_met"] = (not server.errors and not library.errors and checked["ok"]
                          and http_p95 <= 3 * lib_p95)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


def markdown(r: dict[str, Any]) -> str:
    """The figures as the table of BENCHMARKS.md."""
    s, lib = r["server"], r["library"]

    def row(name: str, part: dict[str, Any], key: str, extra: str) -> str:
        m = part.get(key) or {}
        return (f"| {name} | {m.get('n', 0)} | {m.get('p50_ms')} | {m.get('p95_ms')} |"
                f" {m.get('p99_ms')} | {extra} |")

    c = r["check"]
    return "\n".join([
        "| search latency (ms) | searches | p50 | p95 | p99 | |",
        "|---|---|---|---|---|---|",
        row("HTTP, 16 clients + 2 uploading", s, "search",
            f"{s['searches_per_s']} searches/s, {s['requests_per_s']} requests/s,"
            f" {s['errors']} errors"),
        *[row(f"&nbsp;&nbsp;{m}", s, f"search_{m}", "") for m in MODES],
        row("library, 16 tasks + 2 ingesting", lib, "search",
            f"{lib['searches_per_s']} searches/s, {lib['errors']} errors"),
        *[row(f"&nbsp;&nbsp;{m}", lib, f"search_{m}", "") for m in MODES],
        row("HTTP, one client alone", s, "search_alone", ""),
        row("library, one caller alone", lib, "search_alone", ""),
        row("upload request (2 files) → 202", s, "upload", f"{s['files_uploaded']} files"),
        row("upload → job done", s, "upload_to_done", ""),
        "",
        f"Search p95 over HTTP / library under the same load:"
        f" **{r['search_p95_ratio_http_to_library']}**. Store after the run:"
        f" {c['documents']} documents, {c['expected_documents']} expected, missing"
        f" {len(c['missing'])}, unexpected {len(c['unexpected'])}; ingest jobs {c['jobs']};"
        f" upload folders left {len(c['upload_folders_left'])}. Goal met: {r['goal_met']}.",
    ])


if __name__ == "__main__":
    asyncio.run(main())
