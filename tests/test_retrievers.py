"""The LangChain and LlamaIndex retrievers, through the frameworks' own entry points
(``invoke``/``ainvoke``/``batch``, ``retrieve``/``aretrieve``), against a real embedded file
store: from plain sync code, from async code, and from sync code inside a running loop."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SAMPLES
from surrealdocs import (
    ConfigurationError,
    KnowledgeBase,
    NotFoundError,
    Settings,
    SyncKnowledgeBase,
)
from surrealdocs.integrations.common import KnowledgeBaseRunner

CITATION = {"source", "title", "mime_type", "page", "last_page", "char_start", "char_end",
            "chunk_id", "chunk_index", "document_id", "score", "text_rank", "vector_rank",
            "text_score", "vector_score", "mode", "context", "similarity", "coverage",
            "rerank_score", "first_rank"}


def settings(db: Path) -> Settings:
    # the retrievers pass on what the search shows: every hit (the cut-off has its tests)
    return Settings(db=str(db), model="hashing-64", chunk_size=300, chunk_overlap=30,
                    relevance_cutoff=0)


async def prepare(db: Path, docs: Path) -> None:
    async with await KnowledgeBase.open(settings=settings(db)) as kb:
        assert (await kb.ingest([docs])).counts["ingested"] == 5
        nb = await kb.notebooks.create_notebook("Research")
        doc = await kb.document(str(docs / "bm25.txt"), text=False)
        await kb.notebooks.link(doc.id, nb)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A file store with the samples (bm25.txt in notebook Research), closed again."""
    db, docs = tmp_path / "kb", tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    asyncio.run(prepare(db, docs))
    return db


@pytest.fixture
def langchain() -> Any:
    return pytest.importorskip("surrealdocs.integrations.langchain")


@pytest.fixture
def llamaindex() -> Any:
    return pytest.importorskip("surrealdocs.integrations.llamaindex")


# ----- LangChain -------------------------------------------------------------------------
def check_documents(docs: list[Any], mode: str) -> None:
    from langchain_core.documents import Document

    assert docs and all(isinstance(d, Document) for d in docs)
    for doc in docs:
        meta = doc.metadata
        assert set(meta) == CITATION and meta["mode"] == mode
        assert doc.id == meta["chunk_id"] and doc.page_content
        assert meta["char_end"] - meta["char_start"] == len(doc.page_content)
        assert meta["document_id"].startswith("documents:")
    # the probability of relevance: 0-1, from the query and the chunk alone
    assert all(0.0 <= d.metadata["score"] <= 1.0 for d in docs)


def test_langchain_from_a_plain_script(store: Path, langchain: Any) -> None:
    """No event loop at all: the retriever opens the store on first use, on its own loop."""
    retriever = langchain.SurrealDocsRetriever(db=str(store), settings=settings(store),
                                               mode="text", limit=3)
    try:
        docs = retriever.invoke("BM25 ranking function")
        check_documents(docs, "text")
        assert len(docs) <= 3 and docs[0].metadata["source"].endswith("bm25.txt")
        assert docs[0].metadata["text_rank"] == 1
        pdf = retriever.invoke("quarterly revenue", config={"tags": ["t"]})
        assert any(d.metadata["page"] for d in pdf if d.metadata["source"].endswith(".pdf"))
        batches = retriever.batch(["BM25", "vectors", "quarterly"])  # from a thread pool
        assert len(batches) == 3 and all(batches)
        # The async path reaches the same private loop from another one.
        adocs = asyncio.run(retriever.ainvoke("BM25 ranking function"))
        assert [d.id for d in adocs] == [d.id for d in docs]
    finally:
        retriever.close()
    retriever.close()  # twice is harmless


async def test_langchain_async_on_the_kb_loop(store: Path, langchain: Any) -> None:
    async with await KnowledgeBase.open(settings=settings(store)) as kb:
        retriever = langchain.SurrealDocsRetriever(kb=kb, limit=4)
        docs = await retriever.ainvoke("how do vector indexes find neighbours")
        check_documents(docs, "hybrid")
        assert len(docs) == 4
        assert {"text_rank", "vector_rank"} <= set(docs[0].metadata)
        # Every search option goes through: a notebook, one hit per document, a source glob.
        scoped = await langchain.SurrealDocsRetriever(
            kb=kb, notebook="Research", per_document=True, mode="vector").ainvoke("ranking")
        assert len(scoped) == 1 and scoped[0].metadata["source"].endswith("bm25.txt")
        pdf = await langchain.SurrealDocsRetriever(
            kb=kb, source="*.pdf", mime_type="application/pdf").ainvoke("revenue")
        assert pdf and all(d.metadata["source"].endswith(".pdf") for d in pdf)
        # A blocking call from the loop the store lives on cannot wait for it: said clearly.
        with pytest.raises(ConfigurationError, match="ainvoke"):
            retriever.invoke("vectors")
        # ...but from another thread it is handed to that loop.
        docs_from_thread = await asyncio.to_thread(retriever.invoke, "vectors")
        check_documents(docs_from_thread, "hybrid")
        # The store's own errors come through as they are.
        with pytest.raises(ConfigurationError, match="mode"):
            await langchain.SurrealDocsRetriever(kb=kb, mode="fuzzy").ainvoke("x")
        with pytest.raises(ConfigurationError, match="empty"):
            await retriever.ainvoke("   ")
        retriever.close()  # a knowledge base it was given stays open
        assert await kb.search("vectors", limit=1)


async def test_langchain_sync_call_inside_a_running_loop(store: Path, langchain: Any) -> None:
    """Sync code called from a coroutine (a notebook cell, a sync callback): the retriever's
    own loop runs in its own thread, so the blocking call works."""
    retriever = langchain.SurrealDocsRetriever(settings=settings(store), mode="text", limit=2)
    try:
        docs = retriever.invoke("BM25")
        check_documents(docs, "text")
        assert [d.id for d in await retriever.ainvoke("BM25")] == [d.id for d in docs]
    finally:
        retriever.close()


def test_langchain_call_options_and_k(store: Path, langchain: Any) -> None:
    """LangChain's conventions: ``k`` sets the number of results in the constructor and in
    ``invoke``; any search option can be given per call; an unknown one is an error, never
    silently ignored."""
    retriever = langchain.SurrealDocsRetriever(settings=settings(store), k=2, mode="text")
    try:
        assert retriever.limit == 2 and len(retriever.invoke("BM25 ranking vectors")) == 2
        assert len(retriever.invoke("BM25 ranking vectors", k=1)) == 1
        assert len(retriever.invoke("BM25 ranking vectors", limit=3)) == 3
        hybrid = retriever.invoke("BM25 ranking vectors", mode="hybrid")
        check_documents(hybrid, "hybrid")
        assert retriever.invoke("BM25")[0].metadata["mode"] == "text"  # the call's own only
        adocs = asyncio.run(retriever.ainvoke("BM25 ranking vectors", k=1, per_document=True))
        assert len(adocs) == 1
        with pytest.raises(ConfigurationError, match="top_k"):
            retriever.invoke("BM25", top_k=3)
        with pytest.raises(ConfigurationError, match="k or limit"):
            retriever.invoke("BM25", k=1, limit=2)
    finally:
        retriever.close()


def test_langchain_retrievers_share_a_store(store: Path, langchain: Any) -> None:
    """An embedded store opens once per process. Retrievers made from the same store and
    settings share it (LangChain's standard tests make two and close neither); it closes
    with the last of them."""
    first = langchain.SurrealDocsRetriever(settings=settings(store), mode="text", k=1)
    second = langchain.SurrealDocsRetriever(settings=settings(store), mode="vector", k=2)
    assert len(first.invoke("BM25")) == 1 and len(second.invoke("BM25")) == 2
    first.close()
    assert len(second.invoke("vectors")) == 2  # still open for the other one
    second.close()
    with SyncKnowledgeBase(settings=settings(store)) as kb:  # the lock is released
        assert kb.search("BM25", limit=1)


def test_langchain_with_a_sync_knowledge_base(store: Path, langchain: Any) -> None:
    with SyncKnowledgeBase(settings=settings(store)) as kb:
        retriever = langchain.SurrealDocsRetriever(kb=kb, mode="text", limit=2)
        check_documents(retriever.invoke("BM25"), "text")

        async def from_a_loop() -> list[Any]:
            return [retriever.invoke("BM25"), await retriever.ainvoke("BM25")]

        sync_docs, async_docs = asyncio.run(from_a_loop())
        assert [d.id for d in sync_docs] == [d.id for d in async_docs]
        assert "password" not in repr(retriever)


def test_runner_refuses_what_it_cannot_do(store: Path) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        KnowledgeBaseRunner(object(), db="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="KnowledgeBase"):
        KnowledgeBaseRunner(object())  # type: ignore[arg-type]
    # A knowledge base whose loop ended with asyncio.run(): reopen it where it is used.
    kb = asyncio.run(KnowledgeBase.open(settings=settings(store)))
    runner = KnowledgeBaseRunner(kb)
    with pytest.raises(ConfigurationError, match="closed"):
        runner.call(lambda kb: kb.stats())
    asyncio.run(kb.close())


def test_runner_on_a_loop_in_another_thread(store: Path) -> None:
    """A knowledge base opened on a loop that runs in another thread (an app's loop)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        kb = asyncio.run_coroutine_threadsafe(
            KnowledgeBase.open(settings=settings(store)), loop).result()
        runner = KnowledgeBaseRunner(kb)
        assert runner.call(lambda kb: kb.count_documents()) == 5
        assert asyncio.run(runner.acall(lambda kb: kb.count_documents())) == 5
        asyncio.run_coroutine_threadsafe(kb.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


# ----- LlamaIndex ------------------------------------------------------------------------
def check_nodes(nodes: list[Any], mode: str) -> None:
    from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore

    assert nodes and all(isinstance(n, NodeWithScore) for n in nodes)
    for n in nodes:
        node, meta = n.node, n.node.metadata
        assert set(meta) == CITATION and meta["mode"] == mode
        assert n.score == meta["score"] and node.node_id == meta["chunk_id"]
        assert (node.start_char_idx, node.end_char_idx) == (meta["char_start"],
                                                            meta["char_end"])
        assert node.relationships[NodeRelationship.SOURCE].node_id == meta["document_id"]
        shown = node.get_content(metadata_mode=MetadataMode.LLM)
        assert meta["source"] in shown and meta["chunk_id"] not in shown
        assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()
    assert all(n.score is not None and 0.0 <= n.score <= 1.0 for n in nodes)


def test_llamaindex_from_a_plain_script(store: Path, llamaindex: Any) -> None:
    from llama_index.core.schema import QueryBundle

    retriever = llamaindex.SurrealDocsRetriever(settings=settings(store), mode="text",
                                                limit=3)
    try:
        nodes = retriever.retrieve("BM25 ranking function")
        check_nodes(nodes, "text")
        assert nodes[0].node.metadata["source"].endswith("bm25.txt") and len(nodes) <= 3
        bundled = retriever.retrieve(QueryBundle("BM25 ranking function"))
        assert [n.node.node_id for n in bundled] == [n.node.node_id for n in nodes]
        anodes = asyncio.run(retriever.aretrieve("BM25 ranking function"))
        assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]
        # LlamaIndex's own name for the number of results
        top2 = llamaindex.SurrealDocsRetriever(settings=settings(store), mode="text",
                                               similarity_top_k=2)
        try:
            assert top2.options.limit == 2 and len(top2.retrieve("BM25 ranking vectors")) == 2
        finally:
            top2.close()
        with pytest.raises(ConfigurationError, match="not both"):
            llamaindex.SurrealDocsRetriever(settings=settings(store), similarity_top_k=2,
                                            limit=3)
    finally:
        retriever.close()


async def test_llamaindex_async_and_options(store: Path, llamaindex: Any) -> None:
    async with await KnowledgeBase.open(settings=settings(store)) as kb:
        retriever = llamaindex.SurrealDocsRetriever(kb, limit=4, fusion="rrf")
        nodes = await retriever.aretrieve("how do vector indexes find neighbours")
        check_nodes(nodes, "hybrid")
        assert len(nodes) == 4
        scoped = await llamaindex.SurrealDocsRetriever(
            kb, notebook="Research", per_document=True).aretrieve("ranking")
        assert [n.node.metadata["source"].rsplit("/", 1)[-1] for n in scoped] == ["bm25.txt"]
        with pytest.raises(ConfigurationError, match="aretrieve"):
            retriever.retrieve("vectors")
        threaded = await asyncio.to_thread(retriever.retrieve, "vectors")
        check_nodes(threaded, "hybrid")
        with pytest.raises(NotFoundError, match="no notebook"):
            await llamaindex.SurrealDocsRetriever(kb, notebook="Nope").aretrieve("x")
    with pytest.raises(ConfigurationError, match="unknown search option"):
        llamaindex.SurrealDocsRetriever(kb, k=3)


async def test_llamaindex_sync_call_inside_a_running_loop(store: Path,
                                                          llamaindex: Any) -> None:
    retriever = llamaindex.SurrealDocsRetriever(db=str(store), settings=settings(store),
                                                mode="vector", limit=2)
    try:
        check_nodes(retriever.retrieve("neighbours in vector space"), "vector")
    finally:
        retriever.close()


@pytest.fixture(autouse=True)
def _no_thread_left() -> Iterator[None]:
    """Retrievers that open a store close it, and its loop thread ends."""
    before = set(threading.enumerate())
    yield
    extra = [t for t in threading.enumerate() if t not in before and t.is_alive()
             and "run_forever" in t.name]
    assert not extra, extra


def test_what_an_llm_reads_has_no_none(store: Path, llamaindex: Any, langchain: Any) -> None:
    """The retriever examples printed None titles and put "title: None" and "context: None"
    lines into the text an LLM reads; a title falls back to the file name."""
    from llama_index.core.schema import MetadataMode

    retriever = llamaindex.SurrealDocsRetriever(settings=settings(store), mode="text", limit=5)
    try:
        nodes = retriever.retrieve("BM25 ranking function")
        assert nodes
        for n in nodes:
            assert n.node.metadata["title"], n.node.metadata
            assert "None" not in n.node.get_content(metadata_mode=MetadataMode.LLM)
    finally:
        retriever.close()
    lc = langchain.SurrealDocsRetriever(settings=settings(store), mode="text", limit=5)
    try:
        docs = lc.invoke("BM25 ranking function")
        assert docs and all(d.metadata["title"] for d in docs)
        assert any(d.metadata["title"] == Path(d.metadata["source"]).name for d in docs)
    finally:
        lc.close()
