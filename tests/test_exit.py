"""A library process that opens a store, searches and exits, exits cleanly, twenty times
over. A process that did this on a 6.7k-chunk MiniLM store aborted at exit (SIGABRT, a
panic on one of the engine's threads) in about one run in twenty; this small store has not
reproduced it, so this test guards against frequent aborts only (see issue 32's note)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from surrealdocs import KnowledgeBase, Settings

SCRIPT = """
import asyncio, sys
from surrealdocs import KnowledgeBase, Settings

async def main():
    settings = Settings(db=sys.argv[1], model="hashing-64")
    async with await KnowledgeBase.open(settings=settings) as kb:
        hits = await kb.search(sys.argv[2], limit=5)
        print(len(hits))

asyncio.run(main())
"""

WORDS = ("heron egret bittern stork ibis crane rail coot grebe loon cormorant pelican gannet "
         "shag tern gull skua auk puffin petrel albatross shearwater fulmar kittiwake").split()


async def test_open_search_exit_twenty_times(tmp_path: Path) -> None:
    db = str(tmp_path / "kb")
    texts = {f"note://{i}": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(400))
             for i in range(600)}
    async with await KnowledgeBase.open(settings=Settings(db=db, model="hashing-64")) as kb:
        await kb.ingest_texts(texts)
    failures = []
    for i in range(20):
        query = f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5 + 3) % len(WORDS)]} nests"
        done = subprocess.run([sys.executable, "-c", SCRIPT, db, query], capture_output=True,
                              text=True, timeout=300)
        if done.returncode != 0 or done.stdout.strip() != "5":
            failures.append((done.returncode, done.stdout[-200:], done.stderr[-800:]))
    assert not failures, failures
