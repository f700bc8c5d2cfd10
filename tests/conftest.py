from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from surrealdocs import KnowledgeBase, Settings
from surrealdocs.embed import get_embedder
from surrealdocs.parts.results import Hit, id_text

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
# How long a test waits for something that should happen (a job to end, a server to be
# ready, a watcher to notice a change): a bound, never a pause. Generous, since CI's
# 2-core machine may be busy with other work; a healthy run never comes near it.
PATIENCE = 180.0
SHARED_DOCS = ROOT.parent / "shared" / "data" / "documents"

_exit_status: int | None = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    # The embedded engine's runtime can abort while the interpreter tears down (after every
    # test has passed and every store is closed). Leave with pytest's own status instead.
    if _exit_status is not None and os.environ.get("SURREALDOCS_TEST_HARD_EXIT", "1") == "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status)


# what a developer's shell may hold that would send a test elsewhere (SURREALDOCS_SERVER
# sends the CLI to a server; a model or a provider's address changes every search)
_ISOLATED = ("SURREALDOCS_", "OPENAI_", "OLLAMA_HOST")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without the surrealdocs and provider variables of the shell that
    runs it (but the test suite's own ``SURREALDOCS_TEST_*``)."""
    for name in list(os.environ):
        if name.startswith(_ISOLATED) and not name.startswith("SURREALDOCS_TEST_"):
            monkeypatch.delenv(name)


def shared_docs() -> Path:
    if not SHARED_DOCS.is_dir():
        pytest.skip("../shared/data/documents is not present")
    return SHARED_DOCS


@pytest.fixture
def settings() -> Settings:
    return Settings(db="mem://", model="hashing-64")


@pytest_asyncio.fixture
async def kb(settings: Settings) -> AsyncIterator[KnowledgeBase]:
    """A knowledge base in memory with the fast hashing embedder."""
    base = await KnowledgeBase.open(settings=settings)
    try:
        yield base
    finally:
        await base.close()


StoreFactory = Callable[..., Awaitable[KnowledgeBase]]


@pytest_asyncio.fixture
async def open_kb() -> AsyncIterator[StoreFactory]:
    """Opens knowledge bases for a test, each closed after it: ``await open_kb(**settings)``
    (in memory, with the fast hashing embedder, unless the settings say otherwise)."""
    opened: list[KnowledgeBase] = []

    async def factory(**overrides: Any) -> KnowledgeBase:
        base = await KnowledgeBase.open(settings=Settings(
            **{"db": "mem://", "model": "hashing-64", **overrides}))
        opened.append(base)
        return base

    try:
        yield factory
    finally:
        for base in reversed(opened):
            await base.close()


@pytest_asyncio.fixture
async def kb_minilm() -> AsyncIterator[KnowledgeBase]:
    """A knowledge base in memory with the real default model."""
    base = await KnowledgeBase.open(settings=Settings(db="mem://"),
                                    embedder=get_embedder("all-minilm-l6-v2"))
    try:
        yield base
    finally:
        await base.close()


async def assert_hits_name_their_documents(kb: KnowledgeBase, hits: list[Hit]) -> None:
    """Each hit names the document its chunk belongs to now (the legs learn it from the
    text index, which must follow chunks moved into a new version of their source)."""
    from surrealdocs.store.documents import record_id
    chunks = kb.storage.chunks.table
    (rows,) = await kb.store.query(
        "SELECT VALUE [id, document] FROM $ids;",
        {"ids": [record_id(h.chunk_id, chunks) for h in hits]})
    actual = {id_text(i): id_text(d) for i, d in rows or []}
    assert {h.chunk_id: h.document_id for h in hits} == actual


async def assert_text_index_matches_chunks(kb: KnowledgeBase) -> None:
    """The store's text index holds exactly what one rebuilt from its chunks would: every
    chunk row findable by text with its terms, and nothing else (no deleted chunk)."""
    text = kb.storage.chunks.text
    assert text is not None
    live, expected = await text.live_postings(), await text.expected_postings()
    assert live.keys() == expected.keys(), (
        f"in the index only: {sorted(live.keys() - expected.keys())[:5]},"
        f" in the chunks only: {sorted(expected.keys() - live.keys())[:5]}")
    assert live == expected
    assert (await text.stats())["chunks"] == len(expected)
    if text.vector_table is not None:  # and its segments carry every chunk's vector
        chunk = "chunk" if text.vector_table != text.chunks_table else "id"
        (rows,) = await kb.store.query(
            f"SELECT VALUE [record::id({chunk}), embedding] FROM {text.vector_table}"
            " WHERE embedding != NONE;")
        stored = {str(k): v for k, v in rows or [] if str(k) in expected}
        held = await text.live_vectors()
        assert held.keys() == stored.keys()
        for key, vector in stored.items():  # int8 codes: within half a step of the row
            step = max(abs(x) for x in vector) / 127
            assert held[key] == pytest.approx(vector, abs=step / 2 * 1.001 + 1e-9), key
