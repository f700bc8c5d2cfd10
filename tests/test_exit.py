"""A library process that opens a store, searches and exits, exits cleanly, twenty times
over. A process that did this on a 6.7k-chunk MiniLM store aborted at exit (SIGABRT, a
panic on one of the engine's threads) in 3 of 80 runs, because the engine object was freed
during interpreter shutdown; the second test checks that close() frees it at once. This
small store did not reproduce the abort, so the first test guards against frequent aborts
only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.errors import StoreError

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

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


async def test_close_lets_the_engine_go_at_once(tmp_path: Path) -> None:
    """The engine object is freed by ``close()``, not left to the cycle collector: a
    KnowledgeBase sits in reference cycles, so after ``asyncio.run`` it lived on until
    interpreter shutdown, when its threads' teardown could abort the process."""
    import gc
    import weakref

    gc.disable()  # as at interpreter shutdown: only reference counts free anything
    try:
        kb = await KnowledgeBase.open(settings=Settings(db=str(tmp_path / "kb"),
                                                        model="hashing-64"))
        await kb.ingest_texts({"note://1": "herons wade in shallow water"})
        assert await kb.search("herons", limit=1)
        client = weakref.ref(kb.store.client)
        await kb.close()
        await kb.close()  # twice is fine
        assert client() is None
        with pytest.raises(StoreError, match="closed"):
            await kb.search("herons", mode="text")
    finally:
        gc.enable()


async def test_a_reopen_on_a_full_disk_says_so(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine reopened on a full disk answered "already locked by another process":
    the store says the disk is full (or, with room left, that this process could not
    reopen it), never that another process holds it."""
    import shutil
    from collections import namedtuple

    from surrealdb import SurrealError

    from surrealdocs.store import connection

    kb = await KnowledgeBase.open(settings=Settings(db=str(tmp_path / "kb"),
                                                    model="hashing-64"))
    try:
        real_connect = kb.store.client.connect

        async def locked(*args: object) -> None:
            raise SurrealError("Database is already locked by another process")

        monkeypatch.setattr(kb.store.client, "connect", locked)
        usage = namedtuple("usage", "total used free")
        for free, expected in ((1000, "the disk that holds it is full (1,000 bytes free)"),
                               (10**12, "cannot reopen the store")):
            monkeypatch.setattr(shutil, "disk_usage", lambda _p, f=free: usage(1, 1, f))
            with pytest.raises(StoreError) as caught:
                await kb.store.refresh_engine()
            assert expected in str(caught.value)
            assert "another process has" not in str(caught.value)
        monkeypatch.setattr(kb.store.client, "connect", real_connect)
        assert connection.LOW_DISK_BYTES > 1000
        await kb.store.refresh_engine()
        assert await kb.stats()
    finally:
        await kb.close()
