"""Refresh of 1,000 unchanged web pages: a loopback server answers each with 304.

    python bench/refresh_speed.py [--pages 1000] [--runs 3] [--workdir DIR]

A loopback HTTP server holds ``--pages`` small article pages, each with an ETag. They are
ingested once (``hashing-384`` vectors: the refresh embeds nothing), then ``surrealdocs
refresh --no-robots`` is run as a user runs it (a process of its own: the store opened,
every page asked with its ETag, 304s recorded), ``--runs`` times; and ``kb.refresh()`` in
this process, the store already open. The goal: the whole command under 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from common import ROOT, log
from surrealdocs import KnowledgeBase, Settings

PAGE = ("<html><head><title>Page {n}</title></head><body><nav>Home | About</nav><main>"
        "<article><h1>Page {n}</h1><p>This is page number {n} of the test site; it tells of"
        " herons, egrets and storks in the marsh, and of the fish they take.</p><p>Another"
        " paragraph for page {n}, so that the extractor sees an article here.</p></article>"
        "</main><footer>Copyright</footer></body></html>")


def serve(pages: int) -> tuple[ThreadingHTTPServer, str, list[int]]:
    asked = [0, 0]  # 200s, 304s

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            n = self.path.strip("/").removeprefix("p")
            if not n.isdigit() or int(n) >= pages:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            etag = f'"p{n}"'
            if self.headers.get("If-None-Match") == etag:
                asked[1] += 1
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            asked[0] += 1
            body = PAGE.format(n=n).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", asked


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/refresh-bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = str(args.workdir / f"store-{args.pages}-{os.getpid()}")
    server, base, asked = serve(args.pages)
    settings = Settings.from_env(db=db, model="hashing-384")
    urls = [f"{base}/p{n}" for n in range(args.pages)]
    async with await KnowledgeBase.open(settings=settings) as kb:
        started = time.perf_counter()
        report = await kb.ingest_urls(urls, obey_robots=False)
        log(f"ingest of {args.pages} pages: {time.perf_counter() - started:.1f} s,"
            f" {report.counts}")
    command = [sys.executable, "-m", "surrealdocs", "refresh", "--no-robots", "--json",
               "--db", db, "--model", "hashing-384"]
    seconds = []
    for _ in range(args.runs):
        started = time.perf_counter()
        out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
        seconds.append(time.perf_counter() - started)
        counts = json.loads(out.stdout)["counts"]
        log(f"surrealdocs refresh: {seconds[-1]:.2f} s, {counts}")
    async with await KnowledgeBase.open(settings=settings) as kb:
        started = time.perf_counter()
        report = await kb.refresh(obey_robots=False)
        inside = time.perf_counter() - started
    log(f"kb.refresh() in an open store: {inside:.2f} s, {report.counts}")
    log(json.dumps({"pages": args.pages, "command_median_s": round(statistics.median(seconds), 2),
                    "command_runs_s": [round(s, 2) for s in seconds],
                    "library_s": round(inside, 2), "answered_200": asked[0],
                    "answered_304": asked[1]}))
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
