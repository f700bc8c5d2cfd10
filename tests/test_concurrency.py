"""Many tasks on one knowledge base: writers ingesting (new texts, new versions of the same
sources, texts another writer also holds) while readers search. Nothing is lost: every
result said "ingested" is there, counts are exact, no chunk is an orphan, no source points
at a missing document. Embedded, and on the remote path (through the RPC test fixture)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from conftest import assert_text_index_matches_chunks
from surrealdocs import KnowledgeBase, Settings

pytestmark = pytest.mark.slow  # subprocesses, servers or real corpora: -m 'not slow' skips

pytest_plugins = ["remote_engine"]

WRITERS, READERS = 4, 4
SECONDS = 6.0  # writers stop starting new batches after this


def text_of(writer: int, n: int, version: int) -> str:
    words = " ".join(f"w{writer}n{n}v{version}t{k}" for k in range(30))
    return f"Writer {writer} note {n} version {version}. " + (words + ". ") * 20


async def writer(kb: KnowledgeBase, w: int, deadline: float,
                 expected: dict[str, str]) -> int:
    rng = random.Random(w)
    batches = 0
    n = 0
    while time.monotonic() < deadline or batches < 3:
        batch: dict[str, str] = {}
        for _ in range(5):
            n += 1
            batch[f"w{w}://note{n}"] = text_of(w, n, 0)
        if expected and rng.random() < 0.5:  # a new version of one of this writer's notes
            mine = [s for s in expected if s.startswith(f"w{w}://note")]
            if mine:
                source = rng.choice(mine)
                batch[source] = text_of(w, int(source.rsplit("note", 1)[1]), batches + 1)
        batch[f"w{w}://shared{batches}"] = "A text every writer holds. " * 40  # duplicates
        report = await kb.ingest_texts(batch)
        for r in report.results:
            assert r.status in ("ingested", "updated", "duplicate", "unchanged"), r
        expected.update(batch)
        batches += 1
    return batches


async def reader(kb: KnowledgeBase, r: int, deadline: float) -> int:
    searches = 0
    modes = ("text", "vector", "hybrid")
    while time.monotonic() < deadline:
        hits = await kb.search(f"writer note version t{searches % 30}", mode=modes[r % 3],
                               limit=5)
        assert len({h.chunk_id for h in hits}) == len(hits)
        searches += 1
    return searches


async def run_and_check(kb: KnowledgeBase) -> None:
    expected: dict[str, str] = {}
    deadline = time.monotonic() + SECONDS
    done = await asyncio.gather(
        *(writer(kb, w, deadline, expected) for w in range(WRITERS)),
        *(reader(kb, r, deadline) for r in range(READERS)))
    assert all(n >= 3 for n in done[:WRITERS])
    assert all(n >= 1 for n in done[WRITERS:])
    # every source points at a complete document holding exactly its latest text
    documents = {await _content_of(kb, s): s for s in expected}
    distinct = set(expected.values())
    assert len(documents) == len(distinct)
    stats = await kb.stats()
    assert stats.documents == len(distinct)
    (orphans, incomplete, dangling, chunks) = await kb.store.query(
        "SELECT VALUE id FROM chunks WHERE document.id = NONE;"
        " SELECT VALUE id FROM documents WHERE complete = false;"
        " SELECT VALUE id FROM files WHERE document != NONE AND document.id = NONE;"
        " SELECT count() AS n FROM chunks GROUP ALL;")
    assert orphans == [] and incomplete == [] and dangling == []
    (per_doc,) = await kb.store.query("SELECT math::sum(chunk_count) AS n FROM documents"
                                      " GROUP ALL;")
    assert chunks[0]["n"] == per_doc[0]["n"]
    await assert_text_index_matches_chunks(kb)  # every committed chunk, no deleted one
    # and a re-run of everything is unchanged: nothing to repair
    again = await kb.ingest_texts(expected)
    assert again.counts["unchanged"] == len(expected), again.counts


async def _content_of(kb: KnowledgeBase, source: str) -> Any:
    doc = await kb.document(source)
    return doc.content


async def test_writers_and_readers_embedded(tmp_path: Any) -> None:
    settings = Settings(db=str(tmp_path / "kb"), model="hashing-64", chunk_size=200,
                        chunk_overlap=20, rebuild_threshold=300)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await run_and_check(kb)


async def test_writers_and_readers_remote(remote_engine: Any) -> None:
    settings = remote_engine.settings("ws", chunk_size=200, chunk_overlap=20,
                                      rebuild_threshold=300)
    async with await KnowledgeBase.open(settings=settings) as kb:
        await run_and_check(kb)
